#include "report/sensitivity.h"

#include <algorithm>
#include <cmath>

#include "models/graph_vocabulary.h"
#include "report/parallel_jobs.h"

namespace trainsim::report {

namespace {

// The value of `kind` in one of TimeBreakdown's by-kind lists (0 when absent).
double of_kind(const std::vector<std::pair<std::string, double>>& by_kind, const std::string& kind) {
  for (const auto& [k, v] : by_kind) {
    if (k == kind) return v;
  }
  return 0;
}

// The iteration time of `base`'s scenario with `category` at `speed` times its modelled speed
// (infinity: free), and that kind's exposed time on the critical rank.
SpeedVariant at_speed(const RunResult& base, std::uint8_t category, double speed) {
  RunOptions o;
  o.record = false;
  o.nominal = false;
  o.cluster = base.cluster;
  o.comm_time_scale[category] = 1 / speed;  // 0 when free
  const RunResult r = simulate(base.scenario, o);
  return SpeedVariant{speed, r.iteration_time_s, of_kind(r.breakdown.exposed_by_kind, communication_kind(category))};
}

// The lowest speed in [lo, hi] at which time(speed) <= limit, to within kSensitivityResolution,
// given that it holds at hi and not at lo; hi itself when the bracket is that narrow already.
template <typename TimeAt>
double bisect(const TimeAt& time_at, double lo, double hi, double limit) {
  while (hi / lo > kSensitivityResolution) {
    const double mid = std::sqrt(lo * hi);
    (time_at(mid) <= limit ? hi : lo) = mid;
  }
  return hi;
}

static_assert(kSensitivitySpeeds[0] == 0.5 && kSensitivitySpeeds[1] == 2.0 && kSensitivitySpeeds[2] == std::numeric_limits<double>::infinity(),
              "find_edge reads the variants as half speed, twice the speed and free");

// The hide speed of one thing run at other speeds by time_at(speed): the lowest from which the
// iteration is within the slack of `best`, the iteration at the reference speed (free, or the
// fastest searched), given the modelled iteration t and the one at twice the speed.
// Brackets upward by factors of 4.
template <typename TimeAt>
std::optional<double> hide_speed(const TimeAt& time_at, double t, double twice, double best) {
  const double hidden = best + kSensitivityTolerance * t;
  if (t <= hidden) return 1.0;
  double lo = 1, hi = 2;
  bool found = twice <= hidden;
  while (!found && hi < kSensitivityRange) {
    lo = hi;
    hi = std::min(4 * hi, kSensitivityRange);
    found = time_at(hi) <= hidden;
  }
  if (!found) return std::nullopt;
  return bisect(time_at, lo, hi, hidden);
}

// The tolerated speed: the lowest down to which the iteration stays within the slack of the
// modelled one, t, given the iteration at half the speed. Brackets downward by factors of 4.
template <typename TimeAt>
std::optional<double> tolerated_speed(const TimeAt& time_at, double t, double half) {
  const double tolerated = t + kSensitivityTolerance * t;
  double lo = 0.5, hi = 1;
  bool failed = half > tolerated;
  while (!failed && lo > 1 / kSensitivityRange) {
    hi = lo;
    lo = std::max(lo / 4, 1 / kSensitivityRange);
    failed = time_at(lo) > tolerated;
  }
  if (!failed) return std::nullopt;
  return bisect(time_at, lo, hi, tolerated);
}

// Search j of kind c (even: its hide speed, odd: its tolerated speed) from its variants (half,
// twice, free) and further simulations of `category`.
void find_edge(const RunResult& base, std::uint8_t category, CommunicationSensitivity& c, std::size_t j) {
  const auto time_at = [&](double speed) { return at_speed(base, category, speed).iteration_time_s; };
  if (j % 2 == 0) {
    c.hide_speed = hide_speed(time_at, base.iteration_time_s, c.variants[1].iteration_time_s, c.variants[2].iteration_time_s);
  } else {
    c.tolerated_speed = tolerated_speed(time_at, base.iteration_time_s, c.variants[0].iteration_time_s);
  }
}

// The speeds of the hardware what-ifs (NICs, NVLink), the reference last.
constexpr double kLinkSpeeds[] = {0.5, 2.0, kSensitivityRange};

// `base`'s scenario on a cluster built for `s` (a copy of its own with one link rate changed);
// exposed_s is all exposed communication of the critical rank.
SpeedVariant on_cluster(const config::Scenario& s, double speed) {
  RunOptions o;
  o.record = false;
  o.nominal = false;
  const RunResult r = simulate(s, o);
  return SpeedVariant{speed, r.iteration_time_s, r.breakdown.exposed_communication_s};
}

// `base`'s scenario with each NCCL network device at `speed` times its line rate.
SpeedVariant at_nic_speed(const RunResult& base, double speed) {
  config::Scenario s = base.scenario;
  s.cluster.inter_node.nic_bandwidth = s.cluster.inter_node.nic_bandwidth * speed;
  return on_cluster(s, speed);
}

// `base`'s scenario with every GPU's NVLink at `speed` times its rate.
SpeedVariant at_nvlink_speed(const RunResult& base, double speed) {
  config::Scenario s = base.scenario;
  s.cluster = with_nvlink_speed(s.cluster, speed);
  return on_cluster(s, speed);
}

// A hardware what-if: `variants` at kLinkSpeeds from at(base, speed), then the hide speed
// (against the kSensitivityRange run, as good as unlimited bandwidth) and the tolerated one.
void search_link(const RunResult& base, unsigned threads, SpeedVariant (*at)(const RunResult&, double), LinkSweep& out) {
  out.variants.resize(std::size(kLinkSpeeds));
  run_jobs(std::size(kLinkSpeeds), threads, [&](std::size_t j) { out.variants[j] = at(base, kLinkSpeeds[j]); });
  // The reference speed is simulated already (the hide search reaches it when the link needs more
  // than a quarter of it).
  const auto time_at = [&](double speed) {
    return speed == kLinkSpeeds[2] ? out.variants[2].iteration_time_s : at(base, speed).iteration_time_s;
  };
  const double t = base.iteration_time_s;
  run_jobs(2, threads, [&](std::size_t j) {
    if (j == 0) {
      out.hide_speed = hide_speed(time_at, t, out.variants[1].iteration_time_s, out.variants[2].iteration_time_s);
    } else {
      out.tolerated_speed = tolerated_speed(time_at, t, out.variants[0].iteration_time_s);
    }
  });
}

}  // namespace

std::vector<CommunicationSensitivity> communication_sensitivity(const RunResult& base, unsigned threads) {
  // Kinds that move data somewhere in the iteration (not only on the critical rank).
  std::vector<std::uint8_t> categories;
  for (std::uint8_t c = models::kTpComm; c < models::kNumCategories; ++c) {
    const bool used = std::any_of(base.engine.accounts.begin(), base.engine.accounts.end(),
                                  [c](const sim::RankAccount& a) { return a.busy[c] > sim::Duration::zero(); });
    if (used) categories.push_back(c);
  }
  constexpr std::size_t kSpeeds = std::size(kSensitivitySpeeds);
  std::vector<CommunicationSensitivity> out(categories.size());
  for (std::size_t i = 0; i < categories.size(); ++i) {
    out[i].kind = communication_kind(categories[i]);
    out[i].time_s = of_kind(base.breakdown.communication_by_kind, out[i].kind);
    out[i].exposed_s = of_kind(base.breakdown.exposed_by_kind, out[i].kind);
    out[i].variants.resize(kSpeeds);
  }

  // One job per (kind, speed); each lands in its own slot, so the order never depends on timing.
  run_jobs(categories.size() * kSpeeds, threads, [&](std::size_t j) {
    const std::size_t k = j / kSpeeds;
    out[k].variants[j % kSpeeds] = at_speed(base, categories[k], kSensitivitySpeeds[j % kSpeeds]);
  });
  // Then each kind's two searches, one job each: the simulations within a search depend on each
  // other's outcome, so they run in order; each job writes its own field.
  run_jobs(2 * categories.size(), threads, [&](std::size_t j) { find_edge(base, categories[j / 2], out[j / 2], j); });
  return out;
}

std::optional<NicSensitivity> nic_sensitivity(const RunResult& base, unsigned threads) {
  if (base.scenario.cluster.num_nodes <= 1) return std::nullopt;
  NicSensitivity n;
  const topo::ClusterSpec& c = base.scenario.cluster;
  n.nic_gbit_per_s = c.inter_node.nic_bandwidth.bytes_per_second() * 8e-9;
  n.pcie_generation = c.pcie_generation;
  n.pcie_gbit_per_s = c.pcie_x16_GBps() * 8;
  search_link(base, threads, at_nic_speed, n);
  return n;
}

topo::ClusterSpec with_nvlink_speed(topo::ClusterSpec cluster, double speed) {
  for (double& per_link : cluster.nccl.nvlink_link_bw) per_link *= speed;
  cluster.gpu.nvlink_bandwidth = cluster.gpu.nvlink_bandwidth * speed;
  cluster.intra_node.bandwidth = cluster.intra_node.bandwidth * speed;
  if (auto& ring = cluster.gpu.calibration.intra_node_ring) {
    ring->link_GBps *= speed;
    ring->fill_GBps *= speed;
  }
  return cluster;
}

std::optional<NvlinkSensitivity> nvlink_sensitivity(const RunResult& base, unsigned threads) {
  const topo::ClusterSpec& c = base.scenario.cluster;
  const double nccl_GBps = c.nvlink_GBps();
  if (c.gpus_per_node <= 1 || nccl_GBps <= 0) return std::nullopt;
  NvlinkSensitivity n;
  n.links = c.gpu.nvlink_links;
  n.nccl_GBps = nccl_GBps;
  n.line_GBps = c.gpu.nvlink_bandwidth.gbps();
  search_link(base, threads, at_nvlink_speed, n);
  return n;
}

void add_sensitivity(RunResult& r, unsigned threads) {
  r.sensitivity = communication_sensitivity(r, threads);
  r.nic_sensitivity = nic_sensitivity(r, threads);
  r.nvlink_sensitivity = nvlink_sensitivity(r, threads);
}

}  // namespace trainsim::report
