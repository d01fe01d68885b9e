#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "validate/calibrator.h"

namespace trainsim::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> files;
  std::string output;
  std::string gpu;
  std::string base;
  std::string attention;
  std::vector<std::string> host_runs;
  std::vector<std::string> check_runs;
  std::vector<std::string> overrides;
  bool all_residuals = false;
  int jobs = 0;
};

int run(const CalibrateArgs& a) {
  check_jobs("--jobs", a.jobs);
  validate::CalibrationInputs in;
  in.files = a.files;
  in.gpu = a.gpu;
  in.base = a.base;
  in.attention = a.attention;
  in.host_runs = a.host_runs;
  in.check_runs = a.check_runs;
  in.overrides = a.overrides;
  in.jobs = a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const validate::CalibrationResult result = validate::calibrate(in);
  std::cout << validate::residuals_text(result, a.all_residuals);
  if (!a.output.empty()) {
    write_output(a.output, [&](std::ostream& o) { o << validate::calibration_json(result).dump(2) << "\n"; });
    if (a.output != "-") std::cout << "\nwrote " << a.output << "\n";
  }
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, Registry& registry) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = subcommand(app, "calibrate", "Fit the compute model's parameters to measurements");
  cmd->add_option("measurements", args->files,
                  "GEMM sweeps (trainsim-bench-gemm output), attention benchmarks, validation suites of training runs, "
                  "all_reduce sweeps of 2-8 GPUs of one node (nccl-tests logs or measurement records)");
  cmd->add_option("-o,--output", args->output, "Write the calibration file (JSON) to FILE ('-' for stdout)");
  cmd->add_option("--gpu", args->gpu, "GPU preset or file (default: the GPU the measurement tables name)");
  cmd->add_option("--base", args->base, "Calibration to start from and keep where the measurements say nothing (default: the GPU's)");
  cmd->add_option("--attention", args->attention, "Attention implementation to fit (e.g. cudnn, flash_attention_2)");
  cmd->add_option("--host-runs", args->host_runs,
                  "Validation suites of small-model runs to fit the host time per task to (e.g. validate/suites/vtrain_a100.json)");
  cmd->add_option("--check-runs", args->check_runs,
                  "Validation suites of runs kept out of the fit: predicted with the finished calibration and recorded in "
                  "its fit.checks (e.g. validate/suites/dgxc_gb200.json for b200)");
  cmd->add_option("--set", args->overrides,
                  "Override a value in the scenario of every training run (all suites): key.path=value (repeatable)");
  cmd->add_flag("--all-residuals", args->all_residuals, "Print every point's residual (default: the ten largest per fit)");
  cmd->add_option("--jobs,-j", args->jobs, "Training-run cases simulated at once (default: one per CPU core)");
  cmd->footer("Example: trainsim calibrate validate/data/gemm_measurements.json -o h100.json\n"
              "         trainsim calibrate ar_2gpu.log ar_4gpu.log ar_8gpu.log --gpu a100-sxm4-80gb -o my_a100.json");
  registry.add(cmd, [args]() { return run(*args); });
}

}  // namespace trainsim::cli
