#pragma once
// ComputeModel: the time of one kernel on one GPU.
//
// GEMMs: the output is cut into CTA tiles (m x n); tiles run in waves over the SMs; a wave costs
// its tile's MACs at the SM's share of the sustained peak plus a fixed per-wave overhead; the
// kernel pays a launch overhead and is never faster than moving its operands through HBM. The
// tile is the candidate that minimises time (as cuBLAS heuristics do).
// Fused attention: query x key tiles (the causal mask skips those above the diagonal) plus a
// fixed cost per query tile, at the attention efficiency of the 16-bit (or FP8) peak.
// Memory-bound kernels: a fraction of HBM bandwidth plus a per-kernel overhead.
// All parameters come from the GPU's ComputeCalibration. Inside a training iteration
// (`in_training`) tensor-core work runs at the calibration's sustained fraction of its isolated
// speed (times its attention or FP8 scale); `in_training = false` prices kernels as a benchmark
// measures them one at a time.
// A synchronous iteration waits for its slowest GPU. GPUs of one SKU differ in sustained speed
// (manufacturing and power management: Sinha et al., "Not All GPUs Are Created Equal", SC'22,
// arXiv:2208.11035: 8% average variation across a cluster's identical GPUs, max 22%). With
// the calibration's speed_spread s (the spread's standard deviation as a fraction of the
// mean), a job of N GPUs runs its tensor-core work at the speed of the expected slowest of N
// normal draws: slower by the factor 1 + s E[max of N standard normals] (0 for one GPU,
// 1.42 for 8, 3.44 for 2,048).

#include <cstdint>
#include <string>

#include "sim/task_graph.h"
#include "topologies/hardware.h"

namespace trainsim::topo {

// E[max of n independent standard normal draws] (0 for n <= 1), by numerical integration of
// n x phi(x) Phi(x)^(n-1) over [-12, 12].
double expected_max_of_normals(std::int64_t n);

// How much slower than the mean GPU the expected slowest of `job_gpus` GPUs runs tensor-core
// work: speed_spread x E[max of job_gpus standard normals] (0 with no spread or one GPU).
double slowest_gpu_slowdown(const GpuSpec& gpu, std::int64_t job_gpus);

// The tile pairs (query tile x key tile) a fused attention kernel computes over q_len queries and
// kv_len keys in tiles of `tile`: all of them, the causal ones (the diagonal bottom-right aligned
// when the keys are longer), or under a sliding window of `window` keys before each query (self-
// attention, causal) those from the tile holding position i * tile - window to the diagonal.
double attention_tile_pairs(std::int64_t q_len, std::int64_t kv_len, std::int64_t tile, bool causal, std::int64_t window);

// The head dim a fused attention implementation computes with for a model's `head_dim`: its
// kernels are built for a few head dims, and a head dim between two runs on the larger one's
// kernel, zero-padded. Implementations without a known list (and head dims above its largest)
// keep `head_dim`.
//   flash_attention_2: multiples of 32 up to 192, then 256 (flash-attention csrc/flash_attn/flash_api.cpp,
//     head_size_rounded);
//   flash_attention_3: 64, 96, 128, 192, 256 (flash-attention hopper/flash_api.cpp, round_up_headdim);
//   cudnn: 64, 128, measured: on an H100 (cuDNN 9.19, validate/data/measured/2026-11-27-h100,
//     attention_dropout_sweep_p0.json, 1-8K tokens) head dim 96 takes 95-98% of head dim 128's time
//     forward and 85-101% backward, where a kernel of its own would take 75% plus its fixed costs;
//     FlashAttention-2's native 96 kernel, measured beside it, takes 75-81% and 77-88%.
std::int64_t attention_kernel_head_dim(const std::string& implementation, std::int64_t head_dim);

class ComputeModel {
 public:
  // `job_gpus`: the GPUs that synchronise every iteration (in training only).
  explicit ComputeModel(const GpuSpec& gpu, bool in_training = true, std::int64_t job_gpus = 1);
  Duration kernel_time(const sim::Kernel& k) const;
  Duration gemm_time(const sim::Kernel& k) const;
  Duration attention_time(const sim::Kernel& k) const;
  // Achieved FLOP/s of a kernel (for reports and calibration residuals), in TFLOP/s.
  double tflops(const sim::Kernel& k) const;
  double gemm_tflops(const sim::Kernel& k) const { return tflops(k); }
  const GpuSpec& gpu() const { return gpu_; }
  // The calibration used for GEMMs of data type `t` (FP8 falls back to 16-bit without FP8 cores).
  const GemmCalibration& gemm_calibration(DataType t) const;
  // The tensor-core slowdown of the job's slowest GPU (1 outside training or with no spread).
  double slowest_factor() const { return slowest_factor_; }

 private:
  // Share of the isolated speed a tensor-core kernel keeps in this context.
  double gemm_fraction(DataType t) const;
  double attention_fraction() const;
  double memory_seconds(const sim::Kernel& k, double efficiency) const;
  GpuSpec gpu_;
  bool in_training_;
  double slowest_factor_ = 1.0;  // 1 + speed_spread x E[max of job_gpus standard normals]
};

}  // namespace trainsim::topo
