#include "report/simulation.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <set>
#include <string_view>

#include "models/graph_vocabulary.h"
#include "topologies/cluster_timing.h"
#include "topologies/collective_model.h"

namespace trainsim::report {

const char* communication_kind(std::uint8_t c) {
  switch (c) {
    case models::kTpComm:
      return "tp";
    case models::kDpComm:
      return "dp";
    case models::kPpComm:
      return "pp";
    case models::kCpComm:
      return "cp";
    case models::kEpComm:
      return "ep";
    case models::kEmbeddingComm:
      return "embedding";
    case models::kOffload:
      return "offload";
    default:
      return "other";
  }
}

namespace {

using models::Category;

// A rank's kernel time by kind (TimeBreakdown::compute_by_kernel): every compute task of its
// pipeline stage at the rank's speed.
std::vector<std::pair<std::string, double>> kernels_by_kind(const sim::TaskGraph& g, sim::RankId rank, sim::TimingModel& timing,
                                                            const std::vector<double>& slowdown) {
  const sim::RankClass& rc = g.rank_class(g.class_of(rank));
  const double speed = slowdown.empty() ? 1.0 : slowdown[sim::index(rank)];
  std::array<double, std::size(kKernelKinds)> kinds{};
  for (const sim::Task& t : rc.tasks) {
    if (t.kind != sim::TaskKind::kCompute) continue;
    const sim::Kernel& k = rc.kernels[t.payload];
    if (k.kernel_class == sim::KernelClass::kHostCopy) continue;  // copy engines: reported with communication
    const std::size_t kind = k.quantize                                            ? 3
                             : k.kernel_class == sim::KernelClass::kGemm           ? 0
                             : k.kernel_class == sim::KernelClass::kFlashAttention ? 1
                             : k.kernel_class == sim::KernelClass::kOptimizer      ? 4
                                                                                   : 2;
    kinds[kind] += timing.kernel_time(k).seconds() * speed;
  }
  std::vector<std::pair<std::string, double>> out;
  for (std::size_t i = 0; i < kinds.size(); ++i) out.emplace_back(kKernelKinds[i].name, kinds[i]);
  return out;
}

TimeBreakdown breakdown_of(const sim::RankAccount& a, sim::TimePoint makespan, bool sm_contention) {
  TimeBreakdown b;
  if (sm_contention) b.sm_contention_s = a.sm_contention.seconds();
  b.compute_s = (a.busy[models::kForward] + a.busy[models::kBackward]).seconds();
  b.recompute_s = a.busy[models::kRecompute].seconds();
  b.optimizer_s = a.busy[models::kOptimizer].seconds();
  std::vector<double> exposed(models::kNumCategories, 0.0);
  for (std::uint8_t c = models::kTpComm; c < models::kNumCategories; ++c) {
    exposed[c] += a.gap_exposed[c].seconds();
    // Waiting for a task that was itself held back: by a pipeline transfer (bubble) or by
    // other communication queued before it (exposed).
    const double held = a.gap_issue[c].seconds();
    if (c == models::kPpComm) {
      b.pipeline_bubble_s += a.gap_wait[c].seconds() + held;
    } else {
      b.synchronization_wait_s += a.gap_wait[c].seconds();
      exposed[c] += held;
    }
  }
  // Gaps behind compute on another stream count as idle; gaps with no cause as idle too.
  double idle = a.gap_other.seconds();
  for (std::uint8_t c = 0; c < models::kTpComm; ++c) {
    idle += a.gap_exposed[c].seconds() + a.gap_wait[c].seconds() + a.gap_issue[c].seconds();
  }
  // After the rank's last compute task the iteration still runs until its communication (exposed)
  // or its work on other streams (idle), and every other rank, is done.
  for (std::uint8_t c = 0; c < models::kNumCategories; ++c) {
    (models::is_communication(c) ? exposed[c] : idle) += a.gap_tail[c].seconds();
  }
  idle += (makespan - a.finish).seconds();
  b.idle_s = idle;
  b.host_launch_s = a.host_wait.seconds();
  for (std::uint8_t c = models::kTpComm; c < models::kNumCategories; ++c) {
    b.exposed_communication_s += exposed[c];
    b.exposed_by_kind.emplace_back(communication_kind(c), exposed[c]);
    b.communication_by_kind.emplace_back(communication_kind(c), a.busy[c].seconds());
  }
  return b;
}

}  // namespace

RunResult simulate(const config::Scenario& scenario, const RunOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  RunResult out;
  out.scenario = scenario;
  const config::Scenario& s = out.scenario;
  out.workload = std::make_unique<models::Workload>(models::lower(s.model, s.parallel, s.training, s.num_gpus(), s.target_gpu()));
  const models::Workload& w = *out.workload;

  // The cluster, with degraded links applied.
  if (options.cluster && s.simulation.degraded_links.empty()) {
    out.cluster = options.cluster;
  } else {
    auto cluster = std::make_shared<topo::Cluster>(s.cluster);
    for (const config::DegradedLink& d : s.simulation.degraded_links) {
      std::set<std::uint32_t> links;
      for (int local = 0; local < s.cluster.gpus_per_node; ++local) {
        const int gpu = static_cast<int>(d.node) * s.cluster.gpus_per_node + local;
        if (d.nvlink) {
          std::vector<sim::ResourceId> path;
          const int other = static_cast<int>(d.node) * s.cluster.gpus_per_node + (local + 1) % s.cluster.gpus_per_node;
          cluster->route(gpu, other, path);
          if (!path.empty()) links.insert(sim::index(path.front()));
          path.clear();
          cluster->route(other, gpu, path);
          if (!path.empty()) links.insert(sim::index(path.back()));
          continue;
        }
        // A NIC of a grouped device (more NICs than GPUs) slows its whole group: the group stripes
        // each message evenly over its NICs, so the slowest stripe sets the pace.
        const int nic = cluster->nic_of(gpu) - static_cast<int>(d.node) * s.cluster.inter_node.nics_per_node;
        if (d.nic && nic != *d.nic / s.cluster.inter_node.nics_per_gpu) continue;
        for (sim::ResourceId r : cluster->nic_links(gpu)) links.insert(sim::index(r));
      }
      for (std::uint32_t l : links) cluster->scale_link(sim::ResourceId{l}, d.bandwidth_fraction);
    }
    out.cluster = std::move(cluster);
  }
  std::vector<double> slowdown;
  if (!s.simulation.stragglers.empty()) {
    slowdown.assign(static_cast<std::size_t>(s.num_gpus()), 1.0);
    for (const config::Straggler& st : s.simulation.stragglers) {
      if (st.rank) slowdown[static_cast<std::size_t>(*st.rank)] *= st.slowdown;
      if (st.node) {
        for (int g = 0; g < s.cluster.gpus_per_node; ++g) {
          slowdown[static_cast<std::size_t>(*st.node * s.cluster.gpus_per_node + g)] *= st.slowdown;
        }
      }
    }
  }
  topo::ClusterTiming timing(*out.cluster, w.graph, slowdown);

  sim::EngineOptions eo;
  eo.symmetric = !s.simulation.full;
  eo.primary_stream = models::kComputeStream;
  eo.comm_time_scale = options.comm_time_scale;
  eo.sm_contention = s.simulation.sm_contention;
  if (options.record) {
    if (!options.record_ranks.empty()) {
      for (std::int64_t r : options.record_ranks) {
        if (r < 0 || r >= s.num_gpus()) {
          throw InputError("--trace-ranks", "", "rank " + std::to_string(r) + " does not exist (the scenario has " +
                                                    std::to_string(s.num_gpus()) + " GPUs)");
        }
        const sim::RankId rank{static_cast<std::uint32_t>(r)};
        if (!s.simulation.full && !w.graph.is_simulated(rank)) {
          sim::RankId rep = rank;
          for (sim::RankId sr : w.graph.simulated_ranks()) {
            if (w.graph.class_of(sr) == w.graph.class_of(rank)) {
              rep = sr;
              break;
            }
          }
          throw InputError("--trace-ranks", "",
                           "rank " + std::to_string(r) + " is not simulated under fidelity \"symmetric\" (it does what rank " +
                               std::to_string(sim::index(rep)) +
                               " of its pipeline stage does); pick simulated ranks or set simulation.fidelity=\"full\"");
        }
        eo.record_ranks.push_back(rank);
      }
    } else {
      eo.record_ranks = w.graph.simulated_ranks();
    }
  }
  sim::Engine engine(w.graph, timing, eo);
  try {
    out.engine = engine.run();
  } catch (const ClockOverflowError&) {
    // config/ rejects iterations whose FLOPs alone outlast the clock; this catches the rest.
    char range[32];
    std::snprintf(range, sizeof range, "%.1f days", sim::Duration::max().seconds() / 86400);
    throw InputError(s.file, "/training/global_batch_size",
                     "the simulated iteration runs past trainsim's clock range (" + std::string(range) +
                         "): use more GPUs or a smaller batch (or check a calibration file for a near-zero "
                         "bandwidth or efficiency)");
  }
  for (int a = 0; a < 7; ++a) out.algorithm_names.emplace_back(topo::to_string(static_cast<topo::Algorithm>(a)));
  for (int p = 0; p < 3; ++p) out.protocol_names.emplace_back(topo::to_string(static_cast<topo::Protocol>(p)));

  // Headline numbers.
  const double T = out.engine.makespan.seconds();
  out.iteration_time_s = T;
  const double gpus = static_cast<double>(s.num_gpus());
  out.tokens_per_s = T > 0 ? static_cast<double>(w.tokens_per_iteration) / T : 0;
  const sim::DataType peak_type = models::tensor_core_type(s.training.precision);
  out.peak_flops_per_gpu = s.cluster.gpu.peak(peak_type).per_second();
  if (T > 0) {
    out.model_tflops_per_gpu = w.flops.model / T / gpus * 1e-12;
    out.hardware_tflops_per_gpu = w.flops.hardware / T / gpus * 1e-12;
    out.mfu = w.flops.model / T / gpus / out.peak_flops_per_gpu;
    out.hfu = w.flops.hardware / T / gpus / out.peak_flops_per_gpu;
  }

  // Critical rank: the one that finishes last (lowest id on ties).
  std::size_t critical = 0;
  for (std::size_t i = 0; i < out.engine.ranks.size(); ++i) {
    if (out.engine.accounts[i].finish > out.engine.accounts[critical].finish) critical = i;
  }
  out.critical_rank = sim::index(out.engine.ranks[critical]);
  out.breakdown = breakdown_of(out.engine.accounts[critical], out.engine.makespan, s.simulation.sm_contention);
  out.breakdown.compute_by_kernel = kernels_by_kind(w.graph, out.engine.ranks[critical], timing, slowdown);

  // Per stage: the rank of the stage with the highest memory peak.
  out.capacity_bytes_per_gpu = s.cluster.gpu.memory.count();
  for (const models::StageInfo& info : w.stages) {
    StageReport sr;
    sr.stage = info.stage;
    for (const auto& c : info.chunks) sr.layers += c.second;
    sr.parameters = info.parameters;
    sr.static_memory = info.static_memory;
    sr.checkpoint_bytes = info.checkpoint_bytes;
    std::size_t best = out.engine.ranks.size();
    for (std::size_t i = 0; i < out.engine.ranks.size(); ++i) {
      if (w.graph.class_of(out.engine.ranks[i]) != static_cast<std::uint32_t>(info.stage)) continue;
      if (best == out.engine.ranks.size() ||
          out.engine.accounts[i].peak_memory_bytes > out.engine.accounts[best].peak_memory_bytes) {
        best = i;
      }
    }
    if (best < out.engine.ranks.size()) {
      const sim::RankAccount& a = out.engine.accounts[best];
      sr.rank = sim::index(out.engine.ranks[best]);
      sr.peak_bytes = a.peak_memory_bytes;
      sr.activation_peak_bytes = a.peak_memory_bytes - info.static_memory.total();
      sr.peak_time_s = a.peak_memory_time.seconds();
      sr.finish_s = a.finish.seconds();
      sr.breakdown = breakdown_of(a, out.engine.makespan, s.simulation.sm_contention);
      sr.breakdown.compute_by_kernel = kernels_by_kind(w.graph, out.engine.ranks[best], timing, slowdown);
    }
    out.peak_bytes_per_gpu = std::max(out.peak_bytes_per_gpu, sr.peak_bytes);
    out.stages.push_back(std::move(sr));
  }
  out.fits = out.peak_bytes_per_gpu <= out.capacity_bytes_per_gpu;
  out.host_offload_bytes_per_gpu = models::offloaded_activation_bytes(w, s.model, s.training);

  if (s.simulation.full && out.engine.ranks.size() > 1) {
    std::vector<double> work(out.engine.ranks.size());
    for (std::size_t i = 0; i < work.size(); ++i) {
      // Its own kernels plus the transfers it waited for (not the time other ranks held it up).
      const sim::RankAccount& a = out.engine.accounts[i];
      double own = (a.busy[models::kForward] + a.busy[models::kBackward] + a.busy[models::kRecompute] +
                    a.busy[models::kOptimizer]).seconds();
      for (std::uint8_t c = models::kTpComm; c < models::kNumCategories; ++c) own += a.gap_exposed[c].seconds();
      work[i] = own;
    }
    const std::size_t worst = static_cast<std::size_t>(std::max_element(work.begin(), work.end()) - work.begin());
    Bottleneck bn;
    bn.rank = sim::index(out.engine.ranks[worst]);
    bn.coord = w.layout.coord(bn.rank);
    bn.work_s = work[worst];
    std::vector<double> sorted = work;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    bn.median_work_s = sorted[sorted.size() / 2];
    out.bottleneck = bn;
  }
  if (options.nominal && (!s.simulation.stragglers.empty() || !s.simulation.degraded_links.empty())) {
    config::Scenario nominal = s;
    nominal.simulation.stragglers.clear();
    nominal.simulation.degraded_links.clear();
    nominal.simulation.full = false;
    RunOptions nominal_options{{}, false};
    nominal_options.comm_time_scale = options.comm_time_scale;
    out.nominal_iteration_time_s = simulate(nominal, nominal_options).iteration_time_s;
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return out;
}

std::string kernel_kind_label(const KernelKind& k, std::initializer_list<models::Precision> precisions) {
  if (std::string_view(k.name) != "fp8_quantization") return k.label;
  bool fp8 = false, fp4 = false;
  for (const models::Precision p : precisions) {
    fp8 = fp8 || p == models::Precision::kFp8;
    fp4 = fp4 || p == models::Precision::kFp4;
  }
  return fp4 ? (fp8 ? "FP8/FP4 quantization" : "FP4 quantization") : k.label;
}

}  // namespace trainsim::report
