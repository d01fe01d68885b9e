#include "topologies/compute_model.h"

#include <doctest/doctest.h>

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
  topo::ComputeModel model(c.gpu);
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
