#include "sim/flow_network.h"

#include <algorithm>

#include "sim/check.h"

namespace trainsim::sim {

FlowNetwork::FlowNetwork(std::vector<Bandwidth> capacities)
    : users_(capacities.size()),
      resource_mark_(capacities.size(), 0),
      residual_(capacities.size(), 0),
      load_(capacities.size(), 0),
      usage_(capacities.size(), 0),
      outside_(capacities.size(), 0) {
  capacity_.reserve(capacities.size());
  for (Bandwidth b : capacities) capacity_.push_back(b.bytes_per_second());
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

  // If every resource has room for this flow at its full rate, the resources it uses were not
  // anybody's bottleneck and stay so: no other rate changes, nothing to re-solve.
  bool fits = true;
  for (const Demand& d : f.demands) {
    const std::uint32_t r = index(d.resource);
    TRAINSIM_CHECK(r < capacity_.size() && d.coefficient > 0, "bad flow demand");
    if (usage_[r] + d.coefficient * f.max_rate > capacity_[r] * (1 + 1e-12)) fits = false;
  }
  for (const Demand& d : f.demands) users_[index(d.resource)].push_back(id);
  if (fits) {
    for (const Demand& d : f.demands) usage_[index(d.resource)] += d.coefficient * f.max_rate;
    out.push_back({id, f.version, finish_time(now, f)});
    return id;
  }
  solve_component(now, f.demands, id, out);
  return id;
}

void FlowNetwork::finish(TimePoint now, FlowId id, std::vector<Reschedule>& out) {
  Flow& f = flows_[id];
  TRAINSIM_CHECK(f.active, "finishing an inactive flow");
  f.active = false;
  f.remaining = 0;
  --active_count_;
  // Only a neighbour held below its own maximum can use the capacity this flow releases.
  bool slowed_neighbour = false;
  for (const Demand& d : f.demands) {
    const std::uint32_t r = index(d.resource);
    auto& u = users_[r];
    u.erase(std::find(u.begin(), u.end(), id));
    usage_[r] = u.empty() ? 0.0 : std::max(0.0, usage_[r] - d.coefficient * f.max_rate * f.fraction);
    for (FlowId g : u) slowed_neighbour = slowed_neighbour || flows_[g].fraction < 1.0;
  }
  free_.push_back(id);
  if (slowed_neighbour) solve_component(now, f.demands, id, out);
}

void FlowNetwork::solve_component(TimePoint now, std::span<const Demand> seeds, FlowId added,
                                  std::vector<Reschedule>& out) {
  // Collect the flows and resources connected to the seed resources, nearest first. The search
  // visits resources and their users in insertion order, which is deterministic.
  ++epoch_;
  comp_flows_.clear();
  comp_resources_.clear();
  for (const Demand& d : seeds) {
    if (resource_mark_[index(d.resource)] != epoch_) {
      resource_mark_[index(d.resource)] = epoch_;
      comp_resources_.push_back(d.resource);
    }
  }
  for (std::size_t i = 0; i < comp_resources_.size() && comp_flows_.size() < kMaxComponentFlows; ++i) {
    for (FlowId g : users_[index(comp_resources_[i])]) {
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

  // Bring every flow's remaining volume up to `now` at its old rate. What flows outside the
  // component use stays taken off the capacity.
  old_fraction_.clear();
  for (ResourceId r : comp_resources_) outside_[index(r)] = usage_[index(r)];
  for (FlowId g : comp_flows_) {
    Flow& fl = flows_[g];
    fl.remaining = std::max(0.0, fl.remaining - fl.fraction * fl.max_rate * (now - fl.updated).seconds());
    fl.updated = now;
    old_fraction_.push_back(fl.fraction);
    frozen_[g] = 0;
    if (g == added) continue;  // not counted in usage_ yet
    for (const Demand& d : fl.demands) outside_[index(d.resource)] -= d.coefficient * fl.max_rate * fl.fraction;
  }
  for (ResourceId r : comp_resources_) {
    outside_[index(r)] = std::max(0.0, outside_[index(r)]);
    residual_[index(r)] = capacity_[index(r)] - outside_[index(r)];
  }

  // Progressive filling on the common speed fraction x.
  std::size_t unfrozen = comp_flows_.size();
  while (unfrozen > 0) {
    for (ResourceId r : comp_resources_) load_[index(r)] = 0;
    for (FlowId g : comp_flows_) {
      if (frozen_[g]) continue;
      for (const Demand& d : flows_[g].demands) load_[index(d.resource)] += d.coefficient * flows_[g].max_rate;
    }
    double x = 1.0;
    for (ResourceId r : comp_resources_) {
      const double load = load_[index(r)];
      if (load > 0) x = std::min(x, std::max(0.0, residual_[index(r)]) / load);
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
    const double limit = x * (1 + 1e-12);
    std::size_t frozen_now = 0;
    for (FlowId g : comp_flows_) {
      if (frozen_[g]) continue;
      bool bottlenecked = false;
      for (const Demand& d : flows_[g].demands) {
        const double load = load_[index(d.resource)];
        if (load > 0 && std::max(0.0, residual_[index(d.resource)]) / load <= limit) {
          bottlenecked = true;
          break;
        }
      }
      if (!bottlenecked) continue;
      flows_[g].fraction = x;
      frozen_[g] = 1;
      ++frozen_now;
      for (const Demand& d : flows_[g].demands) {
        residual_[index(d.resource)] -= d.coefficient * flows_[g].max_rate * x;
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
  for (ResourceId r : comp_resources_) usage_[index(r)] = outside_[index(r)];
  for (FlowId g : comp_flows_) {
    for (const Demand& d : flows_[g].demands) {
      usage_[index(d.resource)] += d.coefficient * flows_[g].max_rate * flows_[g].fraction;
    }
  }
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    const FlowId g = comp_flows_[i];
    Flow& fl = flows_[g];
    if (g != added && fl.fraction == old_fraction_[i]) continue;
    fl.version = (fl.version + 1) & kVersionMask;
    out.push_back({g, fl.version, finish_time(now, fl)});
  }
}

}  // namespace trainsim::sim
