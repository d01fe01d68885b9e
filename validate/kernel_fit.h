#pragma once
// Fits of the compute model's kernel parameters to kernel benchmarks, with their residuals.
//
// fit_gemm: the tile/wave GEMM model of one data type (max_efficiency, wave and launch overhead;
// the candidate tiles are kept). Points below `min_flops` or faster than the data type's dense
// peak (physically impossible) are excluded. The tile each point uses depends on the parameters,
// so the fit alternates: pick tiles with the current parameters, then solve the linear least
// squares of the relative residuals (Eigen), until the tiles no longer change. With fewer than
// 8 points only max_efficiency is fitted and the overheads are kept from `base`. A table whose
// points imply more than 100% of the peak is inconsistent with the GPU and is left out.
//
// fit_attention: the fused-attention model of one pass (efficiency, softmax rate and overlap, row
// overhead): least squares of the relative residuals, linear once the overlap (searched on a
// grid) and the longer of matmul and softmax per point are fixed. The tile matmuls cannot run
// closer to the peak than a GEMM does: efficiencies above `max_efficiency` are not considered.
// With benchmarks at two head dimensions, efficiency, softmax rate and overlap trade off (the
// per-pair costs give two equations): the smallest overlap that fits best is taken.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "topologies/hardware.h"
#include "validate/attention_sweep.h"
#include "validate/gemm_sweep.h"
#include "validate/statistics.h"

namespace trainsim::validate {

struct KernelResidual {
  std::string label;  // shape and origin of the point
  double measured = 0;   // TFLOP/s
  double predicted = 0;  // TFLOP/s
  double error = 0;      // (predicted - measured) / measured
};

// A fitted parameter with its error bar: the standard error of a least-squares fit
// (sigma^2 (A^T A)^-1 with sigma^2 the residual variance; it assumes independent residuals, so
// residuals structured by shape make it an underestimate), or the 5th-95th percentile interval
// of a bootstrap over the fitted cases.
struct FittedParameter {
  std::string name;  // as in the calibration file, e.g. "max_efficiency", "wave_overhead_us"
  double value = 0;
  std::optional<double> standard_error;
  std::optional<std::pair<double, double>> interval;
  std::string note;  // why there is no error bar, or what the bootstrap held fixed
};

// What one fit did: inputs, exclusions and how well the fitted model reproduces the points.
struct FitReport {
  std::string part;               // e.g. "gemm bf16", "attention forward"
  bool fitted = false;            // false: nothing usable; the base parameters are kept
  std::vector<std::string> from;  // table ids used
  std::vector<std::string> notes; // exclusions and fallbacks, one sentence each
  std::vector<KernelResidual> residuals;
  ErrorSummary errors;
  // The calibration the fit started from, on the same points: how well it predicted them (the
  // shipped calibration checked on new measurements). None where it has no such part.
  std::optional<ErrorSummary> before;
  std::vector<FittedParameter> parameters;  // the values this fit set, with their error bars
  std::vector<std::string> checks;          // out-of-sample checks of the fit, one line each
};

struct GemmFit {
  topo::GemmCalibration calibration;
  FitReport report;
};

// `before`: the data type's parameters before any fit (FP8's `base` borrows the 16-bit overheads),
// for FitReport::before.
GemmFit fit_gemm(const topo::GpuSpec& gpu, sim::DataType dtype, const std::vector<GemmPoint>& points,
                 const topo::GemmCalibration& base, double min_flops = 1e9,
                 const std::optional<topo::GemmCalibration>& before = std::nullopt);

struct AttentionFit {
  topo::AttentionPassCalibration calibration;
  FitReport report;
};

AttentionFit fit_attention(const topo::GpuSpec& gpu, bool backward, const std::vector<AttentionPoint>& points,
                           std::int64_t tile, const topo::AttentionPassCalibration& base, double max_efficiency,
                           const std::optional<topo::AttentionPassCalibration>& before = std::nullopt);

// The kernel a benchmark point measures (for pricing it with the ComputeModel).
sim::Kernel gemm_kernel(const GemmPoint& p);
sim::Kernel attention_kernel(const AttentionPoint& p);

// Rounds a fitted value to 4 significant digits, so calibration files are short and stable.
double round_significant(double v, int digits = 4);

}  // namespace trainsim::validate
