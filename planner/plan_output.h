#pragma once
// How a plan search is shown: a ranked text table, CSV, JSON (DESIGN's field names), and the
// time-to-train vs GPUs curve as an SVG plot.

#include <ostream>
#include <string>
#include <vector>

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

// One cluster of a hardware comparison (`plan --cluster A,B`): the name it was given by (a preset
// or a file), and its search.
struct ClusterSearch {
  std::string label;
  const PlanRequest* request = nullptr;
  const PlanReport* report = nullptr;
};

// The plan a cluster's search answers with: with a deadline that some GPU count meets, the best
// plan at the smallest such count; otherwise the best plan found. nullptr when none is feasible.
const PlanResult* headline_plan(const PlanRequest& request, const PlanReport& report);

// How a comparison ranks its clusters' headline plans: by "cost" where every one is priced, else
// by "time_to_train_days" (with interruptions where the request has them) where the token budget
// is known, else by "tokens_per_s" (of elapsed time), best first. With a deadline, the clusters
// that meet it come first; clusters without a feasible plan come last; ties keep the given order.
struct ComparisonOrder {
  std::string by;
  std::vector<std::size_t> order;  // indices into the searches
};
ComparisonOrder comparison_order(const std::vector<ClusterSearch>& searches);

// The comparison as a ranked text table (after each cluster's own plan_table), as JSON
// ({"clusters": [each cluster's plan_json with its name], "comparison": {"by", "ranking"}}), as
// CSV (write_plan_csv's rows of every cluster, a cluster column first) and as one time-to-train
// plot with a curve per cluster (every request with train_tokens).
std::string comparison_table(const std::vector<ClusterSearch>& searches);
nlohmann::ordered_json comparison_json(const std::vector<ClusterSearch>& searches, std::size_t top);
void write_comparison_csv(const std::vector<ClusterSearch>& searches, std::ostream& out);
void write_comparison_curve_svg(const std::vector<ClusterSearch>& searches, std::ostream& out);

}  // namespace trainsim::planner
