#include "report/comparison.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>

#include "report/reliability.h"
#include "report/summary.h"
#include "report/text_format.h"
#include "report/timeline.h"

namespace trainsim::report {

namespace {

using Json = nlohmann::ordered_json;

// "TP", "DP", ... for the parallelism kinds; other kinds ("embedding", "other") as they are.
std::string kind_label(const std::string& kind) {
  if (kind.size() != 2) return kind;
  std::string s = kind;
  for (char& c : s) c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// The stage with the highest memory peak.
const StageReport* fullest_stage(const RunResult& r) {
  const StageReport* best = nullptr;
  for (const StageReport& st : r.stages) {
    if (best == nullptr || st.peak_bytes > best->peak_bytes) best = &st;
  }
  return best;
}

// What a run's token budget costs, as summary_json gives it: fault-free, and with interruptions
// where the scenario has training.reliability (report/reliability.h).
struct TrainingCost {
  std::optional<double> days, gpu_hours;
  std::optional<double> goodput, expected_days, expected_gpu_hours;
  std::optional<std::int64_t> spare_nodes;
};

TrainingCost training_cost(const RunResult& r) {
  TrainingCost t;
  if (const auto seconds_to_train = fault_free_train_seconds(r)) {
    const double seconds = *seconds_to_train;
    t.days = seconds / 86400.0;
    t.gpu_hours = seconds / 3600.0 * static_cast<double>(r.scenario.num_gpus());
  }
  if (const auto e = estimate_reliability(r)) {
    t.goodput = e->goodput;
    t.expected_days = e->expected_time_to_train_days;
    t.expected_gpu_hours = e->expected_gpu_hours;
    t.spare_nodes = e->spare_nodes;
  }
  return t;
}

std::string pad(const std::string& s, std::size_t width) {
  std::size_t chars = 0;
  for (char c : s) chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return chars >= width ? s : std::string(width - chars, ' ') + s;
}

std::string signed_fmt(const char* f, double x) {
  const std::string v = fmt(f, x);
  return x > 0 ? "+" + v : v;
}

std::string percent_change(double a, double b) {
  if (a == 0) return "";
  return " (" + signed_fmt("%.1f", 100 * (b - a) / a) + "%)";
}

// The two critical ranks' kernel time by kind (TimeBreakdown::compute_by_kernel), kind by kind.
std::vector<Cause> kernel_changes(const RunResult& a, const RunResult& b) {
  const auto &x = a.breakdown.compute_by_kernel, &y = b.breakdown.compute_by_kernel;
  std::vector<Cause> out;
  for (std::size_t i = 0; i < x.size() && i < y.size() && i < std::size(kKernelKinds); ++i) {
    out.push_back(Cause{kKernelKinds[i].name, kernel_kind_label(kKernelKinds[i], {a.scenario.training.precision, b.scenario.training.precision}),
                        x[i].second, y[i].second});
  }
  // Under simulation.sm_contention the kinds are the kernels' times alone; what communication's
  // SMs added to them is its own row, so the rows still add up to the compute change.
  const auto &sx = a.breakdown.sm_contention_s, &sy = b.breakdown.sm_contention_s;
  if (sx || sy) out.push_back(Cause{"sm_contention", "slowed by communication's SMs", sx.value_or(0), sy.value_or(0)});
  return out;
}

}  // namespace

Comparison compare_runs(const RunResult& a, const RunResult& b) {
  Comparison c;
  auto add = [&](const std::string& name, const std::string& label, double av, double bv) {
    c.causes.push_back(Cause{name, label, av, bv});
  };
  const TimeBreakdown &x = a.breakdown, &y = b.breakdown;
  add("compute", "compute", x.compute_s, y.compute_s);
  add("recompute", "recompute", x.recompute_s, y.recompute_s);
  add("optimizer", "optimizer", x.optimizer_s, y.optimizer_s);
  add("pipeline_bubble", "pipeline bubble", x.pipeline_bubble_s, y.pipeline_bubble_s);
  // Exposed communication by kind; both breakdowns list the same kinds in the same order.
  for (std::size_t i = 0; i < x.exposed_by_kind.size(); ++i) {
    const std::string& kind = x.exposed_by_kind[i].first;
    const double other = i < y.exposed_by_kind.size() ? y.exposed_by_kind[i].second : 0;
    add("exposed_" + kind + "_communication", "exposed " + kind_label(kind) + " communication", x.exposed_by_kind[i].second, other);
  }
  add("synchronization_wait", "waiting for peers", x.synchronization_wait_s, y.synchronization_wait_s);
  if (x.host_launch_s > 0 || y.host_launch_s > 0) add("host_launch", "waiting for the host", x.host_launch_s, y.host_launch_s);
  add("idle", "idle", x.idle_s, y.idle_s);
  c.change_s = b.iteration_time_s - a.iteration_time_s;
  for (std::size_t i = 0; i < c.causes.size(); ++i) {
    if (std::abs(c.causes[i].change_s()) > std::abs(c.causes[c.largest].change_s())) c.largest = i;
  }
  return c;
}

std::string comparison_text(const RunResult& a, const RunResult& b) {
  std::ostringstream o;
  o << "A  " << a.scenario.name << "\n   " << plan_summary(a) << "\n";
  o << "B  " << b.scenario.name << "\n   " << plan_summary(b) << "\n\n";
  const std::size_t w = 14;
  auto row = [&](const std::string& label, const std::string& av, const std::string& bv, const std::string& change) {
    o << "  " << label << std::string(label.size() < 34 ? 34 - label.size() : 1, ' ') << pad(av, w) << pad(bv, w) << "   "
      << change << "\n";
  };
  row("", "A", "B", "  B - A");
  row("iteration time", fmt("%.4f s", a.iteration_time_s), fmt("%.4f s", b.iteration_time_s),
      signed_fmt("%.4f s", b.iteration_time_s - a.iteration_time_s) + percent_change(a.iteration_time_s, b.iteration_time_s));
  row("tokens/s", fmt("%.0f", a.tokens_per_s), fmt("%.0f", b.tokens_per_s),
      signed_fmt("%.0f", b.tokens_per_s - a.tokens_per_s) + percent_change(a.tokens_per_s, b.tokens_per_s));
  row("model TFLOP/s/GPU", fmt("%.1f", a.model_tflops_per_gpu), fmt("%.1f", b.model_tflops_per_gpu),
      signed_fmt("%.1f", b.model_tflops_per_gpu - a.model_tflops_per_gpu));
  row("MFU", fmt("%.1f%%", 100 * a.mfu), fmt("%.1f%%", 100 * b.mfu), signed_fmt("%.1f", 100 * (b.mfu - a.mfu)) + " points");
  row("HFU", fmt("%.1f%%", 100 * a.hfu), fmt("%.1f%%", 100 * b.hfu), signed_fmt("%.1f", 100 * (b.hfu - a.hfu)) + " points");
  row("GPUs", std::to_string(a.scenario.num_gpus()), std::to_string(b.scenario.num_gpus()), "");
  const double gib = 1073741824.0;
  row("memory peak/GPU", fmt("%.2f GiB", static_cast<double>(a.peak_bytes_per_gpu) / gib),
      fmt("%.2f GiB", static_cast<double>(b.peak_bytes_per_gpu) / gib),
      signed_fmt("%.2f GiB", static_cast<double>(b.peak_bytes_per_gpu - a.peak_bytes_per_gpu) / gib));
  const StageReport* sa = fullest_stage(a);
  const StageReport* sb = fullest_stage(b);
  if (sa != nullptr && sb != nullptr) {
    auto mem_row = [&](const char* label, std::int64_t av, std::int64_t bv) {
      row(label, fmt("%.2f GiB", static_cast<double>(av) / gib), fmt("%.2f GiB", static_cast<double>(bv) / gib),
          signed_fmt("%.2f GiB", static_cast<double>(bv - av) / gib));
    };
    row("  on pipeline stage", std::to_string(sa->stage), std::to_string(sb->stage), "");
    mem_row("  weights", sa->static_memory.weights, sb->static_memory.weights);
    mem_row("  gradients", sa->static_memory.gradients, sb->static_memory.gradients);
    mem_row("  optimizer states", sa->static_memory.optimizer_states, sb->static_memory.optimizer_states);
    mem_row("  activations", sa->activation_peak_bytes, sb->activation_peak_bytes);
  }
  row("fits", a.fits ? "yes" : "NO", b.fits ? "yes" : "NO", "");
  row("pipeline bubble share", fmt("%.1f%%", 100 * bubble_fraction(a)), fmt("%.1f%%", 100 * bubble_fraction(b)),
      signed_fmt("%.1f", 100 * (bubble_fraction(b) - bubble_fraction(a))) + " points");
  // With a token budget, what it takes; with interruptions, as they come (run's summary lines).
  const TrainingCost ca = training_cost(a), cb = training_cost(b);
  const auto cost_row = [&](const char* label, std::optional<double> av, std::optional<double> bv, const char* f,
                            const char* unit) {
    if (!av && !bv) return;
    const auto text = [&](std::optional<double> v) { return v ? fmt(f, *v) + unit : std::string("-"); };
    std::string change;
    if (av && bv) change = signed_fmt(f, *bv - *av) + unit + percent_change(*av, *bv);
    row(label, text(av), text(bv), change);
  };
  cost_row("time to train", ca.days, cb.days, "%.1f", " days");
  cost_row("GPU-hours", ca.gpu_hours, cb.gpu_hours, "%.4g", "");
  if (ca.goodput || cb.goodput) {
    const auto share = [](std::optional<double> v) { return v ? fmt("%.1f%%", 100 * *v) : std::string("-"); };
    row("goodput", share(ca.goodput), share(cb.goodput),
        ca.goodput && cb.goodput ? signed_fmt("%.1f", 100 * (*cb.goodput - *ca.goodput)) + " points" : std::string());
  }
  if (ca.spare_nodes || cb.spare_nodes) {
    const auto count = [](std::optional<std::int64_t> v) { return v ? std::to_string(*v) : std::string("-"); };
    row("spare nodes", count(ca.spare_nodes), count(cb.spare_nodes), "");
  }
  const auto never = [](const TrainingCost& t) { return t.goodput && *t.goodput <= 0; };
  if (never(ca) || never(cb)) {
    row("expected time to train", never(ca) ? "never" : "-", never(cb) ? "never" : "-", "");
  } else {
    cost_row("expected time to train", ca.expected_days, cb.expected_days, "%.1f", " days");
    cost_row("expected GPU-hours", ca.expected_gpu_hours, cb.expected_gpu_hours, "%.4g", "");
  }

  const Comparison c = compare_runs(a, b);
  // Shares of a change within the noise of the attribution are not worth printing.
  const bool significant = std::abs(c.change_s) >= 0.005 * a.iteration_time_s;
  o << "\n  where the iteration time changed (A: rank " << a.critical_rank << ", B: rank " << b.critical_rank
    << ", the last to finish)\n";
  row("", "A", "B", significant ? "  B - A     share of the change" : "  B - A");
  for (const Cause& cause : c.causes) {
    if (std::abs(cause.a_s) < 5e-5 && std::abs(cause.b_s) < 5e-5) continue;  // 0.0000 s on both sides
    std::string change = signed_fmt("%.4f s", cause.change_s());
    if (significant) {
      const double share = 100 * cause.change_s() / c.change_s;
      change += "  " + pad(std::abs(share) < 0.5 ? "0%" : fmt("%.0f%%", share), 6);
    }
    row("  " + cause.label, fmt("%.4f s", cause.a_s), fmt("%.4f s", cause.b_s), change);
  }
  row("  total", fmt("%.4f s", a.iteration_time_s), fmt("%.4f s", b.iteration_time_s), signed_fmt("%.4f s", c.change_s));
  const Cause& top = c.causes[c.largest];
  if (!significant) {
    o << "\n  the iteration times differ by less than 0.5%: no cause to single out\n";
  } else {
    o << "\n  largest cause: " << top.label << " (" << signed_fmt("%.4f s", top.change_s()) << " of "
      << signed_fmt("%.4f s", c.change_s) << ")\n";
  }
  // What the compute, recompute and optimizer rows are made of.
  const auto kernels = kernel_changes(a, b);
  if (!kernels.empty()) {
    o << "\n  kernels of those ranks by kind (compute + recompute + optimizer)\n";
    for (const Cause& k : kernels) {
      if (std::abs(k.a_s) < 5e-5 && std::abs(k.b_s) < 5e-5) continue;
      row("  " + k.label, fmt("%.4f s", k.a_s), fmt("%.4f s", k.b_s), signed_fmt("%.4f s", k.change_s()));
    }
  }
  return o.str();
}

nlohmann::ordered_json comparison_json(const RunResult& a, const RunResult& b, bool include_wall_time) {
  Json j;
  j["a"] = summary_json(a, include_wall_time);
  j["b"] = summary_json(b, include_wall_time);
  const Comparison c = compare_runs(a, b);
  Json d;
  d["iteration_time_s"] = b.iteration_time_s - a.iteration_time_s;
  d["iteration_time_ratio"] = a.iteration_time_s > 0 ? b.iteration_time_s / a.iteration_time_s : 0;
  d["tokens_per_s"] = b.tokens_per_s - a.tokens_per_s;
  d["mfu"] = b.mfu - a.mfu;
  d["hfu"] = b.hfu - a.hfu;
  d["peak_bytes_per_gpu"] = b.peak_bytes_per_gpu - a.peak_bytes_per_gpu;
  d["pipeline_bubble_share"] = bubble_fraction(b) - bubble_fraction(a);
  // Where both runs have them: the training's cost, fault-free and with interruptions.
  const TrainingCost ca = training_cost(a), cb = training_cost(b);
  const auto both = [&](const char* key, std::optional<double> av, std::optional<double> bv) {
    if (av && bv) d[key] = *bv - *av;
  };
  both("time_to_train_days", ca.days, cb.days);
  both("gpu_hours", ca.gpu_hours, cb.gpu_hours);
  both("goodput", ca.goodput, cb.goodput);
  both("expected_time_to_train_days", ca.expected_days, cb.expected_days);
  both("expected_gpu_hours", ca.expected_gpu_hours, cb.expected_gpu_hours);
  j["difference"] = d;
  Json causes = Json::array();
  for (const Cause& cause : c.causes) {
    causes.push_back(Json{{"cause", cause.name}, {"a_s", cause.a_s}, {"b_s", cause.b_s}, {"change_s", cause.change_s()}});
  }
  j["attribution"] = Json{{"iteration_time_change_s", c.change_s}, {"causes", causes}, {"largest_cause", c.causes[c.largest].name}};
  Json kernels = Json::array();
  for (const Cause& k : kernel_changes(a, b)) {
    kernels.push_back(Json{{"kind", k.name}, {"a_s", k.a_s}, {"b_s", k.b_s}, {"change_s", k.change_s()}});
  }
  j["kernels_by_kind"] = kernels;
  return j;
}

}  // namespace trainsim::report
