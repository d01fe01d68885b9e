// `trainsim validate`, `trainsim validate kineto` and `trainsim calibrate` end to end: outputs
// and exit codes (2 for bad measurement files, with the file and the JSON path).

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "test_files.h"

using namespace trainsim;
using testing::contains;
using testing::run_trainsim;
using testing::source_path;

TEST_CASE("cli validate: a suite, as text and as JSON") {
  const std::string suite = source_path("tests/validate/data/tiny_suite.json");
  const testing::Outcome text = run_trainsim("validate " + suite + " -j 1");
  CHECK(text.code == 0);
  CHECK(contains(text.output, "gpt-1.7b-one-node"));
  CHECK(contains(text.output, "MAPE"));
  const testing::Outcome json = run_trainsim("validate " + suite + " --json -");
  REQUIRE(json.code == 0);
  const nlohmann::json j = nlohmann::json::parse(json.output);
  CHECK(j["cases"].size() == 2);
  CHECK(j["summary"].contains("iteration_time_s"));
}

TEST_CASE("cli validate: bad suites and missing arguments exit 2") {
  const std::string bad = testing::temp_file("cli_suite.json", R"({"cases": [{"id": "a"}]})");
  const testing::Outcome o = run_trainsim("validate " + bad);
  CHECK(o.code == 2);
  CHECK(contains(o.output, bad + ": /cases/0/source"));
  CHECK(run_trainsim("validate").code == 2);
  CHECK(run_trainsim("validate /nonexistent/suite.json").code == 2);
  // One bad case does not hide the others: they are predicted and written, the bad one is named,
  // and the exit code is 2.
  const std::string mixed = testing::temp_file("cli_mixed_suite.json", R"({"cases": [
    {"id": "good", "source": "s", "measured": {"mfu": 0.5}, "scenario": {"model": {"preset": "gpt3-1.7b"},
     "training": {"micro_batch_size": 4, "global_batch_size": 32}, "cluster": {"preset": "dgx-a100-80gb", "num_nodes": 1}}},
    {"id": "typo", "source": "s", "measured": {"mfu": 0.5}, "scenario": {"model": {"preset": "gpt3-1.7b"},
     "training": {"micro_batch_sise": 4, "global_batch_size": 32}, "cluster": {"preset": "dgx-a100-80gb", "num_nodes": 1}}}]})");
  const testing::Outcome m = run_trainsim("validate " + mixed + " --json -");
  CHECK(m.code == 2);
  CHECK(contains(m.output, mixed + ": /cases/1/scenario/training/micro_batch_size: missing; expected an integer in [1, "
                                  "16777216] (the section has \"micro_batch_sise\": a misspelling?)"));
  CHECK(contains(m.output, "1 of 2 cases could not be predicted"));
  CHECK(contains(m.output, "\"id\": \"good\""));
}

TEST_CASE("cli validate kineto: compares a trace with the simulated rank, and bad traces exit 2") {
  const std::string trace = source_path("tests/validate/data/kineto_synthetic_gpu_steps.json");
  const std::string scenario = source_path("scenarios/golden/llama3.1-8b-interleaved-h100.json");
  const testing::Outcome o = run_trainsim("validate kineto " + trace + " --scenario " + scenario);
  CHECK(o.code == 0);
  CHECK(contains(o.output, "gemm"));
  CHECK(contains(o.output, "iteration time"));
  const std::string bad = testing::temp_file("cli_trace.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1}]})");
  const testing::Outcome b = run_trainsim("validate kineto " + bad + " --scenario " + scenario);
  CHECK(b.code == 2);
  CHECK(contains(b.output, bad + ": /traceEvents/0/dur"));
  CHECK(run_trainsim("validate kineto " + trace).code == 2);  // --scenario is required
}

TEST_CASE("cli calibrate: fits and writes a calibration, and bad measurement files exit 2") {
  const std::string out = (std::filesystem::temp_directory_path() / "trainsim_validate_test_h100.json").string();
  const testing::Outcome o = run_trainsim("calibrate " + source_path("validate/data/gemm_measurements.json") + " -o " + out);
  CHECK(o.code == 0);
  CHECK(contains(o.output, "gemm bf16: 311 points, MAPE"));
  CHECK(contains(o.output, "physically impossible"));
  // The shipped file less its checks (fit.checks: runs predicted with --check-runs, which
  // validate/calibrate's byte-for-byte test passes).
  nlohmann::json shipped = nlohmann::json::parse(testing::read_text(source_path("scenarios/calibration/h100.json")));
  REQUIRE(shipped["fit"].contains("checks"));
  shipped["fit"].erase("checks");
  CHECK(testing::read_text(out) == shipped.dump(2) + "\n");
  const std::string bad = testing::temp_file("cli_gemm.json", R"([{"id": "t", "source": "s", "rows": [{"m": 1, "n": 2}]}])");
  const testing::Outcome b = run_trainsim("calibrate " + bad);
  CHECK(b.code == 2);
  CHECK(contains(b.output, bad + ": /0/rows/0/k"));
  const std::string other = testing::temp_file("cli_other.json", R"({"name": "not a measurement"})");
  CHECK(contains(run_trainsim("calibrate " + other).output, "not a measurement file"));
  CHECK(run_trainsim("calibrate " + other).code == 2);
  // Collective sweeps: the intra-node ring is fitted and printed; a bad row or a log that does not
  // list its devices exits 2 naming the place.
  const testing::Outcome ring = run_trainsim("calibrate " + source_path("validate/data/nccl_vtrain_a100.json") +
                                             " --gpu a100-sxm4-80gb -o -");
  CHECK(ring.code == 0);
  CHECK(contains(ring.output, "intra-node ring (all_reduce sweeps): 140 points"));
  CHECK(contains(ring.output, "\"intra_node_ring\""));
  const std::string bad_ring = testing::temp_file(
      "cli_ring.json", R"([{"collective": "all_reduce", "n_gpus": 4, "n_nodes": 1, "rows": [{"bytes": "1M", "time_us": 3}]}])");
  const testing::Outcome br = run_trainsim("calibrate " + bad_ring + " --gpu a100-sxm4-80gb");
  CHECK(br.code == 2);
  CHECK(contains(br.output, bad_ring + ": /0/rows/0"));
  const std::string log = testing::temp_file("cli_ring.log", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
                                                             "     1048576        262144     float     sum      -1    44.21   23.72   23.72      0    45.10   23.25   23.25      0\n");
  const testing::Outcome bl = run_trainsim("calibrate " + log + " --gpu a100-sxm4-80gb");
  CHECK(bl.code == 2);
  CHECK(contains(bl.output, "Using devices"));
  // A log of another collective contributes nothing: an error, not a silently ignored file.
  const testing::Outcome ag = run_trainsim("calibrate " + source_path("fuzz/seeds/nccl_tests/json_output.json") + " --gpu a100-sxm4-80gb");
  CHECK(ag.code == 2);
  CHECK(contains(ag.output, "no all_reduce sweep of one node"));
}
