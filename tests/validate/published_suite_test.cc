// Validation against published training runs, with stated tolerances: the shipped suite
// (validate/suites/published_runs.json) simulated with the shipped calibrations. The
// tolerances are the targets trainsim is held to (iteration time, or the published throughput
// where only that is given, per model family), not fitted to pass.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include <thread>

#include "config/hardware_reader.h"
#include "config/scenario.h"
#include "report/simulation.h"
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
      // Llama's cases include two weak-scaling series whose iteration times grow by 1.5% from 8
      // to 128 GPUs; the expected slowest GPU (speed_spread) orders them (0.953; 0.860 without).
      CHECK(*m.errors.spearman >= 0.9);
    }
  }
}

namespace {

// A secondary suite validated on all cores; its primary-metric errors over every case, and the
// lowest iteration-time Spearman correlation of its families, and the report itself.
struct SecondaryResult {
  validate::ErrorSummary errors;
  double min_spearman = 1;
  validate::ValidationReport report;
};

SecondaryResult validate_secondary(const char* file, std::size_t cases) {
  const validate::Suite suite = validate::read_suite(testing::source_path(file));
  REQUIRE(suite.cases.size() == cases);
  validate::ValidateOptions options;
  options.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  SecondaryResult out;
  out.report = validate::validate_suite(suite, options);
  const validate::ValidationReport& r = out.report;
  out.errors = r.primary.front().errors;
  bool ranked = false;
  for (const validate::FamilySummary& f : r.families) {
    for (const validate::MetricSummary& m : f.metrics) {
      if (m.metric != validate::Metric::kIterationTime || !m.errors.spearman) continue;
      out.min_spearman = std::min(out.min_spearman, *m.errors.spearman);
      ranked = true;
    }
  }
  CHECK(ranked);
  MESSAGE(std::string(file) << ": MAPE " << 100.0 * out.errors.mape << "%, max " << 100.0 * out.errors.max_abs_error
                << "%, Spearman >= " << out.min_spearman);
  return out;
}

}  // namespace

TEST_CASE("validate/secondary suites: MosaicML's H100 runs rank right and keep their known gap") {
  // Not used by any fit (README, "A third suite"): the gap is documented, not tuned. The bounds
  // hold the figures the README states (MAPE 8.3%, largest 20.6%, Spearman 0.999) against
  // regressions; MPT's Triton kernel priced as FlashAttention-2 (12.8%, largest 28.5%) fails them.
  const SecondaryResult r = validate_secondary("validate/suites/mosaicml_h100.json", 61);
  CHECK(r.errors.mape <= 0.10);
  CHECK(r.errors.max_abs_error <= 0.23);
  CHECK(r.min_spearman >= 0.98);
}

TEST_CASE("validate/secondary suites: llm-foundry's A100 side tables: FSDP's micro-batch trend and the checkpointing gap") {
  // validate/suites/mosaicml_a100_tables.json (README, "A seventeenth suite"), in no fit: MPT on
  // one DGX A100 node under FSDP FULL_SHARD, from two tables kept beside llm-foundry's README.
  // Without checkpointing, MPT-7b at micro-batch 1, 2, 4 and 6 (and MPT-13b at 1 and 2) measures
  // fewer seconds per token the larger the micro-batch, 29% fewer from 1 to 6; the prediction
  // falls too, but by 6%: trainsim hides FSDP's per-micro-batch gathers and reduce-scatters
  // behind compute for free, so it is 21% fast at micro-batch 1 and within 4% at 4 and 6. With
  // checkpointing (PyTorch 2.0.1 and 1.13.1 rows) it is 2-14% slow, the gap README's "Not met"
  // describes, but for one 1.13.1 row that measured far below its model's others (-18%). The
  // bounds hold the stated figures (MAPE 9.1%, largest 26.1%, Spearman 0.998).
  const SecondaryResult r = validate_secondary("validate/suites/mosaicml_a100_tables.json", 31);
  CHECK(r.errors.mape <= 0.10);
  CHECK(r.errors.max_abs_error <= 0.28);
  CHECK(r.min_spearman >= 0.99);

  // Seconds per sample, predicted and measured, of the checkpoint-free MPT-7b series by micro-batch.
  std::map<int, std::pair<double, double>> per_sample;
  double ckpt_error = 0, free_error = 0;
  int ckpt_n = 0, free_n = 0;
  const std::string series = "mosaic_llmfoundry_larger_mb_1_a100_80gb_7b_seq2048_8gpu_mbs";
  for (const validate::CaseResult& c : r.report.cases) {
    REQUIRE(c.metrics.size() == 1);
    const validate::MetricResult& m = c.metrics.front();
    const bool ckpt = c.id.find("_ckpt") != std::string::npos;
    (ckpt ? ckpt_error : free_error) += m.error;
    ++(ckpt ? ckpt_n : free_n);
    if (c.id.rfind(series, 0) != 0) continue;
    const int mbs = std::stoi(c.id.substr(series.size()));
    const double samples = 8.0 * 2.0 * mbs;  // 8 GPUs, 2 accumulation steps
    per_sample[mbs] = {m.predicted / samples, m.measured / samples};
  }
  REQUIRE(per_sample.size() == 4);
  REQUIRE(ckpt_n == 24);
  REQUIRE(free_n == 7);
  // Both fall with the micro-batch, and the measured series falls further.
  for (auto it = std::next(per_sample.begin()); it != per_sample.end(); ++it) {
    CHECK(it->second.first < std::prev(it)->second.first);
    CHECK(it->second.second < std::prev(it)->second.second);
  }
  const double predicted_drop = 1 - per_sample.at(6).first / per_sample.at(1).first;
  const double measured_drop = 1 - per_sample.at(6).second / per_sample.at(1).second;
  MESSAGE("MPT-7b seconds per sample, micro-batch 1 -> 6: predicted -" << 100 * predicted_drop << "%, measured -"
          << 100 * measured_drop << "%");
  CHECK(measured_drop > predicted_drop);
  CHECK(std::abs(per_sample.at(6).first / per_sample.at(6).second - 1) <= 0.05);
  // The checkpointed rows come out slow on average, the checkpoint-free ones fast.
  MESSAGE("mean signed error: checkpointed " << 100 * ckpt_error / ckpt_n << "%, checkpoint-free "
          << 100 * free_error / free_n << "%");
  CHECK(ckpt_error / ckpt_n > 0);
  CHECK(free_error / free_n < 0);
}

TEST_CASE("validate/secondary suites: Korthikanti et al. 2022's A100 runs, held out, slow with the pipeline's depth") {
  // validate/suites/korthikanti2022.json (README, "A thirteenth suite"), in no fit: GPT 22B-1T on
  // DGX A100 with full recomputation and with sequence parallelism + selective recomputation. The
  // plans rank right; the error grows from the 22B (PP 1, within 3%) to the 1T (PP 64, 11-12%
  // slow). The bounds hold the stated figures (MAPE 6.0%, largest 11.6%) against regressions.
  const SecondaryResult r = validate_secondary("validate/suites/korthikanti2022.json", 8);
  CHECK(r.errors.mape <= 0.07);
  CHECK(r.errors.max_abs_error <= 0.13);
  CHECK(r.min_spearman >= 0.95);
}

TEST_CASE("validate/secondary suites: DGX Cloud runs held out of every fit (Llama 3.1 70B/405B, Nemotron-4, Grok-1)") {
  // The tables of the DGX Cloud README commit whose GPT-3 and Llama 3.1 8B tables are in the
  // published suite (README, "A fourth suite"); no fit reads them. Held to the published suite's
  // MAPE and ranking targets (<= 5%, Spearman >= 0.9); the largest error is 13.6% (Grok-1 FP8 on
  // 8 GPUs), so its bound is 15% (README states MAPE 4.4%, Spearman >= 0.938).
  const SecondaryResult r = validate_secondary("validate/suites/dgxc_heldout.json", 68);
  CHECK(r.errors.mape <= 0.05);
  CHECK(r.errors.max_abs_error <= 0.15);
  CHECK(r.min_spearman >= 0.9);
}

TEST_CASE("validate/secondary suites: DGX Cloud's NeMo 25.04 Llama 3.1 tables show the drift of a newer software stack") {
  // The same models a release later (README, "A fifth suite"): BF16 within 4% for 70B and 405B,
  // the rest 8-15% slow, as the newer stack got faster. The bounds hold the stated figures (MAPE
  // 9.2%, largest 15.4%, Spearman 0.973) against regressions; the drift is documented, not fitted.
  const SecondaryResult r = validate_secondary("validate/suites/dgxc_v2504.json", 34);
  CHECK(r.errors.mape <= 0.10);
  CHECK(r.errors.max_abs_error <= 0.16);
  CHECK(r.min_spearman >= 0.9);
}

TEST_CASE("validate/secondary suites: GB200 NVL72 runs check the Blackwell model no training run has fitted") {
  // DGX Cloud's v25.05 GB200 tables (README, "A sixth suite"): Blackwell's GEMMs come from XLA's
  // measured B200 table, its attention from cuDNN's GB200 benchmark, the in-training factors from
  // the H100 fit. BF16 comes out 5-11% fast, FP8 15-17% fast; the bounds hold the stated figures
  // (MAPE 11.9%, largest 17.3%, Spearman 0.986 and above per family) against regressions. Llama's six runs differ by 2% per precision; the
  // expected slowest GPU of 128-512 orders them (1.000; 0.771 without it).
  const SecondaryResult r = validate_secondary("validate/suites/dgxc_gb200.json", 18);
  CHECK(r.errors.mape <= 0.12);
  CHECK(r.errors.max_abs_error <= 0.18);
  CHECK(r.min_spearman >= 0.9);
}

TEST_CASE("validate/secondary suites: Megatron-Bridge's Llama tables: Blackwell within 9% but 25.09's large GB200 runs, H100 FP8 slow") {
  // validate/suites/megatron_bridge_llama.json (README, "A ninth suite"), in no fit: Megatron-Bridge's
  // published FP8 throughput of Llama 3 8B/70B and 3.1 405B, NeMo 25.09 and 26.04.01, on GB200,
  // B200 and H100, current scaling and MXFP8 with FP8 parameter gathers (four Megatron-FSDP rows
  // among them offload activations to the CPU: 25.09's on Transformer Engine 2.7's first
  // scheduler, 26.04.01's on 2.14's default one), 26.04.01's two NVFP4 rows on GB200 (-8.6% and
  // +4.2%: their FP4 GEMMs priced at the kernel ratio Transformer Engine measured on B300) and its
  // six GB300 rows, which come out 17-31% slow: GB300's datasheet BF16 and FP8 peaks equal GB200's
  // and no GB300 kernel has been measured, yet those runs went about 20% faster than trainsim's
  // model of them. B200 and GB200 come out within 9% but for 25.09's GB200 runs of 64 and 128
  // GPUs: the 405B MXFP8 plan on 128 GB200, which measured 7% slower than the same plan on 128
  // B200 and comes out 24% fast, and the two FSDP runs that offload activations, 11% (70B on 64)
  // and 18% (405B on 128) fast, whose copies trainsim hides behind the compute. H100 3-16% slow:
  // these newer stacks run H100 FP8 faster than the runs the H100 calibration was fitted to (as
  // the NeMo 25.04 DGX Cloud suite shows too). The bounds hold these figures against regressions.
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/megatron_bridge_llama.json"));
  REQUIRE(suite.cases.size() == 27);
  CHECK(suite.excluded.empty());
  const validate::ValidationReport r = validate::validate_suite(suite);
  REQUIRE(r.cases.size() == 27);
  std::map<std::string, double> predicted;
  for (const validate::CaseResult& c : r.cases) {
    CAPTURE(c.id);
    const double e = c.metrics.front().error;
    predicted[c.id] = c.metrics.front().predicted;
    if (c.family == "h100") {
      CHECK(e >= 0.0);
      CHECK(e <= 0.17);
    } else if (c.family == "gb300") {
      CHECK(e >= 0.15);
      CHECK(e <= 0.35);
    } else if (c.id == "bridge_llama31-405b_fp8_mx_gb200_128gpu_v25.09") {
      CHECK(e >= -0.25);
      CHECK(e <= -0.20);
    } else if (c.id == "bridge_llama31-405b_fp8_cs_gb200_128gpu_v25.09" || c.id == "bridge_llama3-70b_fp8_cs_gb200_64gpu_v25.09") {
      CHECK(e >= -0.20);
      CHECK(e <= -0.09);
    } else {
      CHECK(std::abs(e) <= 0.09);
    }
  }
  // MXFP8 (both quantized copies, block-scaled GEMM kernels) runs slower than current scaling on
  // the same plan, as each pair measured.
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"llama3-8b", "gb200_8gpu"}, {"llama3-8b", "b200_8gpu"}, {"llama31-405b", "b200_128gpu"}};
  for (const auto& p : pairs) {
    const std::string mx = "bridge_" + p.first + "_fp8_mx_" + p.second + "_v25.09";
    const std::string cs = "bridge_" + p.first + "_fp8_cs_" + p.second + "_v25.09";
    CAPTURE(mx);
    REQUIRE(predicted.count(mx) == 1);
    REQUIRE(predicted.count(cs) == 1);
    CHECK(predicted[mx] > predicted[cs]);
  }
  // NVFP4 runs the same GB200 plans faster than MXFP8: 1.38x and 1.39x predicted for 70B and 405B,
  // 1.31x and 1.48x measured.
  for (const std::string& run : {std::string("llama3-70b_%s_gb200_64gpu"), std::string("llama31-405b_%s_gb200_256gpu")}) {
    auto id = [&](const std::string& precision) {
      std::string s = run;
      s.replace(s.find("%s"), 2, precision);
      return "bridge_" + s + "_v26.04.01";
    };
    CAPTURE(run);
    REQUIRE(predicted.count(id("nvfp4")) == 1);
    REQUIRE(predicted.count(id("fp8_mx")) == 1);
    const double speedup = predicted[id("fp8_mx")] / predicted[id("nvfp4")];
    CHECK(speedup > 1.3);
    CHECK(speedup < 1.5);
  }
  CHECK(r.primary.front().errors.mape <= 0.12);  // 11.3%; 8.1% without the six GB300 rows
  // The GB200 offloading row (-5.7%): its 64-way FSDP plan peaks at 322 GiB per GPU without
  // offloading, which does not fit in 186 GiB; the recipe's 40 offloaded layers make it fit.
  for (const validate::Case& c : suite.cases) {
    if (c.id != "bridge_llama3-70b_fp8_cs_gb200_64gpu_v26.04.01") continue;
    REQUIRE(c.scenario.training.cpu_offload_layers == 40);
    CHECK(report::simulate(c.scenario).fits);
    config::Scenario kept = c.scenario;
    kept.training.cpu_offload_layers = 0;
    CHECK_FALSE(report::simulate(kept).fits);
  }
  // With h100-nemo25.json, the H100 calibration refitted to DGX Cloud's NeMo 25.04 runs (README
  // "Calibration"), the H100 rows, which no fit has seen, come within 9% (MAPE 2.8%).
  validate::Suite h100;
  for (validate::Case c : suite.cases) {
    if (c.family != "h100") continue;
    c.scenario.cluster.gpu.calibration =
        config::read_compute_calibration(testing::source_path("scenarios/calibration/h100-nemo25.json"));
    h100.cases.push_back(std::move(c));
  }
  REQUIRE(h100.cases.size() == 5);
  const validate::ValidationReport refit = validate::validate_suite(h100);
  for (const validate::CaseResult& c : refit.cases) {
    CAPTURE(c.id);
    CHECK(std::abs(c.metrics.front().error) <= 0.09);
  }
  CHECK(refit.primary.front().errors.mape <= 0.04);
}

TEST_CASE("validate/secondary suites: Megatron-Bridge's MoE tables: within 16% but the two runs without CUDA graphs or overlap, and GPT-OSS") {
  // validate/suites/megatron_bridge_moe.json (README, "A tenth suite"), in no fit: Qwen3-30B-A3B,
  // Qwen3-235B-A22B, DeepSeek-V3 and GPT-OSS 120B as Megatron-Bridge published them for NeMo
  // 26.04.01 on GB200, B200 and H100. Six come out between -4% and +16% (DeepSeek-V3 on B200 the
  // +15%); Qwen3-30B on 16 H100 and Qwen3-235B on 256 B200, the two runs with neither CUDA graphs
  // nor an overlapped dispatch, 19-25% fast; GPT-OSS 120B (BF16) 25-39% fast on all three systems.
  // The Qwen3-235B H100 run is within 3% only with its recipe's EP all-to-all overlap; without it
  // the exposed all-to-alls make it 24% slow (1379 against 1712 tokens/s per GPU).
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/megatron_bridge_moe.json"));
  REQUIRE(suite.cases.size() == 11);
  const validate::ValidationReport r = validate::validate_suite(suite);
  REQUIRE(r.cases.size() == 11);
  for (const validate::CaseResult& c : r.cases) {
    CAPTURE(c.id);
    const double e = c.metrics.front().error;
    if (c.id == "bridge_qwen3-30b-a3b_fp8_cs_h100_16gpu_v26.04.01" || c.id == "bridge_qwen3-235b-a22b_fp8_mx_b200_256gpu_v26.04.01") {
      CHECK(e >= -0.30);
      CHECK(e <= -0.15);
    } else if (c.id.starts_with("bridge_gpt-oss-120b_")) {
      CHECK(e >= -0.42);
      CHECK(e <= -0.22);
    } else {
      CHECK(std::abs(e) <= 0.16);
    }
  }
  CHECK(r.primary.front().errors.mape <= 0.17);
  validate::Suite plain;
  for (validate::Case c : suite.cases) {
    if (c.id != "bridge_qwen3-235b-a22b_fp8_cs_h100_256gpu_v26.04.01") continue;
    REQUIRE(c.scenario.training.overlap_moe_expert_parallel_comm);
    c.scenario.training.overlap_moe_expert_parallel_comm = false;
    c.scenario.training.delay_wgrad_compute = false;
    plain.cases.push_back(std::move(c));
  }
  REQUIRE(plain.cases.size() == 1);
  const double without = validate::validate_suite(plain).cases.front().metrics.front().error;
  CHECK(without >= 0.15);
}

TEST_CASE("validate/secondary suites: NeMo's Blackwell performance summary: GB200 on 25.04 within 12%, B200 on 25.02 fast, Mixtral too") {
  // validate/suites/nemo_perf_summary.json (README, "A fourteenth suite"), in no fit: every row
  // of NeMo's 25.02 DGX-B200 and 25.04 DGX-GB200 pre-training tables (GPT-3 175B, Llama 3 8B /
  // 70B / 405B, Nemotron-4 15B / 340B, Mixtral 8x7B and 8x22B; FP8), the first check of Mixtral.
  // On GB200 (25.04) every row is within 12% (MAPE 7.0%); on B200 (25.02, the first release with
  // B200 recipes) every row comes out fast, 4-24%, Mixtral the most. The bounds hold these figures
  // against regressions.
  const SecondaryResult s = validate_secondary("validate/suites/nemo_perf_summary.json", 16);
  const validate::ValidationReport& r = s.report;
  REQUIRE(r.cases.size() == 16);
  int b200 = 0;
  int gb200 = 0;
  int flops_checked = 0;
  for (const validate::CaseResult& c : r.cases) {
    CAPTURE(c.id);
    CHECK(c.fits);
    const double e = c.metrics.front().error;
    REQUIRE(c.metrics.front().metric == validate::Metric::kIterationTime);
    if (c.metrics.size() == 2) {
      // The model FLOPs per step: trainsim's (predicted TFLOP/s x predicted time) against the
      // published TFLOP/s x the measured time, Megatron's formula on both sides; Llama 3.1 405B's
      // published figure counts 1.0% more per token. (Mixtral 8x22B's counts the causal half of
      // attention and is not compared.)
      const validate::MetricResult& time = c.metrics[0];
      const validate::MetricResult& tflops = c.metrics[1];
      REQUIRE(tflops.metric == validate::Metric::kModelTflops);
      const double ratio = (tflops.predicted * time.predicted) / (tflops.measured * time.measured);
      CHECK(std::abs(ratio - 1.0) <= (c.id.find("405b") != std::string::npos ? 0.012 : 0.002));
      ++flops_checked;
    }
    if (c.family == "gb200") {
      ++gb200;
      CHECK(std::abs(e) <= 0.12);
    } else {
      ++b200;
      CHECK(e < 0.0);
      CHECK(e >= -0.26);
    }
  }
  CHECK(b200 == 8);
  CHECK(gb200 == 8);
  CHECK(flops_checked == 14);
  for (const validate::PrimarySummary& p : r.primary) {
    MESSAGE((p.family.empty() ? "all" : p.family) << ": MAPE " << 100.0 * p.errors.mape << "%, max "
                                                  << 100.0 * p.errors.max_abs_error << "%");
    if (p.family == "gb200") CHECK(p.errors.mape <= 0.08);
  }
  CHECK(s.min_spearman >= 0.9);
}

TEST_CASE("validate/secondary suites: Megatron-Core's Mixtral 8x7B on H100: MCore v0.9 within 5%, v0.8 slower than predicted") {
  // validate/suites/megatron_moe_readme.json (README, "A fifteenth suite"), in no fit: the model
  // TFLOP/s Megatron-Core's MoE README states for Mixtral 8x7B in BF16 on 64 H100 with its
  // reference mapping (TP 1 EP 8 PP 4 x8), 438 as of MCore v0.8 and 468 as of v0.9; trainsim
  // prices the one mapping once (488.1), so v0.9 comes out 4.3% fast and v0.8 11.4% fast. The
  // bounds hold these figures against regressions.
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/megatron_moe_readme.json"));
  REQUIRE(suite.cases.size() == 2);
  const validate::ValidationReport r = validate::validate_suite(suite);
  REQUIRE(r.cases.size() == 2);
  for (const validate::CaseResult& c : r.cases) {
    CAPTURE(c.id);
    CHECK(c.fits);
    REQUIRE(c.metrics.front().metric == validate::Metric::kModelTflops);
    const double e = c.metrics.front().error;
    if (c.id.ends_with("_v0.9")) {
      CHECK(std::abs(e) <= 0.05);
    } else {
      CHECK(e > 0.0);
      CHECK(e <= 0.13);
    }
  }
}

TEST_CASE("validate/secondary suites: BigScience's plans for one 181B model on 384 A100: TP 4 ahead of TP 8 on both sides") {
  // validate/suites/bigscience_tr11_topology.json (README, "A sixteenth suite"), in no fit: 26
  // runs of 23 plans of one 181B GPT on 48 Jean Zay nodes, Feb. 2022, Megatron-DeepSpeed with
  // ZeRO-1 and full recomputation; the only measurement at hand of many competing plans for one
  // large model on A100. The bounds hold the README's figures (MAPE 9.9% over the 23 timed runs,
  // the 14 at a global batch of 2,048 sequences 5.5%) against regressions; the plans with the
  // most data parallelism come out fast (PP 2 DP 24: 26-30%), which Jean Zay's Omni-Path, slower
  // than its four 100 Gb/s links, explains only in part (README).
  const SecondaryResult s = validate_secondary("validate/suites/bigscience_tr11_topology.json", 26);
  CHECK(s.errors.n == 23);
  CHECK(s.errors.mape <= 0.12);
  bool family_seen = false;
  for (const validate::PrimarySummary& p : s.report.primary) {
    if (p.family != "bigscience-181b-gbs2048") continue;
    family_seen = true;
    CHECK(p.errors.mape <= 0.08);
  }
  CHECK(family_seen);
  std::map<std::string, std::pair<double, double>> times;  // id -> (predicted, measured)
  for (const validate::CaseResult& c : s.report.cases) {
    CAPTURE(c.id);
    REQUIRE(c.out_of_memory.has_value());
    if (*c.out_of_memory) {
      CHECK(c.metrics.empty());
      continue;
    }
    CHECK(c.fits);  // every plan that ran is predicted to fit
    REQUIRE(c.metrics.front().metric == validate::Metric::kIterationTime);
    times[c.id] = {c.metrics.front().predicted, c.metrics.front().measured};
  }
  // At the same pipeline depth (PP 12) and micro-batch (2), TP 4 with twice the data parallelism
  // is faster than TP 8, measured and predicted: the trade behind the plan search's
  // ranking of Narayanan et al.'s 145.6B model (README, "Capacity planning").
  const auto& tp4 = times.at("bigscience_tr11_181b_dp8_tp4_pp12_mbs2_gbs2048_2022-02-25");
  const auto& tp8 = times.at("bigscience_tr11_181b_dp4_tp8_pp12_mbs2_gbs2048_2022-02-25");
  CHECK(tp4.second < tp8.second);
  CHECK(tp4.first < tp8.first);
  // Memory verdicts: the plan with all 48 nodes in data parallelism (TP 8, PP 1) ran out of
  // memory, and so it does here; the two TP 2 PP 6 plans that did are predicted at 73 and 78 GiB
  // of 80, which the allocator's cache, NCCL's and DeepSpeed's buffers exceed (README).
  CHECK(s.report.memory_verdicts.n == 26);
  CHECK(s.report.memory_verdicts.agree >= 24);
  const auto& no = s.report.memory_verdicts.disagree;
  CHECK(std::find(no.begin(), no.end(), "bigscience_tr11_181b_dp48_tp8_pp1_mbs1_gbs2016_2022-02-25") == no.end());
}

TEST_CASE("validate/secondary suites: NeMo's long-sequence runs bound the attention model, both ways") {
  // validate/suites/nemo_long_sequence.json (README, "A seventh suite"), in no fit: Llama 2 7B on
  // H100 (NeMo 24.03) and Llama 3 8B on B200 (NeMo 25.04), FP8, 4K to 1M tokens with context
  // parallelism. Where the GEMMs dominate (4-8K) trainsim is within 2% on H100 and 1% on B200;
  // as attention takes over, H100 comes out up to 24% fast (that release's attention kernel is
  // slower than the cuDNN the H100 calibration is fitted to) while B200 stays within 3.5% all the
  // way to 1M tokens (its attention fitted to cuDNN's GB200 benchmark; with the H100 fit carried
  // over it was up to 29% slow). The bounds hold these figures against regressions.
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/nemo_long_sequence.json"));
  REQUIRE(suite.cases.size() == 17);
  const validate::ValidationReport r = validate::validate_suite(suite);
  std::map<std::string, std::vector<double>> errors;  // per family, in order of sequence length
  for (const validate::CaseResult& c : r.cases) errors[c.family].push_back(c.metrics.front().error);
  REQUIRE(errors["llama2-h100"].size() == 9);
  REQUIRE(errors["llama3-b200"].size() == 8);
  const std::vector<double>& h100 = errors["llama2-h100"];
  CHECK(std::abs(h100.front()) <= 0.03);
  CHECK(h100.back() >= 0.15);
  CHECK(h100.back() <= 0.30);
  for (const double e : errors["llama3-b200"]) CHECK(std::abs(e) <= 0.06);
  for (const validate::PrimarySummary& p : r.primary) {
    MESSAGE(p.family << ": MAPE " << 100.0 * p.errors.mape << "%, max " << 100.0 * p.errors.max_abs_error << "%");
    CHECK(p.errors.max_abs_error <= 0.30);
  }
}

TEST_CASE("validate/secondary suites: DeepSeek-V3 at scale: the FLOPs exact, the later stacks within 9%, the 25.05 ones fast") {
  // validate/suites/dgxc_deepseek_v3.json (README, "An eighth suite"), in no fit: DGX Cloud's
  // DeepSeek-V3 recipes (latent attention, 256 experts, one multi-token-prediction module, BF16).
  // The published TFLOP/s per GPU follow from trainsim's model FLOPs at the measured step time
  // (Megatron's formula with the module). Release 25.05 (NeMo 25.04) on 512 and 1,024 H100 and
  // 128-512 GB200 comes out 16-18% fast on H100 and 63-64% fast on GB200, whose measured times
  // stay at 34.2-34.3 s from 128 to 512 GPUs; the later releases' runs, 1,024 H100 with DeepEP
  // (25.08) and 256 GB200 (25.10), land at +1.2% and -8.1%, the first only with DeepEP's
  // node-aggregated dispatch (+44% priced as Megatron's alltoall), the second with its recipe's
  // shared-expert overlap priced free of SM sharing (-4.1% without the overlap). The bounds hold
  // these figures.
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/dgxc_deepseek_v3.json"));
  REQUIRE(suite.cases.size() == 7);
  const validate::ValidationReport r = validate::validate_suite(suite);
  int later = 0;
  for (const validate::CaseResult& c : r.cases) {
    CAPTURE(c.id);
    REQUIRE(c.metrics.size() == 2);
    const validate::MetricResult& time = c.metrics[0];
    const validate::MetricResult& tflops = c.metrics[1];
    REQUIRE(time.metric == validate::Metric::kIterationTime);
    REQUIRE(tflops.metric == validate::Metric::kModelTflops);
    // The model FLOPs per step: predicted TFLOP/s x predicted time = published TFLOP/s x measured time.
    CHECK(tflops.predicted * time.predicted == doctest::Approx(tflops.measured * time.measured).epsilon(0.005));
    if (c.id.ends_with("_v25.08")) {
      CHECK(std::abs(time.error) <= 0.05);
      ++later;
    } else if (c.id.ends_with("_v25.10")) {
      CHECK(time.error <= -0.06);
      CHECK(time.error >= -0.09);
      ++later;
    } else if (c.family == "deepseek-v3-h100") {
      CHECK(time.error <= -0.12);
      CHECK(time.error >= -0.22);
    } else {
      CHECK(c.family == "deepseek-v3-gb200");
      CHECK(time.error <= -0.55);
      CHECK(time.error >= -0.70);
    }
  }
  CHECK(later == 2);
  // The 25.08 run priced with Megatron's alltoall dispatcher instead: every token sent once per
  // expert, twice the InfiniBand traffic of DeepEP's dispatch on this plan.
  validate::Suite alltoall;
  for (const validate::Case& c : suite.cases) {
    if (c.id.ends_with("_v25.08")) alltoall.cases.push_back(c);
  }
  REQUIRE(alltoall.cases.size() == 1);
  alltoall.cases.front().scenario.training.moe_token_dispatcher_type = models::TokenDispatcher::kAllToAll;
  const validate::ValidationReport a = validate::validate_suite(alltoall);
  CHECK(a.cases.front().metrics.front().error >= 0.30);
  // The 25.10 run with its shared expert after the routed experts: 4% slower.
  validate::Suite serial;
  for (const validate::Case& c : suite.cases) {
    if (c.id.ends_with("_v25.10")) serial.cases.push_back(c);
  }
  REQUIRE(serial.cases.size() == 1);
  REQUIRE(serial.cases.front().scenario.training.moe_shared_expert_overlap);
  serial.cases.front().scenario.training.moe_shared_expert_overlap = false;
  const double overlapped_s = r.cases.back().metrics.front().predicted;
  REQUIRE(r.cases.back().id.ends_with("_v25.10"));
  const double serial_s = validate::validate_suite(serial).cases.front().metrics.front().predicted;
  CHECK(serial_s > 1.03 * overlapped_s);
  CHECK(serial_s < 1.06 * overlapped_s);
}

TEST_CASE(
    "validate/secondary suites: Megatron-LM's memory tests: every peak within 3% on A100, H100 and "
    "GB200") {
  // validate/suites/megatron_ci_memory.json (README, "An eleventh suite"), in no fit: the peak
  // memory PyTorch allocated on the last rank of Megatron-LM's functional tests
  // gpt3_7b_tp1_pp4_memory_speed and gpt3_7b_tp4_pp1_memory_speed (a 7B GPT at sequence 8,192,
  // distributed optimizer, no recomputation), against trainsim's peak of the last pipeline stage.
  // trainsim is 0.4-2.3% low on all six runs (56.0 GiB against 56.3-56.6 at TP 1 PP 4; 53.0
  // against 53.2-54.2 at TP 4); the GPUs differ only in their libraries' workspaces, which trainsim
  // does not count.
  const validate::Suite suite =
      validate::read_suite(testing::source_path("validate/suites/megatron_ci_memory.json"));
  REQUIRE(suite.cases.size() == 6);
  const validate::ValidationReport r = validate::validate_suite(suite);
  for (const validate::CaseResult& c : r.cases) {
    CAPTURE(c.id);
    REQUIRE(c.metrics.size() == 1);
    CHECK(c.metrics[0].metric == validate::Metric::kPeakMemory);
    CHECK(c.fits);
    CHECK(std::abs(c.metrics[0].error) <= 0.03);
  }
  REQUIRE(r.summary.size() == 1);
  CHECK(r.summary[0].errors.mape <= 0.02);
}

TEST_CASE(
    "validate/secondary suites: SimuMax's B200 runs: memory within 1.5%, step times 9-34% fast, MoE and all-to-all CP too") {
  // validate/suites/simumax_b200.json (README, "A twelfth suite"), in no fit: Megatron-LM steps the
  // SimuMax project measured on one 8-GPU B200 node (Llama 3 70B cut to 12 layers, Llama 3.1 405B
  // cut to 4, DeepSeek-V2/V3 cut to 4 with EP 4-8; BF16 on Transformer Engine 2.11, nothing
  // overlapped, Transformer Engine's fused cross-entropy). trainsim ranks the 36 plans of
  // 4,096-token sequences in order (Spearman 1.00 within each model) but predicts every step 14-34%
  // fast, TP 8 the most. The 7 runs of 32K and 128K tokens with all-to-all context parallelism
  // (cp_comm_type a2a, CP 4-8) come out 9-20% fast. All 19 memory peaks come out within 1.4%,
  // MAPE 0.4% (up to 8.6% low before Transformer Engine's placeholder weight gradients were
  // counted; MAPE 1.1% before the output layer's placeholder, the fused cross-entropy's in-place
  // gradient and the all-to-alls' second copy of the attention output). The bounds hold these
  // figures against regressions both ways.
  const validate::Suite suite =
      validate::read_suite(testing::source_path("validate/suites/simumax_b200.json"));
  REQUIRE(suite.cases.size() == 43);
  const validate::ValidationReport r = validate::validate_suite(suite);
  int memory = 0, context_parallel = 0;
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const validate::CaseResult& c = r.cases[i];
    CAPTURE(c.id);
    const bool a2a = suite.cases[i].scenario.parallel.context_parallel_size > 1;
    if (a2a) {
      CHECK(suite.cases[i].scenario.parallel.cp_comm_type == models::CpCommType::kA2a);
      ++context_parallel;
    }
    for (const validate::MetricResult& m : c.metrics) {
      if (m.metric == validate::Metric::kIterationTime) {
        CHECK(m.error <= (a2a ? -0.05 : -0.10));
        CHECK(m.error >= (a2a ? -0.22 : -0.36));
      } else {
        REQUIRE(m.metric == validate::Metric::kPeakMemory);
        CHECK(std::abs(m.error) <= 0.015);
        ++memory;
      }
    }
  }
  CHECK(context_parallel == 7);
  CHECK(memory == 19);
  REQUIRE(r.summary.size() == 2);
  REQUIRE(r.summary[0].errors.spearman);
  CHECK(*r.summary[0].errors.spearman >= 0.95);
}
