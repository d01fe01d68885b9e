// A validation suite (cases with embedded scenarios and measured metrics), as `trainsim calibrate`
// reads it (every case must be good) and as `trainsim validate` reads it (bad cases recorded).

#include "fuzz/fuzz_target.h"
#include "validate/suite.h"

TRAINSIM_FUZZ_TARGET(suite) {
  const trainsim::fuzz::InputFile file(input, "suite");
  try {
    trainsim::validate::read_suite(file.path());
  } catch (const trainsim::InputError&) {
  }
  trainsim::validate::read_suite(file.path(), "", trainsim::validate::OnCaseError::kRecord);
}
