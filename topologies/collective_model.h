#pragma once
// CollectiveModel: NCCL's performance model applied to a cluster, plus what NCCL's own estimate
// leaves out. For a collective on a group of ranks it
//   1. emulates NCCL's topology search (src/graph/search.cc) for the ring, tree, NVLS and CollNet
//      graphs of the group: channels and per-channel bandwidths;
//   2. computes NCCL's latency/bandwidth table (src/graph/tuning.cc) and picks the algorithm and
//      protocol with the lowest NCCL estimate (src/graph/tuning.cc ncclTopoGetAlgoTime,
//      src/enqueue.cc topoGetAlgoInfo), as NCCL does;
//   3. predicts the execution time of that choice: NCCL's latency, the pipeline fill of
//      store-and-forward Simple chunks, the channels NCCL drops for small messages, and the host
//      launch floor when one thread drives several GPUs (nccl-tests -g); for rings inside one
//      node, the GPU's measured ring (calibration intra_node_ring) where that is slower.
// Every constant comes from the cluster's NcclCalibration (scenarios/calibration/nccl.json), the
// measured ring from the GPU's calibration file.
// Sizes are NCCL's nBytes, which is the size column nccl-tests prints (see sim::CollectiveKind).

#include <cstdint>
#include <optional>
#include <string>

#include "sim/task_graph.h"
#include "topologies/hardware.h"

namespace trainsim::topo {

enum class Algorithm : std::uint8_t {
  kTree,
  kRing,
  kCollNetDirect,
  kCollNetChain,
  kNvls,
  kNvlsTree,
  kPat
};
enum class Protocol : std::uint8_t { kLL, kLL128, kSimple };
const char* to_string(Algorithm a);
const char* to_string(Protocol p);

// How a communicator sits on the cluster.
struct GroupShape {
  int ranks = 1;
  int nodes = 1;
  int ranks_per_node = 1;  // the largest number of members on one node
  int nics_per_node = 1;   // distinct NICs local to the members of one node
};

// The shares of an all-to-all's buffer (the size nccl-tests prints: each rank's send buffer) that
// one rank sends to other nodes and to the other GPUs of its node.
struct AllToAllShares {
  double inter = 0;
  double intra = 0;
};
// Every rank sends 1/n of its buffer to every rank: (n - local)/n across nodes, (local - 1)/n inside.
AllToAllShares plain_all_to_all(const GroupShape& s);
// A node-aggregated multicast (sim::CommOp's multicast fields: DeepEP's dispatch and combine):
// each item crosses once to every other node holding one of its `fanout` destinations, so the
// network carries (nodes - 1) x P(a node is hit) / fanout of the buffer; inside the node every
// copy whose destination is another GPU moves over NVLink, (local - 1)/local of it. Destinations
// are uniform (balanced routing) within the chosen groups; a node is hit when one of its
// destinations is drawn (exact hypergeometric sums, with groups that nest in nodes or nodes that
// nest in groups; otherwise as if ungrouped).
AllToAllShares multicast_all_to_all(const GroupShape& s, int fanout, int targets, int groups, int groups_chosen);

// One algorithm's topology-search result (NCCL's ncclTopoGraph); no channels: not available.
struct NcclGraph {
  int channels = 0;
  double bw_intra = 0;  // GB/s per channel
  double bw_inter = 0;
};

// What NCCL derives once per communicator.
struct NcclTopology {
  GroupShape shape;
  NcclGraph ring, tree, nvls, collnet_direct, collnet_chain;
  int channels = 0;       // run-time ring/tree channels (comm->nChannels)
  int nvls_channels = 0;  // run-time NVLS channels (comm->nvlsChannels)
};

struct CollectivePrediction {
  Algorithm algorithm = Algorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  double nccl_time_us = 0;        // NCCL's own estimate, which it minimises
  double latency_us = 0;          // fixed part of the predicted time
  double alg_bandwidth_GBps = 0;  // user bytes per second while streaming (GB = 1e9 B)
  double time_us = 0;             // predicted time (launch floor included)
  int channels = 0;               // channels the kernel runs on
  bool valid = false;
};

// The GPU's measured intra-node ring (ComputeCalibration::RingCalibration) for `kind` on `ranks`
// GPUs of one node and `bytes`: its latency (start-up included) and algorithm bandwidth. Empty for
// collectives other than all_reduce, reduce_scatter and all_gather.
struct RingCost {
  double latency_us = 0;
  double alg_bandwidth_GBps = 0;
  double time_us(double bytes) const { return latency_us + bytes / (1e3 * alg_bandwidth_GBps); }
};
std::optional<RingCost> measured_ring_cost(const ComputeCalibration::RingCalibration& ring, sim::CollectiveKind kind,
                                           int ranks, double bytes);

class CollectiveModel {
 public:
  explicit CollectiveModel(const ClusterSpec& cluster);

  // The topology search for a group. REQUIRES: shape.ranks >= 1.
  NcclTopology topology(const GroupShape& shape) const;

  // NCCL's choice for `kind` and its predicted time. `gpus_per_thread` > 0 adds the host launch
  // floor of one thread launching that many GPUs' kernels (nccl-tests -g); 0: launch hidden.
  CollectivePrediction predict(sim::CollectiveKind kind, Bytes bytes, const GroupShape& shape,
                               int gpus_per_thread = 0) const;
  CollectivePrediction predict(sim::CollectiveKind kind, Bytes bytes, const NcclTopology& topo,
                               int gpus_per_thread = 0) const;
  // One algorithm/protocol pair; `valid` is false where NCCL would not use it.
  CollectivePrediction predict(sim::CollectiveKind kind, Bytes bytes, const NcclTopology& topo,
                               Algorithm a, Protocol p, int gpus_per_thread = 0) const;
  // A point-to-point message between two GPUs (same node or not), on the two-rank communicator
  // PyTorch creates for the pair (ProcessGroupNCCL's send/recv key); `pair` is that communicator's
  // topology, which sets the kernel's channels.
  CollectivePrediction predict_p2p(Bytes bytes, const NcclTopology& pair) const;
  CollectivePrediction predict_p2p(Bytes bytes, bool same_node) const;
  // An all-to-all whose buffer moves in the given shares (plain_all_to_all is NCCL's).
  CollectivePrediction predict_all_to_all(Bytes bytes, const GroupShape& shape, const AllToAllShares& shares) const;

  // The channels (thread blocks) of NCCL's point-to-point kernel when a rank of a communicator of
  // `shape`, whose rings and trees run on `run_channels` channels (comm->nChannels), sends
  // `bytes_per_peer` to each of `peers` peers: NCCL's channels per peer (src/graph/paths.cc) and
  // its split of each operation into parts (src/enqueue.cc addP2pToPlan).
  int p2p_channels(double bytes_per_peer, const GroupShape& shape, int peers, int run_channels) const;

  // nccl-tests' bus bandwidth factor for `kind` on n ranks (doc/PERFORMANCE.md).
  static double bus_factor(sim::CollectiveKind kind, int ranks);

 private:
  enum class Pattern : std::uint8_t { kRing, kTree, kNvls, kCollNetDirect, kCollNetChain };
  struct Tuned {  // one entry of NCCL's table
    bool enabled = false;
    double latency_us = 0;
    double bus_bw = 0;  // NCCL's busBw before the conversion to algBw
    double alg_bw = 0;  // what NCCL stores as the bandwidth
  };

  NcclGraph search(Pattern pattern, const GroupShape& s, int min_channels, int max_channels) const;
  bool fits(Pattern pattern, const GroupShape& s, int channels, double bw_intra,
            double bw_inter) const;
  const NcclGraph& graph_of(const NcclTopology& t, Algorithm a) const;
  // NCCL's table entry; `channel_scale` < 1 models the channels dropped for small messages.
  // `run_time`: the rate the kernel achieves rather than NCCL's estimate (differs only where the
  // estimate caps single-node NVLS by a speed step that no link has).
  Tuned tune(sim::CollectiveKind kind, const NcclTopology& t, Algorithm a, Protocol p,
             double channel_scale, bool run_time) const;
  double nccl_latency(sim::CollectiveKind kind, double bytes, const NcclTopology& t, Algorithm a,
                      Protocol p, const Tuned& e) const;
  double nccl_time(sim::CollectiveKind kind, double bytes, const NcclTopology& t, Algorithm a,
                   Protocol p, const Tuned& e) const;
  int channels_used(double bytes, const NcclTopology& t, Algorithm a, Protocol p) const;
  double pipeline_fill_us(sim::CollectiveKind kind, double bytes, const NcclTopology& t,
                          Algorithm a, int channels, const Tuned& e) const;
  CollectivePrediction all_to_all(Bytes bytes, const GroupShape& s, const AllToAllShares& shares) const;
  void apply_measured_ring(sim::CollectiveKind kind, double bytes, const GroupShape& s,
                           CollectivePrediction& out) const;

  ClusterSpec cluster_;
  int arch_ = 1;       // NcclCalibration architecture row
  double nvlink_ = 0;  // effective NVLink GB/s per GPU per direction (0: PCIe node)
  double pcie_ = 0;    // NCCL's PCIe x16 GB/s for the node's generation
  double nic_ = 0;     // NIC line rate in GB/s (NCCL: Mb/s / 8000)
};

}  // namespace trainsim::topo
