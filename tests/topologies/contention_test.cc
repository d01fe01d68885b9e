// Contention: data-parallel all-reduces of a TP-8 plan (one DP group per local GPU, eight groups
// running at once) on the engine's flow network. An oversubscribed fat tree makes the groups share
// leaf uplinks and slows them; a rail-optimized fabric keeps each group on its own rail and does
// not, even with the same oversubscription. Symmetric fidelity (one group simulated, its load
// counted eight times) agrees with full fidelity. And with nothing else moving, any one group runs
// at the collective model's (NCCL's) rate: the flow network's load pattern for a group uses the
// links NCCL's channels use, all the NICs of a node included where GPUs share them; one pipeline
// transfer runs at the point-to-point model's rate.

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "config/scenario.h"
#include "sim/engine.h"
#include "topologies/cluster.h"
#include "topologies/cluster_timing.h"

using namespace trainsim;

namespace {

constexpr int kNodes = 8, kGpusPerNode = 8;

// The engine's makespan of graph `g` on `cluster`, simulating `simulated`.
double makespan_s(const topo::Cluster& cluster, sim::TaskGraph& g,
                  std::vector<sim::RankId> simulated, bool symmetric) {
  std::sort(simulated.begin(), simulated.end());
  g.set_simulated(simulated);
  topo::ClusterTiming timing(cluster, g);
  sim::EngineOptions options;
  options.symmetric = symmetric;
  sim::Engine engine(g, timing, options);
  return engine.run().makespan.seconds();
}

// Time of one collective (all-reduce unless `kind` says otherwise) of `bytes` on each of `groups`
// at once (every rank in at most one group).
double collective_s(const topo::ClusterSpec& spec,
                    const std::vector<std::vector<std::uint32_t>>& groups, std::int64_t bytes,
                    bool symmetric, sim::CollectiveKind kind = sim::CollectiveKind::kAllReduce) {
  const topo::Cluster cluster(spec);
  const auto ranks = static_cast<std::uint32_t>(spec.num_nodes * spec.gpus_per_node);
  sim::TaskGraph g(ranks, {"dp"}, {"dp"}, {});
  const std::uint32_t c = g.add_class("replica");
  sim::Task t;
  t.kind = sim::TaskKind::kCollective;
  t.payload = g.add_comm_op(c, sim::CommOp{kind, sim::DataType::kBf16, sim::Bytes(bytes)});
  t.name = g.intern("collective");
  g.add_task(c, t, {});
  const std::uint32_t idle = g.add_class("idle");  // ranks in no group: no tasks
  for (std::uint32_t r = 0; r < ranks; ++r) g.set_class_of(sim::RankId{r}, idle);
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
  // Every member of a group (one of them under symmetric fidelity); ranks in no group idle.
  for (const auto& group : groups) {
    for (std::uint32_t r : group) {
      if (!symmetric || simulated.empty()) simulated.push_back(sim::RankId{r});
    }
  }
  return makespan_s(cluster, g, simulated, symmetric);
}

// Time of one all-reduce of `bytes` on every DP group of a TP-8 plan over kNodes nodes.
double dp_all_reduce_s(const topo::ClusterSpec& spec, std::int64_t bytes, bool symmetric) {
  std::vector<std::vector<std::uint32_t>> groups(kGpusPerNode);
  for (std::uint32_t local = 0; local < kGpusPerNode; ++local)
    for (std::uint32_t node = 0; node < kNodes; ++node)
      groups[local].push_back(node * kGpusPerNode + local);
  return collective_s(spec, groups, bytes, symmetric);
}

topo::ClusterSpec fabric(const std::string& topology, int nodes_per_leaf, double oversubscription) {
  topo::ClusterSpec spec = config::load_cluster("dgx-h100", kNodes);
  spec.inter_node.topology = topology;
  spec.inter_node.nodes_per_leaf = nodes_per_leaf;
  spec.inter_node.oversubscription = oversubscription;
  return spec;
}

// Calls `check(spec, label)` for every shipped cluster preset of `nodes` nodes and for the 8-GPU
// ones with their GPUs sharing 4 or 2 NICs per node.
template <typename Check>
void for_each_cluster(int nodes, Check check) {
  for (const std::string preset :
       {"dgx-a100-80gb", "dgx-h100", "dgx-b200", "gcp-a3-mega", "aws-p5", "aws-p5en", "aws-p4d", "gb200-nvl72"}) {
    for (const int nics : {0, 4, 2}) {  // 0: the preset's own
      topo::ClusterSpec spec = config::load_cluster(preset, nodes);
      if (nics > 0) {
        if (spec.gpus_per_node != 8) continue;
        spec.inter_node.nics_per_node = nics;
      }
      check(spec, preset + (nics > 0 ? ", " + std::to_string(nics) + " NICs per node" : ""));
    }
  }
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

TEST_CASE(
    "topologies/contention: a ring across nodes whose GPUs share NICs crosses on all of them") {
  // vTrain's A100 cluster (validate/suites/vtrain_a100.json): 8 GPUs and 4 NICs per node, two GPUs
  // on each. A tensor-parallel group of 16 over two nodes: NCCL's channels leave each node through
  // all four NICs, so the flow network must not slow the ring below NCCL's own rate (it ran 1.7x
  // slower when the crossings all left from the node's first GPUs, two NICs' worth).
  topo::ClusterSpec spec = config::load_cluster("dgx-a100-80gb", 2);
  spec.inter_node.nics_per_node = 4;
  std::vector<std::uint32_t> tp16(16);
  for (std::uint32_t r = 0; r < 16; ++r) tp16[r] = r;
  const std::int64_t bytes = std::int64_t{192} << 20;
  const double engine_s = collective_s(spec, {tp16}, bytes, false);
  const topo::CollectiveModel model(spec);
  const auto nccl = model.predict(sim::CollectiveKind::kAllReduce, sim::Bytes(bytes),
                                  topo::GroupShape{16, 2, 8, 4});
  REQUIRE(nccl.valid);
  CHECK(engine_s == doctest::Approx(nccl.time_us * 1e-6).epsilon(0.01));
  // The same group with a NIC per GPU is faster (twice the NICs), so the 4-NIC rate is the NICs'.
  topo::ClusterSpec eight = config::load_cluster("dgx-a100-80gb", 2);
  CHECK(collective_s(eight, {tp16}, bytes, false) < 0.8 * engine_s);
}

TEST_CASE(
    "topologies/contention: one group alone on an idle cluster runs at NCCL's predicted rate") {
  // The flow network adds nothing where nothing else is moving: whatever the preset, NICs per
  // node, group size and placement (contiguous like TP, strided like DP, across nodes or not) and
  // collective, one collective's engine time is the collective model's. A load pattern that puts a
  // group's traffic on fewer links than NCCL's channels use (e.g. all crossings on the NICs of the
  // first GPUs) breaks it.
  int checked = 0;
  for_each_cluster(4, [&](const topo::ClusterSpec& spec, const std::string& label) {
    const topo::Cluster cluster(spec);
    const topo::CollectiveModel model(spec);
    const int gpus = spec.num_gpus();
    for (const int size : {2, 4, 8, 16, 32}) {
      for (const int stride : {1, 2, spec.gpus_per_node / 2, spec.gpus_per_node}) {
        if (stride < 1 || (size - 1) * stride >= gpus) continue;
        std::vector<std::uint32_t> members;
        std::map<int, std::pair<int, std::set<int>>> per_node;  // node -> (members, NICs)
        for (int i = 0; i < size; ++i) {
          const int r = i * stride;
          members.push_back(static_cast<std::uint32_t>(r));
          ++per_node[cluster.node_of(r)].first;
          per_node[cluster.node_of(r)].second.insert(cluster.nic_of(r));
        }
        topo::GroupShape shape{size, static_cast<int>(per_node.size()), 1, 1};
        for (const auto& [node, entry] : per_node) {
          shape.ranks_per_node = std::max(shape.ranks_per_node, entry.first);
          shape.nics_per_node =
              std::max(shape.nics_per_node, static_cast<int>(entry.second.size()));
        }
        for (const auto kind :
             {sim::CollectiveKind::kAllReduce, sim::CollectiveKind::kAllGather,
              sim::CollectiveKind::kReduceScatter, sim::CollectiveKind::kAllToAll}) {
          for (const std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{256} << 20}) {
            CAPTURE(sim::to_string(kind));
            CAPTURE(label);
            CAPTURE(size);
            CAPTURE(stride);
            CAPTURE(bytes);
            const auto nccl = model.predict(kind, sim::Bytes(bytes), shape);
            CHECK(collective_s(spec, {members}, bytes, false, kind) ==
                  doctest::Approx(nccl.time_us * 1e-6).epsilon(0.02));
            ++checked;
          }
        }
      }
    }
  });
  CHECK(checked > 1000);
}

TEST_CASE(
    "topologies/contention: one transfer alone on an idle cluster runs at the point-to-point "
    "model's rate") {
  // A pipeline send between two GPUs of one node or of two (through their own NICs, or NICs two
  // or four GPUs share): the engine's time is the model's, plus the route's switch latency.
  int checked = 0;
  for_each_cluster(2, [&](const topo::ClusterSpec& spec, const std::string& label) {
    const topo::Cluster cluster(spec);
    const topo::CollectiveModel model(spec);
    const int gpn = spec.gpus_per_node;
    for (const auto& ends :
         {std::pair{0, 1}, std::pair{1, gpn - 1}, std::pair{0, gpn}, std::pair{gpn - 1, gpn + 1}}) {
      // Named, not a structured binding: CAPTURE's lambda cannot take those (clang 14).
      const int src = ends.first, dst = ends.second;
      const sim::RankId from{static_cast<std::uint32_t>(src)}, to{static_cast<std::uint32_t>(dst)};
      for (const std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{64} << 20}) {
        CAPTURE(label);
        CAPTURE(src);
        CAPTURE(dst);
        CAPTURE(bytes);
        const auto ranks = static_cast<std::uint32_t>(spec.num_gpus());
        sim::TaskGraph g(ranks, {"comm"}, {"pp"}, {"next", "prev"});
        g.set_reverse_peer_slot(0, 1);
        g.set_reverse_peer_slot(1, 0);
        const std::uint32_t idle = g.add_class("idle");
        for (std::uint32_t r = 0; r < ranks; ++r) g.set_class_of(sim::RankId{r}, idle);
        auto endpoint = [&](sim::RankId rank, bool send) {
          const std::uint32_t c = g.add_class(send ? "sender" : "receiver");
          const std::vector<sim::Transfer> t{
              sim::Transfer{send, static_cast<std::uint16_t>(send ? 0 : 1), sim::Bytes(bytes)}};
          sim::Task task;
          task.kind = sim::TaskKind::kPointToPoint;
          task.payload = g.add_transfers(c, t);
          task.payload_count = 1;
          task.name = g.intern(send ? "send" : "recv");
          g.add_task(c, task, {});
          g.set_class_of(rank, c);
        };
        endpoint(from, true);
        endpoint(to, false);
        g.set_peer(from, 0, to);
        g.set_peer(to, 1, from);
        const double engine_s = makespan_s(cluster, g, {from, to}, false);
        const auto p =
            model.predict_p2p(sim::Bytes(bytes), cluster.node_of(src) == cluster.node_of(dst));
        const double expected_s = p.time_us * 1e-6 + cluster.route_latency(src, dst).seconds();
        CHECK(engine_s == doctest::Approx(expected_s).epsilon(0.02));
        ++checked;
      }
    }
  });
  CHECK(checked > 50);
}

TEST_CASE("topologies/ClusterTiming: communication kernels hold NCCL's channels, DeepEP's its 20 SMs") {
  const topo::ClusterSpec spec = config::load_cluster("dgx-h100", 2);
  const topo::Cluster cluster(spec);
  const auto ranks = static_cast<std::uint32_t>(spec.num_gpus());
  sim::TaskGraph g(ranks, {"ep"}, {"ep"}, {"next"});
  const std::uint32_t c = g.add_class("rank");
  sim::Communicator comm;
  comm.slot = 0;
  comm.symmetry_class = 0;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    comm.members.push_back(sim::RankId{r});
    g.set_class_of(sim::RankId{r}, c);
  }
  const sim::CommId id = g.add_communicator(comm);
  for (std::uint32_t r = 0; r < ranks; ++r) g.set_comm(sim::RankId{r}, 0, id);
  g.set_peer(sim::RankId{0}, 0, sim::RankId{8});
  g.set_peer(sim::RankId{1}, 0, sim::RankId{2});
  topo::ClusterTiming timing(cluster, g);
  const double sms = static_cast<double>(spec.gpu.sm_count);
  const sim::Bytes bytes(std::int64_t{64} << 20);

  // NCCL's all-to-all: the collective model's point-to-point channels.
  const sim::CommOp plain{sim::CollectiveKind::kAllToAll, sim::DataType::kBf16, bytes};
  const topo::NcclTopology t = timing.collective_model().topology(timing.shape_of(id));
  const int channels = timing.collective_model().predict(sim::CollectiveKind::kAllToAll, bytes, t).channels;
  CHECK(channels > 1);
  CHECK(timing.collective_cost(plain, id, false).sm_fraction == doctest::Approx(channels / sms));
  // DeepEP's dispatch (a node-aggregated multicast): Megatron-Core's moe_deepep_num_sms.
  sim::CommOp deepep = plain;
  deepep.multicast_fanout = 8;
  deepep.multicast_targets = 64;
  CHECK(timing.collective_cost(deepep, id, false).sm_fraction == doctest::Approx(20 / sms));
  // A pipeline send to another node: 4 channels (400 Gb/s NIC at 14 GB/s each); inside the node
  // more, from the pair's NVLinks.
  const double across = timing.transfer_cost(bytes, sim::RankId{0}, sim::RankId{8}, 0, false).sm_fraction;
  const double inside = timing.transfer_cost(bytes, sim::RankId{1}, sim::RankId{2}, 0, false).sm_fraction;
  CHECK(across == doctest::Approx(4 / sms));
  CHECK(inside > across);
}
