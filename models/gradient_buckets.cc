#include "models/gradient_buckets.h"

#include <algorithm>

namespace trainsim::models {

std::vector<GradientBucket> make_buckets(const std::vector<ParamGroup>& groups, std::int64_t bucket_size) {
  std::vector<GradientBucket> out;
  GradientBucket open[2];
  bool used[2] = {false, false};
  std::size_t last_of[2] = {0, 0};
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const ParamGroup& g = groups[i];
    if (g.params <= 0) continue;
    const int b = g.expert ? 1 : 0;
    GradientBucket& cur = open[b];
    if (!used[b]) {
      cur = GradientBucket{0, g.expert, i, g.unit, g.unit};
      used[b] = true;
    }
    cur.params += g.params;
    cur.fp8_params += g.fp8;
    cur.first_unit = std::min(cur.first_unit, g.unit);
    cur.last_unit = std::max(cur.last_unit, g.unit);
    last_of[b] = i;
    if (bucket_size > 0 && cur.params >= bucket_size) {
      cur.closing_group = i;
      out.push_back(cur);
      used[b] = false;
    }
  }
  // Remaining partial buckets close with their buffer's last gradient.
  for (int b = 0; b < 2; ++b) {
    if (!used[b]) continue;
    open[b].closing_group = last_of[b];
    out.push_back(open[b]);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const GradientBucket& x, const GradientBucket& y) { return x.closing_group < y.closing_group; });
  return out;
}

}  // namespace trainsim::models
