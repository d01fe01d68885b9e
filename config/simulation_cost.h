#pragma once
// SimulationCost: how much work simulating a validated scenario takes, estimated from its specs
// alone (before lowering, which for a plan of a billion micro-batches would itself never end).
// The scenario check rejects plans whose work exceeds simulation.max_events, so that no input
// runs for minutes or exhausts memory; README "Input limits" documents the figures.
// The per-layer task counts mirror models/lowering.cc; tests/report/simulation_cost_test.cc
// keeps the estimate within a factor of two of the real graphs and event counts.

#include <cstdint>

#include "models/model_spec.h"
#include "models/training_spec.h"

namespace trainsim::config {

// Measured: 1,000,000 GPUs in symmetric mode take about 14 s of CPU before the first event.
constexpr double kGpuWeight = 72;

struct SimulationCost {
  double microbatches = 0;    // per data-parallel rank per iteration
  double graph_tasks = 0;     // tasks of the lowered graph, all pipeline stages
  double executed_tasks = 0;  // the tasks every simulated rank executes
  double gpus = 0;
  // Executed tasks, graph tasks and GPUs in one unit, each weighted by its measured cost relative
  // to an executed task (0.12 to 0.3 us on the 2-core CI machine; the engine runs consecutive
  // compute kernels as one event, so executed tasks, not events, follow the CPU time): a graph
  // task costs about two (lowering, memory), a GPU about 72 (cluster graph, communicators,
  // per-rank engine state, link loads of big communicators).
  double work() const { return executed_tasks + 2 * graph_tasks + kGpuWeight * gpus; }
};

// The default of simulation.max_events (in the unit of work()): 5 to 15 s of CPU on the 2-core
// CI machine; enough for full fidelity on the default 1,024-GPU scenario (about 52 million).
constexpr double kDefaultMaxEvents = 6.0e7;

// REQUIRES: the sizes passed config/'s plan checks (positive, divisible as Megatron requires).
SimulationCost estimate_simulation_cost(const models::ModelSpec& m, const models::ParallelSpec& p,
                                        const models::TrainingSpec& t, std::int64_t num_gpus, bool full_fidelity);

}  // namespace trainsim::config
