// A scenario end to end: parsed (as the scenario target), then simulated and summarised when
// the plan is small (simulation.max_events forced to 200,000 so each input runs in milliseconds).
// Beyond the harness contract, the results must be sane: finite, positive iteration time and
// throughput, MFU and HFU in (0, 1], memory figures non-negative, goodput in [0, 1] and never a
// shorter time to train with interruptions than without, each recorded rank's gap records adding
// up to its account of idle time (what the pictures and the trace draw), and the JSON summary,
// trace and picture writable.

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "config/scenario.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/targets/scenario_input.h"
#include "report/simulation.h"
#include "report/svg_timeline.h"
#include "report/timeline.h"
#include "report/reliability.h"
#include "report/summary.h"
#include "report/trace_writer.h"

TRAINSIM_FUZZ_TARGET(scenario_run) {
  trainsim::fuzz::ScenarioInput in(input);
  in.overrides.push_back("simulation.max_events=200000");
  const trainsim::fuzz::InputFile file(in.scenario, "scenario_run");
  const trainsim::config::Scenario scenario = trainsim::config::load_scenario(file.path(), in.overrides);
  const trainsim::report::RunResult r = trainsim::report::simulate(scenario);
  auto check = [](bool ok, const char* what) {
    if (!ok) trainsim::fuzz::finding("scenario_run", what);
  };
  check(std::isfinite(r.iteration_time_s) && r.iteration_time_s > 0, "iteration time not finite and positive");
  check(std::isfinite(r.tokens_per_s) && r.tokens_per_s > 0, "throughput not finite and positive");
  check(r.mfu > 0 && r.mfu <= 1 && r.hfu >= r.mfu && r.hfu <= 1, "MFU/HFU outside (0, 1]");
  check(r.peak_bytes_per_gpu >= 0 && r.capacity_bytes_per_gpu > 0, "negative memory figures");
  for (const auto& stage : r.stages) check(stage.activation_peak_bytes >= 0, "negative activation memory");
  if (const auto e = trainsim::report::estimate_reliability(r)) {
    check(e->goodput >= 0 && e->goodput <= 1, "goodput outside [0, 1]");
    check(e->checkpoint_interval_iterations >= 1 && e->checkpoint_blocking_s >= 0, "no checkpoint interval or a negative save");
    if (e->expected_time_to_train_days) {
      const double days = *scenario.training.train_tokens / r.tokens_per_s / 86400;
      check(*e->expected_time_to_train_days >= days * (1 - 1e-12), "interruptions shortened the time to train");
    }
  }
  std::map<std::uint32_t, trainsim::sim::RankAccount> sums;  // per recorded rank
  for (const trainsim::sim::TaskRecord& rec : r.engine.records) sums[trainsim::sim::index(rec.rank)];
  for (const trainsim::sim::GapRecord& g : r.engine.gaps) {
    trainsim::sim::RankAccount& a = sums[trainsim::sim::index(g.rank)];
    const trainsim::sim::Duration d = g.to - g.from;
    check(d > trainsim::sim::Duration::zero(), "empty gap record");
    switch (g.cause) {
      case trainsim::sim::GapRecord::Cause::kHeldBack:
      case trainsim::sim::GapRecord::Cause::kHostSync:
        a.gap_issue[g.category] += d;
        break;
      case trainsim::sim::GapRecord::Cause::kWaiting:
        a.gap_wait[g.category] += d;
        break;
      case trainsim::sim::GapRecord::Cause::kTransferring:
        a.gap_exposed[g.category] += d;
        break;
      case trainsim::sim::GapRecord::Cause::kUnattributed:
        a.gap_other += d;
        break;
      case trainsim::sim::GapRecord::Cause::kTail:
        a.gap_tail[g.category] += d;
        break;
    }
  }
  for (const auto& [rank, sum] : sums) {
    const auto at = std::find(r.engine.ranks.begin(), r.engine.ranks.end(), trainsim::sim::RankId{rank});
    if (at == r.engine.ranks.end()) continue;
    const trainsim::sim::RankAccount& acc = r.engine.accounts[static_cast<std::size_t>(at - r.engine.ranks.begin())];
    check(sum.gap_issue == acc.gap_issue && sum.gap_wait == acc.gap_wait && sum.gap_exposed == acc.gap_exposed &&
              sum.gap_other == acc.gap_other && sum.gap_tail == acc.gap_tail,
          "gap records do not add up to the rank's account");
  }
  std::ostringstream json, trace, svg;
  json << trainsim::report::summary_json(r).dump(2);
  trainsim::report::write_trace(r, trace);
  trainsim::report::write_svg({trainsim::report::build_timeline(r)}, svg);
  check(!json.str().empty() && !trace.str().empty() && !svg.str().empty(), "empty summary, trace or picture");
}
