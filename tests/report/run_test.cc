#include <doctest/doctest.h>
#include <map>
#include <sstream>
#include <string>

#include "config/scenario.h"
#include "report/comparison.h"
#include "report/simulation.h"
#include "report/summary.h"
#include "report/trace_writer.h"
#include "tests/scenario_helpers.h"

using namespace trainsim;

namespace {

const std::string& kDefault = tests::kDefaultScenario;
// A small plan that exercises TP, PP and DP on two nodes.
const std::vector<std::string> kSmall = {"model.preset=\"gpt3-1.7b\"", "cluster.num_nodes=4", "parallelism.tensor_model_parallel_size=2",
                                         "parallelism.pipeline_model_parallel_size=4", "training.global_batch_size=32"};

// Two runs of one scenario wrote the same summary JSON and the same trace, byte for byte.
void check_same_bytes(const report::RunResult& a, const report::RunResult& b) {
  CHECK(report::summary_json(a, false).dump() == report::summary_json(b, false).dump());
  std::ostringstream ta, tb;
  report::write_trace(a, ta);
  report::write_trace(b, tb);
  CHECK(ta.str() == tb.str());
}

}  // namespace

TEST_CASE("report/summary: every DESIGN.md field is present and physically sane") {
  const report::RunResult r = report::simulate(config::load_scenario(kDefault));
  const auto j = report::summary_json(r);
  for (const char* key : {"iteration_time_s", "tokens_per_s", "model_flops_per_iteration", "model_tflops_per_gpu",
                          "hardware_tflops_per_gpu", "mfu", "hfu", "num_gpus", "data_parallel_size", "memory", "breakdown",
                          "time_to_train_days", "gpu_hours", "simulator"}) {
    CAPTURE(key);
    CHECK(j.contains(key));
  }
  for (const char* key : {"peak_bytes_per_gpu", "capacity_bytes_per_gpu", "fits", "stages"}) CHECK(j["memory"].contains(key));
  for (const char* key : {"compute_s", "exposed_communication_s", "pipeline_bubble_s", "recompute_s"}) CHECK(j["breakdown"].contains(key));
  for (const char* key : {"events", "ranks_simulated", "wall_s"}) CHECK(j["simulator"].contains(key));
  CHECK(j["mfu"].get<double>() > 0);
  CHECK(j["mfu"].get<double>() < 1);
  CHECK(j["hfu"].get<double>() >= j["mfu"].get<double>());
  CHECK(j["model_tflops_per_gpu"].get<double>() < 312);
  CHECK(j["num_gpus"] == 1024);
  CHECK(j["data_parallel_size"] == 8);
  CHECK(j["memory"]["stages"].size() == 16);
  CHECK(j["memory"]["fits"].get<bool>());
  // The breakdown accounts for the whole iteration.
  const auto& b = j["breakdown"];
  const double sum = b["compute_s"].get<double>() + b["recompute_s"].get<double>() + b["optimizer_s"].get<double>() +
                     b["exposed_communication_s"].get<double>() + b["pipeline_bubble_s"].get<double>() +
                     b["synchronization_wait_s"].get<double>() + b["idle_s"].get<double>();
  CHECK(sum == doctest::Approx(j["iteration_time_s"].get<double>()).epsilon(1e-6));
  // Time to train: tokens / throughput.
  CHECK(j["time_to_train_days"].get<double>() ==
        doctest::Approx(3.0e11 / j["tokens_per_s"].get<double>() / 86400).epsilon(1e-9));
}

TEST_CASE("report/simulate: symmetric and full fidelity give the same iteration time") {
  auto overrides = kSmall;
  const report::RunResult sym = report::simulate(config::load_scenario(kDefault, overrides), {{}, false});
  overrides.push_back("simulation.fidelity=\"full\"");
  const report::RunResult full = report::simulate(config::load_scenario(kDefault, overrides), {{}, false});
  CHECK(sym.engine.ranks.size() == 4);
  CHECK(full.engine.ranks.size() == 32);
  CHECK(sym.iteration_time_s == full.iteration_time_s);
  CHECK(sym.peak_bytes_per_gpu == full.peak_bytes_per_gpu);
  // And on the default 1,024-GPU scenario with interleaving and the distributed optimizer.
  const std::vector<std::string> inter = {"parallelism.virtual_pipeline_model_parallel_size=2", "training.pipeline_schedule=interleaved",
                                          "parallelism.use_distributed_optimizer=true", "training.global_batch_size=256"};
  auto inter_full = inter;
  inter_full.push_back("simulation.fidelity=\"full\"");
  CHECK(report::simulate(config::load_scenario(kDefault, inter), {{}, false}).iteration_time_s ==
        report::simulate(config::load_scenario(kDefault, inter_full), {{}, false}).iteration_time_s);
}

TEST_CASE("report/trace: Perfetto JSON with processes, threads and complete events") {
  const report::RunResult r = report::simulate(config::load_scenario(kDefault, kSmall));
  std::ostringstream out;
  report::write_trace(r, out);
  const auto trace = nlohmann::json::parse(out.str());
  REQUIRE(trace.contains("traceEvents"));
  int complete = 0, processes = 0, threads = 0, counters = 0;
  bool saw_nccl = false, saw_p2p = false, saw_kernel = false;
  for (const auto& e : trace["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++complete;
      REQUIRE(e.contains("name"));
      REQUIRE(e.contains("cat"));
      REQUIRE(e["ts"].is_number());
      REQUIRE(e["dur"].is_number());
      REQUIRE(e["tid"].is_number_integer());
      REQUIRE(e["dur"].get<double>() >= 0);
      const std::string cat = e["cat"];
      saw_nccl |= cat == "nccl";
      saw_p2p |= cat == "p2p";
      saw_kernel |= cat == "kernel";
    } else if (ph == "M") {
      processes += e["name"] == "process_name";
      threads += e["name"] == "thread_name";
    } else if (ph == "C") {
      ++counters;
    }
  }
  CHECK(complete > 1000);
  CHECK(processes == 4);  // one per simulated pipeline stage
  CHECK(threads == 4 * 5);
  CHECK(counters > 0);
  CHECK(saw_nccl);
  CHECK(saw_p2p);
  CHECK(saw_kernel);
}

TEST_CASE("report/determinism: the same scenario gives the same bytes") {
  const config::Scenario s = config::load_scenario(kDefault, kSmall);
  const report::RunResult a = report::simulate(s);
  const report::RunResult b = report::simulate(s);
  check_same_bytes(a, b);
}

TEST_CASE("report/sm contention: overlapped communication slows the compute it hides behind, and the summary says by how much") {
  // The small TP/PP/DP plan with its gradient all-reduce overlapped with the backward pass.
  std::vector<std::string> overlap = kSmall;
  overlap.push_back("training.overlap_grad_reduce=true");
  const config::Scenario base = config::load_scenario(kDefault, overlap);
  std::vector<std::string> on = overlap;
  on.push_back("simulation.sm_contention=true");
  const config::Scenario contended = config::load_scenario(kDefault, on);
  const report::RunResult a = report::simulate(base);
  const report::RunResult b = report::simulate(contended);
  // Off by default: no field, no line.
  CHECK_FALSE(a.breakdown.sm_contention_s.has_value());
  CHECK_FALSE(report::summary_json(a, false)["breakdown"].contains("sm_contention_s"));
  REQUIRE(b.breakdown.sm_contention_s.has_value());
  const double lost = *b.breakdown.sm_contention_s;
  CHECK(lost > 0);
  // The lost time is compute time, and the iteration cannot get faster.
  CHECK(b.iteration_time_s >= a.iteration_time_s);
  const double busy_a = a.breakdown.compute_s + a.breakdown.recompute_s + a.breakdown.optimizer_s;
  const double busy_b = b.breakdown.compute_s + b.breakdown.recompute_s + b.breakdown.optimizer_s;
  CHECK(busy_b == doctest::Approx(busy_a + lost).epsilon(1e-6));
  CHECK(report::summary_text(b).find("slowed by the SMs communication kernels held") != std::string::npos);
  // compare: the kernel kinds are the same kernels' times, and the lost time is a row of its own,
  // so the rows add up to the change of compute, recompute and optimizer.
  const auto cmp = report::comparison_json(a, b, false);
  double kernel_change = 0, contention_change = 0;
  for (const auto& k : cmp["kernels_by_kind"]) {
    kernel_change += k["change_s"].get<double>();
    if (k["kind"] == "sm_contention") contention_change = k["change_s"].get<double>();
  }
  CHECK(contention_change == doctest::Approx(lost));
  CHECK(kernel_change == doctest::Approx(busy_b - busy_a).epsilon(1e-6));
  CHECK(report::comparison_text(a, b).find("slowed by communication's SMs") != std::string::npos);
  CHECK(report::comparison_text(a, a).find("slowed by communication's SMs") == std::string::npos);
  // Same scenario, same bytes.
  check_same_bytes(b, report::simulate(contended));
}

TEST_CASE("report/summary: the typical error of the calibration travels with each prediction") {
  // The shipped A100 calibration records its fit to the published Ampere runs.
  report::RunResult r = tests::simulate_file(kDefault, kSmall);
  const auto& a = r.scenario.cluster.gpu.calibration.accuracy;
  REQUIRE(a.has_value());
  CHECK(a->architecture == "ampere");
  CHECK(a->cases > 100);
  CHECK(a->mape > 0);
  CHECK(a->mape < a->max_abs_error);
  const auto j = report::summary_json(r);
  REQUIRE(j.contains("calibration_accuracy"));
  CHECK(j["calibration_accuracy"]["cases"] == a->cases);
  // Its error on model families left out of the fit is larger than in sample.
  REQUIRE(a->held_out_mape.has_value());
  CHECK(*a->held_out_mape > a->mape);
  CHECK(j["calibration_accuracy"].contains("held_out_mape"));
  const std::string text = report::summary_text(r);
  CHECK(text.find("typical error") != std::string::npos);
  CHECK(text.find("published Ampere runs") != std::string::npos);
  CHECK(text.find("on model families left out of the fit") != std::string::npos);
  CHECK(text.find("none on this GPU's architecture") == std::string::npos);
  // a100.json records one check suite: Korthikanti et al. 2022's runs, in no fit.
  const auto& a100_checks = r.scenario.cluster.gpu.calibration.checks;
  REQUIRE(a100_checks.size() == 1);
  CHECK(a100_checks.front().suite == "korthikanti2022.json");
  CHECK(a100_checks.front().cases == 8);
  CHECK(text.find("checked on            8 Ampere runs in no fit (korthikanti2022.json)") != std::string::npos);
  CHECK(j["calibration_accuracy"]["checks"].size() == 1);

  // A B200 borrows the Hopper in-training fit, and says it has no runs of its own; the runs its
  // calibration was checked on (fit.checks: DGX Cloud's GB200 runs, NeMo's B200 long-sequence
  // runs, Megatron-Bridge's Blackwell rows, SimuMax's B200 runs, NeMo's Blackwell tables) are
  // printed beside it.
  r = tests::simulate_file(kDefault, {"model.preset=\"gpt3-1.7b\"", "cluster.preset=\"dgx-b200\"", "cluster.num_nodes=4",
                                      "parallelism.tensor_model_parallel_size=2", "parallelism.pipeline_model_parallel_size=4",
                                      "training.global_batch_size=32"});
  CHECK(report::summary_text(r).find("Hopper runs the calibration was fitted to") != std::string::npos);
  CHECK(report::summary_text(r).find("; none on this GPU's architecture yet") != std::string::npos);
  const auto& checks = r.scenario.cluster.gpu.calibration.checks;
  REQUIRE(checks.size() == 6);
  CHECK(checks.front().architecture == "blackwell");
  CHECK(checks.front().cases == 18);
  CHECK(checks.front().mean_time_error < 0);
  CHECK(checks[1].cases == 8);
  CHECK(checks[1].mean_time_error > 0);
  CHECK(checks[2].suite == "megatron_bridge_llama.json");
  CHECK(checks[2].cases == 22);
  CHECK(checks[3].suite == "megatron_bridge_moe.json");
  CHECK(checks[3].cases == 8);
  CHECK(checks[4].suite == "simumax_b200.json");
  CHECK(checks[4].cases == 43);
  CHECK(checks[4].mean_time_error < 0);
  CHECK(checks.back().suite == "nemo_perf_summary.json");
  CHECK(checks.back().cases == 16);
  CHECK(checks.back().mean_time_error < 0);
  CHECK(report::summary_text(r).find("checked on            18 Blackwell runs in no fit (dgxc_gb200.json): 11.9% (largest 17%), "
                                     "predictions 11.9% fast on average") != std::string::npos);
  CHECK(report::summary_text(r).find("checked on            8 Blackwell runs in no fit (nemo_long_sequence.json): 1.8% (largest 4%), "
                                     "predictions 1.2% slow on average") != std::string::npos);
  CHECK(report::summary_text(r).find("checked on            22 Blackwell runs in no fit (megatron_bridge_llama.json): 11.2% (largest 31%), "
                                     "predictions 2.3% slow on average") != std::string::npos);
  CHECK(report::summary_text(r).find("checked on            8 Blackwell runs in no fit (megatron_bridge_moe.json): 15.9% (largest 39%), "
                                     "predictions 7.9% fast on average") != std::string::npos);
  CHECK(report::summary_text(r).find("checked on            43 Blackwell runs in no fit (simumax_b200.json): 19.4% (largest 33%), "
                                     "predictions 19.4% fast on average") != std::string::npos);
  CHECK(report::summary_text(r).find("checked on            16 Blackwell runs in no fit (nemo_perf_summary.json): 10.6% (largest 24%), "
                                     "predictions 9.1% fast on average") != std::string::npos);
  CHECK(report::summary_json(r)["calibration_accuracy"]["checks"][0]["suite"] == "dgxc_gb200.json");

  // A calibration without the records (e.g. fitted from GEMMs alone, in code) prints no claim.
  r.scenario.cluster.gpu.calibration.accuracy.reset();
  r.scenario.cluster.gpu.calibration.checks.clear();
  CHECK(report::summary_text(r).find("typical error") == std::string::npos);
  CHECK_FALSE(report::summary_json(r).contains("calibration_accuracy"));
}

TEST_CASE("report/summary: kernel time by kind adds up to the rank's compute, recompute and optimizer time") {
  const std::string llama = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/llama3.1-8b-interleaved-h100.json";
  auto by_kind = [](const report::RunResult& r) {
    std::map<std::string, double> m;
    double sum = 0;
    for (const auto& [k, v] : r.breakdown.compute_by_kernel) {
      m[k] = v;
      sum += v;
    }
    const report::TimeBreakdown& b = r.breakdown;
    CHECK(sum == doctest::Approx(b.compute_s + b.recompute_s + b.optimizer_s).epsilon(1e-6));
    return m;
  };
  const auto bf16 = by_kind(tests::simulate_file(llama));
  CHECK(bf16.at("gemm") > bf16.at("attention"));
  CHECK(bf16.at("fp8_quantization") == 0);
  const auto full = by_kind(tests::simulate_file(llama, {"training.recompute_granularity=\"full\""}));
  CHECK(full.at("gemm") > bf16.at("gemm"));  // the forward GEMMs run again
  const auto delayed = by_kind(tests::simulate_file(llama, {"training.precision=\"fp8\""}));
  const auto tensorwise = by_kind(tests::simulate_file(llama, {"training.precision=\"fp8\"", "training.fp8_recipe=\"tensorwise\""}));
  CHECK(delayed.at("fp8_quantization") > 0);
  CHECK(delayed.at("gemm") < bf16.at("gemm"));
  // Current scaling's amax pass: half as much quantization traffic again on Hopper (6 bytes per
  // element against 4), plus the per-kernel launch cost of the extra kernels.
  CHECK(tensorwise.at("fp8_quantization") > 1.4 * delayed.at("fp8_quantization"));
  CHECK(tensorwise.at("gemm") == doctest::Approx(delayed.at("gemm")));
}

TEST_CASE("report/summary: the quantization kernels are named by the formats they cast to") {
  const report::KernelKind& quantization = report::kKernelKinds[3];
  REQUIRE(std::string(quantization.name) == "fp8_quantization");  // the JSON key stays
  CHECK(report::kernel_kind_label(quantization, {models::Precision::kFp8}) == "FP8 quantization");
  CHECK(report::kernel_kind_label(quantization, {models::Precision::kFp4}) == "FP4 quantization");
  CHECK(report::kernel_kind_label(quantization, {models::Precision::kFp8, models::Precision::kFp4}) == "FP8/FP4 quantization");
  CHECK(report::kernel_kind_label(quantization, {models::Precision::kBf16, models::Precision::kBf16}) == "FP8 quantization");
  CHECK(report::kernel_kind_label(report::kKernelKinds[0], {models::Precision::kFp4}) == "GEMM");
  const report::RunResult r = tests::simulate_file(std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/teaching/10b-nvfp4-b200.json", {});
  CHECK(report::summary_text(r).find("FP4 quantization") != std::string::npos);
  CHECK(report::summary_json(r)["breakdown"]["compute_by_kernel_s"].contains("fp8_quantization"));
}
