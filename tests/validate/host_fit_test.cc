#include "validate/host_fit.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "config/hardware_reader.h"
#include "test_files.h"
#include "validate/calibrator.h"
#include "validate/validation_report.h"

using namespace trainsim;

namespace {

// The cases with their measured iteration times replaced by the model's at `host_us` per task,
// times `factor(case)`.
template <typename Factor>
validate::Suite measured_at_host(validate::Suite suite, topo::ComputeCalibration calibration, std::int64_t host_us,
                                 Factor factor) {
  calibration.host_issue = sim::Duration::from_us(host_us);
  validate::Suite priced = suite;
  for (validate::Case& c : priced.cases) c.scenario.cluster.gpu.calibration = calibration;
  validate::ValidateOptions options;
  options.jobs = 2;
  const validate::ValidationReport predicted = validate::validate_suite(priced, options);
  for (std::size_t i = 0; i < suite.cases.size(); ++i) {
    for (validate::Measurement& m : suite.cases[i].measured) m.value = predicted.cases[i].metrics.front().predicted * factor(suite.cases[i]);
  }
  return suite;
}

}  // namespace

TEST_CASE("validate/fit_host_issue: recovers the host time that generated the measurements, with its error bar and held-out check") {
  // Small single-node models (hidden 1,024-2,048): host-bound at tens of microseconds per task.
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/vtrain_a100.json"), "vtrain_single_000");
  REQUIRE(suite.cases.size() == 10);
  const topo::ComputeCalibration base = config::read_gpu("a100-sxm4-80gb", "test", "").calibration;
  REQUIRE(base.host_issue == sim::Duration::zero());

  const validate::Suite exact = measured_at_host(suite, base, 73, [](const validate::Case&) { return 1.0; });
  const validate::HostFit fit = validate::fit_host_issue(exact, topo::Architecture::kAmpere, base, 2);
  REQUIRE(fit.report.fitted);
  CHECK(fit.cases == 10);
  CHECK(fit.host_issue_us == 73);
  CHECK(fit.report.errors.mape < 1e-6);
  CHECK(fit.before.mape > 0.2);  // at zero host time these runs are far too fast
  REQUIRE(fit.interval_us.has_value());
  CHECK(fit.interval_us->first == 73);
  CHECK(fit.interval_us->second == 73);
  std::set<std::string> families;
  for (const validate::Case& c : suite.cases) families.insert(c.family);
  REQUIRE(fit.held_out.size() == families.size());
  for (const validate::HostHeldOut& h : fit.held_out) CHECK(h.host_issue_us == 73);

  // Measured 30% slower across the board: a larger host time absorbs it.
  const validate::Suite slow = measured_at_host(suite, base, 73, [](const validate::Case&) { return 1.3; });
  const validate::HostFit slower = validate::fit_host_issue(slow, topo::Architecture::kAmpere, base, 2);
  CHECK(slower.host_issue_us > 73);
  REQUIRE(slower.interval_us.has_value());
  CHECK(slower.interval_us->first <= slower.host_issue_us);
  CHECK(slower.host_issue_us <= slower.interval_us->second);

  // No case on the architecture: nothing fitted, the base kept.
  const validate::HostFit none = validate::fit_host_issue(exact, topo::Architecture::kHopper, base, 2);
  CHECK_FALSE(none.report.fitted);
  CHECK(none.host_issue_us == 0);
}

TEST_CASE("validate/vTrain suite: the Megatron-DeepSpeed host time brings the single-node runs from ~34% to under 13% error") {
  // README ("Validation", the vTrain suite): the single-node runs with the fitted host time, and
  // the same runs with the shipped A100 calibration (host time zero).
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/vtrain_a100.json"), "vtrain_single_");
  REQUIRE(suite.cases.size() == 1440);
  validate::ValidateOptions options;
  options.jobs = 2;
  const validate::ValidationReport with_host = validate::validate_suite(suite, options);
  validate::Suite without = suite;
  const topo::ComputeCalibration a100 = config::read_gpu("a100-sxm4-80gb", "test", "").calibration;
  for (validate::Case& c : without.cases) c.scenario.cluster.gpu.calibration = a100;
  const validate::ValidationReport no_host = validate::validate_suite(without, options);
  REQUIRE(with_host.summary.front().metric == validate::Metric::kIterationTime);
  CHECK(with_host.summary.front().errors.mape < 0.13);
  CHECK(no_host.summary.front().errors.mape > 0.28);
  // Families (one model on one GPU count) ranked at Spearman >= 0.95 each with the host time.
  std::size_t families = 0;
  for (const validate::FamilySummary& f : with_host.families) {
    CAPTURE(f.family);
    REQUIRE(f.metrics.front().errors.spearman.has_value());
    CHECK(*f.metrics.front().errors.spearman >= 0.95);
    ++families;
  }
  CHECK(families == 24);
}

TEST_CASE("validate/calibration: a100-megatron-deepspeed.json is a100.json plus a host time per task") {
  // Both written by trainsim calibrate (README "Calibration"); regenerating one without the other
  // would let them drift apart.
  topo::ComputeCalibration stack =
      config::read_compute_calibration(testing::source_path("scenarios/calibration/a100-megatron-deepspeed.json"));
  const topo::ComputeCalibration a100 = config::read_compute_calibration(testing::source_path("scenarios/calibration/a100.json"));
  CHECK(stack.host_issue == sim::Duration::from_us(74));
  CHECK(a100.host_issue == sim::Duration::zero());
  stack.host_issue = a100.host_issue;
  stack.source = a100.source;
  // The runs each is checked on are its own (a base file's checks are never carried over):
  // BigScience's Megatron-DeepSpeed plans here, Korthikanti et al.'s Megatron-LM runs there.
  REQUIRE(stack.checks.size() == 1);
  CHECK(stack.checks.front().suite == "bigscience_tr11_topology.json");
  CHECK(stack.checks.front().cases == 23);
  CHECK_FALSE(a100.checks.empty());
  stack.checks = a100.checks;
  CHECK(stack == a100);
}

TEST_CASE("validate/calibration: h100-nemo25.json is h100.json with its in-training factors refitted to the NeMo 25.04 runs") {
  // README "Calibration": the kernels stay h100.json's; only the training section moves.
  topo::ComputeCalibration stack = config::read_compute_calibration(testing::source_path("scenarios/calibration/h100-nemo25.json"));
  const topo::ComputeCalibration h100 = config::read_compute_calibration(testing::source_path("scenarios/calibration/h100.json"));
  CHECK(stack.gemm_16bit == h100.gemm_16bit);
  CHECK(stack.gemm_fp8 == h100.gemm_fp8);
  CHECK(stack.attention == h100.attention);
  CHECK(stack.fp8_gemm_scale > h100.fp8_gemm_scale);
  CHECK(stack.attention_scale > 1.0);
  REQUIRE(stack.accuracy.has_value());
  CHECK(stack.accuracy->cases == 34);
  // Refitting the training section from the same runs gives the same factors (the file's checks,
  // runs predicted with the finished calibration, are not redone here).
  validate::CalibrationInputs in;
  in.files = {testing::source_path("validate/suites/dgxc_v2504.json")};
  in.gpu = "h100-sxm5-80gb";
  in.jobs = 2;
  const validate::CalibrationResult r = validate::calibrate(in);
  const nlohmann::json written = validate::calibration_json(r);
  const nlohmann::json shipped = nlohmann::json::parse(testing::read_text(testing::source_path("scenarios/calibration/h100-nemo25.json")));
  CHECK(written["training"] == shipped["training"]);
  CHECK(written["fit"]["training"] == shipped["fit"]["training"]);
}
