// All_reduce sweeps (measurement records or an nccl-tests log), as `trainsim calibrate` reads them
// for the intra-node ring, then the ring fit itself on whatever was read.

#include "fuzz/fuzz_target.h"
#include "validate/ring_fit.h"

TRAINSIM_FUZZ_TARGET(ring_sweeps) {
  const trainsim::fuzz::InputFile file(input, "ring_sweeps");
  const auto sweeps = trainsim::validate::read_ring_sweeps(file.path());
  (void)trainsim::validate::fit_intra_node_ring(sweeps);
}
