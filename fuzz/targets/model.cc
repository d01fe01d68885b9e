// A model preset or explicit model file (scenarios/models/*.json), as `--model FILE` reads it.

#include "config/scenario.h"
#include "fuzz/fuzz_target.h"

TRAINSIM_FUZZ_TARGET(model) {
  const trainsim::fuzz::InputFile file(input, "model");
  trainsim::config::load_model(file.path());
}
