#pragma once
// NcclTestsLog: what an nccl-tests run (all_reduce_perf, all_gather_perf, ..., sendrecv_perf)
// measured, read from its standard output or from its -J JSON file. The text table is found by
// its header line, so every layout nccl-tests has printed is read: with or without the `root`
// column (before/after the 2.13 resync), `error` or `#wrong`, `time` or `cputime`, the -I
// per-iteration columns and the -S timestamp. Lines may carry an MPI tag prefix ("[0] ").
// compare_nccl_tests() predicts the same sweep with the CollectiveModel.
// Bad input throws InputError naming the file and the line (text) or JSON path.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/task_graph.h"
#include "topologies/collective_model.h"
#include "topologies/hardware.h"

namespace trainsim::validate {

struct NcclTestsPlacement {
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

struct NcclTestsRow {
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::string type;
  std::string redop;
  std::optional<NcclTestsPlacement> out_of_place, in_place;
  int line = 0;  // 1-based line of the text log (0 for JSON)
  // The faster of the two placements: a one-off slow iteration in one of them is not the
  // collective's time.
  double best_time_us() const;
};

struct NcclTestsLog {
  std::string file;
  std::string test;         // e.g. "all_reduce_perf"; empty when the log does not say
  int threads = 0;          // nThread (0: not stated)
  int gpus_per_thread = 0;  // nGpus (-g); 0: not stated
  int ranks = 0;            // devices listed in "# Using devices"; 0: not listed
  std::vector<NcclTestsRow> rows;
};

// Parses a log (text or -J JSON, recognised by its first character). `file` names it in errors.
NcclTestsLog parse_nccl_tests(const std::string& content, const std::string& file);
NcclTestsLog read_nccl_tests(const std::string& path);

// The operation a test measures: "all_reduce_perf" or "all_reduce" -> kAllReduce, ...;
// "sendrecv" -> nullopt with *p2p = true. Throws InputError (file, "") for an unknown name.
std::optional<sim::CollectiveKind> collective_of_test(const std::string& name,
                                                      const std::string& file, bool* p2p);

struct NcclComparisonRow {
  std::int64_t bytes = 0;
  double measured_time_us = 0, predicted_time_us = 0;
  double measured_busbw_GBps = 0, predicted_busbw_GBps = 0;
  double time_error = 0;   // (predicted - measured) / measured
  double busbw_error = 0;  // same, on bus bandwidth (0 when the measured busbw is 0)
  topo::Algorithm algorithm = topo::Algorithm::kRing;
  topo::Protocol protocol = topo::Protocol::kSimple;
};

// Predicts every row of `log` as `kind` (or a point-to-point send/receive when `p2p`) on a group
// of `shape` of `cluster`, with the host launch floor of `gpus_per_thread` GPUs per thread.
// nccl-tests' busbw factors are applied to both sides.
std::vector<NcclComparisonRow> compare_nccl_tests(const NcclTestsLog& log,
                                                  const topo::ClusterSpec& cluster,
                                                  const topo::GroupShape& shape,
                                                  std::optional<sim::CollectiveKind> kind,
                                                  int gpus_per_thread);

// nccl-tests' bus bandwidth factor, including sendrecv (1).
double nccl_tests_bus_factor(std::optional<sim::CollectiveKind> kind, int ranks);

}  // namespace trainsim::validate
