// An attention benchmark table, as `trainsim calibrate` reads it.

#include "fuzz/fuzz_target.h"
#include "validate/attention_sweep.h"

TRAINSIM_FUZZ_TARGET(attention_sweep) {
  const trainsim::fuzz::InputFile file(input, "attention_sweep");
  trainsim::validate::read_attention_sweep(file.path());
}
