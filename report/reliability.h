#pragma once
// Time to train with interruptions: checkpoint-restart on a job that stops whenever any of its
// GPUs does (synchronous training: one failure restarts the whole job, as Llama 3's report says
// of its 16K-GPU runs).
//
// Interruptions arrive as a Poisson process of mean interval M = gpu_mtbf_hours / GPUs. Training
// saves a checkpoint every tau seconds of work, which stops training for C seconds; an
// interruption loses the work since the last checkpoint and costs R seconds to come back (an
// interruption during R starts R again). The expected elapsed time per second of work is then
// exact for exponential interarrivals (Daly 2006, "A higher order estimate of the optimum
// checkpoint interval for restart dumps", FGCS 22(3), its exponential model of the total
// wall-clock time; Bougeret et al. 2011, "Checkpointing strategies for parallel jobs", SC'11):
//
//   elapsed / work = (M / tau) e^(R / M) (e^((tau + C) / M) - 1)
//
// and goodput is its inverse. For C << M the best tau is Young's sqrt(2 C M) (Young 1974,
// "A first order approximation to the optimum checkpoint interval", CACM 17(9)); trainsim
// minimises the exact form over whole iterations instead (Megatron saves every
// `--save-interval` iterations).
//
// C: each GPU's shard of the checkpoint (models::StageInfo::checkpoint_bytes) leaves over its
// PCIe link (the x16 rate NCCL's topology gives the GPU) and all shards go to storage at
// checkpoint_write_GBps; a synchronous save stops training for the slower of the two, an
// asynchronous one for the copy only, unless the previous write has not ended: then it waits
// for it too.

#include <cstdint>
#include <optional>

#include "models/training_spec.h"
#include "report/simulation.h"

namespace trainsim::report {

struct CheckpointSize {
  double total_bytes = 0;    // all GPUs' shards: one copy of the weights and optimizer state
  double per_gpu_bytes = 0;  // the largest shard
};

// A run's checkpoint, from its stages (models::StageInfo::checkpoint_bytes): the same at any
// batch size.
CheckpointSize checkpoint_size(const RunResult& r);

struct ReliabilityEstimate {
  double job_mtbf_hours = 0;        // mean time between interruptions of this job
  CheckpointSize checkpoint;
  double checkpoint_copy_s = 0;     // each GPU's shard over PCIe
  double checkpoint_write_s = 0;    // the whole checkpoint to storage
  double checkpoint_blocking_s = 0; // training stops this long per save, at the chosen interval
  std::int64_t checkpoint_interval_iterations = 0;
  bool interval_optimal = false;    // chosen by trainsim (the spec gave none)
  double restart_s = 0;
  double goodput = 0;               // work / elapsed time, in (0, 1]
  // With a token budget: the elapsed time it takes with interruptions, what that costs in GPU
  // time, and how many interruptions to expect on the way (none when goodput is 0: interruptions
  // come faster than the job saves and restarts, and it never finishes).
  std::optional<double> expected_time_to_train_days;
  std::optional<double> expected_gpu_hours;
  std::optional<double> expected_interruptions;
};

// Expected elapsed seconds per second of work (the formula above). REQUIRES: tau > 0, m > 0,
// c >= 0, r >= 0. Infinity when the exponent overflows (a job that practically never finishes).
double elapsed_per_work(double tau_s, double checkpoint_s, double restart_s, double mtbf_s);

// The estimate for a plan of `gpus` GPUs at `iteration_time_s`, checkpoint `size`, GPU-to-host
// rate `pcie_GBps`; `train_seconds` of fault-free training when the scenario has a token budget.
ReliabilityEstimate estimate_reliability(const models::ReliabilitySpec& spec, std::int64_t gpus, double iteration_time_s,
                                         const CheckpointSize& size, double pcie_GBps,
                                         std::optional<double> train_seconds);

// The estimate for a run whose scenario has training.reliability (nullopt otherwise).
std::optional<ReliabilityEstimate> estimate_reliability(const RunResult& r);

}  // namespace trainsim::report
