#include "validate/suite.h"

#include <doctest/doctest.h>

#include "test_files.h"
#include "validate/validation_report.h"

using namespace trainsim;
using testing::contains;

namespace {

const std::string kTiny = testing::source_path("tests/validate/data/tiny_suite.json");

std::string error_of(const std::string& text) {
  try {
    validate::read_suite(testing::temp_file("suite.json", text));
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

const std::string kScenario =
    R"({"model": {"preset": "gpt3-1.7b"}, "training": {"micro_batch_size": 4, "global_batch_size": 32},
        "cluster": {"preset": "dgx-a100-80gb", "num_nodes": 1}})";

std::string one_case(const std::string& fields) {
  return R"({"cases": [{"id": "a", "source": "s", "scenario": )" + kScenario + fields + "}]}";
}

}  // namespace

TEST_CASE("validate/Suite: reads inline scenarios, scenario files, families, notes and exclusions") {
  const validate::Suite s = validate::read_suite(kTiny);
  REQUIRE(s.cases.size() == 2);
  CHECK(s.cases[0].id == "gpt-1.7b-one-node");
  CHECK(s.cases[0].family == "gpt");
  CHECK(s.cases[0].notes.size() == 1);
  CHECK(s.cases[0].scenario.num_gpus() == 8);
  REQUIRE(s.cases[0].measured.size() == 2);
  CHECK(s.cases[0].measured[0].metric == validate::Metric::kIterationTime);
  CHECK(s.cases[0].measured[1].metric == validate::Metric::kMfu);
  CHECK(s.cases[1].scenario.num_gpus() == 32);  // from the file, relative to the suite
  CHECK(s.cases[1].measured[0].metric == validate::Metric::kHardwareTflops);
  REQUIRE(s.excluded.size() == 1);
  CHECK(s.excluded[0].id == "left-out");
  CHECK(validate::read_suite(kTiny, "golden").cases.size() == 1);
}

TEST_CASE("validate/Suite: bad suites name the file, the JSON path and what was expected") {
  CHECK(contains(error_of("[1, 2]"), ": /: expected a JSON object"));
  CHECK(contains(error_of("{}"), "/cases: expected a non-empty array"));
  CHECK(contains(error_of(R"({"cases": [{"id": "a", "scenario": {}, "measured": {}}]})"), "/cases/0/source"));
  CHECK(contains(error_of(one_case(R"(, "measured": {"iteration_time_s": 1}, "typo": 1)")), "/cases/0/typo: unknown key"));
  CHECK(contains(error_of(one_case(R"(, "measured": {})")), "/cases/0/measured: expected at least one measured value"));
  CHECK(contains(error_of(one_case(R"(, "measured": {"iteration_time_s": -1})")), "/cases/0/measured/iteration_time_s"));
  CHECK(contains(error_of(one_case(R"(, "measured": {"tokens_per_s": 1})")), "/cases/0/measured/tokens_per_s: unknown key"));
  CHECK(contains(error_of(one_case(R"(, "scenario_file": "x.json", "measured": {"mfu": 0.5})")), "exactly one of"));
  CHECK(contains(error_of(R"({"cases": [{"id": "a", "source": "s", "scenario": {"model": {"preset": "gpt3-1.7b"},
        "parallelism": {"tensor_model_parallel_size": 3}, "training": {"micro_batch_size": 1, "global_batch_size": 8},
        "cluster": {"preset": "dgx-a100-80gb", "num_nodes": 1}}, "measured": {"mfu": 0.5}}]})"),
                 "/cases/0/scenario/parallelism/tensor_model_parallel_size"));
  const std::string two = R"({"cases": [{"id": "a", "source": "s", "scenario": )" + kScenario +
                          R"(, "measured": {"mfu": 0.5}}, {"id": "a", "source": "s", "scenario": )" + kScenario +
                          R"(, "measured": {"mfu": 0.5}}]})";
  CHECK(contains(error_of(two), "/cases/1/id: duplicate case id"));
  CHECK(contains(error_of(R"({"cases": [)"), "invalid JSON"));
}

TEST_CASE("validate/ValidationReport: errors are (predicted - measured) / measured of the simulated scenario") {
  const validate::Suite s = validate::read_suite(kTiny);
  validate::ValidateOptions options;
  options.jobs = 2;
  const validate::ValidationReport r = validate::validate_suite(s, options);
  REQUIRE(r.cases.size() == 2);
  report::RunOptions run;
  run.record = false;
  const report::RunResult direct = report::simulate(s.cases[0].scenario, run);
  const validate::MetricResult& t = r.cases[0].metrics[0];
  CHECK(t.metric == validate::Metric::kIterationTime);
  CHECK(t.predicted == direct.iteration_time_s);
  CHECK(t.error == doctest::Approx((direct.iteration_time_s - 1.0) / 1.0));
  CHECK(r.cases[0].metrics[1].predicted == direct.mfu);
  // Summaries: one per measured metric, over every case and within the family.
  REQUIRE(r.summary.size() == 3);
  CHECK(r.summary[0].metric == validate::Metric::kIterationTime);
  CHECK(r.summary[0].errors.n == 1);
  CHECK(r.summary[0].errors.mape == doctest::Approx(std::abs(t.error)));
  REQUIRE(r.families.size() == 1);
  CHECK(r.families[0].family == "gpt");
  // Same results one case at a time as in parallel.
  const validate::ValidationReport serial = validate::validate_suite(s);
  CHECK(validate::to_json(serial).dump() == validate::to_json(r).dump());
  // The JSON has the documented shape.
  const nlohmann::json j = validate::to_json(r);
  CHECK(j["cases"][0]["id"] == "gpt-1.7b-one-node");
  CHECK(j["cases"][0]["metrics"]["iteration_time_s"].contains("predicted"));
  CHECK(j["cases"][0]["metrics"]["iteration_time_s"].contains("measured"));
  CHECK(j["cases"][0]["metrics"]["iteration_time_s"].contains("error"));
  CHECK(j["summary"]["mfu"]["n"] == 1);
  CHECK(j["summary"]["mfu"]["spearman"].is_null());  // one point: undefined
  CHECK(j["summary"]["hardware_tflops_per_gpu"].contains("max_abs_error"));
  CHECK(contains(validate::to_text(r), "[1] test input"));
}

TEST_CASE("validate/Suite: a measured out-of-memory verdict is compared with the prediction's, and needs no time") {
  // GPT 1.7B on one node: micro-batch 4 fits 80 GB; 64 sequences a micro-batch without
  // recomputation do not (the memory estimate's own verdict, not a measurement).
  const std::string big =
      R"({"model": {"preset": "gpt3-1.7b"}, "training": {"micro_batch_size": 64, "global_batch_size": 512},
          "cluster": {"preset": "dgx-a100-80gb", "num_nodes": 1}})";
  const std::string text = R"({"cases": [{"id": "ran", "source": "s", "scenario": )" + kScenario +
                           R"(, "measured": {"iteration_time_s": 1, "out_of_memory": false}},
      {"id": "oom", "source": "s", "scenario": )" + big + R"(, "measured": {"out_of_memory": true}},
      {"id": "said-oom", "source": "s", "scenario": )" + kScenario + R"(, "measured": {"out_of_memory": true}}]})";
  const validate::Suite s = validate::read_suite(testing::temp_file("oom_suite.json", text));
  REQUIRE(s.cases.size() == 3);
  CHECK(s.cases[0].out_of_memory == false);
  CHECK(s.cases[1].measured.empty());
  CHECK(s.cases[1].out_of_memory == true);
  CHECK(validate::with_metrics(s).cases.size() == 1);  // what a fit or a check compares
  const validate::ValidationReport r = validate::validate_suite(s);
  REQUIRE(r.cases.size() == 3);
  CHECK(r.cases[0].fits);
  CHECK_FALSE(r.cases[1].fits);
  CHECK(r.cases[1].metrics.empty());
  CHECK(r.memory_verdicts.n == 3);
  CHECK(r.memory_verdicts.agree == 2);
  REQUIRE(r.memory_verdicts.disagree.size() == 1);
  CHECK(r.memory_verdicts.disagree[0] == "said-oom");
  // The primary metric is over the case with a time only.
  REQUIRE(!r.primary.empty());
  CHECK(r.primary.front().errors.n == 1);
  const nlohmann::json j = validate::to_json(r);
  CHECK(j["cases"][1]["out_of_memory"]["predicted"] == true);
  CHECK(j["cases"][1]["out_of_memory"]["measured"] == true);
  CHECK(j["cases"][2]["out_of_memory"]["predicted"] == false);
  CHECK(j["memory_verdicts"]["agree"] == 2);
  const std::string out = validate::to_text(r);
  CHECK(contains(out, "out-of-memory verdicts: 2 of 3 agree; not: said-oom"));
  CHECK(contains(out, "DISAGREE"));
  // A run that ran out of memory has no time; the verdict is a boolean.
  CHECK(contains(error_of(one_case(R"(, "measured": {"iteration_time_s": 1, "out_of_memory": true})")),
                 "/cases/0/measured/out_of_memory: a run that ran out of memory has no measured iteration_time_s"));
  CHECK(contains(error_of(one_case(R"(, "measured": {"out_of_memory": 1})")), "/cases/0/measured/out_of_memory: expected true or false"));
  // A plan known only to have run (it fit) is a verdict too.
  CHECK(error_of(one_case(R"(, "measured": {"out_of_memory": false})")).empty());
}

TEST_CASE("validate/Suite: on request, a case that cannot be read is recorded and the others kept") {
  const std::string text = R"({"cases": [{"id": "good", "source": "s", "scenario": )" + kScenario +
                           R"(, "measured": {"mfu": 0.5}}, {"id": "bad", "source": "s", "scenario": {"model": {"preset": "gpt3-1.7b"}},
        "measured": {"mfu": 0.5}}, 7]})";
  const std::string file = testing::temp_file("suite_record.json", text);
  CHECK_THROWS_AS(validate::read_suite(file), InputError);  // the default: a fit needs every case
  const validate::Suite s = validate::read_suite(file, "", validate::OnCaseError::kRecord);
  REQUIRE(s.cases.size() == 1);
  CHECK(s.cases[0].id == "good");
  CHECK(s.cases[0].family == "gpt");  // none given: from the model's name, "GPT 1.7B"
  REQUIRE(s.failed.size() == 2);
  CHECK(s.failed[0].id == "bad");
  CHECK(contains(s.failed[0].error, file + ": /cases/1/scenario/cluster: missing"));
  CHECK(s.failed[1].id == "/cases/2");  // no id to name it by
  CHECK(contains(s.failed[1].error, "/cases/2"));
  // Errors in the suite as a whole still throw.
  CHECK_THROWS_AS(validate::read_suite(testing::temp_file("suite_record2.json", R"({"cases": 1})"), "",
                                       validate::OnCaseError::kRecord),
                  InputError);
  // The report predicts the readable case, lists the other two and keeps them out of the summaries.
  const validate::ValidationReport r = validate::validate_suite(s);
  REQUIRE(r.cases.size() == 1);
  REQUIRE(r.failed.size() == 2);
  CHECK(r.summary.front().errors.n == 1);
  const nlohmann::json j = validate::to_json(r);
  CHECK(j["failed"][0]["id"] == "bad");
  CHECK(contains(validate::to_text(r), "could not be predicted"));
}

TEST_CASE(
    "validate/Suite: a measured peak memory can name the pipeline stage whose GPU measured it") {
  const std::string pp4 =
      R"({"model": {"preset": "gpt3-1.7b"}, "parallelism": {"pipeline_model_parallel_size": 4},
          "training": {"micro_batch_size": 1, "global_batch_size": 8}, "cluster": {"preset": "dgx-a100-80gb", "num_nodes": 1}})";
  const auto suite_of = [&](const std::string& measured) {
    return R"({"cases": [{"id": "a", "source": "s", "scenario": )" + pp4 + R"(, "measured": )" +
           measured + "}]}";
  };
  const validate::Suite last = validate::read_suite(testing::temp_file(
      "suite.json", suite_of(R"({"peak_memory_bytes": 3e10, "peak_memory_stage": "last"})")));
  REQUIRE(last.cases.size() == 1);
  CHECK(last.cases[0].peak_memory_stage == 3);
  const validate::Suite first = validate::read_suite(testing::temp_file(
      "suite.json", suite_of(R"({"peak_memory_bytes": 3e10, "peak_memory_stage": 0})")));
  CHECK(first.cases[0].peak_memory_stage == 0);
  CHECK_FALSE(validate::read_suite(
                  testing::temp_file("suite.json", suite_of(R"({"peak_memory_bytes": 3e10})")))
                  .cases[0]
                  .peak_memory_stage);

  // The comparison takes that stage's peak; without a stage, the largest (the GPU that decides the
  // fit).
  const validate::ValidationReport r_last = validate::validate_suite(last),
                                   r_first = validate::validate_suite(first);
  report::RunOptions run;
  run.record = false;
  const report::RunResult direct = report::simulate(last.cases[0].scenario, run);
  REQUIRE(direct.stages.size() == 4);
  CHECK(r_last.cases[0].metrics[0].predicted == static_cast<double>(direct.stages[3].peak_bytes));
  CHECK(r_first.cases[0].metrics[0].predicted == static_cast<double>(direct.stages[0].peak_bytes));
  CHECK(direct.stages[0].peak_bytes != direct.stages[3].peak_bytes);  // the choice matters here

  CHECK(contains(
      error_of(suite_of(R"({"peak_memory_bytes": 3e10, "peak_memory_stage": 4})")),
      "/cases/0/measured/peak_memory_stage: expected \"last\" or a pipeline stage in [0, 3], got"));
  CHECK(contains(error_of(suite_of(R"({"peak_memory_bytes": 3e10, "peak_memory_stage": "first"})")),
                 "/cases/0/measured/peak_memory_stage: expected \"last\""));
  CHECK(contains(error_of(suite_of(R"({"peak_memory_bytes": 3e10, "peak_memory_stage": 1.5})")),
                 "peak_memory_stage"));
  CHECK(contains(error_of(suite_of(R"({"iteration_time_s": 1, "peak_memory_stage": 0})")),
                 "/cases/0/measured/peak_memory_stage: a stage is given only with a measured "
                 "peak_memory_bytes"));
}
