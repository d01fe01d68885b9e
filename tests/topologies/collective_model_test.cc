#include "topologies/collective_model.h"

#include <doctest/doctest.h>

#include "config/scenario.h"

using namespace trainsim;
using sim::CollectiveKind;

namespace {
double busbw(const topo::CollectiveModel& m, CollectiveKind k, std::int64_t bytes, topo::GroupShape s) {
  const auto p = m.predict(k, sim::Bytes(bytes), s);
  return static_cast<double>(bytes) / (p.time_us * 1e3) * topo::CollectiveModel::bus_factor(k, s.ranks);
}
}  // namespace

TEST_CASE("topologies/CollectiveModel: NCCL's ring bandwidth on one DGX A100 node") {
  const topo::CollectiveModel m(config::load_cluster("dgx-a100-80gb", 1));
  const topo::GroupShape node{8, 1, 8, 8};
  const auto p = m.predict(CollectiveKind::kAllReduce, sim::Bytes(1 << 30), node);
  CHECK(p.algorithm == topo::Algorithm::kRing);
  CHECK(p.protocol == topo::Protocol::kSimple);
  // 12 channels x 20 GB/s (search.cc channel duplication of 6 x 40).
  CHECK(busbw(m, CollectiveKind::kAllReduce, 1 << 30, node) == doctest::Approx(240).epsilon(0.02));
  // Small messages pick the low-latency protocol.
  CHECK(m.predict(CollectiveKind::kAllReduce, sim::Bytes(1024), node).protocol == topo::Protocol::kLL);
}

TEST_CASE("topologies/CollectiveModel: multi-node rings are bound by the NICs") {
  const topo::CollectiveModel m(config::load_cluster("dgx-a100-80gb", 4));
  // One GPU per node (a data-parallel group with TP 8): one HDR NIC, ~24 GB/s.
  const double one_nic = busbw(m, CollectiveKind::kAllReduce, std::int64_t{1} << 30, {4, 4, 1, 1});
  CHECK(one_nic > 20.0);
  CHECK(one_nic < 25.0);
  // Eight GPUs per node use all eight NICs: ~8 x 24 GB/s.
  const double eight_nics = busbw(m, CollectiveKind::kAllReduce, std::int64_t{1} << 32, {32, 4, 8, 8});
  CHECK(eight_nics > 150.0);
  CHECK(eight_nics < 200.0);
}

TEST_CASE("topologies/CollectiveModel: time grows with size and the choice is the fastest") {
  const topo::CollectiveModel m(config::load_cluster("dgx-h100", 2));
  const topo::GroupShape s{16, 2, 8, 8};
  double last = 0;
  for (std::int64_t b = 8; b <= (std::int64_t{1} << 34); b *= 4) {
    const auto best = m.predict(CollectiveKind::kAllReduce, sim::Bytes(b), s);
    CHECK(best.time_us >= last);
    last = best.time_us;
    for (int a = 0; a < 7; ++a) {
      for (int p = 0; p < 3; ++p) {
        const auto c = m.predict(CollectiveKind::kAllReduce, sim::Bytes(b), s, static_cast<topo::Algorithm>(a),
                                 static_cast<topo::Protocol>(p));
        if (c.valid) CHECK(c.time_us >= best.time_us);
      }
    }
  }
}
