#include "topologies/collective_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "sim/check.h"

namespace trainsim::topo {

using sim::CollectiveKind;

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kTree:
      return "Tree";
    case Algorithm::kRing:
      return "Ring";
    case Algorithm::kCollNetDirect:
      return "CollNetDirect";
    case Algorithm::kCollNetChain:
      return "CollNetChain";
    case Algorithm::kNvls:
      return "NVLS";
    case Algorithm::kNvlsTree:
      return "NVLSTree";
    case Algorithm::kPat:
      return "PAT";
  }
  return "?";
}

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::kLL:
      return "LL";
    case Protocol::kLL128:
      return "LL128";
    case Protocol::kSimple:
      return "Simple";
  }
  return "?";
}

namespace {

constexpr std::size_t kNvlinkLat = 0, kPciLat = 1, kNetLat = 2;
constexpr double kEps = 1e-9;

std::size_t ai(Algorithm a) { return static_cast<std::size_t>(a); }
std::size_t pi(Protocol p) { return static_cast<std::size_t>(p); }

// NCCL's log2i: floor(log2(n)) for n >= 1, -1 for n <= 0.
int log2_floor(double n) {
  if (n < 1) return -1;
  int k = 0;
  while (n >= 2) {
    n /= 2;
    ++k;
  }
  return k;
}

// Point-to-point traffic (sends, receives, all-to-all) has no NCCL tuning table: a latency, then
// the bytes at one rate, on the Simple protocol.
CollectivePrediction p2p_prediction(double latency_us, double bytes, double bandwidth_GBps) {
  CollectivePrediction out;
  out.valid = true;
  out.algorithm = Algorithm::kRing;
  out.protocol = Protocol::kSimple;
  out.channels = 1;
  out.latency_us = latency_us;
  out.alg_bandwidth_GBps = bandwidth_GBps;
  out.time_us = out.nccl_time_us = latency_us + bytes / (1e3 * bandwidth_GBps);
  return out;
}

// NCCL's pow2Up and pow2Down (src/include/utils.h) for n >= 1.
int pow2_up(int n) { return static_cast<int>(std::bit_ceil(static_cast<unsigned>(n))); }
int pow2_down(int n) { return static_cast<int>(std::bit_floor(static_cast<unsigned>(n))); }

bool is_ring_like(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kAllGather ||
         k == CollectiveKind::kReduceScatter;
}

}  // namespace

CollectiveModel::CollectiveModel(const ClusterSpec& cluster)
    : cluster_(cluster), arch_(static_cast<int>(nccl_arch_row(cluster.gpu.architecture))) {
  pcie_ = cluster_.pcie_x16_GBps();
  nvlink_ = cluster_.nvlink_GBps();
  // NCCL reads the NIC speed in Mb/s and divides by 8000 (topo.cc): 400 Gb/s -> 50 GB/s.
  nic_ = cluster_.inter_node.nic_bandwidth.gbps();
}

double CollectiveModel::bus_factor(CollectiveKind kind, int n) {
  const double nn = n;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return n > 1 ? 2.0 * (nn - 1) / nn : 0.0;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      return n > 1 ? (nn - 1) / nn : 0.0;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      return 1.0;
  }
  return 1.0;
}

// ---------------------------------------------------------------------------------------------
// Topology search (search.cc ncclTopoCompute), reduced to the bandwidth bookkeeping that decides
// its result on NVSwitch/PCIe nodes with one NIC per GPU (or fewer): each channel of a ring or
// tree takes its speed on every GPU's NVLink (or PCIe) in and out, and on one NIC per direction;
// an NVLS channel takes it on every GPU's NVLink plus once more on its head.

bool CollectiveModel::fits(Pattern pattern, const GroupShape& s, int n, double bi,
                           double bo) const {
  const int ngpus = s.ranks_per_node;
  const bool inter = s.nodes > 1;
  const double intra_link = nvlink_ > 0 ? nvlink_ : pcie_;
  if (pattern == Pattern::kNvls) {
    const int heads_per_gpu = (n + ngpus - 1) / std::max(1, ngpus);
    if (n * bi + heads_per_gpu * bi > intra_link + kEps) return false;
    if (inter) {
      if (n > std::min(ngpus, s.nics_per_node)) return false;  // one head per NIC-local GPU
      if (bo > std::min(nic_, pcie_) + kEps) return false;
    }
    return true;
  }
  if (pattern == Pattern::kCollNetDirect) {
    if (n > std::min(ngpus, s.nics_per_node)) return false;
    if (ngpus > 1 && n * bi > intra_link + kEps) return false;
    return bo <= std::min(nic_, pcie_) + kEps;
  }
  if (ngpus > 1 && n * bi > intra_link + kEps) return false;
  if (inter) {
    const int per_nic = static_cast<int>(std::floor(std::min(nic_, pcie_) / bo + kEps));
    if (n > per_nic * s.nics_per_node) return false;
  }
  return true;
}

NcclGraph CollectiveModel::search(Pattern pattern, const GroupShape& s, int min_channels,
                                  int max_channels) const {
  const NcclCalibration& c = cluster_.nccl;
  const bool inter = s.nodes > 1;
  const int ngpus = s.ranks_per_node;
  const std::vector<double>& speeds = inter ? (arch_ >= 3   ? c.inter_speeds_blackwell
                                               : arch_ == 2 ? c.inter_speeds_hopper
                                                            : c.inter_speeds_pre_hopper)
                                            : (arch_ >= 3   ? c.intra_speeds_blackwell
                                               : arch_ == 2 ? c.intra_speeds_hopper
                                                            : c.intra_speeds_pre_hopper);
  const double intra_link = nvlink_ > 0 ? nvlink_ : pcie_;
  // maxBw: the best per-channel path (GPU to NIC across nodes, GPU to GPU inside one); totalBw:
  // a GPU's NVLink or PCIe total, raised by n/(n-1) for patterns that need not close a loop.
  const double max_bw = inter ? std::min(nic_, pcie_) : intra_link;
  double total_bw = std::max(nvlink_, pcie_);
  if (pattern != Pattern::kRing && ngpus > 1) total_bw *= static_cast<double>(ngpus) / (ngpus - 1);

  std::size_t i = 0;
  while (i + 1 < speeds.size() &&
         (speeds[i] > max_bw + kEps || speeds[i] * min_channels > total_bw + kEps))
    ++i;

  NcclGraph best;
  while (true) {
    const double sp = speeds[i];
    int n = 0;
    while (n < max_channels && fits(pattern, s, n + 1, sp, sp)) ++n;
    if (n >= min_channels && n * sp > best.channels * best.bw_intra + kEps)
      best = NcclGraph{n, sp, sp};
    if (best.channels > 0 && best.channels * best.bw_inter >= total_bw - kEps) break;  // optimal
    if (i + 1 < speeds.size() &&
        (best.channels == 0 || speeds[i + 1] / best.bw_inter > c.search_speed_ratio)) {
      ++i;
      continue;
    }
    break;
  }
  if (best.channels == 0) {
    if (pattern == Pattern::kNvls || pattern == Pattern::kCollNetDirect) return best;
    return NcclGraph{1, 0.1, 0.1};  // NCCL's fallback "simple order" graph
  }

  // Channel duplication (ncclTopoDupChannels).
  if (pattern != Pattern::kNvls && best.bw_intra >= c.dup_channels_min_bw &&
      !(arch_ >= 2 && best.bw_intra < c.dup_channels_sm90_bw && best.channels > 4)) {
    const int dup = std::min(best.channels * 2, max_channels);
    const int div = (dup + best.channels - 1) / best.channels;
    best.bw_intra /= div;
    best.bw_inter /= div;
    best.channels = dup;
  }

  // Pass 2: raise the speed with the channels found (rings: both speeds; NVLS: bwInter up to
  // twice bwIntra; trees: bwIntra up to twice bwInter).
  auto index_of = [&](double v) {
    std::size_t k = 0;
    while (k + 1 < speeds.size() && speeds[k] > v + kEps) ++k;
    return k;
  };
  if (pattern == Pattern::kRing) {
    std::size_t k = index_of(best.bw_inter);
    while (k > 0 && fits(pattern, s, best.channels, speeds[k - 1], speeds[k - 1])) {
      --k;
      best.bw_intra = best.bw_inter = speeds[k];
    }
  } else if (pattern == Pattern::kNvls) {
    std::size_t k = index_of(best.bw_inter);
    while (k > 0 && best.bw_inter < best.bw_intra * 2 &&
           fits(pattern, s, best.channels, best.bw_intra, speeds[k - 1])) {
      --k;
      best.bw_inter = speeds[k];
    }
  } else {
    std::size_t k = index_of(best.bw_intra);
    while (k > 0 && best.bw_intra < best.bw_inter * 2 &&
           fits(pattern, s, best.channels, speeds[k - 1], best.bw_inter)) {
      --k;
      best.bw_intra = speeds[k];
    }
  }
  return best;
}

NcclTopology CollectiveModel::topology(const GroupShape& shape) const {
  TRAINSIM_CHECK(shape.ranks >= 1 && shape.nodes >= 1 && shape.ranks_per_node >= 1,
                 "bad group shape");
  const NcclCalibration& c = cluster_.nccl;
  NcclTopology t;
  t.shape = shape;
  t.shape.nics_per_node = std::max(1, shape.nics_per_node);
  if (shape.ranks <= 1) return t;
  const GroupShape& s = t.shape;
  t.ring = search(Pattern::kRing, s, 1, c.ring_max_channels);
  t.tree = search(Pattern::kTree, s, t.ring.channels, t.ring.channels);
  const bool nvls = cluster_.intra_node.nvls && arch_ >= 2 && nvlink_ > 0 && s.ranks_per_node > 1;
  if (nvls) {
    const int heads = std::min(c.max_nvls_arity, s.ranks_per_node);
    t.nvls = search(Pattern::kNvls, s, s.nodes > 1 ? 1 : heads, heads);
  }
  if (cluster_.inter_node.sharp && s.nodes > 1) {
    t.collnet_chain = search(Pattern::kCollNetChain, s, t.ring.channels, t.ring.channels);
    if (nvlink_ > 0)
      t.collnet_direct =
          search(Pattern::kCollNetDirect, s, 1, std::min(c.max_direct_arity, s.ranks_per_node));
  }
  // Run-time channels (init.cc, connect.cc ncclTopoPostset): rings and trees share
  // min(ring, tree) channels, doubled; Hopper+ multi-node with fast rings doubles again.
  t.channels = std::min(c.max_channels, 2 * std::min(t.ring.channels, t.tree.channels));
  if (arch_ >= 2 && s.nodes > 1 && t.ring.bw_intra > c.multi_node_dup_bw &&
      t.channels < c.multi_node_dup_below) {
    t.channels = std::min(c.max_channels, 2 * t.channels);
  }
  if (t.nvls.channels > 0) {
    const auto a = static_cast<std::size_t>(arch_);
    t.nvls_channels =
        static_cast<int>(s.nodes > 1 ? c.nvls_channels_multi_node[a] : c.nvls_channels[a]);
  }
  return t;
}

const NcclGraph& CollectiveModel::graph_of(const NcclTopology& t, Algorithm a) const {
  switch (a) {
    case Algorithm::kTree:
      return t.tree;
    case Algorithm::kNvls:
    case Algorithm::kNvlsTree:
      return t.nvls;
    case Algorithm::kCollNetDirect:
      return t.collnet_direct;
    case Algorithm::kCollNetChain:
      return t.collnet_chain;
    case Algorithm::kRing:
    case Algorithm::kPat:
      return t.ring;
  }
  return t.ring;
}

// ---------------------------------------------------------------------------------------------
// NCCL's table (tuning.cc ncclTopoTuneModel and the enable rules there and in enqueue.cc).

CollectiveModel::Tuned CollectiveModel::tune(CollectiveKind kind, const NcclTopology& t,
                                             Algorithm a, Protocol p, double channel_scale,
                                             bool run_time) const {
  const NcclCalibration& c = cluster_.nccl;
  const GroupShape& s = t.shape;
  Tuned out;
  const int n = s.ranks, nodes = s.nodes;
  const double ppn = static_cast<double>(n) / nodes;  // NCCL's ppn: ranks / nodes
  const int local = s.ranks_per_node;
  const bool nvswitch = nvlink_ > 0;
  const bool collnet = cluster_.inter_node.sharp && nodes > 1;
  const bool simple = p == Protocol::kSimple;

  // Which functions each algorithm serves.
  switch (kind) {
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      if (a != Algorithm::kRing) return out;
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      if (a != Algorithm::kPat && a != Algorithm::kRing && a != Algorithm::kNvls &&
          a != Algorithm::kCollNetDirect) {
        return out;
      }
      break;
    case CollectiveKind::kAllReduce:
      if (a == Algorithm::kPat) return out;
      break;
    case CollectiveKind::kAllToAll:
      return out;  // point-to-point, not tuned
  }
  if ((a == Algorithm::kNvls || a == Algorithm::kNvlsTree) && !simple) return out;
  if (a == Algorithm::kPat && (!simple || n != nodes || nodes < 2))
    return out;  // PAT: 1 GPU per node
  // Algorithm availability.
  if (a == Algorithm::kNvlsTree && nodes == 1) return out;
  if ((a == Algorithm::kCollNetDirect || a == Algorithm::kCollNetChain) && !collnet) return out;
  if (a == Algorithm::kNvls && nodes > 1 && !collnet) return out;
  if (a == Algorithm::kCollNetDirect && !nvswitch) return out;
  if ((a == Algorithm::kCollNetDirect || a == Algorithm::kCollNetChain) &&
      local > c.max_direct_arity)
    return out;
  if ((a == Algorithm::kNvls || a == Algorithm::kNvlsTree) &&
      (t.nvls.channels == 0 || (kind != CollectiveKind::kAllReduce && local > c.max_nvls_arity))) {
    return out;
  }
  // LL128 only over NVLink (or one GPU per node) and network paths up to PXB/PXN, i.e. NICs that
  // write into GPU memory through the GPU's PCIe switch (GPUDirect RDMA).
  if (p == Protocol::kLL128 &&
      (!(nvswitch || local == 1) || (nodes > 1 && !cluster_.inter_node.gpudirect_rdma))) {
    return out;
  }

  const NcclGraph& g = graph_of(t, a);
  if (g.channels == 0) return out;
  if ((a == Algorithm::kNvls || a == Algorithm::kNvlsTree) && g.channels < 2) return out;

  const auto arch = static_cast<std::size_t>(arch_);
  const std::size_t scale = nodes <= 2 ? static_cast<std::size_t>(nodes - 1) : 2;
  const std::size_t ll_row = nodes == 1 ? arch : (cluster_.cpu_vendor == "amd" ? 1 : 0);
  const double ll_max_bw = c.ll_max_bw[ll_row][scale];
  const double channels = g.channels * channel_scale;
  const bool is_collnet = a == Algorithm::kCollNetDirect || a == Algorithm::kCollNetChain;
  double bw = (nodes <= 2 || is_collnet) ? g.bw_intra : g.bw_inter;
  if (a == Algorithm::kNvls || a == Algorithm::kNvlsTree) {
    double intra = g.bw_intra * c.nvls_efficiency[arch] * (g.channels - 1) / g.channels;
    intra *= kind == CollectiveKind::kAllReduce ? 2.0 : (ppn - 1) / ppn;
    // On one node bwInter crosses no NIC: it is the search's speed step, which NCCL's estimate
    // keeps but the hardware does not have (run_time: NVLink alone binds).
    const double inter_bw = (run_time && nodes == 1)
                                ? std::numeric_limits<double>::max()
                                : g.bw_inter * ((nodes <= 2 && a == Algorithm::kNvlsTree) ? 2 : 1);
    bw = std::min({intra, inter_bw,
                   a == Algorithm::kNvlsTree ? c.per_ch_max_nvls_tree_bw[arch][scale]
                                             : std::numeric_limits<double>::max()});
  }
  double bus = channels * bw;
  if (a == Algorithm::kRing && p == Protocol::kLL)
    bus = std::min(ll_max_bw, bus * c.ll_ring_fraction);
  if (a == Algorithm::kRing && p == Protocol::kLL128) {
    bus = std::min(bus * c.ll128_efficiency, channels * c.per_ch_max_ring_ll128_bw[arch][scale]);
  }
  if (a == Algorithm::kTree && kind == CollectiveKind::kAllReduce) {
    bus = std::min(bus * c.tree_efficiency, channels * c.per_ch_max_tree_bw[arch][scale]);
  }
  if (a == Algorithm::kTree && p == Protocol::kLL)
    bus = std::min(bus / c.tree_ll_divisor, ll_max_bw);
  if (a == Algorithm::kTree && p == Protocol::kLL128) {
    bus = std::min(bus * (nodes == 1 ? c.tree_ll128_intra_factor : c.tree_ll128_inter_factor),
                   channels * c.per_ch_max_tree_ll128_bw[arch][scale]);
  }
  if (a == Algorithm::kPat) bus *= c.pat_efficiency;
  if (is_collnet && !simple) return out;
  if (a == Algorithm::kCollNetDirect) {
    if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter) {
      bus = ppn * std::min(g.bw_intra, g.bw_inter * c.collnet_inter_efficiency);
    } else {
      double factor = ppn / g.channels;  // GPU:NIC ratio
      factor -= (factor - 1) / 2;
      bus /= factor;
      if (arch_ >= 2) bus *= c.collnet_direct_hopper_efficiency;
    }
  }
  // NVLS and CollNetDirect all-gather/reduce-scatter across nodes need CollNet with one head per
  // local rank.
  if ((a == Algorithm::kNvls || a == Algorithm::kCollNetDirect) &&
      (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter) && nodes > 1 &&
      (!collnet || local > s.nics_per_node)) {
    return out;
  }
  if (bus <= 0) return out;

  const int nsteps = kind == CollectiveKind::kAllReduce ? 2 * (n - 1)
                     : is_ring_like(kind)               ? n - 1
                                                        : n;
  double alg = bus;
  if (!(a != Algorithm::kRing &&
        (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter))) {
    if (a == Algorithm::kRing || a == Algorithm::kNvls || a == Algorithm::kNvlsTree) {
      alg = bus * n / nsteps;
    } else {
      alg = bus * 0.5;
    }
  }

  // Latency.
  const std::size_t intra_hw = nvswitch ? kNvlinkLat : kPciLat;
  const std::size_t hw = nodes == 1 ? intra_hw : kNetLat;
  double intra_lat = c.hw_latency_us[intra_hw][ai(a)][pi(p)];
  const double nic_lat = cluster_.inter_node.nic_latency.microseconds();  // graph->latencyInter
  double inter_lat = (ppn == 1 ? c.hw_latency_us[kNetLat][ai(Algorithm::kTree)][pi(p)]
                               : c.hw_latency_us[kNetLat][ai(a)][pi(p)]) +
                     nic_lat + (simple ? nic_lat : 0.0);
  double lat = c.base_latency_us[ai(a)][pi(p)];
  const double log_nodes = log2_floor(nodes);
  switch (a) {
    case Algorithm::kRing: {
      if (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce) {
        // NCCL's graphs keep the same channels on every node on the systems we model.
        lat += c.hw_latency_us[hw][ai(a)][pi(p)];
      } else {
        double net_overhead = 0;
        if (nodes > 1) {
          net_overhead = cluster_.cpu_vendor == "amd" ? c.net_overhead_amd_us : c.net_overhead_us;
          if (simple) net_overhead *= 3;
        }
        intra_lat = std::max(intra_lat, net_overhead);
        const int inter_steps = nodes == 1                           ? 0
                                : kind == CollectiveKind::kAllReduce ? 2 * (nodes - 1)
                                                                     : nodes - 1;
        lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
      }
      break;
    }
    case Algorithm::kTree:
      if (kind == CollectiveKind::kAllReduce)
        lat += 2 * ((n / nodes - 1) * intra_lat + log_nodes * inter_lat);
      break;
    case Algorithm::kCollNetDirect:
      lat += 2 * (std::min(1, n / nodes - 1) * intra_lat +
                  (n / nodes - 1) * c.collnet_arity_latency_us) +
             inter_lat;
      break;
    case Algorithm::kCollNetChain:
      lat += 2 * (n / nodes - 1) * intra_lat + inter_lat;
      break;
    case Algorithm::kNvls:
      lat = intra_lat + (nodes > 1 ? inter_lat : 0.0);
      break;
    case Algorithm::kNvlsTree:
      lat += intra_lat + 2 * log_nodes * inter_lat;
      break;
    case Algorithm::kPat:
      lat += log_nodes * (inter_lat / c.pat_log_latency_divisor) + n * c.pat_rank_latency_us;
      break;
  }
  out.enabled = true;
  out.latency_us = lat;
  out.bus_bw = bus;
  out.alg_bw = alg;
  return out;
}

double CollectiveModel::nccl_latency(CollectiveKind kind, double bytes, const NcclTopology& t,
                                     Algorithm a, Protocol p, const Tuned& e) const {
  // Plateau effect of multi-node Simple rings (ncclTopoGetAlgoTime; 1.9 before Ampere, which we
  // do not model).
  if (a == Algorithm::kRing && p == Protocol::kSimple && t.shape.nodes > 1 &&
      kind == CollectiveKind::kAllReduce &&
      std::floor(bytes / (static_cast<double>(t.channels) * t.shape.ranks)) >= 64) {
    return e.latency_us * cluster_.nccl.plateau_factor;
  }
  return e.latency_us;
}

double CollectiveModel::nccl_time(CollectiveKind kind, double bytes, const NcclTopology& t,
                                  Algorithm a, Protocol p, const Tuned& e) const {
  const NcclCalibration& c = cluster_.nccl;
  double bw = e.alg_bw;
  const int log_size = log2_floor(std::floor(bytes / 64.0));
  if (a == Algorithm::kTree && kind == CollectiveKind::kAllReduce && log_size >= 0 &&
      log_size < 23) {
    bw *= c.tree_correction[pi(p)][static_cast<std::size_t>(log_size)];
  }
  if (a == Algorithm::kNvlsTree && kind == CollectiveKind::kAllReduce && log_size >= 0 &&
      log_size < 24 && arch_ >= 3) {
    bw *= c.tree_correction[pi(p)][static_cast<std::size_t>(log_size)];
  }
  return nccl_latency(kind, bytes, t, a, p, e) + bytes / (1000.0 * bw);
}

// Channels the kernel runs on (enqueue.cc topoGetAlgoInfo): NVLS uses its own channels; rings and
// trees drop channels while each thread would have less than its threshold of bytes.
int CollectiveModel::channels_used(double bytes, const NcclTopology& t, Algorithm a,
                                   Protocol p) const {
  const NcclCalibration& c = cluster_.nccl;
  if (a == Algorithm::kNvls || a == Algorithm::kNvlsTree) {
    return a == Algorithm::kNvls && t.shape.nodes > 1 ? std::min(t.nvls_channels, t.channels)
                                                      : t.nvls_channels;
  }
  int nc = t.channels;
  if (a == Algorithm::kCollNetDirect) return nc;
  double threads = c.max_threads[pi(p)];
  const NcclGraph& ring = t.ring;
  if (a == Algorithm::kRing && p == Protocol::kSimple &&
      ring.bw_intra * ring.channels <= c.pcie_x16_bw[0])
    threads = 256;
  double threshold = c.thread_threshold[pi(p)];
  if (a == Algorithm::kRing && p == Protocol::kLL) threshold *= t.shape.ranks;
  while (nc >= 2 && bytes < nc * threads * threshold) --nc;
  return std::max(1, nc);
}

// Pipeline fill of the Simple protocol: a chunk moves store-and-forward through the algorithm's
// stages (tree and chain links, NVLS scatter/reduce/gather), and the transfer reaches its rate
// only once the first chunk has crossed them, so the time grows by (stages - 1) chunk times.
// Rings have no fill (every link is busy from the first step) but a fitted start-up share of
// their first loop. Chunk sizes follow NCCL's buffers and its chunk
// shrinking for small messages (enqueue.cc calcCollChunking).
double CollectiveModel::pipeline_fill_us(CollectiveKind kind, double bytes, const NcclTopology& t,
                                         Algorithm a, int channels, const Tuned& e) const {
  const NcclCalibration& c = cluster_.nccl;
  const GroupShape& s = t.shape;
  const double step = c.buffer_bytes[pi(Protocol::kSimple)] / c.steps;  // bytes per step slot
  const double nc = std::max(1, channels);
  const double link_rate = e.bus_bw * 1e3 / nc;  // bytes per microsecond per channel and link
  const double alg_rate = e.alg_bw * 1e3 / nc;
  const double hops =
      (s.ranks_per_node - 1) + std::ceil(std::log2(static_cast<double>(s.nodes)) - kEps);
  double stages = 1, chunk = 0, rate = alg_rate;
  switch (a) {
    case Algorithm::kRing: {
      const bool pipelined = kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce;
      const double per_loop = pipelined ? 1.0 : s.ranks;  // chunks per channel per loop
      chunk =
          std::min(step * (pipelined ? 1 : c.ring_chunk_steps), std::ceil(bytes / (nc * per_loop)));
      rate = link_rate;
      if (pipelined) {  // a chain: the first chunk crosses n - 1 links before the last one starts
        stages = std::max(1, s.ranks - 1);
        break;
      }
      // A ring loop: every link busy from the start, but the first loop runs below the link rate
      // (fitted: a fraction of that loop's bandwidth time; the rest of the transfer is at rate).
      const double steps = kind == CollectiveKind::kAllReduce ? 2.0 * (s.ranks - 1) : s.ranks - 1.0;
      return c.ring_first_loop_fraction * steps * chunk / rate;
    }
    case Algorithm::kTree:
    case Algorithm::kCollNetChain:
      chunk = std::min(step, std::ceil(bytes / nc));
      stages = 2 * hops;
      break;
    case Algorithm::kPat:
    case Algorithm::kCollNetDirect:
      chunk = std::min(step, std::ceil(bytes / nc));
      stages = a == Algorithm::kPat ? hops + 1 : c.nvls_pipeline_stages;
      break;
    case Algorithm::kNvls:
    case Algorithm::kNvlsTree: {
      const double heads = std::min(s.ranks_per_node, c.max_nvls_arity);
      const double ops = nc * heads;  // concurrent chunks in flight
      chunk = c.nvls_chunk_bytes;
      if (a == Algorithm::kNvls) {
        if (s.nodes > 1 && e.alg_bw < 150) chunk = std::min(chunk, 32768.0);
        if (bytes < 64 * ops * chunk && chunk > 65536) chunk = 65536;
        if (bytes < 8 * ops * chunk && chunk > 32768) chunk = 32768;
        if (bytes < 2 * ops * chunk && chunk > 16384) chunk = 16384;
        return (c.nvls_pipeline_stages - 1) * heads * chunk / rate;
      }
      if (s.nodes >= 4) chunk = std::min(chunk, 65536.0);
      if (bytes < 32 * ops * chunk && chunk > 262144) chunk = 262144;
      if (bytes < 16 * ops * chunk && chunk > 131072) chunk = 131072;
      if (bytes < 4 * ops * chunk && chunk > 65536) chunk = 65536;
      if (bytes < 1 * ops * chunk && chunk > 32768) chunk = 32768;
      return ((c.nvls_pipeline_stages - 1) * heads * chunk +
              2 * (hops - (s.ranks_per_node - 1)) * chunk) /
             rate;
    }
  }
  return std::max(0.0, stages - 1) * chunk / rate;
}

std::optional<RingCost> measured_ring_cost(const ComputeCalibration::RingCalibration& ring, CollectiveKind kind,
                                           int ranks, double bytes) {
  const double n = ranks;
  double steps = 0, link = 0, user = 0, passes = 0;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      steps = 2 * (n - 1), link = 2 * (n - 1) / n, user = 1, passes = 1;
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      steps = n - 1, link = (n - 1) / n, user = (1 + 1 / n) / 2, passes = 0.5;
      break;
    default:
      return std::nullopt;
  }
  RingCost cost;
  cost.latency_us = ring.latency_us + steps * ring.step_us;
  if (ring.fill_GBps > 0) cost.latency_us += passes * std::min(bytes, ring.fill_bytes) / (1e3 * ring.fill_GBps);
  cost.alg_bandwidth_GBps = 1.0 / (link / ring.link_GBps + user / ring.user_GBps);
  return cost;
}

// The GPU's measured intra-node ring where it is slower than NCCL's model: the per-step
// synchronisation and the user-buffer copies NCCL's estimate leaves out. Rings of one NVLink node
// only: across nodes the NIC sets the rate, and the sweeps were single-node.
void CollectiveModel::apply_measured_ring(CollectiveKind kind, double bytes, const GroupShape& s,
                                          CollectivePrediction& out) const {
  const auto& ring = cluster_.gpu.calibration.intra_node_ring;
  if (!ring || s.nodes != 1 || s.ranks < 2 || nvlink_ <= 0 || bytes < ring->min_bytes) return;
  const std::optional<RingCost> cost = measured_ring_cost(*ring, kind, s.ranks, bytes);
  if (!cost || cost->time_us(bytes) <= out.time_us) return;
  out.latency_us = cost->latency_us;
  out.alg_bandwidth_GBps = cost->alg_bandwidth_GBps;
  out.time_us = cost->time_us(bytes);
}

// ---------------------------------------------------------------------------------------------

CollectivePrediction CollectiveModel::predict(CollectiveKind kind, Bytes bytes,
                                              const NcclTopology& t, Algorithm a, Protocol p,
                                              int gpus_per_thread) const {
  const NcclCalibration& c = cluster_.nccl;
  CollectivePrediction out;
  out.algorithm = a;
  out.protocol = p;
  const double b = std::max(1.0, bytes.as_double());
  if (t.shape.ranks <= 1) {  // a one-rank collective is a local copy
    if (a != Algorithm::kRing || p != Protocol::kSimple) return out;
    out.valid = true;
    out.alg_bandwidth_GBps = cluster_.gpu.memory_bandwidth.gbps() / 2;
    out.time_us = out.nccl_time_us = b / (1e3 * out.alg_bandwidth_GBps);
    out.channels = 1;
    return out;
  }
  if (kind == CollectiveKind::kAllToAll) {
    if (a != Algorithm::kRing || p != Protocol::kSimple) return out;
    out = all_to_all(bytes, t.shape, plain_all_to_all(t.shape));
    out.channels = p2p_channels(b / t.shape.ranks, t.shape, t.shape.ranks - 1, t.channels);
  } else {
    const Tuned full = tune(kind, t, a, p, 1.0, false);
    if (!full.enabled) return out;
    out.valid = true;
    out.nccl_time_us = nccl_time(kind, b, t, a, p, full);
    out.channels = channels_used(b, t, a, p);
    const int run_channels = (a == Algorithm::kNvls || a == Algorithm::kNvlsTree)
                                 ? std::max(1, out.channels)
                                 : std::max(1, t.channels);
    const Tuned used =
        tune(kind, t, a, p, std::min(1.0, static_cast<double>(out.channels) / run_channels), true);
    // NCCL's latency (with the ring plateau factor), plus the pipeline fill of Simple chunks; the
    // fill replaces NCCL's empirical tree size correction, so the rate is NCCL's uncorrected one.
    out.latency_us = nccl_latency(kind, b, t, a, p, full);
    if (p == Protocol::kSimple)
      out.latency_us += pipeline_fill_us(kind, b, t, a, out.channels, used);
    out.alg_bandwidth_GBps = used.alg_bw;
    out.time_us = out.latency_us + b / (1e3 * out.alg_bandwidth_GBps);
    if (a == Algorithm::kRing) apply_measured_ring(kind, b, t.shape, out);
  }
  if (gpus_per_thread > 0) {
    const double floor = gpus_per_thread * c.launch_us;
    if (out.time_us < floor) {
      out.latency_us += floor - out.time_us;
      out.time_us = floor;
    }
  }
  return out;
}

CollectivePrediction CollectiveModel::predict(CollectiveKind kind, Bytes bytes,
                                              const NcclTopology& t, int gpus_per_thread) const {
  CollectivePrediction best;
  for (int a = 0; a < NcclCalibration::kAlgorithms; ++a) {
    for (int p = 0; p < NcclCalibration::kProtocols; ++p) {
      const CollectivePrediction c = predict(kind, bytes, t, static_cast<Algorithm>(a),
                                             static_cast<Protocol>(p), gpus_per_thread);
      if (c.valid && (!best.valid || c.nccl_time_us < best.nccl_time_us)) best = c;
    }
  }
  TRAINSIM_CHECK(best.valid, "no NCCL algorithm applies");
  return best;
}

CollectivePrediction CollectiveModel::predict(CollectiveKind kind, Bytes bytes,
                                              const GroupShape& shape, int gpus_per_thread) const {
  return predict(kind, bytes, topology(shape), gpus_per_thread);
}

CollectivePrediction CollectiveModel::predict_p2p(Bytes bytes, const NcclTopology& pair) const {
  const NcclCalibration& c = cluster_.nccl;
  const bool same_node = pair.shape.nodes == 1;
  const double link = nvlink_ > 0 ? nvlink_ : pcie_;
  CollectivePrediction out = p2p_prediction(
      c.p2p_latency_us + (same_node ? 0.0 : cluster_.inter_node.nic_latency.microseconds()),
      bytes.as_double(),
      same_node ? link * c.p2p_nvlink_efficiency : std::min(nic_, pcie_) * c.p2p_net_efficiency);
  out.channels = p2p_channels(bytes.as_double(), pair.shape, 1, pair.channels);
  return out;
}

CollectivePrediction CollectiveModel::predict_p2p(Bytes bytes, bool same_node) const {
  GroupShape pair;
  pair.ranks = 2;
  pair.nodes = same_node ? 1 : 2;
  pair.ranks_per_node = same_node ? 2 : 1;
  pair.nics_per_node = 1;
  return predict_p2p(bytes, topology(pair));
}

int CollectiveModel::p2p_channels(double bytes_per_peer, const GroupShape& s, int peers, int run_channels) const {
  const NcclCalibration& c = cluster_.nccl;
  if (s.ranks < 2 || peers < 1) return 1;
  // ncclTopoComputeP2pChannels: as many channels as the communicator runs, rounded up to a power
  // of two, at most MAXCHANNELS.
  const int max_channels = pow2_down(std::max(1, c.max_channels));
  const int total = std::min(max_channels, pow2_up(std::clamp(run_channels, 1, c.max_channels)));
  // ncclTopoGetNchannels, the fewest over the rank's peers: 2 per NVLink to a peer of its node
  // (each GPU's NVLinks reach every other through NVSwitch), 2 over PCIe; to another node, one per
  // local NIC or more to carry the NIC's bandwidth at NCCL_P2P_PER_CHANNEL_NET_BW each (one NIC per
  // GPU assumed, reached at the slower of its line rate and the GPU's PCIe link).
  int per_peer = c.max_channels;
  if (s.ranks_per_node > 1) per_peer = std::min(per_peer, nvlink_ > 0 ? 2 * std::max(1, cluster_.gpu.nvlink_links) : 2);
  if (s.nodes > 1) {
    const double net_GBps = std::min(nic_, pcie_);
    per_peer = std::min(per_peer, std::max(1, static_cast<int>(std::ceil(net_GBps / c.p2p_net_channel_GBps - kEps))));
  }
  per_peer = pow2_up(std::max(1, per_peer));
  if (s.nodes > 1) {  // every peer within one round of the channels
    const int batches = (s.ranks + c.p2p_peers_per_batch - 1) / c.p2p_peers_per_batch;
    while (per_peer * batches > total && per_peer > 1) per_peer /= 2;
  } else {
    per_peer = std::min(per_peer, total);
  }
  // ncclPrepareTasks: one channel per operation where the ranks would not fit on all channels.
  int per_op_min = per_peer;
  while (per_op_min * s.ranks > total && per_op_min > 1) per_op_min /= 2;
  // addP2pToPlan: parts of at least minPartSize, doubled up to the peer's channels while a part
  // would exceed maxPartSize. (NCCL doubles the network chunk on Grace-Blackwell hosts, whose
  // four GPUs per host aggregate less; the presets do not say which CPU a node has, so it is not.)
  double chunk = s.nodes > 1 ? c.p2p_net_chunk_bytes : (nvlink_ > 0 ? c.p2p_nvlink_chunk_bytes : c.p2p_pcie_chunk_bytes);
  chunk = std::min(chunk, c.buffer_bytes[pi(Protocol::kSimple)] / c.steps);
  const double min_part = s.nodes > 1 ? chunk / 2 : chunk / 8;
  const double max_part = s.nodes > 1 ? chunk : chunk * 32;
  const double b = std::max(1.0, bytes_per_peer);
  int n = std::max(1, std::min(per_op_min, static_cast<int>(std::min(1e6, std::ceil(b / min_part)))));
  double part = std::max(min_part, std::ceil(b / n));
  while (part > max_part && n <= per_peer / 2) {
    n *= 2;
    part = std::ceil(b / n);
  }
  // The peers' operations start on different channels (ncclP2pChannelBaseForRound): the kernel's
  // grid is every channel one of them uses.
  return static_cast<int>(std::min<double>(total, static_cast<double>(n) * peers));
}

// All-to-all is a group of point-to-point sends (NCCL has no tuned algorithm for it): each rank
// sends its node's peers their share over NVLink and the rest through its share of the node's
// NICs; the slower part sets the time. A rank's traffic cannot spread over several NICs
// (sjeaugey, NVIDIA/nccl-tests #267).
CollectivePrediction CollectiveModel::all_to_all(Bytes bytes, const GroupShape& s, const AllToAllShares& shares) const {
  const NcclCalibration& c = cluster_.nccl;
  const double local = s.ranks_per_node;
  const double b = bytes.as_double();
  const double link = nvlink_ > 0 ? nvlink_ : pcie_;
  const double intra_us = b * shares.intra / (1e3 * link * c.p2p_nvlink_efficiency);
  const double nic_share =
      std::min(nic_, pcie_) * std::min(1.0, static_cast<double>(s.nics_per_node) / local);
  const double inter_us = b * shares.inter / (1e3 * nic_share * c.p2p_net_efficiency);
  const double stream_us = std::max({intra_us, inter_us, 1e-9});
  return p2p_prediction(
      c.p2p_latency_us + (s.nodes > 1 ? cluster_.inter_node.nic_latency.microseconds() : 0.0), b,
      b / (1e3 * stream_us));
}

CollectivePrediction CollectiveModel::predict_all_to_all(Bytes bytes, const GroupShape& shape,
                                                         const AllToAllShares& shares) const {
  if (shape.ranks <= 1) return predict(CollectiveKind::kAllToAll, bytes, shape);
  return all_to_all(bytes, shape, shares);
}

AllToAllShares plain_all_to_all(const GroupShape& s) {
  const double n = s.ranks, local = s.ranks_per_node;
  return {(n - local) / n, (local - 1) / n};
}

namespace {

// C(total - missing, k) / C(total, k): the chance that k draws without repeats from `total`
// miss all of `missing` given ones.
double miss_all(double total, double missing, int k) {
  double p = 1;
  for (int i = 0; i < k; ++i) {
    if (total - missing - i <= 0) return 0;
    p *= (total - missing - i) / (total - i);
  }
  return p;
}

double binomial(int n, int k) {
  if (k < 0 || k > n) return 0;
  double r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

}  // namespace

AllToAllShares multicast_all_to_all(const GroupShape& s, int fanout, int targets, int groups, int groups_chosen) {
  const int nodes = std::max(1, s.nodes);
  const double local = s.ranks_per_node;
  const int k = std::max(1, fanout);
  const double per_node = static_cast<double>(targets) / nodes;
  double hit = 0;  // P(a given node holds one of an item's destinations)
  if (groups > 1 && groups_chosen >= 1 && groups_chosen < groups && groups % nodes == 0) {
    // Whole groups on each node: q of them; c of the node's groups are among those chosen.
    const int q = groups / nodes;
    const double per_group = static_cast<double>(targets) / groups, candidates = groups_chosen * per_group;
    for (int c = 0; c <= std::min(q, groups_chosen); ++c) {
      const double pc = binomial(q, c) * binomial(groups - q, groups_chosen - c) / binomial(groups, groups_chosen);
      hit += pc * (1 - miss_all(candidates, c * per_group, k));
    }
  } else if (groups > 1 && groups_chosen >= 1 && groups_chosen < groups && nodes % groups == 0) {
    // Each group spans nodes / groups whole nodes: the node's group is chosen with probability
    // groups_chosen / groups.
    const double candidates = groups_chosen * static_cast<double>(targets) / groups;
    hit = static_cast<double>(groups_chosen) / groups * (1 - miss_all(candidates, per_node, k));
  } else {
    hit = 1 - miss_all(targets, per_node, k);
  }
  return {(nodes - 1) * hit / k, local > 1 ? (local - 1) / local : 0.0};
}

}  // namespace trainsim::topo
