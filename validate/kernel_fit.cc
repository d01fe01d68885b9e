#include "validate/kernel_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include <Eigen/Dense>

#include "validate/least_squares.h"

#include "topologies/compute_model.h"

namespace trainsim::validate {

namespace {

using sim::DataType;

std::string shape_label(const GemmPoint& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s b%lld m%lld n%lld k%lld (%s)", p.column.c_str(), static_cast<long long>(p.b),
                static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k), p.table.c_str());
  return buf;
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * v);
  return buf;
}

// One row of the linear system for a GEMM point: time = waves * tile_flops / (peak / SMs) * u
// + waves * w + l (+ memory time when it dominates), divided by the measured time.
struct GemmRow {
  double compute_coef = 0;  // multiplies u = 1 / max_efficiency
  double waves = 0;         // multiplies the wave overhead
  double memory = 0;        // seconds, when the memory roofline dominates (then compute terms are 0)
};

GemmRow gemm_row(const topo::GpuSpec& gpu, DataType dtype, const topo::GemmCalibration& cal, const GemmPoint& p) {
  const double sms = static_cast<double>(std::max<std::int64_t>(1, gpu.sm_count));
  const double peak = gpu.peak(dtype == DataType::kFp32 ? DataType::kTf32 : dtype).per_second();
  const double u = 1.0 / cal.max_efficiency;
  GemmRow best;
  double best_time = std::numeric_limits<double>::infinity();
  for (const auto& tile : cal.tiles) {
    const double tiles = std::ceil(static_cast<double>(p.m) / static_cast<double>(tile[0])) *
                         std::ceil(static_cast<double>(p.n) / static_cast<double>(tile[1])) * static_cast<double>(p.b);
    const double waves = std::ceil(tiles / sms);
    const double coef = waves * 2.0 * static_cast<double>(tile[0] * tile[1]) * static_cast<double>(p.k) * sms / peak;
    const double t = coef * u + waves * cal.wave_overhead.seconds();
    if (t < best_time) {
      best_time = t;
      best = GemmRow{coef, waves, 0};
    }
  }
  const sim::Kernel k = gemm_kernel(p);
  const double mem = k.bytes.as_double() / (gpu.memory_bandwidth.bytes_per_second() * gpu.calibration.memory_efficiency);
  if (mem > best_time) return GemmRow{0, 0, mem};
  return best;
}

topo::GemmCalibration with_params(topo::GemmCalibration c, double u, double wave_s, double launch_s) {
  c.max_efficiency = round_significant(1.0 / u);
  c.wave_overhead = sim::Duration::from_seconds(round_significant(wave_s * 1e6) * 1e-6);
  c.launch_overhead = sim::Duration::from_seconds(round_significant(launch_s * 1e6) * 1e-6);
  return c;
}

struct PointsFit {
  topo::GemmCalibration calibration;
  // Standard errors of u = 1 / max_efficiency, the wave and the launch overhead (seconds) of the
  // final least squares; one entry (u) when only max_efficiency is fitted.
  std::vector<double> standard_errors;
  double u = 1;  // unrounded
};

// Alternating fit; `full` fits all three parameters, otherwise only max_efficiency.
PointsFit fit_points(const topo::GpuSpec& gpu, DataType dtype, const std::vector<GemmPoint>& points,
                     const topo::GemmCalibration& base, bool full) {
  PointsFit out;
  out.calibration = base;
  topo::GemmCalibration& cal = out.calibration;
  std::vector<double> previous;
  for (int iteration = 0; iteration < 100; ++iteration) {
    const Eigen::Index n = static_cast<Eigen::Index>(points.size());
    Eigen::MatrixXd a(n, full ? 3 : 1);
    Eigen::VectorXd y(n);
    std::vector<double> signature;
    for (Eigen::Index i = 0; i < n; ++i) {
      const GemmPoint& p = points[static_cast<std::size_t>(i)];
      const double measured = p.flops() / (p.tflops * 1e12);
      const GemmRow row = gemm_row(gpu, dtype, cal, p);
      signature.push_back(row.compute_coef + row.waves * 1e3 + row.memory);
      if (full) {
        a(i, 0) = row.compute_coef / measured;
        a(i, 1) = row.waves / measured;
        a(i, 2) = 1.0 / measured;
        y(i) = 1.0 - row.memory / measured;
      } else {
        a(i, 0) = row.compute_coef / measured;
        y(i) = 1.0 - (row.memory + row.waves * base.wave_overhead.seconds() + base.launch_overhead.seconds()) / measured;
      }
    }
    const Eigen::VectorXd x = solve_nonnegative(a, y);
    const double u = std::max(x(0), 1e-3);
    out.u = u;
    out.standard_errors = standard_errors(a, y, x);
    cal = full ? with_params(cal, u, x(1), x(2)) : with_params(cal, u, base.wave_overhead.seconds(), base.launch_overhead.seconds());
    if (signature == previous) break;  // tile choices (and memory-bound points) are stable
    previous = std::move(signature);
  }
  return out;
}

// Rounds an error bar to 2 significant digits (it is not known better than that).
double round_error(double v) { return round_significant(v, 2); }

void summarize_residuals(FitReport& report) {
  std::vector<double> predicted, measured;
  for (const KernelResidual& r : report.residuals) {
    predicted.push_back(r.predicted);
    measured.push_back(r.measured);
  }
  report.errors = summarize(predicted, measured);
}

// How `model` prices benchmark points (GemmPoint or AttentionPoint, `kernel_of` their kernel)
// against their measured TFLOP/s.
template <typename Point, typename KernelOf>
ErrorSummary model_errors(const topo::ComputeModel& model, const std::vector<Point>& points, KernelOf kernel_of) {
  std::vector<double> predicted, measured;
  for (const Point& p : points) {
    predicted.push_back(model.tflops(kernel_of(p)));
    measured.push_back(p.tflops);
  }
  return summarize(predicted, measured);
}

}  // namespace

double round_significant(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::abs(v)))));
  return std::round(v * scale) / scale;
}

sim::Kernel gemm_kernel(const GemmPoint& p) {
  sim::Kernel k;
  k.kernel_class = sim::KernelClass::kGemm;
  k.dtype = p.dtype;
  k.m = p.m;
  k.n = p.n;
  k.k = p.k;
  k.batch = p.b;
  k.flops = sim::Flops(p.flops());
  const std::int64_t in = p.dtype == DataType::kFp8 ? 1 : (p.dtype == DataType::kTf32 || p.dtype == DataType::kFp32 ? 4 : 2);
  const std::int64_t out = p.dtype == DataType::kTf32 || p.dtype == DataType::kFp32 ? 4 : 2;
  k.bytes = sim::Bytes(p.b * (in * (p.m * p.k + p.k * p.n) + out * p.m * p.n));
  return k;
}

sim::Kernel attention_kernel(const AttentionPoint& p) {
  sim::Kernel k;
  k.kernel_class = sim::KernelClass::kFlashAttention;
  k.dtype = DataType::kBf16;
  k.backward = p.backward;
  k.causal = p.causal;
  k.window = p.window;
  k.dropout = p.dropout > 0;
  k.m = p.seq_len;
  k.n = p.seq_len;
  k.k = p.head_dim;
  k.batch = p.batch * p.heads;
  k.flops = sim::Flops(p.flops());
  // Q, K, V read and O written (forward); the backward also reads O, dO and writes dQ, dK, dV.
  k.bytes = sim::Bytes(2 * p.batch * p.heads * p.seq_len * p.head_dim * (p.backward ? 8 : 4));
  return k;
}

GemmFit fit_gemm(const topo::GpuSpec& gpu, DataType dtype, const std::vector<GemmPoint>& all_points,
                 const topo::GemmCalibration& base, double min_flops, const std::optional<topo::GemmCalibration>& before) {
  GemmFit fit;
  fit.calibration = base;
  fit.report.part = std::string("gemm ") + sim::to_string(dtype);
  const double peak_tflops = gpu.peak(dtype == DataType::kFp32 ? DataType::kTf32 : dtype).as_tflops();
  std::map<std::string, std::vector<GemmPoint>> by_table;
  std::size_t small = 0;
  std::map<std::string, std::size_t> above_peak;
  for (const GemmPoint& p : all_points) {
    if (p.flops() < min_flops) {
      ++small;
    } else if (p.tflops > peak_tflops) {
      ++above_peak[p.table];
    } else {
      by_table[p.table].push_back(p);
    }
  }
  if (small > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%zu points below %.3g GFLOP left out (launch-dominated)", small, min_flops * 1e-9);
    fit.report.notes.emplace_back(buf);
  }
  for (const auto& [table, count] : above_peak) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: %zu points above the dense peak (%.0f TFLOP/s) left out: physically impossible", table.c_str(),
                  count, peak_tflops);
    fit.report.notes.emplace_back(buf);
  }
  // A table whose points alone imply more than the peak is inconsistent with this GPU.
  for (auto it = by_table.begin(); it != by_table.end();) {
    const topo::GemmCalibration alone = fit_points(gpu, dtype, it->second, base, false).calibration;
    if (alone.max_efficiency > 1.0) {
      fit.report.notes.push_back(it->first + ": its points imply " + percent(alone.max_efficiency) +
                                 " of the dense peak inside a full wave; inconsistent with the GPU, not used");
      it = by_table.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<GemmPoint> points;
  for (const auto& [table, list] : by_table) {
    fit.report.from.push_back(table);
    points.insert(points.end(), list.begin(), list.end());
  }
  if (points.empty()) {
    fit.report.notes.emplace_back("no usable points: parameters kept from the base calibration");
    return fit;
  }
  const bool full = points.size() >= 8;
  if (!full) {
    fit.report.notes.emplace_back("fewer than 8 points: only max_efficiency fitted; the wave and launch overheads are the ones "
                                  "given (for FP8 the 16-bit fit's, else the base calibration's)");
  }
  const PointsFit solved = fit_points(gpu, dtype, points, base, full);
  fit.calibration = solved.calibration;
  fit.report.fitted = true;
  {
    // Error bars: max_efficiency = 1 / u, so its standard error is se(u) / u^2.
    auto parameter = [&](const char* name, double value, double se, double scale) {
      FittedParameter p{name, value, std::nullopt, std::nullopt, ""};
      if (std::isfinite(se)) {
        p.standard_error = round_error(se * scale);
      } else {
        p.note = points.size() <= (full ? 3u : 1u) ? "no more points than fitted parameters: no standard error"
                                                   : "held at its bound (0): no standard error";
      }
      fit.report.parameters.push_back(std::move(p));
    };
    const std::vector<double>& se = solved.standard_errors;
    parameter("max_efficiency", fit.calibration.max_efficiency, se[0], 1.0 / (solved.u * solved.u));
    if (full) {
      parameter("wave_overhead_us", fit.calibration.wave_overhead.microseconds(), se[1], 1e6);
      parameter("launch_overhead_us", fit.calibration.launch_overhead.microseconds(), se[2], 1e6);
    }
  }
  auto with_gemm = [&](const topo::GemmCalibration& c) {
    topo::GpuSpec g = gpu;
    (dtype == DataType::kFp8 ? g.calibration.gemm_fp8
                             : (dtype == DataType::kTf32 || dtype == DataType::kFp32 ? g.calibration.gemm_tf32 : g.calibration.gemm_16bit)) = c;
    return g;
  };
  const topo::ComputeModel model(with_gemm(fit.calibration), /*in_training=*/false);
  for (const GemmPoint& p : points) {
    const double predicted = model.tflops(gemm_kernel(p));
    fit.report.residuals.push_back(KernelResidual{shape_label(p), p.tflops, predicted, relative_error(predicted, p.tflops)});
  }
  summarize_residuals(fit.report);
  if (before) fit.report.before = model_errors(topo::ComputeModel(with_gemm(*before), /*in_training=*/false), points, gemm_kernel);
  return fit;
}

AttentionFit fit_attention(const topo::GpuSpec& gpu, bool backward, const std::vector<AttentionPoint>& all_points,
                           std::int64_t tile, const topo::AttentionPassCalibration& base, double max_efficiency,
                           const std::optional<topo::AttentionPassCalibration>& before) {
  AttentionFit fit;
  fit.calibration = base;
  fit.report.part = backward ? "attention backward" : "attention forward";
  // The kernel's own parameters come from the rows without dropout; dropout's cost from the others.
  std::vector<AttentionPoint> points, with_dropout;
  for (const AttentionPoint& p : all_points) (p.dropout > 0 ? with_dropout : points).push_back(p);
  if (points.size() < 3) {
    fit.report.notes.emplace_back(with_dropout.empty() ? "fewer than 3 points: parameters kept from the base calibration"
                                                       : "fewer than 3 points without dropout: parameters kept from the base "
                                                         "calibration, the dropout rows unused");
    return fit;
  }
  // time = batch * [pairs * (max(M u, S v) + (1 - o) min(M u, S v)) + q_tiles * M * w] with
  // M = pair_flops / peak, S = tile^2, u = 1 / efficiency, v = 1 / softmax_rate,
  // w = row_overhead / efficiency: linear in (u, v, w) once the overlap o and which of the two
  // terms is longer are fixed. The overlap is searched on a grid; the longer term alternates.
  const double peak = gpu.peak(DataType::kBf16).per_second();
  const std::size_t n = points.size();
  std::vector<double> mm(n), sm(n), row(n), measured(n);
  for (std::size_t i = 0; i < n; ++i) {
    const AttentionPoint& p = points[i];
    measured[i] = p.flops() / (p.tflops * 1e12);
    const double q = std::ceil(static_cast<double>(p.seq_len) / static_cast<double>(tile));
    const double pairs = topo::attention_tile_pairs(p.seq_len, p.seq_len, tile, p.causal, p.window);
    // The kernel's own head dim, which the model prices (topo::attention_kernel_head_dim).
    const double d = static_cast<double>(topo::attention_kernel_head_dim(p.implementation, p.head_dim));
    const double pair_flops = 4.0 * static_cast<double>(tile * tile) * d * (backward ? 2.5 : 1.0);
    const double bh = static_cast<double>(p.batch * p.heads);
    mm[i] = bh * pairs * pair_flops / peak;
    sm[i] = bh * pairs * static_cast<double>(tile * tile);
    row[i] = bh * q * pair_flops / peak;
  }
  double best_loss = std::numeric_limits<double>::infinity();
  topo::AttentionPassCalibration best = base;
  Eigen::Matrix3d best_cov = Eigen::Matrix3d::Constant(std::numeric_limits<double>::quiet_NaN());
  Eigen::Vector3d best_x = Eigen::Vector3d::Zero();
  // Which of the two terms is longer decides the linear system, and the iteration stays on the side
  // it starts from: each overlap is tried from the base calibration and from the matmul-bound side
  // (no softmax cost, a GEMM's efficiency), and the better physical fit is kept. The second start
  // matters when the base's softmax rate comes from a slower GPU (an H100 rate on Blackwell).
  const Eigen::Vector3d starts[] = {
      Eigen::Vector3d(1.0 / base.efficiency, base.softmax_rate > 0 ? 1.0 / base.softmax_rate : 0.0, 0.0),
      Eigen::Vector3d(1.0 / max_efficiency, 0.0, 0.0)};
  for (int step = 0; step <= 20; ++step) {
    const double overlap = step / 20.0;
    for (const Eigen::Vector3d& start : starts) {
      Eigen::Vector3d x = start;
      Eigen::MatrixXd cov;
      for (int iteration = 0; iteration < 50; ++iteration) {
        Eigen::MatrixXd a(static_cast<Eigen::Index>(n), 3);
        Eigen::VectorXd y = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(n));
        for (std::size_t i = 0; i < n; ++i) {
          const bool matmul_longer = mm[i] * x(0) >= sm[i] * x(1);
          const Eigen::Index r = static_cast<Eigen::Index>(i);
          a(r, 0) = mm[i] * (matmul_longer ? 1.0 : 1.0 - overlap) / measured[i];
          a(r, 1) = sm[i] * (matmul_longer ? 1.0 - overlap : 1.0) / measured[i];
          a(r, 2) = row[i] / measured[i];
        }
        const Eigen::VectorXd next = solve_nonnegative(a, y);
        const bool same = (next - x).norm() <= 1e-12 * x.norm();
        x = next;
        cov = coefficient_covariance(a, y, next);
        if (same) break;
      }
      if (x(0) * max_efficiency < 1.0) continue;  // matmuls faster than in a GEMM: not physical
      double loss = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double a = mm[i] * x(0), b = sm[i] * x(1);
        const double t = std::max(a, b) + (1.0 - overlap) * std::min(a, b) + row[i] * x(2);
        loss += std::abs(t - measured[i]) / measured[i];
      }
      if (loss < best_loss - 1e-12) {
        best_loss = loss;
        best.efficiency = round_significant(1.0 / x(0));
        best.softmax_rate = x(1) > 0 ? round_significant(1.0 / x(1) * 1e-12) * 1e12 : 0.0;
        best.softmax_overlap = overlap;
        best.row_overhead = round_significant(x(2) * best.efficiency);
        best_cov = cov;
        best_x = x;
      }
    }
  }
  if (!std::isfinite(best_loss)) {
    fit.report.notes.emplace_back("no physical fit (every candidate runs the matmuls faster than a GEMM does): parameters kept from the base calibration");
    return fit;
  }
  fit.calibration = best;
  fit.report.fitted = true;
  {
    // Error bars by the delta method from the covariance of (u, v, w) at the chosen overlap:
    // efficiency = 1/u, softmax rate = 1/v, row overhead = w/u.
    const double u = best_x(0), v = best_x(1), w = best_x(2);
    const std::string held = "the softmax overlap held at its grid value " + std::to_string(best.softmax_overlap).substr(0, 4);
    auto parameter = [&](const char* name, double value, double variance, const std::string& missing) {
      FittedParameter p{name, value, std::nullopt, std::nullopt, ""};
      if (std::isfinite(variance) && variance >= 0) {
        p.standard_error = round_error(std::sqrt(variance));
        p.note = held;
      } else {
        p.note = missing;
      }
      fit.report.parameters.push_back(std::move(p));
    };
    const std::string at_bound = "held at its bound (0): no standard error";
    parameter("efficiency", best.efficiency, best_cov(0, 0) / std::pow(u, 4), at_bound);
    parameter("softmax_Telements_per_s", best.softmax_rate * 1e-12, v > 0 ? best_cov(1, 1) / std::pow(v, 4) * 1e-24 : -1.0,
              "no softmax cost fitted (rate unbounded): no standard error");
    const double row_variance = best_cov(2, 2) / (u * u) + std::pow(w / (u * u), 2) * best_cov(0, 0) -
                                2.0 * w / (u * u * u) * best_cov(0, 2);
    parameter("row_overhead", best.row_overhead, w > 0 ? row_variance : -1.0, at_bound);
  }
  std::vector<std::string> tables;
  for (const AttentionPoint& p : all_points) {
    if (std::find(tables.begin(), tables.end(), p.table) == tables.end()) tables.push_back(p.table);
  }
  fit.report.from = tables;
  topo::GpuSpec fitted = gpu;
  fitted.calibration.attention.tile = tile;
  fitted.calibration.attention.implementation = all_points.front().implementation;  // one implementation's rows
  auto& fitted_pass = backward ? fitted.calibration.attention.backward : fitted.calibration.attention.forward;
  fitted_pass = fit.calibration;
  if (!with_dropout.empty()) {
    // time = time without dropout + batch x pairs x tile^2 / dropout_rate. The time without is
    // the same shape measured in the same run where the row has it (the kernel's own model
    // otherwise, noted): least squares of the relative residuals in c = 1 / dropout_rate.
    fitted_pass.dropout_rate = 0;
    const topo::ComputeModel plain(fitted, /*in_training=*/false);
    std::vector<double> coef, extra, measured_s;
    std::size_t modelled = 0;
    for (const AttentionPoint& p : with_dropout) {
      const double t = p.flops() / (p.tflops * 1e12);
      sim::Kernel k = attention_kernel(p);
      k.dropout = false;
      const double t0 = p.tflops_without_dropout ? p.flops() / (*p.tflops_without_dropout * 1e12) : plain.kernel_time(k).seconds();
      if (!p.tflops_without_dropout) ++modelled;
      coef.push_back(static_cast<double>(p.batch * p.heads) * topo::attention_tile_pairs(p.seq_len, p.seq_len, tile, p.causal, p.window) *
                     static_cast<double>(tile * tile));
      extra.push_back(t - t0);
      measured_s.push_back(t);
    }
    double num = 0, den = 0;
    for (std::size_t i = 0; i < coef.size(); ++i) {
      num += coef[i] * extra[i] / (measured_s[i] * measured_s[i]);
      den += coef[i] * coef[i] / (measured_s[i] * measured_s[i]);
    }
    const double c = den > 0 ? num / den : 0;
    if (modelled > 0) {
      fit.report.notes.push_back(std::to_string(modelled) + " dropout rows without a time measured without dropout: the kernel's " +
                                 "fitted model stands in for it");
    }
    if (c > 0) {
      fit.calibration.dropout_rate = round_significant(1.0 / c * 1e-12) * 1e12;
      FittedParameter param{"dropout_Telements_per_s", fit.calibration.dropout_rate * 1e-12, std::nullopt, std::nullopt, ""};
      if (coef.size() >= 2) {
        double ss = 0;
        for (std::size_t i = 0; i < coef.size(); ++i) ss += std::pow((extra[i] - coef[i] * c) / measured_s[i], 2);
        const double se_c = std::sqrt(ss / static_cast<double>(coef.size() - 1) / den);
        param.standard_error = round_error(se_c / (c * c) * 1e-12);
        param.note = "from " + std::to_string(coef.size()) + " rows with dropout";
      }
      fit.report.parameters.push_back(std::move(param));
      double paired = 0;
      for (std::size_t i = 0; i < coef.size(); ++i) paired += std::abs(extra[i] - coef[i] * c) / measured_s[i];
      char line[200];
      std::snprintf(line, sizeof line, "%zu rows with dropout: the time they add over the rows without, as fitted, within %.1f%% of "
                    "their time on average", coef.size(), 100.0 * paired / static_cast<double>(coef.size()));
      fit.report.notes.emplace_back(line);
    } else {
      fit.calibration.dropout_rate = 0;
      fit.report.notes.emplace_back("the dropout rows are no slower than without dropout: no dropout cost");
    }
    fitted_pass = fit.calibration;
  }
  const topo::ComputeModel model(fitted, /*in_training=*/false);
  for (const AttentionPoint& p : points) {
    char label[200];
    const std::string window = p.window > 0 ? " window " + std::to_string(p.window) : "";
    std::snprintf(label, sizeof label, "%s %s d%lld s%lld%s%s (%s)", p.implementation.c_str(), backward ? "bwd" : "fwd",
                  static_cast<long long>(p.head_dim), static_cast<long long>(p.seq_len), p.causal ? " causal" : "", window.c_str(),
                  p.table.c_str());
    const double predicted = model.tflops(attention_kernel(p));
    fit.report.residuals.push_back(KernelResidual{label, p.tflops, predicted, relative_error(predicted, p.tflops)});
  }
  summarize_residuals(fit.report);
  if (!with_dropout.empty()) {
    // The dropout rows as trainsim prices them: the fitted kernel plus dropout's cost.
    const ErrorSummary e = model_errors(model, with_dropout, attention_kernel);
    char line[160];
    std::snprintf(line, sizeof line, "%zu rows with dropout priced with the fitted kernel and dropout cost: MAPE %.1f%%, max |error| %.1f%%",
                  e.n, 100.0 * e.mape, 100.0 * e.max_abs_error);
    fit.report.notes.emplace_back(line);
  }
  if (before) {
    (backward ? fitted.calibration.attention.backward : fitted.calibration.attention.forward) = *before;
    fit.report.before = model_errors(topo::ComputeModel(fitted, /*in_training=*/false), all_points, attention_kernel);
  }
  return fit;
}

}  // namespace trainsim::validate
