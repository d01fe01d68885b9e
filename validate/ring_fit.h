#pragma once
// fit_intra_node_ring: the measured ring of one GPU type's NVLink node
// (topo::ComputeCalibration::RingCalibration) fitted to nccl-tests all_reduce sweeps of 2 to 8
// GPUs of one node:
//   time = latency + 2(n-1) step + min(size, fill) / fill rate + 2(n-1)/n size / link + size / user,
// linear in (latency, step, 1/fill rate, 1/link, 1/user) for a given start-up extent `fill`: the
// least squares of the relative residuals (Eigen), parameters that come out negative dropped and
// the rest refitted, for each extent of a grid (none, 8 MiB to 1 GiB by factors of 2); the
// smallest residual wins. Rows below 1 MiB are left out:
// there NCCL runs the LL protocol and a launch floor of the measuring setup shows (both in NCCL's
// model already), and the ring's per-step costs are not what sets the time; the fitted ring's
// min_bytes records that range.
//
// read_ring_sweeps: the single-node all_reduce sweeps of a measurement file, either records in
// validate/data/nccl_measurements.json's format ({"collective", "n_gpus", "n_nodes", "hardware",
// "rows": [{"bytes", "time_us", "inplace_time_us"}]}) or an nccl-tests log (text or -J JSON) of
// one node whose "# Using devices" lines give the GPU count.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topologies/hardware.h"
#include "validate/kernel_fit.h"

namespace trainsim::validate {

struct RingSweepPoint {
  std::int64_t bytes = 0;
  double time_us = 0;  // the faster of out-of-place and in-place
};

struct RingSweep {
  std::string id;   // record id or log file name
  std::string gpu;  // the hardware's GPU as the record states it ("" for a log)
  int ranks = 0;
  std::vector<RingSweepPoint> points;
};

// True when `file` starts as JSON does (an object, an array or a comment) or cannot be read (the
// JSON reader then says why); anything else is taken for an nccl-tests text log.
bool starts_as_json(const std::string& file);
// True when `doc` is an array of collective measurement records.
bool is_collective_records(const nlohmann::json& doc);
// The single-node all_reduce sweeps of `file` (records or an nccl-tests log). Throws InputError.
std::vector<RingSweep> read_ring_sweeps(const std::string& file);

struct RingFit {
  topo::ComputeCalibration::RingCalibration calibration;
  FitReport report;
};

// REQUIRES: nothing; report.fitted is false with a note when fewer than 8 usable points or fewer
// than two GPU counts.
RingFit fit_intra_node_ring(const std::vector<RingSweep>& sweeps);

// The fitted ring's time for an all_reduce of `bytes` on `ranks` GPUs (microseconds).
double ring_all_reduce_us(const topo::ComputeCalibration::RingCalibration& c, int ranks, double bytes);

}  // namespace trainsim::validate
