#pragma once
// The names the lowered task graph uses: streams of a rank, communicator slots, peer slots and
// reporting categories. Reports read them through these constants.

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::models {

// Streams: one compute stream and one stream per kind of communication, as Megatron-Core and
// NCCL run them (communication on its own CUDA streams, overlapping compute where the framework
// lets it), and, only in a graph that offloads activations, Transformer Engine's offload stream
// (copies to and from host memory).
enum Stream : std::uint8_t { kComputeStream = 0, kTpStream, kDpStream, kPpStream, kCpEpStream, kNumStreams, kOffloadStream = kNumStreams };

enum CommSlot : std::uint16_t {
  kTpSlot = 0,       // tensor-parallel group
  kDpSlot,           // data-parallel group with context parallelism (Megatron's dp_cp group):
                     // gradient reduction, parameter gather
  kCpSlot,           // context-parallel group
  kEpSlot,           // expert-parallel group (token dispatch/combine)
  kExpertTpSlot,     // expert-tensor-parallel group (gather/scatter of dispatched tokens)
  kExpertDpSlot,     // expert data-parallel group (expert gradient reduction)
  kEmbeddingSlot,    // first and last pipeline stage (tied embedding gradients)
  kGradStatsSlot,    // gradient-norm reduction: tensor x pipeline, every rank with a sharded optimizer
  kAmaxSlot,         // FP8 amax reduction: tensor x context x data parallel ranks of a stage
  kDpShardSlot,      // with distributed-optimizer instances: the consecutive data-parallel ranks of
                     // one instance (reduce-scatter, parameter gather)
  kDpReplicaSlot,    // with distributed-optimizer instances: one rank of each instance (the
                     // all-reduce of each gradient shard across instances)
  kExpertDpShardSlot,    // the same two for the expert-data-parallel group
  kExpertDpReplicaSlot,
  kCpA2aSlot,        // hierarchical context parallelism (a2a+p2p): the all-to-all level's group
  kNumCommSlots
};

// Point-to-point peers: pipeline neighbours, the context-parallel ring (under a2a+p2p the ranks at
// the all-to-all group's stride), and the tensor-parallel ring (Transformer Engine's userbuffers
// ring exchange under tp_comm_overlap).
enum PeerSlot : std::uint16_t { kPpNext = 0, kPpPrev, kCpNext, kCpPrev, kTpNext, kTpPrev, kNumPeerSlots };

enum Category : std::uint8_t {
  kForward = 0,
  kBackward,
  kRecompute,
  kOptimizer,
  kTpComm,
  kDpComm,
  kPpComm,
  kCpComm,
  kEpComm,
  kEmbeddingComm,
  kOtherComm,
  kOffload,  // activation copies to and from host memory (cpu_offloading): data movement, reported beside communication
  kNumCategories
};

const char* category_name(std::uint8_t c);
bool is_communication(std::uint8_t c);
// With `offload`, the offload stream after the others.
std::vector<std::string> stream_names(bool offload = false);
std::vector<std::string> comm_slot_names();
std::vector<std::string> peer_slot_names();

}  // namespace trainsim::models
