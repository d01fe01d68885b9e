// What-ifs: stragglers and degraded links (every rank simulated), and communication at other speeds.

#include <doctest/doctest.h>
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "config/scenario.h"
#include "models/graph_vocabulary.h"
#include "report/sensitivity.h"
#include "report/simulation.h"
#include "tests/scenario_helpers.h"
#include "topologies/collective_model.h"

using namespace trainsim;

namespace {

const std::string kGolden = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/";

report::RunResult run_golden_full(const std::string& file, std::vector<std::string> overrides) {
  overrides.push_back("simulation.fidelity=\"full\"");
  return tests::simulate_file(kGolden + file, overrides);
}

double dp_time(const report::RunResult& r, std::uint32_t rank) {
  for (std::size_t i = 0; i < r.engine.ranks.size(); ++i) {
    if (sim::index(r.engine.ranks[i]) == rank) return r.engine.accounts[i].busy[models::kDpComm].seconds();
  }
  FAIL("rank not simulated");
  return 0;
}

// The iteration time of `s`, simulated on its own cluster with nothing recorded.
double iteration_time(const config::Scenario& s) {
  report::RunOptions o;
  o.record = false;
  o.nominal = false;
  return report::simulate(s, o).iteration_time_s;
}

}  // namespace

TEST_CASE("report/what-if: one 1.2x straggler slows the whole synchronous iteration") {
  const auto nominal = run_golden_full("gpt3-7.5b-tp4-pp2-a100.json", {});
  const auto slow = run_golden_full("gpt3-7.5b-tp4-pp2-a100.json", {"simulation.stragglers=[{\"rank\": 5, \"slowdown\": 1.2}]"});
  // The straggler's compute is 20% longer; the iteration grows by part of that (the rest hides
  // in time it spent waiting anyway) and never by more.
  const double growth = slow.iteration_time_s / nominal.iteration_time_s - 1;
  CHECK(growth > 0.05);
  CHECK(growth < 0.20);
  REQUIRE(slow.nominal_iteration_time_s.has_value());
  CHECK(*slow.nominal_iteration_time_s == doctest::Approx(nominal.iteration_time_s).epsilon(1e-9));
  // Synchronous training: every rank, fast or not, ends the iteration with the straggler (the
  // gradient reductions and the gradient-norm all-reduce wait for it).
  sim::TimePoint first = slow.engine.makespan;
  for (const auto& a : slow.engine.accounts) first = std::min(first, a.finish);
  CHECK((slow.engine.makespan - first).seconds() < 0.05 * slow.iteration_time_s);
  // The report names the straggler as the rank that bounds the iteration.
  REQUIRE(slow.bottleneck.has_value());
  CHECK(slow.bottleneck->rank == 5);
  CHECK(slow.bottleneck->work_s > slow.bottleneck->median_work_s);
  // Synchronous training runs at the pace of its slowest GPU: slowing the straggler's whole node
  // (seven more GPUs, in the same stage) costs nothing more.
  const auto node = run_golden_full("gpt3-7.5b-tp4-pp2-a100.json", {"simulation.stragglers=[{\"node\": 0, \"slowdown\": 1.2}]"});
  CHECK(node.iteration_time_s == doctest::Approx(slow.iteration_time_s).epsilon(1e-3));
}

TEST_CASE("report/what-if: a degraded NIC slows the data-parallel collectives it carries") {
  // GPT 1.7B with TP 8 on 4 nodes: each data-parallel ring runs on one rail (NIC i of every node).
  // Rank 0 is on rail 0 (through node 2's NIC 0 of the A100 preset), rank 1 on rail 1. On AWS p5
  // nodes four 100 Gb/s NICs stand behind each GPU as one device: NIC 1 is in GPU 0's group, which
  // stripes every message evenly over its four NICs, so one NIC at a quarter of its speed paces the
  // group; GPU 1's group (NICs 4-7) is untouched.
  for (const std::pair<std::string, int>& c : {std::pair<std::string, int>{"", 0}, {"cluster.preset=\"aws-p5\"", 1}}) {
    const std::string& cluster = c.first;
    const int nic = c.second;
    INFO("cluster " << (cluster.empty() ? std::string("dgx-a100-80gb") : cluster) << ", NIC " << nic);
    std::vector<std::string> plan = {"parallelism.tensor_model_parallel_size=8", "training.micro_batch_size=1",
                                     "training.global_batch_size=16", "training.recompute_granularity=\"none\""};
    if (!cluster.empty()) plan.push_back(cluster);
    const auto nominal = run_golden_full("gpt3-1.7b-dp32-a100.json", plan);
    auto degraded_plan = plan;
    degraded_plan.push_back("simulation.degraded_links=[{\"node\": 2, \"nic\": " + std::to_string(nic) +
                            ", \"bandwidth_fraction\": 0.25}]");
    const auto degraded = run_golden_full("gpt3-1.7b-dp32-a100.json", degraded_plan);
    CHECK(dp_time(degraded, 0) > 2.0 * dp_time(nominal, 0));
    CHECK(dp_time(degraded, 1) == doctest::Approx(dp_time(nominal, 1)).epsilon(0.01));
    CHECK(degraded.iteration_time_s > nominal.iteration_time_s);
  }
  // p5's NICs are numbered 0-31.
  CHECK_THROWS_WITH_AS(run_golden_full("gpt3-1.7b-dp32-a100.json",
                                       {"cluster.preset=\"aws-p5\"", "parallelism.tensor_model_parallel_size=8",
                                        "simulation.degraded_links=[{\"node\": 2, \"nic\": 32, \"bandwidth_fraction\": 0.25}]"}),
                       doctest::Contains("32 NICs each"), InputError);
}

TEST_CASE("report/what-if: communication sensitivity separates traffic on the critical path from hidden traffic") {
  // GPT 7.5B, TP 4 PP 2 on A100: tensor-parallel all-reduces block the layers; the data-parallel
  // gradient reduction overlaps the backward pass.
  const auto base = tests::simulate_file(kGolden + "gpt3-7.5b-tp4-pp2-a100.json");
  const auto sens = report::communication_sensitivity(base, 2);
  auto find = [&](const std::string& kind) -> const report::CommunicationSensitivity& {
    const auto it = std::find_if(sens.begin(), sens.end(), [&](const auto& c) { return c.kind == kind; });
    REQUIRE(it != sens.end());
    return *it;
  };
  const double t = base.iteration_time_s;
  for (const report::CommunicationSensitivity& c : sens) {
    CAPTURE(c.kind);
    REQUIRE(c.variants.size() == 3);
    const double half = c.variants[0].iteration_time_s, twice = c.variants[1].iteration_time_s, free = c.variants[2].iteration_time_s;
    // Slower traffic never shortens the iteration and faster never lengthens it (1 us slack for
    // the order of ties).
    CHECK(half >= t - 1e-6);
    CHECK(twice <= t + 1e-6);
    CHECK(free <= twice + 1e-6);
    CHECK(c.variants[2].exposed_s == 0);
  }
  // Blocking traffic: every second saved on the wire is saved on the iteration, so twice the
  // speed saves half of what making it free saves.
  const auto& tp = find("tp");
  const double tp_free_gain = t - tp.variants[2].iteration_time_s;
  CHECK(tp_free_gain > 0.5 * tp.exposed_s);
  CHECK(t - tp.variants[1].iteration_time_s == doctest::Approx(tp_free_gain / 2).epsilon(0.1));
  // Mostly hidden traffic: a quarter of it is exposed (the reduction of the last buckets after
  // the backward pass), which is all that faster links can gain; slower ones cost more than
  // that as it outgrows the compute it hid behind.
  const auto& dp = find("dp");
  CHECK(dp.exposed_s > 0);
  CHECK(dp.exposed_s < 0.5 * dp.time_s);
  CHECK(t - dp.variants[2].iteration_time_s == doctest::Approx(dp.exposed_s).epsilon(0.1));
  CHECK(dp.variants[0].iteration_time_s - t > 2 * (t - dp.variants[1].iteration_time_s));
  // The result does not depend on how many simulations run at once.
  const auto serial = report::communication_sensitivity(base, 1);
  REQUIRE(serial.size() == sens.size());
  for (std::size_t i = 0; i < sens.size(); ++i) {
    CHECK(serial[i].kind == sens[i].kind);
    for (std::size_t v = 0; v < 3; ++v) CHECK(serial[i].variants[v].iteration_time_s == sens[i].variants[v].iteration_time_s);
  }
}

TEST_CASE("report/what-if: the speed that hides each kind of communication and the slowest it tolerates") {
  const auto base = tests::simulate_file(kGolden + "gpt3-7.5b-tp4-pp2-a100.json");
  const auto sens = report::communication_sensitivity(base, 2);
  const double t = base.iteration_time_s, slack = report::kSensitivityTolerance * t;
  // The iteration with one kind at `speed` times its modelled speed, simulated here on its own.
  auto time_at = [&](const std::string& kind, double speed) {
    report::RunOptions o;
    o.record = false;
    o.nominal = false;
    o.cluster = base.cluster;
    std::uint8_t category = models::kTpComm;
    while (category + 1 < models::kNumCategories && report::communication_kind(category) != kind) ++category;
    REQUIRE(report::communication_kind(category) == kind);
    o.comm_time_scale[category] = 1 / speed;
    return report::simulate(base.scenario, o).iteration_time_s;
  };
  for (const report::CommunicationSensitivity& c : sens) {
    CAPTURE(c.kind);
    const double free = c.variants[2].iteration_time_s;
    // Every kind of this plan can be hidden within the searched range; the speed found is one at
    // which the traffic costs at most the slack over free, and a speed one resolution step below
    // it costs more (unless the kind is hidden already).
    REQUIRE(c.hide_speed.has_value());
    const double hide = *c.hide_speed;
    CHECK(hide >= 1);
    if (hide > 1) {
      CHECK(time_at(c.kind, hide) <= free + slack);
      CHECK(time_at(c.kind, hide / report::kSensitivityResolution) > free + slack);
    } else {
      CHECK(t <= free + slack);
    }
    // The tolerated speed: at it the iteration grows by at most the slack, a step below it by more.
    if (c.tolerated_speed) {
      const double tolerated = *c.tolerated_speed;
      CHECK(tolerated < 1);
      CHECK(time_at(c.kind, tolerated) <= t + slack);
      CHECK(time_at(c.kind, tolerated / report::kSensitivityResolution) > t + slack);
    } else {
      CHECK(time_at(c.kind, 1 / report::kSensitivityRange) <= t + slack);
    }
  }
  // Blocking traffic costs in proportion to its time on the wire: tensor-parallel all-reduces
  // that cost the iteration T - T_free at the modelled speed cost (T - T_free) / s at speed s, so
  // they hide at (T - T_free) / slack, and a slowdown to s costs (T - T_free)(1/s - 1), within the
  // slack down to 1 / (1 + slack / (T - T_free)).
  const auto tp = std::find_if(sens.begin(), sens.end(), [](const auto& c) { return c.kind == "tp"; });
  REQUIRE(tp != sens.end());
  const double cost = t - tp->variants[2].iteration_time_s;
  CHECK(*tp->hide_speed == doctest::Approx(cost / slack).epsilon(0.1));
  REQUIRE(tp->tolerated_speed.has_value());
  CHECK(*tp->tolerated_speed == doctest::Approx(1 / (1 + slack / cost)).epsilon(0.06));
  // Traffic that is mostly hidden needs far less: the data-parallel reduction hides well under
  // the speed that hides the tensor-parallel all-reduces.
  const auto dp = std::find_if(sens.begin(), sens.end(), [](const auto& c) { return c.kind == "dp"; });
  REQUIRE(dp != sens.end());
  CHECK(*dp->hide_speed < 0.25 * *tp->hide_speed);
  // The searches do not depend on how many run at once.
  const auto serial = report::communication_sensitivity(base, 1);
  REQUIRE(serial.size() == sens.size());
  for (std::size_t i = 0; i < sens.size(); ++i) {
    CHECK(serial[i].hide_speed == sens[i].hide_speed);
    CHECK(serial[i].tolerated_speed == sens[i].tolerated_speed);
  }
}

TEST_CASE("report/what-if: the NICs at other speeds, all traffic on them together, up to the PCIe link before them") {
  // GPT 1.7B, DP 32 on 4 DGX A100 nodes with one micro-batch per GPU: the gradient all-reduce
  // crosses the NICs right after the backward pass. With 100 Gb/s NICs the NICs bound it; above
  // PCIe Gen 4 x16 (24 GB/s = 192 Gb/s in NCCL's topology) the PCIe link does.
  const std::vector<std::string> plan = {"cluster.inter_node.nic_bandwidth_Gbps=100", "training.global_batch_size=32",
                                         "training.micro_batch_size=1", "training.recompute_granularity=\"none\""};
  const auto base = tests::simulate_file(kGolden + "gpt3-1.7b-dp32-a100.json", plan);
  const auto nic = report::nic_sensitivity(base, 2);
  REQUIRE(nic.has_value());
  CHECK(nic->nic_gbit_per_s == doctest::Approx(100));
  CHECK(nic->pcie_gbit_per_s == doctest::Approx(192));
  REQUIRE(nic->variants.size() == 3);
  const double t = base.iteration_time_s, slack = report::kSensitivityTolerance * t;
  const double half = nic->variants[0].iteration_time_s, twice = nic->variants[1].iteration_time_s;
  const double fastest = nic->variants[2].iteration_time_s;
  CHECK(half > t * 1.2);        // the all-reduce is exposed: half the rate costs much
  CHECK(twice < t * 0.9);       // and twice the rate saves much
  // Beyond the PCIe link a faster NIC gains nothing: 200 Gb/s and 1,600 Gb/s run alike.
  CHECK(fastest == doctest::Approx(twice).epsilon(1e-3));
  // The iteration with the NICs at `speed` times 100 Gb/s, simulated here on its own.
  auto time_at = [&](double speed) {
    config::Scenario s = base.scenario;
    s.cluster.inter_node.nic_bandwidth = s.cluster.inter_node.nic_bandwidth * speed;
    return iteration_time(s);
  };
  // Hidden from just under the PCIe rate (192 Gb/s): within the slack of the fastest run there,
  // not a resolution step below.
  REQUIRE(nic->hide_speed.has_value());
  const double hide = *nic->hide_speed;
  CHECK(hide > 1.5);
  CHECK(hide <= 2.0);
  CHECK(time_at(hide) <= fastest + slack);
  CHECK(time_at(hide / report::kSensitivityResolution) > fastest + slack);
  // No slack downward worth the name: a 5% slower NIC already costs more than 1%.
  REQUIRE(nic->tolerated_speed.has_value());
  CHECK(*nic->tolerated_speed <= 1.0);
  CHECK(*nic->tolerated_speed > 0.9);
  // One node has no NICs in use: nothing to ask.
  CHECK_FALSE(report::nic_sensitivity(tests::simulate_file(kGolden + "gpt3-7.5b-tp4-pp2-a100.json",
                                                           {"cluster.num_nodes=1", "training.global_batch_size=8"}),
                                      1)
                  .has_value());
}

TEST_CASE("report/what-if: NVLink at other speeds, all traffic inside a node on it together, latencies unchanged") {
  // GPT 7.5B, TP 4 PP 2 on one DGX A100: the tensor-parallel collectives and the pipeline
  // transfers all run on NVLink.
  const std::vector<std::string> plan = {"cluster.num_nodes=1", "training.global_batch_size=8"};
  const auto base = tests::simulate_file(kGolden + "gpt3-7.5b-tp4-pp2-a100.json", plan);
  const topo::ClusterSpec& cluster = base.scenario.cluster;

  // What scales: a transfer between two GPUs of the node moves its bytes at twice the rate; an
  // all-reduce inside the node gains less, its latencies and its user-buffer copies (the measured
  // ring's terms that move no data over NVLink) staying as they were.
  const topo::CollectiveModel now(cluster), fast(report::with_nvlink_speed(cluster, 2));
  const sim::Bytes gib(std::int64_t{1} << 30);
  CHECK(now.predict_p2p(gib, true).time_us / fast.predict_p2p(gib, true).time_us == doctest::Approx(2).epsilon(0.01));
  const topo::GroupShape node{8, 1, 8, 8};
  const double ar_now = now.predict(sim::CollectiveKind::kAllReduce, gib, node).time_us;
  const double ar_fast = fast.predict(sim::CollectiveKind::kAllReduce, gib, node).time_us;
  CHECK(ar_now / ar_fast > 1.4);
  CHECK(ar_now / ar_fast < 1.95);
  // Between nodes the NICs set the rate: NVLink at twice the speed leaves a transfer alone.
  CHECK(fast.predict_p2p(gib, false).time_us == doctest::Approx(now.predict_p2p(gib, false).time_us));

  const auto nvl = report::nvlink_sensitivity(base, 2);
  REQUIRE(nvl.has_value());
  CHECK(nvl->links == 12);
  CHECK(nvl->nccl_GBps == doctest::Approx(240));  // 12 links x NCCL's 20 GB/s for SM80 (topo.h)
  CHECK(nvl->line_GBps == doctest::Approx(300));
  REQUIRE(nvl->variants.size() == 3);
  const double t = base.iteration_time_s, slack = report::kSensitivityTolerance * t;
  const double half = nvl->variants[0].iteration_time_s, twice = nvl->variants[1].iteration_time_s;
  const double fastest = nvl->variants[2].iteration_time_s;
  CHECK(half > t + slack);  // the tensor-parallel collectives are exposed: half the rate costs
  CHECK(twice < t - slack);
  CHECK(fastest < twice);
  // Latencies do not scale: every kind of communication at twice the speed, latencies and all, is
  // at least as fast as NVLink at twice the speed, and free communication faster than any NVLink.
  report::RunOptions all_twice{{}, false};
  all_twice.nominal = false;
  report::RunOptions free_comm = all_twice;
  for (std::uint8_t c = models::kTpComm; c < models::kNumCategories; ++c) {
    all_twice.comm_time_scale[c] = 0.5;
    free_comm.comm_time_scale[c] = 0;
  }
  CHECK(report::simulate(base.scenario, all_twice).iteration_time_s <= twice + 1e-9);
  CHECK(report::simulate(base.scenario, free_comm).iteration_time_s < fastest);

  // The edges hold at the speeds reported and fail a resolution step below them.
  auto time_at = [&](double speed) {
    config::Scenario s = base.scenario;
    s.cluster = report::with_nvlink_speed(s.cluster, speed);
    return iteration_time(s);
  };
  REQUIRE(nvl->hide_speed.has_value());
  const double hide = *nvl->hide_speed;
  CHECK(hide > 1);
  CHECK(time_at(hide) <= fastest + slack);
  CHECK(time_at(hide / report::kSensitivityResolution) > fastest + slack);
  REQUIRE(nvl->tolerated_speed.has_value());
  const double tolerated = *nvl->tolerated_speed;
  CHECK(tolerated < 1);
  CHECK(time_at(tolerated) <= t + slack);
  CHECK(time_at(tolerated / report::kSensitivityResolution) > t + slack);
  // One thread or two, the same speeds.
  const auto serial = report::nvlink_sensitivity(base, 1);
  REQUIRE(serial.has_value());
  CHECK(serial->hide_speed == nvl->hide_speed);
  CHECK(serial->tolerated_speed == nvl->tolerated_speed);

  // Nothing to ask of GPUs on PCIe, or of one GPU per node.
  std::vector<std::string> pcie = plan;
  pcie.push_back("cluster.intra_node.fabric=\"pcie\"");
  CHECK_FALSE(report::nvlink_sensitivity(tests::simulate_file(kGolden + "gpt3-7.5b-tp4-pp2-a100.json", pcie), 1).has_value());
}
