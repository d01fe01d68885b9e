#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "sim/error.h"
#include "config/scenario.h"
#include "validate/kineto_trace.h"
#include "validate/suite.h"
#include "validate/validation_report.h"

namespace trainsim::cli {

namespace {

struct ValidateArgs {
  std::string suite;
  std::string json;
  std::string only;
  std::vector<std::string> overrides;
  int jobs = 0;
};

int run_suite(const ValidateArgs& a) {
  check_jobs("--jobs", a.jobs);
  if (a.suite.empty()) {
    throw InputError("validate", "", "expected a suite file (trainsim validate SUITE.json) or a subcommand (see --help)");
  }
  // A case that cannot be read or simulated does not hide the others: every other case is
  // predicted and reported, the bad ones are listed, and the exit code is still 2.
  const validate::Suite suite = validate::read_suite(a.suite, a.only, validate::OnCaseError::kRecord, a.overrides);
  validate::ValidateOptions options;
  options.record_failures = true;
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
  if (report.failed.empty()) return 0;
  std::cerr << "trainsim: error: " << report.failed.size() << " of " << report.failed.size() + report.cases.size()
            << " cases could not be predicted:\n";
  for (const validate::FailedCase& f : report.failed) std::cerr << "  " << f.error << "\n";
  return 2;
}

struct KinetoArgs {
  std::string trace;
  std::string scenario;
  std::vector<std::string> overrides;
  std::optional<std::int64_t> rank;
  std::string json;
};

int run_kineto(const KinetoArgs& a) {
  if (a.rank && *a.rank < 0) throw InputError("command line", "--rank", "expected a rank of at least 0, got " + std::to_string(*a.rank));
  const config::Scenario scenario = config::load_scenario(a.scenario, a.overrides);
  const validate::KinetoTrace trace = validate::read_kineto_trace(a.trace);
  const validate::KinetoComparison c =
      validate::compare_kineto(trace, scenario, a.rank);
  if (a.json != "-") std::cout << validate::to_text(c);
  if (!a.json.empty()) write_output(a.json, [&](std::ostream& o) { o << validate::to_json(c).dump(2) << "\n"; });
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
  cmd->add_option("--set", args->overrides, "Override a value in every case's scenario: key.path=value (repeatable)");
  cmd->footer("Example: trainsim validate validate/suites/published_runs.json --json -");
  registry.add(cmd, [args]() { return run_suite(*args); });

  auto kineto = std::make_shared<KinetoArgs>();
  CLI::App* k = subcommand(*cmd, "kineto", "Compare a PyTorch profiler (Kineto) trace of one rank with the simulated rank");
  k->add_option("trace", kineto->trace, "Kineto trace of one rank (.json or .json.gz)")->required();
  k->add_option("--scenario", kineto->scenario, "Scenario of the profiled run")->required();
  k->add_option("--set", kineto->overrides, "Override a scenario value: key.path=value (repeatable)");
  k->add_option("--rank", kineto->rank, "Rank of the trace (default: its distributedInfo.rank, else 0)");
  k->add_option("--json", kineto->json, "Write the comparison as JSON to FILE ('-' for stdout, replacing the text)");
  k->footer("Groups GPU kernels into GEMM, attention, each NCCL collective, elementwise/norm and optimizer per\n"
            "ProfilerStep#N and compares the time per iteration with the simulated rank.");
  registry.add(k, [kineto]() { return run_kineto(*kineto); });
}

}  // namespace trainsim::cli
