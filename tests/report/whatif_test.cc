// What-ifs that need every rank simulated: stragglers and degraded links.

#include <doctest/doctest.h>
#include <algorithm>
#include <string>

#include "config/scenario.h"
#include "models/graph_vocabulary.h"
#include "report/simulation.h"
#include "tests/scenario_helpers.h"

using namespace trainsim;

namespace {

const std::string kGolden = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/";

report::RunResult run_golden_full(const std::string& file, std::vector<std::string> overrides) {
  overrides.push_back("simulation.fidelity=\"full\"");
  return tests::simulate_file(kGolden + file, overrides);
}

double dp_time(const report::RunResult& r, std::uint32_t rank) {
  for (std::size_t i = 0; i < r.engine.ranks.size(); ++i) {
    if (sim::index(r.engine.ranks[i]) == rank) return r.engine.accounts[i].busy[models::kDpComm].seconds();
  }
  FAIL("rank not simulated");
  return 0;
}

}  // namespace

TEST_CASE("report/what-if: one 1.2x straggler slows the whole synchronous iteration") {
  const auto nominal = run_golden_full("gpt3-7.5b-tp4-pp2-a100.json", {});
  const auto slow = run_golden_full("gpt3-7.5b-tp4-pp2-a100.json", {"simulation.stragglers=[{\"rank\": 5, \"slowdown\": 1.2}]"});
  // The straggler's compute is 20% longer; the iteration grows by part of that (the rest hides
  // in time it spent waiting anyway) and never by more.
  const double growth = slow.iteration_time_s / nominal.iteration_time_s - 1;
  CHECK(growth > 0.05);
  CHECK(growth < 0.20);
  REQUIRE(slow.nominal_iteration_time_s.has_value());
  CHECK(*slow.nominal_iteration_time_s == doctest::Approx(nominal.iteration_time_s).epsilon(1e-9));
  // Synchronous training: every rank, fast or not, ends the iteration with the straggler (the
  // gradient reductions and the gradient-norm all-reduce wait for it).
  sim::TimePoint first = slow.engine.makespan;
  for (const auto& a : slow.engine.accounts) first = std::min(first, a.finish);
  CHECK((slow.engine.makespan - first).seconds() < 0.05 * slow.iteration_time_s);
  // The report names the straggler as the rank that bounds the iteration.
  REQUIRE(slow.bottleneck.has_value());
  CHECK(slow.bottleneck->rank == 5);
  CHECK(slow.bottleneck->work_s > slow.bottleneck->median_work_s);
  // Synchronous training runs at the pace of its slowest GPU: slowing the straggler's whole node
  // (seven more GPUs, in the same stage) costs nothing more.
  const auto node = run_golden_full("gpt3-7.5b-tp4-pp2-a100.json", {"simulation.stragglers=[{\"node\": 0, \"slowdown\": 1.2}]"});
  CHECK(node.iteration_time_s == doctest::Approx(slow.iteration_time_s).epsilon(1e-3));
}

TEST_CASE("report/what-if: a degraded NIC slows the data-parallel collectives it carries") {
  // GPT 1.7B with TP 8 on 4 nodes: each data-parallel ring runs on one rail (NIC i of every node).
  const std::vector<std::string> plan = {"parallelism.tensor_model_parallel_size=8", "training.micro_batch_size=1",
                                         "training.global_batch_size=16", "training.recompute_granularity=\"none\""};
  const auto nominal = run_golden_full("gpt3-1.7b-dp32-a100.json", plan);
  auto degraded_plan = plan;
  degraded_plan.push_back("simulation.degraded_links=[{\"node\": 2, \"nic\": 0, \"bandwidth_fraction\": 0.25}]");
  const auto degraded = run_golden_full("gpt3-1.7b-dp32-a100.json", degraded_plan);
  // Rank 0 is on rail 0 (through node 2's NIC 0); rank 1 is on rail 1.
  CHECK(dp_time(degraded, 0) > 2.0 * dp_time(nominal, 0));
  CHECK(dp_time(degraded, 1) == doctest::Approx(dp_time(nominal, 1)).epsilon(0.01));
  CHECK(degraded.iteration_time_s > nominal.iteration_time_s);
}
