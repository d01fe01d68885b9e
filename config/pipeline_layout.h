#pragma once
// Megatron-Core's custom pipeline layout (--pipeline-model-parallel-layout, docs/api-guide/
// pipeline_parallel_layout.md): virtual stages separated by '|', each a run of symbols, E the
// embedding, t a transformer layer, L the loss (output layer), m a multi-token-prediction layer;
// "X*N" and "(...)*N" repeat, commas are cosmetic, and stages may be empty ("E||t|L").
// Virtual stage i runs on pipeline rank i % P as its model chunk i / P.

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::config {

struct PipelineLayout {
  std::vector<std::int64_t> layers;  // transformer layers of each virtual stage, in layout order
  std::string error;                 // empty when the text is a layout trainsim can run
};

// Parses `text`. The embedding must open the first stage and the loss close the last one, once
// each (where Megatron-LM's GPT model builds them); MTP layers are not modelled.
PipelineLayout parse_pipeline_layout(const std::string& text);

}  // namespace trainsim::config
