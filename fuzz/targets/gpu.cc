// A GPU preset (scenarios/gpus/*.json), with the compute calibration it names.

#include "config/hardware_reader.h"
#include "fuzz/fuzz_target.h"

TRAINSIM_FUZZ_TARGET(gpu) {
  const trainsim::fuzz::InputFile file(input, "gpu");
  trainsim::config::read_gpu(file.path(), file.path(), "");
}
