#pragma once
// RankLayout: Megatron-Core's default rank order "tp-cp-ep-dp-pp": tensor-parallel ranks vary
// fastest (adjacent GPUs of a node), then context-parallel, then data-parallel (whose lowest
// factor is the expert-parallel index), then the pipeline stage.

#include <cstdint>

namespace trainsim::models {

struct RankCoord {
  std::int64_t tp = 0, cp = 0, dp = 0, pp = 0;
};

class RankLayout {
 public:
  RankLayout() = default;
  // REQUIRES: every size >= 1 and ep divides dp.
  RankLayout(std::int64_t tp, std::int64_t cp, std::int64_t dp, std::int64_t pp, std::int64_t ep);
  std::int64_t world() const { return tp_ * cp_ * dp_ * pp_; }
  std::int64_t tp() const { return tp_; }
  std::int64_t cp() const { return cp_; }
  std::int64_t dp() const { return dp_; }
  std::int64_t pp() const { return pp_; }
  std::int64_t ep() const { return ep_; }
  RankCoord coord(std::int64_t rank) const;
  std::int64_t rank(const RankCoord& c) const;
  std::int64_t ep_index(const RankCoord& c) const { return c.dp % ep_; }

 private:
  std::int64_t tp_ = 1, cp_ = 1, dp_ = 1, pp_ = 1, ep_ = 1;
};

}  // namespace trainsim::models
