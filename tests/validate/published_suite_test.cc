// Validation against published training runs, with stated tolerances: the shipped suite
// (validate/suites/published_runs.json) simulated with the shipped calibrations. The
// tolerances are the targets trainsim is held to (iteration time, or the published throughput
// where only that is given, per model family), not fitted to pass.

#include <doctest/doctest.h>

#include <thread>

#include "test_files.h"
#include "validate/validation_report.h"

using namespace trainsim;

TEST_CASE("validate/published runs: primary-metric MAPE and ranking per model family") {
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/published_runs.json"));
  validate::ValidateOptions options;
  options.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const validate::ValidationReport r = validate::validate_suite(suite, options);
  REQUIRE(r.cases.size() == suite.cases.size());
  const double all_mape = r.primary.front().errors.mape;
  MESSAGE("primary MAPE over all " << r.cases.size() << " cases: " << 100.0 * all_mape << "%");
  CHECK(all_mape <= 0.05);
  for (const validate::PrimarySummary& p : r.primary) {
    if (p.family.empty()) continue;
    MESSAGE(p.family << ": MAPE " << 100.0 * p.errors.mape << "%, max " << 100.0 * p.errors.max_abs_error << "%");
    // Every family within 8% on average (the MosaicML A100 tables mix software versions and
    // Nemotron has three cases); see README for the per-family figures.
    CHECK(p.errors.mape <= 0.08);
  }
  for (const validate::FamilySummary& f : r.families) {
    for (const validate::MetricSummary& m : f.metrics) {
      if (m.metric != validate::Metric::kIterationTime && m.metric != validate::Metric::kHardwareTflops) continue;
      if (!m.errors.spearman || m.errors.n < 8) continue;
      MESSAGE(f.family << " " << std::string(validate::to_string(m.metric)) << ": Spearman " << *m.errors.spearman);
      // Llama's cases are two weak-scaling series whose iteration times differ by < 1.5%:
      // their order inside a series is below what the model resolves (0.845).
      CHECK(*m.errors.spearman >= (f.family == "llama" ? 0.8 : 0.9));
    }
  }
}

TEST_CASE("validate/secondary suites: MosaicML's H100 runs rank right and keep their known gap") {
  // Not used by any fit (README, "A third suite"): the gap is documented, not tuned. The bounds
  // hold the figures the README states (MAPE 13.4%, Spearman 0.998) against regressions.
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/mosaicml_h100.json"));
  REQUIRE(suite.cases.size() == 61);
  validate::ValidateOptions options;
  options.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const validate::ValidationReport r = validate::validate_suite(suite, options);
  const validate::ErrorSummary& e = r.primary.front().errors;
  MESSAGE("MosaicML H100: MAPE " << 100.0 * e.mape << "%, max " << 100.0 * e.max_abs_error << "%");
  CHECK(e.mape <= 0.15);
  CHECK(e.max_abs_error <= 0.30);
  for (const validate::FamilySummary& f : r.families) {
    for (const validate::MetricSummary& m : f.metrics) {
      if (m.metric == validate::Metric::kIterationTime && m.errors.spearman) CHECK(*m.errors.spearman >= 0.98);
    }
  }
}
