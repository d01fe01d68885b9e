#pragma once
// Error statistics of predictions against measurements: signed relative error, mean absolute
// percentage error, largest absolute error and Spearman's rank correlation (ties get their
// average rank).

#include <cstddef>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace trainsim::validate {

// (predicted - measured) / measured. REQUIRES: measured != 0.
double relative_error(double predicted, double measured);

struct ErrorSummary {
  std::size_t n = 0;
  double mape = 0;           // mean |relative error| (a fraction: 0.05 = 5%)
  double max_abs_error = 0;  // largest |relative error|
  std::optional<double> spearman;  // rank correlation of predicted and measured; none below 3 points or without variation
};

// REQUIRES: predicted.size() == measured.size(); measured values are non-zero.
ErrorSummary summarize(const std::vector<double>& predicted, const std::vector<double>& measured);

// Spearman's rho: Pearson correlation of the ranks. Empty below 3 points or when either side is
// constant.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b);

// A fitted parameter's bootstrap error bar: `refit` run on 1,000 resamples (with replacement) of
// the indices 0..n-1, drawn from a fixed seed so that a calibration file is reproducible; the 5th
// and 95th percentiles of the refitted values. REQUIRES: n > 0.
std::pair<double, double> bootstrap_interval_90(std::size_t n,
                                                const std::function<double(const std::vector<std::size_t>&)>& refit);

}  // namespace trainsim::validate
