// A Hugging Face config.json, read through a model section {"hf_config": FILE, "seq_length": N}.

#include "config/scenario.h"
#include "fuzz/fuzz_target.h"

TRAINSIM_FUZZ_TARGET(hf_config) {
  const trainsim::fuzz::InputFile hf(input, "hf_config");
  const trainsim::fuzz::InputFile model("{\"hf_config\": \"" + hf.path() + "\", \"seq_length\": 4096}", "hf_model");
  trainsim::config::load_model(model.path());
}
