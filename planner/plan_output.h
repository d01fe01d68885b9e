#pragma once
// How a plan search is shown: a ranked text table, CSV, JSON (DESIGN's field names), and the
// time-to-train vs GPUs curve as an SVG plot.

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/plan_search.h"

namespace trainsim::planner {

std::string plan_table(const PlanRequest& request, const PlanReport& report, std::size_t top);
void write_plan_csv(const PlanReport& report, std::ostream& out);
nlohmann::ordered_json plan_json(const PlanRequest& request, const PlanReport& report, std::size_t top);
// REQUIRES: the report has train-time figures (the request had train_tokens).
void write_plan_curve_svg(const PlanRequest& request, const PlanReport& report, std::ostream& out);
// "TP 4 PP 8 (x6) DP 32 mbs 1 selective dist-opt": a plan in one line.
std::string describe_plan(const PlanResult& r);

}  // namespace trainsim::planner
