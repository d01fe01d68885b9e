#include "report/sensitivity.h"

#include <algorithm>

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
    const double speed = kSensitivitySpeeds[j % kSpeeds];
    RunOptions o;
    o.record = false;
    o.nominal = false;
    o.cluster = base.cluster;
    o.comm_time_scale[categories[k]] = 1 / speed;  // 0 when free
    const RunResult r = simulate(base.scenario, o);
    out[k].variants[j % kSpeeds] = SpeedVariant{speed, r.iteration_time_s, of_kind(r.breakdown.exposed_by_kind, out[k].kind)};
  });
  return out;
}

}  // namespace trainsim::report
