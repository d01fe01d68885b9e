#include "sim/units.h"

#include <doctest/doctest.h>
#include <functional>
#include <type_traits>

using namespace trainsim::sim;

TEST_CASE("sim/Duration: integer picoseconds with rounding conversions") {
  CHECK(Duration::from_ns(3).ps() == 3000);
  CHECK(Duration::from_seconds(1.5e-12).ps() == 2);  // round to nearest
  CHECK(Duration::from_seconds(1e-6).ps() == 1000000);
  CHECK((Duration::from_us(2) + Duration::from_ns(500)).ps() == 2500000);
  CHECK(Duration::from_us(3) / Duration::from_us(2) == doctest::Approx(1.5));
  CHECK(Duration::from_seconds(1e30) == Duration::max());
}

TEST_CASE("sim/TimePoint: differences are durations") {
  const TimePoint t0 = TimePoint::zero();
  const TimePoint t1 = t0 + Duration::from_us(5);
  CHECK((t1 - t0) == Duration::from_us(5));
  CHECK(t1 > t0);
}

TEST_CASE("sim/units: only physical arithmetic compiles") {
  // Adding bytes to durations, or multiplying two durations, makes no sense.
  static_assert(!std::is_invocable_v<std::plus<>, Duration, Bytes>);
  static_assert(!std::is_invocable_v<std::multiplies<>, Duration, Duration>);
  static_assert(!std::is_invocable_v<std::plus<>, TimePoint, TimePoint>);
  static_assert(!std::is_constructible_v<Duration, double>);
  CHECK(transfer_time(Bytes(1000000000), Bandwidth::gb_per_s(100)) == Duration::from_us(10000));
  CHECK(compute_time(Flops(1e12), FlopRate::tflops(1)).seconds() == doctest::Approx(1.0));
}
