#include "config/hardware_reader.h"
#include "config/scenario.h"
#include "tests/process.h"
#include "tests/scenario_helpers.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>
#include <string>

using namespace trainsim;

namespace {


// Loads the default scenario with overrides and returns the error message ("" when it loads).
std::string error_of(std::vector<std::string> overrides) {
  try {
    config::load_scenario(tests::kDefaultScenario, overrides);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

std::string error_of_text(const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / "trainsim_scenario_test.json").string();
  std::ofstream(path) << text;
  try {
    config::load_scenario(path);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}


}  // namespace

TEST_CASE("config/Scenario: the default scenario loads with its presets") {
  const config::Scenario s = config::load_scenario(tests::kDefaultScenario);
  CHECK(s.model.num_layers == 96);
  CHECK(s.model.hidden_size == 12288);
  CHECK(s.parallel.tensor_model_parallel_size == 8);
  CHECK(s.parallel.pipeline_model_parallel_size == 16);
  CHECK(s.num_gpus() == 1024);
  CHECK(s.data_parallel_size() == 8);
  CHECK(s.microbatches() == 192);
  CHECK(s.cluster.gpu.name == "A100-SXM4-80GB");
  CHECK(s.cluster.inter_node.nics_per_node == 8);
  CHECK(s.cluster.nccl.base_latency_us[1][2] == doctest::Approx(8.4));  // Ring Simple
  CHECK(s.training.recompute_granularity == models::RecomputeGranularity::kSelective);
}

TEST_CASE("config/Scenario: presets are found from any working directory") {
  const auto old = std::filesystem::current_path();
  std::filesystem::current_path(std::filesystem::temp_directory_path());
  CHECK_NOTHROW(config::load_scenario(tests::kDefaultScenario));
  CHECK(config::load_model("llama3.1-405b").num_layers == 126);
  std::filesystem::current_path(old);
}

TEST_CASE("config/Scenario: overrides set nested keys and keys next to a preset override it") {
  const config::Scenario s = config::load_scenario(
      tests::kDefaultScenario, {"training.micro_batch_size=2", "model.num_layers=48", "cluster.inter_node.nics_per_node=4", "name=\"x\""});
  CHECK(s.training.micro_batch_size == 2);
  CHECK(s.model.num_layers == 48);
  CHECK(s.model.hidden_size == 12288);  // still from the preset
  CHECK(s.cluster.inter_node.nics_per_node == 4);
  CHECK(s.name == "x");
  CHECK_THROWS_AS(config::load_scenario(tests::kDefaultScenario, {"no_equals_sign"}), InputError);
}

TEST_CASE("config/Scenario: comments are allowed") {
  CHECK(error_of_text("// a comment\n{ /* inline */ \"model\": {\"preset\": \"gpt3-1.7b\"}, \"training\": "
                      "{\"micro_batch_size\": 1, \"global_batch_size\": 8}, \"cluster\": {\"preset\": \"dgx-a100-80gb\"} }") == "");
}

TEST_CASE("config/Scenario: wrong types and unknown keys name the JSON path") {
  CHECK(tests::contains(error_of({"training.micro_batch_size=\"two\""}), "/training/micro_batch_size: expected an integer"));
  CHECK(tests::contains(error_of({"training.micro_batch_size=1.5"}), "/training/micro_batch_size"));
  CHECK(tests::contains(error_of({"training.micro_batch_size=0"}), "/training/micro_batch_size"));
  CHECK(tests::contains(error_of({"parallelism.sequence_parallel=3"}), "/parallelism/sequence_parallel: expected true or false"));
  CHECK(tests::contains(error_of({"training.batch=1"}), "/training/batch: unknown key"));
  CHECK(tests::contains(error_of({"cluster.inter_node.nic_speed=1"}), "/cluster/inter_node/nic_speed: unknown key"));
  CHECK(tests::contains(error_of({"surprise=1"}), "/surprise: unknown key"));
  CHECK(tests::contains(error_of({"training.precision=\"int8\""}), "/training/precision: expected one of"));
  CHECK(tests::contains(error_of({"model.hidden_size=1e999"}), "/model/hidden_size: expected an integer"));
}

TEST_CASE("config/Scenario: unknown presets list the available ones") {
  const std::string e = error_of({"model.preset=\"gpt-9\""});
  CHECK(tests::contains(e, "/model/preset: unknown model preset \"gpt-9\""));
  CHECK(tests::contains(e, "llama3.1-70b"));
  CHECK(tests::contains(error_of({"cluster.preset=\"dgx-z\""}), "/cluster/preset: unknown cluster preset"));
  CHECK(tests::contains(error_of({"cluster.gpu=\"v100\""}), "/cluster/gpu: unknown gpu preset"));
}

TEST_CASE("config/Scenario: impossible plans are rejected with the key to change") {
  // Tensor parallelism may span nodes (Megatron allows it; SC'21 Figs. 13 and 15 measure it),
  // but Transformer Engine's userbuffers overlap needs the group inside one NVLink domain.
  CHECK(error_of({"parallelism.tensor_model_parallel_size=16"}).empty());
  CHECK(tests::contains(error_of({"parallelism.tensor_model_parallel_size=16", "training.tp_comm_overlap=true"}),
                        "/training/tp_comm_overlap: tp_comm_overlap (Transformer Engine userbuffers) needs the tensor-parallel group inside one node"));
  CHECK(tests::contains(error_of({"parallelism.pipeline_model_parallel_size=6"}), "must divide the GPU count"));
  CHECK(tests::contains(error_of({"parallelism.tensor_model_parallel_size=8", "model.num_attention_heads=12", "model.kv_channels=128"}),
                 "gpt3-175b.json: /num_attention_heads: expected a multiple of tensor_model_parallel_size") == false);
  CHECK(tests::contains(error_of({"model.num_attention_heads=12", "model.kv_channels=128"}), "/model/num_attention_heads: expected a multiple of tensor_model_parallel_size"));
  CHECK(tests::contains(error_of({"model.num_query_groups=4"}), "/model/num_query_groups: expected a multiple of tensor_model_parallel_size"));
  CHECK(tests::contains(error_of({"model.num_layers=90"}), "/model/num_layers: 90 layers cannot be split evenly over 16 pipeline stages"));
  // The plain even split names Megatron-Core's ways to split unevenly.
  CHECK(tests::contains(error_of({"model.num_layers=90"}), "for uneven stages set parallelism.decoder_first_pipeline_num_layers"));
  CHECK(tests::contains(error_of({"parallelism.virtual_pipeline_model_parallel_size=4", "training.pipeline_schedule=\"interleaved\""}), "cannot be split evenly"));
  // Distributed-optimizer instances split the data-parallel group (DP 8 here) and need state to shard.
  CHECK(error_of({"parallelism.use_distributed_optimizer=true", "parallelism.num_distributed_optimizer_instances=2"}).empty());
  CHECK(tests::contains(error_of({"parallelism.use_distributed_optimizer=true", "parallelism.num_distributed_optimizer_instances=3"}),
                        "/parallelism/num_distributed_optimizer_instances: expected a divisor of the data-parallel x context-parallel size (8 x 1 = 8), got 3"));
  CHECK(tests::contains(error_of({"parallelism.num_distributed_optimizer_instances=2"}),
                        "/parallelism/num_distributed_optimizer_instances: needs a sharded optimizer"));
  // Experts split their own data-parallel group: Mixtral with EP 8 on 16 GPUs has 2 expert-data-parallel ranks.
  const std::vector<std::string> moe = {"model={\"preset\": \"mixtral-8x7b\", \"num_layers\": 4}", "cluster.preset=\"dgx-h100\"",
                                        "cluster.num_nodes=2", "parallelism.tensor_model_parallel_size=1", "parallelism.pipeline_model_parallel_size=1",
                                        "parallelism.sequence_parallel=false", "parallelism.expert_model_parallel_size=8",
                                        "parallelism.use_distributed_optimizer=true", "training.global_batch_size=32"};
  auto plus = [](std::vector<std::string> v, const std::string& more) {
    v.push_back(more);
    return v;
  };
  CHECK(error_of(plus(moe, "parallelism.num_distributed_optimizer_instances=2")).empty());
  CHECK(tests::contains(error_of(plus(moe, "parallelism.num_distributed_optimizer_instances=4")),
                        "expected a divisor of the expert-data-parallel size too (2), got 4"));
  CHECK(error_of({"parallelism.decoder_first_pipeline_num_layers=11", "parallelism.decoder_last_pipeline_num_layers=1"}) == "");
  CHECK(tests::contains(error_of({"parallelism.decoder_first_pipeline_num_layers=10"}), "cannot be split evenly over 15 middle stages"));
  CHECK(tests::contains(error_of({"training.global_batch_size=1540"}), "/training/global_batch_size: expected a multiple of micro_batch_size x data-parallel size (1 x 8 = 8)"));
  CHECK(tests::contains(error_of({"cluster.num_nodes=null", "cluster.num_gpus=1020"}), "/cluster/num_gpus: expected a multiple of gpus_per_node"));
  CHECK(tests::contains(error_of({"training.pipeline_schedule=\"interleaved\""}), "/training/pipeline_schedule"));
  CHECK(tests::contains(error_of({"training.overlap_param_gather=true"}), "overlap_param_gather needs use_distributed_optimizer"));
}

TEST_CASE("config/Scenario: broken files are input errors, not crashes") {
  CHECK(tests::contains(error_of_text("{\"model\": "), "invalid JSON"));
  CHECK(tests::contains(error_of_text(""), "is empty"));
  CHECK(tests::contains(error_of_text("[]"), "expected a JSON object"));
  CHECK(tests::contains(error_of_text("{\"model\": {\"preset\": \"gpt3-1.7b\"}}"), "/cluster: missing"));
  CHECK(tests::contains(error_of_text(std::string(200, '[') + std::string(200, ']')), "nested more than 128 levels"));
  try {
    config::load_scenario("/definitely/not/here.json");
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(tests::contains(e.what(), "no such file"));
  }
  try {
    config::load_scenario(std::filesystem::temp_directory_path().string());
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(tests::contains(e.what(), "is a directory"));
  }
}

TEST_CASE("config/Scenario: a cluster written out in full gets NCCL's own constants unless it names others") {
  const std::string path = (std::filesystem::temp_directory_path() / "trainsim_scenario_explicit_cluster.json").string();
  std::ofstream(path) << R"({"model": {"preset": "gpt3-1.7b"}, "training": {"micro_batch_size": 1, "global_batch_size": 8},
    "cluster": {"gpu": "h100-sxm5-80gb", "gpus_per_node": 8, "num_nodes": 1,
                "intra_node": {"fabric": "nvswitch", "bandwidth_GBps": 450},
                "inter_node": {"nics_per_node": 8, "nic_bandwidth_Gbps": 400}}})";
  const config::Scenario s = config::load_scenario(path);
  const config::Scenario preset = config::load_scenario(tests::kDefaultScenario);  // dgx-a100-80gb: "nccl.json"
  CHECK(s.cluster.nccl.base_latency_us == preset.cluster.nccl.base_latency_us);
  CHECK(s.cluster.nccl.hw_latency_us == preset.cluster.nccl.hw_latency_us);
  CHECK(s.cluster.nccl.net_overhead_us == preset.cluster.nccl.net_overhead_us);
}

TEST_CASE("config/Scenario: NICs grouped behind each GPU make one device of their summed speed") {
  // AWS p5: 32 EFA NICs of 100 Gb/s, four behind each of 8 GPUs, read as aws-ofi-nccl presents
  // them to NCCL.
  const topo::ClusterSpec p5 = config::load_cluster("aws-p5", 2);
  CHECK(p5.inter_node.nics_per_node == 8);
  CHECK(p5.inter_node.nics_per_gpu == 4);
  CHECK(p5.inter_node.nic_bandwidth.gbps() == doctest::Approx(50.0));  // 4 x 100 Gb/s
  const std::string model = R"("model": {"preset": "gpt3-1.7b"}, "training": {"micro_batch_size": 1, "global_batch_size": 16})";
  const std::string own = R"("gpu": "h100-sxm5-80gb", "gpus_per_node": 8, "num_nodes": 2, "intra_node": {"fabric": "nvswitch", "bandwidth_GBps": 450})";
  // A node described with more NICs than GPUs must say how the GPUs use them.
  const std::string unsaid = error_of_text("{" + model + R"(, "cluster": {)" + own +
                                           R"(, "inter_node": {"nics_per_node": 32, "nic_bandwidth_Gbps": 100}}})");
  CHECK(tests::contains(unsaid, "/cluster/inter_node/nics_per_node: 32 NICs for 8 GPUs per node: give inter_node.nics_per_gpu"));
  CHECK(error_of_text("{" + model + R"(, "cluster": {)" + own +
                      R"(, "inter_node": {"nics_per_node": 32, "nics_per_gpu": 4, "nic_bandwidth_Gbps": 100}}})") == "");
  CHECK(tests::contains(error_of_text("{" + model + R"(, "cluster": {)" + own +
                                      R"(, "inter_node": {"nics_per_node": 32, "nics_per_gpu": 3, "nic_bandwidth_Gbps": 100}}})"),
                        "/cluster/inter_node/nics_per_gpu: expected a divisor of nics_per_node (32), got 3"));
  // Part of a preset's node (4 of GB200's 64-GPU domain, one GPU of a p5) keeps one device per GPU.
  const config::Scenario part = config::load_scenario(tests::kDefaultScenario,
      {"cluster.preset=\"aws-p5\"", "cluster.gpus_per_node=1", "cluster.num_nodes=8", "parallelism.tensor_model_parallel_size=1",
       "parallelism.pipeline_model_parallel_size=1", "model.preset=\"gpt3-1.7b\"", "training.global_batch_size=8", "training.micro_batch_size=1"});
  CHECK(part.cluster.inter_node.nics_per_node == 8);
  CHECK(part.cluster.inter_node.nic_bandwidth.gbps() == doctest::Approx(50.0));
  CHECK(error_of_text("{" + model + R"(, "cluster": {"preset": "gb200-nvl72", "gpus_per_node": 4, "num_nodes": 4}})") == "");
  // NICs set over a preset's GPU count are the user's statement too.
  CHECK(tests::contains(error_of_text("{" + model + R"(, "cluster": {"preset": "dgx-h100", "num_nodes": 2, "inter_node": {"nics_per_node": 16}}})"),
                        "16 NICs for 8 GPUs per node: give inter_node.nics_per_gpu"));
  CHECK(error_of_text("{" + model + R"(, "cluster": {"preset": "dgx-h100", "num_nodes": 2, "inter_node": {"nics_per_node": 16, "nics_per_gpu": 2}}})") == "");
  // Every GPU needs a group of its own.
  CHECK(tests::contains(error_of_text("{" + model + R"(, "cluster": {"preset": "dgx-h100", "num_nodes": 2, "inter_node": {"nics_per_gpu": 2}}})"),
                        "/cluster/inter_node/nics_per_gpu: 2 NICs per GPU leave 4 groups for 8 GPUs per node: expected nics_per_node = "
                        "gpus_per_node x nics_per_gpu (16)"));
}

TEST_CASE("config/Scenario: a shared expert needs a mixture-of-experts model and a tensor-parallel split") {
  CHECK(tests::contains(error_of({"model.moe_shared_expert_intermediate_size=4096"}),
                        "/model/moe_shared_expert_intermediate_size: a shared expert needs a mixture-of-experts model"));
  const std::vector<std::string> moe = {"model={\"preset\": \"mixtral-8x7b\", \"moe_shared_expert_intermediate_size\": 4100}",
                                        "parallelism={\"tensor_model_parallel_size\": 8, \"pipeline_model_parallel_size\": 4, "
                                        "\"sequence_parallel\": true}"};
  CHECK(tests::contains(error_of(moe), "/model/moe_shared_expert_intermediate_size: expected a multiple of tensor_model_parallel_size (8)"));
}

TEST_CASE("config/Scenario: moe_layer_freq takes Megatron's integer or per-layer list") {
  const std::string moe = "model={\"preset\": \"mixtral-8x7b\", \"num_layers\": 8, ";
  const std::vector<std::string> base = {"parallelism={\"tensor_model_parallel_size\": 8, \"pipeline_model_parallel_size\": 1, "
                                         "\"sequence_parallel\": true}"};
  auto scenario = [&](const std::string& freq) {
    std::vector<std::string> o = base;
    o.push_back(moe + "\"moe_layer_freq\": " + freq + "}");
    return o;
  };
  const config::Scenario every2 = config::load_scenario(tests::kDefaultScenario, scenario("2"));
  CHECK(every2.model.num_moe_layers() == 4);
  CHECK(every2.model.is_moe_layer(0));
  CHECK_FALSE(every2.model.is_moe_layer(1));
  const config::Scenario listed = config::load_scenario(tests::kDefaultScenario, scenario("[0, 0, 1, 1, 1, 1, 1, 1]"));
  CHECK(listed.model.num_moe_layers() == 6);
  CHECK(tests::contains(error_of(scenario("[1, 0]")), "/model/moe_layer_freq: expected one 0/1 entry per layer (8), got 2"));
  CHECK(tests::contains(error_of(scenario("[0, 0, 2, 1, 1, 1, 1, 1]")), "/model/moe_layer_freq/2: expected 0 (dense) or 1 (MoE), got a number 2"));
  CHECK(tests::contains(error_of(scenario("[0, 0, 0, 0, 0, 0, 0, 0]")), "/model/moe_layer_freq: expected at least one MoE layer"));
  CHECK(tests::contains(error_of(scenario("0")), "/model/moe_layer_freq: expected an integer in [1, num_layers]"));
  CHECK(tests::contains(error_of({"model.moe_layer_freq=2"}), "/model/moe_layer_freq: dense layers among MoE ones need a mixture-of-experts model"));
}

TEST_CASE("config/Scenario: multi-head latent attention keys are checked") {
  const std::string mla = "model={\"preset\": \"gpt3-175b\", \"multi_latent_attention\": true, ";
  CHECK(error_of({mla + "\"kv_lora_rank\": 512}"}) == "");
  CHECK(tests::contains(error_of({mla + "\"q_lora_rank\": 512}"}), "/model/kv_lora_rank: multi-head latent attention needs kv_lora_rank > 0"));
  CHECK(tests::contains(error_of({mla + "\"kv_lora_rank\": 512, \"num_query_groups\": 4}"}),
                        "/model/num_query_groups: multi-head latent attention has a key and value per head: expected 96"));
  CHECK(tests::contains(error_of({"model.kv_lora_rank=512"}), "/model/kv_lora_rank: applies to multi-head latent attention only"));
}

TEST_CASE("config/Scenario: recompute_modules are Megatron-Core's, under selective recomputation") {
  CHECK(tests::contains(error_of({"training.recompute_granularity=\"selective\"", "training.recompute_modules=[\"shared_experts\"]"}),
                        "/training/recompute_modules/0: expected \"core_attn\", \"mla_up_proj\", \"mlp\", \"moe\", \"layernorm\" or "
                        "\"moe_act\""));
  CHECK(tests::contains(error_of({"training.recompute_granularity=\"none\"", "training.recompute_modules=[\"core_attn\"]"}),
                        "/training/recompute_modules: applies with recompute_granularity \"selective\""));
  CHECK(tests::contains(error_of({"training.recompute_granularity=\"selective\"", "training.recompute_modules=[\"mla_up_proj\"]"}),
                        "/training/recompute_modules: mla_up_proj needs a model with multi_latent_attention"));
  CHECK(error_of({"training.recompute_granularity=\"selective\"", "training.recompute_modules=[\"core_attn\"]"}) == "");
  // "mlp" is the dense layers' MLP, "moe" the MoE layers: each needs layers of its kind.
  CHECK(error_of({"training.recompute_granularity=\"selective\"", "training.recompute_modules=[\"core_attn\", \"mlp\"]"}) == "");
  CHECK(tests::contains(error_of({"training.recompute_granularity=\"selective\"", "training.recompute_modules=[\"moe\"]"}),
                        "/training/recompute_modules: moe needs a mixture-of-experts model"));
  const std::vector<std::string> moe = {"model.num_experts=8", "model.moe_router_topk=2", "parallelism.sequence_parallel=true",
                                        "training.recompute_granularity=\"selective\""};
  std::vector<std::string> moe_mlp = moe, moe_moe = moe;
  moe_mlp.push_back("training.recompute_modules=[\"mlp\"]");
  moe_moe.push_back("training.recompute_modules=[\"moe\"]");
  CHECK(tests::contains(error_of(moe_mlp), "/training/recompute_modules: mlp recomputes the dense layers' MLP, and every layer"));
  CHECK(error_of(moe_moe) == "");
}

TEST_CASE("config/Scenario: the flex token dispatcher and group-limited routing") {
  const std::vector<std::string> moe = {"model.num_experts=16", "model.moe_router_topk=4", "parallelism.sequence_parallel=true",
                                        "parallelism.expert_tensor_parallel_size=1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> all = moe;
    all.insert(all.end(), more.begin(), more.end());
    return error_of(all);
  };
  CHECK(with({"training.moe_token_dispatcher_type=\"flex\""}) == "");
  CHECK(with({"model.moe_router_num_groups=4", "model.moe_router_group_topk=2"}) == "");
  CHECK(tests::contains(error_of({"training.moe_token_dispatcher_type=\"flex\""}),
                        "/training/moe_token_dispatcher_type: flex dispatches tokens to experts: it needs a mixture-of-experts model"));
  CHECK(tests::contains(with({"training.moe_token_dispatcher_type=\"deepep\""}),
                        "/training/moe_token_dispatcher_type: expected one of \"alltoall\", \"flex\""));
  CHECK(tests::contains(with({"parallelism.expert_tensor_parallel_size=2", "training.moe_token_dispatcher_type=\"flex\""}),
                        "/training/moe_token_dispatcher_type: flex (DeepEP) with expert_tensor_parallel_size > 1 is not modelled"));
  CHECK(tests::contains(with({"model.moe_router_num_groups=4"}),
                        "/model/moe_router_num_groups: moe_router_num_groups and moe_router_group_topk go together"));
  CHECK(tests::contains(with({"model.moe_router_num_groups=3", "model.moe_router_group_topk=1"}),
                        "/model/moe_router_num_groups: expected a divisor of num_experts (16)"));
  CHECK(tests::contains(with({"model.moe_router_num_groups=4", "model.moe_router_group_topk=5"}),
                        "/model/moe_router_group_topk: expected at most moe_router_num_groups (4)"));
  CHECK(tests::contains(with({"model.moe_router_num_groups=8", "model.moe_router_group_topk=1"}),
                        "/model/moe_router_topk: expected at most the experts of moe_router_group_topk groups (2)"));
}

TEST_CASE("config/Scenario: multi-token prediction: its count, its place in a layout, and the plans trainsim does not model with it") {
  const std::string rope = "model.position_embedding_type=\"rope\"";
  CHECK(tests::contains(error_of({"model.mtp_num_layers=-1"}), "/model/mtp_num_layers: expected an integer in [0, 64]"));
  CHECK(tests::contains(error_of({"model.mtp_num_layers=1", rope, "parallelism.zero_stage=3"}),
                        "/parallelism/zero_stage: multi-token prediction under ZeRO stage 3 is not modelled (the model has 1 "
                        "multi-token-prediction module; \"mtp_num_layers\": 0 in the model section trains without)"));
  CHECK(tests::contains(error_of({"model.mtp_num_layers=1", rope, "training.recompute_granularity=\"full\"", "training.recompute_num_layers=2"}),
                        "/training/recompute_num_layers: multi-token prediction under full uniform recomputation needs recompute_num_layers 1"));
  CHECK(tests::contains(error_of({"model.mtp_num_layers=2", rope, "parallelism.pipeline_model_parallel_size=2",
                                  "parallelism.pipeline_model_parallel_layout=\"Et*48|t*48L\""}),
                        "/parallelism/pipeline_model_parallel_layout: places 0 multi-token-prediction layers ('m'); expected 2 (mtp_num_layers)"));
  CHECK(error_of({"model.mtp_num_layers=2", rope, "parallelism.pipeline_model_parallel_size=2",
                  "parallelism.pipeline_model_parallel_layout=\"Et*48|t*48mmL\""}).empty());
  CHECK(tests::contains(error_of({"model.mtp_num_layers=1"}),
                        "gpt3-175b.json: /position_embedding_type: multi-token prediction needs rotary position embeddings"));
  CHECK(error_of({"model.mtp_num_layers=1", rope}).empty());
}

TEST_CASE("config/Scenario: training.reliability needs the interruption rate, the restart time and the storage bandwidth") {
  const std::string base = "training.reliability=";
  const config::Scenario s = config::load_scenario(
      tests::kDefaultScenario,
      {base + R"({"gpu_mtbf_hours": 50677, "restart_minutes": 12.5, "checkpoint_write_GBps": 2000, "async_checkpoint": true,
                 "checkpoint_interval_iterations": 40})"});
  REQUIRE(s.training.reliability.has_value());
  CHECK(s.training.reliability->gpu_mtbf_hours == 50677);
  CHECK(s.training.reliability->restart_minutes == 12.5);
  CHECK(s.training.reliability->checkpoint_write_GBps == 2000);
  CHECK(s.training.reliability->async_checkpoint);
  CHECK(s.training.reliability->checkpoint_interval_iterations == 40);
  CHECK_FALSE(config::load_scenario(tests::kDefaultScenario).training.reliability.has_value());

  const std::string missing = error_of({base + R"({"gpu_mtbf_hours": 50677, "checkpoint_write_GBps": 2000})"});
  CHECK(missing.find("/training/reliability/restart_minutes") != std::string::npos);
  const std::string unknown =
      error_of({base + R"({"gpu_mtbf_hours": 50677, "restart_minutes": 5, "checkpoint_write_GBps": 2000, "mtbf": 3})"});
  CHECK(unknown.find("/training/reliability/mtbf") != std::string::npos);
  const std::string range = error_of({base + R"({"gpu_mtbf_hours": 0, "restart_minutes": 5, "checkpoint_write_GBps": 2000})"});
  CHECK(range.find("/training/reliability/gpu_mtbf_hours") != std::string::npos);
  const std::string interval = error_of(
      {base + R"({"gpu_mtbf_hours": 100, "restart_minutes": 5, "checkpoint_write_GBps": 2000, "checkpoint_interval_iterations": 0})"});
  CHECK(interval.find("/training/reliability/checkpoint_interval_iterations") != std::string::npos);

  // Spares: a count, or the cheapest one; with the repair time, the shares beside it.
  const std::string spares = R"({"gpu_mtbf_hours": 50677, "restart_minutes": 5, "checkpoint_write_GBps": 2000, "node_repair_hours": 24, )";
  const config::Scenario counted =
      config::load_scenario(tests::kDefaultScenario, {base + spares + R"("spare_nodes": 6, "idle_failure_share": 0.25})"});
  CHECK(counted.training.reliability->spare_nodes == 6);
  CHECK_FALSE(counted.training.reliability->cheapest_spares);
  CHECK(counted.training.reliability->idle_failure_share == 0.25);
  const config::Scenario cheapest = config::load_scenario(tests::kDefaultScenario, {base + spares + R"("spare_nodes": "cheapest"})"});
  CHECK_FALSE(cheapest.training.reliability->spare_nodes.has_value());
  CHECK(cheapest.training.reliability->cheapest_spares);
  CHECK(cheapest.training.reliability->has_spares());
  CHECK(cheapest.training.reliability->idle_failure_share == 0);
  const std::string share = error_of({base + spares + R"("spare_nodes": 2, "idle_failure_share": 1.5})"});
  CHECK(share.find("/training/reliability/idle_failure_share") != std::string::npos);
  const std::string no_repair =
      error_of({base + R"({"gpu_mtbf_hours": 50677, "restart_minutes": 5, "checkpoint_write_GBps": 2000, "spare_nodes": "cheapest"})"});
  CHECK(no_repair.find("/training/reliability/node_repair_hours") != std::string::npos);
}

TEST_CASE("config/calibration: an attention alternative priced like another implementation, and its errors") {
  // h100.json with its mpt_triton alternative rewritten.
  const std::string dir = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/calibration/";
  nlohmann::json h100 = nlohmann::json::parse(std::ifstream(dir + "h100.json"));
  const auto error_with = [&](const nlohmann::json& alternative) {
    nlohmann::json doc = h100;
    doc["flash_attention_alternatives"]["mpt_triton"] = alternative;
    const std::string path = (std::filesystem::temp_directory_path() / "trainsim_like_calibration.json").string();
    std::ofstream(path) << doc.dump();
    try {
      config::read_compute_calibration(path);
      return std::string();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
  };
  const topo::ComputeCalibration c = config::read_compute_calibration(dir + "h100.json");
  const topo::AttentionCalibration* fa2 = nullptr;
  const topo::AttentionCalibration* triton = nullptr;
  for (const topo::AttentionCalibration& a : c.attention_alternatives) {
    if (a.implementation == "flash_attention_2") fa2 = &a;
    if (a.implementation == "mpt_triton") triton = &a;
  }
  REQUIRE(fa2 != nullptr);
  REQUIRE(triton != nullptr);
  CHECK(triton->like == "flash_attention_2");
  CHECK(triton->forward == fa2->forward);
  CHECK(triton->backward == fa2->backward);
  CHECK(triton->speed == 0.64);
  // Written back as the reference, not as copied passes.
  const nlohmann::json written = config::to_json(c);
  CHECK(written["flash_attention_alternatives"]["mpt_triton"] == h100["flash_attention_alternatives"]["mpt_triton"]);

  CHECK(error_with({{"like", "cudnn"}, {"speed", 0.5}}).empty());  // the main implementation: fine
  CHECK(tests::contains(error_with({{"like", "no_such_kernel"}}), "/flash_attention_alternatives/mpt_triton/like"));
  CHECK(tests::contains(error_with({{"like", "flash_attention_2"}, {"tile", 64}}), "/flash_attention_alternatives/mpt_triton/tile"));
  CHECK(tests::contains(error_with({{"like", "flash_attention_2"}, {"speed", 0}}), "/flash_attention_alternatives/mpt_triton/speed"));
  CHECK(tests::contains(error_with({{"like", "flash_attention_2"}, {"speeed", 1}}), "speeed"));
}
