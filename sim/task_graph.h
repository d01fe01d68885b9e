#pragma once
// TaskGraph: the work of one training iteration, as the engine runs it.
//
// Ranks that execute the same program form a rank class (in a Transformer plan: one class per
// pipeline stage). A class holds its tasks once; every rank of the class runs them, so a
// 16,384-rank graph costs what its few classes cost. Each task runs on one of the rank's
// streams; a stream executes its tasks in order (as a CUDA stream does), and a task may also
// wait for tasks on other streams of the same rank (as cudaStreamWaitEvent does). Ranks
// interact only through communication: collectives over a communicator (started when every
// simulated member has reached them) and point-to-point transfers to a peer.
//
// Tasks carry physics (GEMM shapes, bytes), never durations: a TimingModel prices them.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "sim/units.h"

namespace trainsim::sim {

enum class RankId : std::uint32_t {};
enum class CommId : std::uint32_t {};
using TaskIndex = std::uint32_t;  // index of a task within its rank class

constexpr std::uint32_t index(RankId r) { return static_cast<std::uint32_t>(r); }
constexpr std::uint32_t index(CommId c) { return static_cast<std::uint32_t>(c); }

// kFp4: NVFP4 (E2M1 values, one E4M3 scale per 16; half a byte each, size_of rounds up to 1 and
// the lowering counts the bytes itself).
enum class DataType : std::uint8_t { kFp32, kTf32, kBf16, kFp16, kFp8, kFp4 };
std::int64_t size_of(DataType t);
const char* to_string(DataType t);

// What a compute task does, in enough detail for a compute model to price it.
enum class KernelClass : std::uint8_t {
  kGemm,            // C[m,n] = A[m,k] * B[k,n], `batch` independent products
  kFlashAttention,  // fused attention: batch = batch*heads, m = query len, n = key len, k = head dim
  kMemoryBound,     // elementwise, normalisation, softmax, dropout, embedding, loss
  kOptimizer,       // optimizer step over a parameter shard (memory-bound)
  kHostCopy,        // copy engine: `bytes` between device and pinned host memory, over the host link
};
const char* to_string(KernelClass k);

struct Kernel {
  KernelClass kernel_class = KernelClass::kMemoryBound;
  DataType dtype = DataType::kBf16;
  bool backward = false;  // flash attention backward (recomputes the score matrix)
  bool causal = false;
  bool block_scaled = false;  // GEMM on MXFP8 operands (one E8M0 scale per 32 elements)
  bool quantize = false;      // memory-bound FP8 quantization of a GEMM operand (cast, amax, transpose)
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  // A GEMM of `batch` groups run as one kernel per group, one after another (Transformer
  // Engine's grouped linear layers); otherwise `batch` is one strided-batched kernel. A
  // memory-bound kernel with `grouped` stands for `batch` kernels sharing its bytes.
  bool grouped = false;
  std::int64_t window = 0;  // causal flash attention: keys before each query it sees (0: all)
  bool dropout = false;     // flash attention with dropout on its scores (random numbers drawn per score)
  // Flash attention whose query-key and value head dims differ (multi-head latent attention): `k`
  // is their mean, priced as it is rather than rounded up to a kernel's head dim.
  bool mixed_head_dims = false;
  Flops flops;  // floating-point work the kernel executes
  Bytes bytes;  // bytes it reads and writes in device memory
  bool operator==(const Kernel&) const = default;
};

// Collective kinds with NCCL's semantics. `bytes` is the size column nccl-tests prints: the
// buffer for all_reduce/broadcast/reduce, the whole gathered/scattered array for
// all_gather/reduce_scatter, each rank's whole send buffer for all_to_all.
enum class CollectiveKind : std::uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
};
const char* to_string(CollectiveKind k);

struct CommOp {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  DataType dtype = DataType::kBf16;
  Bytes bytes;
  // All-to-all as a node-aggregated multicast (multicast_fanout > 0): each rank's buffer holds
  // `multicast_fanout` copies of each of its items, one per destination, destinations drawn
  // uniformly without repeats among `multicast_targets` spread evenly over the group's ranks, and
  // only from `multicast_groups_chosen` of `multicast_groups` equal blocks of them when those are
  // set. An item crosses to each node that holds one of its destinations once and is forwarded
  // inside that node. 0: every rank sends 1/n of its buffer to every rank.
  std::uint32_t multicast_fanout = 0;
  std::uint32_t multicast_targets = 0;
  std::uint32_t multicast_groups = 0;
  std::uint32_t multicast_groups_chosen = 0;
  bool operator==(const CommOp&) const = default;
};

// One point-to-point message inside a batched send/recv task (Megatron's batch_isend_irecv).
struct Transfer {
  bool is_send = true;
  std::uint16_t peer_slot = 0;  // which peer (see TaskGraph::peer)
  Bytes bytes;
};

enum class TaskKind : std::uint8_t { kCompute, kCollective, kPointToPoint };

// Reporting categories a graph may use. Every simulated rank keeps four arrays of durations by
// category, touched at each task end: 16 (the lowering uses 11) keeps them at 512 bytes a rank.
inline constexpr std::size_t kMaxCategories = 16;

struct Task {
  TaskKind kind = TaskKind::kCompute;
  std::uint8_t stream = 0;
  std::uint8_t category = 0;   // reporting category (< kMaxCategories); opaque to the engine
  // The host waits for this task to end before it issues the next one (a torch.cuda.synchronize(),
  // as Megatron runs after its batched pipeline sends and receives). Only matters where the
  // timing model charges host time.
  bool host_sync = false;
  std::uint16_t slot = 0;      // collective: communicator slot
  std::uint32_t position = 0;  // index of the task within its stream
  std::uint32_t payload = 0;   // kernel, comm op or first transfer index
  std::uint32_t payload_count = 0;  // number of transfers (point-to-point)
  std::uint32_t deps_begin = 0;     // cross-stream dependencies: RankClass::deps[begin, begin+count)
  std::uint32_t deps_count = 0;
  std::uint32_t name = 0;            // index into TaskGraph::names
  std::int32_t microbatch = -1;      // for labels; -1 when not per micro-batch
  std::int32_t layer = -1;           // for labels; -1 when not per layer
  std::int64_t alloc_bytes = 0;      // device memory allocated when the task starts
  std::int64_t free_bytes = 0;       // device memory released when the task ends
};

struct RankClass {
  std::string name;
  std::vector<Task> tasks;                           // in program (issue) order
  std::vector<std::vector<TaskIndex>> stream_tasks;  // per stream, in execution order
  std::vector<TaskIndex> deps;
  std::vector<Kernel> kernels;
  std::vector<CommOp> comm_ops;
  std::vector<Transfer> transfers;
  std::int64_t static_memory_bytes = 0;  // allocated before the iteration starts
};

struct Communicator {
  std::uint16_t slot = 0;
  std::vector<RankId> members;   // in communicator rank order
  std::uint32_t symmetry_class = 0;  // communicators in one class behave identically
};

class TaskGraph {
 public:
  // REQUIRES: num_streams <= 16.
  TaskGraph(std::uint32_t num_ranks, std::vector<std::string> stream_names,
            std::vector<std::string> comm_slot_names, std::vector<std::string> peer_slot_names);

  // Building. Classes are created, then filled through the returned reference.
  std::uint32_t add_class(std::string name);
  RankClass& rank_class(std::uint32_t c) { return classes_[c]; }
  void set_class_of(RankId r, std::uint32_t c) { class_of_[index(r)] = c; }
  void set_simulated(std::vector<RankId> ranks);
  CommId add_communicator(Communicator comm);
  void set_comm(RankId r, std::uint16_t slot, CommId c);
  // Peer slot `slot` of rank r is rank p; `reverse_slot` of p must name r.
  void set_peer(RankId r, std::uint16_t slot, RankId p);
  void set_reverse_peer_slot(std::uint16_t slot, std::uint16_t reverse);
  std::uint32_t intern(const std::string& name);

  // Appends a task to class c, on its stream after the tasks already there.
  TaskIndex add_task(std::uint32_t c, Task task, std::span<const TaskIndex> deps);
  std::uint32_t add_kernel(std::uint32_t c, const Kernel& k);
  std::uint32_t add_comm_op(std::uint32_t c, const CommOp& op);
  std::uint32_t add_transfers(std::uint32_t c, std::span<const Transfer> t);

  // Reading.
  std::uint32_t num_ranks() const { return static_cast<std::uint32_t>(class_of_.size()); }
  std::uint32_t num_streams() const { return static_cast<std::uint32_t>(stream_names_.size()); }
  std::uint32_t num_classes() const { return static_cast<std::uint32_t>(classes_.size()); }
  const RankClass& rank_class(std::uint32_t c) const { return classes_[c]; }
  std::uint32_t class_of(RankId r) const { return class_of_[index(r)]; }
  const std::vector<RankId>& simulated_ranks() const { return simulated_; }
  bool is_simulated(RankId r) const { return simulated_flag_[index(r)] != 0; }
  const Communicator& communicator(CommId c) const { return comms_[index(c)]; }
  std::uint32_t num_communicators() const { return static_cast<std::uint32_t>(comms_.size()); }
  CommId comm(RankId r, std::uint16_t slot) const;
  bool has_comm(RankId r, std::uint16_t slot) const;
  RankId peer(RankId r, std::uint16_t slot) const;
  bool has_peer(RankId r, std::uint16_t slot) const;
  std::uint16_t reverse_peer_slot(std::uint16_t slot) const { return reverse_peer_[slot]; }
  const std::string& stream_name(std::uint32_t s) const { return stream_names_[s]; }
  const std::string& comm_slot_name(std::uint16_t s) const { return comm_slot_names_[s]; }
  const std::string& peer_slot_name(std::uint16_t s) const { return peer_slot_names_[s]; }
  std::uint16_t num_comm_slots() const { return static_cast<std::uint16_t>(comm_slot_names_.size()); }
  std::uint16_t num_peer_slots() const { return static_cast<std::uint16_t>(peer_slot_names_.size()); }
  const std::string& name(std::uint32_t i) const { return names_[i]; }
  std::size_t total_tasks() const;  // summed over classes (not ranks)

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  std::vector<RankClass> classes_;
  std::vector<std::uint32_t> class_of_;
  std::vector<RankId> simulated_;
  std::vector<std::uint8_t> simulated_flag_;
  std::vector<Communicator> comms_;
  std::vector<std::uint32_t> rank_comm_;  // [rank * slots + slot]
  std::vector<std::uint32_t> rank_peer_;  // [rank * peer slots + slot]
  std::vector<std::uint16_t> reverse_peer_;
  std::vector<std::string> stream_names_;
  std::vector<std::string> comm_slot_names_;
  std::vector<std::string> peer_slot_names_;
  std::vector<std::string> names_;
  std::map<std::string, std::uint32_t> name_index_;
};

}  // namespace trainsim::sim
