#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "config/scenario.h"
#include "planner/plan_output.h"
#include "planner/plan_search.h"
#include "report/sensitivity.h"
#include "report/summary.h"
#include "report/text_format.h"
#include "sim/error.h"

namespace trainsim::cli {

namespace {

// The most GPU counts --all-gpu-counts searches (each a full search: a bound on the time asked).
constexpr std::size_t kMaxAllGpuCounts = 256;

struct PlanArgs {
  std::string scenario, model, gpus, precision, quant_recipe;
  std::vector<std::string> clusters;  // several: a hardware comparison
  std::vector<double> prices;         // one for every cluster, or one each
  std::vector<std::string> dispatchers;
  std::optional<std::int64_t> global_batch_size, seq_length;
  std::optional<double> train_tokens, deadline_days, headroom_gib;
  std::optional<double> gpu_mtbf_hours, restart_minutes, checkpoint_write_GBps;
  std::optional<std::int64_t> checkpoint_interval;
  std::optional<std::string> spare_nodes;  // a count or "cheapest"
  std::optional<double> node_repair_hours, node_repair_share, idle_failure_share;
  bool async_checkpoint = false;
  std::int64_t top = 10;  // signed, so that a negative count is an error rather than a huge size_t
  std::string json, csv, svg;
  std::vector<std::int64_t> tp, pp, vp, cp, ep, etp, mbs;
  std::vector<int> sharding;
  std::vector<std::string> recompute;
  std::vector<std::string> cp_comm_types;
  bool no_sequence_parallel = false;
  bool ep_overlap = false;
  bool cpu_offloading = false;
  int threads = 0;
  bool exact = false;
  bool sensitivity = false;
  bool all_gpu_counts = false;
};

// "N" or "A..B" (GPU counts, whole nodes of `cluster`, named in the message when not empty).
std::pair<std::int64_t, std::int64_t> parse_gpus(const std::string& text, int gpus_per_node, const std::string& cluster) {
  auto number = [&](const std::string& s) {
    std::size_t used = 0;
    std::int64_t v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || v < 1 || v > (std::int64_t{1} << 22)) {
      throw InputError("--gpus", text, "expected a GPU count N or a range A..B of positive integers");
    }
    if (v % gpus_per_node != 0) {
      throw InputError("--gpus", text,
                       "expected whole nodes" + (cluster.empty() ? std::string() : " of " + cluster) + ": multiples of " +
                           std::to_string(gpus_per_node) + " GPUs");
    }
    return v;
  };
  const auto dots = text.find("..");
  if (dots == std::string::npos) {
    const std::int64_t n = number(text);
    return {n, n};
  }
  const std::int64_t a = number(text.substr(0, dots)), b = number(text.substr(dots + 2));
  if (a > b) throw InputError("--gpus", text, "expected A..B with A <= B");
  return {a, b};
}

// The position of `text` among `names` (an enum's order), or an InputError naming `flag`.
std::size_t choice_of(const std::string& flag, const std::string& text, const std::vector<std::string>& names) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return i;
  }
  std::string expected;  // "a, b or c"
  for (std::size_t i = 0; i < names.size(); ++i) expected += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  throw InputError(flag, text, "expected " + expected);
}

// Each value of a list option within [1, max]: the bound of the scenario key it sets (README
// "Input limits"), so the search never forms a plan a scenario file could not state.
void check_sizes(const char* option, const std::vector<std::int64_t>& values, std::int64_t max, bool one = false) {
  for (std::int64_t v : values) {
    if (v < 1 || v > max) {
      throw InputError("command line", option,
                       std::string(one ? "expected a value" : "expected values") + " in [1, " + std::to_string(max) +
                           "], got " + std::to_string(v));
    }
  }
}

void check_size(const char* option, const std::optional<std::int64_t>& value, std::int64_t max) {
  if (value) check_sizes(option, {*value}, max, true);
}

// A finite amount above zero (or at least zero where `zero_ok`).
void check_amount(const char* option, const std::optional<double>& value, bool zero_ok, const char* what) {
  if (value && (!std::isfinite(*value) || *value < 0 || (*value == 0 && !zero_ok))) {
    throw InputError("command line", option,
                     std::string("expected ") + what + (zero_ok ? " of at least 0" : " above 0") + ", got " +
                         report::fmt("%g", *value));
  }
}

// --spare-nodes: a count of nodes in [0, 2^20] ("cheapest" is read before).
std::int64_t parse_spare_nodes(const std::string& text) {
  std::size_t used = 0;
  std::int64_t v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 0 || v > (1 << 20)) {
    throw InputError("command line", "--spare-nodes",
                     "expected a number of nodes in [0, " + std::to_string(1 << 20) + "] or \"cheapest\", got \"" + text + "\"");
  }
  return v;
}

// A finite value in [min, max].
void check_range(const char* option, const std::optional<double>& value, double min, double max, const char* what) {
  if (value && !(*value >= min && *value <= max)) {
    throw InputError("command line", option,
                     std::string("expected ") + what + " in [" + report::fmt("%g", min) + ", " + report::fmt("%g", max) +
                         "], got " + report::fmt("%g", *value));
  }
}

// The option values no scenario key checks: ranges first, so the search never divides by a zero
// size or prices a negative budget.
void check_options(const PlanArgs& a) {
  check_size("--global-batch-size", a.global_batch_size, config::kMaxGlobalBatchSize);
  check_size("--seq-length", a.seq_length, config::kMaxSeqLength);
  check_sizes("--tp", a.tp, config::kMaxParallelSize);
  check_sizes("--pp", a.pp, config::kMaxParallelSize);
  check_sizes("--vp", a.vp, config::kMaxParallelSize);
  check_sizes("--cp", a.cp, config::kMaxParallelSize);
  check_sizes("--ep", a.ep, config::kMaxParallelSize);
  check_sizes("--etp", a.etp, config::kMaxParallelSize);
  check_sizes("--micro-batch-sizes", a.mbs, config::kMaxMicroBatchSize);
  if (a.train_tokens && !(*a.train_tokens >= 1 && *a.train_tokens <= config::kMaxTrainTokens)) {
    throw InputError("command line", "--train-tokens",
                     "expected a token count in [1, " + report::fmt("%g", config::kMaxTrainTokens) + "], got " +
                         report::fmt("%g", *a.train_tokens));
  }
  check_amount("--deadline-days", a.deadline_days, false, "a number of days");
  for (double price : a.prices) check_amount("--price-per-gpu-hour", price, true, "a price");
  if (a.prices.size() > 1 && a.prices.size() != std::max<std::size_t>(a.clusters.size(), 1)) {
    throw InputError("command line", "--price-per-gpu-hour",
                     "expected one price, or one per --cluster (" + std::to_string(a.clusters.size()) + "), got " +
                         std::to_string(a.prices.size()));
  }
  for (std::size_t i = 0; i < a.clusters.size(); ++i) {
    for (std::size_t k = 0; k < i; ++k) {
      if (a.clusters[k] == a.clusters[i]) throw InputError("--cluster", a.clusters[i], "named twice: each cluster is compared once");
    }
  }
  check_amount("--memory-headroom", a.headroom_gib, true, "an amount of GiB");
  // The ranges of the scenario's training.reliability keys (config/scenario.cc).
  check_range("--gpu-mtbf-hours", a.gpu_mtbf_hours, 1, 1e12, "GPU-hours");
  check_range("--restart-minutes", a.restart_minutes, 0, 1e6, "minutes");
  check_range("--checkpoint-write-GBps", a.checkpoint_write_GBps, 1e-3, 1e9, "a bandwidth in GB/s");
  check_size("--checkpoint-interval", a.checkpoint_interval, std::numeric_limits<std::int32_t>::max());
  if (a.spare_nodes && *a.spare_nodes != "cheapest") parse_spare_nodes(*a.spare_nodes);
  check_range("--node-repair-hours", a.node_repair_hours, 1e-3, 1e6, "hours");
  check_range("--node-repair-share", a.node_repair_share, 1e-6, 1, "a share of interruptions");
  check_range("--idle-failure-share", a.idle_failure_share, 0, 1, "a share of a working node's failure rate");
  check_jobs("--threads", a.threads);
  if (a.top < 0) throw InputError("command line", "--top", "expected a number of plans of at least 0, got " + std::to_string(a.top));
}

// The reliability options over the scenario's training.reliability: any of them asks for the
// time to train with interruptions, which needs the MTBF, the restart time and the storage
// bandwidth from one or the other.
void apply_reliability(const PlanArgs& a, models::TrainingSpec& t) {
  const bool asked = a.gpu_mtbf_hours || a.restart_minutes || a.checkpoint_write_GBps || a.checkpoint_interval || a.async_checkpoint ||
                     a.spare_nodes || a.node_repair_hours || a.node_repair_share || a.idle_failure_share;
  if (!asked) return;
  models::ReliabilitySpec r;
  const bool from_scenario = t.reliability.has_value();
  if (from_scenario) r = *t.reliability;
  if (a.gpu_mtbf_hours) r.gpu_mtbf_hours = *a.gpu_mtbf_hours;
  if (a.restart_minutes) r.restart_minutes = *a.restart_minutes;
  if (a.checkpoint_write_GBps) r.checkpoint_write_GBps = *a.checkpoint_write_GBps;
  if (a.checkpoint_interval) r.checkpoint_interval_iterations = *a.checkpoint_interval;
  if (a.async_checkpoint) r.async_checkpoint = true;
  if (a.spare_nodes) {
    r.cheapest_spares = *a.spare_nodes == "cheapest";
    r.spare_nodes.reset();
    if (!r.cheapest_spares) r.spare_nodes = parse_spare_nodes(*a.spare_nodes);
  }
  if (a.node_repair_hours) r.node_repair_hours = *a.node_repair_hours;
  if (a.node_repair_share) r.node_repair_share = *a.node_repair_share;
  if (a.idle_failure_share) r.idle_failure_share = *a.idle_failure_share;
  // The scenario's training.reliability rules: the repair time goes with the spares.
  if (r.has_spares() && r.node_repair_hours <= 0) {
    throw InputError("command line", "--node-repair-hours", "required with --spare-nodes: the hours a failed node takes to return");
  }
  for (const auto& [option, given] : {std::pair{"--node-repair-hours", a.node_repair_hours.has_value()},
                                      std::pair{"--node-repair-share", a.node_repair_share.has_value()},
                                      std::pair{"--idle-failure-share", a.idle_failure_share.has_value()}}) {
    if (!r.has_spares() && given) {
      throw InputError("command line", option, "applies with --spare-nodes only (without them a spare is always ready)");
    }
  }
  if (!from_scenario) {
    for (const auto& [option, given] : {std::pair{"--gpu-mtbf-hours", a.gpu_mtbf_hours.has_value()},
                                        std::pair{"--restart-minutes", a.restart_minutes.has_value()},
                                        std::pair{"--checkpoint-write-GBps", a.checkpoint_write_GBps.has_value()}}) {
      if (!given) {
        throw InputError("command line", option,
                         "required with the other reliability options (--gpu-mtbf-hours, --restart-minutes, "
                         "--checkpoint-write-GBps), or from a --scenario's training.reliability");
      }
    }
  }
  t.reliability = r;
}

// The options whose check depends on the GPU: a block-scaled recipe needs Blackwell, the
// headroom must leave memory to plan in.
void apply_cluster_options(const PlanArgs& a, planner::PlanRequest& req) {
  if (req.training.precision == models::Precision::kFp8 && req.training.quant_recipe == models::QuantRecipe::kMxfp8 &&
      req.cluster.gpu.architecture != topo::Architecture::kBlackwell) {
    throw InputError("--fp8-recipe", "mxfp8", "needs Blackwell tensor cores (block-scaled FP8); " + req.cluster.gpu.name + " has none");
  }
  if (req.training.precision == models::Precision::kFp4 && req.cluster.gpu.dense_fp4.per_second() <= 0) {
    throw InputError("--precision", "fp4", "NVFP4 needs Blackwell tensor cores (block-scaled FP4); " + req.cluster.gpu.name + " has none");
  }
  if (a.headroom_gib) {
    const double capacity_gib = static_cast<double>(req.cluster.gpu.memory.count()) / 1073741824.0;
    if (*a.headroom_gib >= capacity_gib) {
      throw InputError("command line", "--memory-headroom",
                       "expected less than the " + req.cluster.gpu.name + "'s " + report::fmt("%g", capacity_gib) + " GiB, got " +
                           report::fmt("%g", *a.headroom_gib));
    }
    req.memory_headroom_bytes = static_cast<std::int64_t>(std::llround(*a.headroom_gib * 1073741824.0));
  }
}

void progress_bar(std::size_t done, std::size_t total) {
  const int width = 40;
  const int filled = total == 0 ? width : static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width);
  std::fprintf(stderr, "\r  [%.*s%*s] %zu/%zu plans simulated", filled, "########################################",
               width - filled, "", done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int run(const PlanArgs& a) {
  check_options(a);
  planner::PlanRequest req;
  std::int64_t default_gpus = 0;
  if (!a.scenario.empty()) {
    if (!a.model.empty()) {
      throw InputError("--model", a.model, "the scenario names its model and recipe: give --scenario or --model, not both");
    }
    const config::Scenario s = config::load_scenario(a.scenario);
    // The scenario's exchange, unless --cp-comm-type names others; a full-fidelity scenario is refused.
    req = planner::request_of(s);
    default_gpus = s.num_gpus();
  } else {
    if (a.model.empty() || a.clusters.empty()) {
      throw InputError("trainsim plan", "", "give --model and --cluster (or --scenario FILE)");
    }
    req.model = config::load_model(a.model);
    req.training.overlap_param_gather = true;
    req.training.overlap_p2p_comm = true;
  }
  if (a.seq_length) req.model.seq_length = *a.seq_length;
  if (a.global_batch_size) req.training.global_batch_size = *a.global_batch_size;
  if (!a.precision.empty()) {
    req.training.set_precision(static_cast<models::Precision>(choice_of("--precision", a.precision, {"bf16", "fp16", "fp8", "fp4"})));
  }
  if (!a.quant_recipe.empty()) {
    if (req.training.precision != models::Precision::kFp8) throw InputError("--fp8-recipe", a.quant_recipe, "applies with --precision fp8 only");
    req.training.quant_recipe =
        static_cast<models::QuantRecipe>(choice_of("--fp8-recipe", a.quant_recipe, {"delayed", "tensorwise", "mxfp8"}));
  }
  if (a.ep_overlap) {
    if (!req.model.is_moe()) throw InputError("--ep-overlap", "", "overlaps expert-parallel all-to-alls: it needs a mixture-of-experts model");
    req.training.overlap_moe_expert_parallel_comm = true;
    req.training.delay_wgrad_compute = true;
  }
  if (a.train_tokens) req.training.train_tokens = *a.train_tokens;
  apply_reliability(a, req.training);
  if (req.training.global_batch_size < 1 || (a.scenario.empty() && !a.global_batch_size)) {
    throw InputError("--global-batch-size", "", "required: the global batch size in sequences");
  }
  req.deadline_days = a.deadline_days;
  req.space.tensor = a.tp;
  req.space.pipeline = a.pp;
  req.space.virtual_stages = a.vp;
  req.space.context = a.cp;
  if (!a.cp_comm_types.empty()) {
    req.space.cp_comm_types.clear();
    for (const std::string& type : a.cp_comm_types) {
      const auto t = static_cast<models::CpCommType>(choice_of("--cp-comm-type", type, {"p2p", "a2a", "allgather", "a2a+p2p"}));
      if (std::find(req.space.cp_comm_types.begin(), req.space.cp_comm_types.end(), t) == req.space.cp_comm_types.end()) {
        req.space.cp_comm_types.push_back(t);
      }
    }
  }
  req.space.expert = a.ep;
  req.space.expert_tensor = a.etp;
  for (const std::string& d : a.dispatchers) {
    const auto type = static_cast<models::TokenDispatcher>(choice_of("--moe-dispatcher", d, {"alltoall", "flex"}));
    if (!req.model.is_moe()) throw InputError("--moe-dispatcher", d, "dispatches tokens to experts: it needs a mixture-of-experts model");
    if (std::find(req.space.dispatchers.begin(), req.space.dispatchers.end(), type) == req.space.dispatchers.end()) {
      req.space.dispatchers.push_back(type);
    }
  }
  req.space.micro_batch = a.mbs;
  if (!a.sharding.empty()) {
    for (int z : a.sharding) {
      if (z != 0 && z != 1 && z != 3) throw InputError("--optimizer-sharding", std::to_string(z), "expected 0, 1 or 3");
    }
    req.space.optimizer_sharding = a.sharding;
  }
  if (!a.recompute.empty()) {
    req.space.recompute.clear();
    for (const std::string& r : a.recompute) {
      if (r == "none") {
        req.space.recompute.push_back(models::RecomputeGranularity::kNone);
      } else if (r == "selective") {
        req.space.recompute.push_back(models::RecomputeGranularity::kSelective);
      } else if (r == "full") {
        req.space.recompute.push_back(models::RecomputeGranularity::kFull);
      } else {
        throw InputError("--recompute", r, "expected none, selective or full");
      }
    }
  }
  req.space.sequence_parallel = !a.no_sequence_parallel;
  // A scenario whose recipe offloads activations has its plans searched with offloading too.
  req.space.cpu_offloading = a.cpu_offloading || req.training.cpu_offload_layers > 0;
  req.threads = a.threads;
  req.exact = a.exact;
  if (a.gpus.empty() && default_gpus == 0) throw InputError("--gpus", "", "required: a GPU count N or a range A..B");
  if (a.deadline_days && !req.training.train_tokens) {
    throw InputError("--deadline-days", "", "needs --train-tokens (the time to train depends on the token budget)");
  }
  if (!a.svg.empty() && !req.training.train_tokens) {
    throw InputError("--svg", a.svg, "the time-to-train curve needs --train-tokens");
  }

  if (a.all_gpu_counts && a.gpus.find("..") == std::string::npos) {
    throw InputError("--all-gpu-counts", "", "needs a range of GPU counts, --gpus A..B");
  }

  // One search per cluster: the scenario's, or each --cluster (which replaces a scenario's).
  std::vector<std::string> labels = a.clusters;
  if (labels.empty()) labels.push_back(req.cluster.name);
  const bool comparison = labels.size() > 1;
  std::vector<planner::PlanRequest> requests;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    planner::PlanRequest r = req;
    if (!a.clusters.empty()) r.cluster = config::load_cluster(a.clusters[i], 1);
    if (!a.prices.empty()) r.price_per_gpu_hour = a.prices[a.prices.size() == 1 ? 0 : i];
    apply_cluster_options(a, r);
    const int gpn = r.cluster.gpus_per_node;
    if (a.gpus.empty() && default_gpus % gpn != 0) {
      throw InputError("--cluster", labels[i],
                       "the scenario's " + std::to_string(default_gpus) + " GPUs are not whole nodes of this cluster (" +
                           std::to_string(gpn) + " GPUs each): give --gpus");
    }
    ranges.push_back(a.gpus.empty() ? std::pair{default_gpus, default_gpus} : parse_gpus(a.gpus, gpn, comparison ? labels[i] : ""));
    requests.push_back(std::move(r));
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  const planner::Progress progress = tty ? planner::Progress(progress_bar) : planner::Progress();
  std::vector<planner::PlanReport> reports;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (tty && comparison) std::fprintf(stderr, "  %s\n", labels[i].c_str());
    planner::PlanRequest& r = requests[i];
    const auto [lo, hi] = ranges[i];
    if (a.all_gpu_counts && lo < hi) {
      // Every count of the range that admits a valid plan (with a deadline, the smallest that
      // meets it among them); none admitting one, the first, whose search says why.
      r.gpu_counts = planner::admitted_gpu_counts(r, lo, hi);
      if (r.gpu_counts.size() > kMaxAllGpuCounts) {
        throw InputError("--all-gpu-counts", a.gpus,
                         std::to_string(r.gpu_counts.size()) + " GPU counts of the range admit a plan" +
                             (comparison ? " on " + labels[i] : std::string()) + ", more than the " +
                             std::to_string(kMaxAllGpuCounts) + " searched at most: narrow --gpus, or leave the option out");
      }
      if (r.gpu_counts.empty()) r.gpu_counts = {lo};
      reports.push_back(planner::search(r, progress));
    } else if (a.deadline_days && lo < hi) {
      reports.push_back(planner::search_deadline(r, lo, hi, progress));
    } else {
      // One count, or a doubling grid of node counts over the range.
      r.gpu_counts.clear();
      for (std::int64_t g = lo; g < hi; g *= 2) r.gpu_counts.push_back(g);
      r.gpu_counts.push_back(hi);
      reports.push_back(planner::search(r, progress));
    }
  }

  // --sensitivity: each cluster's best plan simulated whole, then each kind of communication at
  // other speeds.
  const bool text = a.json != "-";
  std::vector<std::optional<report::RunResult>> best(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (text) std::cout << (i > 0 ? "\n" : "") << planner::plan_table(requests[i], reports[i], static_cast<std::size_t>(a.top)) << std::flush;
    if (!a.sensitivity || reports[i].plans.empty()) continue;
    report::RunOptions options;
    options.record = false;
    best[i] = report::simulate(planner::scenario_of(requests[i], reports[i].plans.front()), options);
    report::add_sensitivity(*best[i], a.threads > 0 ? static_cast<unsigned>(a.threads) : 0);
    if (text) {
      std::cout << "\n  best plan, " << best[i]->scenario.name << ", simulated whole: "
                << report::fmt("%.3f s", best[i]->iteration_time_s) << report::sensitivity_text(*best[i]);
    }
  }
  std::vector<planner::ClusterSearch> searches;
  for (std::size_t i = 0; i < requests.size(); ++i) searches.push_back({labels[i], &requests[i], &reports[i]});
  if (text && comparison) std::cout << planner::comparison_table(searches) << std::flush;
  auto sensitivity_json = [&](const report::RunResult& run) {
    return nlohmann::ordered_json{{"iteration_time_s", run.iteration_time_s},
                                  {"communication_sensitivity", report::sensitivity_json(run)},
                                  {"nic_sensitivity", report::nic_sensitivity_json(run)},
                                  {"nvlink_sensitivity", report::nvlink_sensitivity_json(run)}};
  };
  if (!a.json.empty()) {
    write_output(a.json, [&](std::ostream& o) {
      nlohmann::ordered_json j;
      if (comparison) {
        j = planner::comparison_json(searches, static_cast<std::size_t>(a.top));
        for (std::size_t i = 0; i < best.size(); ++i) {
          if (best[i]) j["clusters"][i]["best_plan_sensitivity"] = sensitivity_json(*best[i]);
        }
      } else {
        j = planner::plan_json(requests.front(), reports.front(), static_cast<std::size_t>(a.top));
        if (best.front()) j["best_plan_sensitivity"] = sensitivity_json(*best.front());
      }
      o << j.dump(2) << "\n";
    });
  }
  if (!a.csv.empty()) {
    write_output(a.csv, [&](std::ostream& o) {
      if (comparison) {
        planner::write_comparison_csv(searches, o);
      } else {
        planner::write_plan_csv(reports.front(), o);
      }
    });
  }
  if (!a.svg.empty()) {
    write_output(a.svg, [&](std::ostream& o) {
      if (comparison) {
        planner::write_comparison_curve_svg(searches, o);
      } else {
        planner::write_plan_curve_svg(requests.front(), reports.front(), o);
      }
    });
  }
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, Registry& registry) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = subcommand(app, "plan", "Search parallel plans and GPU counts for a model, batch and cluster");
  cmd->add_option("--scenario", a->scenario, "Take model, cluster and training (batch, precision, tokens) from a scenario");
  cmd->add_option("--model", a->model, "Model preset or file");
  cmd->add_option("--cluster", a->clusters,
                  "Cluster preset or file (replaces a --scenario's); several, comma-separated, compare the hardware: each "
                  "searched alike, then their best plans ranked side by side")
      ->delimiter(',');
  cmd->add_option("--gpus", a->gpus, "GPU count N or range A..B (whole nodes)");
  cmd->add_option("--global-batch-size", a->global_batch_size, "Global batch size (sequences)");
  cmd->add_option("--seq-length", a->seq_length, "Sequence length (default: the model's)");
  cmd->add_option("--precision", a->precision, "bf16 | fp16 | fp8 | fp4 (NVFP4, Blackwell)");
  cmd->add_option("--fp8-recipe", a->quant_recipe, "With fp8: delayed | tensorwise | mxfp8 (Blackwell)");
  cmd->add_option("--train-tokens", a->train_tokens, "Token budget: report time to train and GPU-hours");
  cmd->add_option("--deadline-days", a->deadline_days, "With a GPU range: the smallest GPU count that trains in time");
  cmd->add_flag("--all-gpu-counts", a->all_gpu_counts,
                "With a GPU range: search every whole-node count in it on which some plan is valid (default: a doubling "
                "grid, or with --deadline-days the counts its walk needs), for the whole curve");
  cmd->add_option("--price-per-gpu-hour", a->prices,
                  "Report the cost of training; with several --cluster, one price for all or one per cluster, in their order")
      ->delimiter(',');
  cmd->add_option("--gpu-mtbf-hours", a->gpu_mtbf_hours,
                  "Time to train with interruptions: GPU-hours between job-stopping interruptions per GPU (the job's MTBF "
                  "is this / GPUs; Llama 3's 16K-GPU run: 50677)");
  cmd->add_option("--restart-minutes", a->restart_minutes, "With --gpu-mtbf-hours: from an interruption to training again");
  cmd->add_option("--checkpoint-write-GBps", a->checkpoint_write_GBps,
                  "With --gpu-mtbf-hours: storage write bandwidth for checkpoints, all writers together (GB/s)");
  cmd->add_flag("--async-checkpoint", a->async_checkpoint,
                "With --gpu-mtbf-hours: asynchronous saves (training stops for the copy to host memory only)");
  cmd->add_option("--checkpoint-interval", a->checkpoint_interval,
                  "With --gpu-mtbf-hours: iterations between checkpoints (default: each plan's best)");
  cmd->add_option("--spare-nodes", a->spare_nodes,
                  "With --gpu-mtbf-hours: hot spare nodes beside the job's (default: one always ready); each "
                  "interruption swaps one in, or waits for a repair when all are out; their GPUs count in the GPU-hours. "
                  "'cheapest': each plan's count with the fewest GPU-hours per unit of work");
  cmd->add_option("--node-repair-hours", a->node_repair_hours,
                  "With --spare-nodes: hours a failed node takes to return to the spares");
  cmd->add_option("--node-repair-share", a->node_repair_share,
                  "With --spare-nodes: share of interruptions that take a node out for repair (default: 1; Llama 3's "
                  "hardware share: 0.78)");
  cmd->add_option("--idle-failure-share", a->idle_failure_share,
                  "With --spare-nodes: an idle node's rate (a spare's, or the job's while it waits for a repair) of going to "
                  "repair, as a share of a working node's (default: 0, faults show under load; 1: as when working)");
  cmd->add_option("--memory-headroom", a->headroom_gib,
                  "GiB of GPU memory each plan must leave free beside its predicted peak (the CUDA context, NCCL's buffers, "
                  "allocator fragmentation: not modelled) (default: 0)");
  cmd->add_option("--top", a->top, "Plans to show")->capture_default_str();
  cmd->add_option("--json", a->json, "Write the ranked plans as JSON to FILE ('-' for stdout)");
  cmd->add_option("--csv", a->csv, "Write every feasible plan as CSV to FILE");
  cmd->add_option("--svg", a->svg, "Plot time to train against GPUs to FILE");
  cmd->add_option("--tp", a->tp, "Tensor-parallel sizes to try (default: powers of two up to a node)")->delimiter(',');
  cmd->add_option("--pp", a->pp, "Pipeline-parallel sizes to try (default: divisors of the layer count, or of the layer count + 2 with the embedding and the loss counted as layers, and powers of two with uneven first and last stages)")->delimiter(',');
  cmd->add_option("--vp", a->vp, "Virtual stages to try (default: all that split the layers evenly; where the layers split unevenly over PP, all that a layout of ceil(layers / (PP x V)) layers per virtual stage fills)")->delimiter(',');
  cmd->add_option("--cp", a->cp, "Context-parallel sizes to try")->delimiter(',');
  cmd->add_option("--cp-comm-type", a->cp_comm_types,
                  "Context-parallel exchanges to try where CP > 1: p2p (Transformer Engine's ring), a2a (all-to-alls of Q, K, "
                  "V and the output), allgather (K and V all-gathered), a2a+p2p (all-to-alls within a node, the ring across "
                  "nodes) (default: p2p)")
      ->delimiter(',');
  cmd->add_option("--ep", a->ep, "Expert-parallel sizes to try (MoE)")->delimiter(',');
  cmd->add_option("--moe-dispatcher", a->dispatchers,
                  "Token dispatchers to try where EP > 1 (MoE): alltoall (Megatron-Core's all-to-all dispatcher), flex (DeepEP or "
                  "HybridEP) (default: alltoall, or a --scenario's)")
      ->delimiter(',');
  cmd->add_option("--etp", a->etp, "Expert tensor-parallel sizes to try (MoE; default: each plan's TP, and 1 where TP > 1)")->delimiter(',');
  cmd->add_option("--micro-batch-sizes", a->mbs, "Micro-batch sizes to try (default: 1,2,4,8)")->delimiter(',');
  cmd->add_option("--optimizer-sharding", a->sharding,
                  "Optimizer sharding to try: 0 none, 1 distributed optimizer, 3 ZeRO-3 (default: 1,0)")
      ->delimiter(',');
  cmd->add_option("--threads", a->threads, "Simulations run at once (default: one per CPU)");
  cmd->add_option("--recompute", a->recompute,
                  "Recomputation modes, least first: each plan keeps the first that fits (default: none selective full)");
  cmd->add_flag("--no-sequence-parallel", a->no_sequence_parallel, "Never use sequence parallelism (Megatron before 2022)");
  cmd->add_flag("--ep-overlap", a->ep_overlap,
                "MoE: Megatron-Core's EP all-to-all overlap with delayed expert weight gradients, in the plans that admit it");
  cmd->add_flag("--cpu-offloading", a->cpu_offloading,
                "Also try, for plans of one pipeline stage that need recomputation to fit, offloading the fewest first layers' "
                "activations to host memory that fit (Megatron-Core's cpu_offloading), as plans of their own");
  cmd->add_flag("--exact", a->exact, "Simulate whole iterations instead of extrapolating the pipeline's steady state");
  cmd->add_flag("--sensitivity", a->sensitivity,
                "Also simulate the best plan whole and each kind of communication at half speed, twice the speed and "
                "free, and the speeds that hide each kind and that it tolerates (as run --sensitivity): would a faster "
                "or slower network change it");
  cmd->footer(
      "Example: trainsim plan --model gpt3-175b --cluster dgx-h100 --gpus 1024 --global-batch-size 2048 --train-tokens 3e11");
  registry.add(cmd, [a]() { return run(*a); });
}

}  // namespace trainsim::cli
