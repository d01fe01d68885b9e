#pragma once
// ComputeModel: the time of one kernel on one GPU.
//
// GEMMs: the output is cut into CTA tiles (m x n); tiles run in waves over the SMs; a wave costs
// its tile's MACs at the SM's share of the sustained peak plus a fixed per-wave overhead; the
// kernel pays a launch overhead and is never faster than moving its operands through HBM. The
// tile is the candidate that minimises time (as cuBLAS heuristics do). Flash attention runs at
// its own efficiency of the 16-bit (or FP8) peak; memory-bound kernels at a fraction of HBM
// bandwidth. All parameters come from the GPU's ComputeCalibration.

#include "sim/task_graph.h"
#include "topologies/hardware.h"

namespace trainsim::topo {

class ComputeModel {
 public:
  explicit ComputeModel(const GpuSpec& gpu) : gpu_(gpu) {}
  Duration kernel_time(const sim::Kernel& k) const;
  Duration gemm_time(const sim::Kernel& k) const;
  // Achieved FLOP/s of a GEMM (for reports and calibration residuals).
  double gemm_tflops(const sim::Kernel& k) const;
  const GpuSpec& gpu() const { return gpu_; }

 private:
  const GemmCalibration& gemm_calibration(DataType t) const;
  GpuSpec gpu_;
};

}  // namespace trainsim::topo
