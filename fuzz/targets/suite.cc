// A validation suite (cases with embedded scenarios and measured metrics), as `trainsim validate`
// and `trainsim calibrate` read it.

#include "fuzz/fuzz_target.h"
#include "validate/suite.h"

TRAINSIM_FUZZ_TARGET(suite) {
  const trainsim::fuzz::InputFile file(input, "suite");
  trainsim::validate::read_suite(file.path());
}
