#pragma once
// CollectiveModel: NCCL's own cost model (src/graph/tuning.cc) applied to a cluster. For a
// collective of a given size on a group of ranks it predicts, for every algorithm and protocol
// NCCL would consider on this hardware, a latency and an algorithm bandwidth, and picks the
// fastest, as NCCL does. The constants come from the cluster's NcclCalibration; the per-channel
// bandwidths from a model of NCCL's topology search (search.cc) over the node's NVLink and NICs.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/task_graph.h"
#include "topologies/hardware.h"

namespace trainsim::topo {

enum class Algorithm : std::uint8_t { kTree, kRing, kCollNetDirect, kCollNetChain, kNvls, kNvlsTree, kPat };
enum class Protocol : std::uint8_t { kLL, kLL128, kSimple };
const char* to_string(Algorithm a);
const char* to_string(Protocol p);

// How a communicator sits on the cluster.
struct GroupShape {
  int ranks = 1;
  int nodes = 1;
  int ranks_per_node = 1;  // the largest number of members on one node
  int nics_per_node = 1;   // distinct NICs the members of one node can use
};

struct CollectivePrediction {
  Algorithm algorithm = Algorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  double latency_us = 0;
  double alg_bandwidth_GBps = 0;  // user bytes per second while streaming (GB = 1e9 B)
  double time_us = 0;
  int channels = 0;
  bool valid = false;
};

class CollectiveModel {
 public:
  explicit CollectiveModel(const ClusterSpec& cluster);

  // The choice NCCL makes (lowest predicted time). REQUIRES: shape.ranks >= 1.
  CollectivePrediction predict(sim::CollectiveKind kind, Bytes bytes, const GroupShape& shape) const;
  // One algorithm/protocol pair; `valid` is false where NCCL would not use it.
  CollectivePrediction predict(sim::CollectiveKind kind, Bytes bytes, const GroupShape& shape,
                               Algorithm a, Protocol p) const;
  // A point-to-point message between two GPUs (same node or not).
  CollectivePrediction predict_p2p(Bytes bytes, bool same_node) const;

  // nccl-tests' bus bandwidth factor for `kind` on n ranks (doc/PERFORMANCE.md).
  static double bus_factor(sim::CollectiveKind kind, int ranks);

 private:
  struct Graph {  // NCCL topology-search result for one algorithm
    int channels = 0;
    double bw_intra = 0;  // GB/s per channel
    double bw_inter = 0;
  };
  Graph ring_graph(const GroupShape& s) const;
  Graph nvls_graph(const GroupShape& s) const;
  double nic_speed_GBps() const;

  ClusterSpec cluster_;
  int arch_ = 1;           // NcclCalibration architecture row
  double nvlink_total_ = 0;  // effective NVLink GB/s per GPU per direction
};

}  // namespace trainsim::topo
