// A cluster preset or section (scenarios/clusters/*.json), with the GPU and calibrations it names.

#include "config/hardware_reader.h"
#include "fuzz/fuzz_target.h"

TRAINSIM_FUZZ_TARGET(cluster) {
  const trainsim::fuzz::InputFile file(input, "cluster");
  trainsim::config::read_cluster(trainsim::config::read_json_file(file.path()), file.path(), "");
}
