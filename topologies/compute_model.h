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

#include "sim/task_graph.h"
#include "topologies/hardware.h"

namespace trainsim::topo {

class ComputeModel {
 public:
  explicit ComputeModel(const GpuSpec& gpu, bool in_training = true) : gpu_(gpu), in_training_(in_training) {}
  Duration kernel_time(const sim::Kernel& k) const;
  Duration gemm_time(const sim::Kernel& k) const;
  Duration attention_time(const sim::Kernel& k) const;
  // Achieved FLOP/s of a kernel (for reports and calibration residuals), in TFLOP/s.
  double tflops(const sim::Kernel& k) const;
  double gemm_tflops(const sim::Kernel& k) const { return tflops(k); }
  const GpuSpec& gpu() const { return gpu_; }
  // The calibration used for GEMMs of data type `t` (FP8 falls back to 16-bit without FP8 cores).
  const GemmCalibration& gemm_calibration(DataType t) const;

 private:
  // Share of the isolated speed a tensor-core kernel keeps in this context.
  double gemm_fraction(DataType t) const;
  double attention_fraction() const;
  double memory_seconds(const sim::Kernel& k, double efficiency) const;
  GpuSpec gpu_;
  bool in_training_;
};

}  // namespace trainsim::topo
