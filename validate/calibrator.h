#pragma once
// calibrate(): turns measurement files into a compute calibration file for one GPU type.
//
// Inputs are recognised by content: a GEMM sweep (array of matmul tables), fused-attention
// benchmarks ({"tables": ...} with "pass" rows) and validation suites ({"cases": ...}) of
// published or measured training runs. The GEMM model of each data type is fitted to the sweep
// points of that GPU, the attention model of each pass to the attention benchmarks, and then the
// sustained fraction to the suite cases on the GPU's architecture, and the host time per task to
// the suites given as host runs. What the inputs do not cover
// is kept from the base calibration (the GPU preset's file unless another is given), with the
// record of how it was fitted, so running calibrate on the files a calibration was made from
// reproduces that file byte for byte.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topologies/hardware.h"
#include "validate/kernel_fit.h"
#include "validate/sustained_fit.h"

namespace trainsim::validate {

struct CalibrationInputs {
  std::vector<std::string> files;
  std::string gpu;        // GPU preset or file; empty: the one the GEMM/attention tables name
  std::string base;       // base calibration file; empty: the GPU preset's
  std::string attention;  // attention implementation to fit; empty: the base calibration's, else the only one present
  int jobs = 1;           // suite cases simulated at once
  // Suites whose measured iterations fit the host time per task (runs of small models; see
  // validate/host_fit.h), after the sustained fraction.
  std::vector<std::string> host_runs;
  // Suites of runs kept out of every fit, predicted with the finished calibration and recorded in
  // its fit.checks (what a prediction on their architecture is worth; `trainsim run` prints it).
  std::vector<std::string> check_runs;
  // `--set key.path=value` applied to the scenario of every run above (and of the fitted suites),
  // as for `trainsim run`; the fit records name them.
  std::vector<std::string> overrides;
};

struct CalibrationResult {
  std::string gpu_preset;  // as named (preset name or file)
  topo::GpuSpec gpu;       // with the fitted calibration
  std::vector<FitReport> reports;  // what was fitted, in order: GEMM dtypes, attention passes, sustained fraction
  nlohmann::json fit;      // the "fit" record written into the calibration file
};

CalibrationResult calibrate(const CalibrationInputs& inputs);

// The calibration file: gpu, source, fit, and the parameters (config::to_json).
nlohmann::json calibration_json(const CalibrationResult& r);
// Human-readable fit summary and residuals (`all`: every point, else the largest ten per fit).
std::string residuals_text(const CalibrationResult& r, bool all);

}  // namespace trainsim::validate
