#pragma once
// Readers for the hardware presets and calibration files: GPU presets (scenarios/gpus), cluster
// sections and presets (scenarios/clusters), compute calibrations and NCCL tuning constants
// (scenarios/calibration). Writers for calibration files (used by `trainsim calibrate`).

#include <string>

#include "config/json_reader.h"
#include "topologies/hardware.h"

namespace trainsim::config {

topo::GpuSpec read_gpu(const std::string& name_or_file, const std::string& from_file, const std::string& path);
topo::ComputeCalibration read_compute_calibration(const std::string& file);
topo::NcclCalibration read_nccl_calibration(const std::string& file);
// A cluster section at `path` of `file` (with its "preset" layered under it when present).
topo::ClusterSpec read_cluster(const Json& section, const std::string& file, const std::string& path);

Json to_json(const topo::ComputeCalibration& c);
Json to_json(const topo::NcclCalibration& c);

}  // namespace trainsim::config
