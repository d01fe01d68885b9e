#include "topologies/compute_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "sim/check.h"

namespace trainsim::topo {

using sim::KernelClass;

namespace {

double ceil_div(std::int64_t a, std::int64_t b) {
  return std::ceil(static_cast<double>(a) / static_cast<double>(std::max<std::int64_t>(1, b)));
}

}  // namespace

double expected_max_of_normals(std::int64_t n) {
  if (n <= 1) return 0.0;
  // Simpson's rule; the integrand is smooth and negligible beyond |x| = 12 for any n below 2^40.
  constexpr int kIntervals = 4800;
  constexpr double kLow = -12.0, kHigh = 12.0;
  const double h = (kHigh - kLow) / kIntervals;
  const double count = static_cast<double>(n);
  auto f = [&](double x) {
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
    // log Phi(x), through log1p where Phi is near 1 so that huge n keep their precision.
    const double upper = 0.5 * std::erfc(x / std::sqrt(2.0));  // 1 - Phi(x)
    const double log_cdf = x > 0 ? std::log1p(-upper) : std::log(0.5 * std::erfc(-x / std::sqrt(2.0)));
    return std::isinf(log_cdf) ? 0.0 : x * count * pdf * std::exp((count - 1.0) * log_cdf);
  };
  double sum = f(kLow) + f(kHigh);
  for (int i = 1; i < kIntervals; ++i) sum += f(kLow + i * h) * (i % 2 == 1 ? 4.0 : 2.0);
  return sum * h / 3.0;
}

double slowest_gpu_slowdown(const GpuSpec& gpu, std::int64_t job_gpus) {
  return gpu.calibration.speed_spread > 0 ? gpu.calibration.speed_spread * expected_max_of_normals(job_gpus) : 0.0;
}

ComputeModel::ComputeModel(const GpuSpec& gpu, bool in_training, std::int64_t job_gpus)
    : gpu_(gpu), in_training_(in_training) {
  if (in_training_) slowest_factor_ = 1.0 + slowest_gpu_slowdown(gpu_, job_gpus);
}

const GemmCalibration& ComputeModel::gemm_calibration(DataType t) const {
  switch (t) {
    case DataType::kFp8:
    case DataType::kFp4:
      return gpu_.dense_fp8.per_second() > 0 ? gpu_.calibration.gemm_fp8 : gpu_.calibration.gemm_16bit;
    case DataType::kTf32:
    case DataType::kFp32:
      return gpu_.calibration.gemm_tf32;
    default:
      return gpu_.calibration.gemm_16bit;
  }
}

double ComputeModel::gemm_fraction(DataType t) const {
  if (!in_training_) return 1.0;
  const ComputeCalibration& c = gpu_.calibration;
  const bool fp8 = (t == DataType::kFp8 || t == DataType::kFp4) && gpu_.dense_fp8.per_second() > 0;
  return c.sustained_fraction * (fp8 ? c.fp8_gemm_scale : 1.0) / slowest_factor_;
}

double ComputeModel::attention_fraction() const {
  // The implementation's own relative speed (AttentionCalibration::speed) holds in and out of
  // training; the in-training scales on top.
  const ComputeCalibration& c = gpu_.calibration;
  return c.attention.speed * (in_training_ ? c.sustained_fraction * c.attention_scale / slowest_factor_ : 1.0);
}

double ComputeModel::memory_seconds(const sim::Kernel& k, double efficiency) const {
  return k.bytes.as_double() / (gpu_.memory_bandwidth.bytes_per_second() * efficiency);
}

// MXFP8 GEMM kernels against per-tensor-scaled FP8 ones on the same shapes, inputs already
// quantized: 6.812 / 7.161 ms per layer (Transformer Engine docs, examples/gemm_profiling,
// "Worked Example: 5B Model on B300", pre-quantized per-layer totals of FP8CurrentScaling and
// MXFP8; 12 GEMMs of a hidden-4096, ffn-16384 layer at 15,872 tokens).
constexpr double kBlockScaledGemmRatio = 6.812 / 7.161;

// NVFP4 GEMM kernels against per-tensor-scaled FP8 ones on the same shapes, inputs already
// quantized: 6.812 / 3.764 ms per layer, 1.81x (the same worked example, pre-quantized totals of
// FP8CurrentScaling and NVFP4BlockScaling; B300, whose FP8 tensor cores match B200's 4.5 PFLOPS
// dense). No FP4 GEMM sweep of B200 or GB200 exists to fit: an FP4 GEMM runs at this multiple of
// the fitted FP8 kernel of its shape, bounded by the GPU's dense FP4 peak at the FP8 kernel's
// efficiency (B300's FP4 peak, 13 of 4.5 PFLOPS, does not bound the measured ratio; B200's and
// GB200's, 2x their FP8 peak, do not either).
constexpr double kNvfp4OverFp8GemmRate = 6.812 / 3.764;

// A grouped GEMM runs one kernel per group, one after another: Transformer Engine's grouped linear
// layers (GroupedLinear -> general_grouped_gemm -> nvte_multi_tensor_gemm) launch one cuBLAS GEMM
// per group, round robin over its compute streams (multi_stream_cublas_gemm in
// transformer_engine/common/gemm/cublaslt_gemm.cu @d0067d0; CUTLASS's single-kernel grouped GEMM
// only on Hopper and only with NVTE_USE_CUTLASS_GROUPED_GEMM=1). Each group then pays its own
// launch and wave quantization. SimuMax's sweep of general_grouped_gemm on B200
// (validate/data/grouped_gemm_b200_simumax.json, 20 expert shapes of 20-256 groups) agrees: its
// forward and data-gradient GEMMs come out at MAPE 15% priced this way, 93% priced as one kernel
// whose tiles of all groups share the waves (the streams barely overlap the groups' kernels).
Duration ComputeModel::gemm_time(const sim::Kernel& k) const {
  if (k.grouped && k.batch > 1) {
    sim::Kernel one = k;
    one.grouped = false;
    one.batch = 1;
    one.flops = sim::Flops(k.flops.count() / static_cast<double>(k.batch));
    one.bytes = sim::Bytes(k.bytes.count() / k.batch);
    return gemm_time(one) * k.batch;
  }
  const GemmCalibration& cal = gemm_calibration(k.dtype);
  const DataType compute_type = k.dtype == DataType::kFp32 ? DataType::kTf32 : k.dtype;
  const double sms = static_cast<double>(std::max<std::int64_t>(1, gpu_.sm_count));
  const double scaling = k.block_scaled ? kBlockScaledGemmRatio : 1.0;
  double peak = gpu_.peak(compute_type).per_second();
  if (k.dtype == DataType::kFp4) peak = std::min(peak, gpu_.peak(DataType::kFp8).per_second() * kNvfp4OverFp8GemmRate);
  const double sm_rate = peak * cal.max_efficiency * gemm_fraction(k.dtype) * scaling / sms;
  const double batch = static_cast<double>(std::max<std::int64_t>(1, k.batch));
  double best = std::numeric_limits<double>::infinity();
  for (const auto& tile : cal.tiles) {
    const double tiles = ceil_div(k.m, tile[0]) * ceil_div(k.n, tile[1]) * batch;
    const double waves = std::ceil(tiles / sms);
    const double tile_flops = 2.0 * static_cast<double>(tile[0]) * static_cast<double>(tile[1]) * static_cast<double>(k.k);
    best = std::min(best, waves * (tile_flops / sm_rate + cal.wave_overhead.seconds()));
  }
  const double mem = memory_seconds(k, gpu_.calibration.memory_efficiency);
  return Duration::from_seconds(std::max(best, mem) + cal.launch_overhead.seconds());
}

std::int64_t attention_kernel_head_dim(const std::string& implementation, std::int64_t head_dim) {
  static const std::map<std::string, std::vector<std::int64_t>> kKernelHeadDims = {
      {"flash_attention_2", {32, 64, 96, 128, 160, 192, 256}},
      {"flash_attention_3", {64, 96, 128, 192, 256}},
      {"cudnn", {64, 128}},
  };
  const auto it = kKernelHeadDims.find(implementation);
  if (it == kKernelHeadDims.end()) return head_dim;
  for (std::int64_t d : it->second) {
    if (d >= head_dim) return d;
  }
  return head_dim;
}

double attention_tile_pairs(std::int64_t q_len, std::int64_t kv_len, std::int64_t tile, bool causal, std::int64_t window) {
  tile = std::max<std::int64_t>(1, tile);
  const std::int64_t q_tiles = static_cast<std::int64_t>(ceil_div(q_len, tile));
  const std::int64_t k_tiles = static_cast<std::int64_t>(ceil_div(kv_len, tile));
  if (causal && window > 0) {
    // A sliding window: query tile i sees the key tiles from the one holding position
    // i * tile - window to the diagonal (self-attention).
    const std::int64_t back = (window + tile - 1) / tile;
    double pairs = 0;
    for (std::int64_t i = 0; i < q_tiles; ++i) pairs += static_cast<double>(std::min(i, back) + 1);
    return pairs;
  }
  if (causal) {
    // Query tile i (bottom-right aligned when the key sequence is longer) sees the key tiles up
    // to and including the diagonal: min(k_tiles, i + 1 + ceil(offset / tile)) of them.
    const double q = static_cast<double>(q_tiles), kt = static_cast<double>(k_tiles);
    const double shift = ceil_div(std::max<std::int64_t>(0, kv_len - q_len), tile);
    const double rising = std::clamp(kt - shift, 0.0, q);  // tiles whose row is not yet full
    return rising * (1.0 + shift + shift + rising) / 2.0 + (q - rising) * kt;
  }
  return static_cast<double>(q_tiles) * static_cast<double>(k_tiles);
}

Duration ComputeModel::attention_time(const sim::Kernel& k) const {
  const ComputeCalibration& cal = gpu_.calibration;
  const AttentionCalibration& a = cal.attention;
  const std::int64_t tile = std::max<std::int64_t>(1, a.tile);
  const std::int64_t q_tiles = static_cast<std::int64_t>(ceil_div(k.m, tile));
  const double pairs = attention_tile_pairs(k.m, k.n, tile, k.causal, k.window);
  const AttentionPassCalibration& pass = k.backward ? a.backward : a.forward;
  // Forward: Q K^T and P V, 2 x 2 tile^2 d FLOPs per pair; backward 2.5x that. d is the head dim
  // of the kernel that runs (a smaller one padded up to it).
  // (A `like` implementation pads as the one it is priced as.)
  const std::int64_t d = k.mixed_head_dims ? k.k : attention_kernel_head_dim(a.like.empty() ? a.implementation : a.like, k.k);
  const double pair_flops = 4.0 * static_cast<double>(tile * tile) * static_cast<double>(d) * (k.backward ? 2.5 : 1.0);
  const DataType t = k.dtype == DataType::kFp8 ? DataType::kFp8 : DataType::kBf16;
  const double pair_matmul = pair_flops / (gpu_.peak(t).per_second() * pass.efficiency);
  const double pair_softmax = pass.softmax_rate > 0 ? static_cast<double>(tile * tile) / pass.softmax_rate : 0.0;
  // Dropout's random numbers and masking run beside the rest of the tile's work, not hidden by it
  // (PyTorch 2.11's cuDNN kernels on an H100: the forward pass 2.0-2.5x slower at dropout 0.1).
  const double pair_dropout = k.dropout && pass.dropout_rate > 0 ? static_cast<double>(tile * tile) / pass.dropout_rate : 0.0;
  const double pair_time =
      std::max(pair_matmul, pair_softmax) + (1.0 - pass.softmax_overlap) * std::min(pair_matmul, pair_softmax) + pair_dropout;
  const double work = pairs * pair_time + static_cast<double>(q_tiles) * pass.row_overhead * pair_matmul;
  const double compute = static_cast<double>(std::max<std::int64_t>(1, k.batch)) * work / attention_fraction();
  const double mem = memory_seconds(k, cal.memory_efficiency);
  return Duration::from_seconds(std::max(compute, mem)) + cal.memory_kernel_overhead;
}

double ComputeModel::tflops(const sim::Kernel& k) const {
  return k.flops.count() / kernel_time(k).seconds() * 1e-12;
}

Duration ComputeModel::kernel_time(const sim::Kernel& k) const {
  const ComputeCalibration& cal = gpu_.calibration;
  switch (k.kernel_class) {
    case KernelClass::kGemm:
      return gemm_time(k);
    case KernelClass::kFlashAttention:
      return attention_time(k);
    case KernelClass::kMemoryBound: {
      // Grouped: the work split over `batch` kernels run one after another, each paying the start.
      const double compute = k.flops.count() / gpu_.fp32.per_second();
      const std::int64_t kernels = k.grouped ? std::max<std::int64_t>(1, k.batch) : 1;
      return Duration::from_seconds(std::max(memory_seconds(k, cal.memory_efficiency), compute)) + cal.memory_kernel_overhead * kernels;
    }
    case KernelClass::kOptimizer:
      return Duration::from_seconds(memory_seconds(k, cal.optimizer_efficiency)) + cal.memory_kernel_overhead;
    case KernelClass::kHostCopy: {
      // Copy engines over the host link at its measured rate, with a memory-bound kernel's start
      // cost; no tensor-core or HBM efficiency applies. The lowering refuses offloading on a
      // GPU without a host copy rate.
      TRAINSIM_CHECK(gpu_.host_copy_bandwidth.bytes_per_second() > 0, "host copy on a GPU without host_copy_GBps");
      return Duration::from_seconds(static_cast<double>(k.bytes.count()) / gpu_.host_copy_bandwidth.bytes_per_second()) +
             cal.memory_kernel_overhead;
    }
  }
  return Duration::zero();
}

}  // namespace trainsim::topo
