#include "planner/plan_search.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "config/pipeline_layout.h"
#include "config/scenario.h"
#include "models/flop_count.h"
#include "models/lowering.h"
#include "planner/plan_output.h"
#include "report/parallel_jobs.h"
#include "report/reliability.h"
#include "report/simulation.h"
#include "sim/check.h"
#include "sim/error.h"
#include "topologies/cluster.h"

namespace trainsim::planner {

namespace {

using models::PipelineSchedule;
using models::RecomputeGranularity;

// The ranking order of plans: faster to train (tokens per second of elapsed time) first.
bool trains_faster(const PlanResult& a, const PlanResult& b) { return a.effective_tokens_per_s() > b.effective_tokens_per_s(); }

// The divisors of n >= 1 up to `limit`, increasing (pairs d, n / d: O(sqrt n) for any n).
std::vector<std::int64_t> divisors(std::int64_t n, std::int64_t limit) {
  std::vector<std::int64_t> low, high;
  for (std::int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    if (d <= limit) low.push_back(d);
    if (d != n / d && n / d <= limit) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// Whether plans with `pp` stages count the embedding and the loss as layers: where the layers
// alone do not split evenly over the stages but do with those two.
bool accounts_in_split(const models::ModelSpec& m, std::int64_t pp) {
  return m.num_layers % pp != 0 && (m.num_layers + 2) % pp == 0;
}

// Where neither splits evenly: Megatron-Core's uneven split (decoder_first/last_pipeline_num_
// layers). Middle stages hold ceil(L / P) layers, the first and last stage share the rest, the
// first one more when it is odd: NeMo's DeepSeek-V3 splits of 61 layers over 4, 8 and 16 stages
// (15/14, 7/6 and 3/2 around 16, 8 and 4; scripts/performance/llm/pretrain_deepseek_v3.py).
// None when the last stage would be left empty.
std::optional<std::pair<std::int64_t, std::int64_t>> uneven_split(const models::ModelSpec& m, std::int64_t pp) {
  if (pp < 2 || m.num_layers % pp == 0 || accounts_in_split(m, pp)) return std::nullopt;
  const std::int64_t middle = (m.num_layers + pp - 1) / pp;
  const std::int64_t rest = m.num_layers - (pp - 2) * middle;
  const std::int64_t first = (rest + 1) / 2, last = rest / 2;
  if (last < 1 || first > middle) return std::nullopt;
  return std::make_pair(first, last);
}

// Whether the layers split evenly over `pp` stages, alone or with the embedding and the loss.
bool splits_evenly(const models::ModelSpec& m, std::int64_t pp) {
  return m.num_layers % pp == 0 || accounts_in_split(m, pp);
}

// "t" repeated n times in Megatron-Core's layout notation ("" for none).
std::string layers_text(std::int64_t n) {
  if (n <= 0) return "";
  return n == 1 ? std::string("t") : "t*" + std::to_string(n);
}

// Virtual stages over layers that split evenly over neither the pipeline stages nor them with the
// embedding and the loss: a pipeline_model_parallel_layout as Megatron-Bridge writes DeepSeek-V3's
// 61 layers for (PP, VP) = (4, 2), (8, 2) and (4, 4) (recipes/deepseek/deepseek_v3.py,
// set_deepseek_v3_pipeline_model_parallel_layout: "Et*4|(t*4|)*14,tmL" over 16 virtual stages).
// Each of the pp x vp virtual stages holds ceil(L / (pp x vp)) layers, the first with the
// embedding, and the last the layers left with the multi-token-prediction layers and the loss.
// None when the stages before the last already need more layers than the model has.
std::optional<std::string> filled_layout(const models::ModelSpec& m, std::int64_t pp, std::int64_t vp) {
  const std::int64_t stages = pp * vp;
  if (vp < 2 || stages > m.num_layers) return std::nullopt;
  const std::int64_t each = (m.num_layers + stages - 1) / stages;
  const std::int64_t last = m.num_layers - (stages - 1) * each;
  if (last < 0) return std::nullopt;
  std::string text = "E" + layers_text(each) + "|";
  if (stages > 2) text += "(" + layers_text(each) + "|)*" + std::to_string(stages - 2);
  text += layers_text(last) + std::string(static_cast<std::size_t>(m.mtp_num_layers), 'm') + "L";
  return text;
}

// A plan's pipeline split for `pp` stages of `vp` model chunks: even, with the embedding and
// loss counted, uneven (one chunk), or a filled layout (several chunks). False when there is
// none: virtual stages the layers cannot fill.
bool set_pipeline(models::ParallelSpec& p, const models::ModelSpec& m, std::int64_t pp, std::int64_t vp = 1) {
  p.pipeline_model_parallel_size = pp;
  p.virtual_pipeline_model_parallel_size = vp;
  p.account_for_embedding_in_pipeline_split = p.account_for_loss_in_pipeline_split = accounts_in_split(m, pp);
  p.decoder_first_pipeline_num_layers.reset();
  p.decoder_last_pipeline_num_layers.reset();
  p.pipeline_model_parallel_layout.clear();
  p.layout_layers.clear();
  p.layout_mtp_layers = 0;
  if (vp > 1 && !splits_evenly(m, pp)) {
    const std::optional<std::string> text = filled_layout(m, pp, vp);
    if (!text) return false;
    config::PipelineLayout layout = config::parse_pipeline_layout(*text);
    TRAINSIM_CHECK(layout.error.empty(), "the planner's pipeline layout does not parse");
    p.pipeline_model_parallel_layout = *text;
    p.layout_layers = std::move(layout.layers);
    p.layout_mtp_layers = layout.mtp_layers;
    return true;
  }
  if (const auto split = uneven_split(m, pp)) {
    p.decoder_first_pipeline_num_layers = split->first;
    p.decoder_last_pipeline_num_layers = split->second;
  }
  return true;
}

struct Candidate {
  std::int64_t gpus = 0;
  config::Scenario scenario;
  std::size_t recompute_index = 0;  // position in SearchSpace::recompute of the mode chosen
  bool offload = false;             // the cpu_offloading variant of a plan (no recomputation)
  std::int64_t layer_bytes = 0;     // offload: one layer's activations (what each offloaded layer saves)
};

struct Outcome {
  bool simulated = false;
  bool fits = false;
  int simulations = 0;
  int failed_modes = 0;  // recomputation modes simulated that did not fit
  bool failed_offload = false;  // an offloading variant that did not fit with all layers but one offloaded
  PlanResult result;
};

// Pruning reasons in the order they are reported.
constexpr const char* kReasonInvalid = "invalid for Megatron (sizes do not divide)";
constexpr const char* kReasonLimit = "beyond what trainsim simulates (simulation size or magnitudes)";
constexpr const char* kReasonMemoryEstimate = "does not fit in memory (estimate, even with full recompute)";
constexpr const char* kReasonDominated = "needs less recomputation than this mode (dominated)";
constexpr const char* kReasonMemorySimulated = "does not fit in memory (simulated)";
constexpr const char* kReasonOffloadEstimate = "does not fit in memory (estimate, even offloading all layers but one)";

// The values each parallel dimension takes: the request's lists, or every sensible value.
struct Axes {
  std::vector<std::int64_t> tensor, context, pipeline, expert, micro_batch;
};

Axes axes_of(const PlanRequest& req) {
  const models::ModelSpec& m = req.model;
  const SearchSpace& sp = req.space;
  Axes ax;
  ax.tensor = sp.tensor;
  if (ax.tensor.empty()) {
    for (std::int64_t t = 1; t <= req.cluster.gpus_per_node; t *= 2) ax.tensor.push_back(t);
  }
  ax.context = sp.context;
  if (ax.context.empty()) {
    // Context parallelism pays off for long sequences: chunks of at least 4,096 tokens.
    for (std::int64_t c = 1; c <= 32 && (c == 1 || m.seq_length / c >= 4096); c *= 2) ax.context.push_back(c);
  }
  ax.pipeline = sp.pipeline;
  if (ax.pipeline.empty()) {
    // Stages that split the layers evenly, and those that do once the embedding and the loss
    // count as layers (Megatron-Core's account_for_*_in_pipeline_split: Llama-3.1 405B's 126
    // layers on 8 or 16 stages).
    ax.pipeline = divisors(m.num_layers, 128);
    for (std::int64_t p : divisors(m.num_layers + 2, 128)) {
      if (std::find(ax.pipeline.begin(), ax.pipeline.end(), p) == ax.pipeline.end()) ax.pipeline.push_back(p);
    }
    // Powers of two that split neither way, split unevenly (DeepSeek-V3's 61 layers).
    for (std::int64_t p = 2; p <= std::min<std::int64_t>(m.num_layers, 64); p *= 2) {
      if (std::find(ax.pipeline.begin(), ax.pipeline.end(), p) == ax.pipeline.end() && uneven_split(m, p)) ax.pipeline.push_back(p);
    }
    std::sort(ax.pipeline.begin(), ax.pipeline.end());
  }
  ax.expert = sp.expert;
  if (ax.expert.empty()) ax.expert = m.is_moe() ? divisors(m.num_experts, 64) : std::vector<std::int64_t>{1};
  ax.micro_batch = sp.micro_batch.empty() ? std::vector<std::int64_t>{1, 2, 4, 8} : sp.micro_batch;
  return ax;
}

// The request's model, cluster (`gpus` of it), training and simulation limit as a scenario named
// "plan", for the search to set a plan's parallelism on.
config::Scenario plan_scenario(const PlanRequest& req, std::int64_t gpus) {
  config::Scenario s;
  s.name = s.file = "plan";
  s.model = req.model;
  s.cluster = req.cluster;
  s.cluster.num_nodes = static_cast<int>(gpus / req.cluster.gpus_per_node);
  s.training = req.training;
  s.simulation.max_events = req.max_events;
  s.simulation.sm_contention = req.sm_contention;
  return s;
}

// The expert tensor-parallel sizes plans of `tp` try (0: TP itself, Megatron's default; dense
// models: {0}).
std::vector<std::int64_t> expert_tensor_sizes(const PlanRequest& req, std::int64_t tp) {
  if (!req.model.is_moe()) return {0};
  if (!req.space.expert_tensor.empty()) return req.space.expert_tensor;
  return tp > 1 ? std::vector<std::int64_t>{0, 1} : std::vector<std::int64_t>{0};
}

// A combination the search enumerates, before it is known to be valid (so no data-parallel size).
std::string describe_combination(std::int64_t gpus, const models::ParallelSpec& p, const models::TrainingSpec& t) {
  std::string out = std::to_string(gpus) + " GPUs, TP " + std::to_string(p.tensor_model_parallel_size) + " PP " +
                    std::to_string(p.pipeline_model_parallel_size);
  if (p.virtual_pipeline_model_parallel_size > 1) out += " (x" + std::to_string(p.virtual_pipeline_model_parallel_size) + ")";
  out += describe_context_parallel(p);
  out += describe_expert_parallel(p, t);
  return out + " mbs " + std::to_string(t.micro_batch_size);
}

// Whether any plan on `gpus` GPUs passes Megatron's divisibility rules (no simulation): GPU
// counts that admit none (e.g. a data-parallel size that does not divide the batch) are skipped
// by the deadline search.
bool admits_plan(const PlanRequest& req, std::int64_t gpus) {
  const Axes ax = axes_of(req);
  config::Scenario s = plan_scenario(req, gpus);
  s.training.overlap_p2p_comm = false;  // interleaving only; virtual stages do not change the count
  for (std::int64_t tp : ax.tensor) {
    for (std::int64_t cp : ax.context) {
      for (std::int64_t pp : ax.pipeline) {
        for (std::int64_t ep : ax.expert) {
          for (std::int64_t mbs : ax.micro_batch) {
            for (std::int64_t etp : expert_tensor_sizes(req, tp)) {
              s.parallel = models::ParallelSpec{};
              s.parallel.tensor_model_parallel_size = tp;
              set_pipeline(s.parallel, req.model, pp);
              s.parallel.context_parallel_size = cp;
              s.parallel.expert_model_parallel_size = ep;
              s.parallel.expert_tensor_parallel_size = etp;
              s.parallel.sequence_parallel = tp > 1 && req.space.sequence_parallel;
              s.parallel.use_distributed_optimizer = true;
              s.training.micro_batch_size = mbs;
              s.training.pipeline_schedule = PipelineSchedule::k1F1B;
              try {
                config::validate(s);
                return true;
              } catch (const InputError&) {
              }
            }
          }
        }
      }
    }
  }
  return false;
}

class Searcher {
 public:
  Searcher(const PlanRequest& request, const Progress& progress) : req_(request), progress_(progress) {}

  PlanReport run();

 private:
  void enumerate(std::int64_t gpus);
  void add_offload_variant(Candidate c, std::int64_t capacity, bool needs_recompute);
  Outcome evaluate(const Candidate& c) const;
  report::RunResult simulate(const config::Scenario& s) const;
  void admit_ep_overlap(config::Scenario& s) const;
  // `checkpoint`: the plan's checkpoint, from its simulated stages (report::checkpoint_size).
  PlanResult to_result(const config::Scenario& s, double iteration_s, std::int64_t peak, bool extrapolated,
                       const report::TimeBreakdown& breakdown, const report::CheckpointSize& checkpoint) const;

  const PlanRequest& req_;
  const Progress& progress_;
  std::vector<Candidate> candidates_;
  std::map<std::int64_t, std::shared_ptr<const topo::Cluster>> clusters_;
  std::map<std::string, std::int64_t> pruned_;
  std::string first_invalid_;
  std::int64_t considered_ = 0;
};

// SearchSpace::cpu_offloading: the plan of `c` (one pipeline stage) without recomputation and
// with the fewest first layers' activations offloaded that the memory estimate fits in
// `capacity`, when the plan needs recomputation to fit (`needs_recompute`).
void Searcher::add_offload_variant(Candidate c, std::int64_t capacity, bool needs_recompute) {
  config::Scenario& s = c.scenario;
  models::TrainingSpec& t = s.training;
  const auto none = std::find(req_.space.recompute.begin(), req_.space.recompute.end(), RecomputeGranularity::kNone);
  if (!needs_recompute || s.parallel.pipeline_model_parallel_size != 1 || none == req_.space.recompute.end()) return;
  t.recompute_granularity = RecomputeGranularity::kNone;
  t.cpu_offload_layers = 1;
  admit_ep_overlap(s);
  try {
    config::validate(s);
  } catch (const InputError&) {
    return;  // the GPU gives no host copy rate, or the plan admits no offloading
  }
  ++considered_;
  const models::Workload w = models::describe(s.model, s.parallel, t, c.gpus, s.target_gpu());
  for (std::int64_t n = 1; n < s.model.num_layers; ++n) {
    t.cpu_offload_layers = n;
    if (models::estimated_peak_bytes(w, s.parallel, t) <= capacity) {
      c.recompute_index = static_cast<std::size_t>(none - req_.space.recompute.begin());
      c.offload = true;
      c.layer_bytes = std::max<std::int64_t>(1, models::layer_activation_bytes(w.dims, false));
      candidates_.push_back(c);
      return;
    }
  }
  ++pruned_[kReasonOffloadEstimate];
}

void Searcher::enumerate(std::int64_t gpus) {
  const models::ModelSpec& m = req_.model;
  const SearchSpace& sp = req_.space;
  const int gpn = req_.cluster.gpus_per_node;
  topo::ClusterSpec cluster = req_.cluster;
  cluster.num_nodes = static_cast<int>(gpus / gpn);
  clusters_[gpus] = std::make_shared<const topo::Cluster>(cluster);
  const std::int64_t capacity = req_.usable_memory_bytes();

  const Axes ax = axes_of(req_);
  const std::vector<std::int64_t>&tps = ax.tensor, &cps = ax.context, &pps = ax.pipeline, &eps = ax.expert,
                                   &mbss = ax.micro_batch;

  // Each context-parallel size with each exchange to try.
  std::vector<std::pair<std::int64_t, models::CpCommType>> contexts;
  for (std::int64_t cp : cps) {
    if (cp == 1) {
      contexts.emplace_back(cp, models::CpCommType::kP2p);
      continue;
    }
    for (models::CpCommType type : sp.cp_comm_types) contexts.emplace_back(cp, type);
  }

  for (std::int64_t tp : tps) {
    // Each expert-parallel size with each expert tensor-parallel size (0: the plan's TP) and, where
    // EP > 1, each token dispatcher to try.
    std::vector<std::tuple<std::int64_t, std::int64_t, models::TokenDispatcher>> experts;
    for (std::int64_t ep : eps) {
      for (std::int64_t etp : expert_tensor_sizes(req_, tp)) {
        if (ep == 1 || sp.dispatchers.empty()) {
          experts.emplace_back(ep, etp, req_.training.moe_token_dispatcher_type);
          continue;
        }
        for (models::TokenDispatcher d : sp.dispatchers) experts.emplace_back(ep, etp, d);
      }
    }
    for (const auto& [cp, cp_comm_type] : contexts) {
      // a2a+p2p: the all-to-alls among the CP ranks of one node (the largest group of consecutive
      // CP ranks whose TP x A GPUs a node holds), the ring across nodes; where that group is one
      // rank or all of CP the plan is the ring's or the all-to-alls', searched as such.
      std::vector<std::int64_t> hierarchical;
      if (cp_comm_type == models::CpCommType::kA2aP2p) {
        const std::int64_t a2a = std::gcd(cp, std::max<std::int64_t>(1, gpn / tp));
        if (a2a <= 1 || a2a >= cp) continue;
        hierarchical = {a2a, cp / a2a};
      }
      for (std::int64_t pp : pps) {
        const bool accounted = accounts_in_split(m, pp);
        const std::int64_t units = m.num_layers + (accounted ? 2 : 0);
        std::vector<std::int64_t> vps = sp.virtual_stages;
        if (vps.empty()) {
          vps.push_back(1);
          if (pp > 1 && units % pp == 0) {
            for (std::int64_t v : divisors(units / pp, 16)) {
              if (v > 1) vps.push_back(v);
            }
          } else if (pp > 1) {
            // Layers that split evenly neither way: the virtual stages a filled layout admits.
            for (std::int64_t v = 2; v <= 16; ++v) {
              if (filled_layout(m, pp, v)) vps.push_back(v);
            }
          }
        }
        for (std::int64_t vp : vps) {
          for (const auto& [ep, etp, dispatcher] : experts) {
            for (std::int64_t mbs : mbss) {
              for (int sharding : sp.optimizer_sharding) {
                // Each recomputation mode of a plan is a plan of its own.
                const auto modes = static_cast<std::int64_t>(sp.recompute.size());
                considered_ += modes;
                Candidate c;
                c.gpus = gpus;
                c.scenario = plan_scenario(req_, gpus);
                config::Scenario& s = c.scenario;
                models::ParallelSpec& p = s.parallel;
                p.tensor_model_parallel_size = tp;
                if (!set_pipeline(p, m, pp, vp)) {
                  pruned_[kReasonInvalid] += modes;
                  if (first_invalid_.empty()) {
                    first_invalid_ = describe_combination(gpus, p, s.training) + ": " + std::to_string(m.num_layers) +
                                     " layers do not fill " + std::to_string(pp * vp) + " virtual stages";
                  }
                  continue;
                }
                p.context_parallel_size = cp;
                p.cp_comm_type = cp_comm_type;
                p.hierarchical_context_parallel_sizes = hierarchical;
                p.expert_model_parallel_size = ep;
                p.expert_tensor_parallel_size = etp;
                p.sequence_parallel = tp > 1 && sp.sequence_parallel;
                p.use_distributed_optimizer = sharding == 1;
                p.zero_stage = sharding == 3 ? 3 : 0;
                models::TrainingSpec& t = s.training;
                t.cpu_offload_layers = 0;  // the search decides (add_offload_variant)
                t.moe_token_dispatcher_type = dispatcher;
                t.micro_batch_size = mbs;
                t.pipeline_schedule = vp > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B;
                t.overlap_param_gather = sharding == 1 && req_.training.overlap_param_gather;
                // Megatron-LM admits the optimizer-step gather with the overlapped gathers of the
                // interleaved schedule only.
                t.overlap_param_gather_with_optimizer_step =
                    req_.training.overlap_param_gather_with_optimizer_step && t.overlap_param_gather && vp > 1;
                // The recipe's FP8 parameter gathers where the plan shards the optimizer (Megatron
                // requires it); replicated plans gather nothing.
                t.fp8_param_gather = req_.training.fp8_param_gather && sharding != 0;
                // NeMo 1's distributed_fused_adam is its distributed optimizer: plans that do not
                // shard the optimizer that way run the framework's unsharded one.
                t.apex_distributed_adam = req_.training.apex_distributed_adam && sharding == 1;
                t.optimizer_state_16bit = req_.training.optimizer_state_16bit && t.apex_distributed_adam;
                t.overlap_p2p_comm = vp > 1 && req_.training.overlap_p2p_comm;
                // The recipe's TP communication overlap where the plan admits it (sequence
                // parallelism, the group inside a node); other plans run without it.
                t.tp_comm_overlap = req_.training.tp_comm_overlap && p.sequence_parallel && tp > 1 && tp <= gpn;
                // Under sequence parallelism the input-gradient reduce-scatter always overlaps.
                t.async_tensor_model_parallel_allreduce = req_.training.async_tensor_model_parallel_allreduce || p.sequence_parallel;
                // Megatron-LM skips the pipeline scatter/gather under sequence parallelism.
                t.scatter_gather_tensors_in_pipeline = req_.training.scatter_gather_tensors_in_pipeline && !p.sequence_parallel;
                admit_ep_overlap(s);
                try {
                  config::validate(s);
                } catch (const InputError& e) {
                  pruned_[dynamic_cast<const LimitError*>(&e) != nullptr ? kReasonLimit : kReasonInvalid] += modes;
                  if (first_invalid_.empty()) first_invalid_ = describe_combination(gpus, p, t) + ": " + e.location() + ": " + e.detail();
                  continue;
                }
                // The least recomputation whose activations fit (recomputation only adds work).
                bool placed = false;
                for (std::size_t i = 0; i < sp.recompute.size() && !placed; ++i) {
                  t.recompute_granularity = sp.recompute[i];
                  admit_ep_overlap(s);
                  const models::Workload w = models::describe(s.model, p, t, gpus, s.target_gpu());
                  if (models::estimated_peak_bytes(w, p, t) > capacity) {
                    ++pruned_[kReasonMemoryEstimate];
                    continue;
                  }
                  c.recompute_index = i;
                  pruned_[kReasonDominated] += modes - 1 - static_cast<std::int64_t>(i);
                  candidates_.push_back(c);
                  placed = true;
                }
                if (sp.cpu_offloading) add_offload_variant(c, capacity, !placed || c.recompute_index > 0);
              }
            }
          }
        }
      }
    }
  }
}

// The recipe's EP all-to-all overlap (overlap_moe_expert_parallel_comm, with its
// delay_wgrad_compute) where the plan and its recomputation admit it; other plans run without.
// Plans that run it leave out the recipe's moe_shared_expert_overlap, which Megatron-Core refuses
// beside it (Megatron-Bridge's moe_a2a_overlap override turns it off the same way).
void Searcher::admit_ep_overlap(config::Scenario& s) const {
  models::TrainingSpec& t = s.training;
  t.overlap_moe_expert_parallel_comm = req_.training.overlap_moe_expert_parallel_comm;
  // Where Megatron-Core refuses the overlap, and beside activation offloading, which trainsim does
  // not model with it (config::validate): such plans run without.
  if (t.overlap_moe_expert_parallel_comm && (config::ep_overlap_refusal(s.model, s.parallel, t) || t.cpu_offload_layers > 0)) {
    t.overlap_moe_expert_parallel_comm = false;
  }
  t.delay_wgrad_compute = t.overlap_moe_expert_parallel_comm && req_.training.delay_wgrad_compute;
  t.moe_shared_expert_overlap = req_.training.moe_shared_expert_overlap && !t.overlap_moe_expert_parallel_comm;
}

report::RunResult Searcher::simulate(const config::Scenario& s) const {
  report::RunOptions options;
  options.record = false;
  options.cluster = clusters_.at(s.num_gpus());
  return report::simulate(s, options);
}

PlanResult Searcher::to_result(const config::Scenario& s, double iteration_s, std::int64_t peak, bool extrapolated,
                               const report::TimeBreakdown& breakdown, const report::CheckpointSize& checkpoint) const {
  PlanResult r;
  r.pipeline_bubble_s = breakdown.pipeline_bubble_s;
  r.exposed_communication_s = breakdown.exposed_communication_s;
  r.exposed_by_kind = breakdown.exposed_by_kind;
  r.gpus = s.num_gpus();
  r.parallel = s.parallel;
  r.training = s.training;
  r.iteration_time_s = iteration_s;
  r.peak_bytes_per_gpu = peak;
  r.extrapolated = extrapolated;
  const double tokens = static_cast<double>(s.training.global_batch_size * s.model.seq_length);
  r.tokens_per_s = tokens / iteration_s;
  const models::FlopCount f = models::count_flops(s.model, s.parallel, s.training);
  const sim::DataType peak_type = models::tensor_core_type(s.training.precision);
  const double peak_flops = s.cluster.gpu.peak(peak_type).per_second() * static_cast<double>(r.gpus);
  r.mfu = f.model / iteration_s / peak_flops;
  r.hfu = f.hardware / iteration_s / peak_flops;
  if (s.training.train_tokens) {
    const double seconds = *s.training.train_tokens / r.tokens_per_s;
    r.time_to_train_days = seconds / 86400.0;
    r.gpu_hours = seconds / 3600.0 * static_cast<double>(r.gpus);
  }
  if (s.training.reliability) {
    std::optional<double> train_seconds;
    if (r.time_to_train_days) train_seconds = *r.time_to_train_days * 86400.0;
    const report::ReliabilityEstimate e = report::estimate_reliability(
        *s.training.reliability, r.gpus, s.cluster.gpus_per_node, iteration_s, checkpoint, s.cluster.pcie_x16_GBps(), train_seconds);
    r.goodput = e.goodput;
    r.checkpoint_interval_iterations = e.checkpoint_interval_iterations;
    r.expected_time_to_train_days = e.expected_time_to_train_days;
    r.expected_gpu_hours = e.expected_gpu_hours;
    if (e.spare_nodes) {
      r.spare_nodes = e.spare_nodes;
      r.no_spare_probability = e.no_spare_probability;
      r.repair_wait_s = e.repair_wait_s;
    }
  }
  if (req_.price_per_gpu_hour && r.gpu_hours) r.cost = r.expected_gpu_hours.value_or(*r.gpu_hours) * *req_.price_per_gpu_hour;
  return r;
}

Outcome Searcher::evaluate(const Candidate& c) const {
  Outcome out;
  const std::int64_t capacity = req_.usable_memory_bytes();
  config::Scenario s = c.scenario;
  // An offloading variant keeps its mode (no recomputation) and, while the simulated peak does not
  // fit, offloads as many more layers as the excess holds layers' activations (each offloaded
  // layer lowers the peak by its activations).
  const std::size_t last = c.offload ? c.recompute_index + 1 : req_.space.recompute.size();
  for (std::size_t i = c.recompute_index; i < last;) {
    s.training.recompute_granularity = req_.space.recompute[i];
    admit_ep_overlap(s);
    const std::int64_t m = s.microbatches();
    const std::int64_t p = s.parallel.pipeline_model_parallel_size;
    const std::int64_t m1 = std::max<std::int64_t>(2, 2 * p), m2 = std::max<std::int64_t>(3, 3 * p);
    double iteration = 0;
    std::int64_t peak = 0;
    bool extrapolated = false;
    report::TimeBreakdown breakdown;
    report::CheckpointSize checkpoint;  // the same at any batch: weights and optimizer state
    if (req_.exact || m <= m2) {
      const report::RunResult r = simulate(s);
      ++out.simulations;
      iteration = r.iteration_time_s;
      peak = r.peak_bytes_per_gpu;
      breakdown = r.breakdown;
      checkpoint = report::checkpoint_size(r);
    } else {
      // Two shorter iterations of the same plan; the steady state adds a fixed time per
      // micro-batch (and, for GPipe, fixed activations per micro-batch).
      const std::int64_t per_microbatch = s.training.micro_batch_size * s.data_parallel_size();
      config::Scenario a = s, b = s;
      a.training.global_batch_size = m1 * per_microbatch;
      b.training.global_batch_size = m2 * per_microbatch;
      const report::RunResult ra = simulate(a), rb = simulate(b);
      out.simulations += 2;
      // Each part of the time grows linearly with the micro-batches, as the whole does.
      auto extend = [&](double at_m1, double at_m2) {
        return at_m2 + (at_m2 - at_m1) / static_cast<double>(m2 - m1) * static_cast<double>(m - m2);
      };
      iteration = extend(ra.iteration_time_s, rb.iteration_time_s);
      breakdown = rb.breakdown;
      checkpoint = report::checkpoint_size(rb);
      auto part = [&](double at_m1, double at_m2) { return std::max(0.0, extend(at_m1, at_m2)); };
      breakdown.pipeline_bubble_s = part(ra.breakdown.pipeline_bubble_s, rb.breakdown.pipeline_bubble_s);
      breakdown.exposed_communication_s = 0;  // the sum of its kinds, each extrapolated
      for (std::size_t k = 0; k < breakdown.exposed_by_kind.size(); ++k) {
        breakdown.exposed_by_kind[k].second = part(ra.breakdown.exposed_by_kind[k].second, rb.breakdown.exposed_by_kind[k].second);
        breakdown.exposed_communication_s += breakdown.exposed_by_kind[k].second;
      }
      const double mem_slope = static_cast<double>(rb.peak_bytes_per_gpu - ra.peak_bytes_per_gpu) / static_cast<double>(m2 - m1);
      peak = rb.peak_bytes_per_gpu + static_cast<std::int64_t>(std::llround(mem_slope * static_cast<double>(m - m2)));
      extrapolated = true;
    }
    out.simulated = true;
    if (peak <= capacity) {
      out.fits = true;
      out.result = to_result(s, iteration, peak, extrapolated, breakdown, checkpoint);
      return out;
    }
    if (c.offload) {
      const std::int64_t layers = s.model.num_layers;
      if (s.training.cpu_offload_layers + 1 < layers) {
        const std::int64_t more = std::max<std::int64_t>(1, (peak - capacity + c.layer_bytes - 1) / c.layer_bytes);
        s.training.cpu_offload_layers = std::min(layers - 1, s.training.cpu_offload_layers + more);
        continue;  // the same mode, more layers offloaded
      }
      out.failed_offload = true;
      return out;
    }
    ++out.failed_modes;
    ++i;
  }
  return out;
}

PlanReport Searcher::run() {
  for (std::int64_t g : req_.gpu_counts) enumerate(g);

  // Simulate on all cores; results land in candidate order, so the report is deterministic.
  std::vector<Outcome> outcomes(candidates_.size());
  std::atomic<std::size_t> done{0};
  report::run_jobs(
      candidates_.size(), req_.threads > 0 ? static_cast<unsigned>(req_.threads) : 0,
      [&](std::size_t i) { outcomes[i] = evaluate(candidates_[i]); },
      [&](std::size_t) {
        const std::size_t d = ++done;
        if (progress_) progress_(d, candidates_.size());
      });

  PlanReport report;
  report.considered = considered_;
  std::map<std::int64_t, GpuCountResult> per_count;
  for (std::int64_t g : req_.gpu_counts) per_count[g].gpus = g;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    report.simulated += o.simulations;
    // Modes after the one the estimate chose were counted as dominated; those simulated (and
    // failed, or found feasible) are not.
    pruned_[kReasonMemorySimulated] += o.failed_modes + (o.failed_offload ? 1 : 0);
    if (!o.fits && o.failed_offload) continue;
    if (!o.fits) {
      pruned_[kReasonDominated] -= o.failed_modes - 1;
      continue;
    }
    pruned_[kReasonDominated] -= o.failed_modes;
    report.plans.push_back(o.result);
    GpuCountResult& g = per_count[candidates_[i].gpus];
    ++g.feasible;
    if (!g.best || trains_faster(o.result, *g.best)) g.best = o.result;
  }
  // Fastest to train first (tokens per second of elapsed time); ties keep enumeration order.
  std::stable_sort(report.plans.begin(), report.plans.end(), trains_faster);
  for (const char* reason : {kReasonInvalid, kReasonLimit, kReasonMemoryEstimate, kReasonOffloadEstimate, kReasonDominated, kReasonMemorySimulated}) {
    auto it = pruned_.find(reason);
    if (it != pruned_.end() && it->second > 0) report.pruned.emplace_back(reason, it->second);
  }
  for (auto& [gpus, r] : per_count) report.per_gpu_count.push_back(r);
  report.first_invalid = first_invalid_;
  if (req_.deadline_days) {
    for (const GpuCountResult& g : report.per_gpu_count) {
      if (g.best && g.best->deadline_days() && *g.best->deadline_days() <= *req_.deadline_days) {
        report.deadline_gpus = g.gpus;
        break;
      }
    }
  }
  return report;
}

}  // namespace

bool own_expert_tensor(const models::ParallelSpec& p) {
  return p.expert_tensor_parallel_size > 0 && p.etp() != p.tensor_model_parallel_size;
}

bool flex_dispatch(const models::ParallelSpec& p, const models::TrainingSpec& t) {
  return p.expert_model_parallel_size > 1 && t.moe_token_dispatcher_type == models::TokenDispatcher::kFlex;
}

std::string describe_expert_parallel(const models::ParallelSpec& p, const models::TrainingSpec& t) {
  std::string out;
  if (p.expert_model_parallel_size > 1) out = " EP " + std::to_string(p.expert_model_parallel_size);
  if (own_expert_tensor(p)) out += " ETP " + std::to_string(p.etp());
  if (flex_dispatch(p, t)) out += " flex";
  return out;
}

std::string describe_context_parallel(const models::ParallelSpec& p) {
  if (p.context_parallel_size <= 1) return "";
  std::string out = " CP " + std::to_string(p.context_parallel_size);
  if (p.cp_comm_type != models::CpCommType::kP2p) out += std::string(" ") + models::to_string(p.cp_comm_type);
  if (!p.hierarchical_context_parallel_sizes.empty()) {
    out += " [" + std::to_string(p.hierarchical_context_parallel_sizes[0]) + ", " + std::to_string(p.hierarchical_context_parallel_sizes[1]) + "]";
  }
  return out;
}

std::int64_t PlanReport::pruned_total() const {
  std::int64_t n = 0;
  for (const auto& [reason, count] : pruned) n += count;
  return n;
}

std::int64_t PlanReport::pruned_for_limits() const {
  for (const auto& [reason, count] : pruned) {
    if (reason == kReasonLimit) return count;
  }
  return 0;
}

std::int64_t PlanReport::pruned_for_memory() const {
  std::int64_t n = 0;
  for (const auto& [reason, count] : pruned) {
    if (reason == kReasonMemoryEstimate || reason == kReasonMemorySimulated || reason == kReasonOffloadEstimate) n += count;
  }
  return n;
}

PlanRequest request_of(const config::Scenario& scenario) {
  if (scenario.simulation.full) {
    throw InputError(scenario.file, "/simulation/fidelity",
                     "plan simulates every plan at symmetric fidelity (--exact for whole iterations): leave \"full\" to trainsim run");
  }
  PlanRequest r;
  r.model = scenario.model;
  r.cluster = scenario.cluster;
  r.training = scenario.training;
  r.max_events = scenario.simulation.max_events;
  r.sm_contention = scenario.simulation.sm_contention;
  r.space.cp_comm_types = {scenario.parallel.cp_comm_type};  // the scenario's exchange
  r.gpu_counts = {scenario.num_gpus()};
  return r;
}

config::Scenario scenario_of(const PlanRequest& request, const PlanResult& plan) {
  config::Scenario s = plan_scenario(request, plan.gpus);
  s.name = describe_plan(plan);
  s.parallel = plan.parallel;
  s.training = plan.training;
  config::validate(s);
  return s;
}

PlanReport search(const PlanRequest& request, const Progress& progress) {
  TRAINSIM_CHECK(!request.gpu_counts.empty(), "plan search without GPU counts");
  Searcher s(request, progress);
  return s.run();
}

std::vector<std::int64_t> admitted_gpu_counts(const PlanRequest& request, std::int64_t lo, std::int64_t hi) {
  const std::int64_t gpn = request.cluster.gpus_per_node;
  // Megatron needs the data-parallel size to divide the global batch, so only counts
  // tp x pp x cp x d, d a divisor of the batch, can admit a plan: those are checked, not every
  // whole-node count of a range that may span millions of GPUs.
  const Axes ax = axes_of(request);
  std::set<std::int64_t> possible;
  for (std::int64_t d : divisors(request.training.global_batch_size, request.training.global_batch_size)) {
    for (std::int64_t tp : ax.tensor) {
      for (std::int64_t pp : ax.pipeline) {
        for (std::int64_t cp : ax.context) {
          const std::int64_t model_parallel = tp * pp * cp;  // each at most 2^20 (the option bounds)
          if (model_parallel > hi / d) continue;
          const std::int64_t n = model_parallel * d;
          if (n >= lo && n % gpn == 0) possible.insert(n);
        }
      }
    }
  }
  std::vector<std::int64_t> counts;
  for (std::int64_t n : possible) {
    if (admits_plan(request, n)) counts.push_back(n);
  }
  return counts;
}

std::optional<double> time_to_train_lower_bound_days(const PlanRequest& request, std::int64_t gpus) {
  if (!request.training.train_tokens || gpus <= 0) return std::nullopt;
  const models::ModelSpec& m = request.model;
  const double samples = static_cast<double>(request.training.global_batch_size);
  // Model FLOPs (the vocabulary padded least, at TP 1) less the attention core's score and value
  // products of every layer (forward, and the backward's two): a causal kernel skips up to half of
  // them, and Megatron's count does not. What remains every plan executes at least once (MoE
  // experts see top-k tokens each: trainsim drops none), and recomputation only adds to it.
  const double layers = static_cast<double>(m.num_layers + m.mtp_num_layers);
  const double executed =
      std::max(0.0, models::model_flops(m, samples, 1) - 3.0 * layers * samples * models::attention_core_forward_flops(m));
  // No kernel runs faster than the dense peak of the tensor cores the precision's GEMMs use, and
  // at best the work is spread evenly over the GPUs.
  const topo::GpuSpec& gpu = request.cluster.gpu;
  const double peak = std::max(gpu.peak(models::tensor_core_type(request.training.precision)).per_second(),
                               gpu.dense_16bit.per_second());
  const double iteration_s = executed / (static_cast<double>(gpus) * peak);
  const double tokens = samples * static_cast<double>(m.seq_length);
  return *request.training.train_tokens / tokens * iteration_s / 86400.0;
}

PlanReport search_deadline(PlanRequest request, std::int64_t lo, std::int64_t hi, const Progress& progress) {
  TRAINSIM_CHECK(request.deadline_days.has_value(), "deadline search without a deadline");
  const std::vector<std::int64_t> counts = admitted_gpu_counts(request, lo, hi);
  std::map<std::int64_t, PlanReport> reports;
  auto probe = [&](std::size_t index) -> const PlanReport& {
    const std::int64_t gpus = counts[index];
    auto it = reports.find(gpus);
    if (it != reports.end()) return it->second;
    PlanRequest one = request;
    one.gpu_counts = {gpus};
    return reports.emplace(gpus, search(one, progress)).first->second;
  };
  auto meets = [&](std::size_t index) { return probe(index).deadline_gpus.has_value(); };
  // A geometric walk (GPU count doubling) up to the first count that meets the deadline, then
  // bisection between it and the last count that did not: where time to train falls with more
  // GPUs, the smallest count in a few searches.
  std::optional<std::size_t> first_ok;
  std::optional<std::size_t> last_fail;
  for (std::size_t i = 0; i < counts.size();) {
    if (meets(i)) {
      first_ok = i;
      break;
    }
    last_fail = i;
    if (i + 1 == counts.size()) break;
    const auto next = std::lower_bound(counts.begin() + static_cast<std::ptrdiff_t>(i) + 1, counts.end(), 2 * counts[i]);
    i = next == counts.end() ? counts.size() - 1 : static_cast<std::size_t>(next - counts.begin());
  }
  if (first_ok && last_fail) {
    std::size_t bad = *last_fail, good = *first_ok;
    while (good - bad > 1) {
      const std::size_t mid = bad + (good - bad) / 2;
      if (meets(mid)) {
        good = mid;
      } else {
        bad = mid;
      }
    }
    first_ok = good;
  }
  // Time to train need not fall with more GPUs: a count the batch divides poorly gets worse plans
  // than a smaller one (a data-parallel size that does not divide the batch forces more tensor or
  // pipeline parallelism), so the walk may have stepped over a smaller count that meets the
  // deadline, or past every one. The counts below its answer (all of them without one) that it
  // did not probe are searched, smallest first, except those whose lower bound on the time to
  // train already misses the deadline; the first that meets it is the answer.
  for (std::size_t i = 0; i < (first_ok ? *first_ok : counts.size()); ++i) {
    if (reports.count(counts[i])) continue;
    const std::optional<double> bound = time_to_train_lower_bound_days(request, counts[i]);
    if (bound && *bound > *request.deadline_days) continue;
    if (meets(i)) {
      first_ok = i;
      break;
    }
  }
  std::optional<std::int64_t> deadline_gpus;
  if (first_ok) deadline_gpus = counts[*first_ok];
  // Merge the probes into one report (in increasing GPU count).
  PlanReport merged;
  std::map<std::string, std::int64_t> pruned;
  std::vector<std::string> order;
  for (auto& [gpus, r] : reports) {
    merged.considered += r.considered;
    merged.simulated += r.simulated;
    for (const auto& [reason, n] : r.pruned) {
      if (!pruned.count(reason)) order.push_back(reason);
      pruned[reason] += n;
    }
    for (const GpuCountResult& g : r.per_gpu_count) merged.per_gpu_count.push_back(g);
    merged.plans.insert(merged.plans.end(), r.plans.begin(), r.plans.end());
  }
  for (const std::string& reason : order) merged.pruned.emplace_back(reason, pruned[reason]);
  std::stable_sort(merged.plans.begin(), merged.plans.end(), trains_faster);
  merged.deadline_gpus = deadline_gpus;
  return merged;
}

}  // namespace trainsim::planner
