// trainsim validate nccl-tests LOG: a real nccl-tests run (text output or -J JSON) beside the
// collective model's prediction for the same sizes on a cluster preset, with signed errors.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "config/json_reader.h"
#include "config/scenario.h"
#include "sim/error.h"
#include "validate/nccl_tests.h"

namespace trainsim::cli {

namespace {

struct ValidateNcclArgs {
  std::string log;
  std::string cluster = "dgx-h100";
  std::int64_t nodes = 1;
  std::int64_t gpus = 0;             // 0: the ranks the log lists, else every GPU of the nodes
  std::string op;                    // empty: the test the log names
  std::int64_t gpus_per_thread = 0;  // 0: the log's nGpus, else 1
  std::string json;
};

int run(const ValidateNcclArgs& a) {
  const validate::NcclTestsLog log = validate::read_nccl_tests(a.log);
  std::string op = a.op;
  if (op.empty()) op = log.test;
  if (op.empty())
    throw InputError(
        a.log, "",
        "the log does not name its test (no 'Collective test starting' line): give --op");
  bool p2p = false;
  const std::optional<sim::CollectiveKind> kind =
      validate::collective_of_test(op, a.op.empty() ? a.log : "command line", &p2p);
  if (a.nodes < 1 || a.nodes > (1 << 20))
    throw InputError("command line", "--nodes", "expected a node count in [1, 1048576]");
  const topo::ClusterSpec cluster = config::load_cluster(a.cluster, a.nodes);
  const std::int64_t all = static_cast<std::int64_t>(cluster.gpus_per_node) * a.nodes;
  const std::int64_t gpus = a.gpus > 0 ? a.gpus : (log.ranks > 0 ? log.ranks : all);
  if (gpus > all || gpus % a.nodes != 0) {
    throw InputError(a.gpus > 0 ? "command line" : a.log, a.gpus > 0 ? "--gpus" : "",
                     std::to_string(gpus) + " ranks do not fit " + std::to_string(a.nodes) +
                         " node(s) of " + std::to_string(cluster.gpus_per_node) +
                         " GPUs evenly: give --nodes (and --gpus)");
  }
  const int ppn = static_cast<int>(gpus / a.nodes);
  const topo::GroupShape shape{static_cast<int>(gpus), static_cast<int>(a.nodes), ppn,
                               std::min(ppn, cluster.inter_node.nics_per_node)};
  const int per_thread =
      static_cast<int>(a.gpus_per_thread > 0 ? a.gpus_per_thread
                                             : (log.gpus_per_thread > 0 ? log.gpus_per_thread : 1));
  const auto rows = validate::compare_nccl_tests(log, cluster, shape, kind, per_thread);
  if (rows.empty()) throw InputError(a.log, "", "no row with a non-zero size to compare");

  double sum_abs = 0, max_abs = 0;
  for (const auto& r : rows) {
    sum_abs += std::abs(r.time_error);
    max_abs = std::max(max_abs, std::abs(r.time_error));
  }
  const double mape = sum_abs / static_cast<double>(rows.size());

  if (!a.json.empty()) {
    write_output(a.json, [&](std::ostream& o) {
      config::Json out;
      out["log"] = a.log;
      out["op"] = op;
      out["cluster"] = cluster.name;
      out["nodes"] = a.nodes;
      out["gpus"] = gpus;
      out["gpus_per_thread"] = per_thread;
      out["time_mape"] = mape;
      out["time_max_abs_error"] = max_abs;
      out["rows"] = config::Json::array();
      for (const auto& r : rows) {
        out["rows"].push_back({{"bytes", r.bytes},
                               {"measured_time_us", r.measured_time_us},
                               {"predicted_time_us", r.predicted_time_us},
                               {"time_error", r.time_error},
                               {"measured_busbw_GBps", r.measured_busbw_GBps},
                               {"predicted_busbw_GBps", r.predicted_busbw_GBps},
                               {"busbw_error", r.busbw_error},
                               {"algorithm", p2p ? "P2P" : topo::to_string(r.algorithm)},
                               {"protocol", topo::to_string(r.protocol)}});
      }
      o << out.dump(2) << "\n";
    });
  }
  if (a.json != "-") {
    std::printf("%s: %s on %lld GPUs (%lld node%s of %d, %d GPU%s per host thread), %s\n",
                a.log.c_str(), op.c_str(), static_cast<long long>(gpus),
                static_cast<long long>(a.nodes), a.nodes == 1 ? "" : "s", ppn, per_thread,
                per_thread == 1 ? "" : "s", cluster.name.c_str());
    std::printf(
        "measured: the faster of out-of-place and in-place; errors are (predicted - measured) / "
        "measured\n\n");
    std::printf("%12s  %10s  %10s  %7s  %9s  %9s  %7s  %13s  %8s\n", "size (B)", "meas (us)",
                "pred (us)", "error", "meas busbw", "pred busbw", "error", "algorithm", "protocol");
    for (const auto& r : rows) {
      std::printf("%12lld  %10.2f  %10.2f  %+6.1f%%  %9.2f  %9.2f  %+6.1f%%  %13s  %8s\n",
                  static_cast<long long>(r.bytes), r.measured_time_us, r.predicted_time_us,
                  100 * r.time_error, r.measured_busbw_GBps, r.predicted_busbw_GBps,
                  100 * r.busbw_error, p2p ? "P2P" : topo::to_string(r.algorithm),
                  topo::to_string(r.protocol));
    }
    std::printf("\ntime: mean absolute error %.1f%%, max %.1f%% over %zu sizes\n", 100 * mape,
                100 * max_abs, rows.size());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

void add_validate_nccl_command(CLI::App& app, Registry& registry) {
  auto args = std::make_shared<ValidateNcclArgs>();
  CLI::App* group = subcommand(app, "validate", "Compare predictions with measurements");
  CLI::App* cmd = group->add_subcommand(
      "nccl-tests", "Compare an nccl-tests run (text output or -J JSON) with the collective model");
  cmd->add_option("log", args->log,
                  "nccl-tests output (e.g. all_reduce_perf's stdout) or its -J JSON file")
      ->required();
  cmd->add_option("--cluster", args->cluster, "Cluster preset or file the run was on")
      ->capture_default_str();
  cmd->add_option("--nodes", args->nodes, "Nodes of the run")->capture_default_str();
  cmd->add_option("--gpus", args->gpus, "Ranks of the run (default: the devices the log lists)");
  cmd->add_option("--op", args->op,
                  "Collective, when the log does not name it (all_reduce, all_gather, ...)");
  cmd->add_option("-g,--gpus-per-thread", args->gpus_per_thread,
                  "GPUs per host thread (default: the log's nGpus)");
  cmd->add_option("--json", args->json,
                  "Write the comparison as JSON to FILE ('-' for stdout, replacing the table)");
  cmd->footer(
      "Example: trainsim validate nccl-tests all_reduce_perf.log --cluster dgx-h100 --nodes 2");
  registry.add(cmd, [args]() { return run(*args); });
}

}  // namespace trainsim::cli
