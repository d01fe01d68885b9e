#pragma once
// The summary of a run: as JSON (DESIGN.md's stable field names) and as human text.

#include <string>

#include <nlohmann/json.hpp>

#include "report/simulation.h"

namespace trainsim::report {

// `include_wall_time`: false drops simulator.wall_s (the only field that varies between runs).
nlohmann::ordered_json summary_json(const RunResult& r, bool include_wall_time = true);
// `include_wall_time`: false leaves out how long the simulation took (the line's "in N s").
std::string summary_text(const RunResult& r, bool include_wall_time = true);

// The communication-sensitivity tables of a run, by kind, of the NICs and of NVLink (empty when none was
// computed), as summary_text() prints them, and the by-kind JSON array (`communication_sensitivity`).
std::string sensitivity_text(const RunResult& r);
nlohmann::ordered_json sensitivity_json(const RunResult& r);
// The NIC and NVLink sensitivities as JSON (`nic_sensitivity`, `nvlink_sensitivity`; null when
// none was computed).
nlohmann::ordered_json nic_sensitivity_json(const RunResult& r);
nlohmann::ordered_json nvlink_sensitivity_json(const RunResult& r);

}  // namespace trainsim::report
