// Megatron-Core's custom pipeline layout string: parsing, and what a scenario may pair it with.

#include "config/pipeline_layout.h"

#include <doctest/doctest.h>
#include <string>
#include <vector>

#include "config/scenario.h"
#include "tests/scenario_helpers.h"

using namespace trainsim;

namespace {

std::string load_error(const std::vector<std::string>& overrides) {
  try {
    config::load_scenario(tests::kDefaultScenario, overrides);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

std::string layout(const std::string& text) { return "parallelism.pipeline_model_parallel_layout=\"" + text + "\""; }
// The default scenario names the 1F1B schedule; layouts of two or more chunks per stage interleave.
const std::string kInterleaved = "training.pipeline_schedule=interleaved";

}  // namespace

TEST_CASE("config/parse_pipeline_layout: stages, repetition, empty stages") {
  // Megatron's documented form with a transformer layer where its example has the MTP layer:
  // PP 16 x VPP 2, the first stage with the embedding and 3 layers, the last with only the loss.
  const config::PipelineLayout a = config::parse_pipeline_layout("Et*3|(tt|)*29,t|L");
  REQUIRE(a.error.empty());
  REQUIRE(a.layers.size() == 32);
  CHECK(a.layers.front() == 3);
  CHECK(a.layers[1] == 2);
  CHECK(a.layers[29] == 2);
  CHECK(a.layers[30] == 1);
  CHECK(a.layers.back() == 0);
  // Empty stages are legal (Megatron's docs: "E||t|L").
  CHECK(config::parse_pipeline_layout("E||t|L").layers == std::vector<std::int64_t>{0, 0, 1, 0});
  // Nested repetition, commas and spaces cosmetic.
  CHECK(config::parse_pipeline_layout("E(t*2, (t)*3)*2|t L").layers == std::vector<std::int64_t>{10, 1});
  // Megatron-LM's DeepSeek-V3 benchmark layout: 61 layers on 8 x 4 virtual stages, the
  // multi-token-prediction layer with the loss on the last.
  const config::PipelineLayout dsv3 = config::parse_pipeline_layout("Et|(tt|)*30mL");
  CHECK(dsv3.error.empty());
  CHECK(dsv3.layers.size() == 32);
  CHECK(dsv3.layers.back() == 0);
  CHECK(dsv3.mtp_layers == 1);
  CHECK(config::parse_pipeline_layout("Et|tm*2L").mtp_layers == 2);
}

TEST_CASE("config/parse_pipeline_layout: what it refuses, and why") {
  struct Case {
    const char* text;
    const char* fragment;
  };
  const Case cases[] = {
      {"Et*3|(tt|)*29,m|L", "multi-token-prediction layers ('m') are modelled only as a run just before the loss 'L'"},
      {"Et|mtL", "multi-token-prediction layers ('m') are modelled only as a run just before the loss 'L'"},
      {"Em|tL", "multi-token-prediction layers ('m') are modelled only as a run just before the loss 'L'"},
      {"tE|L", "the embedding 'E' must open the first virtual stage"},
      {"t|tL", "expected the embedding 'E' to open the first virtual stage"},
      {"Et|L|t", "the loss 'L' must close the last virtual stage"},
      {"Et|t", "expected the loss 'L' to close the last virtual stage"},
      {"Et|tX|L", "unexpected 'X'"},
      {"E(t|L", "expected ')'"},
      {"Et)|L", "unmatched ')'"},
      {"Et*|L", "expected a count after '*'"},
      {"E(t*1000000)*1000000|L", "more than"},
      {"E((((((((((((((((((((((((((((((((((t))))))))))))))))))))))))))))))))))|L", "nested deeper than 32"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const config::PipelineLayout p = config::parse_pipeline_layout(c.text);
    CHECK(p.layers.empty());
    CHECK(p.error.find(c.fragment) != std::string::npos);
  }
}

TEST_CASE("config/Scenario: a pipeline layout sets the virtual stages and must place every layer") {
  // The default scenario: GPT-3 175B, 96 layers, PP 16.
  const config::Scenario s = config::load_scenario(tests::kDefaultScenario, {layout("Et*3|(t*3|)*30,t*3L"), kInterleaved});
  CHECK(s.parallel.virtual_pipeline_model_parallel_size == 2);
  CHECK(s.training.pipeline_schedule == models::PipelineSchedule::kInterleaved);
  CHECK(s.parallel.layout_layers.size() == 32);

  const std::string path = "/parallelism/pipeline_model_parallel_layout";
  CHECK(load_error({layout("Et*95|tL")}).find(path + ": expected a multiple of pipeline_model_parallel_size (16) virtual stages, got 2") !=
        std::string::npos);
  CHECK(load_error({layout("Et*5|(t*6|)*14,t*6L")}).find(path + ": places 95 transformer layers, the model has 96") != std::string::npos);
  CHECK(load_error({layout("Et*3|(t*3|)*30,t*3L"), kInterleaved, "parallelism.virtual_pipeline_model_parallel_size=4"})
            .find("/parallelism/virtual_pipeline_model_parallel_size: expected 2 (the layout's 32 virtual stages over 16 pipeline "
                  "stages)") != std::string::npos);
  CHECK(load_error({layout("Et*6|(t*6|)*14,t*6L"), "parallelism.decoder_first_pipeline_num_layers=6"})
            .find("/parallelism/decoder_first_pipeline_num_layers: not with pipeline_model_parallel_layout") != std::string::npos);
  CHECK(load_error({layout("Et*6|(t*6|)*14,m*6L")}).find(path + ": places 90 transformer layers, the model has 96") != std::string::npos);
  // Multi-token prediction: the layout's 'm' run before the loss must match mtp_num_layers.
  CHECK(load_error({layout("Et*6|(t*6|)*14,t*6mL")}).find(path + ": places 1 multi-token-prediction layer ('m'), but the model has none") !=
        std::string::npos);
  CHECK(load_error({layout("Et*6|(t*6|)*14,t*6mL"), "model.position_embedding_type=\"rope\"", "model.mtp_num_layers=2"})
            .find(path + ": places 1 multi-token-prediction layer ('m'); expected 2 (mtp_num_layers)") != std::string::npos);
  CHECK(load_error({layout("Et*6|(t*6|)*14,t*6L"), "model.position_embedding_type=\"rope\"", "model.mtp_num_layers=1"})
            .find(path + ": places 0 multi-token-prediction layers ('m'); expected 1 (mtp_num_layers)") != std::string::npos);
  const config::Scenario mtp = config::load_scenario(
      tests::kDefaultScenario, {layout("Et*6|(t*6|)*14,t*6mL"), "model.position_embedding_type=\"rope\"", "model.mtp_num_layers=1"});
  CHECK(mtp.parallel.layout_mtp_layers == 1);
  CHECK(mtp.parallel.layout_layers.back() == 6);
  CHECK(load_error({"parallelism.pipeline_model_parallel_layout=3"}).find(path + ": expected a string") != std::string::npos);
  // The embedding and loss counted as layers: with neither a layout nor decoder_first/last, and
  // only where the total splits evenly.
  CHECK(load_error({layout("Et*6|(t*6|)*14,t*6L"), "parallelism.account_for_loss_in_pipeline_split=true"})
            .find("/parallelism/account_for_loss_in_pipeline_split: not with pipeline_model_parallel_layout") != std::string::npos);
  CHECK(load_error({"parallelism.account_for_embedding_in_pipeline_split=true", "parallelism.decoder_first_pipeline_num_layers=6"})
            .find("/parallelism/account_for_embedding_in_pipeline_split: not with decoder_first/last_pipeline_num_layers") !=
        std::string::npos);
  CHECK(load_error({"parallelism.account_for_embedding_in_pipeline_split=true"})
            .find("96 layers and the embedding (97) cannot be split evenly over 16 pipeline stages") != std::string::npos);
  CHECK(load_error({"model.num_layers=94", "parallelism.account_for_embedding_in_pipeline_split=true",
                    "parallelism.account_for_loss_in_pipeline_split=true"}) == "");
  // null leaves the layout out.
  CHECK(load_error({"parallelism.pipeline_model_parallel_layout=null"}).empty());
}
