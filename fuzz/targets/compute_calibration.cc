// A compute-model calibration file (scenarios/calibration/a100.json, ...).

#include "config/hardware_reader.h"
#include "fuzz/fuzz_target.h"

TRAINSIM_FUZZ_TARGET(compute_calibration) {
  const trainsim::fuzz::InputFile file(input, "compute_calibration");
  trainsim::config::read_compute_calibration(file.path());
}
