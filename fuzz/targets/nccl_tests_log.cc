// An nccl-tests log: the text layouts (before and after 2.13) or -J JSON, as `trainsim validate
// nccl-tests` reads it.

#include "fuzz/fuzz_target.h"
#include "validate/nccl_tests.h"

TRAINSIM_FUZZ_TARGET(nccl_tests_log) {
  const trainsim::fuzz::InputFile file(input, "nccl_tests_log");
  trainsim::validate::read_nccl_tests(file.path());
}
