#include "topologies/cluster_timing.h"

#include <algorithm>
#include <set>

#include "sim/check.h"

namespace trainsim::topo {

using sim::CollectiveKind;
using sim::CommId;
using sim::RankId;

ClusterTiming::ClusterTiming(const Cluster& cluster, const sim::TaskGraph& graph,
                             std::vector<double> slowdown)
    : cluster_(cluster),
      graph_(graph),
      compute_(cluster.spec().gpu, /*in_training=*/true, graph.num_ranks()),
      collective_(cluster.spec()),
      slowdown_(std::move(slowdown)) {
  TRAINSIM_CHECK(static_cast<int>(graph_.num_ranks()) <= cluster_.num_gpus(),
                 "more ranks than GPUs");
  for (std::uint32_t c = 0; c < graph_.num_communicators(); ++c) {
    comms_by_class_[graph_.communicator(CommId{c}).symmetry_class].push_back(CommId{c});
  }
  ranks_by_class_.resize(graph_.num_classes());
  for (std::uint32_t r = 0; r < graph_.num_ranks(); ++r)
    ranks_by_class_[graph_.class_of(RankId{r})].push_back(RankId{r});
}

double ClusterTiming::compute_slowdown(RankId rank) {
  return sim::index(rank) < slowdown_.size() ? slowdown_[sim::index(rank)] : 1.0;
}

std::vector<Bandwidth> ClusterTiming::resource_capacities() {
  std::vector<Bandwidth> caps;
  caps.reserve(cluster_.num_links());
  for (std::size_t l = 0; l < cluster_.num_links(); ++l) {
    caps.push_back(cluster_.link_capacity(ResourceId{static_cast<std::uint32_t>(l)}));
  }
  return caps;
}

const char* ClusterTiming::algorithm_name(std::uint8_t a) const {
  return to_string(static_cast<Algorithm>(a));
}
const char* ClusterTiming::protocol_name(std::uint8_t p) const {
  return to_string(static_cast<Protocol>(p));
}

GroupShape ClusterTiming::shape_of(CommId comm) const { return shape_of_members(graph_.communicator(comm).members); }

GroupShape ClusterTiming::shape_of_members(const std::vector<RankId>& members) const {
  std::map<int, std::pair<int, std::set<int>>> per_node;  // node -> (members, NICs)
  for (RankId m : members) {
    auto& entry = per_node[cluster_.node_of(static_cast<int>(sim::index(m)))];
    ++entry.first;
    entry.second.insert(cluster_.nic_of(static_cast<int>(sim::index(m))));
  }
  GroupShape s;
  s.ranks = static_cast<int>(members.size());
  s.nodes = static_cast<int>(per_node.size());
  s.ranks_per_node = 1;
  s.nics_per_node = 1;
  for (const auto& [node, entry] : per_node) {
    s.ranks_per_node = std::max(s.ranks_per_node, entry.first);
    s.nics_per_node = std::max(s.nics_per_node, static_cast<int>(entry.second.size()));
  }
  return s;
}

const NcclTopology& ClusterTiming::topology_of(const GroupShape& shape) {
  const auto key =
      std::make_tuple(shape.ranks, shape.nodes, shape.ranks_per_node, shape.nics_per_node);
  auto it = topologies_.find(key);
  if (it == topologies_.end()) it = topologies_.emplace(key, collective_.topology(shape)).first;
  return it->second;
}

void ClusterTiming::add_collective_load(CollectiveKind kind, Algorithm algorithm,
                                        const std::vector<RankId>& members,
                                        std::map<std::uint32_t, double>& load, const sim::CommOp& op) const {
  const std::size_t n = members.size();
  if (n < 2) return;
  auto add_route = [&](int a, int b, double c) {
    route_scratch_.clear();
    cluster_.route(a, b, route_scratch_);
    for (ResourceId r : route_scratch_) load[sim::index(r)] += c;
  };
  if (kind == CollectiveKind::kAllToAll) {
    if (op.multicast_fanout == 0) {
      // Every rank sends 1/n of its buffer to every other rank.
      for (RankId a : members) {
        for (RankId b : members) {
          if (a != b) add_route(static_cast<int>(sim::index(a)), static_cast<int>(sim::index(b)), 1.0 / static_cast<double>(n));
        }
      }
      return;
    }
    // A multicast: its network share spread over the other nodes' members, its NVLink share over
    // the node's.
    const GroupShape s = shape_of_members(members);
    const AllToAllShares shares = shares_of(op, s);
    const double remote = static_cast<double>(n) - s.ranks_per_node, peers = s.ranks_per_node - 1.0;
    for (RankId a : members) {
      for (RankId b : members) {
        if (a == b) continue;
        const bool same = cluster_.node_of(static_cast<int>(sim::index(a))) == cluster_.node_of(static_cast<int>(sim::index(b)));
        const double part = same ? (peers > 0 ? shares.intra / peers : 0.0) : (remote > 0 ? shares.inter / remote : 0.0);
        add_route(static_cast<int>(sim::index(a)), static_cast<int>(sim::index(b)), part);
      }
    }
    return;
  }
  // Members grouped by node in order of appearance (NCCL orders rings and trees node by node).
  std::vector<std::vector<int>> nodes;
  std::map<int, std::size_t> node_slot;
  for (RankId m : members) {
    const int g = static_cast<int>(sim::index(m));
    auto [it, fresh] = node_slot.emplace(cluster_.node_of(g), nodes.size());
    if (fresh) nodes.emplace_back();
    nodes[it->second].push_back(g);
  }
  const bool nvls = algorithm == Algorithm::kNvls || algorithm == Algorithm::kNvlsTree;
  const bool ring = algorithm == Algorithm::kRing || algorithm == Algorithm::kPat;
  // Bytes on each link of the pattern per byte of the operation: a ring edge carries the bus
  // factor (2(n-1)/n for all-reduce); a tree or chain link carries the buffer once each way; an
  // NVLS GPU sends and receives its buffer once through the NVSwitch.
  const double per_edge = ring ? CollectiveModel::bus_factor(kind, static_cast<int>(n)) : 1.0;
  const double nvls_share = kind == CollectiveKind::kAllReduce
                                ? 1.0
                                : (static_cast<double>(n) - 1) / static_cast<double>(n);
  for (const auto& local : nodes) {
    if (local.size() < 2) continue;
    if (nvls) {
      for (int g : local) {
        load[sim::index(cluster_.to_switch(g))] += nvls_share;
        load[sim::index(cluster_.from_switch(g))] += nvls_share;
      }
      continue;
    }
    // A closed ring inside one node; a chain (the node's part of a ring or tree) otherwise.
    const std::size_t edges = (ring && nodes.size() == 1) ? local.size() : local.size() - 1;
    for (std::size_t i = 0; i < edges; ++i) {
      add_route(local[i], local[(i + 1) % local.size()], per_edge);
      if (!ring)
        add_route(local[(i + 1) % local.size()], local[i], per_edge);  // trees: up and down
    }
  }
  if (nodes.size() < 2) return;
  // Between nodes: rings cross from each node to the next; trees (and NVLS trees, CollNet) move
  // the buffer once up and once down per node, which this pattern loads the same way. Channels
  // leave through the distinct NICs of the node's members, each from a member local to it (one NIC
  // per GPU on DGX systems; where GPUs share a NIC, NCCL's search spreads the channels over all
  // the node's NICs, src/graph/search.cc, rather than over the first GPUs).
  std::vector<std::vector<int>> heads(nodes.size());  // the first member on each distinct NIC
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    std::set<int> seen;
    for (int g : nodes[i])
      if (seen.insert(cluster_.nic_of(g)).second) heads[i].push_back(g);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& from = heads[i];
    const auto& to = heads[(i + 1) % nodes.size()];
    const std::size_t k = std::min(from.size(), to.size());
    for (std::size_t j = 0; j < k; ++j)
      add_route(from[j], to[j], per_edge / static_cast<double>(k));
  }
}

std::vector<sim::Demand> ClusterTiming::to_demands(const std::map<std::uint32_t, double>& load,
                                                   const std::map<std::uint32_t, double>* own) {
  std::vector<sim::Demand> out;
  out.reserve(own != nullptr ? own->size() : load.size());
  for (const auto& [r, c] : load) {
    if (c > 0 && (own == nullptr || own->count(r) != 0)) out.push_back(sim::Demand{ResourceId{r}, c});
  }
  return out;
}

AllToAllShares ClusterTiming::shares_of(const sim::CommOp& op, const GroupShape& s) {
  if (op.multicast_fanout == 0) return plain_all_to_all(s);
  return multicast_all_to_all(s, static_cast<int>(op.multicast_fanout), static_cast<int>(op.multicast_targets),
                              static_cast<int>(op.multicast_groups), static_cast<int>(op.multicast_groups_chosen));
}

std::uint64_t ClusterTiming::multicast_key(const sim::CommOp& op) {
  if (op.kind != CollectiveKind::kAllToAll || op.multicast_fanout == 0) return 0;
  // 16 bits each: the scenario reader bounds experts, top-k and groups by 2^14.
  const auto field = [](std::uint32_t v) {
    TRAINSIM_CHECK(v <= 0xffff, "multicast field too large for the cost cache key");
    return static_cast<std::uint64_t>(v);
  };
  return field(op.multicast_fanout) << 48 | field(op.multicast_targets) << 32 | field(op.multicast_groups) << 16 |
         field(op.multicast_groups_chosen);
}

// NCCL launches one thread block per channel (src/enqueue.cc: the grid is the plan's channel
// count; up to NCCL_MAX_NTHREADS = 640 threads each, src/include/device.h). Assumed: each block
// holds its SM against the tensor-core kernels beside it, whose thread blocks take most of an
// SM's shared memory and so cannot share one, so the kernel holds `channels` SMs while it runs.
// The SMs DeepEP's kernels take (Megatron-Core TransformerConfig.moe_deepep_num_sms = 20, which it
// passes to deep_ep.Buffer.set_num_sms; DeepEP's own default Buffer.num_sms is 20 too).
constexpr int kDeepEpSms = 20;

double ClusterTiming::sm_fraction(int channels) const {
  const double sms = static_cast<double>(std::max<std::int64_t>(1, cluster_.spec().gpu.sm_count));
  return std::min(1.0, std::max(0, channels) / sms);
}

const sim::CommCost& ClusterTiming::collective_cost(const sim::CommOp& op, CommId comm, bool symmetric) {
  const sim::Communicator& cm = graph_.communicator(comm);
  const std::uint32_t key_id = symmetric ? cm.symmetry_class : sim::index(comm);
  const std::uint64_t variant = multicast_key(op);
  const auto key =
      std::make_tuple(key_id, symmetric, static_cast<std::uint8_t>(op.kind), op.bytes.count(), variant);
  auto it = collective_cache_.find(key);
  if (it != collective_cache_.end()) return it->second;

  sim::CommCost cost;
  if (cm.members.size() >= 2 && op.bytes.count() > 0) {
    const GroupShape shape = shape_of(comm);
    const CollectivePrediction p = variant != 0 ? collective_.predict_all_to_all(op.bytes, shape, shares_of(op, shape))
                                                : collective_.predict(op.kind, op.bytes, topology_of(shape));
    cost.latency = Duration::from_seconds(p.latency_us * 1e-6);
    cost.volume = op.bytes.as_double();
    cost.max_rate = Bandwidth::gb_per_s(p.alg_bandwidth_GBps);
    cost.algorithm = static_cast<std::uint8_t>(p.algorithm);
    cost.protocol = static_cast<std::uint8_t>(p.protocol);
    // DeepEP's dispatch and combine kernels run on a fixed number of SMs, not NCCL's channels.
    cost.sm_fraction = variant != 0 ? sm_fraction(kDeepEpSms) : sm_fraction(p.channels);
    const auto demand_key = std::make_tuple(key_id, symmetric, static_cast<std::uint8_t>(op.kind), cost.algorithm, variant);
    auto d = collective_demands_.find(demand_key);
    if (d == collective_demands_.end()) {
      std::map<std::uint32_t, double> own;
      add_collective_load(op.kind, p.algorithm, cm.members, own, op);
      std::vector<sim::Demand> demands;
      if (symmetric) {
        std::map<std::uint32_t, double> load;
        for (CommId image : comms_by_class_.at(cm.symmetry_class)) {
          add_collective_load(op.kind, p.algorithm, graph_.communicator(image).members, load, op);
        }
        demands = to_demands(load, &own);
      } else {
        demands = to_demands(own);
      }
      d = collective_demands_.emplace(demand_key, std::move(demands)).first;
    }
    cost.demands = d->second;
  }
  return collective_cache_.emplace(key, std::move(cost)).first->second;
}

const sim::CommCost& ClusterTiming::transfer_cost(Bytes bytes, RankId src, RankId dst, std::uint16_t src_slot,
                                                  bool symmetric) {
  const std::uint32_t key_id = symmetric ? graph_.class_of(src) : sim::index(src);
  const auto key = std::make_tuple(key_id, src_slot, symmetric, bytes.count());
  auto it = transfer_cache_.find(key);
  if (it != transfer_cache_.end()) return it->second;

  sim::CommCost cost;
  const int a = static_cast<int>(sim::index(src)), b = static_cast<int>(sim::index(dst));
  if (a != b && bytes.count() > 0) {
    const CollectivePrediction p = collective_.predict_p2p(bytes, topology_of(shape_of_members({src, dst})));
    cost.latency = Duration::from_seconds(p.latency_us * 1e-6) + cluster_.route_latency(a, b);
    cost.volume = bytes.as_double();
    cost.max_rate = Bandwidth::gb_per_s(p.alg_bandwidth_GBps);
    cost.sm_fraction = sm_fraction(p.channels);
    const auto demand_key = std::make_tuple(key_id, src_slot, symmetric);
    auto d = transfer_demands_.find(demand_key);
    if (d == transfer_demands_.end()) {
      auto add = [&](int x, int y, std::map<std::uint32_t, double>& load) {
        route_scratch_.clear();
        cluster_.route(x, y, route_scratch_);
        for (ResourceId r : route_scratch_) load[sim::index(r)] += 1.0;
      };
      std::map<std::uint32_t, double> own;
      add(a, b, own);
      std::vector<sim::Demand> demands;
      if (symmetric) {
        std::map<std::uint32_t, double> load;
        for (RankId x : ranks_by_class_[graph_.class_of(src)]) {
          if (graph_.has_peer(x, src_slot)) {
            add(static_cast<int>(sim::index(x)), static_cast<int>(sim::index(graph_.peer(x, src_slot))), load);
          }
        }
        demands = to_demands(load, &own);
      } else {
        demands = to_demands(own);
      }
      d = transfer_demands_.emplace(demand_key, std::move(demands)).first;
    }
    cost.demands = d->second;
  }
  return transfer_cache_.emplace(key, std::move(cost)).first->second;
}

}  // namespace trainsim::topo
