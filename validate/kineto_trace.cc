#include "validate/kineto_trace.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>
#include <utility>

#include "config/json_reader.h"
#include "models/graph_vocabulary.h"
#include "validate/statistics.h"

namespace trainsim::validate {

namespace {

using config::Json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool has(const std::string& haystack, const char* needle) { return haystack.find(needle) != std::string::npos; }

// NCCL kernel names: ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...), ncclKernel_AllGather_RING_LL_Sum_int8_t(...),
// ncclDevKernel_SendRecv(...); Kineto's "Collective name" argument when present wins.
std::string nccl_category(const std::string& name, const std::string& collective) {
  const std::string c = lower(collective.empty() ? name : collective);
  if (has(c, "allreduce") || has(c, "all_reduce")) return "nccl:all_reduce";
  if (has(c, "allgather") || has(c, "all_gather") || has(c, "_allgather")) return "nccl:all_gather";
  if (has(c, "reducescatter") || has(c, "reduce_scatter") || has(c, "_reduce_scatter")) return "nccl:reduce_scatter";
  if (has(c, "alltoall") || has(c, "all_to_all")) return "nccl:all_to_all";
  if (has(c, "sendrecv") || has(c, "send_recv") || has(c, "send") || has(c, "recv")) return "nccl:send_recv";
  if (has(c, "broadcast")) return "nccl:broadcast";
  if (has(c, "reduce")) return "nccl:reduce";
  return "nccl:other";
}

// Reads a file, gunzipping it when it ends in .gz. Throws InputError when it cannot.
std::string read_text(const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(file, ec)) throw InputError(file, "", "no such file");
  if (fs::is_directory(file, ec)) throw InputError(file, "", "is a directory, expected a Kineto trace (.json or .json.gz)");
  gzFile in = gzopen(file.c_str(), "rb");  // reads plain files unchanged
  if (in == nullptr) throw InputError(file, "", "cannot be read");
  std::string text;
  char buf[1 << 16];
  constexpr std::size_t kMax = std::size_t{2} << 30;
  while (true) {
    const int n = gzread(in, buf, sizeof buf);
    if (n < 0) {
      gzclose(in);
      throw InputError(file, "", "is not a readable (gzip) file");
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMax) {
      gzclose(in);
      throw InputError(file, "", "larger than 2 GiB: profile fewer steps or one rank per file");
    }
  }
  gzclose(in);
  return text;
}

double number_at(const Json& event, const char* key, const std::string& file, const std::string& path) {
  const auto it = event.find(key);
  if (it == event.end() || !it->is_number()) {
    throw InputError(file, config::join_path(path, key),
                     std::string("expected a number (") + (std::string(key) == "dur" ? "duration" : "timestamp") + " in microseconds)" +
                         (it == event.end() ? ", missing" : ", got " + config::describe(*it)));
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || (std::string(key) == "dur" && v < 0)) {
    throw InputError(file, config::join_path(path, key), "expected a finite, non-negative number, got " + config::describe(*it));
  }
  return v;
}

std::optional<std::int64_t> step_number(const std::string& name) {
  static constexpr char kPrefix[] = "ProfilerStep#";
  if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
  const std::string digits = name.substr(sizeof kPrefix - 1);
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

std::string seconds_text(double s) {
  char buf[32];
  if (s >= 1) {
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  }
  return buf;
}

}  // namespace

std::string kernel_category(const std::string& name, const std::string& collective) {
  const std::string n = lower(name);
  if (has(n, "nccl") || !collective.empty()) return nccl_category(name, collective);
  if (has(n, "memcpy") || has(n, "memset")) return "memcpy";
  // Fused attention: FlashAttention 1-3, cuDNN (fmha / sdpa engines, and its SDPA backward's
  // dO.O pre-pass and dQ conversion, "cudnn::fusion::compute_dot_do_o" / "convert_dq_to_16bits"),
  // xFormers, Triton flash kernels.
  if (has(n, "flash") || has(n, "fmha") || has(n, "sdpa") || has(n, "attention") || has(n, "attn") || has(n, "dot_do_o") ||
      has(n, "convert_dq")) {
    return "attention";
  }
  // Optimizer: fused/foreach Adam(W), LAMB, multi-tensor-apply kernels (Megatron and Apex run
  // the optimizer step and the gradient norm through them).
  // ("lamb" alone would match every C++ "lambda" in PyTorch's elementwise kernel names.)
  if (has(n, "adam") || has(n, "lambfunctor") || has(n, "lamb_stage") || has(n, "multi_tensor_apply") || has(n, "optimizer") ||
      has(n, "sgd_")) {
    return "optimizer";
  }
  // GEMMs: cuBLAS/cuBLASLt (sm80_xmma_gemm, ampere_*gemm, nvjet), CUTLASS, split-K reductions.
  if (has(n, "gemm") || has(n, "nvjet") || has(n, "cutlass") || has(n, "xmma") || has(n, "splitkreduce") ||
      has(n, "cublas") || has(n, "matmul") || has(n, "s16816") || has(n, "s1688")) {
    return "gemm";
  }
  return "elementwise/norm";
}

KinetoTrace read_kineto_trace(const std::string& file) {
  const Json doc = config::parse_json_text(read_text(file), file);
  KinetoTrace t;
  t.file = file;
  const Json* events = nullptr;
  if (doc.is_object()) {
    const auto it = doc.find("traceEvents");
    if (it == doc.end() || !it->is_array()) {
      throw InputError(file, "/traceEvents", "expected the array of trace events of a PyTorch profiler (Kineto) trace");
    }
    events = &*it;
    if (const auto info = doc.find("distributedInfo"); info != doc.end() && info->is_object()) {
      if (const auto r = info->find("rank"); r != info->end()) {
        if (!r->is_number_integer() || r->get<std::int64_t>() < 0) {
          throw InputError(file, "/distributedInfo/rank", "expected a non-negative integer, got " + config::describe(*r));
        }
        t.rank = r->get<std::int64_t>();
      }
      if (const auto w = info->find("world_size"); w != info->end() && w->is_number_integer()) t.world_size = w->get<std::int64_t>();
    }
  } else if (doc.is_array()) {
    events = &doc;  // the bare-array form of the Chrome trace format
  } else {
    throw InputError(file, "/", "expected a Chrome trace: an object with \"traceEvents\" or an array of events");
  }
  std::vector<ProfilerStep> cpu_steps, gpu_steps;
  std::vector<std::pair<double, double>> gpu_marks;  // the other GPU annotations' spans
  for (std::size_t i = 0; i < events->size(); ++i) {
    const Json& e = (*events)[i];
    const std::string path = config::join_path("/traceEvents", i);
    if (!e.is_object()) throw InputError(file, path, "expected a trace event object, got " + config::describe(e));
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string() || ph->get<std::string>() != "X") continue;  // only complete events carry work
    const auto cat_it = e.find("cat");
    const std::string cat = cat_it != e.end() && cat_it->is_string() ? cat_it->get<std::string>() : "";
    const auto name_it = e.find("name");
    const std::string name = name_it != e.end() && name_it->is_string() ? name_it->get<std::string>() : "";
    const Json* args = nullptr;
    if (const auto a = e.find("args"); a != e.end() && a->is_object()) args = &*a;
    auto arg_int = [&](const char* key) -> std::optional<std::int64_t> {
      if (args == nullptr) return std::nullopt;
      const auto v = args->find(key);
      if (v == args->end() || !v->is_number_integer()) return std::nullopt;
      return v->get<std::int64_t>();
    };
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      KernelEvent k;
      k.name = name;
      k.start_us = number_at(e, "ts", file, path);
      k.duration_us = number_at(e, "dur", file, path);
      std::string collective;
      if (args != nullptr) {
        if (const auto c = args->find("Collective name"); c != args->end() && c->is_string()) collective = c->get<std::string>();
      }
      k.category = cat == "kernel" ? kernel_category(name, collective) : "memcpy";
      k.stream = arg_int("stream").value_or(0);
      k.correlation = arg_int("correlation");
      t.kernels.push_back(std::move(k));
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      if (const auto c = arg_int("correlation")) t.launches[*c] = number_at(e, "ts", file, path);
    } else if (cat == "user_annotation" || cat == "gpu_user_annotation") {
      const std::optional<std::int64_t> number = step_number(name);
      if (!number) {
        if (cat == "gpu_user_annotation") {
          const double start = number_at(e, "ts", file, path);
          gpu_marks.emplace_back(start, start + number_at(e, "dur", file, path));
        }
        continue;
      }
      const double start = number_at(e, "ts", file, path);
      const ProfilerStep step{*number, start, start + number_at(e, "dur", file, path)};
      (cat == "gpu_user_annotation" ? gpu_steps : cpu_steps).push_back(step);
    }
  }
  if (t.kernels.empty()) {
    throw InputError(file, "/traceEvents", "no GPU kernel events (\"cat\": \"kernel\"): was the trace recorded with CUDA activities?");
  }
  t.gpu_steps = !gpu_steps.empty();
  t.steps = t.gpu_steps ? gpu_steps : cpu_steps;
  if (t.gpu_steps) t.launches.clear();
  auto by_start = [](const auto& a, const auto& b) { return a.start_us < b.start_us; };
  std::stable_sort(t.kernels.begin(), t.kernels.end(), by_start);
  std::stable_sort(t.steps.begin(), t.steps.end(), by_start);
  if (t.gpu_steps) {
    // Kineto lays the GPU spans of nested annotations side by side, not inside one another: a
    // record_function inside a step (PyTorch's "Optimizer.step#AdamW.step") ends the step's GPU
    // span where its own begins. Such spans, from the step's start until the next step's, are the
    // step's: without them the optimizer's kernels would fall outside every step.
    std::sort(gpu_marks.begin(), gpu_marks.end());
    for (std::size_t i = 0; i < t.steps.size(); ++i) {
      const double next = i + 1 < t.steps.size() ? t.steps[i + 1].start_us : std::numeric_limits<double>::infinity();
      for (auto m = std::lower_bound(gpu_marks.begin(), gpu_marks.end(), std::make_pair(t.steps[i].start_us, -1e300));
           m != gpu_marks.end() && m->first < next; ++m) {
        t.steps[i].end_us = std::max(t.steps[i].end_us, std::min(m->second, next));
      }
    }
  }
  return t;
}

std::vector<StepProfile> profile_steps(const KinetoTrace& t) {
  std::vector<StepProfile> out;
  if (t.steps.empty()) {
    StepProfile whole;
    double first = t.kernels.front().start_us, last = first;
    for (const KernelEvent& k : t.kernels) {
      whole.busy_s[k.category] += k.duration_us * 1e-6;
      last = std::max(last, k.start_us + k.duration_us);
    }
    whole.duration_s = (last - first) * 1e-6;
    out.push_back(std::move(whole));
    return out;
  }
  for (const ProfilerStep& s : t.steps) {
    StepProfile p;
    p.number = s.number;
    p.duration_s = (s.end_us - s.start_us) * 1e-6;
    out.push_back(std::move(p));
  }
  // The step a time belongs to: the last step starting at or before it, if it has not ended
  // (GPU spans) or before the next step starts (CPU spans: kernels run after their launch).
  auto step_of = [&](double time) -> std::optional<std::size_t> {
    const auto it = std::upper_bound(t.steps.begin(), t.steps.end(), time,
                                     [](double v, const ProfilerStep& s) { return v < s.start_us; });
    if (it == t.steps.begin()) return std::nullopt;
    const std::size_t i = static_cast<std::size_t>(it - t.steps.begin()) - 1;
    if (time > t.steps[i].end_us) return std::nullopt;
    return i;
  };
  for (const KernelEvent& k : t.kernels) {
    double anchor = k.start_us;
    if (!t.gpu_steps && k.correlation) {
      const auto launch = t.launches.find(*k.correlation);
      if (launch != t.launches.end()) anchor = launch->second;
    }
    if (const auto i = step_of(anchor)) out[*i].busy_s[k.category] += k.duration_us * 1e-6;
  }
  return out;
}

std::map<std::string, double> simulated_busy(const report::RunResult& run, std::int64_t rank) {
  std::map<std::string, double> busy;
  const sim::TaskGraph& g = run.workload->graph;
  for (const sim::TaskRecord& rec : run.engine.records) {
    if (static_cast<std::int64_t>(sim::index(rec.rank)) != rank) continue;
    const sim::RankClass& rc = g.rank_class(g.class_of(rec.rank));
    const sim::Task& task = rc.tasks[rec.task];
    std::string category;
    if (task.kind == sim::TaskKind::kCompute) {
      const sim::Kernel& k = rc.kernels[task.payload];
      if (k.kernel_class == sim::KernelClass::kHostCopy) {
        category = "memcpy";  // the trace's gpu_memcpy events (activation offloading)
      } else if (task.category == models::kOptimizer || k.kernel_class == sim::KernelClass::kOptimizer) {
        category = "optimizer";
      } else if (k.kernel_class == sim::KernelClass::kGemm) {
        category = "gemm";
      } else if (k.kernel_class == sim::KernelClass::kFlashAttention) {
        category = "attention";
      } else {
        category = "elementwise/norm";
      }
      busy[category] += (rec.end - rec.start).seconds();
      continue;
    }
    if (task.kind == sim::TaskKind::kCollective) {
      category = nccl_category(sim::to_string(rc.comm_ops[task.payload].kind), "");
    } else {
      category = "nccl:send_recv";
    }
    busy[category] += (rec.end - rec.posted).seconds();
  }
  return busy;
}

KinetoComparison compare_kineto(const KinetoTrace& trace, const config::Scenario& scenario, std::optional<std::int64_t> rank) {
  KinetoComparison out;
  out.trace_file = trace.file;
  out.rank = rank.value_or(trace.rank.value_or(0));
  if (out.rank >= scenario.num_gpus()) {
    throw InputError(trace.file, "/distributedInfo/rank",
                     "rank " + std::to_string(out.rank) + " is outside the scenario's " + std::to_string(scenario.num_gpus()) +
                         " GPUs (choose the rank with --rank)");
  }
  // The simulated rank standing for it: under symmetric fidelity the representative of its
  // pipeline stage; under full fidelity the rank itself.
  const std::int64_t tp = scenario.parallel.tensor_model_parallel_size, cp = scenario.parallel.context_parallel_size;
  const std::int64_t pp = scenario.parallel.pipeline_model_parallel_size;
  const bool moe = scenario.model.is_moe();
  const models::RankLayout layout(tp, cp, scenario.num_gpus() / (tp * cp * pp), pp,
                                  moe ? scenario.parallel.expert_model_parallel_size : 1, moe ? scenario.parallel.etp() : 1);
  out.simulated_rank = out.rank;
  if (!scenario.simulation.full) {
    models::RankCoord c = layout.coord(out.rank);
    c.tp = 0;
    c.cp = 0;
    c.dp = 0;
    out.simulated_rank = layout.rank(c);
  }
  report::RunOptions options;
  options.record_ranks = {out.simulated_rank};
  const report::RunResult run = report::simulate(scenario, options);
  out.predicted_iteration_s = run.iteration_time_s;
  const std::map<std::string, double> predicted = simulated_busy(run, out.simulated_rank);

  out.per_step = profile_steps(trace);
  out.steps = out.per_step.size();
  std::map<std::string, double> measured;
  for (const StepProfile& p : out.per_step) {
    out.measured_iteration_s += p.duration_s / static_cast<double>(out.steps);
    for (const auto& [category, s] : p.busy_s) measured[category] += s / static_cast<double>(out.steps);
  }
  std::map<std::string, CategoryComparison> rows;
  for (const auto& [category, s] : measured) rows[category].measured_s = s;
  for (const auto& [category, s] : predicted) rows[category].predicted_s = s;
  for (auto& [category, row] : rows) {
    if (row.measured_s == 0 && row.predicted_s == 0) continue;  // e.g. one GPU's empty gradient all-reduce
    row.category = category;
    out.categories.push_back(row);
  }
  return out;
}

nlohmann::json to_json(const KinetoComparison& c) {
  auto err = [](double predicted, double measured) {
    return measured > 0 ? nlohmann::json(relative_error(predicted, measured)) : nlohmann::json();
  };
  nlohmann::json categories = nlohmann::json::object();
  for (const CategoryComparison& row : c.categories) {
    categories[row.category] = {{"measured_s", row.measured_s}, {"predicted_s", row.predicted_s},
                                {"error", err(row.predicted_s, row.measured_s)}};
  }
  nlohmann::json steps = nlohmann::json::array();
  for (const StepProfile& p : c.per_step) steps.push_back({{"step", p.number}, {"duration_s", p.duration_s}, {"busy_s", p.busy_s}});
  return {{"trace", c.trace_file},
          {"rank", c.rank},
          {"simulated_rank", c.simulated_rank},
          {"steps", c.steps},
          {"iteration_time_s",
           {{"measured", c.measured_iteration_s}, {"predicted", c.predicted_iteration_s}, {"error", err(c.predicted_iteration_s, c.measured_iteration_s)}}},
          {"categories", categories},
          {"per_step", steps}};
}

std::string to_text(const KinetoComparison& c) {
  std::ostringstream o;
  o << "Kineto trace " << c.trace_file << ": rank " << c.rank << " (simulated as rank " << c.simulated_rank << "), " << c.steps
    << " profiler step" << (c.steps == 1 ? "" : "s") << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-22s %14s %14s %9s\n", "per iteration", "measured", "predicted", "error");
  o << line;
  auto row = [&](const std::string& label, double measured, double predicted) {
    char e[32] = "-";
    if (measured > 0) std::snprintf(e, sizeof e, "%+.1f%%", 100.0 * relative_error(predicted, measured));
    std::snprintf(line, sizeof line, "  %-22s %14s %14s %9s\n", label.c_str(), seconds_text(measured).c_str(),
                  seconds_text(predicted).c_str(), e);
    o << line;
  };
  row("iteration time", c.measured_iteration_s, c.predicted_iteration_s);
  for (const CategoryComparison& r : c.categories) row(r.category, r.measured_s, r.predicted_s);
  o << "\n  GPU busy time per category (kernels on several streams each count); communication includes\n"
       "  the time a collective waits for its peers, as an NCCL kernel does.\n";
  return o.str();
}

}  // namespace trainsim::validate
