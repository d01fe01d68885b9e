// A PyTorch profiler (Kineto) trace, as `trainsim validate kineto` reads it.

#include "fuzz/fuzz_target.h"
#include "validate/kineto_trace.h"

TRAINSIM_FUZZ_TARGET(kineto_trace) {
  const trainsim::fuzz::InputFile file(input, "kineto_trace");
  trainsim::validate::read_kineto_trace(file.path());
}
