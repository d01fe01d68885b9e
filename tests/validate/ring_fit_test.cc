// The intra-node ring fit (validate/ring_fit.h): it recovers the parameters that generated a
// sweep, refuses sweeps that cannot separate them, reads records and nccl-tests logs, reproduces
// the shipped A100 calibration's ring, and the collective model uses it only inside one node
// from its smallest fitted size up.

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "config/hardware_reader.h"
#include "config/scenario.h"
#include "sim/error.h"
#include "test_files.h"
#include "topologies/collective_model.h"
#include "validate/ring_fit.h"

using namespace trainsim;

namespace {

const std::string kRingRecords[] = {"validate/data/nccl_measurements.json", "validate/data/nccl_vtrain_a100.json"};

// Sweeps of 2, 4 and 8 GPUs timed exactly by `truth` (synthetic), 1 MiB to 1 GiB, plus rows
// below 1 MiB far off the formula, which the fit must leave out.
std::vector<validate::RingSweep> synthetic_sweeps(const topo::ComputeCalibration::RingCalibration& truth) {
  std::vector<validate::RingSweep> out;
  for (int n : {2, 4, 8}) {
    validate::RingSweep s;
    s.id = "synthetic_" + std::to_string(n);
    s.ranks = n;
    s.points.push_back({std::int64_t{1} << 16, 1000.0});  // below 1 MiB: ignored
    for (int k = 20; k <= 30; ++k) {
      const double bytes = std::ldexp(1.0, k);
      s.points.push_back({static_cast<std::int64_t>(bytes), validate::ring_all_reduce_us(truth, n, bytes)});
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("validate/fit_intra_node_ring: recovers the parameters that generated the sweeps") {
  const topo::ComputeCalibration::RingCalibration truth{0, 30.0, 3.0, 250.0, 600.0};
  const validate::RingFit fit = validate::fit_intra_node_ring(synthetic_sweeps(truth));
  REQUIRE(fit.report.fitted);
  CHECK(fit.calibration.min_bytes == 1048576.0);
  CHECK(fit.calibration.latency_us == doctest::Approx(30.0).epsilon(0.001));
  CHECK(fit.calibration.step_us == doctest::Approx(3.0).epsilon(0.001));
  CHECK(fit.calibration.link_GBps == doctest::Approx(250.0).epsilon(0.001));
  CHECK(fit.calibration.user_GBps == doctest::Approx(600.0).epsilon(0.001));
  CHECK(fit.calibration.fill_GBps == 0);  // no start-up term in the data: none fitted
  CHECK(fit.report.residuals.size() == 33);  // the 64 KiB rows left out
  CHECK(fit.report.errors.max_abs_error < 1e-3);
}

TEST_CASE("validate/fit_intra_node_ring: finds the extent of a start-up term and its rate") {
  const topo::ComputeCalibration::RingCalibration truth{0, 30.0, 3.0, 250.0, 600.0, 64.0 * (1 << 20), 2000.0};
  const validate::RingFit fit = validate::fit_intra_node_ring(synthetic_sweeps(truth));
  REQUIRE(fit.report.fitted);
  CHECK(fit.calibration.fill_bytes == 64.0 * (1 << 20));
  CHECK(fit.calibration.fill_GBps == doctest::Approx(2000.0).epsilon(0.001));
  CHECK(fit.calibration.link_GBps == doctest::Approx(250.0).epsilon(0.001));
  CHECK(fit.calibration.user_GBps == doctest::Approx(600.0).epsilon(0.001));
  CHECK(fit.report.errors.max_abs_error < 1e-3);
}

TEST_CASE("validate/fit_intra_node_ring: one GPU count cannot separate the terms") {
  std::vector<validate::RingSweep> sweeps = synthetic_sweeps({0, 30.0, 3.0, 250.0, 600.0});
  sweeps.resize(1);
  const validate::RingFit fit = validate::fit_intra_node_ring(sweeps);
  CHECK_FALSE(fit.report.fitted);
  REQUIRE(!fit.report.notes.empty());
  CHECK(fit.report.notes.front().find("two GPU counts") != std::string::npos);
}

TEST_CASE("validate/calibration: the shipped A100 ring is the fit to the shipped all_reduce sweeps") {
  std::vector<validate::RingSweep> sweeps;
  for (const std::string& file : kRingRecords) {
    for (validate::RingSweep& s : validate::read_ring_sweeps(testing::source_path(file))) {
      if (s.gpu.find("A100") != std::string::npos) sweeps.push_back(s);
    }
  }
  CHECK(sweeps.size() == 8);  // stas00's 8 GPUs, vTrain's 2 to 8
  const validate::RingFit fit = validate::fit_intra_node_ring(sweeps);
  REQUIRE(fit.report.fitted);
  const auto shipped = config::read_compute_calibration(testing::source_path("scenarios/calibration/a100.json")).intra_node_ring;
  REQUIRE(shipped.has_value());
  CHECK(fit.calibration == *shipped);
  // NVLink 3 moves 300 GB/s per direction per GPU (12 links x 25 GB/s, A100 datasheet): the
  // fitted link rate is a share of it, not more.
  CHECK(shipped->link_GBps < 300.0);
  CHECK(shipped->link_GBps > 240.0);
  CHECK(fit.report.errors.mape < 0.06);
  // Hopper has no ring sweep: NCCL's model alone.
  CHECK_FALSE(config::read_compute_calibration(testing::source_path("scenarios/calibration/h100.json")).intra_node_ring);
}

TEST_CASE("validate/read_ring_sweeps: nccl-tests logs count their devices, and bad records name the row") {
  const std::string log = testing::temp_file("ring_fit_log.txt", R"(# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid  1234 on   hostname device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid  1235 on   hostname device  1 [0x0f] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    44.21   23.72   23.72      0    45.10   23.25   23.25      0
     2097152        524288     float     sum      -1    53.43   39.25   39.25      0    51.13   41.01   41.01      0
)");
  const std::vector<validate::RingSweep> s = validate::read_ring_sweeps(log);
  REQUIRE(s.size() == 1);
  CHECK(s[0].ranks == 2);
  REQUIRE(s[0].points.size() == 2);
  CHECK(s[0].points[1].time_us == doctest::Approx(51.13));  // the faster placement

  const std::string bad = testing::temp_file(
      "ring_fit_bad.json", R"([{"collective": "all_reduce", "n_gpus": 2, "n_nodes": 1, "rows": [{"bytes": 1048576}]}])");
  try {
    (void)validate::read_ring_sweeps(bad);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.location() == "/0/rows/0");
  }
}

TEST_CASE("collective model: the measured ring applies inside one A100 node from 1 MiB up") {
  const topo::ClusterSpec a100 = config::load_cluster("dgx-a100-80gb", 2);
  REQUIRE(a100.gpu.calibration.intra_node_ring.has_value());
  const topo::CollectiveModel model(a100);
  const auto& ring = *a100.gpu.calibration.intra_node_ring;
  const topo::GroupShape two{2, 1, 2, 2};
  // 1 GiB on 2 GPUs: vTrain measured 5,443 us; NCCL's model alone says ~4,550 us.
  const double gib = static_cast<double>(std::int64_t{1} << 30);
  const auto p = model.predict(sim::CollectiveKind::kAllReduce, sim::Bytes(std::int64_t{1} << 30), two);
  CHECK(p.time_us == doctest::Approx(validate::ring_all_reduce_us(ring, 2, gib)).epsilon(1e-9));
  CHECK(std::abs(p.time_us / 5442.8 - 1) < 0.06);
  // Below min_bytes, and across nodes, NCCL's model alone.
  const auto small = model.predict(sim::CollectiveKind::kAllReduce, sim::Bytes(std::int64_t{1} << 16), two);
  CHECK(small.time_us < validate::ring_all_reduce_us(ring, 2, 65536.0));
  const topo::GroupShape across{2, 2, 1, 1};
  const auto net = model.predict(sim::CollectiveKind::kAllReduce, sim::Bytes(std::int64_t{1} << 30), across);
  CHECK(net.time_us != doctest::Approx(validate::ring_all_reduce_us(ring, 2, gib)));
  // Reduce-scatter and all-gather: half the steps, the ring's (n-1)/n of the link bytes.
  const auto rs = model.predict(sim::CollectiveKind::kReduceScatter, sim::Bytes(std::int64_t{1} << 30), two);
  CHECK(rs.time_us < p.time_us);
  CHECK(rs.time_us > 0.5 * p.time_us);
}
