#pragma once
// fit_host_issue: the host (CPU) time per issued task, topo::ComputeCalibration::host_issue,
// fitted for one GPU architecture to the measured iterations of a suite. It shows only where the
// GPU's kernels are shorter than the host's work per task (small models, small micro-batches):
// such runs are what the fit needs, and runs of large models do not move it.
//
// Every case on the architecture is simulated at each host time of a grid (0 to 400 us in steps
// of 10 us, then steps of 1 us within 10 us of the best), with the rest of the calibration as
// given; the host time minimises the mean absolute log error of the cases' first measured metric.
// Its error bar: the same choice on 1,000 bootstrap resamples of the cases (seed 1) over the
// simulated grid points. Its error on runs it did not see: each model family predicted at the
// grid point that fits the other families best.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "topologies/hardware.h"
#include "validate/kernel_fit.h"
#include "validate/suite.h"

namespace trainsim::validate {

// One fold of the leave-one-family-out check.
struct HostHeldOut {
  std::string family;
  std::size_t cases = 0;
  double host_issue_us = 0;  // the best fit to the other families
  ErrorSummary errors;       // of this family's cases at that host time
};

struct HostFit {
  double host_issue_us = 0;
  std::optional<std::pair<double, double>> interval_us;  // 5th-95th percentile over the resamples
  std::size_t cases = 0;
  ErrorSummary before;  // with the base calibration's host time
  FitReport report;     // residuals at the fitted host time
  std::vector<HostHeldOut> held_out;
  std::optional<ErrorSummary> held_out_errors;
};

// REQUIRES: `calibration` holds every other parameter. Cases on other architectures are skipped.
HostFit fit_host_issue(const Suite& suite, topo::Architecture architecture, const topo::ComputeCalibration& calibration,
                       int jobs);

}  // namespace trainsim::validate
