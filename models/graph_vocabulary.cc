#include "models/graph_vocabulary.h"

#include "sim/task_graph.h"

namespace trainsim::models {

static_assert(kNumCategories <= sim::kMaxCategories, "the engine keeps time for sim::kMaxCategories categories");

const char* category_name(std::uint8_t c) {
  switch (c) {
    case kForward:
      return "forward";
    case kBackward:
      return "backward";
    case kRecompute:
      return "recompute";
    case kOptimizer:
      return "optimizer";
    case kTpComm:
      return "tp_comm";
    case kDpComm:
      return "dp_comm";
    case kPpComm:
      return "pp_comm";
    case kCpComm:
      return "cp_comm";
    case kEpComm:
      return "ep_comm";
    case kEmbeddingComm:
      return "embedding_comm";
    case kOtherComm:
      return "other_comm";
    case kOffload:
      return "offload";
    default:
      return "other";
  }
}

bool is_communication(std::uint8_t c) { return c >= kTpComm && c < kNumCategories; }

std::vector<std::string> stream_names(bool offload) {
  std::vector<std::string> names{"compute", "tp", "dp", "pp", "cp_ep"};
  if (offload) names.emplace_back("offload");
  return names;
}
std::vector<std::string> comm_slot_names() { return {"tp", "dp", "cp", "ep", "expert_tp", "expert_dp", "embedding", "grad_stats", "amax", "dp_shard", "dp_replica",
                                                   "expert_dp_shard", "expert_dp_replica", "cp_a2a"}; }
std::vector<std::string> peer_slot_names() { return {"pp_next", "pp_prev", "cp_next", "cp_prev", "tp_next", "tp_prev"}; }

}  // namespace trainsim::models
