#include "topologies/collective_model.h"

#include <algorithm>
#include <cmath>

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

int arch_row(Architecture a) {
  switch (a) {
    case Architecture::kAmpere:
      return 1;
    case Architecture::kHopper:
      return 2;
    case Architecture::kBlackwell:
      return 3;
  }
  return 1;
}

constexpr int kNetLink = 2, kNvlinkLink = 0;

int idx(Algorithm a) { return static_cast<int>(a); }
int idx(Protocol p) { return static_cast<int>(p); }

}  // namespace

CollectiveModel::CollectiveModel(const ClusterSpec& cluster)
    : cluster_(cluster), arch_(arch_row(cluster.gpu.architecture)) {
  nvlink_total_ = cluster_.gpu.nvlink_links * cluster_.nccl.nvlink_link_bw[static_cast<std::size_t>(arch_)];
  if (cluster_.intra_node.fabric != "nvswitch" || nvlink_total_ <= 0) {
    // PCIe-only node: NCCL's PCIe model, width x code / 80 (topo.cc): Gen4 x16 = 24 GB/s.
    nvlink_total_ = cluster_.pcie_generation >= 5 ? 48.0 : 24.0;
  }
}

double CollectiveModel::nic_speed_GBps() const {
  // NCCL reads the NIC speed in Mb/s and divides by 8000 (topo.cc): 400 Gb/s -> 50 GB/s.
  return cluster_.inter_node.nic_bandwidth.gbps();
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

CollectiveModel::Graph CollectiveModel::ring_graph(const GroupShape& s) const {
  const NcclCalibration& c = cluster_.nccl;
  const auto& intra_speeds = arch_ >= 3   ? c.intra_speeds_blackwell
                             : arch_ == 2 ? c.intra_speeds_hopper
                                          : c.intra_speeds_pre_hopper;
  const auto& inter_speeds = arch_ >= 3   ? c.inter_speeds_blackwell
                             : arch_ == 2 ? c.inter_speeds_hopper
                                          : c.inter_speeds_pre_hopper;
  constexpr int kMaxChannels = 16;  // MAXCHANNELS/2: the search's channel budget per graph
  Graph g;
  double best = 0;
  if (s.nodes <= 1) {
    // Intra-node ring: the fastest per-channel speed whose channels fill the NVLink bandwidth.
    for (double sp : intra_speeds) {
      const int ch = std::min(kMaxChannels, static_cast<int>(std::floor(nvlink_total_ / sp + 1e-9)));
      if (ch >= 1 && ch * sp > best + 1e-9) {
        best = ch * sp;
        g.channels = ch;
        g.bw_intra = sp;
      }
    }
  } else {
    // Multi-node ring: each channel leaves the node through one NIC, so the per-channel speed is
    // bounded by a NIC; the ring's intra-node hops must also carry it.
    const double nic = nic_speed_GBps();
    for (double sp : inter_speeds) {
      const int per_nic = static_cast<int>(std::floor(nic / sp + 1e-9));
      int ch = std::min(kMaxChannels, per_nic * s.nics_per_node);
      if (s.ranks_per_node > 1) {
        ch = std::min(ch, static_cast<int>(std::floor(nvlink_total_ / sp + 1e-9)));
      }
      if (ch >= 1 && ch * sp > best + 1e-9) {
        best = ch * sp;
        g.channels = ch;
        g.bw_intra = sp;
      }
    }
  }
  if (g.channels == 0) {  // slower than every step of the search: one channel at link speed
    g.channels = 1;
    g.bw_intra = s.nodes <= 1 ? nvlink_total_ : nic_speed_GBps();
  }
  // Channel duplication (search.cc): fast channels are split in two.
  const bool sm90_plus = arch_ >= 2;
  if (g.bw_intra >= 25.0 && !(sm90_plus && g.bw_intra < 50.0 && g.channels > 4) &&
      2 * g.channels <= 2 * kMaxChannels) {
    g.channels *= 2;
    g.bw_intra /= 2;
  }
  g.bw_inter = g.bw_intra;
  return g;
}

CollectiveModel::Graph CollectiveModel::nvls_graph(const GroupShape& s) const {
  // NVLS uses up to 16 channels (NCCL_NVLS_NCHANNELS), each a share of the NVLink bandwidth.
  Graph g;
  g.channels = 16;
  g.bw_intra = nvlink_total_ / g.channels;
  g.bw_inter = s.nodes > 1 ? nic_speed_GBps() * s.nics_per_node / g.channels : g.bw_intra;
  return g;
}

CollectivePrediction CollectiveModel::predict(CollectiveKind kind, Bytes bytes, const GroupShape& shape,
                                              Algorithm a, Protocol p) const {
  const NcclCalibration& c = cluster_.nccl;
  CollectivePrediction out;
  out.algorithm = a;
  out.protocol = p;
  const int n = std::max(1, shape.ranks);
  const int nodes = std::max(1, shape.nodes);
  const int ppn = std::max(1, shape.ranks_per_node);
  const bool hopper_plus = arch_ >= 2;
  const bool nvswitch = cluster_.intra_node.fabric == "nvswitch";

  // Which algorithms NCCL enables for this function (enqueue.cc / tuning.cc).
  switch (a) {
    case Algorithm::kRing:
      break;
    case Algorithm::kTree:
      if (kind != CollectiveKind::kAllReduce) return out;
      break;
    case Algorithm::kNvls:
      if (!cluster_.intra_node.nvls || !hopper_plus || ppn < 2 || p != Protocol::kSimple) return out;
      if (kind != CollectiveKind::kAllReduce && kind != CollectiveKind::kAllGather &&
          kind != CollectiveKind::kReduceScatter)
        return out;
      if (nodes > 1 && !cluster_.inter_node.sharp) return out;  // multi-node NVLS needs CollNet
      if (kind != CollectiveKind::kAllReduce && ppn > 32) return out;
      break;
    case Algorithm::kNvlsTree:
      if (!cluster_.intra_node.nvls || !hopper_plus || nodes < 2 || ppn < 2 ||
          p != Protocol::kSimple || kind != CollectiveKind::kAllReduce)
        return out;
      break;
    case Algorithm::kCollNetDirect:
    case Algorithm::kCollNetChain:
      if (!cluster_.inter_node.sharp || nodes < 2 || p != Protocol::kSimple) return out;
      if (a == Algorithm::kCollNetDirect && (!nvswitch || ppn > 8)) return out;
      if (kind != CollectiveKind::kAllReduce &&
          !(a == Algorithm::kCollNetDirect &&
            (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter)))
        return out;
      break;
    case Algorithm::kPat:
      if (ppn != 1 || nodes < 2 ||
          (kind != CollectiveKind::kAllGather && kind != CollectiveKind::kReduceScatter))
        return out;
      break;
  }
  if (kind == CollectiveKind::kAllToAll && a != Algorithm::kRing) return out;
  if ((kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce) && a != Algorithm::kRing) return out;
  if (n == 1) {  // a one-rank collective is a local copy
    if (a != Algorithm::kRing || p != Protocol::kSimple) return out;
    out.valid = true;
    out.latency_us = 0;
    out.alg_bandwidth_GBps = cluster_.gpu.memory_bandwidth.gbps() / 2;
    out.time_us = static_cast<double>(bytes.count()) / (1e3 * out.alg_bandwidth_GBps);
    out.channels = 1;
    return out;
  }

  const Graph g = (a == Algorithm::kNvls || a == Algorithm::kNvlsTree) ? nvls_graph(shape) : ring_graph(shape);
  const int scale = nodes <= 1 ? 0 : nodes == 2 ? 1 : 2;
  const auto arch = static_cast<std::size_t>(arch_);
  const auto sc = static_cast<std::size_t>(scale);

  // ---- bandwidth (tuning.cc) ----
  const double bw = (nodes <= 2 || a == Algorithm::kCollNetDirect || a == Algorithm::kCollNetChain)
                        ? g.bw_intra
                        : g.bw_inter;
  double bus = g.channels * bw;
  const double ll_max =
      nodes <= 1 ? c.ll_max_bw[arch][0]
                 : c.ll_max_bw[cluster_.cpu_vendor == "amd" ? 1u : 0u][sc];  // CPU row when multi-node
  if (a == Algorithm::kRing) {
    if (p == Protocol::kLL) bus = std::min(ll_max, 0.5 * bus);
    if (p == Protocol::kLL128) bus = std::min(c.ll128_efficiency * bus, g.channels * c.per_ch_max_ring_ll128_bw[arch][sc]);
  } else if (a == Algorithm::kTree) {
    bus = std::min(c.tree_efficiency * bus, g.channels * c.per_ch_max_tree_bw[arch][sc]);
    if (p == Protocol::kLL) bus = std::min(bus / c.tree_ll_divisor, ll_max);
    if (p == Protocol::kLL128) {
      bus = std::min(bus * (nodes <= 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.channels * c.per_ch_max_tree_ll128_bw[arch][sc]);
    }
  } else if (a == Algorithm::kPat) {
    bus *= 0.75;
  } else if (a == Algorithm::kNvls || a == Algorithm::kNvlsTree) {
    double intra = g.bw_intra * c.nvls_efficiency[arch] * (g.channels - 1) / g.channels;
    if (kind == CollectiveKind::kAllReduce) {
      intra *= 2;
    } else {
      intra *= static_cast<double>(ppn - 1) / ppn;
    }
    double inter = g.bw_inter;
    if (a == Algorithm::kNvlsTree && nodes <= 2) inter *= 2;
    double per_ch = nodes > 1 ? std::min(intra, inter) : intra;
    if (a == Algorithm::kNvlsTree) per_ch = std::min(per_ch, c.per_ch_max_nvls_tree_bw[arch][sc]);
    bus = g.channels * per_ch;
  } else if (a == Algorithm::kCollNetDirect) {
    if (kind == CollectiveKind::kAllGather || kind == CollectiveKind::kReduceScatter) {
      bus = ppn * std::min(g.bw_intra, 0.9 * g.bw_inter);
    } else {
      const double f = static_cast<double>(ppn) / g.channels;
      if (f > 1) bus /= (f - (f - 1) / 2);
      if (hopper_plus) bus *= 0.85;
    }
  }
  if (bus <= 0) return out;

  // busBw -> algBw
  int nsteps = 1;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      nsteps = 2 * (n - 1);
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      nsteps = n - 1;
      break;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      nsteps = n;
      break;
  }
  double alg;
  if (a == Algorithm::kRing || a == Algorithm::kNvls || a == Algorithm::kNvlsTree) {
    alg = (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce)
              ? bus
              : bus * n / nsteps;
  } else if (a == Algorithm::kTree || a == Algorithm::kCollNetChain ||
             (a == Algorithm::kCollNetDirect && kind == CollectiveKind::kAllReduce)) {
    alg = bus * 0.5;
  } else {
    alg = bus;
  }
  if (kind == CollectiveKind::kAllToAll) {
    // All-to-all moves (n-1)/n of each rank's buffer through the same links as a ring step
    // pattern, but cannot aggregate NICs across channels (nccl-tests #267): one NIC per rank.
    if (nodes > 1) alg = std::min(alg, nic_speed_GBps() * c.p2p_net_efficiency * n / std::max(1, n - 1));
  }
  if (a == Algorithm::kTree && kind == CollectiveKind::kAllReduce) {
    // Empirical size correction indexed by log2(bytes/64), 64 B .. 256 MB (tuning.cc).
    const double chunks = std::max(1.0, static_cast<double>(bytes.count()) / 64.0);
    const int i = std::clamp(static_cast<int>(std::log2(chunks)), 0, 23);
    alg *= c.tree_correction[static_cast<std::size_t>(idx(p))][static_cast<std::size_t>(i)];
  }

  // ---- latency (tuning.cc) ----
  const double base = c.base_latency_us[static_cast<std::size_t>(idx(a))][static_cast<std::size_t>(idx(p))];
  const auto intra_link = static_cast<std::size_t>(nvswitch ? kNvlinkLink : 1);
  const double intra_lat = c.hw_latency_us[intra_link][static_cast<std::size_t>(idx(a))][static_cast<std::size_t>(idx(p))];
  const Algorithm net_algo = (a == Algorithm::kRing && ppn == 1) ? Algorithm::kTree : a;
  const double inter_lat =
      c.hw_latency_us[kNetLink][static_cast<std::size_t>(idx(net_algo))][static_cast<std::size_t>(idx(p))];
  const double net_overhead = nodes > 1 ? c.net_overhead_us * (p == Protocol::kSimple ? 3.0 : 1.0) : 0.0;
  double lat = 0;
  const double log_nodes = std::log2(static_cast<double>(nodes));
  switch (a) {
    case Algorithm::kRing: {
      if (kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce) {
        lat = base + nsteps * (nodes > 1 ? std::max(intra_lat, inter_lat) : intra_lat);
      } else {
        const int inter_steps = nodes <= 1 ? 0
                                : kind == CollectiveKind::kAllReduce ? 2 * (nodes - 1)
                                                                     : nodes - 1;
        lat = base + (nsteps - inter_steps) * std::max(intra_lat, net_overhead) + inter_steps * inter_lat;
      }
      break;
    }
    case Algorithm::kTree:
      lat = base + 2 * ((ppn - 1) * intra_lat + log_nodes * inter_lat);
      break;
    case Algorithm::kCollNetDirect:
      lat = base + 2 * (std::min(1, ppn - 1) * intra_lat + (ppn - 1) * 0.4) + inter_lat;
      break;
    case Algorithm::kCollNetChain:
      lat = base + 2 * (ppn - 1) * intra_lat + inter_lat;
      break;
    case Algorithm::kNvls:
      lat = intra_lat + (nodes > 1 ? inter_lat : 0);
      break;
    case Algorithm::kNvlsTree:
      lat = intra_lat + 2 * log_nodes * inter_lat;
      break;
    case Algorithm::kPat:
      lat = base + log_nodes * inter_lat / 3.5 + 2.8 * n;
      break;
  }
  // Plateau effect: multi-node Ring/Simple all-reduce with >= 64 B per rank per channel.
  if (a == Algorithm::kRing && p == Protocol::kSimple && kind == CollectiveKind::kAllReduce && nodes > 1 &&
      static_cast<double>(bytes.count()) / (g.channels * n) >= 64.0) {
    lat *= c.plateau_factor;
  }

  out.valid = true;
  out.channels = g.channels;
  out.latency_us = lat;
  out.alg_bandwidth_GBps = alg;
  out.time_us = lat + static_cast<double>(bytes.count()) / (1e3 * alg);
  return out;
}

CollectivePrediction CollectiveModel::predict(CollectiveKind kind, Bytes bytes, const GroupShape& shape) const {
  CollectivePrediction best;
  for (int a = 0; a < NcclCalibration::kAlgorithms; ++a) {
    for (int p = 0; p < NcclCalibration::kProtocols; ++p) {
      const CollectivePrediction c = predict(kind, bytes, shape, static_cast<Algorithm>(a), static_cast<Protocol>(p));
      if (c.valid && (!best.valid || c.time_us < best.time_us)) best = c;
    }
  }
  TRAINSIM_CHECK(best.valid, "no NCCL algorithm applies");
  return best;
}

CollectivePrediction CollectiveModel::predict_p2p(Bytes bytes, bool same_node) const {
  const NcclCalibration& c = cluster_.nccl;
  CollectivePrediction out;
  out.valid = true;
  out.algorithm = Algorithm::kRing;
  out.protocol = Protocol::kSimple;
  out.channels = 1;
  out.latency_us = c.p2p_latency_us;
  out.alg_bandwidth_GBps = same_node ? nvlink_total_ * c.p2p_nvlink_efficiency
                                     : nic_speed_GBps() * c.p2p_net_efficiency;
  out.time_us = out.latency_us + static_cast<double>(bytes.count()) / (1e3 * out.alg_bandwidth_GBps);
  return out;
}

}  // namespace trainsim::topo
