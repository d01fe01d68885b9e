#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "sim/error.h"
#include "validate/suite.h"
#include "validate/validation_report.h"

namespace trainsim::cli {

namespace {

struct ValidateArgs {
  std::string suite;
  std::string json;
  std::string only;
  int jobs = 0;
};

int run_suite(const ValidateArgs& a) {
  if (a.suite.empty()) {
    throw InputError("validate", "", "expected a suite file (trainsim validate SUITE.json) or a subcommand (see --help)");
  }
  const validate::Suite suite = validate::read_suite(a.suite, a.only);
  validate::ValidateOptions options;
  options.jobs = a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (isatty(STDERR_FILENO)) {
    options.progress = [](std::size_t done, std::size_t total) {
      std::fprintf(stderr, "\rsimulated %zu of %zu cases", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  const validate::ValidationReport report = validate::validate_suite(suite, options);
  if (a.json != "-") std::cout << validate::to_text(report);
  if (!a.json.empty()) {
    write_output(a.json, [&](std::ostream& o) { o << validate::to_json(report).dump(2) << "\n"; });
  }
  return 0;
}

}  // namespace

void add_validate_command(CLI::App& app, Registry& registry) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* cmd = subcommand(app, "validate", "Compare predictions with measurements");
  cmd->add_option("suite", args->suite, "Validation suite (JSON: cases with a scenario and measured values)");
  cmd->add_option("--json", args->json, "Write the comparison as JSON to FILE ('-' for stdout, replacing the text)");
  cmd->add_option("--only", args->only, "Only the cases whose id contains this text");
  cmd->add_option("--jobs,-j", args->jobs, "Cases simulated at once (default: one per CPU core)");
  cmd->footer("Example: trainsim validate validate/suites/published_runs.json --json -");
  registry.add(cmd, [args]() { return run_suite(*args); });
}

}  // namespace trainsim::cli
