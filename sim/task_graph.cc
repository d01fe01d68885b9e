#include "sim/task_graph.h"

#include <algorithm>

#include "sim/check.h"

namespace trainsim::sim {

std::int64_t size_of(DataType t) {
  switch (t) {
    case DataType::kFp32:
    case DataType::kTf32:
      return 4;
    case DataType::kBf16:
    case DataType::kFp16:
      return 2;
    case DataType::kFp8:
    case DataType::kFp4:
      return 1;
  }
  return 4;
}

const char* to_string(DataType t) {
  switch (t) {
    case DataType::kFp32:
      return "fp32";
    case DataType::kTf32:
      return "tf32";
    case DataType::kBf16:
      return "bf16";
    case DataType::kFp16:
      return "fp16";
    case DataType::kFp8:
      return "fp8";
    case DataType::kFp4:
      return "fp4";
  }
  return "?";
}

const char* to_string(KernelClass k) {
  switch (k) {
    case KernelClass::kGemm:
      return "gemm";
    case KernelClass::kFlashAttention:
      return "flash_attention";
    case KernelClass::kMemoryBound:
      return "memory_bound";
    case KernelClass::kOptimizer:
      return "optimizer";
    case KernelClass::kHostCopy:
      return "host_copy";
  }
  return "?";
}

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

TaskGraph::TaskGraph(std::uint32_t num_ranks, std::vector<std::string> stream_names,
                     std::vector<std::string> comm_slot_names,
                     std::vector<std::string> peer_slot_names)
    : class_of_(num_ranks, 0),
      simulated_flag_(num_ranks, 0),
      rank_comm_(static_cast<std::size_t>(num_ranks) * comm_slot_names.size(), kNone),
      rank_peer_(static_cast<std::size_t>(num_ranks) * peer_slot_names.size(), kNone),
      reverse_peer_(peer_slot_names.size(), 0),
      stream_names_(std::move(stream_names)),
      comm_slot_names_(std::move(comm_slot_names)),
      peer_slot_names_(std::move(peer_slot_names)) {
  TRAINSIM_CHECK(stream_names_.size() <= 16, "at most 16 streams per rank");
  for (std::uint16_t s = 0; s < reverse_peer_.size(); ++s) reverse_peer_[s] = s;
}

std::uint32_t TaskGraph::add_class(std::string name) {
  RankClass c;
  c.name = std::move(name);
  c.stream_tasks.resize(stream_names_.size());
  classes_.push_back(std::move(c));
  return static_cast<std::uint32_t>(classes_.size() - 1);
}

void TaskGraph::set_simulated(std::vector<RankId> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::fill(simulated_flag_.begin(), simulated_flag_.end(), 0);
  for (RankId r : ranks) simulated_flag_[index(r)] = 1;
  simulated_ = std::move(ranks);
}

CommId TaskGraph::add_communicator(Communicator comm) {
  comms_.push_back(std::move(comm));
  return CommId{static_cast<std::uint32_t>(comms_.size() - 1)};
}

void TaskGraph::set_comm(RankId r, std::uint16_t slot, CommId c) {
  rank_comm_[static_cast<std::size_t>(index(r)) * comm_slot_names_.size() + slot] = index(c);
}

void TaskGraph::set_peer(RankId r, std::uint16_t slot, RankId p) {
  rank_peer_[static_cast<std::size_t>(index(r)) * peer_slot_names_.size() + slot] = index(p);
}

void TaskGraph::set_reverse_peer_slot(std::uint16_t slot, std::uint16_t reverse) {
  reverse_peer_[slot] = reverse;
}

CommId TaskGraph::comm(RankId r, std::uint16_t slot) const {
  const std::uint32_t c =
      rank_comm_[static_cast<std::size_t>(index(r)) * comm_slot_names_.size() + slot];
  TRAINSIM_CHECK(c != kNone, "rank has no communicator in slot " + comm_slot_names_[slot]);
  return CommId{c};
}

bool TaskGraph::has_comm(RankId r, std::uint16_t slot) const {
  return rank_comm_[static_cast<std::size_t>(index(r)) * comm_slot_names_.size() + slot] != kNone;
}

RankId TaskGraph::peer(RankId r, std::uint16_t slot) const {
  const std::uint32_t p =
      rank_peer_[static_cast<std::size_t>(index(r)) * peer_slot_names_.size() + slot];
  TRAINSIM_CHECK(p != kNone, "rank has no peer in slot " + peer_slot_names_[slot]);
  return RankId{p};
}

bool TaskGraph::has_peer(RankId r, std::uint16_t slot) const {
  return rank_peer_[static_cast<std::size_t>(index(r)) * peer_slot_names_.size() + slot] != kNone;
}

std::uint32_t TaskGraph::intern(const std::string& name) {
  auto it = name_index_.find(name);
  if (it != name_index_.end()) return it->second;
  names_.push_back(name);
  const auto id = static_cast<std::uint32_t>(names_.size() - 1);
  name_index_.emplace(name, id);
  return id;
}

TaskIndex TaskGraph::add_task(std::uint32_t c, Task task, std::span<const TaskIndex> deps) {
  RankClass& rc = classes_[c];
  TRAINSIM_CHECK(task.stream < stream_names_.size(), "task on an unknown stream");
  TRAINSIM_CHECK(task.category < kMaxCategories, "task category out of range");
  const auto id = static_cast<TaskIndex>(rc.tasks.size());
  auto& order = rc.stream_tasks[task.stream];
  task.position = static_cast<std::uint32_t>(order.size());
  task.deps_begin = static_cast<std::uint32_t>(rc.deps.size());
  task.deps_count = 0;
  for (TaskIndex d : deps) {
    TRAINSIM_CHECK(d < id, "a task may only depend on tasks added before it");
    // A dependency on an earlier task of the same stream is implied by stream order.
    if (rc.tasks[d].stream == task.stream) continue;
    rc.deps.push_back(d);
    ++task.deps_count;
  }
  order.push_back(id);
  rc.tasks.push_back(task);
  return id;
}

std::uint32_t TaskGraph::add_kernel(std::uint32_t c, const Kernel& k) {
  auto& ks = classes_[c].kernels;
  // Identical kernels share one entry so the compute model prices each shape once.
  for (std::size_t i = ks.size(); i-- > 0 && ks.size() - i <= 64;) {
    if (ks[i] == k) return static_cast<std::uint32_t>(i);
  }
  ks.push_back(k);
  return static_cast<std::uint32_t>(ks.size() - 1);
}

std::uint32_t TaskGraph::add_comm_op(std::uint32_t c, const CommOp& op) {
  auto& ops = classes_[c].comm_ops;
  for (std::size_t i = ops.size(); i-- > 0 && ops.size() - i <= 64;) {
    if (ops[i] == op) return static_cast<std::uint32_t>(i);
  }
  ops.push_back(op);
  return static_cast<std::uint32_t>(ops.size() - 1);
}

std::uint32_t TaskGraph::add_transfers(std::uint32_t c, std::span<const Transfer> t) {
  auto& ts = classes_[c].transfers;
  const auto begin = static_cast<std::uint32_t>(ts.size());
  ts.insert(ts.end(), t.begin(), t.end());
  return begin;
}

std::size_t TaskGraph::total_tasks() const {
  std::size_t n = 0;
  for (const auto& c : classes_) n += c.tasks.size();
  return n;
}

}  // namespace trainsim::sim
