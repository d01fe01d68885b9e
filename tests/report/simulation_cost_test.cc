// config::SimulationCost must follow the real lowering and engine, or its guard would either let
// slow plans through or reject cheap ones: the estimate stays within a factor of two of the
// tasks the lowering creates and the tasks the engine executes, across the features that change
// the task count, and for the example plans.

#include <doctest/doctest.h>
#include <string>
#include <vector>

#include "config/scenario.h"
#include "config/simulation_cost.h"
#include "models/lowering.h"
#include "report/simulation.h"

using namespace trainsim;

TEST_CASE("config/SimulationCost: the estimate is within 2x of the real graph and executed-task counts") {
  const std::string small = std::string(TRAINSIM_SOURCE_DIR) + "/tests/bad_inputs/valid_small.json";
  const std::vector<std::vector<std::string>> plans = {
      {"model.num_layers=4"},
      {"model.num_layers=4", "parallelism.tensor_model_parallel_size=4", "parallelism.sequence_parallel=true"},
      {"model.num_layers=8", "parallelism.pipeline_model_parallel_size=4", "parallelism.virtual_pipeline_model_parallel_size=2",
       "training.micro_batch_size=1", "training.global_batch_size=64"},
      {"model.num_layers=4", "parallelism.context_parallel_size=4", "parallelism.tensor_model_parallel_size=2",
       "training.micro_batch_size=1", "training.global_batch_size=16"},
      {"model.num_layers=4", "training.recompute_granularity=\"full\"", "training.attention_kernel=\"unfused\""},
      {"model.num_layers=4", "training.recompute_granularity=\"selective\"", "parallelism.zero_stage=3"},
      {"model.preset=\"mixtral-8x7b\"", "model.num_layers=2", "parallelism.expert_model_parallel_size=8",
       "parallelism.tensor_model_parallel_size=2", "parallelism.sequence_parallel=true", "training.micro_batch_size=1",
       "training.global_batch_size=32"},
      {"model.num_layers=4", "parallelism.pipeline_model_parallel_size=2", "simulation.fidelity=\"full\""},
  };
  std::vector<std::pair<std::string, std::vector<std::string>>> cases;
  for (const auto& overrides : plans) cases.emplace_back(small, overrides);
  for (const char* example : {"examples/gpt3-175b-interleaved-a100.json", "examples/llama3.1-405b-cp16-128k-h100.json",
                              "examples/llama3.1-70b-fp8-h100.json", "examples/llama3.1-70b-zero3-h100.json",
                              "examples/mixtral-8x7b-ep8-h100.json", "golden/llama3.1-8b-interleaved-h100.json"}) {
    cases.emplace_back(std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/" + example, std::vector<std::string>{});
  }
  for (const auto& [file, overrides] : cases) {
    std::string plan = file + " ";
    for (const std::string& o : overrides) plan += o + " ";
    CAPTURE(plan);
    const config::Scenario s = config::load_scenario(file, overrides);
    const config::SimulationCost cost =
        config::estimate_simulation_cost(s.model, s.parallel, s.training, s.num_gpus(), s.simulation.full);
    const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
    const double tasks = static_cast<double>(w.graph.total_tasks());
    CHECK(cost.graph_tasks >= 0.5 * tasks);
    CHECK(cost.graph_tasks <= 2.0 * tasks);
    report::RunOptions options;
    options.record = false;
    const double executed = static_cast<double>(report::simulate(s, options).engine.tasks_executed);
    CHECK(cost.executed_tasks >= 0.5 * executed);
    CHECK(cost.executed_tasks <= 2.0 * executed);
  }
}
