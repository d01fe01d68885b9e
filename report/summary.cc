#include "report/summary.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "models/graph_vocabulary.h"
#include "report/reliability.h"
#include "report/sensitivity.h"
#include "report/text_format.h"
#include "topologies/compute_model.h"

namespace trainsim::report {

namespace {

using Json = nlohmann::ordered_json;

// Rounds to 12 significant digits so the JSON is stable and readable.
double tidy(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return std::strtod(buf, nullptr);
}

// "hopper" -> "Hopper": an architecture name in a sentence.
std::string capitalized(std::string name) {
  if (!name.empty()) name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return name;
}

Json breakdown_json(const TimeBreakdown& b) {
  Json j;
  j["compute_s"] = tidy(b.compute_s);
  j["recompute_s"] = tidy(b.recompute_s);
  j["optimizer_s"] = tidy(b.optimizer_s);
  j["exposed_communication_s"] = tidy(b.exposed_communication_s);
  j["pipeline_bubble_s"] = tidy(b.pipeline_bubble_s);
  j["synchronization_wait_s"] = tidy(b.synchronization_wait_s);
  j["host_launch_s"] = tidy(b.host_launch_s);
  if (b.sm_contention_s) j["sm_contention_s"] = tidy(*b.sm_contention_s);
  j["idle_s"] = tidy(b.idle_s);
  Json exposed = Json::object(), total = Json::object();
  for (const auto& [k, v] : b.exposed_by_kind) exposed[k] = tidy(v);
  for (const auto& [k, v] : b.communication_by_kind) total[k] = tidy(v);
  j["exposed_communication_by_kind_s"] = exposed;
  j["communication_time_by_kind_s"] = total;
  Json kernels = Json::object();
  for (const auto& [k, v] : b.compute_by_kernel) kernels[k] = tidy(v);
  j["compute_by_kernel_s"] = kernels;
  return j;
}

// JSON key of a what-if speed: "half_speed", "double_speed", "free" (else "speed_x<f>").
std::string speed_label(double speed) {
  if (std::isinf(speed)) return "free";
  if (speed == 0.5) return "half_speed";
  if (speed == 2) return "double_speed";
  char buf[32];
  std::snprintf(buf, sizeof buf, "speed_x%g", speed);
  return buf;
}

// The what-if tables' pieces (sensitivity_text): `s` right-aligned in `width` columns; a speed's
// column heading; a variant's iteration time and its change from the modelled `base_s`; a hide or
// tolerated speed, `none` when outside the searched range.
std::string right(const std::string& s, std::size_t width) { return std::string(width - std::min(s.size(), width - 1), ' ') + s; }
std::string speed_heading(double speed) {
  if (std::isinf(speed)) return "free";
  if (speed == 0.5) return "half speed";
  if (speed == 2) return "twice as fast";
  return fmt("%gx as fast", speed);
}
std::string variant_cell(const SpeedVariant& v, double base_s) {
  const double change = base_s > 0 ? 100 * (v.iteration_time_s / base_s - 1) : 0;
  return fmt("%11.3f s", v.iteration_time_s) + fmt(" (%+5.1f%%)", change);
}
std::string edge_text(const std::optional<double>& s, const std::string& none) {
  return s ? (*s == 1 ? std::string("1x (now)") : fmt("%.3gx", *s)) : none;
}
// A hide or tolerated speed in the JSON (null outside the searched range).
nlohmann::ordered_json edge_json(const std::optional<double>& s) { return s ? nlohmann::ordered_json(tidy(*s)) : nlohmann::ordered_json(nullptr); }

std::string human_bytes(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  return buf;
}

// "350 MB", "2.56 GB", "5.68 TB": decimal units, as storage bandwidth is quoted.
std::string storage_bytes(double b) {
  if (b >= 1e12) return fmt("%.3g TB", b * 1e-12);
  if (b >= 1e9) return fmt("%.3g GB", b * 1e-9);
  return fmt("%.3g MB", b * 1e-6);
}

// "42 s", "9.8 min", "3.09 h": a duration in the unit that reads best.
std::string duration_text(double seconds) {
  if (seconds < 60) return fmt("%.3g s", seconds);
  if (seconds < 3600) return fmt("%.3g min", seconds / 60);
  return fmt("%.3g h", seconds / 3600);
}

Json reliability_json(const ReliabilityEstimate& e, double iteration_s) {
  Json j;
  j["job_mtbf_hours"] = tidy(e.job_mtbf_hours);
  j["checkpoint_bytes"] = tidy(e.checkpoint.total_bytes);
  j["checkpoint_bytes_per_gpu"] = tidy(e.checkpoint.per_gpu_bytes);
  j["checkpoint_copy_s"] = tidy(e.checkpoint_copy_s);
  j["checkpoint_write_s"] = tidy(e.checkpoint_write_s);
  j["checkpoint_blocking_s"] = tidy(e.checkpoint_blocking_s);
  j["checkpoint_interval_iterations"] = e.checkpoint_interval_iterations;
  j["checkpoint_interval_s"] = tidy(static_cast<double>(e.checkpoint_interval_iterations) * iteration_s);
  j["interval_optimal"] = e.interval_optimal;
  j["restart_s"] = tidy(e.restart_s);
  if (e.spare_nodes) {
    j["spare_nodes"] = *e.spare_nodes;
    j["spare_nodes_cheapest"] = e.spares_cheapest;
    j["spare_gpus"] = e.spare_gpus;
    j["node_repair_share"] = tidy(e.node_repair_share);
    j["idle_failure_share"] = tidy(e.idle_failure_share);
    j["no_spare_probability"] = tidy(e.no_spare_probability);
    if (std::isfinite(e.repair_wait_s)) j["repair_wait_s"] = tidy(e.repair_wait_s);  // else a wait without end
  }
  j["goodput"] = tidy(e.goodput);
  if (e.expected_time_to_train_days) j["expected_time_to_train_days"] = tidy(*e.expected_time_to_train_days);
  if (e.expected_gpu_hours) j["expected_gpu_hours"] = tidy(*e.expected_gpu_hours);
  if (e.expected_interruptions) j["expected_interruptions"] = tidy(*e.expected_interruptions);
  return j;
}

void reliability_text(std::ostream& o, const ReliabilityEstimate& e, double iteration_s, std::int64_t gpus) {
  const double interval = static_cast<double>(e.checkpoint_interval_iterations) * iteration_s;
  o << "  with interruptions    " << fmt("goodput %.1f%%", 100 * e.goodput) << ": the job stops every "
    << duration_text(e.job_mtbf_hours * 3600) << " on " << gpus << " GPUs, restarts in " << duration_text(e.restart_s) << "\n"
    << "                        checkpoint " << storage_bytes(e.checkpoint.total_bytes) << " ("
    << storage_bytes(e.checkpoint.per_gpu_bytes) << " per GPU) every " << e.checkpoint_interval_iterations
    << (e.checkpoint_interval_iterations == 1 ? " iteration (" : " iterations (") << duration_text(interval)
    << (e.interval_optimal ? ", the best interval" : "") << "), training stops " << duration_text(e.checkpoint_blocking_s)
    << " per save\n";
  if (e.spare_nodes) {
    o << "                        " << *e.spare_nodes << (*e.spare_nodes == 1 ? " spare node" : " spare nodes") << " ("
      << e.spare_gpus << (e.spares_cheapest ? " GPUs, the cheapest count): " : " GPUs): ") << fmt("%.3g%%", 100 * e.no_spare_probability)
      << (e.node_repair_share < 1 ? fmt(" of the %.3g%% of interruptions that take a node out", 100 * e.node_repair_share)
                                  : std::string(" of interruptions"))
      << " find none ready, adding "
      << (std::isfinite(e.repair_wait_s) ? duration_text(e.repair_wait_s) + " per interruption on average\n"
                                         : std::string("a wait without end (failures outpace the repairs)\n"));
  }
  if (e.goodput <= 0) {
    o << "  expected time         never: "
      << (std::isfinite(e.repair_wait_s) ? "interruptions come faster than the job saves and restarts\n"
                                         : "the job waits for repairs without end\n");
  } else if (e.expected_time_to_train_days) {
    o << "  expected time         " << fmt("%.1f days", *e.expected_time_to_train_days) << " ("
      << fmt("%.3g GPU-hours", e.expected_gpu_hours.value_or(0)) << ", "
      << fmt("%.0f interruptions", e.expected_interruptions.value_or(0)) << ")\n";
  }
}

}  // namespace

nlohmann::ordered_json summary_json(const RunResult& r, bool include_wall_time) {
  const config::Scenario& s = r.scenario;
  const models::Workload& w = *r.workload;
  Json j;
  j["name"] = s.name;
  j["iteration_time_s"] = tidy(r.iteration_time_s);
  j["tokens_per_s"] = tidy(r.tokens_per_s);
  j["model_flops_per_iteration"] = tidy(w.flops.model);
  j["hardware_flops_per_iteration"] = tidy(w.flops.hardware);
  j["model_tflops_per_gpu"] = tidy(r.model_tflops_per_gpu);
  j["hardware_tflops_per_gpu"] = tidy(r.hardware_tflops_per_gpu);
  j["mfu"] = tidy(r.mfu);
  j["hfu"] = tidy(r.hfu);
  j["peak_tflops_per_gpu"] = tidy(r.peak_flops_per_gpu * 1e-12);
  j["slowest_gpu_slowdown"] = tidy(topo::slowest_gpu_slowdown(s.cluster.gpu, s.num_gpus()));
  if (const auto& a = s.cluster.gpu.calibration.accuracy) {
    j["calibration_accuracy"] = Json{{"architecture", a->architecture},
                                     {"cases", a->cases},
                                     {"mape", tidy(a->mape)},
                                     {"max_abs_error", tidy(a->max_abs_error)}};
    if (a->held_out_mape) j["calibration_accuracy"]["held_out_mape"] = tidy(*a->held_out_mape);
  }
  for (const topo::ComputeCalibration::Check& k : s.cluster.gpu.calibration.checks) {
    if (k.architecture != topo::to_string(s.cluster.gpu.architecture)) continue;
    j["calibration_accuracy"]["checks"].push_back(Json{{"suite", k.suite},
                                                       {"architecture", k.architecture},
                                                       {"cases", k.cases},
                                                       {"mape", tidy(k.mape)},
                                                       {"max_abs_error", tidy(k.max_abs_error)},
                                                       {"mean_time_error", tidy(k.mean_time_error)}});
  }
  j["num_gpus"] = s.num_gpus();
  j["data_parallel_size"] = w.data_parallel_size;
  j["parallelism"] = Json{{"tensor_model_parallel_size", s.parallel.tensor_model_parallel_size},
                          {"pipeline_model_parallel_size", s.parallel.pipeline_model_parallel_size},
                          {"virtual_pipeline_model_parallel_size", s.parallel.virtual_pipeline_model_parallel_size},
                          {"context_parallel_size", s.parallel.context_parallel_size},
                          {"expert_model_parallel_size", s.parallel.expert_model_parallel_size},
                          {"data_parallel_size", w.data_parallel_size},
                          {"sequence_parallel", s.parallel.sequence_parallel},
                          {"microbatches", w.microbatches}};
  if (!s.parallel.pipeline_model_parallel_layout.empty()) {
    j["parallelism"]["pipeline_model_parallel_layout"] = s.parallel.pipeline_model_parallel_layout;
  }
  if (s.parallel.account_for_embedding_in_pipeline_split) j["parallelism"]["account_for_embedding_in_pipeline_split"] = true;
  if (s.parallel.account_for_loss_in_pipeline_split) j["parallelism"]["account_for_loss_in_pipeline_split"] = true;
  if (s.parallel.context_parallel_size > 1) j["parallelism"]["cp_comm_type"] = models::to_string(s.parallel.cp_comm_type);
  if (!s.parallel.hierarchical_context_parallel_sizes.empty()) {
    j["parallelism"]["hierarchical_context_parallel_sizes"] = s.parallel.hierarchical_context_parallel_sizes;
  }
  if (s.parallel.num_distributed_optimizer_instances > 1) {
    j["parallelism"]["num_distributed_optimizer_instances"] = s.parallel.num_distributed_optimizer_instances;
  }
  j["tokens_per_iteration"] = w.tokens_per_iteration;
  j["parameters"] = s.model.total_parameters(s.parallel.tensor_model_parallel_size);
  if (s.model.mtp_num_layers > 0) j["mtp_parameters"] = s.model.mtp_parameters();

  Json mem;
  mem["peak_bytes_per_gpu"] = r.peak_bytes_per_gpu;
  mem["capacity_bytes_per_gpu"] = r.capacity_bytes_per_gpu;
  mem["fits"] = r.fits;
  if (r.host_offload_bytes_per_gpu > 0) mem["host_offload_bytes_per_gpu"] = r.host_offload_bytes_per_gpu;
  Json stages = Json::array();
  for (const StageReport& st : r.stages) {
    stages.push_back(Json{{"stage", st.stage},
                          {"rank", st.rank},
                          {"layers", st.layers},
                          {"parameters_per_gpu", st.parameters},
                          {"weights_bytes", st.static_memory.weights},
                          {"gradients_bytes", st.static_memory.gradients},
                          {"wgrad_placeholder_bytes", st.static_memory.wgrad_placeholders},
                          {"optimizer_states_bytes", st.static_memory.optimizer_states},
                          {"activations_peak_bytes", st.activation_peak_bytes},
                          {"peak_bytes", st.peak_bytes},
                          {"peak_time_s", tidy(st.peak_time_s)},
                          {"fits", st.peak_bytes <= r.capacity_bytes_per_gpu}});
  }
  mem["stages"] = stages;
  j["memory"] = mem;

  Json br = breakdown_json(r.breakdown);
  br["critical_rank"] = r.critical_rank;
  j["breakdown"] = br;
  Json per_stage = Json::array();
  for (const StageReport& st : r.stages) {
    Json b = breakdown_json(st.breakdown);
    b["stage"] = st.stage;
    b["finish_s"] = tidy(st.finish_s);
    per_stage.push_back(b);
  }
  j["stage_breakdown"] = per_stage;
  if (r.bottleneck) {
    const Bottleneck& b = *r.bottleneck;
    Json bn{{"rank", b.rank},          {"tp", b.coord.tp},           {"cp", b.coord.cp},
            {"dp", b.coord.dp},        {"pp", b.coord.pp},           {"work_s", tidy(b.work_s)},
            {"median_work_s", tidy(b.median_work_s)}, {"excess_s", tidy(b.work_s - b.median_work_s)}};
    if (r.nominal_iteration_time_s) {
      bn["nominal_iteration_time_s"] = tidy(*r.nominal_iteration_time_s);
      bn["slowdown_vs_nominal"] = tidy(r.iteration_time_s / *r.nominal_iteration_time_s - 1);
    }
    j["bottleneck"] = bn;
  }
  if (const auto seconds_to_train = fault_free_train_seconds(r)) {
    const double seconds = *seconds_to_train;
    j["train_tokens"] = *s.training.train_tokens;
    j["time_to_train_days"] = tidy(seconds / 86400.0);
    j["gpu_hours"] = tidy(seconds / 3600.0 * static_cast<double>(s.num_gpus()));
  }
  if (const auto e = estimate_reliability(r)) j["reliability"] = reliability_json(*e, r.iteration_time_s);
  if (r.sensitivity) j["communication_sensitivity"] = sensitivity_json(r);
  if (r.nic_sensitivity) j["nic_sensitivity"] = nic_sensitivity_json(r);
  if (r.nvlink_sensitivity) j["nvlink_sensitivity"] = nvlink_sensitivity_json(r);
  Json sim;
  sim["fidelity"] = s.simulation.full ? "full" : "symmetric";
  sim["events"] = r.engine.events;
  sim["tasks_executed"] = r.engine.tasks_executed;
  sim["ranks_simulated"] = r.engine.ranks.size();
  if (include_wall_time) sim["wall_s"] = tidy(r.wall_s);
  j["simulator"] = sim;
  return j;
}

std::string summary_text(const RunResult& r, bool include_wall_time) {
  const config::Scenario& s = r.scenario;
  const models::Workload& w = *r.workload;
  std::ostringstream o;
  o << s.name << "\n";
  o << "  model      " << s.model.name << ": " << fmt("%.1f", static_cast<double>(s.model.total_parameters(s.parallel.tensor_model_parallel_size)) * 1e-9)
    << "B parameters, " << s.model.num_layers << " layers";
  if (s.model.mtp_num_layers > 0) {
    o << " + " << s.model.mtp_num_layers << " multi-token-prediction (" << fmt("%.1f", static_cast<double>(s.model.mtp_parameters()) * 1e-9)
      << "B)";
  }
  o << ", hidden " << s.model.hidden_size << ", seq " << s.model.seq_length;
  if (s.model.window_size > 0) {
    std::int64_t windowed = 0;
    for (std::int64_t l = 0; l < s.model.num_layers; ++l) windowed += s.model.window_of(l) > 0 ? 1 : 0;
    o << ", sliding window " << s.model.window_size;
    if (windowed < s.model.num_layers) o << " on " << windowed << " of the layers";
  }
  o << "\n";
  o << "  cluster    " << s.num_gpus() << " x " << s.cluster.gpu.name << " (" << s.cluster.num_nodes << (s.cluster.num_nodes == 1 ? " node of " : " nodes of ")
    << s.cluster.gpus_per_node << ", " << s.cluster.name << ")\n";
  o << "  plan       TP " << s.parallel.tensor_model_parallel_size << " PP " << s.parallel.pipeline_model_parallel_size;
  if (s.parallel.virtual_pipeline_model_parallel_size > 1) o << " (x" << s.parallel.virtual_pipeline_model_parallel_size << " virtual)";
  if (!s.parallel.pipeline_model_parallel_layout.empty()) o << " layout \"" << s.parallel.pipeline_model_parallel_layout << "\"";
  if (s.parallel.accounts_in_split()) o << " (" << s.parallel.counted_in_split() << " counted as layers)";
  if (s.parallel.context_parallel_size > 1) {
    o << " CP " << s.parallel.context_parallel_size;
    if (s.parallel.cp_comm_type != models::CpCommType::kP2p) o << " (" << models::cp_comm_label(s.parallel) << ")";
  }
  if (s.parallel.expert_model_parallel_size > 1) {
    o << " EP " << s.parallel.expert_model_parallel_size;
    if (s.training.moe_token_dispatcher_type == models::TokenDispatcher::kFlex) o << " (flex dispatcher)";
    if (s.training.overlap_moe_expert_parallel_comm) o << (s.training.delay_wgrad_compute ? " +A2A overlap (delayed wgrad)" : " +A2A overlap");
    if (s.training.moe_shared_expert_overlap) o << " +shared-expert overlap";
  }
  o << " DP " << w.data_parallel_size;
  if (s.parallel.num_distributed_optimizer_instances > 1) {
    o << " (" << s.parallel.num_distributed_optimizer_instances << " distributed-optimizer instances of "
      << s.parallel.shard_group_size(w.data_parallel_size * s.parallel.context_parallel_size) << ")";
  }
  o << (s.parallel.sequence_parallel ? " +SP" : "") << "; micro-batch "
    << s.training.micro_batch_size << " x " << w.microbatches << ", global batch " << s.training.global_batch_size << "; "
    << models::to_string(s.training.pipeline_schedule) << ", recompute " << models::to_string(s.training.recompute_granularity);
  // The modules of selective recomputation, where they are not Megatron's default (core_attn).
  if (const std::string modules = s.training.recompute_modules(); !modules.empty() && modules != "core_attn") o << " (" << modules << ")";
  if (s.training.cpu_offload_layers > 0) o << ", " << s.training.cpu_offload_layers << " of " << s.model.num_layers << " layers offloaded";
  o << ", " << models::to_string(s.training.precision);
  // The FP8 recipe, where it is not Megatron-Core's default (delayed scaling).
  if (s.training.quantized() && s.training.quant_recipe != models::QuantRecipe::kDelayed) {
    o << " (" << models::to_string(s.training.quant_recipe) << ")";
  }
  o << "\n\n";
  o << "  iteration time        " << fmt("%.3f s", r.iteration_time_s) << "\n";
  if (const auto& a = s.cluster.gpu.calibration.accuracy) {
    // The error this calibration made on the published runs it was fitted to.
    const std::string arch = capitalized(a->architecture);
    o << "  typical error         " << fmt("%.1f%%", 100 * a->mape) << " on the " << a->cases << " published " << arch
      << " runs the calibration was fitted to (largest " << fmt("%.0f%%", 100 * a->max_abs_error) << ")";
    if (a->held_out_mape) o << ", " << fmt("%.1f%%", 100 * *a->held_out_mape) << " on model families left out of the fit";
    if (a->architecture != topo::to_string(s.cluster.gpu.architecture)) o << "; none on this GPU's architecture yet";
    o << "\n";
  }
  for (const topo::ComputeCalibration::Check& k : s.cluster.gpu.calibration.checks) {
    // Runs of this GPU's architecture that no fit read, predicted when the calibration was written.
    if (k.architecture != topo::to_string(s.cluster.gpu.architecture)) continue;
    o << "  checked on            " << k.cases << " " << capitalized(k.architecture) << " runs in no fit (" << k.suite << "): " << fmt("%.1f%%", 100 * k.mape)
      << " (largest " << fmt("%.0f%%", 100 * k.max_abs_error) << "), predictions " << fmt("%.1f%%", 100 * std::abs(k.mean_time_error))
      << (k.mean_time_error < 0 ? " fast" : " slow") << " on average\n";
  }
  o << "  throughput            " << fmt("%.0f tokens/s", r.tokens_per_s) << " (" << fmt("%.0f", r.tokens_per_s / static_cast<double>(s.num_gpus()))
    << " per GPU)\n";
  o << "  model TFLOP/s/GPU     " << fmt("%.1f", r.model_tflops_per_gpu) << "   MFU " << fmt("%.1f%%", 100 * r.mfu) << "\n";
  o << "  hardware TFLOP/s/GPU  " << fmt("%.1f", r.hardware_tflops_per_gpu) << "   HFU " << fmt("%.1f%%", 100 * r.hfu) << "\n";
  if (const double slow = topo::slowest_gpu_slowdown(s.cluster.gpu, s.num_gpus()); slow > 0) {
    o << "  slowest GPU           sets the pace: tensor-core work " << fmt("%.1f%%", 100 * slow) << " slower than on the mean GPU ("
      << fmt("%.1f%%", 100 * s.cluster.gpu.calibration.speed_spread) << " spread over " << s.num_gpus() << " GPUs)\n";
  }
  o << "  memory peak/GPU       " << human_bytes(static_cast<double>(r.peak_bytes_per_gpu)) << " of "
    << human_bytes(static_cast<double>(r.capacity_bytes_per_gpu)) << (r.fits ? " (fits)" : " (DOES NOT FIT)") << "\n";
  if (r.host_offload_bytes_per_gpu > 0) {
    o << "  host memory/GPU       " << human_bytes(static_cast<double>(r.host_offload_bytes_per_gpu))
      << " of offloaded activations (cpu_offloading)\n";
  }
  if (const auto seconds_to_train = fault_free_train_seconds(r)) {
    const double seconds = *seconds_to_train;
    o << "  time to train         " << fmt("%.1f days", seconds / 86400) << " for " << fmt("%.3g tokens", *s.training.train_tokens)
      << " (" << fmt("%.3g GPU-hours", seconds / 3600 * static_cast<double>(s.num_gpus())) << ")\n";
  }
  if (const auto e = estimate_reliability(r)) reliability_text(o, *e, r.iteration_time_s, s.num_gpus());
  const TimeBreakdown& b = r.breakdown;
  auto row = [&](const char* label, double v) {
    o << "    " << label << fmt("%9.3f s", v) << fmt("  %5.1f%%", r.iteration_time_s > 0 ? 100 * v / r.iteration_time_s : 0) << "\n";
  };
  o << "\n  where the time goes (rank " << r.critical_rank << ", the last to finish)\n";
  row("compute               ", b.compute_s);
  row("recompute             ", b.recompute_s);
  row("optimizer             ", b.optimizer_s);
  if (!b.compute_by_kernel.empty()) {
    // The kernels behind the three rows above, by kind.
    o << "      kernels:";
    const char* sep = " ";
    for (std::size_t i = 0; i < b.compute_by_kernel.size() && i < std::size(kKernelKinds); ++i) {
      if (b.compute_by_kernel[i].second <= 0) continue;
      o << sep << kernel_kind_label(kKernelKinds[i], {s.training.precision}) << fmt(" %.3f s", b.compute_by_kernel[i].second);
      sep = ", ";
    }
    o << "\n";
  }
  if (b.sm_contention_s) {
    // The kernels above are priced alone; beside communication they ran this much longer.
    o << "      + " << fmt("%.3f s", *b.sm_contention_s) << " of GEMM and attention slowed by the SMs communication kernels held\n";
  }
  row("pipeline bubble       ", b.pipeline_bubble_s);
  row("exposed communication ", b.exposed_communication_s);
  for (const auto& [k, v] : b.exposed_by_kind) {
    if (v > 0) o << "      " << k << std::string(18 - k.size(), ' ') << fmt("%9.3f s", v) << "\n";
  }
  if (b.synchronization_wait_s > 0) row("waiting for peers     ", b.synchronization_wait_s);
  if (b.host_launch_s > 0) row("waiting for the host  ", b.host_launch_s);
  row("idle                  ", b.idle_s);
  o << sensitivity_text(r);
  if (r.bottleneck) {
    const Bottleneck& bn = *r.bottleneck;
    o << "\n  bounded by rank " << bn.rank << " (pp " << bn.coord.pp << ", dp " << bn.coord.dp << ", tp " << bn.coord.tp
      << "): " << fmt("%.3f s", bn.work_s) << " of its own work vs " << fmt("%.3f s", bn.median_work_s) << " for the median rank";
    if (r.nominal_iteration_time_s) {
      o << "; iteration " << fmt("%+.1f%%", 100 * (r.iteration_time_s / *r.nominal_iteration_time_s - 1)) << " vs "
        << fmt("%.3f s", *r.nominal_iteration_time_s) << " without stragglers/degraded links";
    }
    o << "\n";
  }
  o << "\n  memory per GPU by pipeline stage (GiB)\n";
  o << "    stage  layers  weights  grads  optimizer  activations   peak\n";
  for (const StageReport& st : r.stages) {
    char line[160];
    std::snprintf(line, sizeof line, "    %5lld  %6lld  %7.2f  %5.2f  %9.2f  %11.2f  %5.2f%s\n", static_cast<long long>(st.stage),
                  static_cast<long long>(st.layers), static_cast<double>(st.static_memory.weights) / 1073741824.0,
                  static_cast<double>(st.static_memory.gradients) / 1073741824.0,
                  static_cast<double>(st.static_memory.optimizer_states) / 1073741824.0,
                  static_cast<double>(st.activation_peak_bytes) / 1073741824.0, static_cast<double>(st.peak_bytes) / 1073741824.0,
                  st.peak_bytes > r.capacity_bytes_per_gpu ? "  over capacity" : "");
    o << line;
    if (r.stages.size() > 12 && st.stage == 3 && r.stages.size() > 8) {
      o << "    ...\n";
      break;
    }
  }
  if (r.stages.size() > 12) {
    const StageReport& st = r.stages.back();
    char line[160];
    std::snprintf(line, sizeof line, "    %5lld  %6lld  %7.2f  %5.2f  %9.2f  %11.2f  %5.2f\n", static_cast<long long>(st.stage),
                  static_cast<long long>(st.layers), static_cast<double>(st.static_memory.weights) / 1073741824.0,
                  static_cast<double>(st.static_memory.gradients) / 1073741824.0,
                  static_cast<double>(st.static_memory.optimizer_states) / 1073741824.0,
                  static_cast<double>(st.activation_peak_bytes) / 1073741824.0, static_cast<double>(st.peak_bytes) / 1073741824.0);
    o << line;
  }
  o << "\n  simulated " << r.engine.ranks.size() << " rank(s) (" << (s.simulation.full ? "full" : "symmetric") << " fidelity), "
    << r.engine.events << " events" << (include_wall_time ? " in " + fmt("%.2f s", r.wall_s) : std::string()) << "\n";
  return o.str();
}

std::string sensitivity_text(const RunResult& r) {
  if (!r.sensitivity) return "";
  std::ostringstream o;
  // Iteration time with one kind of communication slower, faster or free (report/sensitivity.h).
  o << "\n  if one kind of communication ran at another speed (all else equal)\n";
  if (r.sensitivity->empty()) {
    o << "    (no communication)\n";
    return o.str();
  }
  o << "    kind          on wire    exposed";
  for (const SpeedVariant& v : r.sensitivity->front().variants) o << right(speed_heading(v.speed), 22);
  o << "\n";
  for (const CommunicationSensitivity& c : *r.sensitivity) {
    o << "    " << c.kind << std::string(10 - std::min<std::size_t>(c.kind.size(), 9), ' ') << fmt("%9.3f s", c.time_s)
      << fmt("%9.3f s", c.exposed_s);
    for (const SpeedVariant& v : c.variants) o << variant_cell(v, r.iteration_time_s);
    o << "\n";
  }
  // Where each kind stops mattering (report/sensitivity.h).
  const std::string too_fast = fmt("> %gx", kSensitivityRange), too_slow = fmt("< %.3gx", 1 / kSensitivityRange);
  o << "    kind          hidden from     tolerates down to\n";
  for (const CommunicationSensitivity& c : *r.sensitivity) {
    o << "    " << c.kind << std::string(10 - std::min<std::size_t>(c.kind.size(), 9), ' ') << right(edge_text(c.hide_speed, too_fast), 13)
      << right(edge_text(c.tolerated_speed, too_slow), 22) << "\n";
  }
  const std::string tol = fmt("%g%%", 100 * kSensitivityTolerance);
  o << "    (times the modelled speed. hidden from: the speed from which the kind costs at most " << tol
    << " of the iteration\n    over free traffic; tolerates down to: the speed down to which the iteration grows by at most "
    << tol << "; bisection to " << fmt("%g%%", 100 * (kSensitivityResolution - 1)) << ")\n";
  // The hardware what-ifs (report/sensitivity.h): a row of iteration times at the link's speeds,
  // then the speeds found, also as rates (a hide speed of 1 reads as the kinds' "1x (now)").
  const auto link_rows = [&](const LinkSweep& sweep, const auto& rate) {
    o << "   ";
    for (const SpeedVariant& v : sweep.variants) o << right(speed_heading(v.speed), 22);
    o << "\n   ";
    for (const SpeedVariant& v : sweep.variants) o << variant_cell(v, r.iteration_time_s);
    const auto with_rate = [&](double s) { return fmt("%.3gx", s) + " = " + rate(s); };
    const std::optional<double>& hide = sweep.hide_speed;
    o << "\n    hidden from: " << (hide && *hide != 1 ? with_rate(*hide) : edge_text(hide, too_fast)) << ", within " << tol
      << " of the " << fmt("%gx", kSensitivityRange) << " run; tolerates down to: "
      << (sweep.tolerated_speed ? with_rate(*sweep.tolerated_speed) : too_slow) << "\n";
  };
  if (r.nic_sensitivity) {
    // The NICs at other speeds, all traffic on them together.
    const NicSensitivity& n = *r.nic_sensitivity;
    const auto rate = [&](double factor) { return fmt("%.4g Gb/s", factor * n.nic_gbit_per_s); };
    o << "\n  if the NICs ran at another speed (all traffic on them, latency unchanged; modelled " << rate(1) << " each)\n";
    if (n.pcie_gbit_per_s < 2 * n.nic_gbit_per_s) {
      o << "    (a GPU reaches its NIC over PCIe Gen " << n.pcie_generation << " x16, " << fmt("%.4g Gb/s", n.pcie_gbit_per_s)
        << " in NCCL's topology,\n     and its traffic goes at the lower of the two rates: NICs faster than that gain nothing)\n";
    }
    link_rows(n, rate);
  }
  if (r.nvlink_sensitivity) {
    // Every GPU's NVLink at other speeds, all traffic inside a node on it together.
    const NvlinkSensitivity& n = *r.nvlink_sensitivity;
    const auto rate = [&](double factor) { return fmt("%.4g GB/s", factor * n.nccl_GBps); };
    o << "\n  if NVLink ran at another speed (all traffic inside a node on it, NCCL retuned, latencies unchanged;\n"
      << "   modelled " << n.links << " links, " << rate(1) << " per GPU and direction in NCCL's topology, "
      << fmt("%.4g GB/s", n.line_GBps) << " line rate)\n";
    link_rows(n, rate);
  }
  return o.str();
}

namespace {

// A hardware what-if's runs and speeds after the link's own fields in `j`.
Json with_sweep(Json j, const LinkSweep& sweep) {
  for (const SpeedVariant& v : sweep.variants) {
    j[speed_label(v.speed)] = Json{{"iteration_time_s", tidy(v.iteration_time_s)}, {"exposed_communication_s", tidy(v.exposed_s)}};
  }
  j["hide_speed"] = edge_json(sweep.hide_speed);
  j["tolerated_speed"] = edge_json(sweep.tolerated_speed);
  return j;
}

}  // namespace

nlohmann::ordered_json nic_sensitivity_json(const RunResult& r) {
  if (!r.nic_sensitivity) return nullptr;
  const NicSensitivity& n = *r.nic_sensitivity;
  return with_sweep(Json{{"nic_Gbps", tidy(n.nic_gbit_per_s)}, {"pcie_Gbps", tidy(n.pcie_gbit_per_s)}}, n);
}

nlohmann::ordered_json nvlink_sensitivity_json(const RunResult& r) {
  if (!r.nvlink_sensitivity) return nullptr;
  const NvlinkSensitivity& n = *r.nvlink_sensitivity;
  return with_sweep(Json{{"links", n.links}, {"nccl_GBps", tidy(n.nccl_GBps)}, {"line_GBps", tidy(n.line_GBps)}}, n);
}

nlohmann::ordered_json sensitivity_json(const RunResult& r) {
  Json sens = Json::array();
  if (!r.sensitivity) return sens;
  for (const CommunicationSensitivity& c : *r.sensitivity) {
    Json k{{"kind", c.kind}, {"time_s", tidy(c.time_s)}, {"exposed_s", tidy(c.exposed_s)}};
    for (const SpeedVariant& v : c.variants) {
      k[speed_label(v.speed)] = Json{{"iteration_time_s", tidy(v.iteration_time_s)}, {"exposed_s", tidy(v.exposed_s)}};
    }
    k["hide_speed"] = edge_json(c.hide_speed);
    k["tolerated_speed"] = edge_json(c.tolerated_speed);
    sens.push_back(k);
  }
  return sens;
}

}  // namespace trainsim::report
