#include "report/reliability.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "sim/check.h"

namespace trainsim::report {

CheckpointSize checkpoint_size(const RunResult& r) {
  // Every stage has GPUs / PP GPUs, each holding an equal share of that stage's checkpoint.
  const std::int64_t per_stage = r.scenario.num_gpus() / r.scenario.parallel.pipeline_model_parallel_size;
  CheckpointSize c;
  for (const StageReport& st : r.stages) {
    const double bytes = static_cast<double>(st.checkpoint_bytes);
    c.total_bytes += bytes * static_cast<double>(per_stage);
    c.per_gpu_bytes = std::max(c.per_gpu_bytes, bytes);
  }
  return c;
}

double elapsed_per_work(double tau_s, double checkpoint_s, double restart_s, double mtbf_s) {
  TRAINSIM_CHECK(tau_s > 0 && mtbf_s > 0 && checkpoint_s >= 0 && restart_s >= 0, "checkpoint-restart inputs out of range");
  // expm1 keeps the small-exponent case (rare interruptions) exact.
  const double v = mtbf_s / tau_s * std::exp(restart_s / mtbf_s) * std::expm1((tau_s + checkpoint_s) / mtbf_s);
  return std::isfinite(v) ? v : std::numeric_limits<double>::infinity();
}

double erlang_b(std::int64_t servers, double load) {
  TRAINSIM_CHECK(servers >= 0 && load >= 0, "Erlang B inputs out of range");
  // The stable recursion B(0) = 1, B(k) = a B(k-1) / (k + a B(k-1)).
  double b = 1;
  for (std::int64_t k = 1; k <= servers; ++k) b = load * b / (static_cast<double>(k) + load * b);
  return b;
}

double spare_shortage_probability(std::int64_t spares, double job_load, double spare_load) {
  TRAINSIM_CHECK(spares >= 0 && job_load >= 0 && spare_load >= 0, "spare pool inputs out of range");
  // Erlang's recursion with the chain's own ratios: B(k) = pi_k / (pi_0 + ... + pi_k) over the
  // chain cut at k, pi_k / pi_(k-1) = x_k = (job_load + (S - k + 1) spare_load) / k, so
  // B(k) = x_k B(k-1) / (1 + x_k B(k-1)), and B(S) is the top state's probability.
  double b = 1;
  for (std::int64_t k = 1; k <= spares; ++k) {
    const double x = (job_load + static_cast<double>(spares - k + 1) * spare_load) / static_cast<double>(k);
    b = x * b / (1 + x * b);
  }
  return b;
}

double spare_wait_repairs(std::int64_t spares, double job_nodes, double spare_load) {
  TRAINSIM_CHECK(spares >= 0 && job_nodes > 0 && spare_load >= 0, "spare pool inputs out of range");
  // From m = S + 1 in repair down to S: (1 / d_m) sum over j >= m of prod_(i = m..j-1) b_i / d_(i+1),
  // with b_i = spare_load (n + S - i) the healthy nodes' failures and d_i = i the repairs (per
  // repair time). The terms fall once d outgrows b; a sum past 1e300 is a wait without end.
  const double pool = job_nodes + static_cast<double>(spares);
  double term = 1, sum = 1;
  for (std::int64_t j = spares + 1; static_cast<double>(j) < pool; ++j) {
    term *= spare_load * (pool - static_cast<double>(j)) / static_cast<double>(j + 1);
    sum += term;
    if (!(sum < 1e300)) return std::numeric_limits<double>::infinity();
    if (term < 1e-17 * sum && spare_load * (pool - static_cast<double>(j)) < static_cast<double>(j + 1)) break;
  }
  return sum / static_cast<double>(spares + 1);
}

namespace {

// The estimate with spec.spare_nodes spares (none: always one ready).
ReliabilityEstimate estimate_with_spares(const models::ReliabilitySpec& spec, std::int64_t gpus, std::int64_t gpus_per_node,
                                         double iteration_time_s, const CheckpointSize& size, double pcie_GBps,
                                         std::optional<double> train_seconds) {
  TRAINSIM_CHECK(gpus >= 1 && gpus_per_node >= 1 && iteration_time_s > 0 && pcie_GBps > 0 && spec.gpu_mtbf_hours > 0 &&
                     spec.checkpoint_write_GBps > 0 && spec.restart_minutes >= 0 &&
                     (!spec.spare_nodes || (*spec.spare_nodes >= 0 && spec.node_repair_hours > 0 && spec.node_repair_share > 0 &&
                                            spec.node_repair_share <= 1 && spec.idle_failure_share >= 0 &&
                                            spec.idle_failure_share <= 1)),
                 "reliability inputs out of range");
  ReliabilityEstimate e;
  e.job_mtbf_hours = spec.gpu_mtbf_hours / static_cast<double>(gpus);
  e.checkpoint = size;
  e.checkpoint_copy_s = size.per_gpu_bytes / (pcie_GBps * 1e9);
  e.checkpoint_write_s = std::max(size.total_bytes / (spec.checkpoint_write_GBps * 1e9), e.checkpoint_copy_s);
  e.restart_s = spec.restart_minutes * 60;
  const double mtbf_s = e.job_mtbf_hours * 3600;
  if (spec.spare_nodes) {
    // The header's spare-node term: the pool's chain at the repair load, then the wait's first
    // passage.
    const std::int64_t spares = *spec.spare_nodes;
    e.spare_nodes = spares;
    e.node_repair_share = spec.node_repair_share;
    e.idle_failure_share = spec.idle_failure_share;
    e.spare_gpus = spares * gpus_per_node;
    // Repairs arrive with the share f of interruptions that need one; only those can wait. An
    // idle node sends itself at r / n of the job's rate, n the job's nodes.
    const double f = spec.node_repair_share;
    const double job_load = f * spec.node_repair_hours / e.job_mtbf_hours;
    const double nodes = static_cast<double>(gpus) / static_cast<double>(gpus_per_node);
    const double spare_load = spec.idle_failure_share * job_load / nodes;
    e.no_spare_probability = spare_shortage_probability(spares, job_load, spare_load);
    if (e.no_spare_probability > 0) {
      // The wait, in repair times, while the idle job's healthy nodes may fail too.
      const double wait = spare_wait_repairs(spares, nodes, spare_load);
      e.repair_wait_s = std::isfinite(wait) ? f * e.no_spare_probability * wait * spec.node_repair_hours * 3600
                                            : std::numeric_limits<double>::infinity();
    }
  }
  const double down_s = e.restart_s + e.repair_wait_s;

  // Training stops per save: a synchronous save for the write; an asynchronous one for the copy,
  // and for what is left of the previous write when the interval is shorter than it.
  const auto blocking = [&](double tau) {
    return spec.async_checkpoint ? std::max(e.checkpoint_copy_s, e.checkpoint_write_s - tau) : e.checkpoint_write_s;
  };
  const auto elapsed_at = [&](double tau) { return elapsed_per_work(tau, blocking(tau), down_s, mtbf_s); };
  const auto cost = [&](std::int64_t k) { return elapsed_at(static_cast<double>(k) * iteration_time_s); };

  std::int64_t k = 1;
  if (spec.checkpoint_interval_iterations) {
    k = *spec.checkpoint_interval_iterations;
  } else {
    // The cost is unimodal in tau (falling while saves dominate, rising once lost work does):
    // golden-section search on log tau between one iteration and 100 MTBFs, then the better of
    // the two whole iteration counts around the optimum.
    const double lo0 = std::log(iteration_time_s);
    const double hi0 = std::max(lo0, std::log(100.0) + std::log(mtbf_s));
    const auto at = [&](double log_tau) { return elapsed_at(std::exp(log_tau)); };
    const double g = (std::sqrt(5.0) - 1) / 2;
    double a = lo0, b = hi0;
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
    double f1 = at(x1), f2 = at(x2);
    for (int i = 0; i < 200 && b - a > 1e-9; ++i) {
      if (f1 <= f2) {
        b = x2, x2 = x1, f2 = f1;
        x1 = b - g * (b - a), f1 = at(x1);
      } else {
        a = x1, x1 = x2, f1 = f2;
        x2 = a + g * (b - a), f2 = at(x2);
      }
    }
    const double best = std::exp((a + b) / 2) / iteration_time_s;
    const double cap = static_cast<double>(std::numeric_limits<std::int32_t>::max());
    const auto lower = static_cast<std::int64_t>(std::clamp(std::floor(best), 1.0, cap));
    k = cost(lower + 1) < cost(lower) ? lower + 1 : lower;
    e.interval_optimal = true;
  }
  e.checkpoint_interval_iterations = k;
  const double tau = static_cast<double>(k) * iteration_time_s;
  e.checkpoint_blocking_s = blocking(tau);
  const double ratio = cost(k);
  e.goodput = std::isfinite(ratio) ? 1 / ratio : 0;
  if (train_seconds && e.goodput > 0) {
    const double elapsed = *train_seconds * ratio;
    e.expected_time_to_train_days = elapsed / 86400;
    e.expected_gpu_hours = elapsed / 3600 * static_cast<double>(gpus + e.spare_gpus);
    e.expected_interruptions = elapsed / mtbf_s;
  }
  return e;
}

}  // namespace

ReliabilityEstimate estimate_reliability(const models::ReliabilitySpec& spec, std::int64_t gpus, std::int64_t gpus_per_node,
                                         double iteration_time_s, const CheckpointSize& size, double pcie_GBps,
                                         std::optional<double> train_seconds) {
  if (!spec.cheapest_spares) return estimate_with_spares(spec, gpus, gpus_per_node, iteration_time_s, size, pcie_GBps, train_seconds);
  // The header's cheapest count: GPUs held per unit of work, (GPUs + S g) / goodput(S), at its
  // smallest. goodput(S) never exceeds the goodput with a spare always ready, g_inf, so once
  // (GPUs + S g) / g_inf reaches the best cost found no larger S can beat it.
  models::ReliabilitySpec fixed = spec;
  fixed.cheapest_spares = false;
  fixed.spare_nodes.reset();
  const double ready = estimate_with_spares(fixed, gpus, gpus_per_node, iteration_time_s, size, pcie_GBps, train_seconds).goodput;
  const auto held = [&](std::int64_t spares) { return static_cast<double>(gpus + spares * gpus_per_node); };
  std::optional<ReliabilityEstimate> best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (std::int64_t spares = 0; spares <= kMaxCheapestSpares; ++spares) {
    if (ready > 0 && held(spares) / ready >= best_cost) break;
    fixed.spare_nodes = spares;
    ReliabilityEstimate e = estimate_with_spares(fixed, gpus, gpus_per_node, iteration_time_s, size, pcie_GBps, train_seconds);
    const double cost = e.goodput > 0 ? held(spares) / e.goodput : std::numeric_limits<double>::infinity();
    if (!best || cost < best_cost) {
      best_cost = cost;
      best = std::move(e);
    }
    if (ready <= 0) break;  // no count of spares lets the job finish: report none
  }
  best->spares_cheapest = true;
  return *best;
}

std::optional<double> fault_free_train_seconds(const RunResult& r) {
  if (!r.scenario.training.train_tokens) return std::nullopt;
  return *r.scenario.training.train_tokens / r.tokens_per_s;
}

std::optional<ReliabilityEstimate> estimate_reliability(const RunResult& r) {
  const config::Scenario& s = r.scenario;
  if (!s.training.reliability || r.iteration_time_s <= 0) return std::nullopt;
  return estimate_reliability(*s.training.reliability, s.num_gpus(), s.cluster.gpus_per_node, r.iteration_time_s,
                              checkpoint_size(r), s.cluster.pcie_x16_GBps(), fault_free_train_seconds(r));
}

}  // namespace trainsim::report
