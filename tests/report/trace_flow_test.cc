// The Perfetto trace's processes, threads and flow arrows: every flow starts and ends inside a
// slice of the right process and thread, sends point to their receives, and collectives link
// their first and last arrival.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/scenario.h"
#include "report/simulation.h"
#include "report/trace_writer.h"

using namespace trainsim;

namespace {

nlohmann::json trace_of(const std::vector<std::string>& overrides, std::vector<std::int64_t> ranks = {}) {
  const config::Scenario s =
      config::load_scenario(std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/teaching/03b-pipeline-1f1b.json", overrides);
  report::RunOptions options;
  options.record_ranks = std::move(ranks);
  const report::RunResult r = report::simulate(s, options);
  std::ostringstream out;
  report::write_trace(r, out);
  return nlohmann::json::parse(out.str());
}

// The 1F1B teaching pipeline with scatter/gather at Megatron-DeepSpeed's host time per task
// (a100-megatron-deepspeed.json): kernels wait for their launch, and the host synchronizes on
// pipeline transfers. The run and its trace.
struct Traced {
  report::RunResult result;
  nlohmann::json trace;
};
Traced traced(const config::Scenario& s) {
  Traced t{report::simulate(s), {}};
  std::ostringstream out;
  report::write_trace(t.result, out);
  t.trace = nlohmann::json::parse(out.str());
  return t;
}
Traced host_synchronized_pipeline() {
  return traced(config::load_scenario(
      std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/teaching/03b-pipeline-1f1b.json",
      {"training.scatter_gather_tensors_in_pipeline=true", "cluster.calibration=\"a100-megatron-deepspeed.json\""}));
}

struct Span {
  double ts, end;
  std::string cat;
};

// True when some "X" slice of (pid, tid) contains ts.
bool inside(const std::multimap<std::pair<int, int>, Span>& slices, int pid, int tid, double ts, const char* cat = nullptr) {
  auto range = slices.equal_range({pid, tid});
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.ts <= ts && ts <= it->second.end && (cat == nullptr || it->second.cat == cat)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("report/trace: processes named by coordinates, flows from sends to receives and across collectives") {
  // Full fidelity with every rank of the 8-GPU TP 2 x PP 4 plan: p2p between stages, TP pairs.
  const auto trace = trace_of({"simulation.fidelity=\"full\""}, {0, 1, 2, 3, 4, 5, 6, 7});
  std::multimap<std::pair<int, int>, Span> slices;
  std::map<int, std::string> process;
  std::map<std::int64_t, nlohmann::json> starts, finishes;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      slices.insert({{e["pid"].get<int>(), e["tid"].get<int>()},
                     Span{e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>(), e["cat"].get<std::string>()}});
    } else if (ph == "M" && e["name"] == "process_name") {
      process[e["pid"].get<int>()] = e["args"]["name"];
    } else if (ph == "s") {
      CHECK(starts.emplace(e["id"].get<std::int64_t>(), e).second);
    } else if (ph == "f") {
      CHECK(e["bp"] == "e");
      CHECK(finishes.emplace(e["id"].get<std::int64_t>(), e).second);
    }
  }
  REQUIRE(process.size() == 8);
  CHECK(process[5].rfind("rank 5 \xc2\xb7 pp 2 \xc2\xb7 dp 0 \xc2\xb7 tp 1", 0) == 0);
  REQUIRE(!starts.empty());
  REQUIRE(starts.size() == finishes.size());
  int p2p = 0, collective = 0;
  for (const auto& [flow_id, s] : starts) {
    const auto id = flow_id;  // (clang 14 cannot capture a structured binding in CAPTURE's lambda)
    CAPTURE(id);
    REQUIRE(finishes.count(id) == 1);
    const auto& f = finishes[id];
    CHECK(s["cat"] == f["cat"]);
    CHECK(inside(slices, s["pid"], s["tid"], s["ts"]));
    CHECK(inside(slices, f["pid"], f["tid"], f["ts"]));
    CHECK(s["pid"] != f["pid"]);
    if (s["cat"] == "p2p_flow") {
      ++p2p;
      // A send and its receive run together (rendezvous), on the pipeline stream of both ranks.
      CHECK(s["ts"].get<double>() == doctest::Approx(f["ts"].get<double>()).epsilon(1e-9));
      CHECK(inside(slices, s["pid"], s["tid"], s["ts"], "p2p"));
      CHECK(inside(slices, f["pid"], f["tid"], f["ts"], "p2p"));
    } else {
      CHECK(s["cat"] == "collective_flow");
      ++collective;
      CHECK(s["ts"].get<double>() <= f["ts"].get<double>());
    }
  }
  // 3 stage boundaries x 2 TP ranks x 8 micro-batches x (activation + gradient).
  CHECK(p2p == 3 * 2 * 8 * 2);
  CHECK(collective > 0);
}

TEST_CASE("report/trace: --trace-ranks picks the processes, and bad ranks are input errors") {
  const auto trace = trace_of({}, {0, 6});
  std::set<int> pids;
  for (const auto& e : trace["traceEvents"]) pids.insert(e["pid"].get<int>());
  CHECK(pids == std::set<int>{0, 6});
  CHECK_THROWS_AS(trace_of({}, {1}), InputError);   // not simulated under symmetric fidelity
  CHECK_THROWS_AS(trace_of({}, {8}), InputError);   // out of range
  CHECK_THROWS_AS(trace_of({}, {-1}), InputError);
}

TEST_CASE("report/trace: a kernel waiting for the host has a host-launch slice, as long as the summary's wait") {
  // Megatron-DeepSpeed's host time per task (a100-megatron-deepspeed.json) leaves kernels ready
  // before the host has launched them; each stage's slices add up to its "waiting for the host".
  const Traced run = host_synchronized_pipeline();
  const report::RunResult& r = run.result;
  const nlohmann::json& trace = run.trace;
  std::map<std::int64_t, double> host_us;  // by rank
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "host_wait") {
      CHECK(e["name"].get<std::string>().rfind("host launch: ", 0) == 0);
      CHECK(e["tid"] == 7);  // the compute stream's thread ("stream 7 compute"), the only one with kernels here
      host_us[e["pid"].get<std::int64_t>()] += e["dur"].get<double>();
    }
  }
  REQUIRE(!r.stages.empty());
  for (const report::StageReport& st : r.stages) {
    CAPTURE(st.stage);
    CHECK(st.breakdown.host_launch_s > 0);
    CHECK(host_us[st.rank] * 1e-6 == doctest::Approx(st.breakdown.host_launch_s).epsilon(1e-4));
  }
}

namespace {

// The compute thread's idle slices of a run's trace against its summary: per rank the bubble
// slices are its pipeline bubble, the blocked ones its exposed communication and synchronization
// wait (the tail after its last kernel included, as one slice to the end of its last task), and
// none overlaps a kernel. Returns the causes seen.
std::set<std::string> check_idle_slices(const Traced& run) {
  const report::RunResult& r = run.result;
  std::map<std::int64_t, double> bubble_us, blocked_us;  // by rank
  std::map<std::int64_t, std::vector<std::pair<double, double>>> kernels, idle;  // compute thread, by rank
  std::map<std::int64_t, double> finish_us;  // end of the rank's last task, any stream
  std::map<std::int64_t, std::vector<std::pair<double, double>>> tails;  // end-of-iteration slices, by rank
  std::set<std::string> causes;
  for (const auto& e : run.trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::int64_t pid = e["pid"].get<std::int64_t>();
    const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
    const std::string cat = e["cat"];
    if (cat == "kernel" || cat == "nccl" || cat == "p2p") finish_us[pid] = std::max(finish_us[pid], end);
    if (e["tid"] != 7) continue;
    if (cat == "kernel") kernels[pid].emplace_back(ts, end);
    if (cat != "bubble" && cat != "blocked") continue;
    (cat == "bubble" ? bubble_us : blocked_us)[pid] += e["dur"].get<double>();
    idle[pid].emplace_back(ts, end);
    const std::string cause = e["args"]["cause"];
    causes.insert(cause);
    if (cause == "end_of_iteration") {
      tails[pid].emplace_back(ts, end);
      CHECK(cat == "blocked");
      CHECK(!e["args"]["after"].get<std::string>().empty());
    } else {
      CHECK(!e["args"]["before"].get<std::string>().empty());
    }
  }
  REQUIRE(!r.stages.empty());
  for (const report::StageReport& st : r.stages) {
    CAPTURE(st.stage);
    const auto& b = st.breakdown;
    CHECK(bubble_us[st.rank] * 1e-6 == doctest::Approx(b.pipeline_bubble_s).epsilon(1e-4));
    CHECK(blocked_us[st.rank] * 1e-6 == doctest::Approx(b.exposed_communication_s + b.synchronization_wait_s).epsilon(1e-4));
    double last_kernel = 0;
    for (const auto& k : kernels[st.rank]) last_kernel = std::max(last_kernel, k.second);
    if (finish_us[st.rank] > last_kernel + 0.002) {
      REQUIRE(tails[st.rank].size() == 1);
      CHECK(std::abs(tails[st.rank][0].first - last_kernel) <= 0.002);  // microsecond rounding aside
      CHECK(std::abs(tails[st.rank][0].second - finish_us[st.rank]) <= 0.002);
    } else {
      CHECK(tails[st.rank].empty());
    }
    // No idle slice overlaps a kernel on its thread (microsecond rounding aside).
    auto& ks = kernels[st.rank];
    std::sort(ks.begin(), ks.end());
    for (const auto& gap : idle[st.rank]) {
      auto it = std::upper_bound(ks.begin(), ks.end(), std::pair{gap.first + 0.002, 1e300});
      if (it != ks.begin()) CHECK(std::prev(it)->second <= gap.first + 0.002);
      if (it != ks.end()) CHECK(it->first >= gap.second - 0.002);
    }
  }
  return causes;
}

}  // namespace

TEST_CASE("report/trace: the compute thread's bubble and communication waits are the summary's, between its kernels") {
  // The host-synchronized pipeline: part of its bubble is the host's wait for a pipeline
  // transfer, issued late, which only the engine's own records can place.
  const Traced pipeline = host_synchronized_pipeline();
  const std::set<std::string> causes = check_idle_slices(pipeline);
  CHECK(causes.count("host_sync") == 1);  // the scatter/gather all-gather's late issue
  for (const report::StageReport& st : pipeline.result.stages) CHECK(st.breakdown.pipeline_bubble_s > 0);
  // The distributed optimizer's parameter all-gather runs after the last kernel (the Adam step):
  // exposed at the end of the iteration.
  const Traced zero =
      traced(config::load_scenario(std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/teaching/06-distributed-optimizer.json"));
  CHECK(check_idle_slices(zero).count("end_of_iteration") == 1);
}
