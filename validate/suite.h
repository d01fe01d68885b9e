#pragma once
// Suite: a validation suite file (DESIGN.md): cases, each a scenario (inline or a file) with the
// values measured on real hardware and the source they come from. Read and validated once; any
// problem is an InputError naming the file and the JSON path (or, on request, a failed case).
//
// { "description": "...",
//   "cases": [ { "id": "...", "source": "...", "family": "gpt", "notes": ["assumption", ...],
//                "scenario": { ... } | "scenario_file": "relative/or/absolute.json",
//                "measured": { "iteration_time_s": 13.75, ...,
//                              "peak_memory_stage": "last" | 0.. /* whose peak_memory_bytes */,
//                              "out_of_memory": true | false /* whether the run ran out of GPU memory */ } } ],
//   "excluded": [ { "id": "...", "reason": "..." } ] }

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "config/scenario.h"

namespace trainsim::validate {

// The quantities a case can compare, with the names of `trainsim run --json`.
enum class Metric : std::uint8_t { kIterationTime, kModelTflops, kHardwareTflops, kMfu, kPeakMemory };
inline constexpr std::array<Metric, 5> kMetrics{Metric::kIterationTime, Metric::kModelTflops, Metric::kHardwareTflops,
                                                Metric::kMfu, Metric::kPeakMemory};
const char* to_string(Metric m);  // "iteration_time_s", "model_tflops_per_gpu", ...
// A value of `metric` as a time: throughputs (TFLOP/s, MFU) scale as 1 / time, so they invert.
double time_like(Metric metric, double value);

struct Measurement {
  Metric metric = Metric::kIterationTime;
  double value = 0;
};

struct Case {
  std::string id;
  std::string source;
  std::string family;  // model family the case's ranking is judged in; when the file names none, the
                       // leading letters of the model's name, lower-cased ("Llama-2 70B" -> "llama")
  std::vector<std::string> notes;
  config::Scenario scenario;
  std::vector<Measurement> measured;  // in kMetrics order
  // The pipeline stage whose GPU measured peak_memory_bytes (Megatron logs the memory of the last
  // rank, a last-stage GPU); none: the largest peak of any stage, the GPU that decides the fit.
  std::optional<std::int64_t> peak_memory_stage;
  // Whether the run ran out of GPU memory, where the source says: compared with the prediction's
  // verdict (fits). A case may give only this (a plan that could not run has no time).
  std::optional<bool> out_of_memory;
};

struct ExcludedCase {
  std::string id;
  std::string reason;
};

// A case that could not be read (or, in a validation report, predicted): its id (the JSON path of
// the case when it has none) and the error, which names the file and the JSON path.
struct FailedCase {
  std::string id;
  std::string error;
};

struct Suite {
  std::string file;
  std::string description;
  std::vector<Case> cases;
  std::vector<ExcludedCase> excluded;
  std::vector<FailedCase> failed;  // cases that could not be read (OnCaseError::kRecord only)
};

// What read_suite does with a case it cannot read: throw its InputError (a fit needs every case),
// or record it in Suite::failed and go on (validation reports the others). Errors in the suite
// as a whole (not JSON, no cases, duplicate ids, bad exclusions) always throw.
enum class OnCaseError : std::uint8_t { kThrow, kRecord };

// The distinct families of `cases`, in order of first appearance.
std::vector<std::string> families_of(const std::vector<Case>& cases);

// Reads a suite. `only` keeps the cases whose id contains it (empty: all). `overrides`
// (`--set key.path=value`, as for `trainsim run`) apply to every case's scenario.
Suite read_suite(const std::string& file, const std::string& only = "", OnCaseError on_error = OnCaseError::kThrow,
                 const std::vector<std::string>& overrides = {});

// `suite` without the cases that measured no metric (only an out-of-memory verdict): what a fit
// or a check compares.
Suite with_metrics(Suite suite);

}  // namespace trainsim::validate
