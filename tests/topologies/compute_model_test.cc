#include "topologies/compute_model.h"

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "config/scenario.h"

using namespace trainsim;

namespace {
sim::Kernel gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  sim::Kernel g;
  g.kernel_class = sim::KernelClass::kGemm;
  g.m = m;
  g.n = n;
  g.k = k;
  g.flops = sim::Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  g.bytes = sim::Bytes(2 * (m * k + k * n + m * n));
  return g;
}
}  // namespace

TEST_CASE("topologies/ComputeModel: large GEMMs approach but never exceed the calibrated peak") {
  const topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  topo::ComputeModel model(c.gpu, /*in_training=*/false);  // as a benchmark runs it
  const double big = model.gemm_tflops(gemm(8192, 8192, 8192));
  CHECK(big < 989.0 * c.gpu.calibration.gemm_16bit.max_efficiency);
  CHECK(big > 0.75 * 989.0 * c.gpu.calibration.gemm_16bit.max_efficiency);
  // Small GEMMs are far less efficient (launch and wave overheads).
  CHECK(model.gemm_tflops(gemm(256, 256, 256)) < 0.2 * big);
}

TEST_CASE("topologies/ComputeModel: wave quantization makes a partial wave cost a full one") {
  topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  c.gpu.calibration.gemm_16bit.tiles = {{128, 128}};  // one tile shape, so the wave count is fixed
  topo::ComputeModel model(c.gpu);
  // 132 SMs: 12 x 11 tiles of 128x128 fill one wave; one more column of tiles needs a second.
  const auto one_wave = model.gemm_time(gemm(128 * 12, 128 * 11, 8192));
  const auto two_waves = model.gemm_time(gemm(128 * 12, 128 * 11 + 1, 8192));
  CHECK(two_waves.seconds() > 1.6 * one_wave.seconds());
}

TEST_CASE("topologies/ComputeModel: memory-bound kernels move bytes at a fraction of HBM bandwidth") {
  const topo::ClusterSpec c = config::load_cluster("dgx-a100-80gb", 1);
  topo::ComputeModel model(c.gpu);
  sim::Kernel k;
  k.kernel_class = sim::KernelClass::kMemoryBound;
  k.bytes = sim::Bytes(2'039'000'000'000);  // one second of raw HBM bandwidth
  const double t = model.kernel_time(k).seconds();
  CHECK(t == doctest::Approx(1.0 / c.gpu.calibration.memory_efficiency + c.gpu.calibration.memory_kernel_overhead.seconds()));
}

namespace {
sim::Kernel attention(std::int64_t seq, std::int64_t head_dim, bool causal, bool backward) {
  sim::Kernel k;
  k.kernel_class = sim::KernelClass::kFlashAttention;
  k.m = seq;
  k.n = seq;
  k.k = head_dim;
  k.batch = 16;
  k.causal = causal;
  k.backward = backward;
  k.flops = sim::Flops(4.0 * 16 * static_cast<double>(seq * seq * head_dim) * (causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0));
  k.bytes = sim::Bytes(2 * 16 * seq * head_dim * 4);
  return k;
}
}  // namespace

TEST_CASE("topologies/ComputeModel: attention tiles: a causal mask halves the work of long sequences, not short ones") {
  topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  topo::AttentionPassCalibration& f = c.gpu.calibration.attention.forward;
  f = topo::AttentionPassCalibration{0.5, 0, 0, 0};  // matmuls only: time counts tile pairs
  topo::ComputeModel model(c.gpu, false);
  const double long_ratio = model.attention_time(attention(16384, 128, true, false)).seconds() /
                            model.attention_time(attention(16384, 128, false, false)).seconds();
  CHECK(long_ratio == doctest::Approx(129.0 / 256.0).epsilon(0.01));  // 128 x 129 / 2 of 128 x 128 tile pairs
  const double short_ratio = model.attention_time(attention(256, 128, true, false)).seconds() /
                             model.attention_time(attention(256, 128, false, false)).seconds();
  CHECK(short_ratio > 0.7);  // 3 of 4 tile pairs, plus the fixed launch cost
}

TEST_CASE("topologies/ComputeModel: a sliding window prices only the key tiles within it") {
  topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  topo::AttentionPassCalibration& f = c.gpu.calibration.attention.forward;
  f = topo::AttentionPassCalibration{0.5, 0, 0, 0};  // matmuls only: time counts tile pairs
  topo::ComputeModel model(c.gpu, false);
  sim::Kernel windowed = attention(16384, 128, true, false);
  windowed.window = 4096;
  // Query tile i sees min(i, 32) + 1 key tiles of 128: 32 x 33 / 2 + 96 x 33 of the causal 128 x 129 / 2.
  const double ratio = model.attention_time(windowed).seconds() / model.attention_time(attention(16384, 128, true, false)).seconds();
  CHECK(ratio == doctest::Approx((32.0 * 33.0 / 2 + 96.0 * 33.0) / (128.0 * 129.0 / 2)).epsilon(0.01));
  // A window as long as the sequence changes nothing.
  windowed.window = 16384;
  CHECK(model.attention_time(windowed).seconds() ==
        doctest::Approx(model.attention_time(attention(16384, 128, true, false)).seconds()).epsilon(1e-9));
}

TEST_CASE("topologies/ComputeModel: a head dim between an attention implementation's kernels runs on the larger one") {
  CHECK(topo::attention_kernel_head_dim("cudnn", 96) == 128);
  CHECK(topo::attention_kernel_head_dim("cudnn", 64) == 64);
  CHECK(topo::attention_kernel_head_dim("cudnn", 192) == 192);  // above its measured kernels: as it is
  CHECK(topo::attention_kernel_head_dim("flash_attention_2", 80) == 96);
  CHECK(topo::attention_kernel_head_dim("flash_attention_2", 200) == 256);
  CHECK(topo::attention_kernel_head_dim("flash_attention_3", 160) == 192);
  CHECK(topo::attention_kernel_head_dim("my_kernel", 96) == 96);

  // H100's shipped calibration prices cuDNN: head dim 96 costs what 128 does (measured: 95-98%
  // forward, 85-101% backward), FlashAttention-2's native head dim 96 kernel less (75-88%).
  topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  REQUIRE(c.gpu.calibration.attention.implementation == "cudnn");
  const topo::ComputeModel cudnn(c.gpu, false);
  for (const bool backward : {false, true}) {
    CAPTURE(backward);
    const double t96 = cudnn.attention_time(attention(4096, 96, true, backward)).seconds();
    const double t128 = cudnn.attention_time(attention(4096, 128, true, backward)).seconds();
    CHECK(t96 == doctest::Approx(t128).epsilon(0.02));
    // Multi-head latent attention's mean head dim (query-key 192, value 128: 160) is not rounded.
    sim::Kernel mla = attention(4096, 96, true, backward);
    mla.mixed_head_dims = true;
    CHECK(cudnn.attention_time(mla).seconds() < 0.85 * t96);
  }
  REQUIRE(c.gpu.calibration.select_attention("flash_attention_2"));
  const topo::ComputeModel fa2(c.gpu, false);
  CHECK(fa2.attention_time(attention(4096, 96, true, false)).seconds() <
        0.85 * fa2.attention_time(attention(4096, 128, true, false)).seconds());
}

TEST_CASE("topologies/ComputeModel: attention softmax cost is hidden behind the matmuls by its overlap") {
  topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  topo::AttentionPassCalibration& f = c.gpu.calibration.attention.forward;
  f = topo::AttentionPassCalibration{0.5, 1e12, 0, 0};
  const sim::Kernel k = attention(8192, 64, false, false);
  const double serial = topo::ComputeModel(c.gpu, false).attention_time(k).seconds();
  f.softmax_overlap = 1;
  const double overlapped = topo::ComputeModel(c.gpu, false).attention_time(k).seconds();
  f.softmax_rate = 0;
  const double matmul_only = topo::ComputeModel(c.gpu, false).attention_time(k).seconds();
  // Head dim 64 on H100: a tile pair's matmuls (4 x 128^2 x 64 FLOPs at 494.5 TFLOP/s) take 8.5 ns,
  // its 128^2 score elements at 1e12/s 16.4 ns: overlapped, the softmax sets the pace.
  CHECK(serial == doctest::Approx(overlapped + matmul_only).epsilon(0.01));
  CHECK(overlapped > 1.5 * matmul_only);
}

TEST_CASE("topologies/ComputeModel: inside training, tensor-core kernels run at the sustained fraction") {
  topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  c.gpu.calibration.sustained_fraction = 0.8;
  c.gpu.calibration.gemm_16bit.wave_overhead = sim::Duration::zero();  // only the tiles' MACs scale
  const sim::Kernel g = gemm(8192, 8192, 8192);
  const double isolated = topo::ComputeModel(c.gpu, false).gemm_time(g).seconds();
  const double training = topo::ComputeModel(c.gpu, true).gemm_time(g).seconds();
  const double launch = c.gpu.calibration.gemm_16bit.launch_overhead.seconds();
  CHECK((training - launch) == doctest::Approx((isolated - launch) / 0.8).epsilon(1e-6));
  sim::Kernel m;
  m.kernel_class = sim::KernelClass::kMemoryBound;
  m.bytes = sim::Bytes(1'000'000'000);
  CHECK(topo::ComputeModel(c.gpu, false).kernel_time(m) == topo::ComputeModel(c.gpu, true).kernel_time(m));
}

TEST_CASE("topologies/expected_max_of_normals: the expected largest of N standard normal draws") {
  CHECK(topo::expected_max_of_normals(0) == 0.0);
  CHECK(topo::expected_max_of_normals(1) == 0.0);
  // Closed forms for two and three draws, 1/sqrt(pi) and 3/(2 sqrt(pi)); tabulated values for
  // more (Harter 1961, Biometrika 48, expected values of normal order statistics): 1.0294 for
  // four, 1.4236 for eight, 3.2414 for 1,000.
  CHECK(topo::expected_max_of_normals(2) == doctest::Approx(0.5641896).epsilon(1e-6));
  CHECK(topo::expected_max_of_normals(3) == doctest::Approx(0.8462844).epsilon(1e-6));
  CHECK(topo::expected_max_of_normals(4) == doctest::Approx(1.0294).epsilon(1e-4));
  CHECK(topo::expected_max_of_normals(8) == doctest::Approx(1.4236).epsilon(1e-4));
  CHECK(topo::expected_max_of_normals(1000) == doctest::Approx(3.2414).epsilon(1e-4));
  // Grows without bound, ever more slowly (about sqrt(2 ln N)).
  CHECK(topo::expected_max_of_normals(100000) > topo::expected_max_of_normals(10000));
  CHECK(topo::expected_max_of_normals(100000) < std::sqrt(2.0 * std::log(100000.0)));
}

TEST_CASE("topologies/ComputeModel: a job's tensor-core work runs at its expected slowest GPU's speed") {
  topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  c.gpu.calibration.sustained_fraction = 0.8;
  c.gpu.calibration.speed_spread = 0.01;
  c.gpu.calibration.gemm_16bit.wave_overhead = sim::Duration::zero();
  const sim::Kernel g = gemm(8192, 8192, 8192);
  const double launch = c.gpu.calibration.gemm_16bit.launch_overhead.seconds();
  const double one = topo::ComputeModel(c.gpu, true, 1).gemm_time(g).seconds() - launch;
  const double eight = topo::ComputeModel(c.gpu, true, 8).gemm_time(g).seconds() - launch;
  const double many = topo::ComputeModel(c.gpu, true, 2048).gemm_time(g).seconds() - launch;
  CHECK(topo::ComputeModel(c.gpu, true, 1).slowest_factor() == 1.0);
  CHECK(eight / one == doctest::Approx(1.0 + 0.01 * 1.4236).epsilon(1e-4));
  CHECK(many > eight);
  // Benchmarks (outside training) and a calibration without spread see no slowest GPU.
  CHECK(topo::ComputeModel(c.gpu, false, 2048).slowest_factor() == 1.0);
  c.gpu.calibration.speed_spread = 0;
  CHECK(topo::ComputeModel(c.gpu, true, 2048).slowest_factor() == 1.0);
  // Memory-bound kernels keep their speed.
  c.gpu.calibration.speed_spread = 0.01;
  sim::Kernel m;
  m.kernel_class = sim::KernelClass::kMemoryBound;
  m.bytes = sim::Bytes(1'000'000'000);
  CHECK(topo::ComputeModel(c.gpu, true, 1).kernel_time(m) == topo::ComputeModel(c.gpu, true, 2048).kernel_time(m));
}

TEST_CASE("topologies/ComputeModel: NVFP4 GEMMs run at the measured multiple of FP8, bounded by the FP4 peak") {
  // Transformer Engine's B300 GEMM profiling: NVFP4 kernels 6.812 / 3.764 = 1.81x the rate of
  // per-tensor FP8 ones on the same shapes. trainsim applies the ratio to its fitted FP8 kernel.
  topo::ClusterSpec c = config::load_cluster("dgx-b200", 1);
  c.gpu.calibration.gemm_fp8.wave_overhead = sim::Duration::zero();  // only the tiles' MACs scale
  c.gpu.calibration.gemm_fp8.tiles = {{128, 128}};                   // the same tiles either way
  auto typed = [](sim::DataType t) {
    sim::Kernel g = gemm(16384, 16384, 16384);
    g.dtype = t;
    g.bytes = sim::Bytes(0);  // compute-bound
    return g;
  };
  const topo::ComputeModel model(c.gpu, false);
  const double launch = c.gpu.calibration.gemm_fp8.launch_overhead.seconds();
  const double fp8 = model.gemm_time(typed(sim::DataType::kFp8)).seconds() - launch;
  const double fp4 = model.gemm_time(typed(sim::DataType::kFp4)).seconds() - launch;
  CHECK(fp8 / fp4 == doctest::Approx(6.812 / 3.764).epsilon(1e-9));
  // A GPU whose FP4 peak is only 1.5x its FP8 peak caps the ratio there.
  c.gpu.dense_fp4 = sim::FlopRate::tflops(1.5 * c.gpu.dense_fp8.per_second() * 1e-12);
  const double capped = topo::ComputeModel(c.gpu, false).gemm_time(typed(sim::DataType::kFp4)).seconds() - launch;
  CHECK(fp8 / capped == doctest::Approx(1.5).epsilon(1e-9));
  // The GPU presets carry the datasheets' dense FP4 peaks: Blackwell only.
  CHECK(config::load_cluster("dgx-b200", 1).gpu.dense_fp4.per_second() == doctest::Approx(9e15));
  CHECK(config::load_cluster("gb200-nvl72", 1).gpu.dense_fp4.per_second() == doctest::Approx(10e15));
  CHECK(config::load_cluster("gb300-nvl72", 1).gpu.dense_fp4.per_second() == doctest::Approx(15e15));
  CHECK(config::load_cluster("dgx-h100", 1).gpu.dense_fp4.per_second() == 0);
}

TEST_CASE("topologies/ComputeModel: grouped expert GEMMs cost one kernel per group, as SimuMax's B200 sweep measured") {
  // validate/data/grouped_gemm_b200_simumax.json: Transformer Engine's general_grouped_gemm timed
  // on a B200 over the expert GEMMs of DeepSeek-V2/V3 and Qwen-style MoE layers (20-256 groups of
  // 128-9,832 rows). The forward and data-gradient passes are compared (the weight gradient adds
  // the fp32 accumulation the README discusses).
  std::ifstream in(std::string(TRAINSIM_SOURCE_DIR) + "/validate/data/grouped_gemm_b200_simumax.json");
  const nlohmann::json file = nlohmann::json::parse(in);
  const nlohmann::json& rows = file.at(0).at("rows");
  const topo::ClusterSpec c = config::load_cluster("dgx-b200", 1);
  const topo::ComputeModel model(c.gpu, /*in_training=*/false);
  double grouped_error = 0, batched_error = 0;
  int n = 0;
  for (const nlohmann::json& r : rows) {
    const std::string pass = r.at("pass").get<std::string>();
    if (pass == "weight_gradient") continue;
    const std::int64_t groups = r.at("groups").get<std::int64_t>(), m = r.at("m").get<std::int64_t>(),
                       n_out = r.at("n").get<std::int64_t>(), k = r.at("k").get<std::int64_t>();
    // Per group: forward M x N over K; data gradient M x K over N.
    sim::Kernel g = pass == "forward" ? gemm(m, n_out, k) : gemm(m, k, n_out);
    g.batch = groups;
    g.flops = g.flops * static_cast<double>(groups);
    g.bytes = g.bytes * groups;
    const double measured = r.at("tflops").get<double>();
    g.grouped = true;
    const double one_by_one = std::abs(model.tflops(g) / measured - 1);
    g.grouped = false;
    const double batched = std::abs(model.tflops(g) / measured - 1);
    grouped_error += one_by_one;
    batched_error += batched;
    ++n;
  }
  REQUIRE(n == 72);
  grouped_error /= n;
  batched_error /= n;
  MESSAGE("grouped-GEMM MAPE, one kernel per group: " << grouped_error << "; as one batched kernel: " << batched_error);
  CHECK(grouped_error < 0.2);              // 15.0%
  CHECK(batched_error > 4 * grouped_error);  // 92.8%
}

TEST_CASE("topologies/ComputeModel: MPT's Triton kernel is FlashAttention-2 at the speed the A100 runs found for it") {
  // h100.json prices the kernel (mpt_triton) as its FlashAttention-2 model at a relative speed;
  // that speed is the A100 fit's attention scale, fitted by the A100 runs with fused attention,
  // all MosaicML runs on this kernel. The two files must agree.
  const std::string dir = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/calibration/";
  const nlohmann::json a100 = nlohmann::json::parse(std::ifstream(dir + "a100.json"));
  const nlohmann::json h100 = nlohmann::json::parse(std::ifstream(dir + "h100.json"));
  const nlohmann::json& triton = h100["flash_attention_alternatives"]["mpt_triton"];
  CHECK(triton["like"] == "flash_attention_2");
  CHECK(triton["speed"].get<double>() == a100["training"]["attention_scale"].get<double>());

  topo::ClusterSpec c = config::load_cluster("dgx-h100", 1);
  topo::ClusterSpec t = c;
  REQUIRE(c.gpu.calibration.select_attention("flash_attention_2"));
  REQUIRE(t.gpu.calibration.select_attention("mpt_triton"));
  CHECK(t.gpu.calibration.attention.forward == c.gpu.calibration.attention.forward);
  CHECK(t.gpu.calibration.attention.backward == c.gpu.calibration.attention.backward);
  for (const bool training : {false, true}) {
    CAPTURE(training);
    const topo::ComputeModel fa2(c.gpu, training), mpt(t.gpu, training);
    for (const bool backward : {false, true}) {
      // Head dim 112 (MPT-30B) pads to FlashAttention-2's 128 kernel in both.
      const sim::Kernel k = attention(8192, 112, true, backward);
      const sim::Kernel k128 = attention(8192, 128, true, backward);
      CHECK(mpt.attention_time(k).seconds() ==
            doctest::Approx(fa2.attention_time(k).seconds() / triton["speed"].get<double>()).epsilon(0.01));
      CHECK(mpt.attention_time(k).seconds() == doctest::Approx(mpt.attention_time(k128).seconds()).epsilon(1e-9));
    }
  }
}
