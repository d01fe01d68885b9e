#include "models/rank_layout.h"

#include "sim/check.h"

namespace trainsim::models {

RankLayout::RankLayout(std::int64_t tp, std::int64_t cp, std::int64_t dp, std::int64_t pp, std::int64_t ep)
    : tp_(tp), cp_(cp), dp_(dp), pp_(pp), ep_(ep) {
  TRAINSIM_CHECK(tp >= 1 && cp >= 1 && dp >= 1 && pp >= 1 && ep >= 1 && dp % ep == 0, "bad rank layout");
}

RankCoord RankLayout::coord(std::int64_t rank) const {
  RankCoord c;
  c.tp = rank % tp_;
  rank /= tp_;
  c.cp = rank % cp_;
  rank /= cp_;
  c.dp = rank % dp_;
  c.pp = rank / dp_;
  return c;
}

std::int64_t RankLayout::rank(const RankCoord& c) const { return c.tp + tp_ * (c.cp + cp_ * (c.dp + dp_ * c.pp)); }

}  // namespace trainsim::models
