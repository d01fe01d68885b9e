#pragma once
// FlowNetwork: bandwidth sharing among concurrent transfers (flows) on shared resources (links).
//
// A flow moves `volume` bytes at no more than `max_rate` (what the transfer achieves alone) and
// puts `coefficient` bytes on each resource it uses per byte of its volume. Concurrent flows
// share every resource max-min fairly in the fraction x_f of their own max_rate they achieve:
// progressive filling raises all x together, freezing the flows of a resource when it saturates,
// until every flow is frozen or at x = 1. Only the flows connected to a change (through shared
// resources) are re-solved, and changes at one instant are solved together: add() and finish()
// record them (a flow that fits beside the others at its full rate is settled at once) and
// flush() re-solves each affected component once, so the many collectives that start together
// in a full-fidelity run cost one solve, not one per flow. Integer time; the solver visits flows
// and resources in a fixed (insertion) order, so results are deterministic.

#include <cstdint>
#include <span>
#include <vector>

#include "sim/units.h"

namespace trainsim::sim {

enum class ResourceId : std::uint32_t {};
constexpr std::uint32_t index(ResourceId r) { return static_cast<std::uint32_t>(r); }

struct Demand {
  ResourceId resource{};
  double coefficient = 0;  // bytes on the resource per byte of flow volume
};

class FlowNetwork {
 public:
  using FlowId = std::uint32_t;
  static constexpr std::size_t kMaxComponentFlows = 128;
  // Versions wrap at 2^30 so an event can carry them in 30 bits.
  static constexpr std::uint32_t kVersionMask = (1u << 30) - 1;

  // A flow whose finish time changed; its previous finish (if any) is stale.
  struct Reschedule {
    FlowId flow;
    std::uint32_t version;
    TimePoint finish;
  };

  FlowNetwork() = default;
  explicit FlowNetwork(std::vector<Bandwidth> capacities);
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;
  FlowNetwork(FlowNetwork&&) = default;
  FlowNetwork& operator=(FlowNetwork&&) = default;

  std::size_t num_resources() const { return resources_.size(); }
  Bandwidth capacity(ResourceId r) const { return Bandwidth::bytes_per_s(resources_[index(r)].capacity); }
  // Scales one resource's capacity (a degraded link); only valid before any flow is added.
  void set_capacity(ResourceId r, Bandwidth c) { resources_[index(r)].capacity = c.bytes_per_second(); }

  // Starts a flow at `now`. Appends to `out` every flow whose finish time is new: the new one
  // when it fits beside the others at its full rate; otherwise its rate (and its neighbours')
  // is settled by the next flush(). REQUIRES: volume > 0, max_rate > 0, every coefficient > 0.
  FlowId add(TimePoint now, double volume, Bandwidth max_rate, std::span<const Demand> demands,
             std::vector<Reschedule>& out);
  // True when `version` is the flow's current one (its finish event is not stale).
  bool is_current(FlowId f, std::uint32_t version) const {
    return flows_[f].active && flows_[f].version == version;
  }
  // Ends a flow at its finish time; its neighbours are re-solved by the next flush().
  void finish(FlowId f);
  // True when add() or finish() left rates to settle.
  bool has_pending() const { return !pending_groups_.empty(); }
  // Re-solves, once each, the components the changes recorded since the last flush touched
  // (all at `now`, the time of those changes), appending every flow whose finish time is new.
  void flush(TimePoint now, std::vector<Reschedule>& out);

  std::size_t active_flows() const { return active_count_; }

  // What the solver did (benchmarks print it): flows started, re-solves of a component, and
  // the flow-resource pairs those re-solves visited.
  struct Stats {
    std::uint64_t flows = 0;
    std::uint64_t solves = 0;
    std::uint64_t solved_demands = 0;
  };
  const Stats& stats() const { return stats_; }
  // Achieved fraction of max_rate for an active flow (1 = uncontended).
  double speed_fraction(FlowId f) const { return flows_[f].fraction; }

 private:
  struct Flow {
    double remaining = 0;  // bytes of volume left at `updated`
    double max_rate = 0;   // bytes/s
    double fraction = 1;   // achieved fraction of max_rate
    TimePoint updated;
    std::vector<Demand> demands;  // kept (with its capacity) when the slot is reused
    std::uint32_t version = 0;
    bool active = false;
    bool counted = false;  // its rate is in its resources' usage (false: added, waiting for flush())
  };
  // A change waiting for flush(): the resources to solve around (pending_seeds_[begin, end)) and
  // the added flow that must be solved (kNoFlow for a finish).
  static constexpr FlowId kNoFlow = ~FlowId{0};
  struct PendingGroup {
    std::uint32_t begin, end;
    FlowId flow;
  };
  // Queues a change for flush(): solve around f's resources (and, unless kNoFlow, the flow `added`).
  void record_change(const Flow& f, FlowId added);
  void solve_component(TimePoint now, std::span<const ResourceId> seeds, FlowId seed_flow,
                       std::vector<Reschedule>& out);
  TimePoint finish_time(TimePoint now, const Flow& f) const;

  // What add() and finish() read and write of each resource a flow crosses, together (a flow
  // crosses a dozen; at 16K+ GPUs each separate per-resource array is a cache miss per crossing).
  struct Resource {
    double capacity = 0;         // bytes/s
    double usage = 0;            // bytes/s in use at the current rates
    std::vector<FlowId> users;   // active flows using it
  };
  std::vector<Resource> resources_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_;  // reusable flow slots
  std::size_t active_count_ = 0;
  Stats stats_;
  std::vector<PendingGroup> pending_groups_;
  std::vector<ResourceId> pending_seeds_;
  std::vector<std::uint32_t> flush_mark_;  // per resource: the flush that last solved it
  std::uint32_t flush_epoch_ = 0;
  // Scratch space for solving.
  std::vector<std::uint32_t> flow_mark_, resource_mark_;
  std::uint32_t epoch_ = 0;
  std::vector<FlowId> comp_flows_;
  std::vector<ResourceId> comp_resources_;
  std::vector<double> residual_, load_;  // per resource, solver scratch
  std::vector<std::uint32_t> unfrozen_users_;  // per resource: unfrozen component flows using it
  std::vector<ResourceId> saturated_;    // resources saturated in the current round
  std::vector<double> outside_;          // per resource: usage by flows outside the component
  std::vector<double> old_fraction_;     // per component flow
  std::vector<std::uint8_t> frozen_;     // per flow
};

}  // namespace trainsim::sim
