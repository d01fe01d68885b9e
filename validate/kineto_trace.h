#pragma once
// KinetoTrace: the GPU side of one rank's PyTorch profiler (Kineto) trace, and its comparison
// with the simulated rank.
//
// A Kineto trace is Chrome trace JSON ({"traceEvents": [...], "distributedInfo": {"rank"}, ...};
// `.json.gz` too): GPU kernels are "X" events of category "kernel" (NCCL kernels included),
// copies "gpu_memcpy"/"gpu_memset"; iterations are the "ProfilerStep#N" annotations, on the GPU
// timeline ("gpu_user_annotation") when present, else on the CPU ("user_annotation"), in which
// case a kernel belongs to the step that launched it (matched through the launch's CUDA
// correlation id). On the GPU timeline a step also spans the annotations nested in it (Kineto
// cuts the step's span where theirs begin), up to the next step. Kernels are grouped by what they compute: GEMM, attention, each NCCL
// collective, elementwise/norm, optimizer; copies apart.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/simulation.h"

namespace trainsim::validate {

// Category of a kernel from its name (and NCCL's "Collective name" argument when Kineto has it):
// "gemm", "attention", "elementwise/norm", "optimizer", "nccl:<collective>" (all_reduce,
// all_gather, reduce_scatter, all_to_all, broadcast, reduce, send_recv), "memcpy".
std::string kernel_category(const std::string& name, const std::string& collective = "");

struct KernelEvent {
  std::string name;
  std::string category;
  double start_us = 0;
  double duration_us = 0;
  std::int64_t stream = 0;
  std::optional<std::int64_t> correlation;
};

struct ProfilerStep {
  std::int64_t number = 0;
  double start_us = 0;
  double end_us = 0;
};

struct KinetoTrace {
  std::string file;
  std::optional<std::int64_t> rank;        // distributedInfo.rank
  std::optional<std::int64_t> world_size;  // distributedInfo.world_size
  std::vector<KernelEvent> kernels;        // in time order
  std::vector<ProfilerStep> steps;         // in time order
  bool gpu_steps = false;                  // steps from the GPU timeline (else from the CPU)
  std::map<std::int64_t, double> launches;  // correlation id -> launch time (us), CPU steps only
};

// Throws InputError naming the file and the JSON path of the first malformed event.
KinetoTrace read_kineto_trace(const std::string& file);

// Busy time per category in one profiler step (kernels overlapping on several streams each count).
struct StepProfile {
  std::int64_t number = 0;
  double duration_s = 0;
  std::map<std::string, double> busy_s;
};

// One profile per step (kernels outside every step are left out). A trace without steps is one
// step spanning its kernels.
std::vector<StepProfile> profile_steps(const KinetoTrace& trace);

// Busy time per category of one simulated rank's iteration (communication: from the moment the
// stream reaches the collective, as an NCCL kernel's duration includes waiting for its peers).
// REQUIRES: `rank` was recorded in `run`.
std::map<std::string, double> simulated_busy(const report::RunResult& run, std::int64_t rank);

struct CategoryComparison {
  std::string category;
  double measured_s = 0;   // mean per step
  double predicted_s = 0;  // the simulated iteration
};

struct KinetoComparison {
  std::string trace_file;
  std::int64_t rank = 0;            // the trace's rank
  std::int64_t simulated_rank = 0;  // the simulated rank standing for it (same pipeline stage)
  std::size_t steps = 0;
  double measured_iteration_s = 0;  // mean step duration
  double predicted_iteration_s = 0;
  std::vector<CategoryComparison> categories;  // sorted by category name
  std::vector<StepProfile> per_step;
};

// Simulates `scenario` recording the rank of the trace (or `rank` when given) and compares.
KinetoComparison compare_kineto(const KinetoTrace& trace, const config::Scenario& scenario,
                                std::optional<std::int64_t> rank = std::nullopt);

nlohmann::json to_json(const KinetoComparison& c);
std::string to_text(const KinetoComparison& c);

}  // namespace trainsim::validate
