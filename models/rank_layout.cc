#include "models/rank_layout.h"

#include "sim/check.h"

namespace trainsim::models {

RankLayout::RankLayout(std::int64_t tp, std::int64_t cp, std::int64_t dp, std::int64_t pp, std::int64_t ep,
                       std::int64_t etp)
    : tp_(tp), cp_(cp), dp_(dp), pp_(pp), ep_(ep), etp_(etp) {
  TRAINSIM_CHECK(tp >= 1 && cp >= 1 && dp >= 1 && pp >= 1 && ep >= 1 && etp >= 1 && (tp * cp * dp) % (etp * ep) == 0,
                 "bad rank layout");
}

RankCoord RankLayout::coord(std::int64_t rank) const {
  RankCoord c;
  const std::int64_t per_stage = tp_ * cp_ * dp_;
  c.pp = rank / per_stage;
  std::int64_t local = rank % per_stage;
  c.tp = local % tp_;
  c.cp = (local / tp_) % cp_;
  c.dp = local / (tp_ * cp_);
  c.etp = local % etp_;
  c.ep = (local / etp_) % ep_;
  c.edp = local / (etp_ * ep_);
  return c;
}

std::int64_t RankLayout::rank(const RankCoord& c) const { return c.tp + tp_ * (c.cp + cp_ * (c.dp + dp_ * c.pp)); }

}  // namespace trainsim::models
