#pragma once
// Scenario: everything one simulation needs, read from a scenario file (DESIGN.md schema) with
// presets resolved and overrides applied, then validated as a Megatron plan. Any problem is an
// InputError naming the file, the JSON path and what was expected.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/json_reader.h"
#include "config/simulation_cost.h"
#include "models/layer_dims.h"
#include "models/model_spec.h"
#include "models/training_spec.h"
#include "topologies/hardware.h"

namespace trainsim::config {

// Upper bounds of scenario values that other inputs also set (`trainsim plan`'s options); README
// "Input limits". Parallel sizes stay within the largest cluster trainsim builds (4,194,304 GPUs).
constexpr std::int64_t kMaxParallelSize = std::int64_t{1} << 20;
constexpr std::int64_t kMaxMicroBatchSize = std::int64_t{1} << 24;
constexpr std::int64_t kMaxGlobalBatchSize = std::int64_t{1} << 32;
constexpr std::int64_t kMaxSeqLength = std::int64_t{1} << 26;  // 64M tokens; 1M-token contexts exist
constexpr double kMaxTrainTokens = 1e18;                        // 60,000x Llama 3.1's 15.6T

struct Straggler {
  std::optional<std::int64_t> rank;  // one GPU ...
  std::optional<std::int64_t> node;  // ... or every GPU of a node
  double slowdown = 1.0;             // compute time multiplier (1.2 = 20% slower)
};

struct DegradedLink {
  std::int64_t node = 0;
  std::optional<std::int64_t> nic;   // one NIC of the node; absent: every NIC of the node
  bool nvlink = false;               // the node's NVLink fabric instead of its NICs
  double bandwidth_fraction = 1.0;   // remaining share of the link's bandwidth
};

struct SimulationSpec {
  bool full = false;  // fidelity "full": every rank simulated
  std::vector<Straggler> stragglers;
  std::vector<DegradedLink> degraded_links;
  std::int64_t seed = 0;
  // "sm_contention": the GEMM and attention kernels that overlap communication run on the SMs
  // its NCCL kernels leave (sim::EngineOptions::sm_contention). Off by default: the shipped
  // calibrations were fitted without it.
  bool sm_contention = false;
  // Work limit (config/simulation_cost.h): plans estimated to need more engine events are
  // rejected before lowering, so no input runs for minutes. Raise it to simulate them anyway.
  double max_events = kDefaultMaxEvents;
};

struct Scenario {
  std::string name;
  std::string file;  // where it was read from
  models::ModelSpec model;
  models::ParallelSpec parallel;
  models::TrainingSpec training;
  topo::ClusterSpec cluster;
  SimulationSpec simulation;

  std::int64_t num_gpus() const { return cluster.num_gpus(); }
  // What lowering the plan needs to know of the cluster's GPU (models::lower, describe).
  models::TargetGpu target_gpu() const { return {cluster.gpu.architecture == topo::Architecture::kBlackwell}; }
  std::int64_t data_parallel_size() const;
  std::int64_t microbatches() const;
};

// Reads a scenario file and applies `--set key.path=value` overrides (values are JSON, or plain
// strings when they do not parse as JSON).
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});
// Parses an already-read scenario document (e.g. embedded in a validation suite); `path` is the
// JSON path of the document inside `file`.
Scenario parse_scenario(const Json& doc, const std::string& file, const std::string& path = "");
// Checks an assembled scenario as a Megatron plan (what parse_scenario checks after reading);
// throws InputError naming the offending key. For plans built in code (e.g. by a plan search).
void validate(const Scenario& scenario);

// Why overlap_moe_expert_parallel_comm cannot run with this model, plan and training (Megatron-Core's
// own conditions, and ZeRO-3, which trainsim does not interleave), or nothing when it can.
std::optional<std::string> ep_overlap_refusal(const models::ModelSpec& m, const models::ParallelSpec& p, const models::TrainingSpec& t);
// Applies one override to a document. Throws InputError for a malformed assignment.
void apply_override(Json& doc, const std::string& assignment);

// Presets and explicit sections, usable outside scenarios (e.g. by `trainsim plan`).
models::ModelSpec load_model(const std::string& preset_or_file);
topo::ClusterSpec load_cluster(const std::string& preset_or_file, std::int64_t num_nodes);

}  // namespace trainsim::config
