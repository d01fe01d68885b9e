#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "config/scenario.h"
#include "report/comparison.h"
#include "report/html_timeline.h"
#include "report/simulation.h"
#include "report/svg_timeline.h"
#include "report/timeline.h"

namespace trainsim::cli {

namespace {

struct CompareArgs {
  std::string a, b;
  std::vector<std::string> both, only_a, only_b;
  std::string json, svg, html;
  bool reproducible = false;
};

int compare(const CompareArgs& args) {
  std::vector<std::string> set_a = args.both, set_b = args.both;
  set_a.insert(set_a.end(), args.only_a.begin(), args.only_a.end());
  set_b.insert(set_b.end(), args.only_b.begin(), args.only_b.end());
  // A scenario changed on the command line says so in its name (A and B may be one file).
  auto load = [](const std::string& file, const std::vector<std::string>& overrides) {
    config::Scenario s = config::load_scenario(file, overrides);
    if (!overrides.empty()) {
      s.name += " [";
      for (std::size_t i = 0; i < overrides.size(); ++i) s.name += (i ? ", " : "") + overrides[i];
      s.name += "]";
    }
    return s;
  };
  const config::Scenario a = load(args.a, set_a);
  const config::Scenario b = load(args.b, set_b);
  report::RunOptions options;
  options.record = !args.svg.empty() || !args.html.empty();
  const report::RunResult ra = report::simulate(a, options);
  const report::RunResult rb = report::simulate(b, options);
  if (args.json != "-") std::cout << report::comparison_text(ra, rb);
  if (!args.json.empty()) {
    write_output(args.json, [&](std::ostream& o) { o << report::comparison_json(ra, rb, !args.reproducible).dump(2) << "\n"; });
  }
  if (options.record) {
    const std::vector<report::Timeline> panels{report::build_timeline(ra), report::build_timeline(rb)};
    if (!args.svg.empty()) write_output(args.svg, [&](std::ostream& o) { report::write_svg(panels, o); });
    if (!args.html.empty()) write_output(args.html, [&](std::ostream& o) { report::write_html(panels, o); });
  }
  return 0;
}

}  // namespace

void add_compare_command(CLI::App& app, Registry& registry) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = subcommand(app, "compare", "Simulate two scenarios and explain the difference");
  cmd->add_option("a", args->a, "Scenario A (JSON)")->required();
  cmd->add_option("b", args->b, "Scenario B (JSON)")->required();
  cmd->add_option("--set", args->both, "Override a value in both scenarios: key.path=value (repeatable)");
  cmd->add_option("--set-a", args->only_a, "Override a value in scenario A only (repeatable)");
  cmd->add_option("--set-b", args->only_b, "Override a value in scenario B only (repeatable)");
  cmd->add_option("--json", args->json, "Write both summaries, the differences and the attribution as JSON ('-': stdout)");
  cmd->add_option("--svg", args->svg, "Write both iterations stacked on one time axis (SVG) to FILE");
  cmd->add_option("--html", args->html, "Write the same as an interactive page (HTML) to FILE");
  cmd->add_flag("--reproducible", args->reproducible,
                "Leave out how long the simulations took (simulator.wall_s): the same scenarios then give byte-identical JSON");
  cmd->footer(
      "Example: trainsim compare scenarios/teaching/03b-pipeline-1f1b.json scenarios/teaching/03c-pipeline-interleaved.json "
      "--svg 1f1b-vs-interleaved.svg");
  registry.add(cmd, [args]() { return compare(*args); });
}

}  // namespace trainsim::cli
