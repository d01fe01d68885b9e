#pragma once
// Comparison of two runs (`trainsim compare`): the headline numbers side by side with their
// differences, and the change of iteration time attributed to its causes. Each run's breakdown
// (of its critical rank) splits its iteration time into compute, recompute, optimizer, pipeline
// bubble, exposed communication by kind, waiting for peers and idle, parts that add up to the
// iteration time; so the part-by-part differences add up to the change of iteration time.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/simulation.h"

namespace trainsim::report {

struct Cause {
  std::string name;   // "compute", "pipeline_bubble", "exposed_tp_communication", ...
  std::string label;  // "compute", "pipeline bubble", "exposed TP communication", ...
  double a_s = 0, b_s = 0;
  double change_s() const { return b_s - a_s; }
};

struct Comparison {
  std::vector<Cause> causes;  // in a fixed order; their changes sum to the iteration-time change
  double change_s = 0;        // B's iteration time minus A's
  std::size_t largest = 0;    // index of the cause with the largest absolute change
};

Comparison compare_runs(const RunResult& a, const RunResult& b);

// The two summaries side by side (human text), then the attribution.
std::string comparison_text(const RunResult& a, const RunResult& b);

// {"a": summary, "b": summary, "difference": {...}, "attribution": {...}}. `include_wall_time`
// as for summary_json.
nlohmann::ordered_json comparison_json(const RunResult& a, const RunResult& b, bool include_wall_time = true);

}  // namespace trainsim::report
