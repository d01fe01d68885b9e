#pragma once
// The summary of a run: as JSON (DESIGN.md's stable field names) and as human text.

#include <string>

#include <nlohmann/json.hpp>

#include "report/simulation.h"

namespace trainsim::report {

// `include_wall_time`: false drops simulator.wall_s (the only field that varies between runs).
nlohmann::ordered_json summary_json(const RunResult& r, bool include_wall_time = true);
std::string summary_text(const RunResult& r);

}  // namespace trainsim::report
