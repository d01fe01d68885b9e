#pragma once
// ClusterTiming: the TimingModel of a concrete cluster. Kernels are priced by the ComputeModel,
// collectives and point-to-point messages by the CollectiveModel (NCCL's choice of algorithm
// and protocol, its latency and bandwidth when alone) and mapped onto the cluster's links with
// the traffic pattern of the chosen algorithm (ring edges, tree edges, NVSwitch in/out, all
// pairs), so the engine's flow network shares them with concurrent traffic. Rank r runs on GPU r
// (Megatron's rank order fills a node before the next). Under symmetry one operation stands for
// every communicator of its symmetry class: the load of all of them goes into its demands.
// Results are cached per communicator (or symmetry class) and message; NCCL's topology search
// per group shape.

#include <cstddef>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "sim/task_graph.h"
#include "sim/timing_model.h"
#include "topologies/cluster.h"
#include "topologies/collective_model.h"
#include "topologies/compute_model.h"

namespace trainsim::topo {

// Hash of a tuple of integers (the cost caches' keys).
struct TupleHash {
  template <typename... T>
  std::size_t operator()(const std::tuple<T...>& t) const {
    std::size_t h = 0;
    std::apply([&](const auto&... v) { ((h = (h ^ std::hash<std::decay_t<decltype(v)>>{}(v)) * 0x9e3779b97f4a7c15ull), ...); }, t);
    return h ^ (h >> 32);
  }
};

class ClusterTiming final : public sim::TimingModel {
 public:
  // `slowdown` has one factor per rank (empty: all 1).
  ClusterTiming(const Cluster& cluster, const sim::TaskGraph& graph,
                std::vector<double> slowdown = {});

  Duration kernel_time(const sim::Kernel& kernel) override { return compute_.kernel_time(kernel); }
  Duration host_issue_time([[maybe_unused]] const sim::Task& task) override {
    return cluster_.spec().gpu.calibration.host_issue;
  }
  double compute_slowdown(sim::RankId rank) override;
  const sim::CommCost& collective_cost(const sim::CommOp& op, sim::CommId comm, bool symmetric) override;
  const sim::CommCost& transfer_cost(Bytes bytes, sim::RankId src, sim::RankId dst, std::uint16_t src_slot,
                                     bool symmetric) override;
  std::vector<Bandwidth> resource_capacities() override;
  const char* algorithm_name(std::uint8_t a) const override;
  const char* protocol_name(std::uint8_t p) const override;

  const CollectiveModel& collective_model() const { return collective_; }
  const ComputeModel& compute_model() const { return compute_; }
  GroupShape shape_of(sim::CommId comm) const;
  GroupShape shape_of_members(const std::vector<sim::RankId>& members) const;

 private:
  // Share of the GPU's SMs an NCCL kernel on `channels` channels holds (sim::CommCost::sm_fraction).
  double sm_fraction(int channels) const;
  // Adds the link load (bytes per byte of the operation) of `kind` with `algorithm` on one
  // communicator to `load`.
  // An all-to-all loads each pair of members by its shares of the buffer.
  void add_collective_load(sim::CollectiveKind kind, Algorithm algorithm,
                           const std::vector<sim::RankId>& members,
                           std::map<std::uint32_t, double>& load, const sim::CommOp& op) const;
  const NcclTopology& topology_of(const GroupShape& shape);
  static AllToAllShares shares_of(const sim::CommOp& op, const GroupShape& s);
  // 0 for every operation but a multicast all-to-all, which it tells apart by its fields.
  static std::uint64_t multicast_key(const sim::CommOp& op);
  // Demands from link loads. With `own`, only the links in `own` are kept: under symmetry the
  // other images' private links mirror the representative's, and shared links appear in both.
  static std::vector<sim::Demand> to_demands(const std::map<std::uint32_t, double>& load,
                                             const std::map<std::uint32_t, double>* own = nullptr);

  const Cluster& cluster_;
  const sim::TaskGraph& graph_;
  ComputeModel compute_;
  CollectiveModel collective_;
  std::vector<double> slowdown_;
  std::map<std::uint32_t, std::vector<sim::CommId>> comms_by_class_;
  std::vector<std::vector<sim::RankId>> ranks_by_class_;
  // Looked up once per started operation, so hashed (a tree of 16K+ communicators' entries costs
  // a cache miss per level). Node-based: the engine keeps pointers to the costs.
  // The last key element tells multicast all-to-alls apart (multicast_key).
  std::unordered_map<std::tuple<std::uint32_t, bool, std::uint8_t, std::int64_t, std::uint64_t>, sim::CommCost, TupleHash>
      collective_cache_;
  // Link loads depend on the communicator and the algorithm, not on the message size.
  std::map<std::tuple<std::uint32_t, bool, std::uint8_t, std::uint8_t, std::uint64_t>, std::vector<sim::Demand>>
      collective_demands_;
  std::unordered_map<std::tuple<std::uint32_t, std::uint16_t, bool, std::int64_t>, sim::CommCost, TupleHash>
      transfer_cache_;
  std::map<std::tuple<std::uint32_t, std::uint16_t, bool>, std::vector<sim::Demand>> transfer_demands_;
  std::map<std::tuple<int, int, int, int>, NcclTopology> topologies_;
  mutable std::vector<ResourceId> route_scratch_;
};

}  // namespace trainsim::topo
