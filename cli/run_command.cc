#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "config/scenario.h"
#include "report/simulation.h"
#include "report/summary.h"
#include "report/trace_writer.h"

namespace trainsim::cli {

namespace {

struct RunArgs {
  std::string scenario;
  std::vector<std::string> overrides;
  std::string json;
  std::string trace;
  std::vector<std::int64_t> trace_ranks;
};

int run(const RunArgs& a) {
  const config::Scenario scenario = config::load_scenario(a.scenario, a.overrides);
  report::RunOptions options;
  options.record = !a.trace.empty();
  options.record_ranks = a.trace_ranks;
  const report::RunResult result = report::simulate(scenario, options);
  if (a.json != "-") std::cout << report::summary_text(result);
  if (!a.json.empty()) {
    write_output(a.json, [&](std::ostream& o) { o << report::summary_json(result).dump(2) << "\n"; });
  }
  if (!a.trace.empty()) write_output(a.trace, [&](std::ostream& o) { report::write_trace(result, o); });
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, Registry& registry) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = subcommand(app, "run", "Simulate one training iteration of a scenario and report it");
  cmd->add_option("scenario", args->scenario, "Scenario file (JSON; // comments allowed)")->required();
  cmd->add_option("--set", args->overrides, "Override a scenario value: key.path=value (repeatable)");
  cmd->add_option("--json", args->json, "Write the summary as JSON to FILE ('-' for stdout, replacing the text)");
  cmd->add_option("--trace", args->trace, "Write a Chrome/Perfetto trace (JSON) to FILE");
  cmd->add_option("--trace-ranks", args->trace_ranks, "Ranks to put in the trace (default: one per pipeline stage)");
  cmd->footer("Example: trainsim run scenarios/gpt3-175b-1024xa100.json --set training.micro_batch_size=2 --json -");
  registry.add(cmd, [args]() { return run(*args); });
}

}  // namespace trainsim::cli
