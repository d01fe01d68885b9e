#pragma once
// RankLayout: Megatron-Core's rank grids (parallel_state.initialize_model_parallel, order
// "tp-cp-ep-dp-pp"). Dense layers: tensor-parallel ranks vary fastest (adjacent GPUs of a node),
// then context-parallel, then data-parallel, then the pipeline stage. Expert layers use a second
// grid over the same ranks ("MoE parallel folding"): expert-tensor-parallel fastest, then
// expert-parallel, then expert-data-parallel, then the same pipeline stage; so an expert-parallel
// group folds over the dense context- and data-parallel ranks.

#include <cstdint>

namespace trainsim::models {

struct RankCoord {
  std::int64_t tp = 0, cp = 0, dp = 0, pp = 0;  // dense grid
  std::int64_t etp = 0, ep = 0, edp = 0;        // expert grid (same pp)
};

class RankLayout {
 public:
  RankLayout() = default;
  // REQUIRES: every size >= 1 and etp * ep divides tp * cp * dp.
  RankLayout(std::int64_t tp, std::int64_t cp, std::int64_t dp, std::int64_t pp, std::int64_t ep, std::int64_t etp);
  std::int64_t world() const { return tp_ * cp_ * dp_ * pp_; }
  std::int64_t tp() const { return tp_; }
  std::int64_t cp() const { return cp_; }
  std::int64_t dp() const { return dp_; }
  std::int64_t pp() const { return pp_; }
  std::int64_t ep() const { return ep_; }
  std::int64_t etp() const { return etp_; }
  std::int64_t edp() const { return tp_ * cp_ * dp_ / (etp_ * ep_); }  // expert data-parallel size
  RankCoord coord(std::int64_t rank) const;
  std::int64_t rank(const RankCoord& c) const;  // from the dense coordinates

 private:
  std::int64_t tp_ = 1, cp_ = 1, dp_ = 1, pp_ = 1, ep_ = 1, etp_ = 1;
};

}  // namespace trainsim::models
