#pragma once
// Plan search: which parallel plan, how many GPUs, how many days. For each GPU count the search
// enumerates Megatron plans (TP within a node, PP splitting the layers evenly, virtual stages,
// CP, EP, micro-batch size, optimizer sharding; sequence parallelism whenever TP > 1), drops the
// invalid ones and those that cannot fit in memory by a quick estimate, picks per plan the least
// activation recomputation that fits (recomputation only ever adds work), simulates the survivors
// on all cores and ranks them by iteration time. Result order is deterministic.
//
// Speed: 1F1B and interleaved iterations are affine in the number of micro-batches once the
// pipeline is full (the steady state repeats), so a plan with many micro-batches is simulated at
// two smaller counts (2p and 3p) and extrapolated, unless `exact` is set; the agreement is
// tested against whole-iteration simulations.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/scenario.h"
#include "models/model_spec.h"
#include "models/training_spec.h"
#include "topologies/hardware.h"

namespace trainsim::planner {

struct SearchSpace {
  // Empty lists mean "every sensible value" (derived from the model and the cluster).
  std::vector<std::int64_t> tensor, pipeline, virtual_stages, context, expert, micro_batch;
  // Expert tensor-parallel sizes (Megatron-Core's expert_tensor_parallel_size) of mixture-of-
  // experts plans; empty: the plan's TP (Megatron's default) and 1 (the experts whole on each
  // rank, as Megatron-Bridge's MoE recipes run them).
  std::vector<std::int64_t> expert_tensor;
  // Token dispatchers of mixture-of-experts plans with EP > 1 (Megatron-Core's
  // moe_token_dispatcher_type); empty: the recipe's.
  std::vector<models::TokenDispatcher> dispatchers;
  // Tried in this order; the first that fits in memory is kept.
  std::vector<models::RecomputeGranularity> recompute{models::RecomputeGranularity::kNone,
                                                      models::RecomputeGranularity::kSelective,
                                                      models::RecomputeGranularity::kFull};
  // 0: optimizer state replicated; 1: distributed optimizer (ZeRO-1); 3: ZeRO-3 / FSDP.
  std::vector<int> optimizer_sharding{1, 0};
  // The context-parallel exchanges each plan with CP > 1 tries (Megatron-Core's cp_comm_type).
  std::vector<models::CpCommType> cp_comm_types{models::CpCommType::kP2p};
  // Sequence parallelism whenever TP > 1 (false: never, as in Megatron before 2022).
  bool sequence_parallel = true;
  // Also try, for each plan of one pipeline stage whose activations do not fit without
  // recomputation, offloading the fewest first layers' activations to host memory that makes it
  // fit (Megatron-Core's cpu_offloading), as a plan of its own beside its recomputation.
  bool cpu_offloading = false;
};

struct PlanRequest {
  models::ModelSpec model;
  topo::ClusterSpec cluster;              // num_nodes is set per GPU count
  std::vector<std::int64_t> gpu_counts;   // whole nodes
  models::TrainingSpec training;          // batch, precision, overlaps, train_tokens
  std::optional<double> deadline_days;    // with several GPU counts: the smallest that meets it
  std::optional<double> price_per_gpu_hour;
  // GPU memory a plan must leave free, beside the peak trainsim predicts (the bytes PyTorch's
  // allocator hands out): what the CUDA context, NCCL's buffers and the allocator's cached,
  // fragmented blocks take on the user's stack, which trainsim does not model. 0: plans may use
  // the whole capacity.
  std::int64_t memory_headroom_bytes = 0;
  // The memory a plan may use per GPU: the cluster's capacity less the headroom.
  std::int64_t usable_memory_bytes() const { return cluster.gpu.memory.count() - memory_headroom_bytes; }
  SearchSpace space;
  // simulation.max_events of every plan (config/simulation_cost.h): `plan --scenario` takes the
  // scenario's, so a search over huge clusters can raise it as a scenario does.
  double max_events = config::kDefaultMaxEvents;
  // simulation.sm_contention of every plan (config::SimulationSpec): `plan --scenario` takes the
  // scenario's, so plans are ranked under the same engine model the scenario's run uses.
  bool sm_contention = false;
  int threads = 0;       // 0: one per hardware thread
  bool exact = false;    // simulate whole iterations (no extrapolation)
};

struct PlanResult {
  std::int64_t gpus = 0;
  models::ParallelSpec parallel;
  models::TrainingSpec training;
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double hfu = 0;
  std::int64_t peak_bytes_per_gpu = 0;
  // Where the iteration's time went on its critical rank (report::TimeBreakdown), extrapolated
  // like the iteration time: what makes one plan slower than another.
  double pipeline_bubble_s = 0;
  double exposed_communication_s = 0;
  std::vector<std::pair<std::string, double>> exposed_by_kind;  // tp, dp, pp, cp, ep, embedding, other
  std::optional<double> time_to_train_days;
  std::optional<double> gpu_hours;
  // With training.reliability (report/reliability.h): the share of elapsed time that trains, at
  // the best checkpoint interval (or the one given), and the time to train and GPU-hours with
  // interruptions; `cost` then prices the expected GPU-hours.
  std::optional<double> goodput;
  std::optional<std::int64_t> checkpoint_interval_iterations;
  std::optional<double> expected_time_to_train_days;
  std::optional<double> expected_gpu_hours;  // the spare nodes' GPUs included
  // With spare nodes: their count (the plan's own where the request asks for the cheapest), the
  // chance an interruption finds none ready, and the expected wait for a repair it adds to each
  // interruption.
  std::optional<std::int64_t> spare_nodes;
  std::optional<double> no_spare_probability;
  std::optional<double> repair_wait_s;
  std::optional<double> cost;
  bool extrapolated = false;
  // Tokens per second of elapsed time: tokens_per_s, times goodput when there is one. Plans rank
  // by it (fastest to train first).
  double effective_tokens_per_s() const { return tokens_per_s * goodput.value_or(1.0); }
  // The days a deadline is held against: with interruptions when the request has reliability.
  // (none for a plan whose interruptions come faster than it saves and restarts: it never finishes).
  std::optional<double> deadline_days() const { return goodput ? expected_time_to_train_days : time_to_train_days; }
};

struct GpuCountResult {
  std::int64_t gpus = 0;
  std::int64_t feasible = 0;
  std::optional<PlanResult> best;
};

struct PlanReport {
  std::vector<PlanResult> plans;  // feasible plans over all GPU counts, best (fastest to train) first
  std::int64_t considered = 0;    // candidate plans enumerated
  std::int64_t simulated = 0;     // simulations run (extrapolated plans count once)
  std::vector<std::pair<std::string, std::int64_t>> pruned;  // why, how many (in a fixed order)
  std::vector<GpuCountResult> per_gpu_count;                 // in increasing GPU count
  std::optional<std::int64_t> deadline_gpus;                 // smallest count meeting the deadline
  // The first combination enumerated that Megatron's rules or trainsim's limits rejected, and why
  // ("8 GPUs, TP 1 PP 1 mbs 1: /training/global_batch_size: ..."); empty when none was.
  std::string first_invalid;
  std::int64_t pruned_total() const;
  // Plans pruned because they do not fit in memory (estimated or simulated), as opposed to
  // plans Megatron cannot run or plans another recomputation mode dominates.
  std::int64_t pruned_for_memory() const;
  // Plans Megatron could run but beyond what trainsim simulates (LimitError: simulation size,
  // magnitudes, the simulated clock).
  std::int64_t pruned_for_limits() const;
};

using Progress = std::function<void(std::size_t done, std::size_t total)>;

// REQUIRES: gpu_counts non-empty, each a multiple of the cluster's gpus_per_node.
PlanReport search(const PlanRequest& request, const Progress& progress = {});

// Whether a plan's experts run another tensor-parallel size than its attention.
bool own_expert_tensor(const models::ParallelSpec& p);

// Whether a plan dispatches tokens across expert-parallel ranks with the flex dispatcher.
bool flex_dispatch(const models::ParallelSpec& p, const models::TrainingSpec& t);

// A plan's expert parallelism as the table and messages name it: " EP 32", " EP 32 ETP 1" (its
// expert tensor-parallel size where it is not TP), " EP 32 flex" (the flex dispatcher), "" without
// expert parallelism.
std::string describe_expert_parallel(const models::ParallelSpec& p, const models::TrainingSpec& t);

// A plan's context parallelism as the table and messages name it: " CP 8", " CP 8 a2a",
// " CP 8 a2a+p2p [4, 2]" ("" without CP).
std::string describe_context_parallel(const models::ParallelSpec& p);

// A search for a scenario's model, cluster and recipe (training, its context-parallel exchange
// and simulation limit) on the scenario's GPU count (`trainsim plan --scenario`). Throws InputError
// at /simulation/fidelity for a scenario at full fidelity: the search ranks plans of identical GPUs
// and links at symmetric fidelity, so what makes one rank differ from another is for `trainsim run`.
PlanRequest request_of(const config::Scenario& scenario);

// The scenario of one found plan (the request's model and cluster, the plan's parallelism and
// training), named after describe_plan(): to simulate it whole, trace it or ask what-ifs of it.
config::Scenario scenario_of(const PlanRequest& request, const PlanResult& plan);

// The whole-node GPU counts in [lo, hi] on which at least one combination of the request's search
// space passes Megatron's rules, increasing (the counts a deadline search walks).
std::vector<std::int64_t> admitted_gpu_counts(const PlanRequest& request, std::int64_t lo, std::int64_t hi);

// A lower bound on the days any plan of the request on `gpus` GPUs takes to train its tokens
// (none without train_tokens): the FLOPs every plan executes (model FLOPs less the attention
// core's products), spread evenly over the GPUs at the dense peak of the precision's tensor cores.
std::optional<double> time_to_train_lower_bound_days(const PlanRequest& request, std::int64_t gpus);

// With a deadline and a GPU range [lo, hi]: the smallest whole-node count that admits a valid
// plan and whose best plan meets the deadline. A doubling walk then bisection finds a count that
// meets it in a few probes (each a full search at that count); as time to train need not fall
// with more GPUs, every count below it that the walk skipped is then searched too, smallest first,
// unless its lower bound (time_to_train_lower_bound_days) misses the deadline.
PlanReport search_deadline(PlanRequest request, std::int64_t lo, std::int64_t hi, const Progress& progress = {});

}  // namespace trainsim::planner
