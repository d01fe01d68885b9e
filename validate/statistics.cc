#include "validate/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "sim/check.h"

namespace trainsim::validate {

namespace {

// Ranks 1..n; equal values share the average of their ranks.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double average = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = average;
    i = j + 1;
  }
  return r;
}

}  // namespace

double relative_error(double predicted, double measured) {
  TRAINSIM_CHECK(measured != 0, "relative error against a zero measurement");
  return (predicted - measured) / measured;
}

std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  TRAINSIM_CHECK(a.size() == b.size(), "spearman: sizes differ");
  if (a.size() < 3) return std::nullopt;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1.0) / 2.0;
  double cov = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va <= 0 || vb <= 0) return std::nullopt;
  return cov / std::sqrt(va * vb);
}

ErrorSummary summarize(const std::vector<double>& predicted, const std::vector<double>& measured) {
  TRAINSIM_CHECK(predicted.size() == measured.size(), "summarize: sizes differ");
  ErrorSummary s;
  s.n = predicted.size();
  if (s.n == 0) return s;
  double sum = 0;
  for (std::size_t i = 0; i < s.n; ++i) {
    const double e = std::abs(relative_error(predicted[i], measured[i]));
    sum += e;
    s.max_abs_error = std::max(s.max_abs_error, e);
  }
  s.mape = sum / static_cast<double>(s.n);
  s.spearman = spearman(predicted, measured);
  return s;
}

std::pair<double, double> bootstrap_interval_90(std::size_t n,
                                                const std::function<double(const std::vector<std::size_t>&)>& refit) {
  TRAINSIM_CHECK(n > 0, "bootstrap over no cases");
  constexpr int kResamples = 1000;
  std::mt19937_64 random(1);
  std::vector<double> refitted;
  refitted.reserve(kResamples);
  std::vector<std::size_t> pick(n);
  for (int resample = 0; resample < kResamples; ++resample) {
    for (std::size_t& i : pick) i = static_cast<std::size_t>(random() % n);
    refitted.push_back(refit(pick));
  }
  std::sort(refitted.begin(), refitted.end());
  return {refitted[kResamples / 20], refitted[kResamples - kResamples / 20 - 1]};
}

}  // namespace trainsim::validate
