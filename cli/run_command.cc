#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "config/scenario.h"
#include "report/html_timeline.h"
#include "report/sensitivity.h"
#include "report/simulation.h"
#include "report/summary.h"
#include "report/svg_timeline.h"
#include "report/timeline.h"
#include "report/trace_writer.h"
#include "sim/error.h"

namespace trainsim::cli {

namespace {

struct RunArgs {
  std::string scenario;
  std::vector<std::string> overrides;
  std::string json;
  std::string trace;
  std::string svg;
  std::string html;
  std::vector<std::string> trace_ranks;
  bool sensitivity = false;
  bool reproducible = false;
};

// The ranks --trace-ranks names. Throws InputError for an item that is not a rank, a range or "all".
std::vector<std::int64_t> parse_ranks(const std::vector<std::string>& items, const config::Scenario& scenario) {
  std::vector<std::int64_t> ranks;
  for (const std::string& item : items) {
    if (item == "all") {
      // Every rank under full fidelity; under symmetric fidelity every simulated rank (the default).
      if (scenario.simulation.full) {
        for (std::int64_t r = 0; r < scenario.num_gpus(); ++r) ranks.push_back(r);
      }
      continue;
    }
    std::size_t used = 0;
    try {
      const std::size_t dash = item.find('-', 1);
      const std::int64_t first = std::stoll(item, &used);
      if (dash == std::string::npos) {
        if (used != item.size()) throw std::invalid_argument(item);
        ranks.push_back(first);
        continue;
      }
      if (used != dash) throw std::invalid_argument(item);
      const std::string tail = item.substr(dash + 1);
      const std::int64_t last = std::stoll(tail, &used);
      if (used != tail.size() || last < first) throw std::invalid_argument(item);
      if (first < 0 || last >= scenario.num_gpus()) {
        throw InputError("--trace-ranks", "", "range " + item + " goes beyond the scenario's " +
                                                  std::to_string(scenario.num_gpus()) + " GPUs");
      }
      for (std::int64_t r = first; r <= last; ++r) ranks.push_back(r);
    } catch (const std::logic_error&) {
      throw InputError("--trace-ranks", "", "'" + item + "' is not a rank, a range FIRST-LAST or 'all'");
    }
  }
  return ranks;
}

int run(const RunArgs& a) {
  const config::Scenario scenario = config::load_scenario(a.scenario, a.overrides);
  report::RunOptions options;
  options.record = !a.trace.empty() || !a.svg.empty() || !a.html.empty();
  options.record_ranks = parse_ranks(a.trace_ranks, scenario);
  report::RunResult result = report::simulate(scenario, options);
  if (a.sensitivity) report::add_sensitivity(result);
  if (a.json != "-") std::cout << report::summary_text(result, !a.reproducible);
  if (!a.json.empty()) {
    write_output(a.json, [&](std::ostream& o) { o << report::summary_json(result, !a.reproducible).dump(2) << "\n"; });
  }
  if (!a.trace.empty()) write_output(a.trace, [&](std::ostream& o) { report::write_trace(result, o); });
  if (!a.svg.empty() || !a.html.empty()) {
    const std::vector<report::Timeline> panels{report::build_timeline(result)};
    if (!a.svg.empty()) write_output(a.svg, [&](std::ostream& o) { report::write_svg(panels, o); });
    if (!a.html.empty()) write_output(a.html, [&](std::ostream& o) { report::write_html(panels, o); });
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, Registry& registry) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = subcommand(app, "run", "Simulate one training iteration of a scenario and report it");
  cmd->add_option("scenario", args->scenario, "Scenario file (JSON; // comments allowed)")->required();
  cmd->add_option("--set", args->overrides, "Override a scenario value: key.path=value (repeatable)");
  cmd->add_option("--json", args->json, "Write the summary as JSON to FILE ('-' for stdout, replacing the text)");
  cmd->add_option("--trace", args->trace, "Write a Chrome/Perfetto trace (JSON; gzip-compressed when FILE ends in .gz)");
  cmd->add_option("--svg", args->svg, "Write a picture of the iteration (SVG) to FILE");
  cmd->add_option("--html", args->html, "Write the picture as an interactive page (HTML: pan, zoom, details on hover) to FILE");
  cmd->add_option("--trace-ranks", args->trace_ranks,
                  "Ranks to record for --trace/--svg/--html: numbers, ranges FIRST-LAST, or 'all' "
                  "(default: one per pipeline stage)")
      ->delimiter(',');
  cmd->add_flag("--reproducible", args->reproducible,
                "Leave out how long the simulation took (simulator.wall_s, the one field that differs between two "
                "runs of a scenario): the same scenario then gives byte-identical output");
  cmd->add_flag("--sensitivity", args->sensitivity,
                "Also re-simulate with each kind of communication (tp, dp, pp, ...) at half speed, twice "
                "the speed and free, everything else unchanged: which traffic is on the critical path; then the speed "
                "that hides each kind and the slowest it tolerates (each within 1% of the iteration); on more than one "
                "node, the NICs the same way; on NVLink nodes, NVLink the same way");
  cmd->footer(
      "Examples:\n"
      "  trainsim run scenarios/gpt3-175b-1024xa100.json --set training.micro_batch_size=2 --json -\n"
      "  trainsim run scenarios/teaching/03b-pipeline-1f1b.json --svg 1f1b.svg --html 1f1b.html\n"
      "  trainsim run scenarios/gpt3-175b-1024xa100.json --sensitivity\n"
      "  trainsim run SCENARIO --set simulation.fidelity=\\\"full\\\" --trace-ranks 0-7,64 --trace trace.json.gz");
  registry.add(cmd, [args]() { return run(*args); });
}

}  // namespace trainsim::cli
