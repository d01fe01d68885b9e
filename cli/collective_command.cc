// trainsim collective: an nccl-tests-style sweep of one collective on a cluster preset, predicted
// by the CollectiveModel, so it can be held beside a real *_perf run: same sizes (nccl-tests'
// -b/-e/-f with K/M/G as powers of 1024, per-rank rounding for all-gather, reduce-scatter and
// all-to-all), same columns, same algbw and busbw definitions (doc/PERFORMANCE.md).

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "config/json_reader.h"
#include "config/scenario.h"
#include "sim/error.h"
#include "topologies/collective_model.h"
#include "validate/nccl_tests.h"

namespace trainsim::cli {

namespace {

struct CollectiveArgs {
  std::string cluster = "dgx-h100";
  std::int64_t nodes = 1;
  std::int64_t gpus = 0;  // 0: every GPU of the nodes
  std::string op = "all_reduce";
  std::string dtype = "float";
  std::string min_bytes = "8", max_bytes = "16G";
  std::int64_t step_factor = 2;
  std::int64_t gpus_per_thread = 1;
  std::string json;
};

// nccl-tests' parsesize: a number with an optional K, M or G (powers of 1024).
std::int64_t parse_size(const std::string& text, const std::string& option) {
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  double unit = 1;
  if (used > 0 && used + 1 == text.size()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        unit = 1024.0;
        break;
      case 'M':
      case 'm':
        unit = 1024.0 * 1024;
        break;
      case 'G':
      case 'g':
        unit = 1024.0 * 1024 * 1024;
        break;
      default:
        used = 0;
    }
    if (used > 0) ++used;
  }
  if (used == 0 || used != text.size() || !(v >= 0) || v * unit > 1e15) {
    throw InputError(
        "command line", option,
        "expected a size in bytes with an optional K, M or G suffix (as nccl-tests -b/-e), got '" +
            text + "'");
  }
  return static_cast<std::int64_t>(std::llround(v * unit));
}

std::int64_t type_size(const std::string& dtype) {
  static const std::map<std::string, std::int64_t> sizes = {
      {"int8", 1}, {"uint8", 1}, {"int32", 4},  {"uint32", 4},   {"int64", 8},  {"uint64", 8},
      {"half", 2}, {"float", 4}, {"double", 8}, {"bfloat16", 2}, {"f8e4m3", 1}, {"f8e5m2", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end()) {
    throw InputError("command line", "--dtype",
                     "expected one of int8, uint8, int32, uint32, int64, uint64, half, float, "
                     "double, bfloat16, f8e4m3, f8e5m2, got '" +
                         dtype + "'");
  }
  return it->second;
}

struct SweepRow {
  std::int64_t bytes = 0, count = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  std::string algorithm, protocol;
};

int run(const CollectiveArgs& a) {
  bool p2p = false;
  const std::optional<sim::CollectiveKind> kind = validate::collective_of_test(a.op, "--op", &p2p);
  const std::int64_t elt = type_size(a.dtype);
  const std::int64_t lo = parse_size(a.min_bytes, "--min-bytes");
  const std::int64_t hi = parse_size(a.max_bytes, "--max-bytes");
  if (hi < lo)
    throw InputError("command line", "--max-bytes",
                     "expected at least --min-bytes (" + a.min_bytes + ")");
  if (a.step_factor < 2)
    throw InputError("command line", "--step-factor", "expected an integer factor of at least 2");
  if (a.nodes < 1 || a.nodes > (1 << 20))
    throw InputError("command line", "--nodes", "expected a node count in [1, 1048576]");
  if (a.gpus_per_thread < 1 || a.gpus_per_thread > 1024)
    throw InputError("command line", "--gpus-per-thread", "expected 1 to 1024");
  const topo::ClusterSpec cluster = config::load_cluster(a.cluster, a.nodes);
  const std::int64_t all = static_cast<std::int64_t>(cluster.gpus_per_node) * a.nodes;
  const std::int64_t gpus = a.gpus == 0 ? all : a.gpus;
  if (gpus < 1 || gpus > all || gpus % a.nodes != 0) {
    throw InputError("command line", "--gpus",
                     "expected a multiple of --nodes (" + std::to_string(a.nodes) + ") up to " +
                         std::to_string(all) + " (the GPUs of the nodes), got " +
                         std::to_string(gpus));
  }
  const int ppn = static_cast<int>(gpus / a.nodes);
  const int nics = std::min(ppn, cluster.inter_node.nics_per_node);
  const topo::GroupShape shape{static_cast<int>(gpus), static_cast<int>(a.nodes), ppn, nics};
  const topo::CollectiveModel model(cluster);
  const topo::NcclTopology topology = model.topology(shape);
  const double factor = validate::nccl_tests_bus_factor(kind, shape.ranks);
  const bool per_rank = kind && (*kind == sim::CollectiveKind::kAllGather ||
                                 *kind == sim::CollectiveKind::kReduceScatter ||
                                 *kind == sim::CollectiveKind::kAllToAll);

  std::vector<SweepRow> rows;
  for (std::int64_t size = lo; size <= hi; size *= a.step_factor) {
    SweepRow r;
    // nccl-tests' sizes: count = size / element size; per-rank operations round each rank's part
    // down to 16 bytes and print the whole array.
    std::int64_t count = size / elt;
    if (per_rank) {
      count = (count / gpus) & ~(16 / elt - 1);
      r.bytes = count * gpus * elt;
    } else {
      r.bytes = count * elt;
    }
    r.count = count;
    topo::CollectivePrediction p;
    if (kind) {
      p = model.predict(*kind, sim::Bytes(r.bytes), topology, static_cast<int>(a.gpus_per_thread));
    } else {
      p = model.predict_p2p(sim::Bytes(r.bytes), topology);
      p.time_us =
          std::max(p.time_us, static_cast<double>(a.gpus_per_thread) * cluster.nccl.launch_us);
    }
    r.time_us = p.time_us;
    r.algbw = static_cast<double>(r.bytes) / (p.time_us * 1e3);
    r.busbw = r.algbw * factor;
    r.algorithm = p2p ? "P2P" : topo::to_string(p.algorithm);
    r.protocol = topo::to_string(p.protocol);
    rows.push_back(r);
    if (size == 0 || size > hi / a.step_factor) break;  // also keeps size * factor in range
  }

  if (!a.json.empty()) {
    write_output(a.json, [&](std::ostream& o) {
      config::Json out;
      out["op"] = a.op;
      out["cluster"] = cluster.name;
      out["nodes"] = a.nodes;
      out["gpus"] = gpus;
      out["dtype"] = a.dtype;
      out["rows"] = config::Json::array();
      for (const SweepRow& r : rows) {
        out["rows"].push_back({{"bytes", r.bytes},
                               {"count", r.count},
                               {"time_us", r.time_us},
                               {"algbw_GBps", r.algbw},
                               {"busbw_GBps", r.busbw},
                               {"algorithm", r.algorithm},
                               {"protocol", r.protocol}});
      }
      o << out.dump(2) << "\n";
    });
  }
  if (a.json != "-") {
    std::printf("# trainsim collective: %s on %lld GPUs (%lld node%s of %d), %s\n", a.op.c_str(),
                static_cast<long long>(gpus), static_cast<long long>(a.nodes),
                a.nodes == 1 ? "" : "s", ppn, cluster.name.c_str());
    std::printf(
        "# predicted with NCCL %s's tuning model; busbw = algbw x %.4g (nccl-tests "
        "doc/PERFORMANCE.md)\n#\n",
        "2.30.7", factor);
    if (const auto& ring = cluster.gpu.calibration.intra_node_ring; ring && a.nodes == 1) {
      std::printf(
          "# rings inside the node from %.0f B up: the slower of that and the GPU's measured ring "
          "(calibration intra_node_ring: %.4g us + %.4g us per step, link %.4g GB/s, user buffers "
          "%.4g GB/s",
          ring->min_bytes, ring->latency_us, ring->step_us, ring->link_GBps, ring->user_GBps);
      if (ring->fill_GBps > 0) {
        std::printf(", start-up over the first %.4g MiB at %.4g GB/s", ring->fill_bytes / (1024.0 * 1024.0),
                    ring->fill_GBps);
      }
      std::printf(")\n#\n");
    }
    std::printf("# %10s  %12s  %8s  %10s  %8s  %8s  %13s  %8s\n", "size", "count", "type", "time",
                "algbw", "busbw", "algorithm", "protocol");
    std::printf("# %10s  %12s  %8s  %10s  %8s  %8s  %13s  %8s\n", "(B)", "(elements)", "", "(us)",
                "(GB/s)", "(GB/s)", "", "");
    for (const SweepRow& r : rows) {
      std::printf("  %10lld  %12lld  %8s  %10.2f  %8.2f  %8.2f  %13s  %8s\n",
                  static_cast<long long>(r.bytes), static_cast<long long>(r.count), a.dtype.c_str(),
                  r.time_us, r.algbw, r.busbw, r.algorithm.c_str(), r.protocol.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

void add_collective_command(CLI::App& app, Registry& registry) {
  auto args = std::make_shared<CollectiveArgs>();
  CLI::App* cmd = subcommand(app, "collective",
                             "Predict an nccl-tests-style sweep of one collective on a cluster");
  cmd->add_option("--cluster", args->cluster, "Cluster preset or file")->capture_default_str();
  cmd->add_option("--nodes", args->nodes, "Nodes")->capture_default_str();
  cmd->add_option("--gpus", args->gpus,
                  "GPUs in the communicator, spread evenly over the nodes (default: all)");
  cmd->add_option("--op", args->op,
                  "all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall or sendrecv")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Element type, for the count column")
      ->capture_default_str();
  cmd->add_option("-b,--min-bytes", args->min_bytes, "Smallest size (K, M, G = powers of 1024)")
      ->capture_default_str();
  cmd->add_option("-e,--max-bytes", args->max_bytes, "Largest size")->capture_default_str();
  cmd->add_option("-f,--step-factor", args->step_factor, "Size multiplier between rows")
      ->capture_default_str();
  cmd->add_option("-g,--gpus-per-thread", args->gpus_per_thread,
                  "GPUs one host thread launches for (nccl-tests -g): sets the launch floor")
      ->capture_default_str();
  cmd->add_option("--json", args->json,
                  "Write {\"rows\": [...]} as JSON to FILE ('-' for stdout, replacing the table)");
  cmd->footer(
      "Example: trainsim collective --cluster dgx-h100 --nodes 2 --op all_reduce -b 8 -e 16G -f 2");
  registry.add(cmd, [args]() { return run(*args); });
}

}  // namespace trainsim::cli
