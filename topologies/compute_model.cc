#include "topologies/compute_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainsim::topo {

using sim::KernelClass;

const GemmCalibration& ComputeModel::gemm_calibration(DataType t) const {
  switch (t) {
    case DataType::kFp8:
      return gpu_.dense_fp8.per_second() > 0 ? gpu_.calibration.gemm_fp8 : gpu_.calibration.gemm_16bit;
    case DataType::kTf32:
    case DataType::kFp32:
      return gpu_.calibration.gemm_tf32;
    default:
      return gpu_.calibration.gemm_16bit;
  }
}

Duration ComputeModel::gemm_time(const sim::Kernel& k) const {
  const GemmCalibration& cal = gemm_calibration(k.dtype);
  const DataType compute_type = k.dtype == DataType::kFp32 ? DataType::kTf32 : k.dtype;
  const double sm_rate = gpu_.peak(compute_type).per_second() * cal.max_efficiency /
                         static_cast<double>(std::max<std::int64_t>(1, gpu_.sm_count));
  const double sms = static_cast<double>(std::max<std::int64_t>(1, gpu_.sm_count));
  double best = std::numeric_limits<double>::infinity();
  for (const auto& tile : cal.tiles) {
    const double tiles_m = std::ceil(static_cast<double>(k.m) / static_cast<double>(tile[0]));
    const double tiles_n = std::ceil(static_cast<double>(k.n) / static_cast<double>(tile[1]));
    const double tiles = tiles_m * tiles_n * static_cast<double>(std::max<std::int64_t>(1, k.batch));
    const double waves = std::ceil(tiles / sms);
    const double tile_flops = 2.0 * static_cast<double>(tile[0]) * static_cast<double>(tile[1]) * static_cast<double>(k.k);
    const double t = waves * (tile_flops / sm_rate + cal.wave_overhead.seconds());
    best = std::min(best, t);
  }
  const double mem = k.bytes.as_double() / (gpu_.memory_bandwidth.bytes_per_second() * gpu_.calibration.memory_efficiency);
  return Duration::from_seconds(std::max(best, mem) + cal.launch_overhead.seconds());
}

double ComputeModel::gemm_tflops(const sim::Kernel& k) const {
  return k.flops.count() / gemm_time(k).seconds() * 1e-12;
}

Duration ComputeModel::kernel_time(const sim::Kernel& k) const {
  const ComputeCalibration& cal = gpu_.calibration;
  const double hbm = gpu_.memory_bandwidth.bytes_per_second();
  switch (k.kernel_class) {
    case KernelClass::kGemm:
      return gemm_time(k);
    case KernelClass::kFlashAttention: {
      const double eff = k.backward ? cal.flash_backward_efficiency : cal.flash_forward_efficiency;
      const DataType t = k.dtype == DataType::kFp8 ? DataType::kFp8 : DataType::kBf16;
      const double compute = k.flops.count() / (gpu_.peak(t).per_second() * eff);
      const double mem = k.bytes.as_double() / (hbm * cal.memory_efficiency);
      return Duration::from_seconds(std::max(compute, mem)) + cal.memory_kernel_overhead;
    }
    case KernelClass::kMemoryBound: {
      const double mem = k.bytes.as_double() / (hbm * cal.memory_efficiency);
      const double compute = k.flops.count() / gpu_.fp32.per_second();
      return Duration::from_seconds(std::max(mem, compute)) + cal.memory_kernel_overhead;
    }
    case KernelClass::kOptimizer: {
      const double mem = k.bytes.as_double() / (hbm * cal.optimizer_efficiency);
      return Duration::from_seconds(mem) + cal.memory_kernel_overhead;
    }
  }
  return Duration::zero();
}

}  // namespace trainsim::topo
