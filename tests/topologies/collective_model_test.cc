#include "topologies/collective_model.h"

#include <doctest/doctest.h>

#include "config/scenario.h"

using namespace trainsim;
using sim::CollectiveKind;
using topo::Algorithm;
using topo::Protocol;

namespace {

double busbw(const topo::CollectivePrediction& p, CollectiveKind k, std::int64_t bytes, int ranks) {
  return static_cast<double>(bytes) / (p.time_us * 1e3) *
         topo::CollectiveModel::bus_factor(k, ranks);
}

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

}  // namespace

TEST_CASE("topologies/CollectiveModel: NCCL's graph search on one DGX A100 node") {
  const topo::CollectiveModel m(config::load_cluster("dgx-a100-80gb", 1));
  const topo::NcclTopology t = m.topology({8, 1, 8, 8});
  // 12 NVLinks x 20 GB/s = 240 GB/s per GPU: 6 channels at 40 GB/s, duplicated to 12 x 20
  // (search.cc ncclTopoDupChannels); rings run on twice the search channels (connect.cc).
  CHECK(t.ring.channels == 12);
  CHECK(t.ring.bw_intra == doctest::Approx(20));
  CHECK(t.tree.channels == 12);
  CHECK(t.channels == 24);
  CHECK(t.nvls.channels == 0);  // no NVLink SHARP before Hopper
}

TEST_CASE("topologies/CollectiveModel: NCCL's latency and bandwidth formulas, checked by hand") {
  // NCCL's model alone: without the A100 calibration's measured intra-node ring.
  topo::ClusterSpec cluster = config::load_cluster("dgx-a100-80gb", 1);
  cluster.gpu.calibration.intra_node_ring.reset();
  const topo::CollectiveModel m(cluster);
  const topo::NcclTopology t = m.topology({8, 1, 8, 8});
  // Ring/LL all-reduce of 8 B: base 6.6 + 14 steps x 0.6 us; bus bandwidth min(87.7, 0.5 x 240),
  // algorithm bandwidth x 8/14 (tuning.cc).
  const auto ll =
      m.predict(CollectiveKind::kAllReduce, sim::Bytes(8), t, Algorithm::kRing, Protocol::kLL);
  REQUIRE(ll.valid);
  CHECK(ll.nccl_time_us == doctest::Approx(6.6 + 14 * 0.6 + 8.0 / (1000.0 * 87.7 * 8 / 14)));
  CHECK(ll.alg_bandwidth_GBps <= 87.7 * 8 / 14 + 1e-9);
  // Ring/Simple at 1 GiB: latency 8.4 + 14 x 3.4, bus bandwidth 12 x 20 = 240.
  const auto simple = m.predict(CollectiveKind::kAllReduce, sim::Bytes(kGiB), t, Algorithm::kRing,
                                Protocol::kSimple);
  CHECK(simple.nccl_time_us ==
        doctest::Approx(8.4 + 14 * 3.4 + static_cast<double>(kGiB) / (1000.0 * 240 * 8 / 14)));
  // The prediction adds the pipeline fill of 2 MiB chunks, never removes time.
  CHECK(simple.time_us > simple.nccl_time_us);
  CHECK(simple.time_us < 1.1 * simple.nccl_time_us);
  // The choice: LL for small messages, Simple for large ones; ~235 GB/s bus bandwidth measured
  // by NVIDIA on DGX A100 (GTC24 S62129: 232; sjeaugey, nccl-tests #149: ~230).
  CHECK(m.predict(CollectiveKind::kAllReduce, sim::Bytes(1024), t).protocol == Protocol::kLL);
  const auto big = m.predict(CollectiveKind::kAllReduce, sim::Bytes(4 * kGiB), t);
  CHECK(big.algorithm == Algorithm::kRing);
  CHECK(big.protocol == Protocol::kSimple);
  CHECK(busbw(big, CollectiveKind::kAllReduce, 4 * kGiB, 8) == doctest::Approx(235).epsilon(0.05));
  // With the measured ring (the shipped calibration): stas00's 8x A100 sweep, 233.9 GB/s at 4 GiB.
  const topo::CollectiveModel measured(config::load_cluster("dgx-a100-80gb", 1));
  const auto ring = measured.predict(CollectiveKind::kAllReduce, sim::Bytes(4 * kGiB), t);
  CHECK(busbw(ring, CollectiveKind::kAllReduce, 4 * kGiB, 8) == doctest::Approx(233.9).epsilon(0.03));
}

TEST_CASE("topologies/CollectiveModel: H100 all-reduce uses NVLink SHARP at large sizes") {
  const topo::CollectiveModel m(config::load_cluster("dgx-h100", 1));
  const topo::NcclTopology t = m.topology({8, 1, 8, 8});
  // One NVLS channel per GPU at 40 GB/s (8 x 40 + the head's 40 <= 18 x 20.6), bwInter raised to
  // 60 in the search's second pass: NCCL's NVLS bus bandwidth is 8 x min(40 x 0.85 x 7/8 x 2, 60).
  CHECK(t.nvls.channels == 8);
  CHECK(t.nvls.bw_intra == doctest::Approx(40));
  CHECK(t.nvls.bw_inter == doctest::Approx(60));
  const auto big = m.predict(CollectiveKind::kAllReduce, sim::Bytes(8 * kGiB), t);
  CHECK(big.algorithm == Algorithm::kNvls);
  // ~480 GB/s busbw on 8 H100s (sjeaugey, nccl-tests #212; GTC24 S62129).
  CHECK(busbw(big, CollectiveKind::kAllReduce, 8 * kGiB, 8) == doctest::Approx(476).epsilon(0.03));
  // The ring alone: 12 x 30 = 360 GB/s, ~370 measured with NCCL_ALGO=Ring (nccl-tests #212).
  const auto ring = m.predict(CollectiveKind::kAllReduce, sim::Bytes(8 * kGiB), t, Algorithm::kRing,
                              Protocol::kSimple);
  CHECK(busbw(ring, CollectiveKind::kAllReduce, 8 * kGiB, 8) == doctest::Approx(360).epsilon(0.03));
  // NVLS is not offered for all-reduce across nodes without CollNet, NVLSTree only across nodes.
  CHECK_FALSE(m.predict(CollectiveKind::kAllReduce, sim::Bytes(kGiB), t, Algorithm::kNvlsTree,
                        Protocol::kSimple)
                  .valid);
  CHECK_FALSE(
      m.predict(CollectiveKind::kAllReduce, sim::Bytes(kGiB), t, Algorithm::kNvls, Protocol::kLL)
          .valid);
}

TEST_CASE("topologies/CollectiveModel: multi-node rings are bound by the NICs") {
  const topo::CollectiveModel m(config::load_cluster("dgx-a100-80gb", 4));
  // One GPU per node (a data-parallel group with TP 8): one HDR NIC, ~24 GB/s (nccl #412).
  const double one_nic =
      busbw(m.predict(CollectiveKind::kAllReduce, sim::Bytes(kGiB), topo::GroupShape{4, 4, 1, 1}),
            CollectiveKind::kAllReduce, kGiB, 4);
  CHECK(one_nic > 19.0);
  CHECK(one_nic < 24.5);
  // Eight GPUs per node use all eight NICs: ~8 x 24 GB/s (192 measured on DGX A100, nccl #1576).
  const double eight = busbw(
      m.predict(CollectiveKind::kAllReduce, sim::Bytes(4 * kGiB), topo::GroupShape{32, 4, 8, 8}),
      CollectiveKind::kAllReduce, 4 * kGiB, 32);
  CHECK(eight > 160.0);
  CHECK(eight < 200.0);
}

TEST_CASE(
    "topologies/CollectiveModel: the choice is NCCL's lowest estimate and time grows with size") {
  const topo::CollectiveModel m(config::load_cluster("dgx-h100", 4));
  for (const topo::GroupShape s : {topo::GroupShape{32, 4, 8, 8}, topo::GroupShape{4, 4, 1, 1}}) {
    const topo::NcclTopology t = m.topology(s);
    double last = 0;
    for (std::int64_t b = 8; b <= (std::int64_t{1} << 34); b *= 4) {
      for (CollectiveKind k : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                               CollectiveKind::kReduceScatter, CollectiveKind::kBroadcast}) {
        const auto best = m.predict(k, sim::Bytes(b), t);
        for (int a = 0; a < 7; ++a) {
          for (int p = 0; p < 3; ++p) {
            const auto c =
                m.predict(k, sim::Bytes(b), t, static_cast<Algorithm>(a), static_cast<Protocol>(p));
            if (c.valid) CHECK(c.nccl_time_us >= best.nccl_time_us);
          }
        }
      }
      const auto ar = m.predict(CollectiveKind::kAllReduce, sim::Bytes(b), t);
      CHECK(ar.time_us >= last);
      last = ar.time_us;
    }
  }
}

TEST_CASE("topologies/CollectiveModel: which algorithms each function may use") {
  const topo::CollectiveModel m(config::load_cluster("dgx-h100", 8));
  const topo::NcclTopology one_per_node = m.topology({8, 8, 1, 1});
  // PAT serves all-gather/reduce-scatter with one GPU per node, never all-reduce.
  CHECK(m.predict(CollectiveKind::kAllGather, sim::Bytes(1 << 20), one_per_node, Algorithm::kPat,
                  Protocol::kSimple)
            .valid);
  CHECK_FALSE(m.predict(CollectiveKind::kAllReduce, sim::Bytes(1 << 20), one_per_node,
                        Algorithm::kPat, Protocol::kSimple)
                  .valid);
  const topo::NcclTopology full = m.topology({64, 8, 8, 8});
  CHECK_FALSE(m.predict(CollectiveKind::kAllGather, sim::Bytes(1 << 20), full, Algorithm::kPat,
                        Protocol::kSimple)
                  .valid);
  // Broadcast and reduce are rings only; no CollNet without SHARP.
  CHECK_FALSE(m.predict(CollectiveKind::kBroadcast, sim::Bytes(1 << 20), full, Algorithm::kTree,
                        Protocol::kSimple)
                  .valid);
  CHECK_FALSE(m.predict(CollectiveKind::kAllReduce, sim::Bytes(1 << 20), full,
                        Algorithm::kCollNetDirect, Protocol::kSimple)
                  .valid);
  // With in-network reduction the CollNet algorithms appear.
  topo::ClusterSpec sharp = config::load_cluster("dgx-h100", 8);
  sharp.inter_node.sharp = true;
  const topo::CollectiveModel ms(sharp);
  CHECK(ms.predict(CollectiveKind::kAllReduce, sim::Bytes(1 << 20), ms.topology({64, 8, 8, 8}),
                   Algorithm::kCollNetChain, Protocol::kSimple)
            .valid);
}

TEST_CASE("topologies/CollectiveModel: one host thread launching for several GPUs sets a floor") {
  const topo::ClusterSpec c = config::load_cluster("dgx-a100-80gb", 1);
  const topo::CollectiveModel m(c);
  const auto alone =
      m.predict(CollectiveKind::kAllReduce, sim::Bytes(8), topo::GroupShape{8, 1, 8, 8});
  const auto threaded =
      m.predict(CollectiveKind::kAllReduce, sim::Bytes(8), topo::GroupShape{8, 1, 8, 8}, 8);
  CHECK(alone.time_us < 8 * c.nccl.launch_us);
  CHECK(threaded.time_us == doctest::Approx(8 * c.nccl.launch_us));
}

TEST_CASE("topologies/CollectiveModel: all-to-all across nodes is bound by one NIC per GPU") {
  const topo::CollectiveModel m(config::load_cluster("dgx-h100", 4));
  const auto p =
      m.predict(CollectiveKind::kAllToAll, sim::Bytes(kGiB), topo::GroupShape{32, 4, 8, 8});
  // 24/32 of each rank's buffer leaves the node through its own 400 Gb/s NIC, behind PCIe Gen5
  // (NCCL's 48 GB/s), at the ~96% RDMA achieves.
  const double nic_time_us = static_cast<double>(kGiB) * 24 / 32 / (48e3 * 0.96);
  CHECK(p.time_us == doctest::Approx(nic_time_us).epsilon(0.03));
}

TEST_CASE("topologies/CollectiveModel: a node-aggregated multicast sends each item once per node it reaches") {
  // 64 ranks on 8 nodes (DeepSeek-V3's EP 64 on DGX H100: 256 experts, 8 per token).
  const topo::GroupShape s{64, 8, 8, 8};
  const topo::AllToAllShares plain = topo::plain_all_to_all(s);
  CHECK(plain.inter == doctest::Approx(56.0 / 64));
  CHECK(plain.intra == doctest::Approx(7.0 / 64));
  // One destination per item: what a plain all-to-all sends across nodes.
  CHECK(topo::multicast_all_to_all(s, 1, 256, 0, 0).inter == doctest::Approx(plain.inter));
  // Eight destinations among 256 (32 per node): a node is hit with 1 - C(224, 8)/C(256, 8);
  // each of the 7 other nodes receives the item once, 1/8 of its 8 copies.
  double miss = 1;
  for (int i = 0; i < 8; ++i) miss *= (224.0 - i) / (256.0 - i);
  const topo::AllToAllShares open = topo::multicast_all_to_all(s, 8, 256, 0, 0);
  CHECK(open.inter == doctest::Approx(7 * (1 - miss) / 8));
  CHECK(open.intra == doctest::Approx(7.0 / 8));  // every copy for another GPU of the node, over NVLink
  // Group-limited to 4 of 8 groups (one per node): a node is hit only if its group is chosen (1/2),
  // then by 1 - C(96, 8)/C(128, 8): DeepSeek-V3's at most 4 nodes per token.
  double miss4 = 1;
  for (int i = 0; i < 8; ++i) miss4 *= (96.0 - i) / (128.0 - i);
  const topo::AllToAllShares limited = topo::multicast_all_to_all(s, 8, 256, 8, 4);
  CHECK(limited.inter == doctest::Approx(7 * 0.5 * (1 - miss4) / 8));
  CHECK(limited.inter < open.inter);
  CHECK(limited.inter * 8 <= 4.0 + 1e-12);  // at most 4 nodes, fewer remote ones
  // Groups spanning two nodes each (4 groups, 2 chosen): the node's group is chosen with 1/2.
  double miss_span = 1;
  for (int i = 0; i < 8; ++i) miss_span *= (96.0 - i) / (128.0 - i);
  CHECK(topo::multicast_all_to_all(s, 8, 256, 4, 2).inter == doctest::Approx(7 * 0.5 * (1 - miss_span) / 8));
  // Inside one node nothing crosses the network.
  CHECK(topo::multicast_all_to_all(topo::GroupShape{8, 1, 8, 8}, 8, 256, 8, 4).inter == 0);
  // The time follows the network share: half the NIC traffic, about half the time.
  const topo::CollectiveModel m(config::load_cluster("dgx-h100", 8));
  const auto a = m.predict_all_to_all(sim::Bytes(kGiB), s, plain);
  const auto b = m.predict_all_to_all(sim::Bytes(kGiB), s, limited);
  CHECK(a.time_us == doctest::Approx(m.predict(CollectiveKind::kAllToAll, sim::Bytes(kGiB), s).time_us));
  CHECK(b.time_us / a.time_us == doctest::Approx(limited.inter / plain.inter).epsilon(0.02));
}

TEST_CASE("topologies/CollectiveModel: single-node NVLS runs at the NVLink term, not NCCL's search cap") {
  // On NVLink 5 NCCL's estimate caps NVLS at 8 x 90 (the top speed step, no link behind it);
  // B300 nodes measure ~845 GB/s busbw with NVLS (NVIDIA/nccl #2140). The predicted rate is the
  // NVLink term 8 x 80 x 0.74 x 7/8 x 2 = 829.
  const topo::CollectiveModel m(config::load_cluster("dgx-b200", 1));
  const topo::NcclTopology t = m.topology({8, 1, 8, 8});
  const auto p = m.predict(CollectiveKind::kAllReduce, sim::Bytes(16 * kGiB), t);
  CHECK(p.algorithm == Algorithm::kNvls);
  CHECK(busbw(p, CollectiveKind::kAllReduce, 16 * kGiB, 8) == doctest::Approx(829).epsilon(0.01));
  CHECK(p.nccl_time_us > p.time_us);  // NCCL's own estimate is slower
}

TEST_CASE("topologies/CollectiveModel: point-to-point kernels take NCCL's channels per peer") {
  // Worked by hand from NCCL 2.30's rules (src/graph/paths.cc, src/enqueue.cc, src/init.cc).
  const topo::CollectiveModel h100(config::load_cluster("dgx-h100", 8));
  const topo::CollectiveModel a100(config::load_cluster("dgx-a100-80gb", 8));
  constexpr std::int64_t kMiB = std::int64_t{1} << 20;
  // Across nodes one channel per 14 GB/s of the GPU's NIC path, pow2Up: H100 min(400 Gb/s NIC,
  // PCIe 5 x16 48 GB/s) -> 4; A100 min(200 Gb/s, PCIe 4 24 GB/s) -> 2. A 16 MiB message splits
  // into 128 KiB-bounded parts, so it uses them all; a 64 KiB one fits one 64 KiB part.
  CHECK(h100.predict_p2p(sim::Bytes(16 * kMiB), false).channels == 4);
  CHECK(a100.predict_p2p(sim::Bytes(16 * kMiB), false).channels == 2);
  CHECK(h100.predict_p2p(sim::Bytes(64 * 1024), false).channels == 1);
  // Inside a node: 2 per NVLink (36 on H100, 24 on A100), at most the pair's p2pnChannels
  // (pow2Up of its run-time channels), halved per operation while x 2 ranks exceeds them; parts of
  // 64 KiB..16 MiB (512 KiB chunks), so 16 MiB -> half the channels, 1 GiB -> all of them.
  topo::GroupShape pair{2, 1, 2, 1};
  const topo::NcclTopology t = h100.topology(pair);
  int total = 1;
  while (total < t.channels) total *= 2;
  CHECK(h100.predict_p2p(sim::Bytes(16 * kMiB), true).channels == total / 2);
  CHECK(h100.predict_p2p(sim::Bytes(1024 * kMiB), true).channels == total);
  CHECK(h100.predict_p2p(sim::Bytes(64 * 1024), true).channels == 1);
  // An all-to-all of 64 ranks on 8 nodes: 4 channels per network peer halved to 2 (8 batches of 8
  // peers on 16 channels), 1 per operation to start (2 x 64 > 16), doubled once for 16 MiB per
  // peer: every peer's 2 channels cover all 16.
  const topo::GroupShape ep{64, 8, 8, 8};
  const topo::NcclTopology te = h100.topology(ep);
  REQUIRE(te.channels == 16);
  CHECK(h100.p2p_channels(16.0 * kMiB, ep, 63, te.channels) == 16);
  CHECK(h100.p2p_channels(16.0 * kMiB, ep, 3, te.channels) == 6);
  CHECK(h100.p2p_channels(1024.0, ep, 3, te.channels) == 3);
  CHECK(h100.predict(CollectiveKind::kAllToAll, sim::Bytes(kGiB), te).channels == 16);
  // The grid never exceeds the communicator's channels and never falls with the message.
  for (const topo::GroupShape s : {pair, topo::GroupShape{8, 1, 8, 8}, topo::GroupShape{2, 2, 1, 1}, ep}) {
    const topo::NcclTopology ts = a100.topology(s);
    int last = 0;
    for (std::int64_t b = 1024; b <= 4 * kGiB; b *= 4) {
      const int c = a100.predict(CollectiveKind::kAllToAll, sim::Bytes(b), ts).channels;
      CHECK(c >= std::max(1, last));
      CHECK(c <= std::max(ts.channels * 2, 1));
      last = c;
    }
  }
}
