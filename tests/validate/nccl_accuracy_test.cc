// The collective model against every all-reduce sweep in validate/data/nccl_measurements.json and
// nccl_vtrain_a100.json, each on its own hardware: predicted bus bandwidth within 15% of the
// measurement for messages of 64 MiB and more, predicted time within 35% for 64 KiB and less, and
// within 30% for 1-32 MiB where the GPU's measured intra-node ring applies. Prints the per-dataset errors
// (run build/tests/validate_nccl_tests -tc='*accuracy*' -s to see them).

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "config/json_reader.h"
#include "config/scenario.h"
#include "validate/nccl_tests.h"

using namespace trainsim;

namespace {

const std::string kData[] = {
    std::string(TRAINSIM_SOURCE_DIR) + "/validate/data/nccl_measurements.json",
    std::string(TRAINSIM_SOURCE_DIR) + "/validate/data/nccl_vtrain_a100.json"};

// The cluster preset of a record's hardware description; empty when none applies.
std::string preset_of(const config::Json& record) {
  std::string hw;
  if (record.contains("hardware")) {
    for (const auto& [key, v] : record["hardware"].items()) {
      if (v.is_string()) hw += v.get<std::string>() + " ";
    }
  }
  if (hw.find("a3-megagpu") != std::string::npos) return "gcp-a3-mega";
  if (hw.find("DGX H100") != std::string::npos) return "dgx-h100";
  if (hw.find("A100") != std::string::npos && hw.find("NVSwitch") != std::string::npos)
    return "dgx-a100-80gb";
  return "";
}

// GPUs per thread (nccl-tests -g) stated in the record's command line; 1 otherwise.
// A string field, or "" when absent (json::value() inlined here trips GCC 12's -Wnull-dereference).
std::string text_field(const config::Json& record, const char* key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int gpus_per_thread_of(const config::Json& record) {
  const std::string text = text_field(record, "tool") + " " + text_field(record, "source");
  std::smatch m;
  if (std::regex_search(text, m, std::regex(R"((^|\s|')-g (\d+))"))) return std::stoi(m[2].str());
  return 1;
}

// A measurement record's rows (bytes and time; the in-place time where given) as an nccl-tests
// log; rows without both numbers are skipped.
validate::NcclTestsLog log_of(const config::Json& record) {
  validate::NcclTestsLog log;
  for (const config::Json& r : record["rows"]) {
    if (!r.contains("bytes") || !r["bytes"].is_number() || !r.contains("time_us") || !r["time_us"].is_number()) continue;
    validate::NcclTestsRow row;
    row.bytes = r["bytes"].get<std::int64_t>();
    row.out_of_place = validate::NcclTestsPlacement{r["time_us"].get<double>(), 0, 0};
    if (r.contains("inplace_time_us") && r["inplace_time_us"].is_number()) {
      row.in_place = validate::NcclTestsPlacement{r["inplace_time_us"].get<double>(), 0, 0};
    }
    log.rows.push_back(row);
  }
  return log;
}

// A communicator of `gpus` spread evenly over `nodes` nodes of `cluster`, each node's members on
// as many NICs as it has members (nccl-tests runs one rank per GPU).
topo::GroupShape shape_of(const topo::ClusterSpec& cluster, int gpus, int nodes) {
  return topo::GroupShape{gpus, nodes, gpus / nodes, std::min(gpus / nodes, cluster.inter_node.nics_per_node)};
}

// Every record of a measurement file, each a full sweep of one collective (all rows kept).
struct Sweep {
  std::string id;
  std::optional<sim::CollectiveKind> kind;  // none: point to point
  validate::NcclTestsLog log;
  int gpus = 0, nodes = 0;
};

std::vector<Sweep> sweeps_of(const std::string& file) {
  const config::Json data = config::read_json_file(std::string(TRAINSIM_SOURCE_DIR) + "/validate/data/" + file);
  REQUIRE(data.is_array());
  std::vector<Sweep> out;
  for (const config::Json& record : data) {
    Sweep s;
    s.id = record["id"].get<std::string>();
    bool p2p = false;
    s.kind = validate::collective_of_test(record["collective"].get<std::string>(), s.id, &p2p);
    s.log = log_of(record);
    INFO("dataset " << s.id);
    REQUIRE(s.log.rows.size() == record["rows"].size());
    s.gpus = record["n_gpus"].get<int>();
    s.nodes = record["n_nodes"].get<int>();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

TEST_CASE(
    "validate/nccl accuracy: every all-reduce sweep within 15% busbw (>= 64 MiB) and 35% time (<= "
    "64 KiB)") {
  int sweeps = 0;
  std::printf("\n%-44s %14s %5s %16s %16s %16s %8s\n", "dataset (all_reduce)", "hardware", "GPUs",
              "busbw >= 64 MiB", "time 1-32 MiB", "time <= 64 KiB", "rows");
  std::printf("%-44s %14s %5s %16s %16s %16s %8s\n", "", "", "", "mean / max |err|", "mean / max |err|",
              "mean / max |err|", "checked");
  for (const std::string& file : kData) {
  const config::Json data = config::read_json_file(file);
  REQUIRE(data.is_array());
  for (const config::Json& record : data) {
    if (text_field(record, "collective") != "all_reduce" || !record.contains("rows")) continue;
    const validate::NcclTestsLog log = log_of(record);
    if (log.rows.empty()) continue;  // summary points, not a sweep
    const std::string id = record["id"].get<std::string>();
    const std::string preset = preset_of(record);
    INFO("dataset " << id);
    REQUIRE_MESSAGE(!preset.empty(), "no cluster preset for this dataset's hardware");
    const int gpus = record["n_gpus"].get<int>();
    const int nodes = record["n_nodes"].get<int>();
    const topo::ClusterSpec cluster = config::load_cluster(preset, nodes);
    const auto rows = validate::compare_nccl_tests(
        log, cluster, shape_of(cluster, gpus, nodes), sim::CollectiveKind::kAllReduce, gpus_per_thread_of(record));
    // Mid sizes are checked where the GPU's measured ring applies (one NVLink node).
    const bool measured_ring = cluster.gpu.calibration.intra_node_ring.has_value() && nodes == 1;
    double worst_bw = 0, worst_time = 0, sum_bw = 0, sum_time = 0, worst_mid = 0, sum_mid = 0;
    int checked = 0, n_bw = 0, n_time = 0, n_mid = 0;
    for (const auto& c : rows) {
      INFO("size " << c.bytes << " B: measured " << c.measured_time_us << " us, predicted "
                   << c.predicted_time_us << " us (" << std::string(topo::to_string(c.algorithm))
                   << "/" << std::string(topo::to_string(c.protocol)) << ")");
      if (c.bytes >= (std::int64_t{64} << 20)) {
        CHECK(std::abs(c.busbw_error) <= 0.15);
        worst_bw = std::max(worst_bw, std::abs(c.busbw_error));
        sum_bw += std::abs(c.busbw_error);
        ++n_bw;
        ++checked;
      }
      if (c.bytes >= (std::int64_t{1} << 20) && c.bytes <= (std::int64_t{32} << 20)) {
        if (measured_ring) {
          CHECK(std::abs(c.time_error) <= 0.30);
          ++checked;
        }
        worst_mid = std::max(worst_mid, std::abs(c.time_error));
        sum_mid += std::abs(c.time_error);
        ++n_mid;
      }
      if (c.bytes <= (std::int64_t{64} << 10)) {
        CHECK(std::abs(c.time_error) <= 0.35);
        worst_time = std::max(worst_time, std::abs(c.time_error));
        sum_time += std::abs(c.time_error);
        ++n_time;
        ++checked;
      }
    }
    ++sweeps;
    auto column = [](double sum, double worst, int n) {
      char buf[32];
      if (n == 0) return std::string("               -");
      std::snprintf(buf, sizeof buf, "%7.1f%% /%5.1f%%", 100 * sum / n, 100 * worst);
      return std::string(buf);
    };
    std::printf("%-44s %14s %5d %s %s %s %8d\n", id.c_str(), preset.c_str(), gpus,
                column(sum_bw, worst_bw, n_bw).c_str(), column(sum_mid, worst_mid, n_mid).c_str(),
                column(sum_time, worst_time, n_time).c_str(), checked);
    for (const auto& c : rows) {
      std::printf(
          "    %12lld B  measured %10.2f us %8.2f GB/s  predicted %10.2f us %8.2f GB/s  %-8s %-6s  "
          "time %+6.1f%%  busbw %+6.1f%%\n",
          static_cast<long long>(c.bytes), c.measured_time_us, c.measured_busbw_GBps,
          c.predicted_time_us, c.predicted_busbw_GBps, topo::to_string(c.algorithm),
          topo::to_string(c.protocol), 100 * c.time_error, 100 * c.busbw_error);
    }
  }
  }
  CHECK(sweeps >= 10);
}

TEST_CASE("validate/nccl accuracy: GB200 NVL72 collectives of 4-64 GPUs in one NVLink domain, XLA's measured table") {
  // validate/data/nccl_xla_gb200.json: all-reduce, all-gather and reduce-scatter over groups of
  // 4 to 64 GPUs, timed by XLA's collective table generator (module time, not nccl-tests'
  // per-op average; throughputs kept to about 3 digits). Checked from 1 GiB: each sweep's mean
  // |busbw error| within 15% (README: 2.1-14.2%, the 4-GPU all-gather the largest). 64-512 MiB
  // are printed, not checked: there the errors span -18% to +51%, partly the method's (README,
  // "Collectives on GB200 NVL72").
  const topo::ClusterSpec cluster = config::load_cluster("gb200-nvl72", 1);
  int sweeps = 0;
  for (const Sweep& sweep : sweeps_of("nccl_xla_gb200.json")) {
    const std::string& id = sweep.id;
    INFO("dataset " << id);
    const auto kind = sweep.kind;
    const validate::NcclTestsLog& log = sweep.log;
    const int gpus = sweep.gpus;
    double large = 0, mid_min = 0, mid_max = 0;
    int n_large = 0, n_mid = 0;
    for (const auto& c : validate::compare_nccl_tests(log, cluster, shape_of(cluster, gpus, 1), kind, 1)) {
      if (c.bytes >= (std::int64_t{1} << 30)) {
        large += std::abs(c.busbw_error);
        ++n_large;
      } else if (c.bytes >= (std::int64_t{64} << 20)) {
        mid_min = n_mid == 0 ? c.busbw_error : std::min(mid_min, c.busbw_error);
        mid_max = n_mid == 0 ? c.busbw_error : std::max(mid_max, c.busbw_error);
        ++n_mid;
      }
    }
    REQUIRE(n_large == 6);
    REQUIRE(n_mid == 4);
    std::printf("%-46s %3d GPUs  busbw error 64-512 MiB %+5.0f%% to %+5.0f%%, >= 1 GiB mean |%4.1f%%|\n", id.c_str(),
                gpus, 100 * mid_min, 100 * mid_max, 100 * large / n_large);
    CHECK(large / n_large <= 0.15);
    ++sweeps;
  }
  CHECK(sweeps == 15);
}

TEST_CASE("validate/nccl accuracy: AWS p5 (32 EFA NICs, four per GPU) all-reduce and all-to-all on 2-32 nodes") {
  // validate/data/nccl_aws_p5.json: nccl-tests on ml.p5.48xlarge, 32 MiB to 8 GiB (all-to-all to
  // 2 GiB), with aws-ofi-nccl's tuner choosing the algorithm. Checked where every tuner has
  // settled on its bandwidth algorithm: all-reduce from 4 GiB within 12% of the measured bus
  // bandwidth, all-to-all at 1-2 GiB within 25%. Read as one 100 Gb/s NIC per GPU (the four
  // NICs of a GPU not grouped), the same rows come out 66-73% short. The other sizes are
  // printed, not checked (README, "Accuracy").
  int sweeps = 0;
  for (const Sweep& sweep : sweeps_of("nccl_aws_p5.json")) {
    const std::string& id = sweep.id;
    INFO("dataset " << id);
    const bool all_reduce = sweep.kind == sim::CollectiveKind::kAllReduce;
    const int gpus = sweep.gpus;
    const int nodes = sweep.nodes;
    const topo::ClusterSpec cluster = config::load_cluster("aws-p5", nodes);
    const std::int64_t from = all_reduce ? std::int64_t{4} << 30 : std::int64_t{1} << 30;
    const double limit = all_reduce ? 0.12 : 0.25;
    int checked = 0;
    std::printf("%-36s", id.c_str());
    for (const auto& c : validate::compare_nccl_tests(sweep.log, cluster, shape_of(cluster, gpus, nodes), sweep.kind, 1)) {
      std::printf(" %lldM %+.0f%%", static_cast<long long>(c.bytes >> 20), 100 * c.busbw_error);
      if (c.bytes < from) continue;
      INFO("size " << c.bytes << " B: measured " << c.measured_busbw_GBps << " GB/s, predicted " << c.predicted_busbw_GBps);
      CHECK(std::abs(c.busbw_error) <= limit);
      ++checked;
    }
    std::printf("\n");
    CHECK(checked == 2);
    ++sweeps;
  }
  CHECK(sweeps == 10);
}

TEST_CASE("validate/nccl accuracy: all-to-all inside GB200 NVL72 and B200 NVLink domains, XLA's measured table") {
  // validate/data/nccl_xla_alltoall.json: XLA's measured all-to-all over groups of 4-64 GPUs of
  // one GB200 NVLink domain and 2-8 GPUs of a B200 node (module time; tools/make_xla_alltoall.py).
  // Checked from 1 GiB: each sweep's mean |error| within 15% where a group has 4 GPUs or more
  // (README: GB200 -5% to -13%, B200 -1% to -3%). Pairs of B200 GPUs and the sizes below 1 GiB
  // are printed, not checked: the model's point-to-point rate is 37-43% above what the pairs
  // measure, and below 1 GiB XLA's module time carries launch and synchronisation costs
  // (README, "Collectives on GB200 NVL72").
  int sweeps = 0;
  for (const Sweep& sweep : sweeps_of("nccl_xla_alltoall.json")) {
    INFO("dataset " << sweep.id);
    const bool gb200 = sweep.id.find("gb200") != std::string::npos;
    const topo::ClusterSpec cluster = config::load_cluster(gb200 ? "gb200-nvl72" : "dgx-b200", 1);
    double large = 0;
    int n_large = 0;
    std::printf("%-40s", sweep.id.c_str());
    for (const auto& c : validate::compare_nccl_tests(sweep.log, cluster, shape_of(cluster, sweep.gpus, 1), sweep.kind, 1)) {
      if (c.bytes < (std::int64_t{64} << 20)) continue;
      std::printf(" %lldM %+.0f%%", static_cast<long long>(c.bytes >> 20), 100 * c.busbw_error);
      if (c.bytes < (std::int64_t{1} << 30)) continue;
      large += std::abs(c.busbw_error);
      ++n_large;
    }
    std::printf("\n");
    REQUIRE(n_large >= 1);
    if (sweep.gpus >= 4) CHECK(large / n_large <= 0.15);
    ++sweeps;
  }
  CHECK(sweeps == 8);
}
