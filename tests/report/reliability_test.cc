#include "report/reliability.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "config/scenario.h"
#include "tests/scenario_helpers.h"

using namespace trainsim;

namespace {

// An exponential draw of mean `mean`: uniform in (0, 1] from 53 random bits, then the inverse.
double exponential_draw(std::mt19937_64& rng, double mean) {
  const double u = (static_cast<double>(rng() >> 11) + 1) / 9007199254740992.0;
  return -mean * std::log(u);
}

// Checkpoint-restart played out: work in segments of `tau` seconds each followed by a save of
// `c`; an interruption (exponential, mean `m`) loses the segment in progress and costs `r`,
// which an interruption can cut short too. Returns the elapsed time of `segments` segments.
double replay_interruptions(double tau, double c, double r, double m, std::int64_t segments, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto next_interruption = [&] { return exponential_draw(rng, m); };
  double elapsed = 0;
  for (std::int64_t i = 0; i < segments; ++i) {
    for (;;) {
      const double t = next_interruption();
      if (t >= tau + c) {
        elapsed += tau + c;
        break;
      }
      elapsed += t;
      for (;;) {  // the restart, interrupted and begun again as often as it takes
        const double u = next_interruption();
        if (u >= r) {
          elapsed += r;
          break;
        }
        elapsed += u;
      }
    }
  }
  return elapsed;
}

models::ReliabilitySpec spec_of(double mtbf_gpu_hours, double restart_minutes, double write_GBps, bool async) {
  models::ReliabilitySpec s;
  s.gpu_mtbf_hours = mtbf_gpu_hours;
  s.restart_minutes = restart_minutes;
  s.checkpoint_write_GBps = write_GBps;
  s.async_checkpoint = async;
  return s;
}

}  // namespace

TEST_CASE("report/reliability: the expected elapsed time is what checkpoint-restart played out takes") {
  // Interruptions every hour, a save every 10 minutes of work that takes 1 minute, 5-minute
  // restarts: about a fifth of the time is lost, so a wrong term would show.
  const double m = 3600, tau = 600, c = 60, r = 300;
  const std::int64_t segments = 200000;
  const double played = replay_interruptions(tau, c, r, m, segments, 7) / (tau * static_cast<double>(segments));
  const double formula = report::elapsed_per_work(tau, c, r, m);
  CAPTURE(played);
  CAPTURE(formula);
  CHECK(formula > 1.2);
  CHECK(std::abs(played / formula - 1) < 0.01);
  // Rare interruptions: the first-order waste c / tau + (tau / 2 + r) / m.
  const double rare = report::elapsed_per_work(600, 6, 60, 3.6e7);
  CHECK(rare - 1 == doctest::Approx(6.0 / 600 + (300.0 + 60) / 3.6e7).epsilon(1e-3));
  CHECK(std::isinf(report::elapsed_per_work(1e6, 0, 0, 1)));
}

TEST_CASE("report/reliability: the interval chosen is Young's for cheap saves, and no other whole interval does better") {
  // One-second iterations, 64 GPUs at 6,400 GPU-hours each (an interruption every 100 hours),
  // 100 GB written at 10 GB/s: a 10-second save, Young's sqrt(2 C M) = 2,683 s.
  const models::ReliabilitySpec spec = spec_of(6400, 10, 10, false);
  report::CheckpointSize size;
  size.total_bytes = 100e9;
  size.per_gpu_bytes = 100e9 / 64;
  const report::ReliabilityEstimate e = report::estimate_reliability(spec, 64, 8, 1.0, size, 50, 86400.0 * 30);
  CHECK(e.job_mtbf_hours == doctest::Approx(100));
  CHECK(e.checkpoint_write_s == doctest::Approx(10));
  CHECK(e.checkpoint_blocking_s == doctest::Approx(10));
  CHECK(e.interval_optimal);
  const double young = std::sqrt(2 * 10 * 100 * 3600.0);
  CHECK(static_cast<double>(e.checkpoint_interval_iterations) == doctest::Approx(young).epsilon(0.02));
  const double m = 100 * 3600.0, r = 600;
  const double best = report::elapsed_per_work(static_cast<double>(e.checkpoint_interval_iterations), 10, r, m);
  CHECK(e.goodput == doctest::Approx(1 / best));
  for (const std::int64_t k : {e.checkpoint_interval_iterations - 1, e.checkpoint_interval_iterations + 1,
                               e.checkpoint_interval_iterations / 2, 2 * e.checkpoint_interval_iterations}) {
    CHECK(report::elapsed_per_work(static_cast<double>(k), 10, r, m) >= best);
  }
  // The token budget's 30 days of training take 30 / goodput, and interruptions come at 1 / M.
  REQUIRE(e.expected_time_to_train_days.has_value());
  CHECK(*e.expected_time_to_train_days == doctest::Approx(30 / e.goodput));
  CHECK(*e.expected_gpu_hours == doctest::Approx(30 / e.goodput * 24 * 64));
  CHECK(*e.expected_interruptions == doctest::Approx(30 / e.goodput * 24 / 100));

  // A given interval is kept; a longer job (more GPUs) loses more.
  models::ReliabilitySpec fixed = spec;
  fixed.checkpoint_interval_iterations = 100;
  const report::ReliabilityEstimate f = report::estimate_reliability(fixed, 64, 8, 1.0, size, 50, std::nullopt);
  CHECK(f.checkpoint_interval_iterations == 100);
  CHECK_FALSE(f.interval_optimal);
  CHECK(f.goodput < e.goodput);
  CHECK_FALSE(f.expected_time_to_train_days.has_value());
  CHECK(report::estimate_reliability(spec, 1024, 8, 1.0, size, 50, std::nullopt).goodput < e.goodput);
}

TEST_CASE("report/reliability: an asynchronous save stops training for the copy, and for the write it has to wait for") {
  // 8 GPUs, 1 TB at 1 GB/s: a 1,000-second write behind 125 GB / 50 GB/s = 2.5-second copies.
  report::CheckpointSize size;
  size.total_bytes = 1e12;
  size.per_gpu_bytes = 125e9;
  models::ReliabilitySpec spec = spec_of(8000, 5, 1, true);
  spec.checkpoint_interval_iterations = 2000;  // 2,000 s: the write ends before the next save
  const report::ReliabilityEstimate slow_iterations = report::estimate_reliability(spec, 8, 8, 1.0, size, 50, std::nullopt);
  CHECK(slow_iterations.checkpoint_copy_s == doctest::Approx(2.5));
  CHECK(slow_iterations.checkpoint_write_s == doctest::Approx(1000));
  CHECK(slow_iterations.checkpoint_blocking_s == doctest::Approx(2.5));
  spec.checkpoint_interval_iterations = 400;  // the next save waits 600 s for the write
  CHECK(report::estimate_reliability(spec, 8, 8, 1.0, size, 50, std::nullopt).checkpoint_blocking_s == doctest::Approx(600));
  // Synchronous saves stop training for the write; asynchronous ones do better at their best interval.
  spec.checkpoint_interval_iterations.reset();
  models::ReliabilitySpec sync = spec;
  sync.async_checkpoint = false;
  const report::ReliabilityEstimate a = report::estimate_reliability(spec, 8, 8, 1.0, size, 50, std::nullopt);
  const report::ReliabilityEstimate s = report::estimate_reliability(sync, 8, 8, 1.0, size, 50, std::nullopt);
  CHECK(s.checkpoint_blocking_s == doctest::Approx(1000));
  CHECK(a.goodput > s.goodput);
  CHECK(a.checkpoint_blocking_s < 1000);
}

TEST_CASE("report/reliability: a checkpoint holds each parameter's 16-bit weight and optimizer state once") {
  // GPT-3 175B, distributed optimizer: 2 B of weight, 12 B of fp32 master weight and Adam moments
  // per parameter, split over all 1,024 GPUs (each data-parallel rank saves 1/8 of its stage's).
  const report::RunResult sharded = tests::simulate_file(tests::kDefaultScenario, {"parallelism.use_distributed_optimizer=true"});
  const config::Scenario& s = sharded.scenario;
  const report::CheckpointSize c = report::checkpoint_size(sharded);
  const double params = static_cast<double>(s.model.total_parameters(s.parallel.tensor_model_parallel_size));
  // Megatron's last stage keeps its own copy of the tied embedding for the output layer.
  CHECK(c.total_bytes / 14 == doctest::Approx(params).epsilon(0.01));
  CHECK(c.per_gpu_bytes >= c.total_bytes / 1024);
  CHECK(c.per_gpu_bytes < 1.1 * c.total_bytes / 1024);

  // The default scenario, without the distributed optimizer: each rank still saves only its share
  // (fully parallel save). The run's estimate uses the simulated iteration and this checkpoint.
  report::RunResult r = tests::simulate_file(
      tests::kDefaultScenario,
      {R"(training.reliability={"gpu_mtbf_hours": 50677, "restart_minutes": 10, "checkpoint_write_GBps": 100})"});
  const report::CheckpointSize plain = report::checkpoint_size(r);
  CHECK(plain.total_bytes == doctest::Approx(c.total_bytes));
  const auto e = report::estimate_reliability(r);
  REQUIRE(e.has_value());
  CHECK(e->checkpoint.total_bytes == doctest::Approx(c.total_bytes));
  CHECK(e->checkpoint_write_s == doctest::Approx(c.total_bytes / 100e9));
  CHECK(e->goodput > 0.9);
  CHECK(e->goodput < 1);
  REQUIRE(e->expected_time_to_train_days.has_value());
  const double days = *r.scenario.training.train_tokens / r.tokens_per_s / 86400;
  CHECK(*e->expected_time_to_train_days == doctest::Approx(days / e->goodput));
}

TEST_CASE("report/reliability: Erlang's loss formula") {
  CHECK(report::erlang_b(0, 3.0) == 1.0);
  CHECK(report::erlang_b(1, 1.0) == doctest::Approx(0.5));
  CHECK(report::erlang_b(2, 1.0) == doctest::Approx(0.2));
  CHECK(report::erlang_b(10, 5.0) == doctest::Approx(0.018385).epsilon(1e-4));  // the standard tables' value
  CHECK(report::erlang_b(4, 0.0) == 0.0);
  // Stable where the factorials overflow.
  const double b = report::erlang_b(2000, 1900.0);
  CHECK(b > 0);
  CHECK(b < 0.1);
}

namespace {

// The spare pool played out: interruptions of a running job every Exp(m) hours, each sending a
// node to repair for `repair` hours and taking a healthy spare; with all `spares` in repair the
// job waits (and meets no interruption) until the count in repair is back to `spares`; only a
// share `need` of the interruptions takes a node out. Idle nodes go to repair at `idle_rate` per
// hour each: the spares while the job runs, and every healthy node of the pool (the job's
// `job_nodes` and the spares) while it waits. Repairs take `repair` hours, or Exp(repair) where
// `exponential_repairs`. Mean wait per interruption.
struct SparePool {
  double m = 1, repair = 1;
  std::int64_t spares = 0;
  double need = 1, idle_rate = 0;
  std::int64_t job_nodes = 1;
  bool exponential_repairs = false;
};

// A pool of `spares` beside a job of `job_nodes` interrupted every `m` hours, repairs of `repair`
// hours, idle nodes failing as working ones do (each at 1 / (m job_nodes)) where `idle_fail`.
SparePool pool_of(double m, double repair, std::int64_t spares, std::int64_t job_nodes, bool idle_fail) {
  SparePool pool;
  pool.m = m;
  pool.repair = repair;
  pool.spares = spares;
  pool.job_nodes = job_nodes;
  if (idle_fail) pool.idle_rate = 1 / (m * static_cast<double>(job_nodes));
  return pool;
}

double replay_spares(const SparePool& pool, std::int64_t interruptions, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  const auto exponential = [&](double mean) { return exponential_draw(rng, mean); };
  std::vector<double> in_repair;  // a min-heap of the repairs' end times
  const auto later = [](double a, double b) { return a > b; };
  const auto start_repair = [&](double at) {
    in_repair.push_back(at + (pool.exponential_repairs ? exponential(pool.repair) : pool.repair));
    std::push_heap(in_repair.begin(), in_repair.end(), later);
  };
  const auto end_repair = [&] {
    std::pop_heap(in_repair.begin(), in_repair.end(), later);
    const double at = in_repair.back();
    in_repair.pop_back();
    return at;
  };
  const auto out = [&] { return static_cast<std::int64_t>(in_repair.size()); };
  // The next failure among `idle` idle nodes and, while running, the job; a repair ending first
  // changes how many are idle, and the exponentials' memorylessness lets the draw begin again.
  double t = 0, waited = 0;
  for (std::int64_t i = 0; i < interruptions;) {
    const double idle = static_cast<double>(pool.spares - out());
    const double rate = 1 / pool.m + idle * pool.idle_rate;
    const double next = t + exponential(1 / rate);
    if (!in_repair.empty() && in_repair.front() <= next) {
      t = end_repair();
      continue;
    }
    t = next;
    if (pool.idle_rate > 0 && coin(rng) >= 1 / pool.m / rate) {  // an idle spare fails
      start_repair(t);
      continue;
    }
    ++i;
    if (pool.need < 1 && coin(rng) >= pool.need) continue;  // a restart without a repair
    start_repair(t);
    const double began = t;
    while (out() > pool.spares) {  // the wait: every healthy node is idle
      const double healthy = static_cast<double>(pool.job_nodes + pool.spares - out());
      const double failure = healthy * pool.idle_rate > 0 ? t + exponential(1 / (healthy * pool.idle_rate))
                                                          : std::numeric_limits<double>::infinity();
      if (in_repair.front() <= failure) {
        t = end_repair();
      } else {
        t = failure;
        start_repair(t);
      }
    }
    waited += t - began;
  }
  return waited / static_cast<double>(interruptions);
}

}  // namespace

TEST_CASE("report/reliability: spare nodes, the wait for a repair, and the spares' GPU-hours") {
  // Llama 3's interruption rate on 16,384 GPUs (one every 3.09 hours) and a day's repair.
  report::CheckpointSize size;
  size.total_bytes = 5.7e12;
  size.per_gpu_bytes = 5.7e12 / 16384;
  models::ReliabilitySpec spec = spec_of(50677, 10, 2000, false);
  const report::ReliabilityEstimate unlimited = report::estimate_reliability(spec, 16384, 8, 8.0, size, 50, 86400.0 * 80);
  CHECK_FALSE(unlimited.spare_nodes.has_value());
  CHECK(unlimited.repair_wait_s == 0);
  spec.node_repair_hours = 24;
  double previous = 0;
  for (const std::int64_t spares : {0, 4, 8, 12, 16, 64}) {
    CAPTURE(spares);
    spec.spare_nodes = spares;
    const report::ReliabilityEstimate e = report::estimate_reliability(spec, 16384, 8, 8.0, size, 50, 86400.0 * 80);
    REQUIRE(e.spare_nodes.has_value());
    CHECK(e.spare_gpus == 8 * spares);
    // Idle nodes do not fail (the default): Erlang's loss system.
    const double load = 24 / e.job_mtbf_hours;
    CHECK(e.no_spare_probability == doctest::Approx(report::erlang_b(spares, load)));
    CHECK(e.repair_wait_s == doctest::Approx(e.no_spare_probability * 24 * 3600 / static_cast<double>(spares + 1)));
    // Against the pool played out: within 3% where waits are common enough to measure.
    if (e.no_spare_probability > 0.01) {
      const SparePool pool = pool_of(e.job_mtbf_hours, 24, spares, 2048, false);
      const double replayed_h = replay_spares(pool, 200000, 7 + static_cast<std::uint64_t>(spares));
      CHECK(e.repair_wait_s / 3600 == doctest::Approx(replayed_h).epsilon(0.03));
    }
    // More spares, fewer waits; never better than a spare always ready.
    CHECK(e.goodput >= previous);
    CHECK(e.goodput <= unlimited.goodput);
    previous = e.goodput;
    // The spares are held for the whole job: the GPU-hours count them.
    if (e.expected_time_to_train_days) {
      CHECK(*e.expected_gpu_hours == doctest::Approx(*e.expected_time_to_train_days * 24 * static_cast<double>(16384 + 8 * spares)));
    }
  }
  CHECK(previous == doctest::Approx(unlimited.goodput).epsilon(1e-6));
  // Llama 3's hardware share: 78% of interruptions take a node out; the rest restart at once.
  spec.spare_nodes = 8;
  const double all_wait = report::estimate_reliability(spec, 16384, 8, 8.0, size, 50, std::nullopt).repair_wait_s;
  spec.node_repair_share = 0.78;
  const report::ReliabilityEstimate part = report::estimate_reliability(spec, 16384, 8, 8.0, size, 50, std::nullopt);
  CHECK(part.no_spare_probability == doctest::Approx(report::erlang_b(8, 0.78 * 24 / part.job_mtbf_hours)));
  CHECK(part.repair_wait_s < all_wait);
  SparePool pool = pool_of(part.job_mtbf_hours, 24, 8, 2048, false);
  pool.need = 0.78;
  CHECK(part.repair_wait_s / 3600 == doctest::Approx(replay_spares(pool, 200000, 99)).epsilon(0.03));
  spec.node_repair_share = 1;
  // Idle nodes failing as working ones do: on 2,048 nodes the waiting job's own idle nodes keep
  // sending nodes to repair, and the wait grows far beyond the soonest repair's (8 spares: 8.3 h
  // against 2.7 h; 12: 3.9 h against 1.8 h), as the pool played out says.
  spec.idle_failure_share = 1;
  for (const std::int64_t spares : {8, 12}) {
    CAPTURE(spares);
    spec.spare_nodes = spares;
    const report::ReliabilityEstimate e = report::estimate_reliability(spec, 16384, 8, 8.0, size, 50, std::nullopt);
    const double load = 24 / e.job_mtbf_hours;
    CHECK(e.no_spare_probability == doctest::Approx(report::spare_shortage_probability(spares, load, load / 2048)));
    const SparePool busy = pool_of(e.job_mtbf_hours, 24, spares, 2048, true);
    const double replayed_h = replay_spares(busy, 100000, 61 + static_cast<std::uint64_t>(spares));
    CHECK(e.repair_wait_s / 3600 == doctest::Approx(replayed_h).epsilon(0.05));
    CHECK(e.repair_wait_s > 2 * e.no_spare_probability * 24 * 3600 / static_cast<double>(spares + 1));
  }
  spec.idle_failure_share = 0;
  // No spare at all: every interruption waits out its own node's repair.
  spec.spare_nodes = 0;
  CHECK(report::estimate_reliability(spec, 16384, 8, 8.0, size, 50, std::nullopt).repair_wait_s == doctest::Approx(24 * 3600));
}

TEST_CASE("report/reliability: idle nodes that fail too: Engset's finite sources and a longer wait") {
  // Without idle failures the pool is Erlang's loss system.
  for (const std::int64_t spares : {0, 1, 4, 12}) {
    for (const double load : {0.0, 0.3, 2.5, 9.0}) {
      CHECK(report::spare_shortage_probability(spares, load, 0) == doctest::Approx(report::erlang_b(spares, load)));
    }
  }
  // Spares failing as the job's n nodes do: Engset's time congestion over n + S sources, each
  // offering beta, sum_k C(n + S, k) beta^k taken directly.
  for (const std::int64_t n : {1, 8, 64}) {
    for (const std::int64_t spares : {1, 3, 8}) {
      for (const double beta : {0.01, 0.2, 1.5}) {
        double term = 1, sum = 1;
        for (std::int64_t k = 1; k <= spares; ++k) {
          term *= beta * static_cast<double>(n + spares - k + 1) / static_cast<double>(k);
          sum += term;
        }
        CHECK(report::spare_shortage_probability(spares, static_cast<double>(n) * beta, beta) == doctest::Approx(term / sum));
      }
    }
  }
  // The shortfall grows with the idle spares' rate, and stays a probability at extreme loads.
  CHECK(report::spare_shortage_probability(4, 2.0, 0.5) > report::spare_shortage_probability(4, 2.0, 0.1));
  CHECK(report::spare_shortage_probability(4, 2.0, 0.1) > report::erlang_b(4, 2.0));
  const double heavy = report::spare_shortage_probability(1000, 1e6, 1e6);
  CHECK(heavy > 0.99);
  CHECK(heavy <= 1.0);
  CHECK(report::spare_shortage_probability(0, 5.0, 5.0) == 1.0);

  // The wait once no spare is left: the soonest of S + 1 repairs while idle nodes do not fail, a
  // first passage summed directly otherwise (n = 8 job nodes, S = 4, 0.3 failures per idle node
  // per repair time: b_j = 0.3 (12 - j), d_j = j, from 5 back to 4).
  CHECK(report::spare_wait_repairs(4, 8, 0) == doctest::Approx(0.2));
  double expected = 0, ratio = 1;
  for (std::int64_t j = 5; j < 12; ++j) {
    expected += ratio;
    ratio *= 0.3 * static_cast<double>(12 - j) / static_cast<double>(j + 1);
  }
  CHECK(report::spare_wait_repairs(4, 8, 0.3) == doctest::Approx(expected / 5));
  CHECK(report::spare_wait_repairs(4, 8, 0.3) > 0.2);
  CHECK(report::spare_wait_repairs(0, 2048, 0) == doctest::Approx(1.0));
  CHECK(std::isinf(report::spare_wait_repairs(0, 1e6, 1.0)));  // a million idle nodes failing once per repair each

  // A small job where the spares are a large part of the pool: 8 nodes (64 GPUs), a harsh 2,000
  // GPU-hours between interruptions (one every 31 hours) and 3-day repairs. With idle nodes
  // failing as working ones do, the estimate follows the pool played out with them (repairs of
  // exponential length: the chain's own assumption; of fixed length: close), and Erlang's
  // answer, without them, is far off.
  report::CheckpointSize size;
  size.total_bytes = 1e11;
  size.per_gpu_bytes = 1e11 / 64;
  models::ReliabilitySpec spec = spec_of(2000, 10, 100, false);
  spec.node_repair_hours = 72;
  for (const std::int64_t spares : {2, 4, 6}) {
    CAPTURE(spares);
    spec.spare_nodes = spares;
    spec.idle_failure_share = 1;
    const report::ReliabilityEstimate busy = report::estimate_reliability(spec, 64, 8, 5.0, size, 50, std::nullopt);
    spec.idle_failure_share = 0;
    const report::ReliabilityEstimate latent = report::estimate_reliability(spec, 64, 8, 5.0, size, 50, std::nullopt);
    CHECK(busy.idle_failure_share == 1);
    CHECK(latent.no_spare_probability == doctest::Approx(report::erlang_b(spares, 72 / latent.job_mtbf_hours)));
    SparePool pool = pool_of(busy.job_mtbf_hours, 72, spares, 8, true);
    pool.exponential_repairs = true;
    const double exponential_h = replay_spares(pool, 200000, 31 + static_cast<std::uint64_t>(spares));
    pool.exponential_repairs = false;
    const double fixed_h = replay_spares(pool, 200000, 51 + static_cast<std::uint64_t>(spares));
    // 2 spares: 20.3 h per interruption against 20.2 and 20.3 played out (Erlang's: 10.7); 6: 0.68 h
    // against 0.67 and 0.68 (Erlang's: 0.22).
    CHECK(busy.repair_wait_s / 3600 == doctest::Approx(exponential_h).epsilon(0.03));
    CHECK(busy.repair_wait_s / 3600 == doctest::Approx(fixed_h).epsilon(0.03));
    CHECK(latent.repair_wait_s / 3600 < 0.6 * fixed_h);
    CHECK(busy.goodput < latent.goodput);
    // Idle nodes that do not fail: the pool played out without idle failures, fixed repairs.
    pool.idle_rate = 0;
    CHECK(latent.repair_wait_s / 3600 == doctest::Approx(replay_spares(pool, 200000, 41 + static_cast<std::uint64_t>(spares))).epsilon(0.03));
  }
}

TEST_CASE("report/reliability: the cheapest count of spares holds the fewest GPUs per unit of work") {
  // Llama 3's rate on 16,384 GPUs, day-long repairs: every count from 0 to 64 played against the
  // chosen one, each at its own best interval.
  report::CheckpointSize size;
  size.total_bytes = 5.7e12;
  size.per_gpu_bytes = 5.7e12 / 16384;
  models::ReliabilitySpec spec = spec_of(50677, 10, 2000, false);
  spec.node_repair_hours = 24;
  const auto held_per_work = [](const report::ReliabilityEstimate& e) {
    return static_cast<double>(16384 + e.spare_gpus) / e.goodput;
  };
  for (const double share : {1.0, 0.78}) {
    CAPTURE(share);
    spec.node_repair_share = share;
    spec.spare_nodes.reset();
    spec.cheapest_spares = true;
    const report::ReliabilityEstimate cheapest = report::estimate_reliability(spec, 16384, 8, 8.0, size, 50, 86400.0 * 80);
    REQUIRE(cheapest.spare_nodes.has_value());
    CHECK(cheapest.spares_cheapest);
    spec.cheapest_spares = false;
    std::int64_t best = -1;
    double best_cost = 0;
    for (std::int64_t s = 0; s <= 64; ++s) {
      spec.spare_nodes = s;
      const report::ReliabilityEstimate e = report::estimate_reliability(spec, 16384, 8, 8.0, size, 50, 86400.0 * 80);
      CHECK_FALSE(e.spares_cheapest);
      if (e.goodput > 0 && (best < 0 || held_per_work(e) < best_cost)) {
        best = s;
        best_cost = held_per_work(e);
      }
      if (s == *cheapest.spare_nodes) {
        CHECK(e.goodput == cheapest.goodput);
        CHECK(*e.expected_gpu_hours == *cheapest.expected_gpu_hours);
      }
    }
    CHECK(*cheapest.spare_nodes == best);
    CHECK(held_per_work(cheapest) == doctest::Approx(best_cost));
    // Neither too few (the waits dominate) nor so many that the job trains as with a spare always
    // ready: about 7.8 nodes are in repair at a time at the full share.
    CHECK(best > 8);
    CHECK(best < 32);
  }
  // A job that never finishes at any count reports none, with no goodput.
  models::ReliabilitySpec hopeless = spec_of(1, 60, 1, false);
  hopeless.node_repair_hours = 24;
  hopeless.cheapest_spares = true;
  const report::ReliabilityEstimate e = report::estimate_reliability(hopeless, 16384, 8, 8.0, size, 50, 86400.0);
  CHECK(e.goodput == 0);
  REQUIRE(e.spare_nodes.has_value());
  CHECK(*e.spare_nodes == 0);
  CHECK_FALSE(e.expected_time_to_train_days.has_value());
}
