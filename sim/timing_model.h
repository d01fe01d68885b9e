#pragma once
// TimingModel: how the engine learns what tasks cost on a concrete cluster. Implemented outside
// `sim` (by the hardware models); the engine only asks.

#include <cstdint>
#include <span>
#include <vector>

#include "sim/flow_network.h"
#include "sim/task_graph.h"
#include "sim/units.h"

namespace trainsim::sim {

// Price of one communication operation: a fixed latency, then `volume` bytes moved at no more
// than `max_rate`, loading the listed resources (shared max-min fairly with concurrent traffic).
struct CommCost {
  Duration latency;
  double volume = 0;  // bytes; zero means latency only
  Bandwidth max_rate;
  std::span<const Demand> demands;  // owned by the timing model; empty: contention-free
  // Share of each member GPU's SMs the operation's kernel occupies while it runs (NCCL runs one
  // thread block per channel, each on an SM); read under EngineOptions::sm_contention.
  double sm_fraction = 0;
  std::uint8_t algorithm = 0;   // labels for reports (meaning defined by the model)
  std::uint8_t protocol = 0;
};

class TimingModel {
 public:
  virtual ~TimingModel() = default;
  // Time of a kernel on an unimpaired GPU of this cluster.
  virtual Duration kernel_time(const Kernel& kernel) = 0;
  // Host (CPU) time to issue `task`: the framework's per-operator work and the kernel or NCCL
  // launch. The host issues a rank's tasks in program order, running ahead of the GPU; a task
  // cannot start before the host has issued it. Zero (the default): launches are always hidden.
  virtual Duration host_issue_time([[maybe_unused]] const Task& task) { return Duration::zero(); }
  // Slowdown factor of a rank's compute (1 = nominal; 1.2 = a 1.2x straggler).
  virtual double compute_slowdown([[maybe_unused]] RankId rank) { return 1.0; }
  // A collective on `comm`. With `symmetric`, the operation stands for every communicator of
  // the same symmetry class running it at the same time (their traffic shares the links).
  // The reference stays valid for the model's lifetime (implementations cache costs).
  virtual const CommCost& collective_cost(const CommOp& op, CommId comm, bool symmetric) = 0;
  // A point-to-point message from src to its peer in `src_slot` (dst). With `symmetric` it stands
  // for the same message sent by every rank of src's class to its peer in that slot.
  virtual const CommCost& transfer_cost(Bytes bytes, RankId src, RankId dst, std::uint16_t src_slot,
                                        bool symmetric) = 0;
  // Network resources (links) and their capacities, for the flow network.
  virtual std::vector<Bandwidth> resource_capacities() = 0;
  // Names for the algorithm / protocol labels of CommCost.
  virtual const char* algorithm_name([[maybe_unused]] std::uint8_t a) const { return ""; }
  virtual const char* protocol_name([[maybe_unused]] std::uint8_t p) const { return ""; }
};

}  // namespace trainsim::sim
