#include "planner/plan_search.h"

#include <doctest/doctest.h>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "config/pipeline_layout.h"
#include "config/scenario.h"
#include "models/lowering.h"
#include "planner/plan_output.h"
#include "report/simulation.h"
#include "sim/error.h"

using namespace trainsim;

namespace {

planner::PlanRequest request(const char* model, const char* cluster, std::int64_t gpus, std::int64_t batch) {
  planner::PlanRequest r;
  r.model = config::load_model(model);
  r.cluster = config::load_cluster(cluster, 1);
  r.gpu_counts = {gpus};
  r.training.global_batch_size = batch;
  r.training.overlap_param_gather = true;
  r.training.overlap_p2p_comm = true;
  r.training.train_tokens = 1e11;
  r.threads = 2;
  return r;
}

// A recipe option the search applies where a plan admits it: every ranked plan uses it exactly
// when `admits` says the plan can, and plans of both kinds are ranked (none is refused for it).
template <typename Uses, typename Admits>
void check_used_where_admitted(const planner::PlanReport& rep, Uses uses, Admits admits) {
  bool with = false, without = false;
  for (const planner::PlanResult& p : rep.plans) {
    CAPTURE(p.parallel.tensor_model_parallel_size);
    CAPTURE(p.parallel.pipeline_model_parallel_size);
    CAPTURE(p.parallel.virtual_pipeline_model_parallel_size);
    const bool admitted = admits(p);
    CHECK(uses(p) == admitted);
    (admitted ? with : without) = true;
  }
  CHECK(with);
  CHECK(without);
}

// The plan of `in` that `plan` describes (the same plan from another search), or null.
const planner::PlanResult* same_plan(const planner::PlanReport& in, const planner::PlanResult& plan) {
  for (const planner::PlanResult& p : in.plans) {
    if (planner::describe_plan(p) == planner::describe_plan(plan)) return &p;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("planner/search: every considered plan is pruned (with a reason) or ranked") {
  planner::PlanRequest r = request("gpt3-7.5b", "dgx-a100-80gb", 64, 256);
  const planner::PlanReport rep = planner::search(r);
  CHECK(rep.considered > 100);
  CHECK(rep.considered == rep.pruned_total() + static_cast<std::int64_t>(rep.plans.size()));
  REQUIRE(!rep.plans.empty());
  for (std::size_t i = 1; i < rep.plans.size(); ++i) CHECK(rep.plans[i - 1].tokens_per_s >= rep.plans[i].tokens_per_s);
  for (const planner::PlanResult& p : rep.plans) {
    CHECK(p.peak_bytes_per_gpu <= r.cluster.gpu.memory.count());
    CHECK(p.mfu > 0);
    CHECK(p.mfu < 1);
    CHECK(*p.time_to_train_days == doctest::Approx(1e11 / p.tokens_per_s / 86400));
  }
}

TEST_CASE("planner/search: a memory headroom keeps the plans that leave it free") {
  planner::PlanRequest r = request("gpt3-7.5b", "dgx-a100-80gb", 64, 256);
  r.space.pipeline = {1, 2};
  r.space.recompute = {models::RecomputeGranularity::kNone};
  r.space.optimizer_sharding = {1};
  const planner::PlanReport all = planner::search(r);
  REQUIRE(all.plans.size() > 2);
  std::int64_t largest = 0;
  for (const planner::PlanResult& p : all.plans) largest = std::max(largest, p.peak_bytes_per_gpu);
  // A headroom that leaves less than the largest peak: the plans that need more go.
  planner::PlanRequest spare = r;
  spare.memory_headroom_bytes = r.cluster.gpu.memory.count() - largest + 1;
  CHECK(spare.usable_memory_bytes() == largest - 1);
  const planner::PlanReport kept = planner::search(spare);
  REQUIRE(!kept.plans.empty());
  CHECK(kept.plans.size() < all.plans.size());
  for (const planner::PlanResult& p : kept.plans) CHECK(p.peak_bytes_per_gpu < largest);
  CHECK(kept.pruned_for_memory() > all.pruned_for_memory());
  CHECK(planner::plan_table(spare, kept, 3).find("GiB less a headroom of") != std::string::npos);
  CHECK(planner::plan_table(r, all, 3).find("headroom") == std::string::npos);
  CHECK(planner::plan_json(spare, kept, 1)["memory_headroom_bytes"] == spare.memory_headroom_bytes);
}

TEST_CASE("planner/search: layer counts that split neither way get NeMo's uneven first and last stages") {
  // DeepSeek-V3's 61 layers: 16 stages of 4 with 3 on the first and 2 on the last, 8 of 8 with 7
  // and 6 (NeMo's performance recipe for it).
  planner::PlanRequest r = request("deepseek-v3", "dgx-h100", 1024, 8192);
  r.space.tensor = {2};
  r.space.pipeline = {8, 16};
  r.space.expert = {32};
  r.space.expert_tensor = {2};  // expert TP follows TP: 2 x 32 must divide TP x DP (64 on 16 stages)
  r.space.micro_batch = {1};
  r.space.recompute = {models::RecomputeGranularity::kFull};
  r.space.optimizer_sharding = {1};  // the split, not the sharding, is under test
  const planner::PlanReport rep = planner::search(r);
  REQUIRE(!rep.plans.empty());
  std::set<std::int64_t> stages;
  for (const planner::PlanResult& p : rep.plans) {
    const std::int64_t pp = p.parallel.pipeline_model_parallel_size;
    stages.insert(pp);
    if (pp == 16) {
      CHECK(p.parallel.decoder_first_pipeline_num_layers == 3);
      CHECK(p.parallel.decoder_last_pipeline_num_layers == 2);
      CHECK(p.parallel.virtual_pipeline_model_parallel_size == 1);
    }
    if (pp == 8 && p.parallel.virtual_pipeline_model_parallel_size == 1) CHECK(p.parallel.decoder_first_pipeline_num_layers == 7);
  }
  CHECK(stages.count(16) == 1);
  CHECK(stages.count(8) == 1);
  const std::string table = planner::plan_table(r, rep, rep.plans.size());
  CHECK(table.find("16~") != std::string::npos);
  CHECK(table.find("PP~: the layers do not split evenly") != std::string::npos);
  const auto json = planner::plan_json(r, rep, rep.plans.size());
  bool listed = false;
  for (const auto& p : json["plans"]) listed = listed || p["parallelism"].contains("decoder_first_pipeline_num_layers");
  CHECK(listed);
}

TEST_CASE("planner/search: virtual stages over layers that split neither way get Megatron-Bridge's filled layout") {
  // DeepSeek-V3's 61 layers and its multi-token-prediction layer: Megatron-Bridge's layouts
  // (recipes/deepseek/deepseek_v3.py) hold 4 layers in each of 16 virtual stages, the embedding in
  // the first, 1 layer with the MTP layer and the loss in the last, for (PP, VP) = (4, 4) and
  // (8, 2); 8 layers in each of 8 with 5 in the last for (4, 2).
  planner::PlanRequest r = request("deepseek-v3", "dgx-h100", 1024, 8192);
  r.space.tensor = {2};
  r.space.pipeline = {4, 8};
  r.space.expert = {32};
  r.space.micro_batch = {1};
  r.space.recompute = {models::RecomputeGranularity::kFull};
  r.space.optimizer_sharding = {1};  // the layout, not the sharding, is under test
  const planner::PlanReport rep = planner::search(r);
  const std::vector<std::int64_t> bridge = config::parse_pipeline_layout("Et*4|(t*4|)*14,tmL").layers;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (const planner::PlanResult& p : rep.plans) {
    const std::int64_t pp = p.parallel.pipeline_model_parallel_size, vp = p.parallel.virtual_pipeline_model_parallel_size;
    CAPTURE(pp);
    CAPTURE(vp);
    seen.insert({pp, vp});
    if (vp == 1) {
      CHECK(p.parallel.pipeline_model_parallel_layout.empty());
      continue;
    }
    CHECK(!p.parallel.decoder_first_pipeline_num_layers);
    CHECK(!p.parallel.accounts_in_split());
    CHECK(p.training.pipeline_schedule == models::PipelineSchedule::kInterleaved);
    CHECK(p.parallel.layout_mtp_layers == 1);
    REQUIRE(static_cast<std::int64_t>(p.parallel.layout_layers.size()) == pp * vp);
    std::int64_t placed = 0;
    for (std::int64_t n : p.parallel.layout_layers) placed += n;
    CHECK(placed == 61);
    if (pp * vp == 16) {
      CHECK(p.parallel.layout_layers == bridge);
      CHECK(p.parallel.pipeline_model_parallel_layout == "Et*4|(t*4|)*14tmL");
    } else {
      CHECK(p.parallel.pipeline_model_parallel_layout == "Et*8|(t*8|)*6t*5mL");
    }
    // The plan is a scenario Megatron's rules accept, and simulates as the search ranked it.
    const config::Scenario s = planner::scenario_of(r, p);
    CHECK(s.parallel.pipeline_model_parallel_layout == p.parallel.pipeline_model_parallel_layout);
  }
  // 61 layers fill 8 and 16 virtual stages, not 12 (4 x 3: 11 of 6 are 66) or 32.
  CHECK(seen.count({4, 2}) == 1);
  CHECK(seen.count({4, 4}) == 1);
  CHECK(seen.count({8, 2}) == 1);
  CHECK(seen.count({4, 3}) == 0);
  CHECK(seen.count({8, 4}) == 0);
  const auto json = planner::plan_json(r, rep, rep.plans.size());
  bool listed = false;
  for (const auto& p : json["plans"]) listed = listed || p["parallelism"].value("pipeline_model_parallel_layout", "") == "Et*4|(t*4|)*14tmL";
  CHECK(listed);
  std::ostringstream csv;
  planner::write_plan_csv(rep, csv);
  CHECK(csv.str().find(",Et*8|(t*8|)*6t*5mL") != std::string::npos);
  CHECK(planner::plan_table(r, rep, rep.plans.size()).find("(pipeline_model_parallel_layout)") != std::string::npos);

  // Without multi-token prediction the last virtual stage holds its layers and the loss; virtual
  // stages asked for that the layers cannot fill are pruned with the reason.
  planner::PlanRequest plain = r;
  plain.model.mtp_num_layers = 0;
  plain.space.pipeline = {8, 16};
  plain.space.virtual_stages = {2};
  const planner::PlanReport rest = planner::search(plain);
  REQUIRE(!rest.plans.empty());
  for (const planner::PlanResult& p : rest.plans) {
    CHECK(p.parallel.pipeline_model_parallel_size == 8);
    CHECK(p.parallel.pipeline_model_parallel_layout == "Et*4|(t*4|)*14tL");
  }
  planner::PlanRequest unfilled = plain;
  unfilled.space.pipeline = {16};
  const planner::PlanReport none = planner::search(unfilled);
  CHECK(none.plans.empty());
  CHECK(none.first_invalid.find("61 layers do not fill 32 virtual stages") != std::string::npos);
}

TEST_CASE("planner/search: mixture-of-experts plans with TP > 1 also run their experts without tensor parallelism") {
  // Megatron's default expert_tensor_parallel_size is TP; Megatron-Bridge's MoE recipes set 1
  // (Qwen3-235B-A22B on H100: TP 2, EP 32, ETP 1), and its flex dispatcher runs only with 1.
  planner::PlanRequest r = request("mixtral-8x7b", "dgx-h100", 16, 64);
  r.space.tensor = {1, 2};
  r.space.pipeline = {1};
  r.space.expert = {8};
  r.space.micro_batch = {1};
  const planner::PlanReport rep = planner::search(r);
  std::set<std::pair<std::int64_t, std::int64_t>> seen;  // (TP, expert TP)
  for (const planner::PlanResult& p : rep.plans) {
    seen.insert({p.parallel.tensor_model_parallel_size, p.parallel.etp()});
    // Only TP > 1 plans get an explicit size, and only the one that differs from TP.
    if (p.parallel.expert_tensor_parallel_size > 0) {
      CHECK(p.parallel.tensor_model_parallel_size == 2);
      CHECK(p.parallel.expert_tensor_parallel_size == 1);
      CHECK(planner::describe_plan(p).find("EP 8 ETP 1") != std::string::npos);
    } else {
      CHECK(planner::describe_plan(p).find("ETP") == std::string::npos);
    }
  }
  CHECK(seen == std::set<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {2, 2}, {2, 1}});
  const std::string table = planner::plan_table(r, rep, rep.plans.size());
  CHECK(table.find("8e ") != std::string::npos);
  CHECK(table.find("EPe: the experts run another tensor-parallel size than attention") != std::string::npos);
  std::set<std::int64_t> listed;
  const auto json = planner::plan_json(r, rep, rep.plans.size());
  for (const auto& p : json["plans"]) {
    listed.insert(p["parallelism"]["expert_tensor_parallel_size"].get<std::int64_t>());
  }
  CHECK(listed == std::set<std::int64_t>{1, 2});
  std::ostringstream csv;
  planner::write_plan_csv(rep, csv);
  CHECK(csv.str().find("pipeline_model_parallel_layout,expert_tensor_parallel_size") != std::string::npos);

  // --etp narrows it; a dense model's plans never set it.
  planner::PlanRequest two = r;
  two.space.expert_tensor = {2};
  two.space.tensor = {2};
  const planner::PlanReport only = planner::search(two);
  REQUIRE(!only.plans.empty());
  for (const planner::PlanResult& p : only.plans) CHECK(p.parallel.expert_tensor_parallel_size == 2);
  planner::PlanRequest dense = request("gpt3-7.5b", "dgx-a100-80gb", 64, 256);
  dense.space.pipeline = {4};
  const planner::PlanReport plain = planner::search(dense);
  for (const planner::PlanResult& p : plain.plans) CHECK(p.parallel.expert_tensor_parallel_size == 0);
  CHECK(planner::plan_json(dense, plain, 1)["plans"][0]["parallelism"].contains("expert_tensor_parallel_size") == false);

  // The flex dispatcher runs only with expert TP 1: before, its TP 2 plans were all invalid.
  planner::PlanRequest flex = r;
  flex.space.tensor = {2};
  flex.training.moe_token_dispatcher_type = models::TokenDispatcher::kFlex;
  const planner::PlanReport deep = planner::search(flex);
  REQUIRE(!deep.plans.empty());
  for (const planner::PlanResult& p : deep.plans) CHECK(p.parallel.etp() == 1);
}

TEST_CASE("planner/search: each plan with EP > 1 is tried with each token dispatcher asked for") {
  planner::PlanRequest r = request("mixtral-8x7b", "dgx-h100", 16, 64);
  r.space.tensor = {4};
  r.space.pipeline = {4};
  r.space.expert = {1, 4};
  r.space.expert_tensor = {1};
  r.space.micro_batch = {1};
  r.space.optimizer_sharding = {1};
  r.space.dispatchers = {models::TokenDispatcher::kAllToAll, models::TokenDispatcher::kFlex};
  const planner::PlanReport rep = planner::search(r);
  std::map<std::int64_t, std::set<models::TokenDispatcher>> tried;  // by EP
  for (const planner::PlanResult& p : rep.plans) {
    tried[p.parallel.expert_model_parallel_size].insert(p.training.moe_token_dispatcher_type);
    const bool flex = p.training.moe_token_dispatcher_type == models::TokenDispatcher::kFlex;
    CHECK((planner::describe_plan(p).find(" flex") != std::string::npos) == flex);
  }
  // EP 1 dispatches nothing across ranks: tried once, with the recipe's dispatcher (its plans do
  // not fit here, replicating the experts over 4 GPUs, but are counted): EP 1 once and EP 4 twice,
  // each with 4 virtual-stage counts (32 layers over 4 stages: 1, 2, 4, 8) and 3 recomputations.
  CHECK(tried[1].count(models::TokenDispatcher::kFlex) == 0);
  CHECK(rep.considered == (1 + 2) * 4 * 3);
  CHECK(tried[4] == std::set<models::TokenDispatcher>{models::TokenDispatcher::kAllToAll, models::TokenDispatcher::kFlex});
  const std::string table = planner::plan_table(r, rep, rep.plans.size());
  CHECK(table.find(" 4ef ") != std::string::npos);
  CHECK(table.find("  4e ") != std::string::npos);
  CHECK(table.find("EPf: tokens dispatched by the flex dispatcher") != std::string::npos);
  const auto json = planner::plan_json(r, rep, rep.plans.size());
  std::set<std::string> named;
  for (const auto& p : json["plans"]) named.insert(p["training"]["moe_token_dispatcher_type"].get<std::string>());
  CHECK(named == std::set<std::string>{"alltoall", "flex"});
  std::ostringstream csv;
  planner::write_plan_csv(rep, csv);
  CHECK(csv.str().find(",flex") != std::string::npos);
  // Without the list, the recipe's dispatcher alone.
  planner::PlanRequest recipe = r;
  recipe.space.dispatchers.clear();
  for (const planner::PlanResult& p : planner::search(recipe).plans) {
    CHECK(p.training.moe_token_dispatcher_type == models::TokenDispatcher::kAllToAll);
  }
}

TEST_CASE("planner/search: layer counts that do not split evenly get the embedding and the loss counted as layers") {
  // Llama-3.1 405B: 126 layers divide over no power-of-two stage count above 2; with the
  // embedding and the loss counted, 128 split over 8 or 16 stages (Megatron-Core's
  // account_for_embedding/loss_in_pipeline_split).
  planner::PlanRequest r = request("llama3.1-405b", "dgx-h100", 2048, 1024);
  r.space.tensor = {8};
  r.space.pipeline = {16};
  r.space.context = {2};
  r.space.micro_batch = {1};
  r.space.optimizer_sharding = {1};
  const planner::PlanReport rep = planner::search(r);
  REQUIRE(!rep.plans.empty());
  std::set<std::int64_t> virtual_stages;
  for (const planner::PlanResult& p : rep.plans) {
    CHECK(p.parallel.account_for_embedding_in_pipeline_split);
    CHECK(p.parallel.account_for_loss_in_pipeline_split);
    CHECK(128 % (16 * p.parallel.virtual_pipeline_model_parallel_size) == 0);
    virtual_stages.insert(p.parallel.virtual_pipeline_model_parallel_size);
  }
  CHECK(virtual_stages.size() >= 2);  // interleaving is searched too
  CHECK(planner::describe_plan(rep.plans.front()).find("PP 16*") != std::string::npos);
  std::ostringstream csv;
  planner::write_plan_csv(rep, csv);
  CHECK(csv.str().find(",true,true,,,") != std::string::npos);  // both flags, no uneven first/last stage
  CHECK(planner::plan_table(r, rep, 5).find("PP*: the embedding and the loss count as one layer each") != std::string::npos);
  // Where the layers split evenly the flags stay off.
  planner::PlanRequest even = request("gpt3-7.5b", "dgx-a100-80gb", 64, 256);
  even.space.pipeline = {4};
  for (const planner::PlanResult& p : planner::search(even).plans) CHECK(!p.parallel.accounts_in_split());
}

TEST_CASE("planner/search: each context-parallel plan is tried with each exchange asked for") {
  // Llama-3.1 8B (32 heads, 8 query groups) at 32K tokens on 16 H100: CP 2 and 4 with the ring,
  // with all-to-alls and with all-gathered K/V; CP 1 once; TP 4 CP 4 leaves 2 key/value heads per
  // rank, which do not split over 4 ranks by all-to-all, so that plan runs the other two only.
  planner::PlanRequest r = request("llama3.1-8b", "dgx-h100", 16, 16);
  r.model.seq_length = 32768;
  r.space.tensor = {2, 4};
  r.space.pipeline = {1};
  r.space.context = {1, 2, 4};
  r.space.micro_batch = {1};
  r.space.optimizer_sharding = {1};
  r.space.cp_comm_types = {models::CpCommType::kP2p, models::CpCommType::kA2a, models::CpCommType::kAllGather};
  const planner::PlanReport rep = planner::search(r);
  std::set<std::tuple<std::int64_t, std::int64_t, models::CpCommType>> seen;
  for (const planner::PlanResult& p : rep.plans) {
    seen.emplace(p.parallel.tensor_model_parallel_size, p.parallel.context_parallel_size, p.parallel.cp_comm_type);
  }
  CHECK(seen.count({2, 2, models::CpCommType::kA2a}) == 1);
  CHECK(seen.count({2, 2, models::CpCommType::kP2p}) == 1);
  CHECK(seen.count({2, 4, models::CpCommType::kA2a}) == 1);
  CHECK(seen.count({4, 4, models::CpCommType::kP2p}) == 1);
  CHECK(seen.count({4, 4, models::CpCommType::kA2a}) == 0);
  CHECK(seen.count({4, 4, models::CpCommType::kAllGather}) == 1);
  CHECK(seen.count({2, 1, models::CpCommType::kA2a}) == 0);  // no exchange without CP
  CHECK(seen.size() == 13);  // TP 2: CP 1, 2 x3, 4 x3; TP 4: CP 1, 2 x3, 4 x2
  const auto json = planner::plan_json(r, rep, rep.plans.size());
  std::set<std::string> types;
  for (const auto& p : json["plans"]) {
    if (p["parallelism"].contains("cp_comm_type")) types.insert(p["parallelism"]["cp_comm_type"].get<std::string>());
  }
  CHECK(types == std::set<std::string>{"a2a", "allgather", "p2p"});
  std::ostringstream csv;
  planner::write_plan_csv(rep, csv);
  CHECK(csv.str().find("cpu_offloading_num_layers,cp_comm_type") != std::string::npos);
  const std::string table = planner::plan_table(r, rep, rep.plans.size());
  CHECK(table.find("CPa: context parallelism by all-to-alls") != std::string::npos);
  CHECK(table.find("CPg: context parallelism by all-gathered K and V") != std::string::npos);
  // By default only the ring.
  r.space.cp_comm_types = {models::CpCommType::kP2p};
  for (const planner::PlanResult& p : planner::search(r).plans) CHECK(p.parallel.cp_comm_type == models::CpCommType::kP2p);
}

TEST_CASE("planner/search: a2a+p2p plans run the all-to-alls among a node's CP ranks and the ring across nodes") {
  // Llama-3.1 8B at 128K tokens on 32 H100 (8 per node): with TP 2 a node holds 4 CP ranks, with
  // TP 4 two; CP 2 fits in a node either way, which is the plain all-to-alls, not searched here.
  planner::PlanRequest r = request("llama3.1-8b", "dgx-h100", 32, 8);
  r.model.seq_length = 131072;
  r.space.tensor = {2, 4};
  r.space.pipeline = {1};
  r.space.context = {2, 8, 16};
  r.space.micro_batch = {1};
  r.space.optimizer_sharding = {1};
  r.space.cp_comm_types = {models::CpCommType::kA2aP2p};
  const planner::PlanReport rep = planner::search(r);
  std::set<std::tuple<std::int64_t, std::int64_t, std::vector<std::int64_t>>> seen;
  for (const planner::PlanResult& p : rep.plans) {
    CHECK(p.parallel.cp_comm_type == models::CpCommType::kA2aP2p);
    seen.emplace(p.parallel.tensor_model_parallel_size, p.parallel.context_parallel_size, p.parallel.hierarchical_context_parallel_sizes);
  }
  using Sizes = std::vector<std::int64_t>;
  CHECK(seen == std::set<std::tuple<std::int64_t, std::int64_t, Sizes>>{{2, 8, Sizes{4, 2}}, {2, 16, Sizes{4, 4}}, {4, 8, Sizes{2, 4}}});
  const auto json = planner::plan_json(r, rep, rep.plans.size());
  REQUIRE(!json["plans"].empty());
  CHECK(json["plans"][0]["parallelism"]["cp_comm_type"] == "a2a+p2p");
  CHECK(json["plans"][0]["parallelism"]["hierarchical_context_parallel_sizes"].size() == 2);
  const std::string table = planner::plan_table(r, rep, rep.plans.size());
  CHECK(table.find("CPh: all-to-alls among the CP ranks of a node, the ring across nodes") != std::string::npos);
  std::ostringstream csv;
  planner::write_plan_csv(rep, csv);
  CHECK(csv.str().find("cp_comm_type,hierarchical_context_parallel_sizes") != std::string::npos);
  CHECK(csv.str().find(",a2a+p2p,4 4") != std::string::npos);
}

TEST_CASE("planner/search: a recipe with NeMo 1's distributed_fused_adam keeps the plans that do not shard the optimizer") {
  planner::PlanRequest r = request("gpt3-7.5b", "dgx-a100-80gb", 64, 256);
  r.training.apex_distributed_adam = true;
  r.training.optimizer_state_16bit = true;
  r.training.grad_reduce_in_fp32 = false;
  r.space.pipeline = {1};
  const planner::PlanReport rep = planner::search(r);
  check_used_where_admitted(
      rep, [](const planner::PlanResult& p) { return p.training.apex_distributed_adam && p.training.optimizer_state_16bit; },
      [](const planner::PlanResult& p) { return p.parallel.use_distributed_optimizer; });
}

TEST_CASE("planner/search: a recipe with TP communication overlap keeps the plans that cannot use it") {
  // Transformer Engine's overlap needs TP > 1 with sequence parallelism inside a node; plans
  // without TP run without it instead of being refused.
  planner::PlanRequest r = request("gpt3-7.5b", "dgx-a100-80gb", 64, 256);
  r.training.tp_comm_overlap = true;
  r.space.tensor = {1, 2};
  r.space.pipeline = {1};
  check_used_where_admitted(
      planner::search(r), [](const planner::PlanResult& p) { return p.training.tp_comm_overlap; },
      [](const planner::PlanResult& p) { return p.parallel.tensor_model_parallel_size > 1; });
}

TEST_CASE("planner/search: a recipe with FP8 parameter gathers keeps the replicated-optimizer plans without them") {
  // Megatron gathers FP8 parameters only with a sharded optimizer: those plans gather them, the
  // replicated ones are kept, gathering nothing.
  planner::PlanRequest r = request("gpt3-7.5b", "dgx-h100", 64, 256);
  r.training.precision = models::Precision::kFp8;
  r.training.fp8_param_gather = true;
  r.space.tensor = {2};
  r.space.pipeline = {1};
  r.space.optimizer_sharding = {1, 0};
  check_used_where_admitted(
      planner::search(r), [](const planner::PlanResult& p) { return p.training.fp8_param_gather; },
      [](const planner::PlanResult& p) { return p.parallel.shards_optimizer(); });
}

TEST_CASE("planner/search: a recipe that gathers parameters beside the optimizer step keeps the plans that cannot") {
  // Megatron-LM allows overlap_param_gather_with_optimizer_step with the distributed optimizer's
  // overlapped gathers under the interleaved schedule only.
  planner::PlanRequest r = request("gpt3-7.5b", "dgx-h100", 64, 256);
  r.training.overlap_param_gather = true;
  r.training.overlap_param_gather_with_optimizer_step = true;
  r.space.tensor = {2};
  r.space.pipeline = {1, 2};
  r.space.virtual_stages = {1, 2};
  r.space.micro_batch = {1};
  r.space.optimizer_sharding = {1, 0};
  check_used_where_admitted(
      planner::search(r), [](const planner::PlanResult& p) { return p.training.overlap_param_gather_with_optimizer_step; },
      [](const planner::PlanResult& p) { return p.parallel.shards_optimizer() && p.parallel.virtual_pipeline_model_parallel_size > 1; });
}

TEST_CASE("planner/search: a recipe with the EP all-to-all overlap keeps the plans that cannot use it") {
  // Megatron-Core overlaps the all-to-alls only without pipelining or under the interleaved
  // schedule: 1F1B plans with pipeline stages run without it instead of being refused.
  planner::PlanRequest r = request("mixtral-8x7b", "dgx-h100", 32, 256);
  r.training.overlap_moe_expert_parallel_comm = true;
  r.training.delay_wgrad_compute = true;
  r.space.tensor = {1};
  r.space.pipeline = {1, 2};
  r.space.virtual_stages = {1, 2};
  r.space.expert = {8};
  r.space.micro_batch = {1};
  r.space.optimizer_sharding = {1};
  const planner::PlanReport rep = planner::search(r);
  planner::PlanRequest plain = r;
  plain.training.overlap_moe_expert_parallel_comm = plain.training.delay_wgrad_compute = false;
  CHECK(planner::search(plain).pruned == rep.pruned);  // no plan refused for the recipe
  // Not with full recomputation either (the least that fits may be full).
  const auto admits = [](const planner::PlanResult& p) {
    return (p.parallel.pipeline_model_parallel_size == 1 || p.parallel.virtual_pipeline_model_parallel_size > 1) &&
           p.training.recompute_granularity != models::RecomputeGranularity::kFull;
  };
  check_used_where_admitted(rep, [](const planner::PlanResult& p) { return p.training.overlap_moe_expert_parallel_comm; }, admits);
  check_used_where_admitted(rep, [](const planner::PlanResult& p) { return p.training.delay_wgrad_compute; }, admits);
  // The steady-state extrapolation holds for the combined schedule too.
  planner::PlanRequest exact = r;
  exact.exact = true;
  const planner::PlanReport whole = planner::search(exact);
  REQUIRE(whole.plans.size() == rep.plans.size());
  for (const planner::PlanResult& p : rep.plans) {
    for (const planner::PlanResult& q : whole.plans) {
      if (q.parallel.pipeline_model_parallel_size != p.parallel.pipeline_model_parallel_size ||
          q.parallel.virtual_pipeline_model_parallel_size != p.parallel.virtual_pipeline_model_parallel_size ||
          q.training.recompute_granularity != p.training.recompute_granularity) {
        continue;
      }
      CHECK(p.iteration_time_s == doctest::Approx(q.iteration_time_s).epsilon(0.02));
    }
  }
}

TEST_CASE("planner/search: extrapolating the steady state agrees with whole iterations") {
  planner::PlanRequest r = request("gpt3-7.5b", "dgx-a100-80gb", 64, 512);
  r.space.tensor = {2, 4};
  r.space.pipeline = {2, 4};
  r.space.micro_batch = {1, 2};
  const planner::PlanReport fast = planner::search(r);
  r.exact = true;
  const planner::PlanReport exact = planner::search(r);
  REQUIRE(fast.plans.size() == exact.plans.size());
  int extrapolated = 0;
  for (const planner::PlanResult& f : fast.plans) {
    // The same plan in the exact search.
    if (const planner::PlanResult* found = same_plan(exact, f)) {
      const planner::PlanResult& e = *found;
      CAPTURE(planner::describe_plan(f));
      CHECK(f.iteration_time_s == doctest::Approx(e.iteration_time_s).epsilon(0.005));
      CHECK(static_cast<double>(f.peak_bytes_per_gpu) == doctest::Approx(static_cast<double>(e.peak_bytes_per_gpu)).epsilon(0.005));
      // The parts of the time extrapolate with it (within 1% of the iteration).
      CHECK(std::abs(f.pipeline_bubble_s - e.pipeline_bubble_s) < 0.01 * e.iteration_time_s);
      CHECK(std::abs(f.exposed_communication_s - e.exposed_communication_s) < 0.01 * e.iteration_time_s);
      CHECK(e.exposed_communication_s > 0);
    }
    extrapolated += f.extrapolated ? 1 : 0;
  }
  CHECK(extrapolated > 0);
  // A found plan turned back into a scenario simulates to the same iteration (exact search).
  for (std::size_t i = 0; i < 3 && i < exact.plans.size(); ++i) {
    const config::Scenario sc = planner::scenario_of(r, exact.plans[i]);
    CHECK(sc.name == planner::describe_plan(exact.plans[i]));
    CHECK(report::simulate(sc, report::RunOptions{{}, false}).iteration_time_s == doctest::Approx(exact.plans[i].iteration_time_s).epsilon(1e-12));
  }
}

TEST_CASE("planner/search: a scenario's SM contention applies to every plan it ranks") {
  config::Scenario sc;
  sc.model = config::load_model("gpt3-1.7b");
  sc.cluster = config::load_cluster("dgx-a100-80gb", 4);
  sc.training.global_batch_size = 256;
  sc.simulation.sm_contention = true;
  CHECK(planner::request_of(sc).sm_contention);
  sc.simulation.sm_contention = false;
  CHECK(!planner::request_of(sc).sm_contention);
  sc.simulation.full = true;  // every caller of request_of is refused a full-fidelity scenario
  CHECK_THROWS_AS(planner::request_of(sc), InputError);

  planner::PlanRequest r = request("gpt3-1.7b", "dgx-a100-80gb", 32, 256);
  r.space.tensor = {1, 2};
  r.space.pipeline = {1, 2};
  r.space.micro_batch = {2, 4};
  r.exact = true;
  const planner::PlanReport free_sms = planner::search(r);
  r.sm_contention = true;
  const planner::PlanReport contended = planner::search(r);
  REQUIRE(free_sms.plans.size() == contended.plans.size());
  int slower = 0;
  for (const planner::PlanResult& c : contended.plans) {
    if (const planner::PlanResult* found = same_plan(free_sms, c)) {
      const planner::PlanResult& f = *found;
      CAPTURE(planner::describe_plan(c));
      // Kernels beside communication lose SMs: no plan gets faster, and those that overlap
      // gradient or parameter traffic with GEMMs get slower.
      CHECK(c.iteration_time_s >= f.iteration_time_s * (1 - 1e-12));
      if (c.iteration_time_s > f.iteration_time_s * 1.0001) ++slower;
    }
  }
  CHECK(slower > 0);
  // A ranked plan turned back into a scenario keeps the setting and simulates to its time.
  const config::Scenario best = planner::scenario_of(r, contended.plans.front());
  CHECK(best.simulation.sm_contention);
  CHECK(report::simulate(best, report::RunOptions{{}, false}).iteration_time_s ==
        doctest::Approx(contended.plans.front().iteration_time_s).epsilon(1e-12));
  const std::string json = planner::plan_json(r, contended, 5).dump();
  CHECK(json.find("\"sm_contention\":true") != std::string::npos);
  CHECK(planner::plan_table(r, contended, 5).find("simulation.sm_contention") != std::string::npos);
}

TEST_CASE("planner/search: same inputs, same output bytes, whatever the thread count") {
  planner::PlanRequest r = request("gpt3-1.7b", "dgx-a100-80gb", 32, 256);
  r.threads = 1;
  const auto a = planner::plan_json(r, planner::search(r), 50).dump();
  r.threads = 2;
  const auto b = planner::plan_json(r, planner::search(r), 50).dump();
  CHECK(a == b);
}

TEST_CASE("planner/deadline: the smallest GPU count that trains in time, and its curve") {
  planner::PlanRequest r = request("gpt3-1.7b", "dgx-a100-80gb", 8, 512);
  r.space.micro_batch = {1, 4};
  r.space.optimizer_sharding = {1};
  r.training.train_tokens = 3e11;
  // Find the time at 64 GPUs and ask for a bit less than the time at 32.
  planner::PlanRequest at32 = r;
  at32.gpu_counts = {32};
  const double days32 = *planner::search(at32).plans.front().time_to_train_days;
  r.deadline_days = days32 * 0.8;
  const planner::PlanReport rep = planner::search_deadline(r, 8, 128);
  REQUIRE(rep.deadline_gpus.has_value());
  CHECK(*rep.deadline_gpus > 32);
  CHECK(*rep.deadline_gpus % 8 == 0);
  // The count found meets the deadline and one node fewer does not.
  for (const planner::GpuCountResult& g : rep.per_gpu_count) {
    // Only counts that admit a valid plan are probed.
    CHECK(g.feasible > 0);
    if (!g.best) continue;
    if (g.gpus >= *rep.deadline_gpus) continue;
    CHECK(*g.best->time_to_train_days > *r.deadline_days);
  }
  std::ostringstream svg;
  planner::write_plan_curve_svg(r, rep, svg);
  CHECK(svg.str().find("<polyline class=\"curve\"") != std::string::npos);
  CHECK(svg.str().find("class=\"deadline\"") != std::string::npos);
}

TEST_CASE("planner/search: an offloading plan of a mixture-of-experts model runs without the EP all-to-all overlap") {
  // Qwen3-30B-A3B over 64 GB200 with EP 8, micro-batches of 4 x 8,192 tokens: needs full
  // recomputation to fit without offloading. The EP overlap is asked for, and trainsim does not
  // model it beside offloading: the offloading plan runs without it rather than being dropped.
  planner::PlanRequest r = request("qwen3-30b-a3b", "gb200-nvl72", 64, 256);
  r.model.seq_length = 8192;
  r.training.overlap_moe_expert_parallel_comm = true;
  r.space.tensor = {1};
  r.space.pipeline = {1};
  r.space.context = {1};
  r.space.expert = {8};
  r.space.micro_batch = {4};
  r.space.optimizer_sharding = {1};
  r.space.cpu_offloading = true;
  const planner::PlanReport rep = planner::search(r);
  const planner::PlanResult* offload = nullptr;
  for (const planner::PlanResult& p : rep.plans) {
    if (p.training.cpu_offload_layers > 0) offload = &p;
  }
  REQUIRE(offload != nullptr);
  CHECK_FALSE(offload->training.overlap_moe_expert_parallel_comm);
  CHECK(offload->training.recompute_granularity == models::RecomputeGranularity::kNone);
  CHECK(offload->peak_bytes_per_gpu <= r.cluster.gpu.memory.count());
}

TEST_CASE("planner/search: --cpu-offloading adds, beside recomputation, the fewest offloaded layers that fit") {
  // Llama 3.1 70B in FP8 over 64 GB200 with no model parallelism (ZeRO-3), micro-batches of 2 x
  // 8,192 tokens: Megatron-Bridge's recipe, which does not fit without recomputation or offloading.
  planner::PlanRequest r = request("llama3.1-70b", "gb200-nvl72", 64, 256);
  r.training.precision = models::Precision::kFp8;
  r.training.quant_recipe = models::QuantRecipe::kTensorwise;
  r.training.fp8_param_gather = true;
  r.space.tensor = {1};
  r.space.pipeline = {1};
  r.space.micro_batch = {2};
  r.space.optimizer_sharding = {3};
  const planner::PlanReport without = planner::search(r);
  for (const planner::PlanResult& p : without.plans) CHECK(p.training.cpu_offload_layers == 0);
  r.space.cpu_offloading = true;
  const planner::PlanReport rep = planner::search(r);
  CHECK(rep.considered == without.considered + 1);
  CHECK(rep.considered == rep.pruned_total() + static_cast<std::int64_t>(rep.plans.size()));
  const planner::PlanResult* offload = nullptr;
  const planner::PlanResult* recompute = nullptr;
  for (const planner::PlanResult& p : rep.plans) {
    (p.training.cpu_offload_layers > 0 ? offload : recompute) = &p;
  }
  REQUIRE(offload != nullptr);
  REQUIRE(recompute != nullptr);
  CHECK(offload->training.recompute_granularity == models::RecomputeGranularity::kNone);
  CHECK(recompute->training.recompute_granularity != models::RecomputeGranularity::kNone);
  CHECK(offload->peak_bytes_per_gpu <= r.cluster.gpu.memory.count());
  // The fewest layers that fit: with one fewer the simulated peak (or the estimate) does not.
  config::Scenario s = planner::scenario_of(r, *offload);
  CHECK(s.training.cpu_offload_layers == offload->training.cpu_offload_layers);
  s.training.cpu_offload_layers -= 1;
  const models::Workload w = models::describe(s.model, s.parallel, s.training, s.num_gpus(), s.target_gpu());
  CHECK((models::estimated_peak_bytes(w, s.parallel, s.training) > r.cluster.gpu.memory.count() ||
         !report::simulate(s).fits));
  // Over NVLink-C2C the copies hide: offloading beats recomputing the layers.
  CHECK(offload->tokens_per_s > recompute->tokens_per_s);
  CHECK(planner::describe_plan(*offload).find("none offload " + std::to_string(offload->training.cpu_offload_layers)) != std::string::npos);
  CHECK(planner::plan_table(r, rep, 10).find("offload " + std::to_string(offload->training.cpu_offload_layers)) != std::string::npos);
  std::ostringstream csv;
  planner::write_plan_csv(rep, csv);
  CHECK(csv.str().find(",cpu_offloading_num_layers") != std::string::npos);
  const auto j = planner::plan_json(r, rep, 10);
  bool found = false;
  for (const auto& p : j["plans"]) found = found || (p["training"].contains("cpu_offloading_num_layers"));
  CHECK(found);
}

TEST_CASE("planner/search: an empty result says whether memory or Megatron's rules left no plan") {
  // Tensor parallelism 3 cannot split Llama 3.1 8B's 32 heads: every plan is invalid, none was
  // pruned for memory, and the table must not ask for more GPUs or recomputation.
  planner::PlanRequest r = request("llama3.1-8b", "dgx-h100", 8, 64);
  r.space.tensor = {3};
  const planner::PlanReport invalid = planner::search(r);
  REQUIRE(invalid.plans.empty());
  CHECK(invalid.pruned_for_memory() == 0);
  CHECK(invalid.pruned_total() == invalid.considered);
  const std::string table = planner::plan_table(r, invalid, 10);
  CHECK(table.find("no valid plan: every combination breaks a Megatron rule") != std::string::npos);
  CHECK(table.find("no plan fits") == std::string::npos);
  // It names one rejected combination and the rule it broke, in the text and the JSON.
  CHECK(invalid.first_invalid == "8 GPUs, TP 3 PP 1 mbs 1: parallelism.tensor_model_parallel_size: tensor x pipeline x "
                                 "context parallel size (3 x 1 x 1 = 3) must divide the GPU count (8)");
  CHECK(table.find("(for example " + invalid.first_invalid + ")") != std::string::npos);
  CHECK(planner::plan_json(r, invalid, 10)["first_invalid"] == invalid.first_invalid);
  // Llama 3.1 405B on one node: valid plans exist, and none fits in 8 x 80 GB.
  const planner::PlanReport too_big = planner::search(request("llama3.1-405b", "dgx-h100", 8, 64));
  REQUIRE(too_big.plans.empty());
  CHECK(too_big.pruned_for_memory() > 0);
  CHECK(planner::plan_table(request("llama3.1-405b", "dgx-h100", 8, 64), too_big, 10).find("no plan fits: more GPUs") != std::string::npos);
  // A batch at the input limit breaks no divisibility rule; the example says what it breaks.
  r = request("llama3.1-8b", "dgx-h100", 8, config::kMaxGlobalBatchSize);
  const planner::PlanReport huge = planner::search(r);
  REQUIRE(huge.plans.empty());
  CHECK(huge.first_invalid.find("training.global_batch_size: ") != std::string::npos);
  CHECK(huge.first_invalid.find("micro-batches per iteration") != std::string::npos);
  // Those combinations are counted as beyond trainsim's limits, not as broken Megatron rules.
  CHECK(huge.pruned_for_limits() > 0);
  CHECK(huge.pruned_for_memory() == 0);
  CHECK(invalid.pruned_for_limits() == 0);
  CHECK(planner::plan_table(r, huge, 10).find("goes beyond what trainsim simulates") != std::string::npos);
  // The request's simulation.max_events bounds every plan, as a scenario's does.
  r = request("llama3.1-8b", "dgx-h100", 8, 64);
  r.space.tensor = {2};
  r.space.pipeline = {1};
  REQUIRE_FALSE(planner::search(r).plans.empty());
  r.max_events = 1000;
  const planner::PlanReport capped = planner::search(r);
  CHECK(capped.plans.empty());
  CHECK(capped.pruned_for_limits() == capped.considered);
  CHECK(capped.first_invalid.find("more than simulation.max_events (1000)") != std::string::npos);
}

TEST_CASE("planner/deadline: a smaller count than the walk's meets the deadline when time to train does not fall with GPUs") {
  // GPT 1.7B at a global batch of 96 on DGX A100: 96 GPUs run data parallelism 96, while 128 need
  // TP 4 (the batch has no data-parallel size 128), so 128 GPUs train more slowly than 96. A
  // deadline just above 96's time: the doubling walk (8, 16, 32, 64, 128 fail; 256 meets) and
  // bisection step over 96, and the check of the skipped counts finds it.
  planner::PlanRequest r = request("gpt3-1.7b", "dgx-a100-80gb", 8, 96);
  r.space.micro_batch = {1};
  r.space.optimizer_sharding = {1};
  auto days_at = [&](std::int64_t gpus) {
    planner::PlanRequest one = r;
    one.gpu_counts = {gpus};
    return *planner::search(one).plans.front().time_to_train_days;
  };
  const double d96 = days_at(96), d128 = days_at(128);
  REQUIRE(d128 > d96 * 1.05);
  r.deadline_days = d96 * 1.001;
  const planner::PlanReport rep = planner::search_deadline(r, 8, 512);
  REQUIRE(rep.deadline_gpus.has_value());
  CHECK(*rep.deadline_gpus == 96);
  // Exact: every count below the answer that admits a plan was searched and missed the deadline,
  // or cannot meet it by the lower bound.
  std::map<std::int64_t, double> probed;
  for (const planner::GpuCountResult& g : rep.per_gpu_count) {
    if (g.best) probed[g.gpus] = *g.best->time_to_train_days;
  }
  CHECK(probed.count(96) == 1);
  CHECK(probed.count(128) == 1);
  // The curve labels the answer's GPU count, and leaves out counts that would crowd the axis.
  std::ostringstream svg;
  planner::write_plan_curve_svg(r, rep, svg);
  const std::string text = svg.str();
  CHECK(text.find("\">96</text>") != std::string::npos);
  std::size_t labels = 0;
  for (const planner::GpuCountResult& g : rep.per_gpu_count) {
    if (text.find("\">" + std::to_string(g.gpus) + "</text>") != std::string::npos) ++labels;
  }
  CHECK(labels < rep.per_gpu_count.size());
  CHECK(labels >= rep.per_gpu_count.size() / 2);
  for (std::int64_t n : planner::admitted_gpu_counts(r, 8, 512)) {
    if (n >= 96) break;
    CAPTURE(n);
    if (probed.count(n)) {
      CHECK(probed[n] > *r.deadline_days);
    } else {
      CHECK(*planner::time_to_train_lower_bound_days(r, n) > *r.deadline_days);
    }
  }
  // Over 64..144 the walk probes 64, 128 and 144 (the range's end) and none meets the deadline;
  // the check of the skipped counts still finds 96.
  const planner::PlanReport narrow = planner::search_deadline(r, 64, 144);
  REQUIRE(narrow.deadline_gpus.has_value());
  CHECK(*narrow.deadline_gpus == 96);
}

TEST_CASE("planner/deadline: the lower bound on time to train holds for every plan found") {
  // Dense BF16 and FP8 plans, with and without recomputation, over several GPU counts: no plan
  // trains faster than the bound, and the bound is not vacuous (within 4x of the best plan).
  std::vector<planner::PlanRequest> requests;
  {
    planner::PlanRequest r = request("gpt3-1.7b", "dgx-a100-80gb", 8, 96);
    r.gpu_counts = {8, 32, 96, 128};
    requests.push_back(r);
  }
  {
    planner::PlanRequest r = request("llama3.1-8b", "dgx-h100", 8, 64);
    r.training.precision = models::Precision::kFp8;
    r.model.seq_length = 8192;
    r.space.micro_batch = {1};
    r.gpu_counts = {8, 64};
    requests.push_back(r);
  }
  for (const planner::PlanRequest& r : requests) {
    const planner::PlanReport rep = planner::search(r);
    REQUIRE(!rep.plans.empty());
    for (const planner::PlanResult& p : rep.plans) {
      CAPTURE(planner::describe_plan(p));
      CHECK(*p.time_to_train_days >= *planner::time_to_train_lower_bound_days(r, p.gpus));
    }
    for (const planner::GpuCountResult& g : rep.per_gpu_count) {
      if (g.best) CHECK(*g.best->time_to_train_days < 4 * *planner::time_to_train_lower_bound_days(r, g.gpus));
    }
  }
  planner::PlanRequest no_tokens = request("gpt3-1.7b", "dgx-a100-80gb", 8, 96);
  no_tokens.training.train_tokens.reset();
  CHECK(!planner::time_to_train_lower_bound_days(no_tokens, 8).has_value());
}

TEST_CASE("planner/deadline: the GPU counts walked are exactly those on which some plan is valid") {
  // The deadline search checks only tp x pp x cp x (a divisor of the batch) GPUs; every other
  // whole-node count must be one where the search finds every combination invalid.
  planner::PlanRequest r = request("gpt3-1.7b", "dgx-h100", 8, 48);
  r.space.tensor = {1, 2};
  r.space.pipeline = {1, 2, 3};
  r.space.context = {1};
  r.space.micro_batch = {1, 2};
  r.space.recompute = {models::RecomputeGranularity::kFull};
  r.space.optimizer_sharding = {1};
  const std::vector<std::int64_t> counts = planner::admitted_gpu_counts(r, 8, 1024);
  std::vector<std::int64_t> brute;
  for (std::int64_t g = 8; g <= 1024; g += 8) {
    planner::PlanRequest one = r;
    one.gpu_counts = {g};
    const planner::PlanReport rep = planner::search(one);
    std::int64_t invalid = 0;
    for (const auto& [why, n] : rep.pruned) {
      if (why.rfind("invalid", 0) == 0) invalid = n;
    }
    if (invalid < rep.considered) brute.push_back(g);
  }
  CHECK(counts == brute);
  CHECK(counts.size() >= 5);
  CHECK(counts.back() == 288);  // TP 2 x PP 3 x DP 48
}

TEST_CASE("planner/compare: clusters ranked by cost, by time to train or by tokens/s, the deadline first") {
  // GPT 1.7B on A100 80GB and H100 nodes, searched alike over 8..64 GPUs for 30 days.
  std::vector<planner::PlanRequest> requests;
  for (const char* cluster : {"dgx-a100-80gb", "dgx-h100"}) {
    planner::PlanRequest r = request("gpt3-1.7b", cluster, 8, 512);
    r.space.micro_batch = {4};
    r.space.optimizer_sharding = {1};
    r.training.train_tokens = 3e11;
    r.deadline_days = 30;
    requests.push_back(r);
  }
  std::vector<planner::PlanReport> reports;
  for (const planner::PlanRequest& r : requests) reports.push_back(planner::search_deadline(r, 8, 64));
  const auto searches = [&]() {
    return std::vector<planner::ClusterSearch>{{"dgx-a100-80gb", &requests[0], &reports[0]}, {"dgx-h100", &requests[1], &reports[1]}};
  };
  // The headline plan is the best one at the smallest count that meets the deadline.
  for (std::size_t i = 0; i < 2; ++i) {
    REQUIRE(reports[i].deadline_gpus.has_value());
    const planner::PlanResult* h = planner::headline_plan(requests[i], reports[i]);
    REQUIRE(h != nullptr);
    CHECK(h->gpus == *reports[i].deadline_gpus);
    CHECK(*h->time_to_train_days <= 30);
  }
  const double a100_days = *planner::headline_plan(requests[0], reports[0])->time_to_train_days;
  const double h100_days = *planner::headline_plan(requests[1], reports[1])->time_to_train_days;
  // Unpriced: by the time to train.
  planner::ComparisonOrder o = planner::comparison_order(searches());
  CHECK(o.by == "time_to_train_days");
  CHECK(o.order == (a100_days <= h100_days ? std::vector<std::size_t>{0, 1} : std::vector<std::size_t>{1, 0}));
  // Priced: by the cost, which follows the price. A free A100 is first, a free H100 too.
  for (const auto& [a100_price, h100_price, first] : {std::tuple{0.0, 1.0, std::size_t{0}}, std::tuple{1.0, 0.0, std::size_t{1}}}) {
    requests[0].price_per_gpu_hour = a100_price;
    requests[1].price_per_gpu_hour = h100_price;
    for (std::size_t i = 0; i < 2; ++i) reports[i] = planner::search_deadline(requests[i], 8, 64);
    o = planner::comparison_order(searches());
    CHECK(o.by == "cost");
    CHECK(o.order.front() == first);
  }
  // A deadline only one cluster meets puts that one first whatever its cost.
  requests[0].price_per_gpu_hour = 0.0;
  requests[1].price_per_gpu_hour = 1e6;
  const double between = std::sqrt(a100_days * h100_days);
  const bool h100_faster = h100_days < a100_days;
  for (std::size_t i = 0; i < 2; ++i) {
    requests[i].deadline_days = between;
    requests[i].gpu_counts = {*reports[i].deadline_gpus};
  }
  for (std::size_t i = 0; i < 2; ++i) reports[i] = planner::search(requests[i]);
  // At one GPU count the search gives that count as the deadline's when its best plan is in time.
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(reports[i].deadline_gpus.has_value() == (*reports[i].plans.front().time_to_train_days <= between));
  }
  REQUIRE(reports[0].deadline_gpus.has_value() != reports[1].deadline_gpus.has_value());
  o = planner::comparison_order(searches());
  CHECK(o.order.front() == (h100_faster ? 1u : 0u));
  // JSON: each cluster's own search, then the ranking with the headline plans.
  const nlohmann::ordered_json j = planner::comparison_json(searches(), 3);
  REQUIRE(j["clusters"].size() == 2);
  CHECK(j["clusters"][0]["cluster"] == "dgx-a100-80gb");
  CHECK(j["clusters"][1]["gpu"] == requests[1].cluster.gpu.name);
  CHECK(j["clusters"][1]["price_per_gpu_hour"] == 1e6);
  CHECK(j["clusters"][0]["plans"].size() == std::min<std::size_t>(3, reports[0].plans.size()));
  CHECK(j["comparison"]["by"] == "cost");
  CHECK(j["comparison"]["ranking"][0]["meets_deadline"] == true);
  CHECK(j["comparison"]["ranking"][1]["meets_deadline"] == false);
  CHECK(j["comparison"]["ranking"][0]["plan"]["gpus"].get<std::int64_t>() > 0);
  // Text: a row per cluster, the missed deadline explained.
  const std::string table = planner::comparison_table(searches());
  CHECK(table.find("hardware compared") != std::string::npos);
  CHECK(table.find("cheapest first") != std::string::npos);
  CHECK(table.find("missed") != std::string::npos);
  CHECK(table.find(requests[0].cluster.gpu.name) != std::string::npos);
  // CSV: every cluster's rows, named in a first column.
  std::ostringstream csv;
  planner::write_comparison_csv(searches(), csv);
  CHECK(csv.str().rfind("cluster,rank,gpus,", 0) == 0);
  CHECK(csv.str().find("\ndgx-a100-80gb,1,") != std::string::npos);
  CHECK(csv.str().find("\ndgx-h100,1,") != std::string::npos);
  // SVG: a curve and a legend entry per cluster.
  std::ostringstream svg;
  planner::write_comparison_curve_svg(searches(), svg);
  std::size_t curves = 0, legends = 0;
  for (std::size_t at = svg.str().find("class=\"curve\""); at != std::string::npos; at = svg.str().find("class=\"curve\"", at + 1)) ++curves;
  for (std::size_t at = svg.str().find("class=\"legend\""); at != std::string::npos; at = svg.str().find("class=\"legend\"", at + 1)) ++legends;
  CHECK(curves == 2);
  CHECK(legends == 2);
  // No feasible plan: ranked last, said so.
  planner::PlanReport none;
  const std::vector<planner::ClusterSearch> with_none{{"empty", &requests[0], &none}, {"dgx-h100", &requests[1], &reports[1]}};
  CHECK(planner::comparison_order(with_none).order == std::vector<std::size_t>{1, 0});
  CHECK(planner::comparison_table(with_none).find("no feasible plan") != std::string::npos);
}
