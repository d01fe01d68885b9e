#include "report/sensitivity.h"

#include <algorithm>
#include <cmath>

#include "models/graph_vocabulary.h"
#include "report/parallel_jobs.h"

namespace trainsim::report {

namespace {

// The value of `kind` in one of TimeBreakdown's by-kind lists (0 when absent).
double of_kind(const std::vector<std::pair<std::string, double>>& by_kind, const std::string& kind) {
  for (const auto& [k, v] : by_kind) {
    if (k == kind) return v;
  }
  return 0;
}

// The iteration time of `base`'s scenario with `category` at `speed` times its modelled speed
// (infinity: free), and that kind's exposed time on the critical rank.
SpeedVariant at_speed(const RunResult& base, std::uint8_t category, double speed) {
  RunOptions o;
  o.record = false;
  o.nominal = false;
  o.cluster = base.cluster;
  o.comm_time_scale[category] = 1 / speed;  // 0 when free
  const RunResult r = simulate(base.scenario, o);
  return SpeedVariant{speed, r.iteration_time_s, of_kind(r.breakdown.exposed_by_kind, communication_kind(category))};
}

// The lowest speed in [lo, hi] at which time(speed) <= limit, to within kSensitivityResolution,
// given that it holds at hi and not at lo; hi itself when the bracket is that narrow already.
template <typename TimeAt>
double bisect(const TimeAt& time_at, double lo, double hi, double limit) {
  while (hi / lo > kSensitivityResolution) {
    const double mid = std::sqrt(lo * hi);
    (time_at(mid) <= limit ? hi : lo) = mid;
  }
  return hi;
}

static_assert(kSensitivitySpeeds[0] == 0.5 && kSensitivitySpeeds[1] == 2.0 && kSensitivitySpeeds[2] == std::numeric_limits<double>::infinity(),
              "find_edges reads the variants as half speed, twice the speed and free");

// Fills c.hide_speed and c.tolerated_speed from its variants (half, twice, free) and further
// simulations of `category`.
void find_edges(const RunResult& base, std::uint8_t category, CommunicationSensitivity& c) {
  const auto time_at = [&](double speed) { return at_speed(base, category, speed).iteration_time_s; };
  const double t = base.iteration_time_s, slack = kSensitivityTolerance * t;
  const double half = c.variants[0].iteration_time_s, twice = c.variants[1].iteration_time_s;
  const double free = c.variants[2].iteration_time_s;

  // Hidden: within the slack of free traffic's iteration. Brackets upward by factors of 4.
  const double hidden = free + slack;
  if (t <= hidden) {
    c.hide_speed = 1;
  } else {
    double lo = 1, hi = 2;
    bool found = twice <= hidden;
    while (!found && hi < kSensitivityRange) {
      lo = hi;
      hi = std::min(4 * hi, kSensitivityRange);
      found = time_at(hi) <= hidden;
    }
    if (found) c.hide_speed = bisect(time_at, lo, hi, hidden);
  }

  // Tolerated: within the slack of the modelled iteration. Brackets downward by factors of 4.
  const double tolerated = t + slack;
  double lo = 0.5, hi = 1;
  bool failed = half > tolerated;
  while (!failed && lo > 1 / kSensitivityRange) {
    hi = lo;
    lo = std::max(lo / 4, 1 / kSensitivityRange);
    failed = time_at(lo) > tolerated;
  }
  if (failed) c.tolerated_speed = bisect(time_at, lo, hi, tolerated);
}

}  // namespace

std::vector<CommunicationSensitivity> communication_sensitivity(const RunResult& base, unsigned threads) {
  // Kinds that move data somewhere in the iteration (not only on the critical rank).
  std::vector<std::uint8_t> categories;
  for (std::uint8_t c = models::kTpComm; c < models::kNumCategories; ++c) {
    const bool used = std::any_of(base.engine.accounts.begin(), base.engine.accounts.end(),
                                  [c](const sim::RankAccount& a) { return a.busy[c] > sim::Duration::zero(); });
    if (used) categories.push_back(c);
  }
  constexpr std::size_t kSpeeds = std::size(kSensitivitySpeeds);
  std::vector<CommunicationSensitivity> out(categories.size());
  for (std::size_t i = 0; i < categories.size(); ++i) {
    out[i].kind = communication_kind(categories[i]);
    out[i].time_s = of_kind(base.breakdown.communication_by_kind, out[i].kind);
    out[i].exposed_s = of_kind(base.breakdown.exposed_by_kind, out[i].kind);
    out[i].variants.resize(kSpeeds);
  }

  // One job per (kind, speed); each lands in its own slot, so the order never depends on timing.
  run_jobs(categories.size() * kSpeeds, threads, [&](std::size_t j) {
    const std::size_t k = j / kSpeeds;
    out[k].variants[j % kSpeeds] = at_speed(base, categories[k], kSensitivitySpeeds[j % kSpeeds]);
  });
  // Then each kind's two searches, one job per kind: the simulations within one depend on each
  // other's outcome, so they run in order.
  run_jobs(categories.size(), threads, [&](std::size_t k) { find_edges(base, categories[k], out[k]); });
  return out;
}

}  // namespace trainsim::report
