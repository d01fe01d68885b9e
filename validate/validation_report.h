#pragma once
// ValidationReport: a suite's predictions next to its measurements. validate_suite() simulates
// every case (in parallel when asked; results do not depend on it), then compares each measured
// metric with the prediction: signed relative error per case, and per metric (over all cases and
// within each family) the MAPE, the largest absolute error and Spearman's rank correlation.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/simulation.h"
#include "validate/statistics.h"
#include "validate/suite.h"

namespace trainsim::validate {

struct MetricResult {
  Metric metric = Metric::kIterationTime;
  double predicted = 0;
  double measured = 0;
  double error = 0;  // (predicted - measured) / measured
};

struct CaseResult {
  std::string id;
  std::string source;
  std::string family;
  bool fits = true;  // the predicted plan fits in GPU memory
  std::optional<bool> out_of_memory;  // measured, where the case says (Case::out_of_memory)
  std::vector<MetricResult> metrics;  // empty when the case measured only out_of_memory
};

// The cases that measured whether they ran out of memory, against the predictions' verdicts.
struct MemoryVerdicts {
  std::size_t n = 0;
  std::size_t agree = 0;
  std::vector<std::string> disagree;  // ids, in case order
};

struct MetricSummary {
  Metric metric = Metric::kIterationTime;
  ErrorSummary errors;
};

struct FamilySummary {
  std::string family;
  std::vector<MetricSummary> metrics;
};

// MAPE and largest error of each case's primary metric (its first measured one in kMetrics
// order: the iteration time when measured, else a throughput), over every case ("" = all) and
// per family. No rank correlation: the metrics differ between cases.
struct PrimarySummary {
  std::string family;
  ErrorSummary errors;
};

struct ValidationReport {
  std::string suite_file;
  std::vector<CaseResult> cases;
  std::vector<MetricSummary> summary;    // every case, per metric (kMetrics order, measured ones only)
  std::vector<FamilySummary> families;   // sorted by family name
  std::vector<PrimarySummary> primary;   // all cases with a metric first, then per family
  MemoryVerdicts memory_verdicts;
  std::vector<ExcludedCase> excluded;
  std::vector<FailedCase> failed;        // unreadable cases, then cases whose scenario is bad input
};

struct ValidateOptions {
  int jobs = 1;  // cases simulated at once
  // A case whose simulation rejects its scenario (InputError) goes to ValidationReport::failed
  // and out of the summaries instead of failing the suite.
  bool record_failures = false;
  // Called after each case is simulated (from the calling thread), e.g. for progress.
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// The value of `m` that a simulation predicts.
double predicted_value(const report::RunResult& r, Metric m);

// Simulates every case of `suite` and compares.
ValidationReport validate_suite(const Suite& suite, const ValidateOptions& options = {});
// The statistics of already compared cases (used by validate_suite, and by calibration fits).
std::vector<MetricSummary> summarize_metrics(const std::vector<CaseResult>& cases);

nlohmann::json to_json(const ValidationReport& r);
std::string to_text(const ValidationReport& r);

}  // namespace trainsim::validate
