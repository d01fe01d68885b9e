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
// R with spare nodes (ReliabilitySpec::spare_nodes S, repair time T_r): each interruption sends a
// node to repair for T_r and swaps in a healthy spare; when all S are in repair, the job waits for
// the first to return. The nodes in repair form an Erlang loss system (interruptions arriving at
// rate 1 / M, S servers busy T_r each), so an interruption finds no spare with Erlang's B(S, T_r / M),
// whatever the repair times' distribution (Erlang 1917; Kleinrock, "Queueing Systems" vol. 1, 1975,
// sec. 3.7, on its insensitivity); it then waits T_r / (S + 1) on average (the soonest of the S
// repairs under way, their remaining times uniform over T_r for fixed repairs; the same for
// exponential ones, counting its own). Where only a share f of interruptions takes a node out
// (ReliabilitySpec::node_repair_share), repairs arrive at f / M: B(S, f T_r / M), and R above is
// the restart plus f B T_r / (S + 1). Idle nodes may fail too (ReliabilitySpec::idle_failure_share
// r, 0 by default: each at r times a working node's rate of node-taking interruptions, f g / H for
// g GPUs per node and H GPU-hours between interruptions): with k nodes in repair, S - k spares are
// idle and repairs arrive at (f / M) (1 + r (S - k) / n) for a job of n nodes. The count in
// repair is then a birth-death chain on 0..S whose top state the job's interruptions, a Poisson
// stream of constant rate, find with its stationary probability (spare_shortage_probability): Erlang's B at r = 0,
// Engset's time congestion over n + S sources at r = 1 (Engset 1918; insensitive to the repair
// times' distribution as Erlang's is: Cohen 1957, "The generalized Engset formula", Philips
// Telecommunication Review 18(4)). The spares' GPUs are held for the job, so its GPU-hours count
// them. While the job waits, its n - 1 healthy nodes are idle and fail as idle spares do, so the
// wait is the chain's first passage from S + 1 in repair back to S (spare_wait_repairs): T_r /
// (S + 1) when idle nodes do not fail (the soonest of S + 1 repairs; for fixed repairs their
// remaining times are uniform over T_r, the same mean), longer when a failure during the wait
// sends one more node out. The first passage is exact for exponential repair times; for others
// it is an approximation, checked against a replay with fixed ones.
//
// The cheapest count of spares (ReliabilitySpec::cheapest_spares): more spares wait less but are
// held too, so the count that minimises GPUs held per unit of work, (GPUs + S g) / goodput(S),
// each S at its own best checkpoint interval (the expected GPU-hours of a token budget, and the
// cost at a price per GPU-hour), searched from S = 0 up to kMaxCheapestSpares.
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

// The largest count of spares the cheapest-count search tries (each count costs a recursion as
// long as itself): beyond any job's need at realistic rates (a million GPUs interrupted as Llama
// 3's were, with day-long repairs, keep about 500 nodes in repair).
inline constexpr std::int64_t kMaxCheapestSpares = 4096;

struct ReliabilityEstimate {
  double job_mtbf_hours = 0;        // mean time between interruptions of this job
  CheckpointSize checkpoint;
  double checkpoint_copy_s = 0;     // each GPU's shard over PCIe
  double checkpoint_write_s = 0;    // the whole checkpoint to storage
  double checkpoint_blocking_s = 0; // training stops this long per save, at the chosen interval
  std::int64_t checkpoint_interval_iterations = 0;
  bool interval_optimal = false;    // chosen by trainsim (the spec gave none)
  double restart_s = 0;
  // With spare nodes: the chance that an interruption needing a spare finds every spare in
  // repair, the expected wait it adds to a restart (over all interruptions), and the spares' GPUs.
  std::optional<std::int64_t> spare_nodes;
  bool spares_cheapest = false;     // the count chosen by trainsim as the cheapest (the spec asked)
  double node_repair_share = 1;     // of interruptions: those that take a node out
  double idle_failure_share = 0;    // an idle node's repair rate over a working node's
  double no_spare_probability = 0;
  double repair_wait_s = 0;
  std::int64_t spare_gpus = 0;
  double goodput = 0;               // work / elapsed time, in (0, 1]
  // With a token budget: the elapsed time it takes with interruptions, what that costs in GPU
  // time (the spares' included), and how many interruptions to expect on the way (none when
  // goodput is 0: interruptions come faster than the job saves and restarts, and it never finishes).
  std::optional<double> expected_time_to_train_days;
  std::optional<double> expected_gpu_hours;
  std::optional<double> expected_interruptions;
};

// Expected elapsed seconds per second of work (the formula above). REQUIRES: tau > 0, m > 0,
// c >= 0, r >= 0. Infinity when the exponent overflows (a job that practically never finishes).
double elapsed_per_work(double tau_s, double checkpoint_s, double restart_s, double mtbf_s);

// Erlang's loss formula B(servers, load): the chance that an arrival finds every server busy.
// REQUIRES: servers >= 0, load >= 0.
double erlang_b(std::int64_t servers, double load);

// The chance that an interruption of the job that needs a spare finds all `spares` in repair,
// when the job sends nodes to repair at `job_load` (repairs per repair time) and each idle spare
// at `spare_load` (the header's chain). spare_load 0 gives erlang_b(spares, job_load).
// REQUIRES: spares >= 0, job_load >= 0, spare_load >= 0.
double spare_shortage_probability(std::int64_t spares, double job_load, double spare_load);

// The expected wait, in repair times, of a job of `job_nodes` nodes that found all `spares` in
// repair, its healthy nodes failing at `spare_load` each meanwhile (the header's first passage):
// 1 / (spares + 1) at spare_load 0; infinity when failures outpace the repairs beyond any bound.
// REQUIRES: spares >= 0, job_nodes > 0, spare_load >= 0.
double spare_wait_repairs(std::int64_t spares, double job_nodes, double spare_load);

// The estimate for a plan of `gpus` GPUs (nodes of `gpus_per_node`) at `iteration_time_s`,
// checkpoint `size`, GPU-to-host rate `pcie_GBps`; `train_seconds` of fault-free training when the
// scenario has a token budget.
ReliabilityEstimate estimate_reliability(const models::ReliabilitySpec& spec, std::int64_t gpus, std::int64_t gpus_per_node,
                                         double iteration_time_s, const CheckpointSize& size, double pcie_GBps,
                                         std::optional<double> train_seconds);

// The seconds a run takes to train its scenario's token budget without interruptions (nullopt
// without training.train_tokens): the time to train that run, compare and this estimate report.
std::optional<double> fault_free_train_seconds(const RunResult& r);

// The estimate for a run whose scenario has training.reliability (nullopt otherwise).
std::optional<ReliabilityEstimate> estimate_reliability(const RunResult& r);

}  // namespace trainsim::report
