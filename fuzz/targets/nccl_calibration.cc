// An NCCL tuning-constant file (scenarios/calibration/nccl.json).

#include "config/hardware_reader.h"
#include "fuzz/fuzz_target.h"

TRAINSIM_FUZZ_TARGET(nccl_calibration) {
  const trainsim::fuzz::InputFile file(input, "nccl_calibration");
  trainsim::config::read_nccl_calibration(file.path());
}
