#pragma once
// Strong physical unit types. Simulated time is an integer number of picoseconds; sizes are
// integer bytes; work and rates are doubles (cluster-wide FLOP totals exceed 2^63). Only the
// arithmetic that makes physical sense compiles; cross-unit conversions are named functions.

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace trainsim::sim {

// A span of simulated time, in picoseconds.
class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ps(std::int64_t ps) { return Duration(ps); }
  static constexpr Duration from_ns(std::int64_t ns) { return Duration(ns * 1000); }
  static constexpr Duration from_us(std::int64_t us) { return Duration(us * 1000000); }
  // The one place where a double becomes simulated time: rounds to the nearest picosecond and
  // saturates (a non-finite or absurdly long duration becomes max()).
  static Duration from_seconds(double s) {
    const double ps = s * 1e12;
    if (!(ps < 9.0e18)) return max();
    if (!(ps > -9.0e18)) return Duration(-max().ps_);
    return Duration(static_cast<std::int64_t>(std::llround(ps)));
  }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<std::int64_t>::max() / 4); }

  constexpr std::int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double microseconds() const { return static_cast<double>(ps_) * 1e-6; }

  constexpr Duration operator+(Duration o) const { return Duration(ps_ + o.ps_); }
  constexpr Duration operator-(Duration o) const { return Duration(ps_ - o.ps_); }
  constexpr Duration& operator+=(Duration o) {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Duration& operator-=(Duration o) {
    ps_ -= o.ps_;
    return *this;
  }
  constexpr Duration operator*(std::int64_t k) const { return Duration(ps_ * k); }
  constexpr Duration operator/(std::int64_t k) const { return Duration(ps_ / k); }
  // Ratio of two durations (dimensionless).
  constexpr double operator/(Duration o) const {
    return static_cast<double>(ps_) / static_cast<double>(o.ps_);
  }
  // Scales by a dimensionless factor, rounding to the nearest picosecond.
  Duration scaled(double factor) const { return from_seconds(seconds() * factor); }
  constexpr auto operator<=>(const Duration&) const = default;

 private:
  constexpr explicit Duration(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

// A point on the simulated clock; the simulation starts at zero.
class TimePoint {
 public:
  constexpr TimePoint() = default;
  static constexpr TimePoint zero() { return TimePoint(); }
  static constexpr TimePoint from_ps(std::int64_t ps) { return TimePoint(Duration::from_ps(ps)); }
  constexpr std::int64_t ps() const { return since_start_.ps(); }
  constexpr Duration since_start() const { return since_start_; }
  constexpr double seconds() const { return since_start_.seconds(); }
  constexpr TimePoint operator+(Duration d) const { return TimePoint(since_start_ + d); }
  constexpr Duration operator-(TimePoint o) const { return since_start_ - o.since_start_; }
  constexpr auto operator<=>(const TimePoint&) const = default;

 private:
  constexpr explicit TimePoint(Duration d) : since_start_(d) {}
  Duration since_start_;
};

// A number of bytes (memory footprint or bytes moved).
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::int64_t n) : n_(n) {}
  constexpr std::int64_t count() const { return n_; }
  constexpr double as_double() const { return static_cast<double>(n_); }
  constexpr Bytes operator+(Bytes o) const { return Bytes(n_ + o.n_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(n_ - o.n_); }
  constexpr Bytes& operator+=(Bytes o) {
    n_ += o.n_;
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    n_ -= o.n_;
    return *this;
  }
  constexpr Bytes operator*(std::int64_t k) const { return Bytes(n_ * k); }
  constexpr Bytes operator/(std::int64_t k) const { return Bytes(n_ / k); }
  constexpr auto operator<=>(const Bytes&) const = default;

 private:
  std::int64_t n_ = 0;
};

// Floating-point operations (a count of work, not a rate).
class Flops {
 public:
  constexpr Flops() = default;
  constexpr explicit Flops(double n) : n_(n) {}
  constexpr double count() const { return n_; }
  constexpr Flops operator+(Flops o) const { return Flops(n_ + o.n_); }
  constexpr Flops& operator+=(Flops o) {
    n_ += o.n_;
    return *this;
  }
  constexpr Flops operator*(double k) const { return Flops(n_ * k); }
  constexpr auto operator<=>(const Flops&) const = default;

 private:
  double n_ = 0;
};

// Bytes per second.
class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth bytes_per_s(double v) { return Bandwidth(v); }
  static constexpr Bandwidth gb_per_s(double v) { return Bandwidth(v * 1e9); }  // GB = 1e9 B
  static constexpr Bandwidth gbit_per_s(double v) { return Bandwidth(v * 1e9 / 8); }
  constexpr double bytes_per_second() const { return v_; }
  constexpr double gbps() const { return v_ * 1e-9; }
  constexpr Bandwidth operator*(double k) const { return Bandwidth(v_ * k); }
  constexpr Bandwidth operator+(Bandwidth o) const { return Bandwidth(v_ + o.v_); }
  constexpr auto operator<=>(const Bandwidth&) const = default;

 private:
  constexpr explicit Bandwidth(double v) : v_(v) {}
  double v_ = 0;
};

// Floating-point operations per second.
class FlopRate {
 public:
  constexpr FlopRate() = default;
  static constexpr FlopRate per_second(double v) { return FlopRate(v); }
  static constexpr FlopRate tflops(double v) { return FlopRate(v * 1e12); }
  constexpr double per_second() const { return v_; }
  constexpr double as_tflops() const { return v_ * 1e-12; }
  constexpr FlopRate operator*(double k) const { return FlopRate(v_ * k); }
  constexpr auto operator<=>(const FlopRate&) const = default;

 private:
  constexpr explicit FlopRate(double v) : v_(v) {}
  double v_ = 0;
};

// Time to move `b` at rate `bw` (rounded to the nearest picosecond).
inline Duration transfer_time(Bytes b, Bandwidth bw) {
  return Duration::from_seconds(b.as_double() / bw.bytes_per_second());
}
// Time to execute `f` at rate `r`.
inline Duration compute_time(Flops f, FlopRate r) {
  return Duration::from_seconds(f.count() / r.per_second());
}

}  // namespace trainsim::sim
