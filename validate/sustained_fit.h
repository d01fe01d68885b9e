#pragma once
// fit_sustained_fraction: the compute-model parameters that kernel benchmarks cannot give, fitted
// for one GPU architecture over the cases of a validation suite that run on it:
//   f  the share of its isolated speed that tensor-core work sustains inside a training
//      iteration (topo::ComputeCalibration::sustained_fraction);
//   g  optionally, a common scale of the fused-attention speed, for GPUs without attention
//      benchmarks;
//   h  optionally, a scale of the FP8 GEMM efficiency, when the only FP8 GEMM measurement is a
//      best-shape microbenchmark (Transformer Engine's FP8 GEMMs in training also quantize their
//      inputs, which the benchmark does not).
// Every case is simulated with the candidate calibration at f = 1, at f = 0.7 and, per optional
// scale, at that scale = 0.7; its time is then modelled as T = A + B / f + C / (f g) + D / (f h)
// (B: 16-bit GEMM work on the critical path, C: attention, D: FP8 GEMMs, A: the rest), and the
// parameters minimise the mean absolute log error of the cases' first measured metric on a grid
// (steps of 0.002 for f, 0.01 for the scales). The chosen values are simulated once more for the
// residuals. Its error bar comes from refitting f on bootstrap resamples of the cases, and its
// error on runs it did not see from refitting without each model family in turn and simulating
// that family with the refitted parameters.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "topologies/hardware.h"
#include "validate/kernel_fit.h"
#include "validate/suite.h"

namespace trainsim::validate {

// One fold of the leave-one-family-out check: the parameters refitted without the family's cases,
// and the errors of those cases simulated with them (their error on runs the fit did not see).
struct HeldOutFamily {
  std::string family;  // the suite's "family" ("" for cases without one)
  std::size_t cases = 0;
  double fraction = 1.0;
  std::optional<double> attention_scale;  // refitted when the full fit fits it
  std::optional<double> fp8_scale;        // refitted when the other families have FP8 runs, else 1
  ErrorSummary errors;
};

struct SustainedFit {
  double fraction = 1.0;
  // 5th-95th percentile of f refitted on 1,000 bootstrap resamples of the cases (seed 1), the
  // scales g and h held at their fitted values.
  std::optional<std::pair<double, double>> fraction_interval;
  std::optional<double> attention_scale;  // when fitted (topo::ComputeCalibration::attention_scale)
  std::optional<double> fp8_scale;        // when fitted (topo::ComputeCalibration::fp8_gemm_scale)
  std::size_t cases = 0;
  ErrorSummary before;  // time-like errors with the base calibration's fraction (from the same two runs)
  FitReport report;     // residuals at the fitted fraction
  // Leave one family out (when the architecture's cases come from two families or more): each
  // family predicted by a fit to the others, and the errors of all those predictions pooled.
  std::vector<HeldOutFamily> held_out;
  std::optional<ErrorSummary> held_out_errors;
};

// REQUIRES: `calibration` holds the kernel parameters to use. Cases on other architectures are
// skipped.
struct SustainedFitOptions {
  bool attention = false;  // fit the attention scale g
  bool fp8 = false;        // fit the FP8 GEMM scale h (only when FP8 cases run on the architecture)
  int jobs = 1;            // cases simulated at once
};

SustainedFit fit_sustained_fraction(const Suite& suite, topo::Architecture architecture,
                                    const topo::ComputeCalibration& calibration, const SustainedFitOptions& options);

// The suite restricted to `architecture` (and to `family`, when given), every case priced with
// `calibration` at `fraction`.
Suite with_calibration(const Suite& suite, topo::Architecture architecture, topo::ComputeCalibration calibration,
                       double fraction, const std::optional<std::string>& family = std::nullopt);

// `c` with its in-training attention scale (FP8 GEMM scale) set to `scale`.
topo::ComputeCalibration scale_attention(topo::ComputeCalibration c, double scale);
topo::ComputeCalibration scale_fp8(topo::ComputeCalibration c, double scale);

}  // namespace trainsim::validate
