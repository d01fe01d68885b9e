#include "planner/plan_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

#include "report/picture_layout.h"
#include "report/text_format.h"

namespace trainsim::planner {

namespace {

using Json = nlohmann::ordered_json;

using report::fmt;

double tidy(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return std::strtod(buf, nullptr);
}

const char* sharding_name(const models::ParallelSpec& p) {
  if (p.zero_stage >= 3) return "zero3";
  return p.use_distributed_optimizer ? "dist-opt" : "-";
}

bool uneven_split(const models::ParallelSpec& p) {
  return p.decoder_first_pipeline_num_layers || p.decoder_last_pipeline_num_layers || !p.pipeline_model_parallel_layout.empty();
}

// The PP column's mark: * embedding and loss counted in the split, ~ an uneven split.
const char* split_mark(const models::ParallelSpec& p) {
  if (p.accounts_in_split()) return "*";
  return uneven_split(p) ? "~" : "";
}

// The table's mark of a context-parallel exchange other than the ring: "a" all-to-all, "g"
// all-gather, "h" all-to-alls within a node and the ring across ("" for the ring or without CP).
const char* cp_mark(const models::ParallelSpec& p) {
  if (p.context_parallel_size == 1) return "";
  switch (p.cp_comm_type) {
    case models::CpCommType::kA2a:
      return "a";
    case models::CpCommType::kAllGather:
      return "g";
    case models::CpCommType::kA2aP2p:
      return "h";
    case models::CpCommType::kP2p:
      break;
  }
  return "";
}

std::int64_t dp_of(const PlanResult& r) {
  const models::ParallelSpec& p = r.parallel;
  return r.gpus / (p.tensor_model_parallel_size * p.pipeline_model_parallel_size * p.context_parallel_size);
}

}  // namespace

std::string describe_plan(const PlanResult& r) {
  const models::ParallelSpec& p = r.parallel;
  std::ostringstream o;
  o << "TP " << p.tensor_model_parallel_size << " PP " << p.pipeline_model_parallel_size << split_mark(p);
  if (p.virtual_pipeline_model_parallel_size > 1) o << " (x" << p.virtual_pipeline_model_parallel_size << ")";
  o << describe_context_parallel(p) << describe_expert_parallel(p, r.training);
  o << " DP " << dp_of(r) << " mbs " << r.training.micro_batch_size << " "
    << models::to_string(r.training.recompute_granularity);
  if (r.training.cpu_offload_layers > 0) o << " offload " << r.training.cpu_offload_layers;
  o << " " << sharding_name(p);
  return o.str();
}

std::string plan_table(const PlanRequest& request, const PlanReport& report, std::size_t top) {
  std::ostringstream o;
  const bool train = request.training.train_tokens.has_value();
  const bool reliability = request.training.reliability.has_value();
  const bool spares = reliability && request.training.reliability->has_spares();  // each plan's count, a column
  o << "plans for " << request.model.name << " on " << request.cluster.gpu.name << " (" << request.cluster.name
    << "), global batch " << request.training.global_batch_size << " x " << request.model.seq_length << " tokens, "
    << models::to_string(request.training.precision)
    << (request.training.quantized() && request.training.quant_recipe != models::QuantRecipe::kDelayed
            ? std::string(" (") + models::to_string(request.training.quant_recipe) + ")"
            : std::string())
    << "\n";
  if (request.memory_headroom_bytes > 0) {
    o << "  plans fit in " << fmt("%.2f", static_cast<double>(request.usable_memory_bytes()) / 1073741824.0) << " GiB per GPU: "
      << fmt("%.2f", static_cast<double>(request.cluster.gpu.memory.count()) / 1073741824.0) << " GiB less a headroom of "
      << fmt("%.2f", static_cast<double>(request.memory_headroom_bytes) / 1073741824.0) << " GiB\n";
  }
  if (request.sm_contention) {
    o << "  GEMM and attention beside communication run on the SMs its kernels leave (simulation.sm_contention)\n";
  }
  o << "  considered " << report.considered << ", simulated " << report.simulated << ", feasible " << report.plans.size()
    << ", pruned " << report.pruned_total() << ":\n";
  for (const auto& [reason, n] : report.pruned) o << "    " << n << "  " << reason << "\n";
  const std::size_t n = std::min(top, report.plans.size());
  if (n > 0) {  // --top 0: the counts and the per-GPU-count summary only
    o << "\n  rank  GPUs   TP  PP   V  CP   EP    DP  mbs  recompute  optimizer   iter_s   tokens/s    MFU  bubble  exposed  mem_GiB";
    if (train) o << "    days   GPU-hours";
    if (reliability) o << "  goodput";
    if (spares) o << "  spares";
    if (reliability && train) o << "  exp_days  exp_GPU-h";
    if (request.price_per_gpu_hour) o << "        cost";
    o << "\n";
  }
  for (std::size_t i = 0; i < n; ++i) {
    const PlanResult& r = report.plans[i];
    const models::ParallelSpec& p = r.parallel;
    char line[256];
    const std::string pp = std::to_string(p.pipeline_model_parallel_size) + split_mark(p);
    const std::string cp = std::to_string(p.context_parallel_size) + cp_mark(p);
    const std::string ep =
        std::to_string(p.expert_model_parallel_size) + (own_expert_tensor(p) ? "e" : "") + (flex_dispatch(p, r.training) ? "f" : "");
    // An offloading plan recomputes nothing: its column gives the layers offloaded instead.
    const std::string recompute = r.training.cpu_offload_layers > 0 ? "offload " + std::to_string(r.training.cpu_offload_layers)
                                                                     : models::to_string(r.training.recompute_granularity);
    std::snprintf(line, sizeof line, "  %4zu %5lld %4lld %3s %3lld %3s %4s %5lld %4lld  %-9s  %-9s %8.3f %10.0f %5.1f%% %6.1f%% %7.1f%% %8.1f", i + 1,
                  static_cast<long long>(r.gpus), static_cast<long long>(p.tensor_model_parallel_size), pp.c_str(),
                  static_cast<long long>(p.virtual_pipeline_model_parallel_size),
                  cp.c_str(), ep.c_str(), static_cast<long long>(dp_of(r)), static_cast<long long>(r.training.micro_batch_size),
                  recompute.c_str(), sharding_name(p), r.iteration_time_s, r.tokens_per_s, 100 * r.mfu, 100 * r.pipeline_bubble_s / r.iteration_time_s, 100 * r.exposed_communication_s / r.iteration_time_s,
                  static_cast<double>(r.peak_bytes_per_gpu) / 1073741824.0);
    o << line;
    if (train && r.time_to_train_days) o << fmt(" %7.1f", *r.time_to_train_days) << fmt(" %11.4g", *r.gpu_hours);
    if (r.goodput) o << fmt(" %7.1f%%", 100 * *r.goodput);
    if (spares) o << fmt(" %7.0f", static_cast<double>(r.spare_nodes.value_or(0)));
    if (r.expected_time_to_train_days) {
      o << fmt(" %9.1f", *r.expected_time_to_train_days) << fmt(" %10.4g", r.expected_gpu_hours.value_or(0));
    } else if (r.goodput && train) {
      o << "     never           ";  // interruptions faster than saves and restarts
    }
    if (r.cost) o << fmt(" %11.4g", *r.cost);
    o << "\n";
  }
  if (report.plans.empty()) {
    // Say which wall the search hit: memory, or Megatron's rules (and trainsim's limits) alone,
    // with one rejected combination and its reason.
    o << (report.pruned_for_memory() > 0
              ? "  (no plan fits: more GPUs, a smaller batch per GPU or more recomputation are needed)\n"
              : report.pruned_for_limits() > 0
                    ? "  (no valid plan: every combination breaks a Megatron rule or goes beyond what trainsim simulates "
                      "(simulation size, magnitudes); fewer GPUs or micro-batches, other --tp/--pp/--cp/--ep or "
                      "--micro-batch-sizes, or another batch, may give one)\n"
                    : "  (no valid plan: every combination breaks a Megatron rule (heads, layers, GPUs or batch do not divide); "
                      "other --tp/--pp/--cp/--ep or --micro-batch-sizes, or another batch, may give one)\n");
    if (report.pruned_for_memory() == 0 && !report.first_invalid.empty()) {
      o << "  (for example " << report.first_invalid << ")\n";
    }
  }
  if (n > 0) {
    o << "  bubble, exposed: shares of the iteration the critical rank spent in the pipeline bubble and waiting for\n"
         "       communication it could not hide (--json gives the exposed time by kind)\n";
  }
  if (n > 0 && reliability) {
    const models::ReliabilitySpec& rel = *request.training.reliability;
    o << "  goodput: the share of elapsed time that trains, the job stopping every " << fmt("%.6g", rel.gpu_mtbf_hours)
      << " GPU-hours / GPUs and\n       restarting in " << fmt("%g min", rel.restart_minutes) << " from its last "
      << (rel.async_checkpoint ? "asynchronous " : "") << "checkpoint ("
      << (rel.checkpoint_interval_iterations ? "every " + std::to_string(*rel.checkpoint_interval_iterations) + " iterations"
                                             : std::string("at each plan's best interval"))
      << fmt(", storage at %g GB/s)", rel.checkpoint_write_GBps);
    if (rel.has_spares()) {
      o << ",\n       "
        << (rel.cheapest_spares ? std::string("spares: each plan's cheapest count of spare nodes")
                                : std::to_string(*rel.spare_nodes) + (*rel.spare_nodes == 1 ? " spare node" : " spare nodes"))
        << " back from repair in " << fmt("%g h", rel.node_repair_hours) << (rel.cheapest_spares ? "\n       (" : " (")
        << (rel.node_repair_share < 1 ? fmt("%g of interruptions take a node out; ", rel.node_repair_share) : std::string())
        << (rel.idle_failure_share > 0 ? fmt("idle nodes fail at %g of a working node's rate; ", rel.idle_failure_share)
                                       : std::string())
        << "waits for one when all are out; their GPUs in exp_GPU-h)";
    }
    if (train) o << ";\n       exp_days, exp_GPU-h: the time to train and GPU-hours with the interruptions";
    o << (request.price_per_gpu_hour && train ? "; cost prices exp_GPU-h\n" : "\n");
  }
  bool accounted = false, uneven = false, all_to_all = false, all_gather = false, hierarchical = false, expert_tensor = false,
       flex = false;
  for (std::size_t i = 0; i < n; ++i) {
    accounted = accounted || report.plans[i].parallel.accounts_in_split();
    uneven = uneven || uneven_split(report.plans[i].parallel);
    const models::ParallelSpec& p = report.plans[i].parallel;
    all_to_all = all_to_all || (p.context_parallel_size > 1 && p.cp_comm_type == models::CpCommType::kA2a);
    all_gather = all_gather || (p.context_parallel_size > 1 && p.cp_comm_type == models::CpCommType::kAllGather);
    hierarchical = hierarchical || (p.context_parallel_size > 1 && p.cp_comm_type == models::CpCommType::kA2aP2p);
    expert_tensor = expert_tensor || own_expert_tensor(p);
    flex = flex || flex_dispatch(p, report.plans[i].training);
  }
  if (all_to_all) {
    o << "  CPa: context parallelism by all-to-alls of Q, K, V and the output (cp_comm_type a2a)\n";
  }
  if (all_gather) o << "  CPg: context parallelism by all-gathered K and V (cp_comm_type allgather)\n";
  if (hierarchical) {
    o << "  CPh: all-to-alls among the CP ranks of a node, the ring across nodes (cp_comm_type a2a+p2p; the JSON\n"
         "       gives hierarchical_context_parallel_sizes)\n";
  }
  if (all_to_all || all_gather || hierarchical) o << "       (a CP size without a mark: Transformer Engine's ring, p2p)\n";
  if (expert_tensor) {
    o << "  EPe: the experts run another tensor-parallel size than attention (expert_tensor_parallel_size; the JSON\n"
         "       and the CSV give it); without the mark they follow TP\n";
  }
  if (flex) {
    o << "  EPf: tokens dispatched by the flex dispatcher (DeepEP or HybridEP; moe_token_dispatcher_type flex), the\n"
         "       others by the alltoall one\n";
  }
  if (uneven) {
    o << "  PP~: the layers do not split evenly. Without virtual stages the middle stages hold ceil(layers / PP),\n"
         "       the first and last share the rest (decoder_first/last_pipeline_num_layers); with V of them each\n"
         "       of the PP x V virtual stages holds ceil(layers / (PP x V)), the last the rest with the loss\n"
         "       (pipeline_model_parallel_layout); --json gives them per plan\n";
  }
  if (accounted) {
    o << "  PP*: the embedding and the loss count as one layer each in the pipeline split, the first and last\n"
         "       virtual stage hold one transformer layer fewer (account_for_embedding/loss_in_pipeline_split)\n";
  }
  if (report.per_gpu_count.size() > 1) {
    o << "\n  best plan per GPU count\n";
    for (const GpuCountResult& g : report.per_gpu_count) {
      o << "  " << fmt("%6.0f", static_cast<double>(g.gpus)) << " GPUs: ";
      if (!g.best) {
        o << "no feasible plan\n";
        continue;
      }
      o << describe_plan(*g.best) << fmt(", %.3f s/iteration", g.best->iteration_time_s);
      if (g.best->time_to_train_days) {
        o << fmt(", %.1f days", *g.best->time_to_train_days) << fmt(" (%.3g GPU-hours)", g.best->gpu_hours.value_or(0));
      }
      if (g.best->goodput) o << fmt("; goodput %.1f%%", 100 * *g.best->goodput);
      if (g.best->expected_time_to_train_days) {
        o << fmt(": %.1f days", *g.best->expected_time_to_train_days)
          << fmt(" (%.3g GPU-hours) with interruptions", g.best->expected_gpu_hours.value_or(0));
      }
      o << "\n";
    }
  }
  if (request.deadline_days) {
    o << "\n  deadline " << fmt("%g days", *request.deadline_days) << ": ";
    if (report.deadline_gpus) {
      o << "the smallest GPU count that meets it is " << *report.deadline_gpus << "\n";
    } else {
      o << "no GPU count in the range meets it\n";
    }
  }
  return o.str();
}

namespace {

// write_plan_csv's header; `cluster` puts a cluster column first (a comparison's).
void write_csv_header(const PlanReport& report, bool cluster, std::ostream& out) {
  if (cluster) out << "cluster,";
  out << "rank,gpus,tensor_model_parallel_size,pipeline_model_parallel_size,virtual_pipeline_model_parallel_size,"
         "context_parallel_size,expert_model_parallel_size,data_parallel_size,micro_batch_size,recompute_granularity,"
         "use_distributed_optimizer,zero_stage,iteration_time_s,tokens_per_s,mfu,peak_bytes_per_gpu,time_to_train_days,"
         "gpu_hours,cost,account_for_embedding_in_pipeline_split,account_for_loss_in_pipeline_split,"
         "decoder_first_pipeline_num_layers,decoder_last_pipeline_num_layers,pipeline_bubble_s,exposed_communication_s,"
         "cpu_offloading_num_layers,cp_comm_type,hierarchical_context_parallel_sizes,pipeline_model_parallel_layout,"
         "expert_tensor_parallel_size,moe_token_dispatcher_type,goodput,checkpoint_interval_iterations,"
         "expected_time_to_train_days,expected_gpu_hours,spare_nodes";
  if (!report.plans.empty()) {
    for (const auto& [kind, v] : report.plans.front().exposed_by_kind) out << ",exposed_" << kind << "_s";
  }
  out << "\n";
}

// write_plan_csv's rows; a non-empty `cluster` is written first in each.
void write_csv_rows(const PlanReport& report, const std::string& cluster, std::ostream& out) {
  for (std::size_t i = 0; i < report.plans.size(); ++i) {
    const PlanResult& r = report.plans[i];
    const models::ParallelSpec& p = r.parallel;
    if (!cluster.empty()) out << cluster << ',';
    out << i + 1 << ',' << r.gpus << ',' << p.tensor_model_parallel_size << ',' << p.pipeline_model_parallel_size << ','
        << p.virtual_pipeline_model_parallel_size << ',' << p.context_parallel_size << ',' << p.expert_model_parallel_size
        << ',' << dp_of(r) << ',' << r.training.micro_batch_size << ','
        << models::to_string(r.training.recompute_granularity) << ',' << (p.use_distributed_optimizer ? "true" : "false")
        << ',' << p.zero_stage << ',' << fmt("%.9g", r.iteration_time_s) << ',' << fmt("%.9g", r.tokens_per_s) << ','
        << fmt("%.6g", r.mfu) << ',' << r.peak_bytes_per_gpu << ','
        << (r.time_to_train_days ? fmt("%.6g", *r.time_to_train_days) : "") << ','
        << (r.gpu_hours ? fmt("%.6g", *r.gpu_hours) : "") << ',' << (r.cost ? fmt("%.6g", *r.cost) : "") << ','
        << (p.account_for_embedding_in_pipeline_split ? "true" : "false") << ','
        << (p.account_for_loss_in_pipeline_split ? "true" : "false") << ','
        << (p.decoder_first_pipeline_num_layers ? std::to_string(*p.decoder_first_pipeline_num_layers) : "") << ','
        << (p.decoder_last_pipeline_num_layers ? std::to_string(*p.decoder_last_pipeline_num_layers) : "") << ','
        << fmt("%.6g", r.pipeline_bubble_s) << ',' << fmt("%.6g", r.exposed_communication_s) << ','
        << r.training.cpu_offload_layers << ',' << models::to_string(p.cp_comm_type) << ',';
    // "A B" (a2a+p2p's all-to-all group and ring sizes), else empty.
    if (!p.hierarchical_context_parallel_sizes.empty()) {
      out << p.hierarchical_context_parallel_sizes[0] << ' ' << p.hierarchical_context_parallel_sizes[1];
    }
    out << ',' << p.pipeline_model_parallel_layout;  // the planner's layouts hold no comma
    out << ',';  // the expert tensor-parallel size where set (empty: the experts follow TP)
    if (p.expert_tensor_parallel_size > 0) out << p.expert_tensor_parallel_size;
    out << ',';  // the token dispatcher of plans with EP > 1
    if (p.expert_model_parallel_size > 1) out << models::to_string(r.training.moe_token_dispatcher_type);
    out << ',' << (r.goodput ? fmt("%.6g", *r.goodput) : "") << ','
        << (r.checkpoint_interval_iterations ? std::to_string(*r.checkpoint_interval_iterations) : "") << ','
        << (r.expected_time_to_train_days ? fmt("%.6g", *r.expected_time_to_train_days) : "") << ','
        << (r.expected_gpu_hours ? fmt("%.6g", *r.expected_gpu_hours) : "") << ','
        << (r.spare_nodes ? std::to_string(*r.spare_nodes) : "");
    for (const auto& [kind, v] : r.exposed_by_kind) out << ',' << fmt("%.6g", v);
    out << "\n";
  }
}

}  // namespace

void write_plan_csv(const PlanReport& report, std::ostream& out) {
  write_csv_header(report, false, out);
  write_csv_rows(report, "", out);
}

namespace {

// One plan as the JSON of `plans` gives it (DESIGN's field names).
Json plan_object(const PlanRequest& request, const PlanResult& r) {
  const models::ParallelSpec& p = r.parallel;
  Json plan;
  plan["gpus"] = r.gpus;
  plan["parallelism"] = Json{{"tensor_model_parallel_size", p.tensor_model_parallel_size},
                             {"pipeline_model_parallel_size", p.pipeline_model_parallel_size},
                             {"virtual_pipeline_model_parallel_size", p.virtual_pipeline_model_parallel_size},
                             {"context_parallel_size", p.context_parallel_size},
                             {"expert_model_parallel_size", p.expert_model_parallel_size},
                             {"data_parallel_size", dp_of(r)},
                             {"sequence_parallel", p.sequence_parallel},
                             {"use_distributed_optimizer", p.use_distributed_optimizer},
                             {"zero_stage", p.zero_stage}};
  if (request.model.is_moe()) plan["parallelism"]["expert_tensor_parallel_size"] = p.etp();
  if (p.context_parallel_size > 1) plan["parallelism"]["cp_comm_type"] = models::to_string(p.cp_comm_type);
  if (!p.hierarchical_context_parallel_sizes.empty()) {
    plan["parallelism"]["hierarchical_context_parallel_sizes"] = p.hierarchical_context_parallel_sizes;
  }
  if (p.account_for_embedding_in_pipeline_split) plan["parallelism"]["account_for_embedding_in_pipeline_split"] = true;
  if (p.account_for_loss_in_pipeline_split) plan["parallelism"]["account_for_loss_in_pipeline_split"] = true;
  if (p.decoder_first_pipeline_num_layers) plan["parallelism"]["decoder_first_pipeline_num_layers"] = *p.decoder_first_pipeline_num_layers;
  if (p.decoder_last_pipeline_num_layers) plan["parallelism"]["decoder_last_pipeline_num_layers"] = *p.decoder_last_pipeline_num_layers;
  if (!p.pipeline_model_parallel_layout.empty()) plan["parallelism"]["pipeline_model_parallel_layout"] = p.pipeline_model_parallel_layout;
  plan["training"] = Json{{"micro_batch_size", r.training.micro_batch_size},
                          {"global_batch_size", r.training.global_batch_size},
                          {"recompute_granularity", models::to_string(r.training.recompute_granularity)},
                          {"pipeline_schedule", models::to_string(r.training.pipeline_schedule)},
                          {"precision", models::to_string(r.training.precision)}};
  if (r.training.precision == models::Precision::kFp8) {
    plan["training"]["fp8_recipe"] = models::to_string(r.training.quant_recipe);
    plan["training"]["fp8_param_gather"] = r.training.fp8_param_gather;
  } else if (r.training.precision == models::Precision::kFp4) {
    plan["training"]["fp4_recipe"] = models::to_string(r.training.quant_recipe);
    plan["training"]["fp4_param_gather"] = r.training.fp8_param_gather;
  }
  if (request.model.is_moe()) {
    plan["training"]["moe_token_dispatcher_type"] = models::to_string(r.training.moe_token_dispatcher_type);
  }
  if (r.training.overlap_moe_expert_parallel_comm) {
    plan["training"]["overlap_moe_expert_parallel_comm"] = true;
    plan["training"]["delay_wgrad_compute"] = r.training.delay_wgrad_compute;
  }
  if (r.training.moe_shared_expert_overlap) plan["training"]["moe_shared_expert_overlap"] = true;
  if (r.training.overlap_param_gather_with_optimizer_step) plan["training"]["overlap_param_gather_with_optimizer_step"] = true;
  if (r.training.cpu_offload_layers > 0) {
    plan["training"]["cpu_offloading"] = true;
    plan["training"]["cpu_offloading_num_layers"] = r.training.cpu_offload_layers;
    if (r.training.cpu_offload_v1) plan["training"]["cpu_offloading_v1"] = true;  // the recipe's scheduler
  }
  plan["iteration_time_s"] = tidy(r.iteration_time_s);
  plan["tokens_per_s"] = tidy(r.tokens_per_s);
  plan["mfu"] = tidy(r.mfu);
  plan["peak_bytes_per_gpu"] = r.peak_bytes_per_gpu;
  plan["pipeline_bubble_s"] = tidy(r.pipeline_bubble_s);
  plan["exposed_communication_s"] = tidy(r.exposed_communication_s);
  Json exposed = Json::object();
  for (const auto& [kind, v] : r.exposed_by_kind) exposed[kind] = tidy(v);
  plan["exposed_communication_by_kind_s"] = exposed;
  if (r.time_to_train_days) plan["time_to_train_days"] = tidy(*r.time_to_train_days);
  if (r.gpu_hours) plan["gpu_hours"] = tidy(*r.gpu_hours);
  if (r.goodput) plan["goodput"] = tidy(*r.goodput);
  if (r.checkpoint_interval_iterations) plan["checkpoint_interval_iterations"] = *r.checkpoint_interval_iterations;
  if (r.expected_time_to_train_days) plan["expected_time_to_train_days"] = tidy(*r.expected_time_to_train_days);
  if (r.expected_gpu_hours) plan["expected_gpu_hours"] = tidy(*r.expected_gpu_hours);
  if (r.spare_nodes) plan["spare_nodes"] = *r.spare_nodes;
  if (r.no_spare_probability) plan["no_spare_probability"] = tidy(*r.no_spare_probability);
  if (r.repair_wait_s && std::isfinite(*r.repair_wait_s)) plan["repair_wait_s"] = tidy(*r.repair_wait_s);
  if (r.cost) plan["cost"] = tidy(*r.cost);
  plan["extrapolated"] = r.extrapolated;
  return plan;
}

}  // namespace

nlohmann::ordered_json plan_json(const PlanRequest& request, const PlanReport& report, std::size_t top) {
  Json j;
  Json plans = Json::array();
  const std::size_t n = std::min(top, report.plans.size());
  for (std::size_t i = 0; i < n; ++i) {
    plans.push_back(plan_object(request, report.plans[i]));
  }
  j["plans"] = plans;
  j["considered"] = report.considered;
  j["pruned"] = report.pruned_total();
  j["simulated"] = report.simulated;
  j["feasible"] = report.plans.size();
  j["memory_headroom_bytes"] = request.memory_headroom_bytes;
  if (request.sm_contention) j["sm_contention"] = true;
  Json reasons = Json::object();
  for (const auto& [reason, count] : report.pruned) reasons[reason] = count;
  j["pruned_reasons"] = reasons;
  if (report.plans.empty() && !report.first_invalid.empty()) j["first_invalid"] = report.first_invalid;
  Json curve = Json::array();
  for (const GpuCountResult& g : report.per_gpu_count) {
    Json point{{"gpus", g.gpus}, {"feasible", g.feasible}};
    if (g.best) {
      point["iteration_time_s"] = tidy(g.best->iteration_time_s);
      if (g.best->time_to_train_days) point["time_to_train_days"] = tidy(*g.best->time_to_train_days);
      if (g.best->gpu_hours) point["gpu_hours"] = tidy(*g.best->gpu_hours);
      if (g.best->goodput) point["goodput"] = tidy(*g.best->goodput);
      if (g.best->expected_time_to_train_days) point["expected_time_to_train_days"] = tidy(*g.best->expected_time_to_train_days);
    }
    curve.push_back(point);
  }
  j["per_gpu_count"] = curve;
  if (request.deadline_days) {
    j["deadline_days"] = *request.deadline_days;
    j["deadline_gpus"] = report.deadline_gpus ? Json(*report.deadline_gpus) : Json(nullptr);
  }
  return j;
}

namespace {

// One curve of a time-to-train plot: a cluster's best plan per GPU count.
struct Curve {
  std::string label;  // the legend's (empty: one curve, no legend)
  const char* color = "#2e6fba";
  std::vector<std::pair<double, double>> points, fault_free;  // (GPUs, days)
  std::optional<std::int64_t> chosen;                         // the deadline's GPU count
};

Curve curve_of(const PlanReport& report) {
  // With reliability the curve is the time with interruptions (what the deadline is held
  // against), and the fault-free time is drawn dashed beside it.
  Curve c;
  for (const GpuCountResult& g : report.per_gpu_count) {
    if (g.best && g.best->deadline_days()) c.points.emplace_back(static_cast<double>(g.gpus), *g.best->deadline_days());
    if (g.best && g.best->expected_time_to_train_days && g.best->time_to_train_days) {
      c.fault_free.emplace_back(static_cast<double>(g.gpus), *g.best->time_to_train_days);
    }
  }
  c.chosen = report.deadline_gpus;
  return c;
}

// Time to train (days, log scale) against GPUs (log scale), a curve per cluster, with the
// deadline as a line.
void write_curves_svg(const std::string& title, const std::optional<double>& deadline, const std::vector<Curve>& curves,
                      std::ostream& out) {
  bool any_points = false, any_fault_free = false;
  double x0 = 1, x1 = 2, y0 = 1, y1 = 2;
  for (const Curve& c : curves) {
    if (c.points.empty()) continue;
    if (!any_points) {
      x0 = x1 = c.points.front().first;
      y0 = y1 = c.points.front().second;
      any_points = true;
    }
    for (const auto& [x, y] : c.fault_free) y0 = std::min(y0, y);
    for (const auto& [x, y] : c.points) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  for (const Curve& c : curves) any_fault_free = any_fault_free || !c.fault_free.empty();
  if (deadline) {
    y0 = std::min(y0, *deadline);
    y1 = std::max(y1, *deadline);
  }
  const double w = 720, h = 420, left = 80, right = 30, top = 50, bottom = 60;
  const double lx0 = std::log10(x0) - 0.05, lx1 = std::log10(std::max(x1, x0 * 1.01)) + 0.05;
  const double ly0 = std::log10(y0) - 0.1, ly1 = std::log10(std::max(y1, y0 * 1.01)) + 0.1;
  auto X = [&](double x) { return left + (std::log10(x) - lx0) / (lx1 - lx0) * (w - left - right); };
  auto Y = [&](double y) { return h - bottom - (std::log10(y) - ly0) / (ly1 - ly0) * (h - top - bottom); };
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" viewBox=\"0 0 " << w << " "
      << h << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out << "<text x=\"" << w / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << title << "</text>\n";
  out << "<line x1=\"" << left << "\" y1=\"" << h - bottom << "\" x2=\"" << w - right << "\" y2=\"" << h - bottom
      << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << h - bottom
      << "\" stroke=\"black\"/>\n";
  // The GPU counts labelled, each once, increasing, leaving out those too close to the last
  // labelled (a deadline search probes neighbouring counts; several curves probe different ones),
  // except a count a deadline chose, which takes the place of a crowding neighbour.
  std::set<double> counts, answers;
  for (const Curve& c : curves) {
    for (const auto& [x, y] : c.points) counts.insert(x);
    if (c.chosen) answers.insert(static_cast<double>(*c.chosen));
  }
  std::vector<double> ticks;
  for (double x : counts) {
    if (ticks.empty() || X(x) - X(ticks.back()) >= 40) {
      ticks.push_back(x);
    } else if (answers.count(x) && !answers.count(ticks.back())) {
      ticks.back() = x;
    }
  }
  for (double x : ticks) {
    out << "<text x=\"" << fmt("%.1f", X(x)) << "\" y=\"" << h - bottom + 18 << "\" text-anchor=\"middle\">"
        << fmt("%.0f", x) << "</text>\n";
  }
  for (double e = std::floor(ly0); e <= std::ceil(ly1); e += 1) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, e);
      if (std::log10(v) < ly0 || std::log10(v) > ly1) continue;
      out << "<line x1=\"" << left - 4 << "\" y1=\"" << fmt("%.1f", Y(v)) << "\" x2=\"" << w - right << "\" y2=\""
          << fmt("%.1f", Y(v)) << "\" stroke=\"#eee\"/><text x=\"" << left - 8 << "\" y=\"" << fmt("%.1f", Y(v) + 4)
          << "\" text-anchor=\"end\">" << fmt("%g", v) << "</text>\n";
    }
  }
  out << "<text x=\"" << w / 2 << "\" y=\"" << h - 16 << "\" text-anchor=\"middle\">GPUs</text>\n";
  out << "<text x=\"18\" y=\"" << h / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " << h / 2
      << ")\">days (best plan" << (any_fault_free ? ", with interruptions" : "") << ")</text>\n";
  if (deadline) {
    out << "<line class=\"deadline\" x1=\"" << left << "\" y1=\"" << fmt("%.1f", Y(*deadline)) << "\" x2=\"" << w - right
        << "\" y2=\"" << fmt("%.1f", Y(*deadline)) << "\" stroke=\"#c0392b\" stroke-dasharray=\"6 4\"/>\n";
    out << "<text x=\"" << w - right << "\" y=\"" << fmt("%.1f", Y(*deadline) - 6)
        << "\" text-anchor=\"end\" fill=\"#c0392b\">deadline " << fmt("%g days", *deadline) << "</text>\n";
  }
  const bool legend = curves.size() > 1;
  for (const Curve& c : curves) {
    if (c.fault_free.empty()) continue;
    // One curve: grey, labelled; several: each in its curve's colour, the legend saying so.
    out << "<polyline class=\"fault-free\" fill=\"none\" stroke=\"" << (legend ? c.color : "#999")
        << "\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\" points=\"";
    for (const auto& [x, y] : c.fault_free) out << fmt("%.1f", X(x)) << "," << fmt("%.1f", Y(y)) << " ";
    out << "\"/>\n";
    if (legend) continue;
    const auto& [fx, fy] = c.fault_free.back();
    out << "<text x=\"" << fmt("%.1f", X(fx)) << "\" y=\"" << fmt("%.1f", Y(fy) + 16) << "\" text-anchor=\"end\" fill=\"#777\">"
        << "without interruptions</text>\n";
  }
  for (const Curve& c : curves) {
    if (c.points.empty()) continue;
    out << "<polyline class=\"curve\" fill=\"none\" stroke=\"" << c.color << "\" stroke-width=\"2\" points=\"";
    for (const auto& [x, y] : c.points) out << fmt("%.1f", X(x)) << "," << fmt("%.1f", Y(y)) << " ";
    out << "\"/>\n";
    for (const auto& [x, y] : c.points) {
      const bool chosen = c.chosen && static_cast<double>(*c.chosen) == x;
      out << "<circle cx=\"" << fmt("%.1f", X(x)) << "\" cy=\"" << fmt("%.1f", Y(y)) << "\" r=\"" << (chosen ? 6 : 4)
          << "\" fill=\"" << (chosen ? "#c0392b" : c.color) << "\"><title>" << (legend ? c.label + ", " : std::string())
          << fmt("%.0f GPUs", x) << fmt(": %.2f days", y) << "</title></circle>\n";
    }
  }
  if (legend) {
    double y = top + 14;
    for (const Curve& c : curves) {
      out << "<g class=\"legend\"><line x1=\"" << w - right - 250 << "\" y1=\"" << fmt("%.1f", y - 4) << "\" x2=\""
          << w - right - 228 << "\" y2=\"" << fmt("%.1f", y - 4) << "\" stroke=\"" << c.color
          << "\" stroke-width=\"2\"/><text x=\"" << w - right - 222 << "\" y=\"" << fmt("%.1f", y) << "\">" << c.label
          << (c.points.empty() ? " (no feasible plan)" : "") << "</text></g>\n";
      y += 16;
    }
    if (any_fault_free) {
      out << "<text x=\"" << w - right - 250 << "\" y=\"" << fmt("%.1f", y) << "\" fill=\"#777\">dashed: without interruptions</text>\n";
    }
  }
  out << "</svg>\n";
}

}  // namespace

void write_plan_curve_svg(const PlanRequest& request, const PlanReport& report, std::ostream& out) {
  const std::string title = "Time to train " + report::xml_escape(request.model.name) + fmt(" on %.3g tokens", request.training.train_tokens.value_or(0)) +
                            " (" + report::xml_escape(request.cluster.gpu.name) + ")";
  write_curves_svg(title, request.deadline_days, {curve_of(report)}, out);
}

const PlanResult* headline_plan(const PlanRequest& request, const PlanReport& report) {
  if (request.deadline_days && report.deadline_gpus) {
    for (const GpuCountResult& g : report.per_gpu_count) {
      if (g.gpus == *report.deadline_gpus && g.best) return &*g.best;
    }
  }
  return report.plans.empty() ? nullptr : &report.plans.front();
}

namespace {

bool meets_deadline(const ClusterSearch& c) { return c.request->deadline_days && c.report->deadline_gpus; }

}  // namespace

ComparisonOrder comparison_order(const std::vector<ClusterSearch>& searches) {
  ComparisonOrder o;
  std::vector<const PlanResult*> headline;
  bool priced = true, timed = true;
  for (const ClusterSearch& c : searches) {
    const PlanResult* r = headline.emplace_back(headline_plan(*c.request, *c.report));
    if (r == nullptr) continue;
    priced = priced && r->cost.has_value();
    timed = timed && r->deadline_days().has_value();
  }
  o.by = priced ? "cost" : timed ? "time_to_train_days" : "tokens_per_s";
  // A smaller key is better: the cost, the days, or the negated tokens per second.
  auto key = [&](const PlanResult& r) {
    if (priced) return *r.cost;
    if (timed) return *r.deadline_days();
    return -r.effective_tokens_per_s();
  };
  for (std::size_t i = 0; i < searches.size(); ++i) o.order.push_back(i);
  std::stable_sort(o.order.begin(), o.order.end(), [&](std::size_t a, std::size_t b) {
    const PlanResult *ra = headline[a], *rb = headline[b];
    if ((ra == nullptr) != (rb == nullptr)) return rb == nullptr;
    if (ra == nullptr) return false;
    if (meets_deadline(searches[a]) != meets_deadline(searches[b])) return meets_deadline(searches[a]);
    return key(*ra) < key(*rb);
  });
  return o;
}

std::string comparison_table(const std::vector<ClusterSearch>& searches) {
  const ComparisonOrder order = comparison_order(searches);
  const PlanRequest& first = *searches.front().request;
  const bool deadline = first.deadline_days.has_value(), train = first.training.train_tokens.has_value();
  bool priced = false, reliability = false;
  std::size_t width = 7;  // "cluster"
  for (const ClusterSearch& c : searches) {
    priced = priced || c.request->price_per_gpu_hour.has_value();
    reliability = reliability || c.request->training.reliability.has_value();
    width = std::max(width, c.label.size());
  }
  std::ostringstream o;
  o << "\nhardware compared: " << first.model.name << ", "
    << (deadline ? "the smallest GPU count of each cluster that trains in " + fmt("%g days", *first.deadline_days)
                 : std::string("the best plan of each cluster"))
    << "; "
    << (order.by == "cost" ? "cheapest first" : order.by == "time_to_train_days" ? "fastest to train first" : "most tokens/s first")
    << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "  rank  %-*s  %-18s  GPUs    iter_s   tokens/s    MFU", static_cast<int>(width), "cluster", "GPU");
  o << line;
  if (train) o << (reliability ? "  exp_days  exp_GPU-h" : "    days   GPU-hours");
  if (priced) o << "  price/GPU-h        cost";
  if (deadline) o << "  deadline";
  o << "  plan\n";
  for (std::size_t rank = 0; rank < order.order.size(); ++rank) {
    const ClusterSearch& c = searches[order.order[rank]];
    const PlanResult* r = headline_plan(*c.request, *c.report);
    std::snprintf(line, sizeof line, "  %4zu  %-*s  %-18s", rank + 1, static_cast<int>(width), c.label.c_str(),
                  c.request->cluster.gpu.name.c_str());
    o << line;
    if (r == nullptr) {
      o << "  no feasible plan\n";
      continue;
    }
    std::snprintf(line, sizeof line, " %5lld  %8.3f %10.0f %5.1f%%", static_cast<long long>(r->gpus), r->iteration_time_s,
                  r->tokens_per_s, 100 * r->mfu);
    o << line;
    if (train) {
      const std::optional<double> days = r->deadline_days();
      const std::optional<double> hours = r->goodput ? r->expected_gpu_hours : r->gpu_hours;
      if (reliability) {  // the widths of the exp_days and exp_GPU-h columns
        o << (days ? fmt(" %9.1f", *days) : std::string("     never")) << (hours ? fmt(" %10.4g", *hours) : std::string(11, ' '));
      } else {
        o << fmt(" %7.1f", days.value_or(0)) << fmt(" %11.4g", hours.value_or(0));
      }
    }
    if (priced) {
      o << (c.request->price_per_gpu_hour ? fmt(" %12.4g", *c.request->price_per_gpu_hour) : std::string(13, ' '))
        << (r->cost ? fmt(" %11.4g", *r->cost) : std::string(12, ' '));
    }
    if (deadline) o << (meets_deadline(c) ? "  met     " : "  missed  ");
    o << "  " << describe_plan(*r) << "\n";
  }
  bool missed = false;
  for (const ClusterSearch& c : searches) missed = missed || (deadline && !meets_deadline(c) && !c.report->plans.empty());
  if (missed) o << "  missed: no GPU count in the range trains in time; the row gives the best plan found\n";
  if (reliability && train) o << "  exp_days, exp_GPU-h: with the interruptions\n";
  return o.str();
}

nlohmann::ordered_json comparison_json(const std::vector<ClusterSearch>& searches, std::size_t top) {
  Json clusters = Json::array();
  for (const ClusterSearch& c : searches) {
    Json one;
    one["cluster"] = c.label;
    one["cluster_name"] = c.request->cluster.name;
    one["gpu"] = c.request->cluster.gpu.name;
    one["price_per_gpu_hour"] = c.request->price_per_gpu_hour ? Json(*c.request->price_per_gpu_hour) : Json(nullptr);
    const Json search = plan_json(*c.request, *c.report, top);
    for (auto it = search.begin(); it != search.end(); ++it) one[it.key()] = it.value();
    clusters.push_back(one);
  }
  const ComparisonOrder order = comparison_order(searches);
  Json ranking = Json::array();
  for (std::size_t i : order.order) {
    const ClusterSearch& c = searches[i];
    const PlanResult* r = headline_plan(*c.request, *c.report);
    Json row{{"cluster", c.label}, {"gpu", c.request->cluster.gpu.name}};
    if (c.request->deadline_days) row["meets_deadline"] = meets_deadline(c);
    row["plan"] = r == nullptr ? Json(nullptr) : plan_object(*c.request, *r);
    ranking.push_back(row);
  }
  Json j;
  j["clusters"] = clusters;
  j["comparison"] = Json{{"by", order.by}, {"ranking", ranking}};
  return j;
}

void write_comparison_csv(const std::vector<ClusterSearch>& searches, std::ostream& out) {
  const PlanReport* with_plans = searches.front().report;
  for (const ClusterSearch& c : searches) {
    if (!c.report->plans.empty()) {
      with_plans = c.report;
      break;
    }
  }
  write_csv_header(*with_plans, true, out);
  for (const ClusterSearch& c : searches) write_csv_rows(*c.report, c.label, out);
}

void write_comparison_curve_svg(const std::vector<ClusterSearch>& searches, std::ostream& out) {
  static const char* const kColors[] = {"#2e6fba", "#e67e22", "#27ae60", "#8e44ad", "#16a085", "#7f8c8d", "#d35400", "#2c3e50"};
  const PlanRequest& first = *searches.front().request;
  std::vector<Curve> curves;
  for (std::size_t i = 0; i < searches.size(); ++i) {
    Curve c = curve_of(*searches[i].report);
    c.label = report::xml_escape(searches[i].label + " (" + searches[i].request->cluster.gpu.name + ")");
    c.color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    curves.push_back(std::move(c));
  }
  const std::string title =
      "Time to train " + report::xml_escape(first.model.name) + fmt(" on %.3g tokens", first.training.train_tokens.value_or(0));
  write_curves_svg(title, first.deadline_days, curves, out);
}

}  // namespace trainsim::planner
