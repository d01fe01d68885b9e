#include "sim/flow_network.h"

#include <algorithm>

#include "sim/check.h"

namespace trainsim::sim {

FlowNetwork::FlowNetwork(std::vector<Bandwidth> capacities)
    : resources_(capacities.size()),
      flush_mark_(capacities.size(), 0),
      resource_mark_(capacities.size(), 0),
      residual_(capacities.size(), 0),
      load_(capacities.size(), 0),
      unfrozen_users_(capacities.size(), 0),
      outside_(capacities.size(), 0) {
  for (std::size_t r = 0; r < capacities.size(); ++r) resources_[r].capacity = capacities[r].bytes_per_second();
}

TimePoint FlowNetwork::finish_time(TimePoint now, const Flow& f) const {
  if (f.remaining <= 0) return now;
  return now + Duration::from_seconds(f.remaining / (f.fraction * f.max_rate));
}

FlowNetwork::FlowId FlowNetwork::add(TimePoint now, double volume, Bandwidth max_rate,
                                     std::span<const Demand> demands,
                                     std::vector<Reschedule>& out) {
  TRAINSIM_CHECK(volume > 0 && max_rate.bytes_per_second() > 0, "empty or rateless flow");
  FlowId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
    frozen_.push_back(0);
  }
  Flow& f = flows_[id];
  f.remaining = volume;
  f.max_rate = max_rate.bytes_per_second();
  f.fraction = 1;
  f.updated = now;
  f.active = true;
  f.version = (f.version + 1) & kVersionMask;
  f.demands.assign(demands.begin(), demands.end());
  ++active_count_;
  ++stats_.flows;

  // If every resource has room for this flow at its full rate, the resources it uses were not
  // anybody's bottleneck and stay so: no other rate changes, nothing to re-solve.
  bool fits = true;
  for (const Demand& d : f.demands) {
    const std::uint32_t r = index(d.resource);
    TRAINSIM_CHECK(r < resources_.size() && d.coefficient > 0, "bad flow demand");
    if (resources_[r].usage + d.coefficient * f.max_rate > resources_[r].capacity * (1 + 1e-12)) fits = false;
  }
  for (const Demand& d : f.demands) resources_[index(d.resource)].users.push_back(id);
  if (fits) {
    for (const Demand& d : f.demands) resources_[index(d.resource)].usage += d.coefficient * f.max_rate;
    f.counted = true;
    out.push_back({id, f.version, finish_time(now, f)});
    return id;
  }
  f.counted = false;
  record_change(f, id);
  return id;
}

void FlowNetwork::record_change(const Flow& f, FlowId added) {
  const auto begin = static_cast<std::uint32_t>(pending_seeds_.size());
  for (const Demand& d : f.demands) pending_seeds_.push_back(d.resource);
  pending_groups_.push_back({begin, static_cast<std::uint32_t>(pending_seeds_.size()), added});
}

void FlowNetwork::finish(FlowId id) {
  Flow& f = flows_[id];
  TRAINSIM_CHECK(f.active && f.counted, "finishing an inactive or unsolved flow");
  f.active = false;
  f.remaining = 0;
  --active_count_;
  // Only a neighbour held below its own maximum can use the capacity this flow releases.
  bool slowed_neighbour = false;
  for (const Demand& d : f.demands) {
    const std::uint32_t r = index(d.resource);
    auto& u = resources_[r].users;
    u.erase(std::find(u.begin(), u.end(), id));
    resources_[r].usage = u.empty() ? 0.0 : std::max(0.0, resources_[r].usage - d.coefficient * f.max_rate * f.fraction);
    for (FlowId g : u) slowed_neighbour = slowed_neighbour || flows_[g].fraction < 1.0;
  }
  f.counted = false;
  free_.push_back(id);
  if (slowed_neighbour) record_change(f, kNoFlow);
}

void FlowNetwork::flush(TimePoint now, std::vector<Reschedule>& out) {
  ++flush_epoch_;
  for (const PendingGroup& g : pending_groups_) {
    const std::span<const ResourceId> seeds(pending_seeds_.data() + g.begin, g.end - g.begin);
    if (g.flow != kNoFlow) {
      // An added flow: solved unless an earlier component of this flush took it in.
      if (!flows_[g.flow].counted) solve_component(now, seeds, g.flow, out);
      continue;
    }
    // A finished flow: its neighbours need a solve unless all its resources were just solved.
    bool solved = true;
    for (ResourceId r : seeds) solved = solved && flush_mark_[index(r)] == flush_epoch_;
    if (!solved) solve_component(now, seeds, kNoFlow, out);
  }
  pending_groups_.clear();
  pending_seeds_.clear();
}

void FlowNetwork::solve_component(TimePoint now, std::span<const ResourceId> seeds, FlowId seed_flow,
                                  std::vector<Reschedule>& out) {
  // Collect the flows and resources connected to the seed resources, nearest first (the seed
  // flow first of all, so the size cap never leaves it out). The search visits resources and
  // their users in insertion order, which is deterministic.
  ++epoch_;
  comp_flows_.clear();
  comp_resources_.clear();
  for (ResourceId r : seeds) {
    if (resource_mark_[index(r)] != epoch_) {
      resource_mark_[index(r)] = epoch_;
      comp_resources_.push_back(r);
    }
  }
  if (seed_flow != kNoFlow) {
    flow_mark_[seed_flow] = epoch_;
    comp_flows_.push_back(seed_flow);
  }
  for (std::size_t i = 0; i < comp_resources_.size() && comp_flows_.size() < kMaxComponentFlows; ++i) {
    for (FlowId g : resources_[index(comp_resources_[i])].users) {
      if (flow_mark_[g] == epoch_) continue;
      if (comp_flows_.size() >= kMaxComponentFlows) break;
      flow_mark_[g] = epoch_;
      comp_flows_.push_back(g);
      for (const Demand& d : flows_[g].demands) {
        if (resource_mark_[index(d.resource)] != epoch_) {
          resource_mark_[index(d.resource)] = epoch_;
          comp_resources_.push_back(d.resource);
        }
      }
    }
  }

  ++stats_.solves;
  // Bring every flow's remaining volume up to `now` at its old rate. What flows outside the
  // component use stays taken off the capacity.
  old_fraction_.clear();
  for (ResourceId r : comp_resources_) outside_[index(r)] = resources_[index(r)].usage;
  for (FlowId g : comp_flows_) {
    Flow& fl = flows_[g];
    fl.remaining = std::max(0.0, fl.remaining - fl.fraction * fl.max_rate * (now - fl.updated).seconds());
    fl.updated = now;
    old_fraction_.push_back(fl.counted ? fl.fraction : -1.0);  // -1: new, always rescheduled
    stats_.solved_demands += fl.demands.size();
    frozen_[g] = 0;
    if (!fl.counted) continue;  // added since the last flush: not in the usage yet
    for (const Demand& d : fl.demands) outside_[index(d.resource)] -= d.coefficient * fl.max_rate * fl.fraction;
  }
  for (ResourceId r : comp_resources_) {
    outside_[index(r)] = std::max(0.0, outside_[index(r)]);
    residual_[index(r)] = resources_[index(r)].capacity - outside_[index(r)];
  }

  // Progressive filling on the common speed fraction x. The load of the unfrozen flows on each
  // resource is summed once and reduced as flows freeze; a resource with no unfrozen user left
  // (unfrozen_users_ 0) constrains nothing, whatever rounding left in its load.
  for (ResourceId r : comp_resources_) {
    load_[index(r)] = 0;
    unfrozen_users_[index(r)] = 0;
  }
  for (FlowId g : comp_flows_) {
    for (const Demand& d : flows_[g].demands) {
      load_[index(d.resource)] += d.coefficient * flows_[g].max_rate;
      ++unfrozen_users_[index(d.resource)];
    }
  }
  std::size_t unfrozen = comp_flows_.size();
  while (unfrozen > 0) {
    double x = 1.0;
    for (ResourceId r : comp_resources_) {
      if (unfrozen_users_[index(r)] > 0) x = std::min(x, std::max(0.0, residual_[index(r)]) / load_[index(r)]);
    }
    if (x >= 1.0) {
      for (FlowId g : comp_flows_) {
        if (!frozen_[g]) {
          flows_[g].fraction = 1.0;
          frozen_[g] = 1;
        }
      }
      break;
    }
    x = std::max(x, 1e-9);  // a saturated resource never stops a flow entirely
    // The resources saturated at x (judged before any flow of this round freezes); their
    // unfrozen users freeze at x, in resource then insertion order.
    const double limit = x * (1 + 1e-12);
    saturated_.clear();
    for (ResourceId r : comp_resources_) {
      if (unfrozen_users_[index(r)] > 0 && std::max(0.0, residual_[index(r)]) / load_[index(r)] <= limit) saturated_.push_back(r);
    }
    std::size_t frozen_now = 0;
    for (ResourceId r : saturated_) {
      for (FlowId g : resources_[index(r)].users) {
        if (flow_mark_[g] != epoch_ || frozen_[g]) continue;  // outside the component, or done
        Flow& fl = flows_[g];
        fl.fraction = x;
        frozen_[g] = 1;
        ++frozen_now;
        for (const Demand& d : fl.demands) {
          residual_[index(d.resource)] -= d.coefficient * fl.max_rate * x;
          load_[index(d.resource)] -= d.coefficient * fl.max_rate;
          --unfrozen_users_[index(d.resource)];
        }
      }
    }
    if (frozen_now == 0) {  // numerical corner: freeze everything at x
      for (FlowId g : comp_flows_) {
        if (!frozen_[g]) {
          flows_[g].fraction = x;
          frozen_[g] = 1;
        }
      }
      break;
    }
    unfrozen -= frozen_now;
  }

  // Usage at the new rates, and new finish times for the flows whose rate changed.
  for (ResourceId r : comp_resources_) {
    resources_[index(r)].usage = outside_[index(r)];
    flush_mark_[index(r)] = flush_epoch_;
  }
  for (FlowId g : comp_flows_) {
    for (const Demand& d : flows_[g].demands) {
      resources_[index(d.resource)].usage += d.coefficient * flows_[g].max_rate * flows_[g].fraction;
    }
  }
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    const FlowId g = comp_flows_[i];
    Flow& fl = flows_[g];
    fl.counted = true;
    if (fl.fraction == old_fraction_[i]) continue;
    fl.version = (fl.version + 1) & kVersionMask;
    out.push_back({g, fl.version, finish_time(now, fl)});
  }
}

}  // namespace trainsim::sim
