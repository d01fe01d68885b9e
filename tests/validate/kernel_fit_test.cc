#include "validate/kernel_fit.h"

#include <cmath>
#include <cstdint>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "config/hardware_reader.h"
#include "config/scenario.h"
#include "sim/error.h"
#include "test_files.h"
#include "topologies/compute_model.h"
#include "validate/calibrator.h"
#include "validate/sustained_fit.h"
#include "validate/validation_report.h"

using namespace trainsim;
using testing::contains;

namespace {

const std::string kGemmFile = testing::source_path("validate/data/gemm_measurements.json");
const std::string kB200GemmFile = testing::source_path("validate/data/gemm_b200_xla.json");
const std::string kAttentionFile = testing::source_path("validate/data/attention_measurements.json");
const std::string kGb200AttentionFile = testing::source_path("validate/data/attention_gb200_cudnn.json");
const std::vector<std::string> kCudnnModelsFiles = {testing::source_path("validate/data/attention_cudnn_models_h200.json"),
                                                     testing::source_path("validate/data/attention_cudnn_models_gb200.json"),
                                                     testing::source_path("validate/data/attention_cudnn_models_gb300.json")};

topo::GpuSpec h100() { return config::read_gpu("h100-sxm5-80gb", "test", ""); }

// A deterministic relative perturbation in [-amplitude, amplitude] for point i (an LCG).
double perturbation(std::size_t i, double amplitude) {
  const std::uint64_t x = (i + 1) * 6364136223846793005ULL + 1442695040888963407ULL;
  return amplitude * (2.0 * static_cast<double>(x >> 11) / 9007199254740992.0 - 1.0);
}

// Points measured on a GPU whose GEMMs follow `truth`, each perturbed by up to `amplitude`.
std::vector<validate::GemmPoint> synthetic_gemms(const topo::GpuSpec& gpu, const topo::GemmCalibration& truth,
                                                 double amplitude = 0) {
  topo::GpuSpec g = gpu;
  g.calibration.gemm_16bit = truth;
  const topo::ComputeModel model(g, false);
  std::vector<validate::GemmPoint> points;
  for (std::int64_t b : {1, 4}) {
    for (std::int64_t m : {512, 1024, 2048, 4096, 8192}) {
      for (std::int64_t n : {256, 1024, 4096}) {
        for (std::int64_t k : {512, 2048, 8192}) {
          validate::GemmPoint p;
          p.table = "synthetic";
          p.column = "bf16xbf16->bf16";
          p.b = b;
          p.m = m;
          p.n = n;
          p.k = k;
          p.tflops = model.tflops(validate::gemm_kernel(p)) * (1.0 + perturbation(points.size(), amplitude));
          points.push_back(p);
        }
      }
    }
  }
  return points;
}

std::string sweep_error(const std::string& text) {
  try {
    validate::read_gemm_sweep(testing::temp_file("gemm.json", text));
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

const validate::FittedParameter* find_parameter(const validate::FitReport& r, const std::string& name) {
  for (const validate::FittedParameter& p : r.parameters) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// A parameter a synthetic sweep was generated with.
struct ParameterTruth {
  const char* name;
  double truth;
};

// The fitted parameter `name` of `r`, which must carry a positive standard error.
const validate::FittedParameter& with_standard_error(const validate::FitReport& r, const std::string& name) {
  const validate::FittedParameter* p = find_parameter(r, name);
  REQUIRE(p != nullptr);
  REQUIRE(p->standard_error.has_value());
  CHECK(*p->standard_error > 0);
  return *p;
}

// `suite` with every measurement replaced by what the model predicts at sustained fraction
// `fraction`, times `slowdown(case)` (time-like; throughputs divided by it).
template <typename Slowdown>
validate::Suite measured_at(validate::Suite suite, const topo::ComputeCalibration& calibration, double fraction,
                            Slowdown slowdown) {
  topo::ComputeCalibration at = calibration;
  at.sustained_fraction = fraction;
  validate::Suite exact = suite;
  for (validate::Case& c : exact.cases) c.scenario.cluster.gpu.calibration = at;
  const validate::ValidationReport predicted = validate::validate_suite(exact, {});
  for (std::size_t i = 0; i < suite.cases.size(); ++i) {
    const double factor = slowdown(suite.cases[i]);
    for (validate::Measurement& m : suite.cases[i].measured) {
      for (const validate::MetricResult& r : predicted.cases[i].metrics) {
        if (r.metric != m.metric) continue;
        const bool throughput = m.metric != validate::Metric::kIterationTime;
        m.value = r.predicted * (throughput ? 1 / factor : factor);
      }
    }
  }
  return suite;
}

// The GEMM parameters the synthetic sweeps are generated from: max efficiency 0.8, wave overhead
// 1.5 us, launch overhead 3 us.
topo::GemmCalibration gemm_truth(const topo::GpuSpec& gpu) {
  topo::GemmCalibration truth = gpu.calibration.gemm_16bit;
  truth.max_efficiency = 0.8;
  truth.wave_overhead = sim::Duration::from_seconds(1.5e-6);
  truth.launch_overhead = sim::Duration::from_seconds(3e-6);
  return truth;
}

}  // namespace

TEST_CASE("validate/fit_gemm: recovers the parameters that generated a sweep") {
  const topo::GpuSpec gpu = h100();
  const topo::GemmCalibration truth = gemm_truth(gpu);
  topo::GemmCalibration start = truth;
  start.max_efficiency = 0.6;
  start.wave_overhead = sim::Duration::from_seconds(0.2e-6);
  start.launch_overhead = sim::Duration::from_seconds(9e-6);
  const validate::GemmFit fit = validate::fit_gemm(gpu, sim::DataType::kBf16, synthetic_gemms(gpu, truth), start);
  CHECK(fit.report.fitted);
  CHECK(fit.calibration.max_efficiency == doctest::Approx(0.8).epsilon(0.005));
  CHECK(fit.calibration.wave_overhead.seconds() == doctest::Approx(1.5e-6).epsilon(0.02));
  CHECK(fit.calibration.launch_overhead.seconds() == doctest::Approx(3e-6).epsilon(0.02));
  CHECK(fit.report.errors.mape < 0.005);
}

TEST_CASE("validate/fit_gemm: points faster than the peak and inconsistent tables are left out, with a note") {
  const topo::GpuSpec gpu = h100();
  std::vector<validate::GemmPoint> points = synthetic_gemms(gpu, gpu.calibration.gemm_16bit);
  validate::GemmPoint impossible = points.back();
  impossible.table = "too-fast";
  impossible.tflops = 1500;  // above the 989 TFLOP/s dense bf16 peak
  points.push_back(impossible);
  const validate::GemmFit fit = validate::fit_gemm(gpu, sim::DataType::kBf16, points, gpu.calibration.gemm_16bit);
  std::size_t large = 0;
  for (const validate::GemmPoint& p : points) large += p.flops() >= 1e9 ? 1u : 0u;
  CHECK(fit.report.residuals.size() == large - 1);
  bool noted = false;
  for (const std::string& n : fit.report.notes) noted = noted || contains(n, "too-fast: 1 points above the dense peak");
  CHECK(noted);
}

namespace {

// The shipped calibration of `gpu` against the points of one dtype and >= 1 GFLOP of a GEMM sweep
// file's tables measured on `gpu_preset`.
validate::ErrorSummary gemm_calibration_errors(const topo::GpuSpec& gpu, const std::string& file,
                                               const std::string& gpu_preset, sim::DataType dtype) {
  std::vector<validate::GemmPoint> points;
  for (const validate::GemmTable& t : validate::read_gemm_sweep(file)) {
    if (t.gpu_preset != gpu_preset) continue;
    for (const validate::GemmPoint& p : t.points) {
      if (p.dtype == dtype && p.flops() >= 1e9) points.push_back(p);
    }
  }
  REQUIRE(points.size() == 310);
  const topo::ComputeModel model(gpu, /*in_training=*/false);
  std::vector<double> predicted, measured;
  for (const validate::GemmPoint& p : points) {
    predicted.push_back(model.tflops(validate::gemm_kernel(p)));
    measured.push_back(p.tflops);
  }
  return validate::summarize(predicted, measured);
}

// `trainsim calibrate FILE` (over the GPU's own calibration as base) writes `shipped` byte for byte.
void check_refit_reproduces(const std::string& file, const std::string& gpu_preset, const std::string& shipped,
                            const std::vector<std::string>& check_runs = {}) {
  validate::CalibrationInputs in;
  in.files = {file};
  in.check_runs = check_runs;
  in.jobs = 2;
  const validate::CalibrationResult r = validate::calibrate(in);
  CHECK(r.gpu_preset == gpu_preset);
  const std::string written = validate::calibration_json(r).dump(2) + "\n";
  CHECK(written == testing::read_text(testing::source_path(shipped)));
}

}  // namespace

TEST_CASE("validate/calibration: the shipped H100 GEMM calibration reproduces the shipped sweep (MAPE <= 10% over >= 1 GFLOP)") {
  const validate::ErrorSummary s = gemm_calibration_errors(h100(), kGemmFile, "h100-sxm5-80gb", sim::DataType::kBf16);
  CHECK(s.mape <= 0.10);
  CHECK(*s.spearman > 0.95);
}

TEST_CASE("validate/calibrate: the shipped H100 calibration predicts kernels measured on an H100 (held out of its fit)") {
  // validate/data/measured/2026-11-27-h100: trainsim-bench-gemm (cuBLASLt, random operands) and
  // bench_attention.py (PyTorch's cuDNN and FlashAttention-2 kernels) on one H100 80GB HBM3.
  // Neither entered h100.json; `calibrate` reports how its parameters did on them before refitting.
  validate::CalibrationInputs in;
  in.files = {testing::source_path("validate/data/measured/2026-11-27-h100/gemm.json"),
              testing::source_path("validate/data/measured/2026-11-27-h100/attention.json")};
  in.jobs = 1;
  const validate::CalibrationResult r = validate::calibrate(in);
  CHECK(r.gpu_preset == "h100-sxm5-80gb");
  std::map<std::string, validate::ErrorSummary> before;
  for (const validate::FitReport& f : r.reports) {
    if (f.before) before[f.part] = *f.before;
  }
  REQUIRE(before.count("gemm bf16") == 1);
  CHECK(before["gemm bf16"].n == 583);
  CHECK(before["gemm bf16"].mape <= 0.10);  // the issue's bound for the shipped sweep, met on new measurements
  CHECK(*before["gemm bf16"].spearman > 0.95);
  REQUIRE(before.count("gemm fp8") == 1);
  CHECK(before["gemm fp8"].mape <= 0.11);
  REQUIRE(before.count("attention forward") == 1);
  CHECK(before["attention forward"].mape <= 0.12);
  REQUIRE(before.count("attention backward") == 1);
  CHECK(before["attention backward"].mape <= 0.07);
  // Refitted to them, the same model reproduces them closer: the parameters, not the form, moved.
  for (const validate::FitReport& f : r.reports) {
    if (f.before && f.part.rfind("gemm", 0) == 0) CHECK(f.errors.mape < f.before->mape);
  }
  CHECK(contains(validate::residuals_text(r, false), "before this fit (the base calibration): MAPE 9.1%"));
}

TEST_CASE("validate/calibrate: refitting the GEMMs of the shipped sweep reproduces scenarios/calibration/h100.json byte for byte") {
  // With the file's checks: the held-out DGX Cloud runs, their NeMo 25.04 successors,
  // Megatron-Bridge's H100 rows (Llama, then the mixtures of experts), MosaicML's H100 tables
  // (PyTorch FSDP under Composer) and Megatron-Core's Mixtral 8x7B figures.
  check_refit_reproduces(kGemmFile, "h100-sxm5-80gb", "scenarios/calibration/h100.json",
                         {testing::source_path("validate/suites/dgxc_heldout.json"), testing::source_path("validate/suites/dgxc_v2504.json"),
                          testing::source_path("validate/suites/megatron_bridge_llama.json"),
                          testing::source_path("validate/suites/megatron_bridge_moe.json"),
                          testing::source_path("validate/suites/mosaicml_h100.json"),
                          testing::source_path("validate/suites/megatron_moe_readme.json")});
}

TEST_CASE("validate/calibrate: runs priced with a calibration keep the attention implementation they name") {
  // MosaicML's H100 cases name FlashAttention-2 or MPT's Triton kernel
  // (training.attention_implementation), h100.json's alternatives to the cuDNN attention it
  // prices by default. A check (--check-runs) or a fit prices each case with the calibration at
  // hand; the case's choice must survive it, or those runs are priced with cuDNN's faster
  // attention (their long-sequence rows 10% faster).
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/mosaicml_h100.json"), "65536");
  REQUIRE(suite.cases.size() >= 3);
  topo::ComputeCalibration cal = h100().calibration;
  REQUIRE(cal.attention.implementation == "cudnn");
  const validate::Suite priced = validate::with_calibration(suite, topo::Architecture::kHopper, cal, cal.sustained_fraction);
  REQUIRE(priced.cases.size() == suite.cases.size());
  for (const validate::Case& c : priced.cases) {
    const std::string& named = c.scenario.training.attention_implementation;
    CHECK((named == "flash_attention_2" || named == "mpt_triton"));
    CHECK(c.scenario.cluster.gpu.calibration.attention.implementation == named);
  }
  const validate::ValidationReport as_read = validate::validate_suite(suite);
  const validate::ValidationReport as_priced = validate::validate_suite(priced);
  REQUIRE(as_read.cases.size() == as_priced.cases.size());
  for (std::size_t i = 0; i < as_read.cases.size(); ++i) {
    CAPTURE(as_read.cases[i].id);
    CHECK(as_priced.cases[i].metrics.front().predicted == as_read.cases[i].metrics.front().predicted);
  }
  // A calibration without that implementation cannot price them as stated: an input error.
  cal.attention_alternatives.clear();
  CHECK_THROWS_AS(validate::with_calibration(suite, topo::Architecture::kHopper, cal, cal.sustained_fraction), InputError);
}

TEST_CASE("validate/calibrate: refitting the GEMMs of XLA's B200 table reproduces scenarios/calibration/b200.json, its checks aside") {
  // Only the GEMMs are refitted; the rest stays as the file holds it (attention from the GB200
  // cuDNN benchmark, the in-training factors from the H100 fit), which is what a refit over its
  // own base keeps. The file's checks (fit.checks: the Blackwell suites predicted anew) are left
  // out here, as a refit without --check-runs leaves them out; the full fit below reproduces them
  // byte for byte (predicting 97 runs twice costs minutes under the sanitizers).
  validate::CalibrationInputs in;
  in.files = {kB200GemmFile};
  in.jobs = 2;
  const validate::CalibrationResult r = validate::calibrate(in);
  CHECK(r.gpu_preset == "b200");
  nlohmann::json shipped = nlohmann::json::parse(testing::read_text(testing::source_path("scenarios/calibration/b200.json")));
  REQUIRE(shipped["fit"].contains("checks"));
  shipped["fit"].erase("checks");
  const nlohmann::json written = validate::calibration_json(r);
  CHECK_FALSE(written["fit"].contains("checks"));
  CHECK(written.dump(2) == shipped.dump(2));
}

TEST_CASE("validate/calibrate: SimuMax's own B200 GEMM sweep halves the error of its B200 runs, a what-if beside b200.json") {
  // validate/data/gemm_b200_simumax.json: Transformer Engine GEMMs timed on the machine of
  // validate/suites/simumax_b200.json. Where its shapes meet XLA's table they agree; the larger
  // training shapes, beyond XLA's 4096 in each dimension, run a quarter below XLA's 4096^3.
  const std::vector<validate::GemmTable> sweep = validate::read_gemm_sweep(testing::source_path("validate/data/gemm_b200_simumax.json"));
  const std::vector<validate::GemmTable> xla = validate::read_gemm_sweep(kB200GemmFile);
  REQUIRE(sweep.size() == 1);
  CHECK(sweep[0].points.size() == 514);
  auto tflops = [](const validate::GemmTable& t, std::int64_t m, std::int64_t n, std::int64_t k, const char* note) {
    for (const validate::GemmPoint& p : t.points) {
      if (p.b == 1 && p.m == m && p.n == n && p.k == k && p.dtype == sim::DataType::kBf16) return p.tflops;
    }
    FAIL(note);
    return 0.0;
  };
  const double xla_cube = tflops(xla[0], 4096, 4096, 4096, "XLA 4096^3");
  CHECK(std::abs(tflops(sweep[0], 4096, 4096, 4096, "sweep 4096^3") / xla_cube - 1) < 0.05);
  CHECK(tflops(sweep[0], 4096, 8192, 8192, "sweep 4096 x 8192 x 8192") < 0.85 * xla_cube);
  // Fitted over b200.json (its GEMMs replaced, all else kept), the sweep's calibration prices
  // SimuMax's runs at about half the error of b200.json's (19% fast): 10%, no longer all fast.
  validate::CalibrationInputs in;
  in.files = {testing::source_path("validate/data/gemm_b200_simumax.json")};
  in.gpu = "b200";
  in.base = testing::source_path("scenarios/calibration/b200.json");
  in.check_runs = {testing::source_path("validate/suites/simumax_b200.json")};
  in.jobs = 2;
  const validate::CalibrationResult r = validate::calibrate(in);
  CHECK(r.gpu.calibration.gemm_16bit.max_efficiency < 0.6);
  REQUIRE(r.fit["checks"].size() == 1);
  CHECK(r.fit["checks"][0]["mape"].get<double>() < 0.12);
  CHECK(std::abs(r.fit["checks"][0]["mean_time_error"].get<double>()) < 0.05);
}

TEST_CASE("validate/calibrate: the full B200 fit (XLA's GEMMs, cuDNN's GB200 attention) reproduces scenarios/calibration/b200.json") {
  validate::CalibrationInputs in;
  in.files = {kB200GemmFile, kGb200AttentionFile};
  in.gpu = "b200";
  in.check_runs = {testing::source_path("validate/suites/dgxc_gb200.json"),
                   testing::source_path("validate/suites/nemo_long_sequence.json"),
                   testing::source_path("validate/suites/megatron_bridge_llama.json"),
                   testing::source_path("validate/suites/megatron_bridge_moe.json"),
                   testing::source_path("validate/suites/simumax_b200.json"),
                   testing::source_path("validate/suites/nemo_perf_summary.json")};
  in.jobs = 2;
  const validate::CalibrationResult r = validate::calibrate(in);
  CHECK(validate::calibration_json(r).dump(2) + "\n" == testing::read_text(testing::source_path("scenarios/calibration/b200.json")));
}

TEST_CASE("validate/calibrate: attention measured on the same silicon at another clock is scaled by the peak ratio") {
  // GB200 and B200 are one die at two power limits (2.5 and 2.25 PFLOP/s BF16): fitted for B200
  // from GB200's benchmark, or for GB200 itself, the efficiencies (fractions of each GPU's own
  // peak) come out the same, and the B200 fit says how its points were scaled.
  auto fit_for = [](const std::string& gpu) {
    validate::CalibrationInputs in;
    in.files = {kGb200AttentionFile};
    in.gpu = gpu;
    in.jobs = 1;
    return validate::calibrate(in);
  };
  const validate::CalibrationResult b200 = fit_for("b200");
  const validate::CalibrationResult gb200 = fit_for("gb200");
  const nlohmann::json cb = validate::calibration_json(b200)["flash_attention"];
  const nlohmann::json cg = validate::calibration_json(gb200)["flash_attention"];
  for (const char* pass : {"forward", "backward"}) {
    CAPTURE(pass);
    CHECK(cb[pass]["efficiency"].get<double>() == doctest::Approx(cg[pass]["efficiency"].get<double>()).epsilon(0.002));
    CHECK(cb[pass]["row_overhead"].get<double>() == doctest::Approx(cg[pass]["row_overhead"].get<double>()).epsilon(0.01));
    CHECK(cb[pass]["efficiency"].get<double>() < 0.767);  // below the B200 GEMM ceiling the fit is bounded by
  }
  const std::string notes = b200.fit["attention_forward"]["notes"].dump();
  CHECK(notes.find("scaled by the BF16 peak ratio 0.9 (b200 / gb200)") != std::string::npos);
  CHECK(!gb200.fit["attention_forward"].contains("notes"));
}

TEST_CASE("validate/calibrate: an attention table of another GPU is an error naming the file and the table's gpu") {
  validate::CalibrationInputs in;
  in.files = {kAttentionFile};  // H100
  in.gpu = "b200";
  try {
    validate::calibrate(in);
    FAIL("expected an input error");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find(kAttentionFile + ": /tables/0/gpu: expected b200 or a GPU of the same silicon") != std::string::npos);
    CHECK(what.find("--gpu h100-sxm5-80gb") != std::string::npos);
  }
}

TEST_CASE("validate/calibration: the shipped B200 GEMM calibration reproduces XLA's sm_100 table (MAPE <= 10% over >= 1 GFLOP)") {
  const topo::GpuSpec gpu = config::read_gpu("b200", "test", "");
  for (const sim::DataType dtype : {sim::DataType::kBf16, sim::DataType::kFp8}) {
    const validate::ErrorSummary s = gemm_calibration_errors(gpu, kB200GemmFile, "b200", dtype);
    CHECK(s.mape <= 0.10);
    CHECK(*s.spearman > 0.95);
  }
}

namespace {

// Benchmark points of a GPU whose forward attention follows `truth` exactly (16k tokens, hidden
// 2048, as the FlashAttention-3 paper measures).
std::vector<validate::AttentionPoint> synthetic_attention(topo::GpuSpec gpu, const topo::AttentionPassCalibration& truth,
                                                         double amplitude = 0) {
  gpu.calibration.attention.forward = truth;
  gpu.calibration.memory_kernel_overhead = sim::Duration::zero();  // the fit has no launch term
  const topo::ComputeModel model(gpu, false);
  std::vector<validate::AttentionPoint> points;
  for (bool causal : {false, true}) {
    for (std::int64_t d : {64, 128}) {
      for (std::int64_t s : {512, 1024, 2048, 4096, 8192, 16384}) {
        validate::AttentionPoint p;
        p.table = "synthetic";
        p.causal = causal;
        p.head_dim = d;
        p.seq_len = s;
        p.batch = 16384 / s;
        p.heads = 2048 / d;
        p.tflops = model.tflops(validate::attention_kernel(p)) * (1.0 + perturbation(points.size(), amplitude));
        points.push_back(p);
      }
    }
  }
  return points;
}

}  // namespace

TEST_CASE("validate/fit_attention: recovers the parameters that generated a benchmark") {
  const topo::GpuSpec gpu = h100();
  const topo::AttentionPassCalibration truth{0.6, 2e12, 0.0, 2.0};
  const validate::AttentionFit fit =
      validate::fit_attention(gpu, false, synthetic_attention(gpu, truth), 128, topo::AttentionPassCalibration{}, 0.9);
  REQUIRE(fit.report.fitted);
  CHECK(fit.calibration.efficiency == doctest::Approx(0.6).epsilon(0.01));
  CHECK(fit.calibration.softmax_rate == doctest::Approx(2e12).epsilon(0.01));
  CHECK(fit.calibration.softmax_overlap == 0.0);
  CHECK(fit.calibration.row_overhead == doctest::Approx(2.0).epsilon(0.01));
  CHECK(fit.report.errors.mape < 0.005);
}

TEST_CASE("validate/fit_attention: with overlapped softmax the fit reproduces the benchmark and predicts other lengths") {
  // With two head dimensions, efficiency, softmax rate and overlap trade off: the fit takes the
  // smallest overlap that explains the points; what it predicts must still match.
  topo::GpuSpec gpu = h100();
  const topo::AttentionPassCalibration truth{0.6, 2e12, 0.5, 2.0};
  const validate::AttentionFit fit =
      validate::fit_attention(gpu, false, synthetic_attention(gpu, truth), 128, topo::AttentionPassCalibration{}, 0.9);
  REQUIRE(fit.report.fitted);
  CHECK(fit.report.errors.mape < 0.005);
  validate::AttentionPoint unseen;
  unseen.head_dim = 128;
  unseen.seq_len = 3072;
  unseen.batch = 3;
  unseen.heads = 16;
  unseen.causal = true;
  gpu.calibration.memory_kernel_overhead = sim::Duration::zero();
  topo::GpuSpec a = gpu, b = gpu;
  a.calibration.attention.forward = truth;
  b.calibration.attention.forward = fit.calibration;
  const sim::Kernel k = validate::attention_kernel(unseen);
  CHECK(topo::ComputeModel(b, false).tflops(k) == doctest::Approx(topo::ComputeModel(a, false).tflops(k)).epsilon(0.01));
}

TEST_CASE("validate/fit_attention: a matmul-bound kernel is found from a softmax-bound base") {
  // A base whose softmax rate belongs to a slower GPU (H100's on a B200) puts every point on the
  // softmax-bound side, where the iteration used to stay and find only unphysical fits; the second
  // start, from the matmul-bound side, recovers the kernel. Points as cuDNN's benchmark takes
  // them: causal, head dim 128, one sequence of 128 heads, 512 to 128K tokens.
  topo::GpuSpec gpu = config::read_gpu("b200", "test", "");
  const topo::AttentionPassCalibration truth{0.65, 0.0, 1.0, 4.0};
  gpu.calibration.attention.forward = truth;
  gpu.calibration.memory_kernel_overhead = sim::Duration::zero();  // the fit has no launch term
  std::vector<validate::AttentionPoint> points;
  for (std::int64_t s = 512; s <= 131072; s *= 2) {
    validate::AttentionPoint p;
    p.causal = true;
    p.head_dim = 128;
    p.seq_len = s;
    p.batch = 1;
    p.heads = 128;
    p.tflops = topo::ComputeModel(gpu, false).tflops(validate::attention_kernel(p));
    points.push_back(p);
  }
  const topo::AttentionPassCalibration h100_base{0.8704, 2.059e12, 0.5, 1.838};
  const validate::AttentionFit fit = validate::fit_attention(gpu, false, points, 128, h100_base, 0.767);
  REQUIRE(fit.report.fitted);
  CHECK(fit.calibration.efficiency == doctest::Approx(0.65).epsilon(0.01));
  CHECK(fit.calibration.row_overhead == doctest::Approx(4.0).epsilon(0.02));
  CHECK(fit.report.errors.mape < 0.005);
}

TEST_CASE("validate/read_attention_sweep: the shipped benchmarks, batch and heads from the table's setup") {
  const auto tables = validate::read_attention_sweep(kAttentionFile);
  REQUIRE(!tables.empty());
  const validate::AttentionPoint& p = tables.front().points.front();
  CHECK(p.batch * p.seq_len == 16384);
  CHECK(p.heads * p.head_dim == 2048);
}

TEST_CASE("validate/read_attention_sweep: a sliding window counts the keys each query sees, on causal rows only") {
  const auto read = [](const std::string& row) {
    return validate::read_attention_sweep(testing::temp_file(
        "attention.json", R"({"tables": [{"id": "t", "source": "s", "gpu": "gb200", "implementation": "cudnn", "rows": [)" + row + "]}]}"));
  };
  const auto full = read(R"({"pass": "forward", "causal": true, "head_dim": 64, "seq_len": 4096, "batch": 2, "heads": 64, "tflops": 1})");
  const auto windowed =
      read(R"({"pass": "forward", "causal": true, "head_dim": 64, "seq_len": 4096, "batch": 2, "heads": 64, "window": 127, "tflops": 1})");
  const validate::AttentionPoint& w = windowed.front().points.front();
  CHECK(w.window == 127);
  // 128 keys per query but for the first 127: (128 x 129 / 2 + 3968 x 128) pairs of 4 x 64 FLOPs
  // for each of the 2 x 64 sequences and heads.
  CHECK(w.flops() == doctest::Approx(128 * 4.0 * 64 * (128.0 * 129 / 2 + 3968.0 * 128)));
  CHECK(w.flops() < full.front().points.front().flops() / 10);
  // Its kernel prices only the key tiles within the window (2 per query tile against 16.5), each
  // query tile still paying its fixed cost.
  const topo::ComputeModel model(config::read_gpu("gb200", "test", ""), /*in_training=*/false);
  CHECK(model.kernel_time(validate::attention_kernel(w)).seconds() * 2.5 <
        model.kernel_time(validate::attention_kernel(full.front().points.front())).seconds());
  try {
    read(R"({"pass": "forward", "head_dim": 64, "seq_len": 4096, "batch": 1, "heads": 1, "window": 127, "tflops": 1})");
    FAIL("a window without a causal mask was read");
  } catch (const InputError& e) {
    CHECK(contains(e.what(), "/tables/0/rows/0/window: a sliding window needs a causal row"));
  }
}

TEST_CASE("validate/read_attention_sweep: cuDNN's model-shaped benchmarks check the shipped attention pricing on H200, GB200 and GB300") {
  // validate/data/attention_cudnn_models_*.json (tools/import_cudnn_sdpa.py): cuDNN's own kernel
  // times for the attention of Llama 3.1, DeepSeek-V3 (latent heads of 192 and 128) and GPT-OSS
  // (head dim 64, a sliding window), none of them in a fit. h100.json prices H200's, b200.json
  // GB200's and GB300's (at their own peaks).
  // Errors of the kernel time: (predicted - measured) / measured.
  struct Errors {
    double full = 0, window = 0;  // mean |error| without a window; mean error of the windowed forward rows
    int n_full = 0, n_window = 0;
  };
  std::map<std::string, Errors> errors;
  std::map<std::string, std::map<std::tuple<bool, bool, std::int64_t, std::int64_t>, double>> tflops;  // gpu -> shape -> measured
  std::vector<validate::AttentionTable> tables;
  for (const std::string& file : kCudnnModelsFiles) {
    for (validate::AttentionTable& t : validate::read_attention_sweep(file)) tables.push_back(std::move(t));
  }
  for (const validate::AttentionTable& t : tables) {
    const topo::ComputeModel model(config::read_gpu(t.gpu, "test", ""), /*in_training=*/false);
    Errors& e = errors[t.gpu];
    for (const validate::AttentionPoint& p : t.points) {
      const double error = p.tflops / model.tflops(validate::attention_kernel(p)) - 1;
      if (p.window == 0) {
        e.full += std::abs(error);
        ++e.n_full;
        tflops[t.gpu][{p.backward, p.causal, p.head_dim, p.seq_len}] = p.tflops;
      } else if (!p.backward) {
        e.window += error;
        ++e.n_window;
      }
    }
  }
  REQUIRE(errors.size() == 3);
  for (auto& [gpu, e] : errors) {
    e.full /= e.n_full;
    e.window /= e.n_window;
    MESSAGE(gpu << ": MAPE " << e.full << " over " << e.n_full << " rows without a window; windowed forward rows " << e.window
                << " on average");
  }
  CHECK(errors["h200-sxm-141gb"].n_full == 20);
  CHECK(errors["h200-sxm-141gb"].full < 0.15);  // 10.9%, slow: cuDNN 9.19 on H200 against the FA3 paper's H100 cuDNN
  CHECK(errors["gb200"].n_full == 40);
  CHECK(errors["gb200"].full < 0.15);  // 9.3%, latent attention's backward the worst (13-21% fast from 16K on)
  CHECK(std::abs(errors["h200-sxm-141gb"].window) < 0.1);  // a 1,023-key window on Hopper: 5.9% slow on average
  CHECK(errors["gb200"].window < -0.25);                    // a 127-key window on Blackwell: 37% fast on average
  // GB300 runs the same shapes faster than GB200 at the same datasheet peaks, which b200.json does
  // not price (both come out at GB200's speed).
  double ratio = 0;
  int matched = 0;
  for (const auto& [shape, gb300] : tflops["gb300"]) {
    if (std::get<0>(shape) || !tflops["gb200"].count(shape)) continue;  // forward rows
    ratio += gb300 / tflops["gb200"][shape];
    ++matched;
  }
  REQUIRE(matched == 20);
  ratio /= matched;
  MESSAGE("GB300 / GB200 forward TFLOP/s on the same shapes: " << ratio);
  CHECK(ratio > 1.1);  // 1.17
}

TEST_CASE("validate/read_gemm_sweep: bad sweeps name the file, the JSON path and what was expected") {
  CHECK(contains(sweep_error("{}"), ": /: expected a GEMM measurement file"));
  CHECK(contains(sweep_error(R"([{"id": "t", "source": "s", "rows": [{"b": 1, "n": 2, "k": 3, "bf16xbf16->bf16": 5}]}])"),
                 "/0/rows/0/m"));
  CHECK(contains(sweep_error(R"([{"id": "t", "source": "s", "rows": [{"m": 1, "n": 2, "k": 3, "bf16xbf16->bf16": "fast"}]}])"),
                 "/0/rows/0/bf16xbf16->bf16"));
  CHECK(contains(sweep_error(R"([{"id": "t", "source": "s", "rows": [{"m": 1, "n": 2, "k": 3, "speed": 5}]}])"),
                 "/0/rows/0/speed: unknown key"));
  CHECK(contains(sweep_error(R"([{"id": "t", "rows": []}])"), "/0/source"));
}

TEST_CASE("validate/same_gpu: measurement names match presets by their leading letters and digits") {
  CHECK(validate::same_gpu("H100 SXM", "h100-sxm5-80gb", "H100-SXM5-80GB"));
  CHECK(validate::same_gpu("A100 SXM", "a100-sxm4-40gb", "A100-SXM4-40GB"));
  CHECK_FALSE(validate::same_gpu("A100 PCIe", "a100-sxm4-80gb", "A100-SXM4-80GB"));
  CHECK_FALSE(validate::same_gpu("GH200 SXM (900W, 141GiB HBM3e)", "h100-sxm5-80gb", "H100-SXM5-80GB"));
  CHECK_FALSE(validate::same_gpu("", "h100-sxm5-80gb", "H100-SXM5-80GB"));
}

TEST_CASE("validate/fit_gemm: standard errors grow with the measurement noise and cover the true parameters") {
  const topo::GpuSpec gpu = h100();
  const topo::GemmCalibration truth = gemm_truth(gpu);
  const validate::GemmFit quiet = validate::fit_gemm(gpu, sim::DataType::kBf16, synthetic_gemms(gpu, truth, 0.01), truth);
  const validate::GemmFit loud = validate::fit_gemm(gpu, sim::DataType::kBf16, synthetic_gemms(gpu, truth, 0.04), truth);
  const ParameterTruth parameters[] = {{"max_efficiency", 0.8}, {"wave_overhead_us", 1.5}, {"launch_overhead_us", 3.0}};
  for (const ParameterTruth& expected : parameters) {
    CAPTURE(expected.name);
    const validate::FittedParameter& q = with_standard_error(quiet.report, expected.name);
    const validate::FittedParameter& l = with_standard_error(loud.report, expected.name);
    // Four times the noise, about four times the error bar.
    CHECK(*l.standard_error / *q.standard_error == doctest::Approx(4.0).epsilon(0.35));
    // The truth lies within four standard errors of the noisy fit.
    CHECK(std::abs(l.value - expected.truth) < 4 * *l.standard_error);
  }
}

TEST_CASE("validate/fit_gemm: no standard error where the points cannot give one") {
  const topo::GpuSpec gpu = h100();
  std::vector<validate::GemmPoint> one = synthetic_gemms(gpu, gpu.calibration.gemm_16bit);
  one.resize(1);
  one.front().m = one.front().n = one.front().k = 8192;
  one.front().tflops = 700;
  const validate::GemmFit fit = validate::fit_gemm(gpu, sim::DataType::kBf16, one, gpu.calibration.gemm_16bit);
  REQUIRE(fit.report.fitted);
  REQUIRE(fit.report.parameters.size() == 1);
  CHECK_FALSE(fit.report.parameters.front().standard_error.has_value());
  CHECK(fit.report.parameters.front().note.find("no more points than fitted parameters") != std::string::npos);
}

TEST_CASE("validate/fit_attention: standard errors of efficiency, softmax rate and row overhead") {
  const topo::GpuSpec gpu = h100();
  const topo::AttentionPassCalibration truth{0.6, 2e12, 0.0, 2.0};
  const std::vector<validate::AttentionPoint> points = synthetic_attention(gpu, truth, 0.03);
  const validate::AttentionFit fit = validate::fit_attention(gpu, false, points, 128, topo::AttentionPassCalibration{}, 0.9);
  REQUIRE(fit.report.fitted);
  const ParameterTruth parameters[] = {{"efficiency", 0.6}, {"softmax_Telements_per_s", 2.0}, {"row_overhead", 2.0}};
  for (const ParameterTruth& expected : parameters) {
    CAPTURE(expected.name);
    const validate::FittedParameter& p = with_standard_error(fit.report, expected.name);
    CHECK(std::abs(p.value - expected.truth) < 4 * *p.standard_error + 0.01 * expected.truth);
  }
}

TEST_CASE("validate/fit_attention: dropout's cost is fitted from rows timed with and without it") {
  const topo::GpuSpec gpu = h100();
  const topo::AttentionPassCalibration truth{0.6, 2e12, 0.0, 2.0, 1.1e12};
  std::vector<validate::AttentionPoint> points = synthetic_attention(gpu, truth);
  topo::GpuSpec priced = gpu;
  priced.calibration.attention.forward = truth;
  priced.calibration.memory_kernel_overhead = sim::Duration::zero();
  const topo::ComputeModel model(priced, false);
  // The same shapes with dropout, paired with their time without (a second run of the kernel:
  // scaled 5% slower, which the pairing must not read as dropout's cost), and unpaired.
  const std::size_t plain = points.size();
  for (std::size_t i = 0; i < plain; ++i) {
    validate::AttentionPoint p = points[i];
    p.dropout = 0.1;
    p.tflops = model.tflops(validate::attention_kernel(p));
    const double without = p.tflops_without_dropout.emplace(points[i].tflops);
    CHECK(p.tflops < without);
    const double t = p.flops() / (p.tflops * 1e12), t0 = p.flops() / (without * 1e12);
    p.tflops_without_dropout = p.flops() / (t0 * 1.05) * 1e-12;
    p.tflops = p.flops() / ((t - t0) + t0 * 1.05) * 1e-12;
    points.push_back(p);
  }
  const validate::AttentionFit fit = validate::fit_attention(gpu, false, points, 128, topo::AttentionPassCalibration{}, 0.9);
  REQUIRE(fit.report.fitted);
  CHECK(fit.calibration.efficiency == doctest::Approx(0.6).epsilon(0.01));  // the dropout rows stay out of the kernel's fit
  CHECK(fit.calibration.dropout_rate == doctest::Approx(1.1e12).epsilon(0.001));
  CHECK(fit.report.residuals.size() == plain);
  REQUIRE(find_parameter(fit.report, "dropout_Telements_per_s") != nullptr);

  // Without the pairs the kernel's fitted model stands in for the time without dropout.
  for (std::size_t i = plain; i < points.size(); ++i) {
    points[i].tflops_without_dropout.reset();
    points[i].tflops = model.tflops(validate::attention_kernel(points[i]));
  }
  const validate::AttentionFit modelled = validate::fit_attention(gpu, false, points, 128, topo::AttentionPassCalibration{}, 0.9);
  CHECK(modelled.calibration.dropout_rate == doctest::Approx(1.1e12).epsilon(0.01));
  bool noted = false;
  for (const std::string& n : modelled.report.notes) noted = noted || contains(n, "fitted model stands in");
  CHECK(noted);

  // A kernel with dropout costs its score tiles at that rate on top; without the flag, nothing.
  validate::AttentionPoint shape = points.front();
  shape.dropout = 0.1;
  const sim::Kernel with = validate::attention_kernel(shape);
  shape.dropout = 0;
  const sim::Kernel without = validate::attention_kernel(shape);
  const double pairs = topo::attention_tile_pairs(shape.seq_len, shape.seq_len, 128, shape.causal, 0);
  CHECK(model.kernel_time(with).seconds() - model.kernel_time(without).seconds() ==
        doctest::Approx(static_cast<double>(shape.batch * shape.heads) * pairs * 128 * 128 / 1.1e12).epsilon(1e-6));
}

TEST_CASE("validate/read_attention_sweep: dropout rows, and a time without dropout only beside one") {
  auto sweep = [](const std::string& row) {
    return R"({"tables": [{"id": "t", "source": "s", "gpu": "h100-sxm5-80gb", "implementation": "cudnn", "tokens": 16384,
               "hidden": 2048, "rows": [)" + row + "]}]}";
  };
  const std::vector<validate::AttentionTable> t = validate::read_attention_sweep(testing::temp_file(
      "attention.json", sweep(R"({"pass": "forward", "head_dim": 128, "seq_len": 2048, "dropout": 0.1, "tflops": 288,
                                  "tflops_without_dropout": 644})")));
  REQUIRE(t.size() == 1);
  CHECK(t[0].points[0].dropout == 0.1);
  CHECK(*t[0].points[0].tflops_without_dropout == 644);
  std::string error;
  try {
    validate::read_attention_sweep(testing::temp_file(
        "attention.json", sweep(R"({"pass": "forward", "head_dim": 128, "seq_len": 2048, "tflops": 288, "tflops_without_dropout": 644})")));
  } catch (const InputError& e) {
    error = e.what();
  }
  CHECK(contains(error, "/tables/0/rows/0/tflops_without_dropout: only beside a \"dropout\" above 0"));
}

TEST_CASE("validate/fit_sustained_fraction: the bootstrap interval holds the fit, collapses on exact data, and is reproducible") {
  const validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/published_runs.json"), "nemo2407");
  REQUIRE(suite.cases.size() >= 8);
  const topo::ComputeCalibration calibration = config::read_gpu("h100-sxm5-80gb", "test", "").calibration;
  validate::SustainedFitOptions options;
  options.jobs = 2;

  const validate::SustainedFit real = validate::fit_sustained_fraction(suite, topo::Architecture::kHopper, calibration, options);
  REQUIRE(real.fraction_interval.has_value());
  CHECK(real.fraction_interval->first <= real.fraction);
  CHECK(real.fraction <= real.fraction_interval->second);
  CHECK(real.fraction_interval->first < real.fraction_interval->second);  // real runs scatter
  const validate::SustainedFit again = validate::fit_sustained_fraction(suite, topo::Architecture::kHopper, calibration, options);
  CHECK(again.fraction_interval == real.fraction_interval);

  // Measurements that the model at f = 0.8 reproduces exactly: every resample refits 0.8.
  const validate::Suite exact = measured_at(suite, calibration, 0.8, [](const validate::Case&) { return 1.0; });
  const validate::SustainedFit fit = validate::fit_sustained_fraction(exact, topo::Architecture::kHopper, calibration, options);
  CHECK(fit.fraction == doctest::Approx(0.8).epsilon(0.004));
  REQUIRE(fit.fraction_interval.has_value());
  CHECK(fit.fraction_interval->first == doctest::Approx(fit.fraction).epsilon(0.005));
  CHECK(fit.fraction_interval->second == doctest::Approx(fit.fraction).epsilon(0.005));
}

TEST_CASE("validate/fit_sustained_fraction: each family left out is predicted by a fit to the others") {
  validate::Suite suite = validate::read_suite(testing::source_path("validate/suites/published_runs.json"), "nemo2407");
  const topo::ComputeCalibration calibration = config::read_gpu("h100-sxm5-80gb", "test", "").calibration;
  validate::SustainedFitOptions options;
  options.jobs = 2;
  // Measurements the model reproduces exactly at f = 0.8, then one family made 25% slower than
  // the model can say from the others.
  suite = measured_at(suite, calibration, 0.8, [](const validate::Case& c) { return c.family == "llama" ? 1.25 : 1.0; });
  std::set<std::string> families;
  for (const validate::Case& c : suite.cases) families.insert(c.family);
  REQUIRE(families.size() >= 3);
  const validate::SustainedFit fit = validate::fit_sustained_fraction(suite, topo::Architecture::kHopper, calibration, options);
  REQUIRE(fit.held_out.size() == families.size());
  REQUIRE(fit.held_out_errors.has_value());
  CHECK(fit.held_out_errors->n == suite.cases.size());
  for (const validate::HeldOutFamily& h : fit.held_out) {
    CAPTURE(h.family);
    if (h.family == "llama") {
      // Fitted to exact data, the others predict the slowed family 20% fast (1 / 1.25 - 1).
      CHECK(h.fraction == doctest::Approx(0.8).epsilon(0.004));
      CHECK(h.errors.mape == doctest::Approx(0.2).epsilon(0.03));
    } else {
      // The slowed family pulls the others' fit, and the held-out family pays for it.
      CHECK(h.fraction < 0.79);
      CHECK(h.errors.mape > 0.01);
    }
  }
  // In sample, the fit spreads the slowed family's error over every case: less than held out.
  CHECK(fit.report.errors.mape < fit.held_out_errors->mape);

  // One family alone: nothing to leave out.
  validate::Suite one = validate::read_suite(testing::source_path("validate/suites/published_runs.json"), "nemo2407_perfsummary_LLAMA");
  const validate::SustainedFit single = validate::fit_sustained_fraction(one, topo::Architecture::kHopper, calibration, options);
  CHECK(single.held_out.empty());
  CHECK_FALSE(single.held_out_errors.has_value());
}
