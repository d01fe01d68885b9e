// A GEMM sweep (measured TFLOP/s by shape and dtype), as `trainsim calibrate` reads it.

#include "fuzz/fuzz_target.h"
#include "validate/gemm_sweep.h"

TRAINSIM_FUZZ_TARGET(gemm_sweep) {
  const trainsim::fuzz::InputFile file(input, "gemm_sweep");
  trainsim::validate::read_gemm_sweep(file.path());
}
