// Contention: data-parallel all-reduces of a TP-8 plan (one DP group per local GPU, eight groups
// running at once) on the engine's flow network. An oversubscribed fat tree makes the groups share
// leaf uplinks and slows them; a rail-optimized fabric keeps each group on its own rail and does
// not, even with the same oversubscription. Symmetric fidelity (one group simulated, its load
// counted eight times) agrees with full fidelity. A group whose GPUs share NICs loads all of them.

#include <doctest/doctest.h>

#include "config/scenario.h"
#include "sim/engine.h"
#include "topologies/cluster.h"
#include "topologies/cluster_timing.h"

using namespace trainsim;

namespace {

constexpr int kNodes = 8, kGpusPerNode = 8;

// Time of one all-reduce of `bytes` on each of `groups` at once (every rank in one group).
double all_reduce_s(const topo::ClusterSpec& spec, const std::vector<std::vector<std::uint32_t>>& groups,
                    std::int64_t bytes, bool symmetric) {
  const topo::Cluster cluster(spec);
  const auto ranks = static_cast<std::uint32_t>(spec.num_nodes * spec.gpus_per_node);
  sim::TaskGraph g(ranks, {"dp"}, {"dp"}, {});
  const std::uint32_t c = g.add_class("replica");
  sim::Task t;
  t.kind = sim::TaskKind::kCollective;
  t.payload = g.add_comm_op(
      c, sim::CommOp{sim::CollectiveKind::kAllReduce, sim::DataType::kBf16, sim::Bytes(bytes)});
  t.name = g.intern("dp all-reduce");
  g.add_task(c, t, {});
  std::vector<sim::RankId> simulated;
  for (const auto& group : groups) {
    sim::Communicator comm;
    comm.slot = 0;
    comm.symmetry_class = 0;
    for (std::uint32_t r : group) comm.members.push_back(sim::RankId{r});
    const sim::CommId id = g.add_communicator(comm);
    for (sim::RankId r : comm.members) {
      g.set_class_of(r, c);
      g.set_comm(r, 0, id);
    }
  }
  for (std::uint32_t r = 0; r < ranks; ++r) {
    if (!symmetric || r == 0) simulated.push_back(sim::RankId{r});
  }
  g.set_simulated(simulated);
  topo::ClusterTiming timing(cluster, g);
  sim::EngineOptions options;
  options.symmetric = symmetric;
  sim::Engine engine(g, timing, options);
  return engine.run().makespan.seconds();
}

// Time of one all-reduce of `bytes` on every DP group of a TP-8 plan over kNodes nodes.
double dp_all_reduce_s(const topo::ClusterSpec& spec, std::int64_t bytes, bool symmetric) {
  std::vector<std::vector<std::uint32_t>> groups(kGpusPerNode);
  for (std::uint32_t local = 0; local < kGpusPerNode; ++local)
    for (std::uint32_t node = 0; node < kNodes; ++node) groups[local].push_back(node * kGpusPerNode + local);
  return all_reduce_s(spec, groups, bytes, symmetric);
}

topo::ClusterSpec fabric(const std::string& topology, int nodes_per_leaf, double oversubscription) {
  topo::ClusterSpec spec = config::load_cluster("dgx-h100", kNodes);
  spec.inter_node.topology = topology;
  spec.inter_node.nodes_per_leaf = nodes_per_leaf;
  spec.inter_node.oversubscription = oversubscription;
  return spec;
}

}  // namespace

TEST_CASE(
    "topologies/contention: an oversubscribed fat tree slows DP all-reduces, a rail-optimized "
    "fabric does not") {
  const std::int64_t bytes = std::int64_t{1} << 30;
  // Two nodes per leaf: every DP ring leaves its leaf between node pairs.
  const double non_blocking = dp_all_reduce_s(fabric("fat_tree", 2, 1.0), bytes, true);
  const double fat_4to1 = dp_all_reduce_s(fabric("fat_tree", 2, 4.0), bytes, true);
  // Four nodes per rail leaf, the same 4:1 taper: each leaf carries one DP group only.
  const double rail_4to1 = dp_all_reduce_s(fabric("rail_optimized", 4, 4.0), bytes, true);
  const double rail_1to1 = dp_all_reduce_s(fabric("rail_optimized", 4, 1.0), bytes, true);

  // Alone, a DP group's ring runs at its NIC's rate; eight groups share a 4:1 leaf uplink of 16
  // ports' worth at 4 ports: at least ~2x slower.
  CHECK(fat_4to1 > 1.8 * non_blocking);
  CHECK(rail_4to1 == doctest::Approx(non_blocking).epsilon(0.01));
  CHECK(rail_1to1 == doctest::Approx(non_blocking).epsilon(0.01));
  // A single DP group on the oversubscribed fat tree is not slowed (nothing to share with): the
  // slowdown is contention, not a slower link.
  topo::ClusterSpec one = fabric("fat_tree", 2, 4.0);
  const topo::CollectiveModel model(one);
  const auto alone = model.predict(sim::CollectiveKind::kAllReduce, sim::Bytes(bytes),
                                   topo::GroupShape{kNodes, kNodes, 1, 1});
  CHECK(non_blocking == doctest::Approx(alone.time_us * 1e-6).epsilon(0.01));
}

TEST_CASE("topologies/contention: symmetric fidelity keeps the multiplicity of identical groups") {
  const std::int64_t bytes = std::int64_t{256} << 20;
  for (const auto& spec :
       {fabric("fat_tree", 2, 4.0), fabric("fat_tree", 2, 1.0), fabric("rail_optimized", 4, 4.0)}) {
    CAPTURE(spec.inter_node.topology);
    CAPTURE(spec.inter_node.oversubscription);
    CHECK(dp_all_reduce_s(spec, bytes, true) ==
          doctest::Approx(dp_all_reduce_s(spec, bytes, false)).epsilon(1e-6));
  }
}

TEST_CASE("topologies/contention: a ring across nodes whose GPUs share NICs crosses on all of them") {
  // vTrain's A100 cluster (validate/suites/vtrain_a100.json): 8 GPUs and 4 NICs per node, two GPUs
  // on each. A tensor-parallel group of 16 over two nodes: NCCL's channels leave each node through
  // all four NICs, so the flow network must not slow the ring below NCCL's own rate (it ran 1.7x
  // slower when the crossings all left from the node's first GPUs, two NICs' worth).
  topo::ClusterSpec spec = config::load_cluster("dgx-a100-80gb", 2);
  spec.inter_node.nics_per_node = 4;
  std::vector<std::uint32_t> tp16(16);
  for (std::uint32_t r = 0; r < 16; ++r) tp16[r] = r;
  const std::int64_t bytes = std::int64_t{192} << 20;
  const double engine_s = all_reduce_s(spec, {tp16}, bytes, false);
  const topo::CollectiveModel model(spec);
  const auto nccl = model.predict(sim::CollectiveKind::kAllReduce, sim::Bytes(bytes), topo::GroupShape{16, 2, 8, 4});
  REQUIRE(nccl.valid);
  CHECK(engine_s == doctest::Approx(nccl.time_us * 1e-6).epsilon(0.01));
  // The same group with a NIC per GPU is faster (twice the NICs), so the 4-NIC rate is the NICs'.
  topo::ClusterSpec eight = config::load_cluster("dgx-a100-80gb", 2);
  CHECK(all_reduce_s(eight, {tp16}, bytes, false) < 0.8 * engine_s);
}
