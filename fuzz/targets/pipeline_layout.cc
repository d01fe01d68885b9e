// Megatron-Core's pipeline layout string (parallelism.pipeline_model_parallel_layout), as the
// scenario reader parses it: the parser reports bad text in its result and never throws; a
// layout it accepts has one non-negative layer count per virtual stage.

#include "config/pipeline_layout.h"
#include "fuzz/fuzz_target.h"

TRAINSIM_FUZZ_TARGET(pipeline_layout) {
  const trainsim::config::PipelineLayout layout = trainsim::config::parse_pipeline_layout(std::string(input));
  if (layout.error.empty() == layout.layers.empty()) {
    trainsim::fuzz::finding("pipeline_layout", "a layout must come with layer counts or an error, not both or neither");
  }
  for (std::int64_t n : layout.layers) {
    if (n < 0) trainsim::fuzz::finding("pipeline_layout", "negative layer count");
  }
}
