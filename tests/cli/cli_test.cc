// The trainsim binary end to end: exit codes and messages for good and bad input.

#include <doctest/doctest.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/trainsim_process.h"

namespace {

using trainsim_test::Outcome;
using trainsim_test::trainsim;

const std::string kDefault = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/gpt3-175b-1024xa100.json";

}  // namespace

TEST_CASE("cli: run prints a summary and exits 0") {
  const Outcome o = trainsim("run " + kDefault);
  CHECK(o.code == 0);
  CHECK(o.output.find("iteration time") != std::string::npos);
  CHECK(o.output.find("MFU") != std::string::npos);
}

TEST_CASE("cli: --json - writes only JSON to stdout") {
  const Outcome o = trainsim("run " + kDefault + " --json -");
  CHECK(o.code == 0);
  CHECK(o.output.front() == '{');
  CHECK(o.output.find("\"iteration_time_s\"") != std::string::npos);
}

TEST_CASE("cli: --reproducible leaves out the simulation's own run time: the same scenario gives the same bytes") {
  const std::string golden = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-7.5b-tp4-pp2-a100.json";
  const Outcome timed = trainsim("run " + golden + " --json -");
  REQUIRE(timed.code == 0);
  CHECK(nlohmann::json::parse(timed.output)["simulator"].contains("wall_s"));
  for (const std::string& args : {"run " + golden + " --reproducible", "run " + golden + " --reproducible --json -",
                                 "compare " + golden + " " + golden + " --set-b training.micro_batch_size=2 --reproducible --json -"}) {
    CAPTURE(args);
    const Outcome a = trainsim(args), b = trainsim(args);
    CHECK(a.code == 0);
    CHECK(a.output == b.output);
    CHECK(a.output.find("wall_s") == std::string::npos);
    CHECK(a.output.find(" events in ") == std::string::npos);
  }
}

TEST_CASE("cli: --sensitivity adds the communication what-ifs to the text and the JSON") {
  const std::string golden = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-7.5b-tp4-pp2-a100.json";
  const Outcome text = trainsim("run " + golden + " --sensitivity");
  CHECK(text.code == 0);
  CHECK(text.output.find("if one kind of communication ran at another speed") != std::string::npos);
  CHECK(text.output.find("hidden from") != std::string::npos);
  const Outcome json = trainsim("run " + golden + " --sensitivity --json -");
  CHECK(json.code == 0);
  const auto j = nlohmann::json::parse(json.output);
  REQUIRE(j.contains("communication_sensitivity"));
  const auto& kinds = j["communication_sensitivity"];
  REQUIRE(kinds.size() >= 3);  // tp, dp, pp at least
  CHECK(kinds[0]["kind"] == "tp");
  const double t = j["iteration_time_s"].get<double>();
  for (const auto& k : kinds) {
    CHECK(k["half_speed"]["iteration_time_s"].get<double>() >= t - 1e-6);
    CHECK(k["free"]["iteration_time_s"].get<double>() <= t + 1e-6);
    // The speed that hides the kind (at least the modelled one) and the slowest it tolerates
    // (below the modelled one), each null when outside the searched range.
    REQUIRE(k.contains("hide_speed"));
    REQUIRE(k.contains("tolerated_speed"));
    if (!k["hide_speed"].is_null()) CHECK(k["hide_speed"].get<double>() >= 1);
    if (!k["tolerated_speed"].is_null()) CHECK(k["tolerated_speed"].get<double>() < 1);
  }
  CHECK(kinds[0]["hide_speed"].get<double>() > 2);  // tp: blocking all-reduces, 11% of the iteration
  // Four nodes: the NICs at other speeds too, with the PCIe rate before them.
  REQUIRE(j.contains("nic_sensitivity"));
  CHECK(j["nic_sensitivity"]["nic_Gbps"].get<double>() == 200);
  CHECK(j["nic_sensitivity"]["pcie_Gbps"].get<double>() == 192);
  CHECK(j["nic_sensitivity"]["half_speed"]["iteration_time_s"].get<double>() >= t - 1e-6);
  CHECK(j["nic_sensitivity"].contains("speed_x16"));
  CHECK(text.output.find("if the NICs ran at another speed") != std::string::npos);
  // DGX A100 nodes: NVLink at other speeds too, with its rates (12 links, NCCL's 20 GB/s each).
  REQUIRE(j.contains("nvlink_sensitivity"));
  const auto& nvl = j["nvlink_sensitivity"];
  CHECK(nvl["links"].get<int>() == 12);
  CHECK(nvl["nccl_GBps"].get<double>() == 240);
  CHECK(nvl["line_GBps"].get<double>() == 300);
  CHECK(nvl["half_speed"]["iteration_time_s"].get<double>() >= t - 1e-6);
  CHECK(nvl["double_speed"]["iteration_time_s"].get<double>() <= t + 1e-6);
  CHECK(nvl.contains("speed_x16"));
  REQUIRE(nvl.contains("hide_speed"));
  REQUIRE(nvl.contains("tolerated_speed"));
  CHECK(text.output.find("if NVLink ran at another speed") != std::string::npos);
  // Without the flag the summary has no such field (and costs one simulation).
  const Outcome plain = trainsim("run " + golden + " --json -");
  CHECK_FALSE(nlohmann::json::parse(plain.output).contains("communication_sensitivity"));
}

TEST_CASE("cli: plan --sensitivity simulates the best plan whole and asks the what-ifs of it") {
  const Outcome o = trainsim("plan --model gpt3-1.7b --cluster dgx-a100-80gb --gpus 16 --global-batch-size 64 --tp 2 --pp 2 "
                             "--top 2 --sensitivity --json -");
  CHECK(o.code == 0);
  const auto j = nlohmann::json::parse(o.output);
  REQUIRE(j.contains("best_plan_sensitivity"));
  const auto& b = j["best_plan_sensitivity"];
  CHECK(b["iteration_time_s"].get<double>() > 0);
  REQUIRE(b["communication_sensitivity"].size() >= 3);  // tp, dp, pp
  for (const auto& k : b["communication_sensitivity"]) {
    CHECK(k["free"]["iteration_time_s"].get<double>() <= b["iteration_time_s"].get<double>() + 1e-6);
    REQUIRE(k.contains("hide_speed"));
    REQUIRE(k.contains("tolerated_speed"));
  }
  CHECK(b["communication_sensitivity"][0]["hide_speed"].get<double>() > 1);  // tp: blocking all-reduces
  REQUIRE(b.contains("nic_sensitivity"));  // 16 GPUs: two nodes
  CHECK(b["nic_sensitivity"]["double_speed"]["iteration_time_s"].get<double>() <= b["iteration_time_s"].get<double>() + 1e-6);
  REQUIRE(b.contains("nvlink_sensitivity"));
  CHECK(b["nvlink_sensitivity"]["half_speed"]["iteration_time_s"].get<double>() >= b["iteration_time_s"].get<double>() - 1e-6);
}

TEST_CASE("cli: plan --cluster A,B compares the hardware, and --cluster replaces a --scenario's") {
  const std::string args = "plan --model gpt3-1.7b --cluster dgx-a100-80gb,dgx-h100 --gpus 8 --global-batch-size 256 "
                           "--micro-batch-sizes 4 --optimizer-sharding 1 --recompute none --train-tokens 1e10 "
                           "--price-per-gpu-hour 1.5,2.5 --top 2";
  const Outcome text = trainsim(args);
  REQUIRE(text.code == 0);
  CHECK(text.output.find("plans for GPT 1.7B on A100-SXM4-80GB") != std::string::npos);
  CHECK(text.output.find("plans for GPT 1.7B on H100-SXM5-80GB") != std::string::npos);
  CHECK(text.output.find("hardware compared: GPT 1.7B, the best plan of each cluster; cheapest first") != std::string::npos);
  const Outcome json = trainsim(args + " --json -");
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.output);
  REQUIRE(j["clusters"].size() == 2);
  CHECK(j["clusters"][0]["cluster"] == "dgx-a100-80gb");
  CHECK(j["clusters"][0]["price_per_gpu_hour"] == 1.5);
  CHECK(j["clusters"][1]["price_per_gpu_hour"] == 2.5);
  CHECK(j["comparison"]["by"] == "cost");
  REQUIRE(j["comparison"]["ranking"].size() == 2);
  // Cheapest first, each cost the GPU-hours at its cluster's price.
  const auto& first = j["comparison"]["ranking"][0]["plan"];
  const auto& second = j["comparison"]["ranking"][1]["plan"];
  CHECK(first["cost"].get<double>() <= second["cost"].get<double>());
  for (const auto& row : j["comparison"]["ranking"]) {
    const double price = row["cluster"] == "dgx-h100" ? 2.5 : 1.5;
    CHECK(row["plan"]["cost"].get<double>() == doctest::Approx(row["plan"]["gpu_hours"].get<double>() * price));
  }
  CHECK(trainsim(args + " --json -").output == json.output);  // same inputs, same bytes
  // One price for both.
  const auto one = nlohmann::json::parse(trainsim(args.substr(0, args.find(" --price")) + " --price-per-gpu-hour 2 --top 2 --json -").output);
  CHECK(one["clusters"][0]["price_per_gpu_hour"] == 2.0);
  CHECK(one["clusters"][1]["price_per_gpu_hour"] == 2.0);
  // --sensitivity asks its what-ifs of each cluster's best plan.
  const Outcome sens = trainsim("plan --model gpt3-1.7b --cluster dgx-a100-80gb,dgx-h100 --gpus 16 --global-batch-size 64 "
                                "--tp 2 --pp 2 --top 1 --sensitivity --json -");
  REQUIRE(sens.code == 0);
  const auto sj = nlohmann::json::parse(sens.output);
  CHECK(sj["comparison"]["by"] == "tokens_per_s");
  for (const auto& c : sj["clusters"]) {
    REQUIRE(c.contains("best_plan_sensitivity"));
    CHECK(c["best_plan_sensitivity"]["iteration_time_s"].get<double>() > 0);
  }
  // A scenario's recipe on another cluster: the search runs on H100s, the output as for one cluster.
  const std::string golden = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-7.5b-tp4-pp2-a100.json";
  const Outcome moved = trainsim("plan --scenario " + golden + " --cluster dgx-h100 --tp 4 --pp 2 --top 1 --json -");
  REQUIRE(moved.code == 0);
  const auto m = nlohmann::json::parse(moved.output);
  CHECK_FALSE(m.contains("clusters"));
  REQUIRE(m["plans"].size() == 1);
  const Outcome here = trainsim("plan --scenario " + golden + " --tp 4 --pp 2 --top 1 --json -");
  REQUIRE(here.code == 0);
  CHECK(m["plans"][0]["iteration_time_s"].get<double>() < nlohmann::json::parse(here.output)["plans"][0]["iteration_time_s"].get<double>());
}

TEST_CASE("cli: plan --all-gpu-counts searches every count of the range that admits a plan") {
  // GPT 1.7B at batch 96 over 8..144 GPUs: the doubling grid searches 8, 16, 32, 64, 128 and 144;
  // every count admits data-parallel sizes dividing 96 and the model-parallel sizes tried.
  const std::string plan = "plan --model gpt3-1.7b --cluster dgx-a100-80gb --gpus 8..144 --global-batch-size 96 --tp 1 2 4 "
                           "--pp 1 3 --micro-batch-sizes 1 --optimizer-sharding 1 --train-tokens 15e12 --top 1 --json -";
  const Outcome all = trainsim(plan + " --all-gpu-counts");
  REQUIRE(all.code == 0);
  const auto j = nlohmann::json::parse(all.output);
  std::vector<std::int64_t> counts;
  for (const auto& g : j["per_gpu_count"]) counts.push_back(g["gpus"].get<std::int64_t>());
  CHECK(counts == std::vector<std::int64_t>{8, 16, 24, 32, 48, 64, 72, 96, 128, 144});
  const Outcome grid = trainsim(plan);
  REQUIRE(grid.code == 0);
  CHECK(nlohmann::json::parse(grid.output)["per_gpu_count"].size() == 6);
  // With a deadline, the same answer as the deadline search's (96: 128 GPUs need TP 4 and train
  // more slowly), over the whole curve.
  const double d96 = j["per_gpu_count"][7]["time_to_train_days"].get<double>();
  const std::string deadline = " --deadline-days " + std::to_string(d96 * 1.001);
  const auto every = nlohmann::json::parse(trainsim(plan + " --all-gpu-counts" + deadline).output);
  const auto walked = nlohmann::json::parse(trainsim(plan + deadline).output);
  CHECK(every["deadline_gpus"] == 96);
  CHECK(walked["deadline_gpus"] == 96);
  CHECK(walked["per_gpu_count"].size() < every["per_gpu_count"].size());
  // A single count has no range to search.
  const Outcome one = trainsim("plan --model gpt3-1.7b --cluster dgx-a100-80gb --gpus 8 --global-batch-size 96 --all-gpu-counts");
  CHECK(one.code == 2);
  CHECK(one.output.find("--all-gpu-counts: needs a range") != std::string::npos);
}

TEST_CASE("cli: plan --cp-comm-type tries the named context-parallel exchanges, by default a scenario's") {
  const std::string args = "plan --model llama3.1-8b --cluster dgx-h100 --gpus 8 --global-batch-size 8 --seq-length 16384 --tp 2 "
                           "--pp 1 --cp 2 --micro-batch-sizes 1 --optimizer-sharding 1 --json -";
  const Outcome both = trainsim(args + " --cp-comm-type p2p,a2a");
  REQUIRE(both.code == 0);
  const auto plans = nlohmann::json::parse(both.output)["plans"];
  std::set<std::string> types;
  for (const auto& p : plans) types.insert(p["parallelism"]["cp_comm_type"].get<std::string>());
  CHECK(types == std::set<std::string>{"a2a", "p2p"});
  // A scenario's exchange, unless the option names others.
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "trainsim_cli_cp_comm_type.json";
  {
    std::ofstream out(file);
    out << R"({"model": {"preset": "llama3.1-8b", "seq_length": 16384},
               "parallelism": {"tensor_model_parallel_size": 2, "context_parallel_size": 2, "cp_comm_type": "a2a"},
               "training": {"micro_batch_size": 1, "global_batch_size": 8},
               "cluster": {"preset": "dgx-h100", "num_nodes": 1}})";
  }
  const Outcome scenario = trainsim("plan --scenario " + file.string() + " --tp 2 --pp 1 --cp 2 --micro-batch-sizes 1 --json -");
  std::filesystem::remove(file);
  REQUIRE(scenario.code == 0);
  const auto scenario_plans = nlohmann::json::parse(scenario.output)["plans"];
  REQUIRE(!scenario_plans.empty());
  for (const auto& p : scenario_plans) CHECK(p["parallelism"]["cp_comm_type"] == "a2a");
  const Outcome bad = trainsim(args + " --cp-comm-type ring");
  CHECK(bad.code == 2);
  CHECK(bad.output.find("--cp-comm-type: ring: expected p2p, a2a, allgather or a2a+p2p") != std::string::npos);
}

TEST_CASE("cli: plan --ep-overlap gives MoE plans Megatron-Core's EP all-to-all overlap where they admit it") {
  const std::string args = "plan --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --global-batch-size 1024 --precision fp8 --tp 1 "
                           "--pp 1 --ep 16 --micro-batch-sizes 1 --optimizer-sharding 1 --top 1 --json -";
  const Outcome with = trainsim(args + " --ep-overlap");
  REQUIRE(with.code == 0);
  const auto best = nlohmann::json::parse(with.output)["plans"][0];
  CHECK(best["training"]["overlap_moe_expert_parallel_comm"] == true);
  CHECK(best["training"]["delay_wgrad_compute"] == true);
  const Outcome without = trainsim(args);
  REQUIRE(without.code == 0);
  const auto plain = nlohmann::json::parse(without.output)["plans"][0];
  CHECK_FALSE(plain["training"].contains("overlap_moe_expert_parallel_comm"));
  CHECK(best["iteration_time_s"].get<double>() < plain["iteration_time_s"].get<double>());
  const Outcome dense = trainsim("plan --model gpt3-1.7b --cluster dgx-h100 --gpus 8 --global-batch-size 64 --ep-overlap");
  CHECK(dense.code == 2);
  CHECK(dense.output.find("--ep-overlap") != std::string::npos);
}

TEST_CASE("cli: bad input exits 2 with the file and JSON path") {
  struct Case {
    std::string args, fragment;
  };
  const Case cases[] = {
      {"run " + kDefault + " --set parallelism.tensor_model_parallel_size=3", "/parallelism/tensor_model_parallel_size"},
      {"run " + kDefault + " --set parallelism.tensor_model_parallel_size=3", "must divide the GPU count"},
      {"run " + kDefault + " --set model.num_query_groups=4", "/model/num_query_groups"},
      {"run " + kDefault + " --set model.num_layers=100", "/model/num_layers"},
      {"run " + kDefault + " --set training.global_batch_size=1537", "/training/global_batch_size"},
      {"run " + kDefault + " --set cluster.num_nodes=null --set cluster.num_gpus=1020", "/cluster/num_gpus"},
      {"run " + kDefault + " --set model.preset=nope", "unknown model preset"},
      {"run " + kDefault + " --set training.typo=1", "/training/typo: unknown key"},
      {"run " + kDefault + " --set training.micro_batch_size=x", "/training/micro_batch_size"},
      {"run /no/such/scenario.json", "no such file"},
      {"run /tmp", "is a directory"},
      {"run " + kDefault + " --set =3", "expected key.path=value"},
      {"run", "scenario is required"},
      {"frobnicate", ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const Outcome o = trainsim(c.args);
    CHECK(o.code == 2);
    CHECK(o.output.find(c.fragment) != std::string::npos);
    if (c.args.rfind("run ", 0) == 0 && c.args.find("--set") != std::string::npos && c.fragment.find('/') == 0) {
      CHECK(o.output.find("gpt3-175b-1024xa100.json") != std::string::npos);
    }
  }
}

TEST_CASE("cli: interruptions: run and plan give goodput and the time to train with them, and ask for all three inputs") {
  const std::string golden = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-7.5b-tp4-pp2-a100.json";
  const std::string reliability =
      R"( --set 'training.reliability={"gpu_mtbf_hours": 50677, "restart_minutes": 10, "checkpoint_write_GBps": 10}')";
  const Outcome run = trainsim("run " + golden + " --set training.train_tokens=1e11" + reliability + " --json -");
  REQUIRE(run.code == 0);
  const auto j = nlohmann::json::parse(run.output);
  REQUIRE(j.contains("reliability"));
  const auto& r = j["reliability"];
  const double goodput = r["goodput"].get<double>();
  CHECK(goodput > 0.9);
  CHECK(goodput < 1);
  CHECK(r["job_mtbf_hours"].get<double>() == doctest::Approx(50677.0 / j["num_gpus"].get<double>()));
  CHECK(r["expected_time_to_train_days"].get<double>() == doctest::Approx(j["time_to_train_days"].get<double>() / goodput));
  CHECK(r["checkpoint_interval_iterations"].get<std::int64_t>() >= 1);
  CHECK(r["interval_optimal"] == true);
  const Outcome text = trainsim("run " + golden + " --set training.train_tokens=1e11" + reliability);
  CHECK(text.output.find("with interruptions    goodput") != std::string::npos);
  // compare sets the training's cost side by side: a slower restart trains as fast but takes longer.
  const std::string slower = " --set-b training.reliability.restart_minutes=60";
  const Outcome versus = trainsim("compare " + golden + " " + golden + " --set training.train_tokens=1e11" + reliability + slower +
                                  " --reproducible --json -");
  REQUIRE(versus.code == 0);
  const auto vj = nlohmann::json::parse(versus.output);
  const auto& d = vj["difference"];
  CHECK(d["time_to_train_days"].get<double>() == 0);
  CHECK(d["gpu_hours"].get<double>() == 0);
  CHECK(d["goodput"].get<double>() < 0);
  CHECK(d["expected_time_to_train_days"].get<double>() ==
        doctest::Approx(vj["b"]["reliability"]["expected_time_to_train_days"].get<double>() -
                        vj["a"]["reliability"]["expected_time_to_train_days"].get<double>()));
  CHECK(d["expected_gpu_hours"].get<double>() > 0);
  const Outcome versus_text = trainsim("compare " + golden + " " + golden + " --set training.train_tokens=1e11" + reliability + slower);
  for (const char* label : {"time to train", "GPU-hours", "goodput", "expected time to train", "expected GPU-hours"}) {
    CAPTURE(label);
    CHECK(versus_text.output.find("\n  " + std::string(label) + " ") != std::string::npos);
  }
  // Without a token budget or interruptions, no such rows.
  const Outcome plain = trainsim("compare " + golden + " " + golden + " --reproducible --json -");
  REQUIRE(plain.code == 0);
  CHECK_FALSE(nlohmann::json::parse(plain.output)["difference"].contains("goodput"));
  CHECK(trainsim("compare " + golden + " " + golden).output.find("time to train") == std::string::npos);
  CHECK(text.output.find("expected time") != std::string::npos);
  CHECK_FALSE(nlohmann::json::parse(trainsim("run " + golden + " --json -").output).contains("reliability"));

  const std::string plan = "plan --model gpt3-1.7b --cluster dgx-a100-80gb --gpus 16 --global-batch-size 64 --tp 2 --pp 2 --top 3 "
                           "--train-tokens 1e10 --price-per-gpu-hour 2";
  const Outcome p = trainsim(plan + " --gpu-mtbf-hours 100 --restart-minutes 30 --checkpoint-write-GBps 1 --json -");
  REQUIRE(p.code == 0);
  const auto pj = nlohmann::json::parse(p.output);
  REQUIRE(pj["plans"].size() == 3);
  for (const auto& e : pj["plans"]) {
    const double g = e["goodput"].get<double>();
    CHECK(g > 0);
    CHECK(g < 0.99);  // an interruption every 6 hours, half-hour restarts
    CHECK(e["expected_time_to_train_days"].get<double>() == doctest::Approx(e["time_to_train_days"].get<double>() / g));
    CHECK(e["cost"].get<double>() == doctest::Approx(2 * e["expected_gpu_hours"].get<double>()));
  }
  for (std::size_t i = 1; i < pj["plans"].size(); ++i) {  // ranked by tokens per second of elapsed time
    CHECK(pj["plans"][i]["expected_time_to_train_days"].get<double>() >=
          pj["plans"][i - 1]["expected_time_to_train_days"].get<double>() * (1 - 1e-9));
  }
  const Outcome csv = trainsim(plan + " --gpu-mtbf-hours 100 --restart-minutes 30 --checkpoint-write-GBps 1 --checkpoint-interval 50 --csv -");
  REQUIRE(csv.code == 0);
  CHECK(csv.output.find(",goodput,checkpoint_interval_iterations,expected_time_to_train_days,expected_gpu_hours") != std::string::npos);
  CHECK(csv.output.find(",50,") != std::string::npos);
  // The curve of days against GPUs: with interruptions, and without them dashed beside it.
  const Outcome svg = trainsim("plan --model gpt3-1.7b --cluster dgx-a100-80gb --gpus 8..16 --global-batch-size 64 --tp 2 --pp 2 "
                               "--train-tokens 1e10 --gpu-mtbf-hours 100 --restart-minutes 30 --checkpoint-write-GBps 1 --svg -");
  REQUIRE(svg.code == 0);
  CHECK(svg.output.find("class=\"curve\"") != std::string::npos);
  CHECK(svg.output.find("class=\"fault-free\"") != std::string::npos);
  CHECK(svg.output.find("with interruptions") != std::string::npos);
  // Spare nodes: each plan waits for repairs when all are out, and pays for the spares' GPUs.
  const std::string spare = plan + " --gpu-mtbf-hours 100 --restart-minutes 30 --checkpoint-write-GBps 1 --spare-nodes 1 "
                                   "--node-repair-hours 12";
  const Outcome spares = trainsim(spare + " --json -");
  REQUIRE(spares.code == 0);
  const auto sj = nlohmann::json::parse(spares.output);
  REQUIRE(sj["plans"].size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& e = sj["plans"][i];
    CHECK(e["no_spare_probability"].get<double>() > 0);
    CHECK(e["repair_wait_s"].get<double>() > 0);
    CHECK(e["goodput"].get<double>() < pj["plans"][i]["goodput"].get<double>());
    CHECK(e["expected_gpu_hours"].get<double>() ==
          doctest::Approx(e["expected_time_to_train_days"].get<double>() * 24 * (16 + 8)));
  }
  CHECK_FALSE(pj["plans"][0].contains("no_spare_probability"));
  const Outcome spares_text = trainsim(spare);
  CHECK(spares_text.output.find("1 spare node back from repair in 12 h") != std::string::npos);
  // Idle nodes that fail too leave the job short more often, and waiting longer, than the default
  // (faults that show under load only).
  const Outcome idle = trainsim(spare + " --idle-failure-share 1 --json -");
  REQUIRE(idle.code == 0);
  const auto ij = nlohmann::json::parse(idle.output);
  REQUIRE(ij["plans"].size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(ij["plans"][i]["no_spare_probability"].get<double>() > sj["plans"][i]["no_spare_probability"].get<double>());
    CHECK(ij["plans"][i]["repair_wait_s"].get<double>() > sj["plans"][i]["repair_wait_s"].get<double>());
  }
  CHECK(trainsim(spare + " --idle-failure-share 1").output.find("idle nodes fail at 1 of a working node's rate") != std::string::npos);
  // Idle nodes that fail faster than repairs come back: the wait never ends, and run says why.
  // (Llama 3's 2,048 nodes at its rate, 11-year repairs: each wait's first passage sums past 1e300.)
  const Outcome endless = trainsim("run " + std::string(TRAINSIM_SOURCE_DIR) +
                                   "/scenarios/examples/llama3.1-405b-16k-h100-interruptions.json"
                                   " --set training.reliability.spare_nodes=0 --set training.reliability.node_repair_hours=1e5"
                                   " --set training.reliability.idle_failure_share=1");
  REQUIRE(endless.code == 0);
  CHECK(endless.output.find("a wait without end") != std::string::npos);
  CHECK(endless.output.find("never: the job waits for repairs without end") != std::string::npos);
  CHECK(spares_text.output.find("idle nodes fail") == std::string::npos);
  // The cheapest count of spares, per plan: no fixed count holds fewer GPU-hours for any plan
  // (an interruption every 6 hours of this 2-node job and 12-hour repairs: 2 spares).
  const std::string reliable = plan + " --gpu-mtbf-hours 100 --restart-minutes 30 --checkpoint-write-GBps 1 --node-repair-hours 12";
  const Outcome cheapest = trainsim(reliable + " --spare-nodes cheapest --json -");
  REQUIRE(cheapest.code == 0);
  const auto cj = nlohmann::json::parse(cheapest.output)["plans"];
  REQUIRE(cj.size() == 3);
  for (const char* count : {"0", "1", "2", "3", "4", "8"}) {
    CAPTURE(count);
    const Outcome fixed = trainsim(reliable + " --spare-nodes " + count + " --json -");
    REQUIRE(fixed.code == 0);
    const nlohmann::json fixed_json = nlohmann::json::parse(fixed.output);  // outlives the loop over its plans
    int matched = 0;  // each of the cheapest search's plans is among the fixed count's
    for (const auto& f : fixed_json["plans"]) {
      CHECK(f["spare_nodes"].get<std::int64_t>() == std::stoll(count));
      for (const auto& c : cj) {
        if (c["parallelism"] != f["parallelism"] || c["training"] != f["training"]) continue;
        ++matched;
        CHECK(f["expected_gpu_hours"].get<double>() >= c["expected_gpu_hours"].get<double>() * (1 - 1e-12));
        if (f["spare_nodes"] == c["spare_nodes"]) CHECK(f["expected_gpu_hours"] == c["expected_gpu_hours"]);
      }
    }
    CHECK(matched == 3);
  }
  CHECK(trainsim(reliable + " --spare-nodes cheapest").output.find("each plan's cheapest count of spare nodes") !=
        std::string::npos);
  const Outcome cheapest_csv = trainsim(reliable + " --spare-nodes cheapest --csv -");
  REQUIRE(cheapest_csv.code == 0);
  // The CSV's spare_nodes column, in the best plan's row (the one beginning "1,").
  const auto cells = [](const std::string& line) {
    std::vector<std::string> out(1);
    for (const char ch : line) {
      if (ch == ',') {
        out.emplace_back();
      } else {
        out.back().push_back(ch);
      }
    }
    return out;
  };
  const std::size_t header_at = cheapest_csv.output.find("rank,gpus,");
  REQUIRE(header_at != std::string::npos);
  std::istringstream rows(cheapest_csv.output.substr(header_at));
  std::string header_line, best_line;
  std::getline(rows, header_line);
  std::getline(rows, best_line);
  const std::vector<std::string> header = cells(header_line), best = cells(best_line);
  REQUIRE(header.size() == best.size());
  const auto column = std::find(header.begin(), header.end(), "spare_nodes");
  REQUIRE(column != header.end());
  CHECK(best[static_cast<std::size_t>(column - header.begin())] == std::to_string(cj[0]["spare_nodes"].get<std::int64_t>()));
  const Outcome misspelt = trainsim(reliable + " --spare-nodes cheap");
  CHECK(misspelt.code == 2);
  CHECK(misspelt.output.find("--spare-nodes") != std::string::npos);
  CHECK(misspelt.output.find("cheapest") != std::string::npos);
  const Outcome stray = trainsim(plan + " --gpu-mtbf-hours 100 --restart-minutes 30 --checkpoint-write-GBps 1 --idle-failure-share 1");
  CHECK(stray.code == 2);
  CHECK(stray.output.find("--idle-failure-share") != std::string::npos);
  // Any of the options asks for all three inputs.
  const Outcome missing = trainsim(plan + " --gpu-mtbf-hours 100 --checkpoint-write-GBps 1");
  CHECK(missing.code == 2);
  CHECK(missing.output.find("--restart-minutes") != std::string::npos);
  const Outcome alone = trainsim(plan + " --async-checkpoint");
  CHECK(alone.code == 2);
  CHECK(alone.output.find("--gpu-mtbf-hours") != std::string::npos);
}

TEST_CASE("cli: plan answers any value of any numeric option with a result or exit 2, never a crash") {
  // The options reach the search's arithmetic (sizes it divides by, amounts it multiplies), so
  // each takes zero, negative, huge, non-finite and non-numeric values. The search space is one
  // plan (each run takes milliseconds); the option under test replaces its default.
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"--model", "llama3.1-8b"},  {"--cluster", "dgx-h100"},       {"--gpus", "8"},    {"--global-batch-size", "8"},
      {"--tp", "1"},               {"--pp", "1"},                   {"--cp", "1"},      {"--micro-batch-sizes", "1"},
      {"--recompute", "full"},     {"--optimizer-sharding", "1"},   {"--threads", "1"}, {"--train-tokens", "1e9"},
      {"--gpu-mtbf-hours", "50000"}, {"--restart-minutes", "10"},   {"--checkpoint-write-GBps", "100"},
      {"--spare-nodes", "2"},      {"--node-repair-hours", "24"},   {"--node-repair-share", "0.78"},
      {"--idle-failure-share", "0.5"}};
  const char* options[] = {"--gpus", "--global-batch-size", "--seq-length", "--tp", "--pp", "--vp", "--cp", "--ep",
                           "--micro-batch-sizes", "--optimizer-sharding", "--train-tokens", "--deadline-days",
                           "--price-per-gpu-hour", "--threads", "--top", "--gpu-mtbf-hours", "--restart-minutes",
                           "--checkpoint-write-GBps", "--checkpoint-interval", "--spare-nodes", "--node-repair-hours",
                           "--node-repair-share", "--idle-failure-share"};
  const char* values[] = {"0", "-1", "3", "4294967297", "9223372036854775807", "nan", "-inf", "1e308", "abc"};
  int results = 0, errors = 0;
  for (const std::string option : options) {
    for (const std::string value : values) {
      std::string args = "plan " + option + " " + value;
      for (const auto& [name, v] : defaults) {
        if (name == option) continue;
        // A deadline needs a range of GPU counts.
        args += " " + name + " " + (name == "--gpus" && option == "--deadline-days" ? std::string("8..16") : v);
      }
      CAPTURE(args);
      const Outcome o = trainsim(args);
      CHECK((o.code == 0 || o.code == 2));
      CHECK(o.output.find("internal error") == std::string::npos);
      if (o.code == 2) CHECK(o.output.find(option) != std::string::npos);  // the error names the option
      (o.code == 0 ? results : errors) += 1;
    }
  }
  CHECK(results > 0);
  CHECK(errors > results);
}
