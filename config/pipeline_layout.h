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
  std::int64_t mtp_layers = 0;       // multi-token-prediction layers ('m'), before the loss
  std::string error;                 // empty when the text is a layout trainsim can run
};

// Parses `text`. The embedding must open the first stage and the loss close the last one, once
// each (where Megatron-LM's GPT model builds them); multi-token-prediction layers are modelled
// where they run with the loss, as a run of 'm' just before it ("Et|(tt|)*30mL", Megatron-LM's
// DeepSeek-V3 benchmark layout), not elsewhere.
PipelineLayout parse_pipeline_layout(const std::string& text);

}  // namespace trainsim::config
