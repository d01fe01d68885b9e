// Context, expert, ZeRO and overlap features of the lowering: the task graph has the structure
// Megatron-Core / Transformer Engine execute, symmetric and full fidelity agree, no schedule
// deadlocks, and each knob moves the numbers the right way.

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "config/scenario.h"
#include "models/flop_count.h"
#include "models/graph_vocabulary.h"
#include "models/lowering.h"
#include "models/memory_model.h"
#include "models/stage_builder.h"
#include "report/simulation.h"
#include "report/summary.h"
#include "report/timeline.h"
#include "tests/scenario_helpers.h"
#include "sim/engine.h"
#include "topologies/compute_model.h"

using namespace trainsim;

namespace {

const std::string kLlama = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/llama3.1-8b-interleaved-h100.json";
const std::string kGpt = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-7.5b-tp4-pp2-a100.json";


// A small Mixtral: 8 layers on 2 DGX H100 nodes, TP 2, PP 2, EP 4, distributed optimizer.
const std::vector<std::string> kMoe = {
    "model={\"preset\": \"mixtral-8x7b\", \"num_layers\": 8}",
    "parallelism={\"tensor_model_parallel_size\": 2, \"pipeline_model_parallel_size\": 2, \"expert_model_parallel_size\": 4, "
    "\"sequence_parallel\": true, \"use_distributed_optimizer\": true}",
    "training={\"micro_batch_size\": 1, \"global_batch_size\": 32, \"overlap_param_gather\": true}",
    "cluster={\"preset\": \"dgx-h100\", \"num_nodes\": 2}"};

// Mixtral's shape with DeepSeek-V3's latent attention (q rank 1,536, kv rank 512, heads of
// 128 + 64 for scores and 128 for values), on kMoe's plan.
const std::vector<std::string> kMla = {
    "model={\"preset\": \"mixtral-8x7b\", \"num_layers\": 8, \"num_query_groups\": 32, \"multi_latent_attention\": true, \"q_lora_rank\": 1536, "
    "\"kv_lora_rank\": 512, \"qk_head_dim\": 128, \"qk_pos_emb_head_dim\": 64, \"v_head_dim\": 128}",
    "parallelism={\"tensor_model_parallel_size\": 2, \"pipeline_model_parallel_size\": 2, \"expert_model_parallel_size\": 4, "
    "\"sequence_parallel\": true, \"use_distributed_optimizer\": true}",
    "training={\"micro_batch_size\": 1, \"global_batch_size\": 32, \"overlap_param_gather\": true}",
    "cluster={\"preset\": \"dgx-h100\", \"num_nodes\": 2}"};

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// The task graphs of `file` with `overrides`, lowered for the scenario's GPU.
models::Workload lowered(const std::string& file, const std::vector<std::string>& overrides) {
  const config::Scenario s = config::load_scenario(file, overrides);
  return models::lower(s.model, s.parallel, s.training, s.num_gpus(), s.target_gpu());
}

// Tasks of stage `cls` whose name is `name`.
std::vector<const sim::Task*> tasks_named(const models::Workload& w, std::uint32_t cls, const std::string& name) {
  std::vector<const sim::Task*> out;
  const sim::RankClass& rc = w.graph.rank_class(cls);
  for (const sim::Task& t : rc.tasks) {
    if (w.graph.name(t.name) == name) out.push_back(&t);
  }
  return out;
}

std::int64_t collective_bytes(const models::Workload& w, std::uint32_t cls, const sim::Task& t) {
  return w.graph.rank_class(cls).comm_ops[t.payload].bytes.count();
}

std::int64_t transfer_bytes(const models::Workload& w, std::uint32_t cls, const sim::Task& t) {
  return w.graph.rank_class(cls).transfers[t.payload].bytes.count();
}

// The kernel of rank class 0's first task named `name` (there must be one).
sim::Kernel kernel(const models::Workload& w, const std::string& name) {
  const auto t = tasks_named(w, 0, name);
  REQUIRE(!t.empty());
  return w.graph.rank_class(0).kernels[t.front()->payload];
}

// The input error loading `file` with `overrides` gives, or "" when it loads.
std::string load_error(const std::string& file, const std::vector<std::string>& overrides) {
  try {
    config::load_scenario(file, overrides);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

void check_fidelities_agree(const std::string& file, const std::vector<std::string>& overrides) {
  const report::RunResult sym = tests::simulate_file(file, overrides);
  const report::RunResult full = tests::simulate_file(file, with(overrides, {"simulation.fidelity=\"full\""}));
  CHECK(full.engine.ranks.size() > sym.engine.ranks.size());
  CHECK(sym.iteration_time_s == full.iteration_time_s);
  CHECK(sym.peak_bytes_per_gpu == full.peak_bytes_per_gpu);
}

}  // namespace

TEST_CASE("models/parallelism: symmetric and full fidelity agree for CP, EP, ZeRO-3 and the overlap options") {
  SUBCASE("context parallelism 2 with sequence parallelism") {
    check_fidelities_agree(kLlama, {"parallelism.context_parallel_size=2", "parallelism.virtual_pipeline_model_parallel_size=1",
                                    "training.pipeline_schedule=\"1f1b\""});
  }
  SUBCASE("tensor-parallel communication overlap (userbuffers ring exchange)") {
    check_fidelities_agree(kLlama, {"training.tp_comm_overlap=true"});
  }
  SUBCASE("overlap_p2p_comm on the interleaved schedule") { check_fidelities_agree(kLlama, {"training.overlap_p2p_comm=true"}); }
  SUBCASE("FP8") { check_fidelities_agree(kLlama, {"training.precision=\"fp8\""}); }
  SUBCASE("CPU offloading, both Transformer Engine schedulers") {
    const std::vector<std::string> offload = {"parallelism.pipeline_model_parallel_size=1", "parallelism.virtual_pipeline_model_parallel_size=1",
                                              "training.pipeline_schedule=\"1f1b\"", "training.cpu_offloading=true",
                                              "training.cpu_offloading_num_layers=20"};
    check_fidelities_agree(kLlama, offload);
    check_fidelities_agree(kLlama, with(offload, {"training.cpu_offloading_v1=true"}));
  }
  SUBCASE("expert parallelism 4 with expert tensor parallelism 2") { check_fidelities_agree(kGpt, kMoe); }
  SUBCASE("expert parallelism 4 without expert tensor parallelism") {
    check_fidelities_agree(kGpt, with(kMoe, {"parallelism.expert_tensor_parallel_size=1"}));
  }
  SUBCASE("shared experts beside the routed ones") {
    check_fidelities_agree(kGpt, with(kMoe, {"model.moe_shared_expert_intermediate_size=4096"}));
  }
  SUBCASE("dense layers among MoE ones (moe_layer_freq)") {
    check_fidelities_agree(kGpt, with(kMoe, {"model.moe_layer_freq=[0, 1, 1, 0, 1, 1, 1, 1]"}));
  }
  SUBCASE("flex dispatcher (DeepEP) with group-limited routing, the EP group across both nodes") {
    check_fidelities_agree(kGpt, with(kMoe, {"model.num_experts=16", "model.moe_router_num_groups=4", "model.moe_router_group_topk=2",
                                             "parallelism.tensor_model_parallel_size=1", "parallelism.pipeline_model_parallel_size=1",
                                             "parallelism.expert_model_parallel_size=16", "parallelism.sequence_parallel=false",
                                             "training.moe_token_dispatcher_type=\"flex\""}));
  }
  SUBCASE("recompute_modules mlp and moe (dense and MoE layers checkpointed)") {
    check_fidelities_agree(kGpt, with(kMoe, {"model.moe_layer_freq=[0, 1, 1, 0, 1, 1, 1, 1]", "training.recompute_granularity=\"selective\"",
                                             "training.recompute_modules=[\"mlp\", \"moe\"]"}));
  }
  SUBCASE("multi-head latent attention") { check_fidelities_agree(kGpt, kMla); }
  SUBCASE("multi-head latent attention with context parallelism and FP8") {
    check_fidelities_agree(kGpt, with(kMla, {"parallelism.context_parallel_size=2", "training.precision=\"fp8\""}));
  }
  SUBCASE("expert parallelism folded over context parallelism") {
    check_fidelities_agree(kGpt, with(kMoe, {"parallelism.context_parallel_size=2"}));
  }
  SUBCASE("ZeRO-3 with pipeline parallelism and full recomputation") {
    check_fidelities_agree(kGpt, {"parallelism.zero_stage=3", "training.recompute_granularity=\"full\"",
                                  "training.recompute_num_layers=3"});
  }
  SUBCASE("ZeRO-2") { check_fidelities_agree(kGpt, {"parallelism.zero_stage=2"}); }
  SUBCASE("multi-token prediction on latent attention and experts, untied embeddings") {
    check_fidelities_agree(kGpt, with(kMla, {"model.mtp_num_layers=2"}));
  }
  SUBCASE("multi-token prediction placed by a pipeline layout, interleaved") {
    check_fidelities_agree(kLlama, {"model.mtp_num_layers=1", "parallelism.pipeline_model_parallel_layout=\"Et*8|t*8|t*8|t*8mL\""});
  }
  SUBCASE("multi-token prediction with full recomputation, FP8, interleaving and tied embeddings") {
    check_fidelities_agree(kLlama, {"model.mtp_num_layers=1", "model.untie_embeddings_and_output_weights=false",
                                    "training.precision=\"fp8\"", "training.recompute_granularity=\"full\"",
                                    "training.recompute_num_layers=1"});
  }
}

TEST_CASE("models/parallelism: multi-token prediction runs on the last stage, which holds and syncs its embedding") {
  const std::vector<std::string> mtp = with(kMla, {"model.mtp_num_layers=2"});
  const config::Scenario base = config::load_scenario(kGpt, kMla);
  const config::Scenario s = config::load_scenario(kGpt, mtp);
  const models::Workload w0 = models::lower(base.model, base.parallel, base.training, base.num_gpus());
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const std::uint32_t first = 0, last = static_cast<std::uint32_t>(w.graph.num_classes() - 1);
  // Per micro-batch and module: the projection, the logits, and the shifted tokens' lookup.
  CHECK(tasks_named(w, last, "mtp_eh_proj").size() == static_cast<std::size_t>(2 * w.microbatches));
  CHECK(tasks_named(w, last, "mtp_logits").size() == static_cast<std::size_t>(2 * w.microbatches));
  CHECK(tasks_named(w, last, "mtp_embedding_bwd").size() == static_cast<std::size_t>(2 * w.microbatches));
  CHECK(tasks_named(w, first, "mtp_eh_proj").empty());
  // The eh_proj GEMM reads the 2h concatenation and writes h / TP.
  const sim::Task* proj = tasks_named(w, last, "mtp_eh_proj").front();
  const sim::Kernel& k = w.graph.rank_class(last).kernels[proj->payload];
  CHECK(k.k == 2 * s.model.hidden_size);
  CHECK(k.n == s.model.hidden_size / s.parallel.tensor_model_parallel_size);
  // The last stage holds the modules and, with untied embeddings, a copy of the word embedding,
  // whose gradient both stages sum (Megatron's embedding group).
  const models::StageParameters extra = models::mtp_params(s.model, s.parallel, s.training, w.dims);
  CHECK(w.stages.back().params.dense == w0.stages.back().params.dense + extra.dense);
  CHECK(w.stages.back().params.expert == w0.stages.back().params.expert + extra.expert);
  CHECK(extra.dense > models::embedding_params(s.model, w.dims));
  CHECK(w.stages.front().params.total() == w0.stages.front().params.total());
  CHECK(tasks_named(w0, first, "embedding_grad_all_reduce").empty());
  CHECK(tasks_named(w, first, "embedding_grad_all_reduce").size() == 1);
  CHECK(tasks_named(w, last, "embedding_grad_all_reduce").size() == 1);
  // More work and memory on the last stage, the same FLOPs per module as Megatron counts.
  const report::RunResult r0 = tests::simulate_file(kGpt, kMla);
  const report::RunResult r = tests::simulate_file(kGpt, mtp);
  CHECK(r.iteration_time_s > r0.iteration_time_s);
  CHECK(r.stages.back().peak_bytes > r0.stages.back().peak_bytes);
  CHECK(r.stages.front().peak_bytes == r0.stages.front().peak_bytes);
  CHECK(w.flops.model > w0.flops.model);
  // The cheap estimate the planner prunes with stays near the simulated peak, also under
  // interleaving, where the last stage's output chunk holds one micro-batch at a time.
  CHECK(static_cast<double>(models::estimated_peak_bytes(w, s.parallel, s.training)) ==
        doctest::Approx(static_cast<double>(r.peak_bytes_per_gpu)).epsilon(0.1));
  for (const char* modules : {"model.mtp_num_layers=1", "model.mtp_num_layers=4"}) {
    CAPTURE(modules);
    const config::Scenario li = config::load_scenario(kLlama, {modules});
    const models::Workload wl = models::describe(li.model, li.parallel, li.training, li.num_gpus());
    const report::RunResult rl = tests::simulate_file(kLlama, {modules});
    CHECK(static_cast<double>(models::estimated_peak_bytes(wl, li.parallel, li.training)) ==
          doctest::Approx(static_cast<double>(rl.peak_bytes_per_gpu)).epsilon(0.1));
  }
}

TEST_CASE("models/parallelism: the quick memory estimate follows the simulated peak where its phases differ") {
  // The planner prunes with the estimate: too high drops plans that fit, too low simulates plans
  // that do not. Each case puts the peak in a different phase of the iteration.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      // Full recomputation with large logits: the recomputed layer and the output layer's
      // activations never coexist.
      {kGpt,
       {"parallelism.pipeline_model_parallel_size=1", "training.recompute_granularity=full", "training.attention_kernel=unfused",
        "training.micro_batch_size=8"}},
      // ZeRO-3: a layer's gathered parameters, the next one's and its full gradient.
      {kGpt,
       {"parallelism={\"tensor_model_parallel_size\": 1, \"pipeline_model_parallel_size\": 1, \"zero_stage\": 3}",
        "training.recompute_granularity=full", "training.grad_reduce_in_fp32=false"}},
      // The embedding and the loss counted as layers: the first and last stages' chunks differ.
      {kLlama,
       {"model.num_layers=30", "parallelism.account_for_embedding_in_pipeline_split=true",
        "parallelism.account_for_loss_in_pipeline_split=true"}},
      // A layout whose last chunk holds only the loss: the most held comes at a forward of the
      // first chunk, without the output layer's activations.
      {kLlama, {"parallelism.pipeline_model_parallel_layout=\"E|t*16|t*16|L\""}},
      // A deep pipeline with 16-bit gradients and little in flight: the optimizer's fp32 copies.
      {kGpt,
       {"parallelism.pipeline_model_parallel_size=4", "training.precision=fp16", "training.grad_reduce_in_fp32=false",
        "training.global_batch_size=8", "training.recompute_granularity=full"}},
  };
  for (const auto& c : cases) {
    const std::string& file = c.first;
    const std::vector<std::string>& overrides = c.second;
    CAPTURE(overrides.front());
    const config::Scenario s = config::load_scenario(file, overrides);
    const models::Workload w = models::describe(s.model, s.parallel, s.training, s.num_gpus(), s.target_gpu());
    const report::RunResult r = tests::simulate_file(file, overrides);
    CHECK(static_cast<double>(models::estimated_peak_bytes(w, s.parallel, s.training)) ==
          doctest::Approx(static_cast<double>(r.peak_bytes_per_gpu)).epsilon(0.03));
  }
}

TEST_CASE("models/parallelism: no schedule deadlocks, with or without p2p overlap, on real links") {
  // Pipeline sizes, virtual stages, micro-batch counts and group sizes around the edge cases of
  // Megatron's interleaved schedule (all micro-batches in warm-up, uneven last group).
  struct Case {
    const char* schedule;
    int pp, vp, microbatches, group;
    bool overlap;
  };
  const Case cases[] = {{"gpipe", 4, 1, 4, 0, false},       {"1f1b", 4, 1, 2, 0, false},        {"1f1b", 4, 1, 12, 0, false},
                        {"interleaved", 2, 2, 16, 0, true}, {"interleaved", 2, 3, 8, 0, true},  {"interleaved", 2, 2, 11, 3, false},
                        {"interleaved", 2, 2, 11, 3, true}, {"interleaved", 2, 2, 2, 0, true},  {"interleaved", 2, 6, 12, 5, true},
                        {"interleaved", 4, 3, 8, 0, true},  {"interleaved", 4, 2, 12, 6, false}};
  for (const Case& c : cases) {
    CAPTURE(c.schedule);
    CAPTURE(c.pp);
    CAPTURE(c.vp);
    CAPTURE(c.microbatches);
    CAPTURE(c.group);
    CAPTURE(c.overlap);
    const int dp = 8 / (2 * c.pp);  // one DGX node, TP 2
    std::vector<std::string> o = {"model.num_layers=24", std::string("training.pipeline_schedule=\"") + c.schedule + "\"",
                                  "parallelism.pipeline_model_parallel_size=" + std::to_string(c.pp),
                                  "parallelism.virtual_pipeline_model_parallel_size=" + std::to_string(c.vp),
                                  "training.global_batch_size=" + std::to_string(c.microbatches * dp),
                                  std::string("training.overlap_p2p_comm=") + (c.overlap ? "true" : "false"),
                                  "cluster.num_nodes=1"};
    if (c.group > 0) o.push_back("parallelism.microbatch_group_size_per_vp_stage=" + std::to_string(c.group));
    report::RunResult r;
    CHECK_NOTHROW(r = tests::simulate_file(kLlama, o));
    CHECK(r.iteration_time_s > 0);
    CHECK_NOTHROW(r = tests::simulate_file(kLlama, with(o, {"simulation.fidelity=\"full\""})));
  }
}

TEST_CASE("models/parallelism: context parallelism is Transformer Engine's load-balanced p2p ring") {
  const config::Scenario s = config::load_scenario(
      kLlama, {"parallelism.context_parallel_size=4", "parallelism.virtual_pipeline_model_parallel_size=1",
               "training.pipeline_schedule=\"1f1b\"", "cluster.num_nodes=4"});
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const models::LayerDims& d = w.dims;
  CHECK(d.s == 8192 / 4);
  const std::int64_t layers = 16;  // on stage 0 (32 layers over 2 stages)
  const std::int64_t mbs = w.microbatches;
  // Forward: cp attention steps and cp-1 K/V exchanges per layer and micro-batch; the first step
  // is the causal diagonal, later steps half blocks of the same work.
  const auto fwd_steps = tasks_named(w, 0, "flash_attention_fwd_step");
  CHECK(static_cast<std::int64_t>(fwd_steps.size()) == 4 * layers * mbs);
  const auto kv = tasks_named(w, 0, "cp_kv_exchange");
  REQUIRE(static_cast<std::int64_t>(kv.size()) == 3 * layers * mbs);
  const std::int64_t kv_bytes = 2 * 2 * d.tokens() * d.g * d.d;  // K and V, bf16
  CHECK(transfer_bytes(w, 0, *kv.front()) == kv_bytes);
  CHECK(kv.front()->stream == models::kCpEpStream);
  const auto& kernels = w.graph.rank_class(0).kernels;
  const sim::Kernel& diagonal = kernels[fwd_steps[0]->payload];
  const sim::Kernel& half = kernels[fwd_steps[1]->payload];
  CHECK(diagonal.causal);
  CHECK_FALSE(half.causal);
  CHECK(diagonal.flops.count() == doctest::Approx(half.flops.count()));
  // Summed over the ring, one rank does half of the causal s x s work of its local queries.
  const double full_causal = 4.0 * static_cast<double>(d.b * d.a) * 8192.0 * 8192.0 * static_cast<double>(d.d) * 0.5;
  CHECK(4 * diagonal.flops.count() * 4 == doctest::Approx(full_causal));
  // Backward: cp exchanges per layer; K/V only first, K/V + dK/dV in the middle, dK/dV last.
  const auto bwd = tasks_named(w, 0, "cp_kv_dkv_exchange");
  REQUIRE(static_cast<std::int64_t>(bwd.size()) == 4 * layers * mbs);
  CHECK(transfer_bytes(w, 0, *bwd[0]) == kv_bytes);
  CHECK(transfer_bytes(w, 0, *bwd[1]) == 2 * kv_bytes);
  CHECK(transfer_bytes(w, 0, *bwd[3]) == kv_bytes);
  // Gradients are reduced over data x context parallel ranks (Megatron's dp_cp group).
  CHECK(w.graph.communicator(w.graph.comm(sim::RankId{0}, models::kDpSlot)).members.size() == 4 * 2);
}

namespace {

// Per layer (of `layers` on stage 0) and micro-batch, the all-to-alls of the attention under
// context parallelism: Q, K, V to head groups and the output back; in the backward the output
// gradient to head groups and the gradients of Q, K, V back; with their bytes, on `slot`.
void check_cp_all_to_alls(const models::Workload& w, std::int64_t layers, models::CommSlot slot) {
  const models::LayerDims& d = w.dims;
  const auto qkv = tasks_named(w, 0, "cp_qkv_all_to_all"), out = tasks_named(w, 0, "cp_out_all_to_all");
  const auto dout = tasks_named(w, 0, "cp_dout_all_to_all"), dqkv = tasks_named(w, 0, "cp_dqkv_all_to_all");
  REQUIRE(static_cast<std::int64_t>(qkv.size()) == layers * w.microbatches);
  CHECK(out.size() == qkv.size());
  CHECK(dout.size() == qkv.size());
  CHECK(dqkv.size() == qkv.size());
  const std::int64_t out_bytes = 2 * d.tokens() * d.a * d.d, qkv_bytes = 2 * d.tokens() * (d.a + 2 * d.g) * d.d;  // bf16
  CHECK(collective_bytes(w, 0, *qkv.front()) == qkv_bytes);
  CHECK(collective_bytes(w, 0, *out.front()) == out_bytes);
  CHECK(collective_bytes(w, 0, *dout.front()) == out_bytes);
  CHECK(collective_bytes(w, 0, *dqkv.front()) == qkv_bytes);
  CHECK(qkv.front()->slot == slot);
  CHECK(qkv.front()->category == models::kCpComm);
}

// The Llama golden with context parallelism 4 by the exchange `type`, one model chunk per stage,
// on 4 nodes.
std::vector<std::string> cp4(const std::string& type) {
  return {"parallelism.context_parallel_size=4", "parallelism.cp_comm_type=\"" + type + "\"",
          "parallelism.virtual_pipeline_model_parallel_size=1", "training.pipeline_schedule=\"1f1b\"", "cluster.num_nodes=4"};
}

}  // namespace

TEST_CASE("models/parallelism: cp_comm_type a2a exchanges Q, K, V and the output by all-to-alls (Ulysses)") {
  const std::vector<std::string> a2a = cp4("a2a");
  const config::Scenario s = config::load_scenario(kLlama, a2a);
  CHECK(s.parallel.cp_comm_type == models::CpCommType::kA2a);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const models::LayerDims& d = w.dims;
  REQUIRE(d.cp_a2a);
  const std::int64_t layers = 16, mbs = w.microbatches;
  CHECK(tasks_named(w, 0, "cp_kv_exchange").empty());
  CHECK(tasks_named(w, 0, "flash_attention_fwd_step").empty());
  // All on the CP group.
  check_cp_all_to_alls(w, layers, models::kCpSlot);
  CHECK(w.graph.communicator(w.graph.comm(sim::RankId{0}, models::kCpSlot)).members.size() == 4);
  // One attention over the whole 8,192 tokens with a quarter of the heads: the causal work of the
  // ring's steps summed, in one kernel.
  const auto fwd = tasks_named(w, 0, "flash_attention_fwd");
  REQUIRE(static_cast<std::int64_t>(fwd.size()) == layers * mbs);
  const sim::Kernel& attention = w.graph.rank_class(0).kernels[fwd.front()->payload];
  CHECK(attention.causal);
  CHECK(attention.m == 8192);
  CHECK(attention.batch == d.b * d.a / 4);
  const double full_causal = 4.0 * static_cast<double>(d.b * d.a) * 8192.0 * 8192.0 * static_cast<double>(d.d) * 0.5;
  CHECK(attention.flops.count() == doctest::Approx(full_causal / 4));
  // The same model FLOPs as the ring and a different time; each layer keeps the attention output
  // twice, by head groups for the attention's backward and by sequence shards for the output
  // projection's.
  const std::vector<std::string> ring = cp4("p2p");
  const auto r_a2a = tests::simulate_file(kLlama, a2a), r_ring = tests::simulate_file(kLlama, ring);
  CHECK(models::layer_activation_bytes(d, false) - models::layer_activation_bytes(r_ring.workload->dims, false) ==
        2 * d.tokens() * d.a * d.dv);
  CHECK(r_a2a.model_tflops_per_gpu * r_a2a.iteration_time_s == doctest::Approx(r_ring.model_tflops_per_gpu * r_ring.iteration_time_s));
  CHECK(r_a2a.iteration_time_s != r_ring.iteration_time_s);
  check_fidelities_agree(kLlama, a2a);
  CHECK(report::summary_json(r_a2a)["parallelism"]["cp_comm_type"] == "a2a");
  CHECK(report::summary_text(r_a2a).find("CP 4 (all-to-all)") != std::string::npos);
  // A sliding window applies as without context parallelism (the ring refuses it).
  const auto windowed = tests::simulate_file(kLlama, with(a2a, {"model.window_size=[1024, 0]"}));
  CHECK(windowed.iteration_time_s < r_a2a.iteration_time_s);
  // Bad input: heads that do not split over the CP ranks; Megatron's exchanges not modelled.
  CHECK(load_error(kLlama, with(a2a, {"parallelism.context_parallel_size=8", "cluster.num_nodes=8"}))
            .find("key/value heads (4) of each tensor-parallel rank divisible by context_parallel_size (8)") != std::string::npos);
  CHECK(load_error(kLlama, {"parallelism.cp_comm_type=\"ring\""}).find("parallelism/cp_comm_type") != std::string::npos);
}

TEST_CASE("models/parallelism: cp_comm_type a2a+p2p runs all-to-alls within groups of consecutive CP ranks and the ring across them") {
  const auto hcp = [](const std::string& sizes) { return with(cp4("a2a+p2p"), {"parallelism.hierarchical_context_parallel_sizes=" + sizes}); };
  const std::vector<std::string> h = hcp("[2, 2]");
  const config::Scenario s = config::load_scenario(kLlama, h);
  CHECK(s.parallel.cp_comm_type == models::CpCommType::kA2aP2p);
  CHECK(s.parallel.cp_a2a_size() == 2);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const models::LayerDims& d = w.dims;
  REQUIRE(d.cp_inner == 2);
  CHECK_FALSE(d.cp_a2a);
  const std::int64_t layers = 16, mbs = w.microbatches;
  // The all-to-all group: CP ranks 0 and 1 of rank 0's CP group; the ring's next rank is CP rank 2.
  const sim::CommId group = w.graph.comm(sim::RankId{0}, models::kCpA2aSlot);
  const std::vector<sim::RankId>& members = w.graph.communicator(group).members;
  REQUIRE(members.size() == 2);
  CHECK(w.layout.coord(sim::index(members[0])).cp == 0);
  CHECK(w.layout.coord(sim::index(members[1])).cp == 1);
  CHECK(w.layout.coord(sim::index(members[1])).tp == w.layout.coord(0).tp);
  CHECK(w.layout.coord(sim::index(w.graph.peer(sim::RankId{0}, models::kCpNext))).cp == 2);
  CHECK(w.layout.coord(sim::index(w.graph.peer(sim::RankId{0}, models::kCpPrev))).cp == 2);
  // The four all-to-alls of cp_comm_type a2a, with its bytes, over the group of 2; per layer and
  // micro-batch the ring's two steps and one K/V exchange forward (two exchanges backward).
  check_cp_all_to_alls(w, layers, models::kCpA2aSlot);
  CHECK(static_cast<std::int64_t>(tasks_named(w, 0, "cp_kv_exchange").size()) == layers * mbs);
  CHECK(static_cast<std::int64_t>(tasks_named(w, 0, "cp_kv_dkv_exchange").size()) == 2 * layers * mbs);
  const auto steps = tasks_named(w, 0, "flash_attention_fwd_step");
  REQUIRE(static_cast<std::int64_t>(steps.size()) == 2 * layers * mbs);
  // Each step over half the heads and twice the rank's sequence: the diagonal, then half blocks.
  const sim::Kernel& diagonal = w.graph.rank_class(0).kernels[steps[0]->payload];
  const sim::Kernel& half = w.graph.rank_class(0).kernels[steps[1]->payload];
  CHECK(diagonal.causal);
  CHECK(diagonal.m == 2 * d.s);
  CHECK(diagonal.batch == d.b * d.a / 2);
  CHECK_FALSE(half.causal);
  CHECK(half.n == d.s);
  // The causal work of the rank's share of the sequence, as in the ring and the all-to-alls.
  const double full_causal = 4.0 * static_cast<double>(d.b * d.a) * 8192.0 * 8192.0 * static_cast<double>(d.d) * 0.5;
  CHECK(diagonal.flops.count() + half.flops.count() == doctest::Approx(full_causal / 4));
  // Each layer keeps the attention output twice, as under the all-to-alls; the same model FLOPs
  // as the ring in a different time; both fidelities agree.
  const auto r_h = tests::simulate_file(kLlama, h), r_ring = tests::simulate_file(kLlama, cp4("p2p"));
  const auto r_a2a = tests::simulate_file(kLlama, cp4("a2a"));
  CHECK(models::layer_activation_bytes(d, false) == models::layer_activation_bytes(r_a2a.workload->dims, false));
  CHECK(r_h.model_tflops_per_gpu * r_h.iteration_time_s == doctest::Approx(r_ring.model_tflops_per_gpu * r_ring.iteration_time_s));
  CHECK(r_h.iteration_time_s != r_ring.iteration_time_s);
  CHECK(r_h.iteration_time_s != r_a2a.iteration_time_s);
  check_fidelities_agree(kLlama, h);
  CHECK(report::summary_json(r_h)["parallelism"]["cp_comm_type"] == "a2a+p2p");
  CHECK(report::summary_json(r_h)["parallelism"]["hierarchical_context_parallel_sizes"].get<std::vector<std::int64_t>>() ==
        std::vector<std::int64_t>{2, 2});
  CHECK(report::summary_text(r_h).find("CP 4 (all-to-all 2 x ring 2)") != std::string::npos);
  // A level of one rank is what Transformer Engine then runs: the all-to-alls, or the ring.
  const auto r_a2a_only = tests::simulate_file(kLlama, hcp("[4, 1]")), r_ring_only = tests::simulate_file(kLlama, hcp("[1, 4]"));
  CHECK(r_a2a_only.iteration_time_s == r_a2a.iteration_time_s);
  CHECK(r_a2a_only.peak_bytes_per_gpu == r_a2a.peak_bytes_per_gpu);
  CHECK(r_ring_only.iteration_time_s == r_ring.iteration_time_s);
  CHECK(r_ring_only.peak_bytes_per_gpu == r_ring.peak_bytes_per_gpu);
  // A sliding window only without a ring.
  CHECK(load_error(kLlama, with(h, {"model.window_size=[1024, 0]"})).find("a ring (cp_comm_type \"a2a+p2p\"") != std::string::npos);
  CHECK(load_error(kLlama, with(hcp("[4, 1]"), {"model.window_size=[1024, 0]"})).empty());
  // Bad input.
  CHECK(load_error(kLlama, cp4("a2a+p2p")).find("needs hierarchical_context_parallel_sizes") != std::string::npos);
  CHECK(load_error(kLlama, hcp("[2, 4]")).find("product is context_parallel_size (4), got [2, 4]") != std::string::npos);
  CHECK(load_error(kLlama, hcp("[4]")).find("parallelism/hierarchical_context_parallel_sizes") != std::string::npos);
  CHECK(load_error(kLlama, hcp("[0, 4]")).find("parallelism/hierarchical_context_parallel_sizes/0") != std::string::npos);
  CHECK(load_error(kLlama, with(cp4("p2p"), {"parallelism.hierarchical_context_parallel_sizes=[2, 2]"}))
            .find("only applies with cp_comm_type \"a2a+p2p\" (got \"p2p\")") != std::string::npos);
  CHECK(load_error(kLlama, with(hcp("[8, 1]"), {"parallelism.context_parallel_size=8", "cluster.num_nodes=8"}))
            .find("divisible by the all-to-all group size (8)") != std::string::npos);
}

TEST_CASE("models/parallelism: cp_comm_type allgather gathers K and V, and reduce-scatters their gradients") {
  const std::vector<std::string> ag = cp4("allgather");
  const models::Workload w = lowered(kLlama, ag);
  const models::LayerDims& d = w.dims;
  REQUIRE(d.cp_all_gather);
  const std::int64_t layers = 16, mbs = w.microbatches;
  CHECK(tasks_named(w, 0, "cp_kv_exchange").empty());
  CHECK(tasks_named(w, 0, "cp_qkv_all_to_all").empty());
  // K and V gathered in the forward and again in the backward; their gradients reduce-scattered.
  const std::int64_t gathered = 4 * 2 * 2 * d.tokens() * d.g * d.d;  // CP x (K, V) x bf16
  const auto gathers = tasks_named(w, 0, "cp_kv_all_gather"), scatters = tasks_named(w, 0, "cp_dkv_reduce_scatter");
  REQUIRE(static_cast<std::int64_t>(gathers.size()) == 2 * layers * mbs);
  REQUIRE(static_cast<std::int64_t>(scatters.size()) == layers * mbs);
  CHECK(collective_bytes(w, 0, *gathers.front()) == gathered);
  CHECK(collective_bytes(w, 0, *scatters.front()) == gathered);
  CHECK(gathers.front()->slot == models::kCpSlot);
  CHECK(scatters.front()->category == models::kCpComm);
  // Per layer: the rank's two query chunks against the keys up to their ends, the causal work
  // of its share of the sequence, as in the ring.
  const auto steps = tasks_named(w, 0, "flash_attention_fwd_step");
  REQUIRE(static_cast<std::int64_t>(steps.size()) == 3 * layers * mbs);
  double flops = 0;
  for (int i = 0; i < 3; ++i) flops += w.graph.rank_class(0).kernels[steps[static_cast<std::size_t>(i)]->payload].flops.count();
  const double full_causal = 4.0 * static_cast<double>(d.b * d.a) * 8192.0 * 8192.0 * static_cast<double>(d.d) * 0.5;
  CHECK(flops == doctest::Approx(full_causal / 4));
  check_fidelities_agree(kLlama, ag);
  const auto r = tests::simulate_file(kLlama, ag);
  CHECK(report::summary_text(r).find("CP 4 (all-gather)") != std::string::npos);
  CHECK(report::summary_json(r)["parallelism"]["cp_comm_type"] == "allgather");
  CHECK(load_error(kLlama, with(ag, {"model.window_size=[1024, 0]"})).find("all-gathered K/V (cp_comm_type \"allgather\")") !=
        std::string::npos);
}

TEST_CASE("models/parallelism: Transformer Engine's fused cross-entropy keeps the 16-bit logits as the gradient") {
  const std::vector<std::string> te = {"training.cross_entropy_loss_fusion=true", "training.cross_entropy_fusion_impl=\"te\""};
  const config::Scenario base_s = config::load_scenario(kLlama), te_s = config::load_scenario(kLlama, te);
  CHECK(te_s.training.te_cross_entropy());
  const models::Workload base = models::lower(base_s.model, base_s.parallel, base_s.training, base_s.num_gpus());
  const models::Workload fused = models::lower(te_s.model, te_s.parallel, te_s.training, te_s.num_gpus());
  const models::LayerDims& d = fused.dims;
  // The saved fp32 softmax (4 bytes a logit) becomes the logits themselves (2 bytes).
  CHECK(models::output_activation_bytes(base.dims) - models::output_activation_bytes(d) == 2 * d.tokens() * d.v);
  const std::uint32_t last = static_cast<std::uint32_t>(fused.stages.size() - 1);
  CHECK(tasks_named(fused, last, "cross_entropy_max").empty());
  REQUIRE(!tasks_named(fused, last, "cross_entropy_online_softmax").empty());
  const auto stats = tasks_named(fused, last, "cross_entropy_stats_all_gather");
  REQUIRE(!stats.empty());
  CHECK(collective_bytes(fused, last, *stats.front()) == 12 * d.tokens() * d.t);  // max, sum, target logit per row
  // Less memory on the last stage and less traffic: no slower, the model FLOPs the same.
  const auto r_base = tests::simulate_file(kLlama), r_te = tests::simulate_file(kLlama, te);
  CHECK(r_te.stages.back().peak_bytes < r_base.stages.back().peak_bytes);
  CHECK(r_te.iteration_time_s <= r_base.iteration_time_s);
  CHECK(r_te.model_tflops_per_gpu * r_te.iteration_time_s == doctest::Approx(r_base.model_tflops_per_gpu * r_base.iteration_time_s));
  // "native" (Megatron's jit-fused kernels) is priced as the unfused cross-entropy.
  const auto native = tests::simulate_file(kLlama, {"training.cross_entropy_loss_fusion=true"});
  CHECK(native.iteration_time_s == r_base.iteration_time_s);
  // Bad input.
  CHECK(load_error(kLlama, {"training.cross_entropy_fusion_impl=\"te\""}).find("applies with cross_entropy_loss_fusion true") !=
        std::string::npos);
  CHECK(load_error(kLlama, with(te, {"training.transformer_impl=\"local\""})).find("training/cross_entropy_fusion_impl: needs transformer_impl") !=
        std::string::npos);
  CHECK(load_error(kLlama, {"training.cross_entropy_loss_fusion=true", "training.cross_entropy_fusion_impl=\"triton\""})
            .find("cross_entropy_fusion_impl") != std::string::npos);
}

TEST_CASE("models/parallelism: MoE dispatch, expert GEMMs and expert gradients follow Megatron's alltoall dispatcher") {
  const config::Scenario s = config::load_scenario(kGpt, kMoe);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const models::LayerDims& d = w.dims;
  CHECK(d.ep == 4);
  CHECK(d.etp == 2);  // expert_tensor_parallel_size defaults to the tensor-parallel size
  CHECK(d.local_experts == 2);
  CHECK(w.expert_data_parallel_size == 1);  // 8 ranks per stage = ETP 2 x EP 4
  // Tokens entering the layer are sequence-sharded; each rank sends topk x its tokens.
  const std::int64_t Ts = d.sharded_tokens();
  CHECK(Ts == 4096 / 2);
  const auto dispatch = tasks_named(w, 0, "moe_dispatch_all_to_all");
  REQUIRE(!dispatch.empty());
  CHECK(collective_bytes(w, 0, *dispatch.front()) == 2 * Ts * 2 * d.h);
  CHECK(dispatch.front()->slot == models::kEpSlot);
  // The EP group folds over the data-parallel ranks: stride ETP in the dense grid.
  const auto& ep_members = w.graph.communicator(w.graph.comm(sim::RankId{0}, models::kEpSlot)).members;
  REQUIRE(ep_members.size() == 4);
  CHECK(sim::index(ep_members[1]) == 2);
  // Expert GEMMs: one per local expert (TE's grouped linear), each over its share of the routed
  // tokens (all-gathered over ETP), with the expert hidden size split over ETP.
  const auto fc1 = tasks_named(w, 0, "expert_fc1");
  REQUIRE(!fc1.empty());
  const sim::Kernel& k = w.graph.rank_class(0).kernels[fc1.front()->payload];
  CHECK(k.batch == 2);
  CHECK(k.grouped);
  CHECK(k.m == Ts * 2 * 2 / 2);
  CHECK(k.n == 2 * 14336 / 2);
  CHECK(k.k == 4096);
  // The weight gradient accumulates into the fp32 main gradient: reads and writes it (4 + 4
  // bytes an element) besides reading both operands.
  const auto wgrad = tasks_named(w, 0, "expert_fc1_wgrad");
  REQUIRE(!wgrad.empty());
  const sim::Kernel& wg = w.graph.rank_class(0).kernels[wgrad.front()->payload];
  CHECK(wg.grouped);
  CHECK(wg.bytes.count() == wg.batch * (2 * (wg.m * wg.k + wg.k * wg.n) + 8 * wg.m * wg.n));
  // Expert parameters per GPU shrink with EP; their optimizer state is sharded over expert DP.
  const auto no_ep = tests::simulate_file(kGpt, with(kMoe, {"parallelism.expert_model_parallel_size=1",
                                           "parallelism.expert_tensor_parallel_size=2"}));
  const auto ep4 = tests::simulate_file(kGpt, kMoe);
  CHECK(ep4.workload->stages[0].params.expert * 4 == no_ep.workload->stages[0].params.expert);
  CHECK(ep4.stages[0].static_memory.weights < no_ep.stages[0].static_memory.weights);
}

// kMoe with 64 experts (16 on each rank under EP 4) and `extra` overrides, lowered.
struct ManyExperts {
  config::Scenario scenario;
  models::Workload workload;
  explicit ManyExperts(const std::vector<std::string>& extra = {})
      : scenario(config::load_scenario(kGpt, with(with(kMoe, {"model.num_experts=64"}), extra))),
        workload(models::lower(scenario.model, scenario.parallel, scenario.training, scenario.num_gpus())) {}
  // The kernel of rank 0's first task named `name`.
  const sim::Kernel& kernel(const std::string& name) const {
    const auto tasks = tasks_named(workload, 0, name);
    REQUIRE(!tasks.empty());
    return workload.graph.rank_class(0).kernels[tasks.front()->payload];
  }
};

TEST_CASE("models/parallelism: moe_use_grouped_tensor runs the expert GEMMs as one grouped kernel") {
  // Megatron-Core's moe_use_grouped_tensor: Transformer Engine's cuBLASLt grouped GEMM, one kernel
  // whose tiles of every local expert share the waves, instead of one GEMM per expert in turn.
  const ManyExperts per_group;
  const ManyExperts single({"training.moe_use_grouped_tensor=true"});
  const topo::ComputeModel model(per_group.scenario.cluster.gpu);
  for (const char* name : {"expert_fc1", "expert_fc2_dgrad", "expert_fc1_wgrad"}) {
    CAPTURE(name);
    const sim::Kernel& ka = per_group.kernel(name);
    const sim::Kernel& kb = single.kernel(name);
    CHECK(ka.grouped);
    CHECK_FALSE(kb.grouped);
    CHECK(ka.batch == kb.batch);
    CHECK(ka.batch == 16);
    CHECK(ka.flops.count() == kb.flops.count());
    CHECK(model.kernel_time(kb) < model.kernel_time(ka));
  }
}

TEST_CASE("models/parallelism: moe_grouped_gemm false runs Megatron's SequentialMLP, one activation kernel per expert") {
  const ManyExperts grouped;
  const ManyExperts sequential({"training.moe_grouped_gemm=false"});
  const topo::ComputeModel model(grouped.scenario.cluster.gpu);
  for (const char* name : {"expert_swiglu", "expert_swiglu_bwd"}) {
    CAPTURE(name);
    const sim::Kernel& ka = grouped.kernel(name);
    const sim::Kernel& kb = sequential.kernel(name);
    CHECK_FALSE(ka.grouped);
    CHECK(kb.grouped);
    CHECK(kb.batch == 16);
    CHECK(kb.bytes == ka.bytes);
    // Sixteen kernel starts instead of one.
    CHECK(model.kernel_time(kb) - model.kernel_time(ka) == grouped.scenario.cluster.gpu.calibration.memory_kernel_overhead * 15);
  }
  // The experts' outputs joined once per layer forward (torch.cat), the GEMMs unchanged.
  CHECK(tasks_named(grouped.workload, 0, "expert_outputs_cat").empty());
  CHECK(tasks_named(sequential.workload, 0, "expert_outputs_cat").size() == tasks_named(sequential.workload, 0, "expert_fc2").size());
  CHECK(grouped.kernel("expert_fc1") == sequential.kernel("expert_fc1"));
  // In FP8 each expert's Linear casts its own tokens; GroupedLinear casts them all in one kernel.
  const ManyExperts grouped8({"training.precision=\"fp8\""});
  const ManyExperts sequential8({"training.moe_grouped_gemm=false", "training.precision=\"fp8\""});
  for (const char* name : {"expert_fc1_input_cast", "expert_fc2_input_cast", "expert_fc2_grad_cast"}) {
    CAPTURE(name);
    CHECK(grouped8.kernel(name).batch == 1);
    CHECK(sequential8.kernel(name).batch == 16);
    CHECK(sequential8.kernel(name).grouped);
    CHECK(sequential8.kernel(name).bytes == grouped8.kernel(name).bytes);
  }
  CHECK(grouped8.kernel("qkv_proj_input_cast") == sequential8.kernel("qkv_proj_input_cast"));
  // Megatron-Core refuses the GroupedTensor path and recomputing moe_act without grouped GEMMs.
  CHECK_THROWS_WITH_AS(ManyExperts({"training.moe_grouped_gemm=false", "training.moe_use_grouped_tensor=true"}),
                       doctest::Contains("training/moe_use_grouped_tensor: needs moe_grouped_gemm true"), InputError);
  CHECK_THROWS_WITH_AS(ManyExperts({"training.moe_grouped_gemm=false", "training.recompute_granularity=\"selective\"",
                                    "training.recompute_modules=[\"moe_act\"]"}),
                       doctest::Contains("training/recompute_modules: moe_act is recomputed only with moe_grouped_gemm true"),
                       InputError);
}

TEST_CASE("models/parallelism: a shared expert is a tensor-parallel dense MLP beside the routed experts") {
  const std::vector<std::string> shared = with(kMoe, {"model.moe_shared_expert_intermediate_size=4096"});
  const config::Scenario s = config::load_scenario(kGpt, shared);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const models::LayerDims& d = w.dims;
  CHECK(d.sf == 4096 / 2);
  // Megatron's SharedExpertMLP on the layer's input: column-parallel fc1 over the all-gathered
  // sequence (SwiGLU: 2 x 2,048 per TP rank), row-parallel fc2 reduce-scattered, once per layer.
  const auto fc1 = tasks_named(w, 0, "shared_fc1");
  REQUIRE(!fc1.empty());
  CHECK(fc1.size() == tasks_named(w, 0, "expert_fc1").size());
  const sim::Kernel& k = w.graph.rank_class(0).kernels[fc1.front()->payload];
  CHECK(k.m == d.tokens());
  CHECK(k.n == 2 * 2048);
  CHECK(k.k == 4096);
  CHECK(tasks_named(w, 0, "shared_fc2_reduce_scatter").size() == fc1.size());
  CHECK(tasks_named(w, 0, "shared_fc1_wgrad").size() == fc1.size());
  // Its weights are dense (data-parallel gradients, not expert ones): 3 x 4,096 x 4,096 / TP per layer.
  const auto with_shared = tests::simulate_file(kGpt, shared);
  const auto without = tests::simulate_file(kGpt, kMoe);
  std::int64_t layers = 0;
  for (const auto& chunk : w.stages[0].chunks) layers += chunk.second;
  CHECK(with_shared.workload->stages[0].params.dense - without.workload->stages[0].params.dense == layers * 3 * 4096 * 4096 / 2);
  CHECK(with_shared.workload->stages[0].params.expert == without.workload->stages[0].params.expert);
  CHECK(with_shared.stages[0].activation_peak_bytes > without.stages[0].activation_peak_bytes);
  // Megatron's FLOP formula: + (shared / h) x 3/2 (gated) per layer, in units of 12 B s L h^2.
  const double h = 4096, seq = static_cast<double>(s.model.seq_length), L = static_cast<double>(s.model.num_layers);
  CHECK(models::model_flops(s.model, 1) - models::model_flops(config::load_scenario(kGpt, kMoe).model, 1) ==
        doctest::Approx(12 * seq * L * h * h * (4096 / h) * 1.5));
  CHECK(with_shared.iteration_time_s > without.iteration_time_s);
}

TEST_CASE("models/parallelism: qk_layernorm normalises each query and key head and sums its gradients over TP") {
  // GPT-3 7.5B on TP 4 without sequence parallelism: only qk_layernorm's weights need the TP sum.
  const std::vector<std::string> plain = {"parallelism.sequence_parallel=false"};
  const std::vector<std::string> normed = with(plain, {"model.qk_layernorm=true"});
  const config::Scenario s = config::load_scenario(kGpt, normed);
  const config::Scenario b = config::load_scenario(kGpt, plain);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const models::Workload base = models::lower(b.model, b.parallel, b.training, b.num_gpus());
  // One forward and one backward norm per layer and micro-batch, after the QKV projection.
  const auto fwd = tasks_named(w, 0, "qk_layernorm");
  REQUIRE(!fwd.empty());
  CHECK(fwd.size() == tasks_named(w, 0, "qkv_proj").size());
  CHECK(tasks_named(w, 0, "qk_layernorm_bwd").size() == fwd.size());
  CHECK(tasks_named(base, 0, "qk_layernorm").empty());
  // 32 heads of 128 over TP 4: 8 query and 8 key heads per rank, read and written in 16 bits.
  const std::int64_t heads = w.dims.a + w.dims.g, d = w.dims.d;
  CHECK(heads == 16);
  CHECK(d == 128);
  const sim::Kernel& k = w.graph.rank_class(0).kernels[fwd.front()->payload];
  CHECK(k.bytes.count() == 2 * 2 * w.dims.tokens() * heads * d);
  // Two head-sized LayerNorms (weight and bias) per layer, replicated on every TP rank and
  // summed over it.
  std::int64_t layers = 0;
  for (const auto& chunk : w.stages[0].chunks) layers += chunk.second;
  CHECK(w.stages[0].params.dense - base.stages[0].params.dense == layers * 2 * 2 * d);
  CHECK(tasks_named(base, 0, "layernorm_grad_all_reduce").empty());
  const auto sum = tasks_named(w, 0, "layernorm_grad_all_reduce");
  REQUIRE(sum.size() == 1);
  CHECK(collective_bytes(w, 0, *sum.front()) == (s.training.grad_reduce_in_fp32 ? 4 : 2) * layers * 2 * 2 * d);
  // Its inputs are kept for the backward pass; the model's parameter count has the weights.
  CHECK(models::layer_activation_bytes(w.dims, true) - models::layer_activation_bytes(base.dims, true) ==
        2 * w.dims.tokens() * heads * d);
  CHECK(s.model.total_parameters(1) - b.model.total_parameters(1) == s.model.num_layers * 2 * 2 * d);
  CHECK(tests::simulate_file(kGpt, normed).iteration_time_s > tests::simulate_file(kGpt, plain).iteration_time_s);
  // Latent attention normalises its latents instead.
  CHECK(load_error(kGpt, with(kMla, {"model.qk_layernorm=true"})).find("qk_layernorm does not apply") != std::string::npos);
}

TEST_CASE("models/parallelism: a sliding window on the layers window_attn_skip_freq names, priced in its flash kernels") {
  // kLlama (Llama 3.1 8B, sequence 8,192, TP 2 PP 2 x2): a 1,024-token window on every other
  // layer (Megatron-Core: layer l, from 1, keeps full attention when l % 2 == 0).
  const std::vector<std::string> windowed = {"model.window_size=[1024, 0]", "model.window_attn_skip_freq=2"};
  const config::Scenario s = config::load_scenario(kLlama, windowed);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  int with_window = 0, without = 0;
  for (std::uint32_t cls = 0; cls < w.graph.num_classes(); ++cls) {
    const sim::RankClass& rc = w.graph.rank_class(cls);
    for (const sim::Task& t : rc.tasks) {
      const std::string n = w.graph.name(t.name);
      if (n != "flash_attention_fwd" && n != "flash_attention_bwd") continue;
      const sim::Kernel& k = rc.kernels[t.payload];
      CAPTURE(t.layer);
      CHECK(k.window == (t.layer % 2 == 0 ? 1024 : 0));
      (k.window > 0 ? with_window : without) += 1;
    }
  }
  CHECK(with_window > 0);
  CHECK(with_window == without);
  const report::RunResult full = tests::simulate_file(kLlama, {}), half = tests::simulate_file(kLlama, windowed),
                          all = tests::simulate_file(kLlama, {"model.window_size=[1024, 0]"});
  CHECK(half.iteration_time_s < full.iteration_time_s);
  CHECK(all.iteration_time_s < half.iteration_time_s);
  // Model and hardware FLOPs as Megatron's formula counts them (Megatron-Bridge's too), which
  // ignores the window: the same FLOPs in less time.
  CHECK(half.model_tflops_per_gpu * half.iteration_time_s == doctest::Approx(full.model_tflops_per_gpu * full.iteration_time_s).epsilon(1e-9));
  CHECK(half.hardware_tflops_per_gpu > full.hardware_tflops_per_gpu);
  CHECK(report::summary_text(half).find("sliding window 1024 on 16 of the layers") != std::string::npos);
  // A window as long as the sequence is full attention.
  CHECK(tests::simulate_file(kLlama, {"model.window_size=[8192, 0]"}).iteration_time_s == full.iteration_time_s);
  // Bad input.
  CHECK(load_error(kLlama, {"model.window_size=[1024, 16]"}).find("/window_size/1: expected 0") != std::string::npos);
  CHECK(load_error(kLlama, {"model.window_size=[0, 0]"}).find("/window_size/0: expected -1 (no window)") != std::string::npos);
  CHECK(load_error(kLlama, {"model.window_size=4096"}).find("expected [left, right]") != std::string::npos);
  CHECK(load_error(kLlama, {"model.window_attn_skip_freq=2"}).find("it needs window_size") != std::string::npos);
  CHECK(load_error(kLlama, {"model.window_size=[1024, 0]", "model.window_attn_skip_freq=[1, 0]"}).find("one 0/1 entry per layer (32)") !=
        std::string::npos);
  CHECK(load_error(kLlama, {"model.window_size=[1024, 0]", "parallelism.context_parallel_size=2",
                            "parallelism.virtual_pipeline_model_parallel_size=1", "training.pipeline_schedule=\"1f1b\""})
            .find("context parallelism over the ring (cp_comm_type \"p2p\") with sliding-window attention") != std::string::npos);
  CHECK(load_error(kLlama, {"model.window_size=[-1, 0]"}) == "");
}

TEST_CASE("models/parallelism: recompute_modules layernorm and moe_act drop the norm output and fc2 input, and recompute them") {
  const std::vector<std::string> modules = {"training.recompute_granularity=\"selective\"",
                                            "training.recompute_modules=[\"layernorm\", \"moe_act\"]"};
  const models::Workload base = lowered(kGpt, kMoe), w = lowered(kGpt, with(kMoe, modules));
  // Per MoE layer: the pre-MLP norm's output (the router's input) and the experts' fc2 input.
  const models::LayerDims& d = w.dims;
  CHECK(models::layer_activation_bytes(base.dims, true) - models::layer_activation_bytes(d, true) ==
        2 * d.sharded_tokens() * d.h + 2 * d.routed_tokens() * d.ef);
  // Recomputed as each MoE layer's backward begins, and before fc2's backward.
  auto recomputed = [](const models::Workload& x, const std::string& name) {
    int n = 0;
    for (const sim::Task* t : tasks_named(x, 0, name)) n += t->category == models::kRecompute ? 1 : 0;
    return n;
  };
  const std::size_t backwards = tasks_named(w, 0, "expert_fc2_dgrad").size();
  REQUIRE(backwards > 0);
  CHECK(recomputed(base, "pre_mlp_norm") == 0);
  CHECK(recomputed(w, "pre_mlp_norm") == static_cast<int>(backwards));
  CHECK(recomputed(w, "expert_swiglu") == static_cast<int>(backwards));
  CHECK(recomputed(w, "input_norm") == 0);  // fused into the QKV projection
  const report::RunResult rb = tests::simulate_file(kGpt, kMoe), rw = tests::simulate_file(kGpt, with(kMoe, modules));
  CHECK(rw.breakdown.recompute_s > rb.breakdown.recompute_s);
  CHECK(rw.peak_bytes_per_gpu < rb.peak_bytes_per_gpu);
  check_fidelities_agree(kGpt, with(kMoe, modules));
  // Latent attention's input norm is a module of its own.
  CHECK(recomputed(lowered(kGpt, with(kMla, modules)), "input_norm") > 0);
  // Refused where Megatron-Core refuses it or where it would do nothing.
  CHECK(load_error(kGpt, {"training.recompute_granularity=\"selective\"", "training.recompute_modules=[\"layernorm\"]"})
            .find("this model has neither") != std::string::npos);
  CHECK(load_error(kGpt, {"training.recompute_granularity=\"selective\"", "training.recompute_modules=[\"moe_act\"]"})
            .find("moe_act needs a mixture-of-experts model") != std::string::npos);
  CHECK(load_error(kGpt, with(with(kMoe, modules), {"training.precision=\"fp8\""})).find("other than delayed scaling") != std::string::npos);
  CHECK(load_error(kGpt, with(with(kMoe, modules), {"training.precision=\"fp8\"", "training.fp8_recipe=\"tensorwise\""})) == "");
}

TEST_CASE("models/parallelism: overlap_moe_expert_parallel_comm runs the same work with the all-to-alls beside another pass") {
  // kMoe interleaved (2 chunks of 2 layers per stage) with overlap_p2p_comm, as Megatron-Core
  // requires for the combined 1F1B schedule under pipeline parallelism; on 4 nodes with EP 8, so
  // that the all-to-alls cross InfiniBand, and 16 micro-batches.
  const std::vector<std::string> plain =
      with(kMoe, {"parallelism.virtual_pipeline_model_parallel_size=2", "training.pipeline_schedule=\"interleaved\"",
                  "training.overlap_p2p_comm=true", "cluster.num_nodes=4", "parallelism.expert_model_parallel_size=8",
                  "training.global_batch_size=128"});
  const std::vector<std::string> overlapped = with(plain, {"training.overlap_moe_expert_parallel_comm=true"});
  const std::vector<std::string> delayed = with(overlapped, {"training.delay_wgrad_compute=true"});
  const models::Workload a = lowered(kGpt, plain), b = lowered(kGpt, overlapped), c = lowered(kGpt, delayed);
  // The same tasks, in another order.
  for (const char* name : {"moe_dispatch_all_to_all", "moe_combine_all_to_all", "moe_combine_bwd_all_to_all",
                           "moe_dispatch_bwd_all_to_all", "expert_fc1_wgrad", "qkv_proj", "router_wgrad"}) {
    CAPTURE(name);
    CHECK(!tasks_named(a, 0, name).empty());
    CHECK(tasks_named(b, 0, name).size() == tasks_named(a, 0, name).size());
    CHECK(tasks_named(c, 0, name).size() == tasks_named(a, 0, name).size());
  }
  // In a combined step the backward's combine all-to-all is issued, then the other micro-batch's
  // attention computes before the backward's experts use its tokens.
  // On stage `cls`, whether some forward QKV projection (of layer `layer`, or any) runs between
  // another micro-batch's backward combine all-to-all and the expert GEMMs waiting for it.
  auto interleaved_forward = [](const models::Workload& w, std::uint32_t cls = 0, std::int32_t layer = -1) {
    const sim::RankClass& rc = w.graph.rank_class(cls);
    for (std::size_t i = 0; i < rc.tasks.size(); ++i) {
      if (w.graph.name(rc.tasks[i].name) != "moe_combine_bwd_all_to_all") continue;
      for (std::size_t j = i + 1; j < rc.tasks.size(); ++j) {
        const std::string n = w.graph.name(rc.tasks[j].name);
        if (n == "expert_fc2_dgrad") break;
        if (n == "qkv_proj" && rc.tasks[j].microbatch != rc.tasks[i].microbatch && (layer < 0 || rc.tasks[j].layer == layer)) return true;
      }
    }
    return false;
  };
  CHECK_FALSE(interleaved_forward(a));
  CHECK(interleaved_forward(b));
  // A multi-token-prediction layer (layer index 9 here) pairs like a decoder layer, on the last stage.
  const models::Workload mtp = lowered(kGpt, with(overlapped, {"model.mtp_num_layers=1"}));
  CHECK(interleaved_forward(mtp, 1, 9));
  CHECK_FALSE(interleaved_forward(mtp, 0, 9));
  check_fidelities_agree(kGpt, with(overlapped, {"model.mtp_num_layers=1"}));
  // delay_wgrad_compute: the experts' weight gradients follow the backward dispatch.
  auto wgrad_after_dispatch = [](const models::Workload& w) {
    const sim::RankClass& rc = w.graph.rank_class(0);
    std::size_t dispatch = rc.tasks.size(), wgrad = rc.tasks.size();
    for (std::size_t i = 0; i < rc.tasks.size(); ++i) {
      const std::string n = w.graph.name(rc.tasks[i].name);
      if (n == "moe_dispatch_bwd_all_to_all" && dispatch == rc.tasks.size()) dispatch = i;
      if (n == "expert_fc2_wgrad" && wgrad == rc.tasks.size()) wgrad = i;
    }
    return wgrad > dispatch;
  };
  CHECK_FALSE(wgrad_after_dispatch(b));
  CHECK(wgrad_after_dispatch(c));
  // The same kernels; the expert-parallel traffic hides behind the other pass.
  const report::RunResult ra = tests::simulate_file(kGpt, plain), rb = tests::simulate_file(kGpt, overlapped);
  CHECK(rb.breakdown.compute_s == doctest::Approx(ra.breakdown.compute_s).epsilon(1e-9));
  auto exposed_ep = [](const report::RunResult& r) {
    for (const auto& [kind, seconds] : r.breakdown.exposed_by_kind) {
      if (kind == "ep") return seconds;
    }
    return 0.0;
  };
  CHECK(exposed_ep(rb) < 0.7 * exposed_ep(ra));
  // The step is shorter, though the extra warm-up pass and the forward's later sends (after the
  // paired backward's last layer) lengthen the pipeline bubble.
  CHECK(rb.iteration_time_s < 0.97 * ra.iteration_time_s);
  CHECK(report::summary_text(rb).find("EP 8 +A2A overlap DP") != std::string::npos);
  CHECK(report::plan_summary(rb).find("EP 8 +A2A overlap DP") != std::string::npos);
  CHECK(report::summary_text(ra).find("A2A overlap") == std::string::npos);
  CHECK(rb.breakdown.pipeline_bubble_s > ra.breakdown.pipeline_bubble_s);
  check_fidelities_agree(kGpt, delayed);
  // Without pipelining: micro-batch i + 1's forward beside i's backward.
  const std::vector<std::string> single = {
      "model={\"preset\": \"mixtral-8x7b\", \"num_layers\": 4}",
      "parallelism={\"tensor_model_parallel_size\": 1, \"pipeline_model_parallel_size\": 1, \"expert_model_parallel_size\": 8, "
      "\"use_distributed_optimizer\": true}",
      "training={\"micro_batch_size\": 1, \"global_batch_size\": 64}", "cluster={\"preset\": \"dgx-h100\", \"num_nodes\": 2}"};
  CHECK(interleaved_forward(lowered(kGpt, with(single, {"training.overlap_moe_expert_parallel_comm=true"}))));
  CHECK(tests::simulate_file(kGpt, with(single, {"training.overlap_moe_expert_parallel_comm=true"})).iteration_time_s <
        tests::simulate_file(kGpt, single).iteration_time_s);
  // Megatron-Core's conditions.
  auto error = [](const std::vector<std::string>& o) { return load_error(kGpt, o); };
  CHECK(error(with(kMoe, {"training.overlap_moe_expert_parallel_comm=true"})).find("interleaved schedule") != std::string::npos);
  CHECK(error(with(overlapped, {"training.recompute_granularity=\"full\"", "training.recompute_method=\"uniform\"",
                                "training.recompute_num_layers=1"}))
            .find("full recomputation") != std::string::npos);
  CHECK(error(with(plain, {"training.delay_wgrad_compute=true"})).find("needs overlap_moe_expert_parallel_comm") != std::string::npos);
  CHECK(error({"training.overlap_moe_expert_parallel_comm=true"}).find("expert_model_parallel_size > 1") != std::string::npos);
}

TEST_CASE("models/parallelism: the dispatchers exchange the token counts, and the host waits for them") {
  // kMoe: EP 4 with the alltoall dispatcher; the same plan with the flex dispatcher (DeepEP),
  // whose dispatch exchanges the counts itself.
  const models::Workload a = lowered(kGpt, kMoe);
  const models::Workload f = lowered(kGpt, with(kMoe, {"training.moe_token_dispatcher_type=\"flex\"", "parallelism.expert_tensor_parallel_size=1"}));
  const auto counts = tasks_named(a, 0, "moe_token_counts_all_gather");
  // One per MoE layer forward (4 layers a stage, 8 micro-batches with kMoe's plan).
  REQUIRE(!counts.empty());
  CHECK(counts.size() == tasks_named(a, 0, "moe_dispatch_all_to_all").size());
  CHECK(tasks_named(f, 0, "moe_token_counts_all_gather").empty());
  // The flex dispatcher exchanges its counts as the dispatch begins (DeepEP's notify), the host
  // waiting for them before it launches the dispatch.
  const auto notify = tasks_named(f, 0, "moe_dispatch_notify");
  CHECK(notify.size() == tasks_named(f, 0, "moe_dispatch_all_to_all").size());
  for (const sim::Task* t : notify) CHECK(t->host_sync);
  CHECK(tasks_named(a, 0, "moe_dispatch_notify").empty());
  const sim::RankClass& rc = a.graph.rank_class(0);
  for (const sim::Task* t : counts) {
    CHECK(t->host_sync);
    CHECK(t->kind == sim::TaskKind::kCollective);
    // Each rank's int64 count per expert, gathered over the EP group of 4 (the expert TP x EP group of 8
    // priced as it).
    CHECK(collective_bytes(a, 0, *t) == 8 * 8 * 4);
  }
  // Issued after the routing and before the permutation, in MoEAlltoAllTokenDispatcher's order.
  for (std::size_t i = 0; i < rc.tasks.size(); ++i) {
    if (a.graph.name(rc.tasks[i].name) != "moe_token_counts_all_gather") continue;
    CHECK(a.graph.name(rc.tasks[i - 1].name) == "router_softmax_topk");
    CHECK(a.graph.name(rc.tasks[i + 1].name) == "permute");
  }
}

TEST_CASE("models/parallelism: moe_shared_expert_overlap computes the shared expert while the tokens travel") {
  // kMoe (TP 2 with sequence parallelism, 1F1B) with a shared expert of Mixtral's expert size, on
  // 4 nodes with EP 8, so that the all-to-alls cross InfiniBand.
  const std::vector<std::string> plain = with(kMoe, {"model.moe_shared_expert_intermediate_size=14336", "cluster.num_nodes=4",
                                                     "parallelism.expert_model_parallel_size=8", "training.global_batch_size=128"});
  const std::vector<std::string> overlapped = with(plain, {"training.moe_shared_expert_overlap=true"});
  const std::vector<std::string> flex =
      with(overlapped, {"training.moe_token_dispatcher_type=\"flex\"", "parallelism.expert_tensor_parallel_size=1"});
  const models::Workload a = lowered(kGpt, plain), b = lowered(kGpt, overlapped), f = lowered(kGpt, flex);
  // The same tasks, in another order.
  for (const char* name : {"shared_fc1", "shared_swiglu", "shared_fc2", "shared_fc2_reduce_scatter", "shared_fc1_dgrad",
                           "shared_fc1_wgrad", "shared_fc2_wgrad", "moe_dispatch_all_to_all", "moe_combine_all_to_all", "expert_fc1"}) {
    CAPTURE(name);
    CHECK(!tasks_named(a, 0, name).empty());
    CHECK(tasks_named(b, 0, name).size() == tasks_named(a, 0, name).size());
  }
  // Names of the first compute task issued after each task named `after`, and of the first
  // compute task that waits for it.
  auto next_compute = [](const models::Workload& w, const std::string& after, bool waiting) {
    const sim::RankClass& rc = w.graph.rank_class(0);
    std::set<std::string> out;
    for (std::size_t i = 0; i < rc.tasks.size(); ++i) {
      if (w.graph.name(rc.tasks[i].name) != after) continue;
      for (std::size_t j = i + 1; j < rc.tasks.size(); ++j) {
        const sim::Task& t = rc.tasks[j];
        if (t.kind != sim::TaskKind::kCompute) continue;
        const auto deps = std::span(rc.deps).subspan(t.deps_begin, t.deps_count);
        if (!waiting || std::find(deps.begin(), deps.end(), static_cast<sim::TaskIndex>(i)) != deps.end()) {
          out.insert(w.graph.name(t.name));
          break;
        }
      }
    }
    return out;
  };
  using Names = std::set<std::string>;
  // Forward: fc1 and its activation after the dispatch is issued, fc2 after the combine; the
  // routed experts and the unpermutation wait for them. Backward: fc2's gradients beside the
  // combine's all-to-all, the activation's and fc1's beside the dispatch's.
  CHECK(next_compute(a, "moe_dispatch_probs_all_to_all", false) == Names{"expert_fc1"});
  CHECK(next_compute(b, "moe_dispatch_probs_all_to_all", false) == Names{"shared_fc1"});
  CHECK(next_compute(a, "moe_combine_all_to_all", false) == Names{"unpermute"});
  CHECK(next_compute(b, "moe_combine_all_to_all", false) == Names{"shared_fc2"});
  CHECK(next_compute(b, "moe_combine_all_to_all", true) == Names{"unpermute"});
  CHECK(next_compute(a, "moe_combine_bwd_all_to_all", false) == Names{"expert_fc2_dgrad"});
  CHECK(next_compute(b, "moe_combine_bwd_all_to_all", false) == Names{"shared_fc2_dgrad"});
  CHECK(next_compute(b, "moe_combine_bwd_all_to_all", true) == Names{"expert_fc2_dgrad"});
  CHECK(next_compute(a, "moe_dispatch_bwd_all_to_all", false) == Names{"permute_bwd"});
  CHECK(next_compute(b, "moe_dispatch_bwd_all_to_all", false) == Names{"shared_swiglu_bwd"});
  CHECK(next_compute(b, "moe_dispatch_bwd_all_to_all", true) == Names{"permute_bwd"});
  // The flex dispatcher runs fc2 after the combine (combine_postprocess).
  CHECK(next_compute(f, "moe_dispatch_all_to_all", false) == Names{"shared_fc1"});
  CHECK(next_compute(f, "moe_combine_all_to_all", true) == Names{"shared_fc2"});
  // The same kernels; the shared expert hides expert-parallel traffic.
  const report::RunResult ra = tests::simulate_file(kGpt, plain), rb = tests::simulate_file(kGpt, overlapped);
  CHECK(rb.breakdown.compute_s == doctest::Approx(ra.breakdown.compute_s).epsilon(1e-9));
  CHECK(rb.breakdown.exposed_communication_s < 0.9 * ra.breakdown.exposed_communication_s);
  CHECK(rb.iteration_time_s < ra.iteration_time_s);
  CHECK(report::summary_text(rb).find("EP 8 +shared-expert overlap DP") != std::string::npos);
  CHECK(report::plan_summary(rb).find("EP 8 +shared-expert overlap DP") != std::string::npos);  // timelines, compare
  check_fidelities_agree(kGpt, overlapped);
  check_fidelities_agree(kGpt, flex);
  // Refused where Megatron-Core would not run it, or where it would do nothing.
  CHECK(load_error(kGpt, with(kMoe, {"training.moe_shared_expert_overlap=true"})).find("with a shared expert") != std::string::npos);
  CHECK(load_error(kGpt, with(overlapped, {"parallelism.pipeline_model_parallel_size=1",
                                                  "training.overlap_moe_expert_parallel_comm=true"}))
                  .find("cannot be combined") !=
        std::string::npos);
}

TEST_CASE("models/parallelism: overlap_param_gather_with_optimizer_step gathers the first chunk's parameters beside the rest of the step") {
  // kLlama: interleaved (PP 2 x2), distributed optimizer with overlap_param_gather, DP 4 on 2 nodes.
  const std::vector<std::string> with_step = {"training.overlap_param_gather_with_optimizer_step=true"};
  const models::Workload a = lowered(kLlama, {}), b = lowered(kLlama, with_step);
  // Stage 0's Adam steps (their kernel bytes) and the parameter gathers issued before the first.
  struct Steps {
    std::vector<std::int64_t> adam_bytes;
    int gathers_before = 0, gathers_between = 0;
  };
  auto steps = [](const models::Workload& w) {
    const sim::RankClass& rc = w.graph.rank_class(0);
    Steps out;
    for (const sim::Task& t : rc.tasks) {
      const std::string n = w.graph.name(t.name);
      if (n == "adam_step") out.adam_bytes.push_back(rc.kernels[t.payload].bytes.count());
      if (n == "param_all_gather") ++(out.adam_bytes.empty() ? out.gathers_before : out.gathers_between);
    }
    return out;
  };
  const Steps sa = steps(a), sb = steps(b);
  // One optimizer over the stage's shard, or the first chunk's then the other's: the same bytes.
  REQUIRE(sa.adam_bytes.size() == 1);
  REQUIRE(sb.adam_bytes.size() == 2);
  CHECK(sb.adam_bytes[0] + sb.adam_bytes[1] == sa.adam_bytes[0]);
  CHECK(sb.adam_bytes[0] > 0);
  CHECK(sb.adam_bytes[1] > 0);
  // The first chunk's gathers moved from the start of the iteration to between the two steps.
  CHECK(sa.gathers_between == 0);
  CHECK(sb.gathers_between >= 1);
  CHECK(sb.gathers_before < sa.gathers_before);
  // The first forward pass no longer waits for them: a shorter step.
  CHECK(tests::simulate_file(kLlama, with_step).iteration_time_s < tests::simulate_file(kLlama, {}).iteration_time_s);
  check_fidelities_agree(kLlama, with_step);
  // Megatron-LM's assertions.
  CHECK(load_error(kLlama, with(with_step, {"training.overlap_param_gather=false"})).find("needs overlap_param_gather") !=
        std::string::npos);
  CHECK(load_error(kLlama, with(with_step, {"parallelism.virtual_pipeline_model_parallel_size=1", "training.pipeline_schedule=\"1f1b\""}))
            .find("interleaved pipeline schedule") != std::string::npos);
  CHECK(load_error(kLlama, with(with_step, {"parallelism.use_distributed_optimizer=false", "training.overlap_param_gather=false"}))
            .find("needs use_distributed_optimizer") != std::string::npos);
}

TEST_CASE("models/parallelism: the precision-aware optimizer reads 16-bit gradients as they are when it holds the master weights") {
  // Llama 3.1 8B golden (BF16, distributed optimizer, gradients reduced in fp32 unless told).
  const std::vector<std::string> bf16 = {"training.grad_reduce_in_fp32=false"};
  const std::vector<std::string> aware = with(bf16, {"training.use_precision_aware_optimizer=true", "training.exp_avg_dtype=\"bf16\"",
                                                     "training.exp_avg_sq_dtype=\"bf16\""});
  const models::Workload a = lowered(kLlama, bf16), b = lowered(kLlama, aware);
  CHECK(!tasks_named(a, 0, "main_grad_to_fp32").empty());
  CHECK(tasks_named(b, 0, "main_grad_to_fp32").empty());
  const sim::Kernel& adam_a = a.graph.rank_class(0).kernels[tasks_named(a, 0, "adam_step").front()->payload];
  const sim::Kernel& adam_b = b.graph.rank_class(0).kernels[tasks_named(b, 0, "adam_step").front()->payload];
  // Per parameter: gradient 4 -> 2 bytes read, master weight and moments 12 -> 6 bytes each way.
  CHECK(adam_b.bytes.count() * 30 == adam_a.bytes.count() * 16);
  CHECK(b.stages[0].static_memory.optimizer_states * 2 == a.stages[0].static_memory.optimizer_states);
  CHECK(tests::simulate_file(kLlama, aware).peak_bytes_per_gpu < tests::simulate_file(kLlama, bf16).peak_bytes_per_gpu);
  // Megatron-Core's conditions.
  auto error = [](const std::vector<std::string>& o) { return load_error(kLlama, o); };
  CHECK(error({"training.exp_avg_dtype=\"bf16\""}).find("without use_precision_aware_optimizer") != std::string::npos);
  CHECK(error({"training.use_precision_aware_optimizer=true", "parallelism.use_distributed_optimizer=false"})
            .find("needs use_distributed_optimizer") != std::string::npos);
  CHECK(error({"training.exp_avg_sq_dtype=\"fp64\""}).find("exp_avg_sq_dtype") != std::string::npos);
}

TEST_CASE("models/parallelism: NeMo 1's distributed_fused_adam steps 16-bit gradients as reduced, and its state as configured") {
  const std::vector<std::string> bf16 = {"training.grad_reduce_in_fp32=false"};
  const std::vector<std::string> apex = with(bf16, {"training.optimizer_implementation=\"apex_distributed_fused_adam\""});
  const std::vector<std::string> apex16 = with(apex, {"training.optimizer_dtype=\"bf16\""});
  const models::Workload a = lowered(kLlama, bf16), b = lowered(kLlama, apex), c = lowered(kLlama, apex16);
  CHECK(!tasks_named(a, 0, "main_grad_to_fp32").empty());
  CHECK(tasks_named(b, 0, "main_grad_to_fp32").empty());
  const auto adam_bytes = [](const models::Workload& w) {
    return w.graph.rank_class(0).kernels[tasks_named(w, 0, "adam_step").front()->payload].bytes.count();
  };
  // Per parameter: gradient 4 -> 2 bytes read; master and moments 12 -> 10 (remainders) -> 4 each way.
  CHECK(adam_bytes(b) * 30 == adam_bytes(a) * 24);
  CHECK(adam_bytes(c) * 30 == adam_bytes(a) * 12);
  CHECK(b.stages[0].static_memory.optimizer_states * 12 == a.stages[0].static_memory.optimizer_states * 10);
  CHECK(c.stages[0].static_memory.optimizer_states * 12 == a.stages[0].static_memory.optimizer_states * 4);
  CHECK(tests::simulate_file(kLlama, apex16).peak_bytes_per_gpu < tests::simulate_file(kLlama, apex).peak_bytes_per_gpu);
  auto error = [](const std::vector<std::string>& o) { return load_error(kLlama, o); };
  CHECK(error({"training.optimizer_dtype=\"bf16\""}).find("apex_distributed_fused_adam") != std::string::npos);
  CHECK(error(with(apex, {"parallelism.use_distributed_optimizer=false"})).find("needs use_distributed_optimizer") != std::string::npos);
  CHECK(error(with(apex, {"training.use_precision_aware_optimizer=true"})).find("use_precision_aware_optimizer does not apply") !=
        std::string::npos);
  CHECK(error({"training.optimizer_implementation=\"apex\""}).find("optimizer_implementation") != std::string::npos);
}

TEST_CASE("models/parallelism: moe_layer_freq puts the dense MLP in the layers it names dense") {
  // Layers 0 and 3 dense: stage 0 holds layers 0-3 (two dense), stage 1 layers 4-7 (none).
  const std::vector<std::string> mixed = with(kMoe, {"model.moe_layer_freq=[0, 1, 1, 0, 1, 1, 1, 1]"});
  const config::Scenario s = config::load_scenario(kGpt, mixed);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  CHECK(w.stages[0].moe_layers == 2);
  CHECK(w.stages[1].moe_layers == 4);
  const std::int64_t mbs = w.microbatches;
  CHECK(static_cast<std::int64_t>(tasks_named(w, 0, "fc1").size()) == 2 * mbs);
  CHECK(static_cast<std::int64_t>(tasks_named(w, 0, "expert_fc1").size()) == 2 * mbs);
  CHECK(tasks_named(w, 1, "fc1").empty());
  // A dense layer's parameters replace an MoE layer's: dense MLP in, experts and router out.
  const models::LayerParams moe_lp = models::layer_params(w.dims);
  const models::LayerParams dense_lp = models::layer_params(models::dense_layer_dims(w.dims));
  const models::Workload all = models::lower(config::load_scenario(kGpt, kMoe).model, s.parallel, s.training, s.num_gpus());
  CHECK(all.stages[0].params.expert - w.stages[0].params.expert == 2 * moe_lp.expert());
  CHECK(w.stages[0].params.dense - all.stages[0].params.dense == 2 * (dense_lp.dense() - moe_lp.dense()));
  CHECK(w.stages[1].params.total() == all.stages[1].params.total());
  // Megatron's formula counts the two kinds of layers apart.
  const double dense_layer = models::model_flops(config::load_scenario(kGpt, {"model={\"preset\": \"mixtral-8x7b\", \"num_layers\": 8, \"num_experts\": 0}"}).model, 1);
  const double moe_layer = models::model_flops(config::load_scenario(kGpt, kMoe).model, 1);
  CHECK(models::model_flops(s.model, 1) == doctest::Approx((2 * dense_layer + 6 * moe_layer) / 8));
}

TEST_CASE("models/parallelism: multi-head latent attention follows Megatron-Core's MLASelfAttention") {
  const config::Scenario s = config::load_scenario(kGpt, kMla);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const models::LayerDims& d = w.dims;
  REQUIRE(d.mla);
  CHECK(d.a == 16);
  CHECK(d.g == d.a);          // a key and a value per head
  CHECK(d.d == 160);          // (128 + 64 + 128) / 2: Q K^T and P V priced exactly
  CHECK(d.dv == 128);
  CHECK(tasks_named(w, 0, "qkv_proj").empty());
  const std::int64_t T = d.tokens(), Ts = d.sharded_tokens();
  auto kernel = [&](const char* name) { return w.graph.rank_class(0).kernels[tasks_named(w, 0, name).front()->payload]; };
  // Down projections: replicated weights on the sequence shard.
  CHECK(kernel("q_down_proj").m == Ts);
  CHECK(kernel("q_down_proj").n == 1536);
  CHECK(kernel("q_down_proj").k == 4096);
  CHECK(kernel("kv_down_proj").n == 512 + 64);
  // Up projections: column-parallel over the all-gathered latent, not the hidden state.
  CHECK(kernel("q_up_proj").m == T);
  CHECK(kernel("q_up_proj").n == 16 * 192);
  CHECK(kernel("q_up_proj").k == 1536);
  CHECK(kernel("kv_up_proj").n == 16 * 256);
  CHECK(collective_bytes(w, 0, *tasks_named(w, 0, "kv_up_proj_all_gather").front()) == 2 * T * 512);
  CHECK(collective_bytes(w, 0, *tasks_named(w, 0, "k_rope_all_gather").front()) == 2 * T * 64);
  // The output projection reads the value heads.
  CHECK(kernel("out_proj").k == 16 * 128);
  // Parameters per TP rank, and the replicated ones summed over the TP group with the norms'.
  const models::LayerParams lp = models::layer_params(d);
  CHECK(lp.qkv == 0);
  CHECK(lp.q_down == 4096 * 1536 + 1536);
  CHECK(lp.q_up == 1536 * 16 * 192);
  CHECK(lp.kv_down == 4096 * (512 + 64) + 512);
  CHECK(lp.kv_up == 512 * 16 * 256);
  CHECK(lp.proj == 16 * 128 * 4096);
  const auto reduce = tasks_named(w, 0, "layernorm_grad_all_reduce");
  REQUIRE(reduce.size() == 1);
  CHECK(collective_bytes(w, 0, *reduce.front()) == 4 * 4 * (2 * lp.norm + lp.q_down + lp.kv_down));  // fp32 grads, 4 layers
  // Megatron's MLA FLOP term, per token and layer (FMA x 3 passes), causal half of the scores.
  const double h = 4096, a = 32, seq = static_cast<double>(s.model.seq_length);
  const double mla = 1536 * (h + a * 192 + 1) + 512 * (h + a * 256 + 1) + h * 64 + a * 128 * h + seq * a * 192 / 2 + seq * a * 128 / 2;
  models::ModelSpec plain = s.model;
  plain.multi_latent_attention = false;
  plain.num_query_groups = 8;
  const double gqa = 12 * seq * h * h * (1 + 8 / a + seq / h);  // Megatron's GQA attention term, per layer
  CHECK(models::model_flops(s.model, 1) - models::model_flops(plain, 1) == doctest::Approx(8 * (6 * seq * mla - gqa)).epsilon(1e-9));
}

TEST_CASE("models/parallelism: recompute_modules mla_up_proj runs MLA's up projections again and keeps no Q, K, V") {
  const std::vector<std::string> up = with(kMla, {"training.recompute_granularity=\"selective\"", "training.recompute_modules=[\"mla_up_proj\"]"});
  const config::Scenario s = config::load_scenario(kGpt, up);
  CHECK_FALSE(s.training.recomputes_core_attention());
  CHECK(s.training.recomputes_mla_up_proj());
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  // Forward and recomputation: twice the up projections of a plain run, no second attention.
  const models::Workload plain = models::lower(config::load_scenario(kGpt, kMla).model, s.parallel,
                                               config::load_scenario(kGpt, kMla).training, s.num_gpus());
  CHECK(tasks_named(w, 0, "q_up_proj").size() == 2 * tasks_named(plain, 0, "q_up_proj").size());
  CHECK(tasks_named(w, 0, "kv_up_proj").size() == 2 * tasks_named(plain, 0, "kv_up_proj").size());
  CHECK(tasks_named(w, 0, "flash_attention_fwd").size() == tasks_named(plain, 0, "flash_attention_fwd").size());
  // Q, K and V (16 heads of 192 + 192 + 128, 2 bytes) are not kept.
  const models::LayerDims& d = w.dims;
  CHECK(models::layer_activation_bytes(plain.dims, false) - models::layer_activation_bytes(d, false) == 2 * d.tokens() * 16 * 512);
  // Hardware FLOPs add the up projections' forward once per layer.
  const double seq = static_cast<double>(s.model.seq_length);
  CHECK(w.flops.hardware - w.flops.model ==
        doctest::Approx(32.0 * 8 * 2 * seq * 32 * (1536 * 192 + 512 * 256)).epsilon(1e-9));  // batch 32, 8 layers, 32 heads
}

TEST_CASE("models/parallelism: recompute_modules moe runs the whole MoE layer again, all-to-alls included, mlp the dense MLP") {
  // kMoe with two dense layers among the six MoE ones, and a shared expert.
  const std::vector<std::string> base =
      with(kMoe, {"model.moe_layer_freq=[0, 1, 1, 0, 1, 1, 1, 1]", "model.moe_shared_expert_intermediate_size=4096",
                  "training.recompute_granularity=\"selective\""});
  const config::Scenario plain = config::load_scenario(kGpt, with(base, {"training.recompute_modules=[\"core_attn\"]"}));
  const config::Scenario moe = config::load_scenario(kGpt, with(base, {"training.recompute_modules=[\"core_attn\", \"moe\"]"}));
  const config::Scenario mlp = config::load_scenario(kGpt, with(base, {"training.recompute_modules=[\"core_attn\", \"mlp\"]"}));
  const models::Workload wp = models::lower(plain.model, plain.parallel, plain.training, plain.num_gpus());
  const models::Workload wm = models::lower(moe.model, moe.parallel, moe.training, moe.num_gpus());
  const models::Workload wd = models::lower(mlp.model, mlp.parallel, mlp.training, mlp.num_gpus());
  // Stage 0 holds layers 0-3: MoE layers 1 and 2, dense layers 0 and 3.
  for (const char* name : {"router", "expert_fc1", "expert_fc2", "moe_dispatch_all_to_all", "moe_combine_all_to_all", "shared_fc1"}) {
    CAPTURE(name);
    CHECK(tasks_named(wm, 0, name).size() == 2 * tasks_named(wp, 0, name).size());
    CHECK(tasks_named(wd, 0, name).size() == tasks_named(wp, 0, name).size());
  }
  // The dense MLP's fc1: once per dense layer and micro-batch more under "mlp" (the shared
  // expert's is shared_fc1), none under "moe".
  const std::size_t dense_fc1 = tasks_named(wp, 0, "fc1").size();
  CHECK(dense_fc1 > 0);
  CHECK(tasks_named(wd, 0, "fc1").size() == 2 * dense_fc1);
  CHECK(tasks_named(wm, 0, "fc1").size() == dense_fc1);
  // What stays saved: the block's input instead of its internals.
  const models::LayerDims dense = models::dense_layer_dims(wd.dims);
  CHECK(models::layer_activation_bytes(wm.dims, true) < models::layer_activation_bytes(wp.dims, true));
  CHECK(models::layer_activation_bytes(dense, true) < models::layer_activation_bytes(models::dense_layer_dims(wp.dims), true));
  const std::int64_t moe_extra =
      models::layer_activation_bytes(wp.dims, true) - models::layer_activation_bytes(models::dense_layer_dims(wp.dims), true);
  CHECK(moe_extra > 0);  // the MoE layer keeps more than the dense one without recomputation
  CHECK(models::layer_activation_bytes(wm.dims, true) - models::layer_activation_bytes(dense, true) == 0);  // both keep only the input
  // Hardware FLOPs: Megatron's MLP terms forward again (6 MoE layers with top-2 experts of 14,336
  // and the shared one; 2 dense layers of 14,336), 32 sequences of 4,096 tokens, hidden 4,096.
  const double h = 4096, seq = static_cast<double>(plain.model.seq_length), gated = 1.5;
  const double moe_mlp = 4 * seq * h * h * (14336.0 * 2 + 4096) / h * gated;
  const double dense_mlp = 4 * seq * h * h * 14336.0 / h * gated;
  CHECK(wm.flops.hardware - wp.flops.hardware == doctest::Approx(32 * 6 * moe_mlp).epsilon(1e-9));
  CHECK(wd.flops.hardware - wp.flops.hardware == doctest::Approx(32 * 2 * dense_mlp).epsilon(1e-9));
  CHECK(wm.flops.model == wp.flops.model);
  // Simulated: slower, and lighter.
  const auto rp = tests::simulate_file(kGpt, with(base, {"training.recompute_modules=[\"core_attn\"]"}));
  const auto rm = tests::simulate_file(kGpt, with(base, {"training.recompute_modules=[\"core_attn\", \"moe\"]"}));
  CHECK(rm.iteration_time_s > rp.iteration_time_s);
  CHECK(rm.breakdown.recompute_s > rp.breakdown.recompute_s);
  CHECK(rm.peak_bytes_per_gpu < rp.peak_bytes_per_gpu);
}

TEST_CASE("models/parallelism: ZeRO-3 gathers every layer in forward and backward and reduce-scatters its gradients") {
  const config::Scenario s = config::load_scenario(kGpt, {"parallelism.zero_stage=3"});
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const std::int64_t layers = 18, mbs = w.microbatches;
  const auto gathers = tasks_named(w, 0, "fsdp_param_all_gather");
  const auto scatters = tasks_named(w, 0, "fsdp_grad_reduce_scatter");
  // Layers plus the embedding, each gathered for every forward and backward pass.
  CHECK(static_cast<std::int64_t>(gathers.size()) == 2 * (layers + 1) * mbs);
  CHECK(static_cast<std::int64_t>(scatters.size()) == (layers + 1) * mbs);
  const models::LayerParams lp = models::layer_params(w.dims);
  bool layer_sized = false;
  for (const sim::Task* t : gathers) layer_sized |= collective_bytes(w, 0, *t) == 2 * lp.dense();
  CHECK(layer_sized);
  // Weights, gradients and optimizer state sharded over the 4 data-parallel ranks.
  const auto z0 = tests::simulate_file(kGpt, {});
  const auto z3 = tests::simulate_file(kGpt, {"parallelism.zero_stage=3"});
  for (std::size_t st = 0; st < 2; ++st) {
    CHECK(static_cast<double>(z3.stages[st].static_memory.weights) ==
          doctest::Approx(static_cast<double>(z0.stages[st].static_memory.weights) / 4)
              .epsilon(0.001));
    // The main gradients; Transformer Engine's placeholders are per GEMM shape, never sharded.
    const auto main_grads = [&](const report::RunResult& r) {
      return static_cast<double>(r.stages[st].static_memory.gradients -
                                 r.stages[st].static_memory.wgrad_placeholders);
    };
    CHECK(main_grads(z3) == doctest::Approx(main_grads(z0) / 4).epsilon(0.001));
    CHECK(z3.stages[st].static_memory.wgrad_placeholders ==
          z0.stages[st].static_memory.wgrad_placeholders);
  }
  CHECK(z3.peak_bytes_per_gpu < z0.peak_bytes_per_gpu);
}

TEST_CASE("models/parallelism: gradient buckets use Megatron's default size and stage rules") {
  const config::Scenario s = config::load_scenario(kGpt, {});
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  // Stage 0 buckets by max(40M, 1M x DP) = 40M parameters; later stages reduce in one bucket.
  const auto stage0 = tasks_named(w, 0, "grad_all_reduce");
  const auto stage1 = tasks_named(w, 1, "grad_all_reduce");
  const std::int64_t params0 = w.stages[0].parameters;
  REQUIRE(stage0.size() > 2);
  CHECK(stage0.size() <= static_cast<std::size_t>(params0 / 40'000'000));
  for (std::size_t i = 0; i + 1 < stage0.size(); ++i) {
    // Each full bucket reaches 40M parameters with the gradient that closes it (at most one
    // fc1 weight, h x 4h / TP, beyond).
    CHECK(collective_bytes(w, 0, *stage0[i]) >= 4 * 40'000'000);
    CHECK(collective_bytes(w, 0, *stage0[i]) < 4 * (40'000'000 + 4096 * 4096));
  }
  REQUIRE(stage1.size() == 1);
  CHECK(collective_bytes(w, 1, *stage1.front()) == 4 * w.stages[1].parameters);
  std::int64_t total = 0;
  for (const sim::Task* t : stage0) total += collective_bytes(w, 0, *t);
  CHECK(total == 4 * params0);
  // A smaller configured bucket gives more collectives over the same bytes.
  const config::Scenario small = config::load_scenario(kGpt, {"training.ddp_bucket_size=10000000"});
  const models::Workload ws = models::lower(small.model, small.parallel, small.training, small.num_gpus());
  CHECK(tasks_named(ws, 0, "grad_all_reduce").size() > stage0.size());
}

TEST_CASE("models/parallelism: overlap knobs hide communication") {
  // Transformer Engine's userbuffers overlap hides most tensor-parallel communication.
  const auto base = tests::simulate_file(kLlama, {});
  const auto tp_overlap = tests::simulate_file(kLlama, {"training.tp_comm_overlap=true"});
  auto exposed = [](const report::RunResult& r, const std::string& kind) {
    for (const auto& [k, v] : r.breakdown.exposed_by_kind) {
      if (k == kind) return v;
    }
    return 0.0;
  };
  CHECK(exposed(tp_overlap, "tp") < 0.5 * exposed(base, "tp"));
  CHECK(tp_overlap.iteration_time_s < base.iteration_time_s);
  // Without sequence parallelism the input-gradient all-reduce overlaps the weight-gradient GEMM;
  // Megatron-LM before its asynchronous all-reduce (2021) blocked on it: one all-reduce per
  // column-parallel layer (QKV, fc1; the logits on the last stage) moves from hidden to exposed.
  const std::vector<std::string> no_sp = {"parallelism.sequence_parallel=false"};
  const auto async = tests::simulate_file(kGpt, no_sp);
  const auto sync = tests::simulate_file(kGpt, with(no_sp, {"training.async_tensor_model_parallel_allreduce=false"}));
  CHECK(exposed(sync, "tp") > exposed(async, "tp"));
  CHECK(sync.iteration_time_s > async.iteration_time_s);
  CHECK(sync.workload->flops.hardware == async.workload->flops.hardware);
  // Scatter/gather (Megatron-LM 2021-22, no sequence parallelism): each tensor-parallel rank sends
  // a 1/TP slice over its own NIC and the receiver all-gathers over NVLink, instead of every rank
  // sending the whole activation between nodes (the stages here sit on different nodes).
  const auto whole = tests::simulate_file(kGpt, no_sp);
  const auto sliced = tests::simulate_file(kGpt, with(no_sp, {"training.scatter_gather_tensors_in_pipeline=true"}));
  CHECK(exposed(sliced, "pp") < 0.7 * exposed(whole, "pp"));
  CHECK(sliced.iteration_time_s < whole.iteration_time_s);
  CHECK(sliced.workload->flops.hardware == whole.workload->flops.hardware);
  // Non-blocking pipeline sends and receives hide pipeline transfers.
  const auto p2p = tests::simulate_file(kLlama, {"training.overlap_p2p_comm=true"});
  CHECK(exposed(p2p, "pp") < exposed(base, "pp"));
  // Gathering parameters bucket by bucket inside the forward pass instead of after the step
  // (pure data parallelism, where stage 0 buckets its whole model).
  const std::string dp32 = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-1.7b-dp32-a100.json";
  const auto gather_after_step = tests::simulate_file(dp32, {"parallelism.use_distributed_optimizer=true"});
  const auto gather_in_forward = tests::simulate_file(dp32, {"parallelism.use_distributed_optimizer=true", "training.overlap_param_gather=true"});
  CHECK(exposed(gather_in_forward, "dp") < 0.6 * exposed(gather_after_step, "dp"));
  CHECK(gather_in_forward.iteration_time_s < gather_after_step.iteration_time_s);
  // FP8 GEMMs shorten the iteration; TE's FP8 weight copies add 2 bytes per GEMM weight.
  const auto fp8 = tests::simulate_file(kLlama, {"training.precision=\"fp8\""});
  CHECK(fp8.iteration_time_s < base.iteration_time_s);
  CHECK(fp8.stages[0].static_memory.weights > base.stages[0].static_memory.weights);
  CHECK(fp8.stages[0].static_memory.weights - base.stages[0].static_memory.weights ==
        2 * fp8.workload->stages[0].params.fp8_gemm);
}

TEST_CASE("models/parallelism: context parallelism divides activation memory") {
  const std::vector<std::string> one = {"parallelism.virtual_pipeline_model_parallel_size=1", "training.pipeline_schedule=\"1f1b\""};
  const auto cp1 = tests::simulate_file(kLlama, one);
  const auto cp2 = tests::simulate_file(kLlama, with(one, {"parallelism.context_parallel_size=2"}));
  // Context parallelism halves data parallelism, so a rank runs twice the micro-batches of half
  // the tokens each.
  CHECK(cp2.workload->microbatches == 2 * cp1.workload->microbatches);
  CHECK(models::layer_activation_bytes(cp2.workload->dims, false) * 2 == models::layer_activation_bytes(cp1.workload->dims, false));
}

TEST_CASE("models/parallelism: the attention implementation picks its own calibration") {
  // H100's calibration prices flash attention with cuDNN's kernels; FlashAttention-2's Hopper
  // benchmarks (Shah et al. 2024) reach about half their speed, so the same plan is slower and
  // runs the same FLOPs.
  const auto cudnn = tests::simulate_file(kLlama);
  const auto fa2 = tests::simulate_file(kLlama, {"training.attention_implementation=\"flash_attention_2\""});
  const auto named = tests::simulate_file(kLlama, {"training.attention_implementation=\"cudnn\""});
  CHECK(fa2.iteration_time_s > cudnn.iteration_time_s);
  CHECK(named.iteration_time_s == cudnn.iteration_time_s);
  CHECK(fa2.workload->flops.hardware == cudnn.workload->flops.hardware);
  const config::Scenario s = config::load_scenario(kLlama, {"training.attention_implementation=\"flash_attention_2\""});
  CHECK(s.cluster.gpu.calibration.attention.implementation == "flash_attention_2");
}

TEST_CASE("models/parallelism: plan validation follows Megatron's rules") {
  auto error = [](const std::string& file, const std::vector<std::string>& o) { return load_error(file, o); };
  CHECK(error(kGpt, {"training.tp_comm_overlap=true", "parallelism.sequence_parallel=false"}).find("tp_comm_overlap") !=
        std::string::npos);
  CHECK(error(kGpt, with(kMoe, {"parallelism.sequence_parallel=false"})).find("sequence_parallel") != std::string::npos);
  CHECK(error(kGpt, {"training.async_tensor_model_parallel_allreduce=false"}).find("async_tensor_model_parallel_allreduce") !=
        std::string::npos);
  CHECK(error(kLlama, {"training.attention_implementation=\"flash_attention_9\""}).find("\"cudnn\", \"flash_attention_2\"") !=
        std::string::npos);
  CHECK(error(kGpt, {"training.attention_implementation=\"cudnn\"", "training.attention_kernel=\"unfused\"",
                     "parallelism.sequence_parallel=false"})
            .find("attention_implementation") != std::string::npos);
  CHECK(error(kGpt, {"training.scatter_gather_tensors_in_pipeline=true"}).find("scatter_gather_tensors_in_pipeline") !=
        std::string::npos);
  CHECK(error(kLlama, {"parallelism.sequence_parallel=false", "training.overlap_p2p_comm=true",
                       "training.scatter_gather_tensors_in_pipeline=true"})
            .find("overlap_p2p_comm") != std::string::npos);
  CHECK(error(kGpt, with(kMoe, {"parallelism.expert_tensor_parallel_size=4", "parallelism.expert_model_parallel_size=4"}))
            .find("expert_tensor_parallel_size") != std::string::npos);
  CHECK(error(kLlama, {"parallelism.context_parallel_size=2", "training.attention_kernel=\"unfused\"",
                       "parallelism.virtual_pipeline_model_parallel_size=1", "training.pipeline_schedule=\"1f1b\""})
            .find("attention_kernel") != std::string::npos);
  // Interleaving: group size within [pp, micro-batches]; last group empty or >= pp.
  CHECK(error(kLlama, {"parallelism.microbatch_group_size_per_vp_stage=3", "training.global_batch_size=16"}).find("last group") !=
        std::string::npos);
  CHECK(error(kLlama, {"parallelism.microbatch_group_size_per_vp_stage=3", "training.global_batch_size=20"}).empty());
  CHECK(error(kLlama, {"parallelism.microbatch_group_size_per_vp_stage=3", "training.global_batch_size=8"}).find("group size") !=
        std::string::npos);
  CHECK(error(kGpt, {"parallelism.zero_stage=3", "training.overlap_param_gather=true"}).find("overlap_param_gather") !=
        std::string::npos);
  CHECK(error(kGpt, {"parallelism.zero_stage=3"}).empty());  // ZeRO-3 with pipeline parallelism is allowed
}

TEST_CASE("models/parallelism: aligned parameter gathers start on every stage with the schedule") {
  // Megatron's align_param_gather (on by default; NeMo sets it with virtual stages): every stage
  // dispatches the gathers of its first two chunks when the interleaved schedule starts, instead
  // of a stage after the first dispatching its chunk's gather only in the forward pre-hook,
  // after its first input arrives. Stages after the first keep one bucket per chunk.
  const std::vector<std::string> plan = {"parallelism.pipeline_model_parallel_size=4",
                                         "parallelism.virtual_pipeline_model_parallel_size=4"};
  const std::vector<std::string> unaligned = with(plan, {"training.align_param_gather=false"});
  const config::Scenario s = config::load_scenario(kLlama, plan);
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
  const config::Scenario su = config::load_scenario(kLlama, unaligned);
  const models::Workload wu = models::lower(su.model, su.parallel, su.training, su.num_gpus());
  // Index of the first task of stage `cls` that is compute, a pipeline transfer or a gather.
  auto first = [](const models::Workload& wl, std::uint32_t cls, auto&& pred) {
    const auto& tasks = wl.graph.rank_class(cls).tasks;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (pred(wl, tasks[i])) return i;
    }
    return tasks.size();
  };
  auto is_compute = [](const models::Workload&, const sim::Task& t) { return t.kind == sim::TaskKind::kCompute; };
  auto is_gather = [](const models::Workload& wl, const sim::Task& t) { return wl.graph.name(t.name) == "param_all_gather"; };
  for (std::uint32_t cls = 1; cls < 4; ++cls) {
    CAPTURE(cls);
    REQUIRE(tasks_named(w, cls, "param_all_gather").size() == 4);  // one bucket per chunk
    // Aligned: chunks 0 and 1 are gathered before anything else the stage does.
    CHECK(first(w, cls, is_gather) == 0);
    CHECK(is_gather(w, w.graph.rank_class(cls).tasks[1]));
    CHECK(first(w, cls, is_compute) > 1);
    // Unaligned: the first gather waits for the stage's first forward pass to be reached.
    CHECK(first(wu, cls, is_gather) > first(wu, cls, [](const models::Workload&, const sim::Task& t) {
            return t.kind == sim::TaskKind::kPointToPoint;
          }));
  }
  // Every chunk is gathered exactly once either way.
  CHECK(tasks_named(w, 0, "param_all_gather").size() == tasks_named(wu, 0, "param_all_gather").size());
  // The unaligned stages each delay the pipeline's fill by a chunk's gather; aligned they do not.
  const auto aligned_run = tests::simulate_file(kLlama, plan);
  const auto unaligned_run = tests::simulate_file(kLlama, unaligned);
  CHECK(aligned_run.iteration_time_s < unaligned_run.iteration_time_s);
  CHECK(aligned_run.workload->flops.hardware == unaligned_run.workload->flops.hardware);
  // Without virtual stages Megatron turns the alignment off: 1F1B is the same either way.
  const std::vector<std::string> one = {"parallelism.virtual_pipeline_model_parallel_size=1", "training.pipeline_schedule=\"1f1b\""};
  CHECK(tests::simulate_file(kLlama, one).iteration_time_s ==
        tests::simulate_file(kLlama, with(one, {"training.align_param_gather=false"})).iteration_time_s);
}

TEST_CASE("models/parallelism: FP8 recipes price Transformer Engine's quantization") {
  // Llama-3.1 8B with TP 2 and sequence parallelism: the QKV input is cast on its sequence shard,
  // then all-gathered in FP8.
  const std::string b200 = "cluster={\"preset\": \"dgx-b200\", \"num_nodes\": 2}";
  const models::Workload delayed = lowered(kLlama, {"training.precision=\"fp8\""});
  const std::int64_t n = delayed.dims.sharded_tokens() * delayed.dims.h;
  // Delayed scaling on Hopper: one read, the row-wise and the transposed copy written; the amax
  // history is all-reduced at the end of each pass.
  CHECK(kernel(delayed, "qkv_proj_input_cast").bytes.count() == 2 * n + 2 * n);
  CHECK(!tasks_named(delayed, 0, "fp8_amax_all_reduce").empty());
  CHECK(tasks_named(delayed, 0, "qkv_proj_input_cast_amax_all_reduce").empty());
  // Current scaling: an amax pass first, reduced over the TP group before the gathered cast;
  // no amax history.
  const models::Workload tensorwise = lowered(kLlama, {"training.precision=\"fp8\"", "training.fp8_recipe=\"tensorwise\""});
  CHECK(kernel(tensorwise, "qkv_proj_input_cast_amax").bytes.count() == 2 * n);
  CHECK(kernel(tensorwise, "qkv_proj_input_cast").bytes.count() == 2 * n + 2 * n);
  CHECK(tasks_named(tensorwise, 0, "qkv_proj_input_cast_amax_all_reduce").size() ==
        tasks_named(tensorwise, 0, "qkv_proj_input_cast").size());
  CHECK(tasks_named(tensorwise, 0, "fp8_amax_all_reduce").empty());
  // Blackwell reads the row-wise copy column-wise: per-tensor casts write one copy. MXFP8 writes
  // both (its 1x32 and 32x1 blocks differ) with one scale byte per 32 elements, gathers the
  // scales too, and its GEMMs are block-scaled.
  const models::Workload blackwell = lowered(kLlama, {"training.precision=\"fp8\"", b200});
  CHECK(kernel(blackwell, "qkv_proj_input_cast").bytes.count() == 2 * n + n);
  CHECK(!kernel(blackwell, "qkv_proj").block_scaled);
  const models::Workload mx = lowered(kLlama, {"training.precision=\"fp8\"", "training.fp8_recipe=\"mxfp8\"", b200});
  CHECK(kernel(mx, "qkv_proj_input_cast").bytes.count() == 2 * n + 2 * (n + n / 32));
  CHECK(kernel(mx, "qkv_proj").block_scaled);
  CHECK(tasks_named(mx, 0, "fp8_amax_all_reduce").empty());
  const auto gather = tasks_named(mx, 0, "qkv_proj_all_gather");
  REQUIRE(!gather.empty());
  const std::int64_t gathered = delayed.dims.tokens() * delayed.dims.h;
  CHECK(mx.graph.rank_class(0).comm_ops[gather.front()->payload].bytes.count() == gathered + gathered / 32);
  // End to end: the extra pass makes current scaling slower than delayed scaling on H100, and
  // MXFP8 slower than delayed scaling on B200 (both copies, block-scaled GEMM kernels), as
  // Transformer Engine's GEMM profiling measured on H200 and B300.
  const double h100_delayed = tests::simulate_file(kLlama, {"training.precision=\"fp8\""}).iteration_time_s;
  CHECK(tests::simulate_file(kLlama, {"training.precision=\"fp8\"", "training.fp8_recipe=\"tensorwise\""}).iteration_time_s >
        h100_delayed);
  const double b200_delayed = tests::simulate_file(kLlama, {"training.precision=\"fp8\"", b200}).iteration_time_s;
  CHECK(tests::simulate_file(kLlama, {"training.precision=\"fp8\"", "training.fp8_recipe=\"mxfp8\"", b200}).iteration_time_s >
        b200_delayed);
}

TEST_CASE("models/parallelism: FP8 parameter gathers keep the weights in FP8 only") {
  // Llama-3.1 8B with the distributed optimizer gathering parameters in the forward pass.
  const std::string b200 = "cluster={\"preset\": \"dgx-b200\", \"num_nodes\": 2}";
  auto gathered = [](const models::Workload& w) {
    std::int64_t bytes = 0;
    for (const sim::Task* t : tasks_named(w, 0, "param_all_gather")) bytes += w.graph.rank_class(0).comm_ops[t->payload].bytes.count();
    return bytes;
  };
  const models::Workload cast = lowered(kLlama, {"training.precision=\"fp8\""});
  const models::Workload fp8 = lowered(kLlama, {"training.precision=\"fp8\"", "training.fp8_param_gather=true"});
  const std::int64_t params = cast.stages[0].params.total(), fp8_weights = cast.stages[0].params.fp8_gemm;
  REQUIRE(fp8_weights > 0);
  // No 16-bit copy of the FP8 GEMM weights: 2 bytes less for each, the FP8 copies kept.
  CHECK(cast.stages[0].static_memory.weights - fp8.stages[0].static_memory.weights == 2 * fp8_weights);
  // Each parameter gathered once; the FP8 weights in one byte (the row-wise copy).
  CHECK(gathered(cast) == 2 * params);
  CHECK(gathered(fp8) == 2 * (params - fp8_weights) + fp8_weights);
  // The per-iteration 16-bit -> FP8 cast is gone: the optimizer quantizes its shard, and Hopper
  // transposes the gathered row-wise copy.
  CHECK(tasks_named(fp8, 0, "fp8_weight_cast").empty());
  CHECK(!tasks_named(fp8, 0, "fp8_weight_transpose").empty());
  CHECK(!tasks_named(fp8, 0, "fp8_param_quantize").empty());
  // Blackwell needs no transpose; MXFP8 gathers both copies with their scales.
  CHECK(tasks_named(lowered(kLlama, {"training.precision=\"fp8\"", "training.fp8_param_gather=true", b200}), 0, "fp8_weight_transpose").empty());
  const models::Workload mx = lowered(kLlama, {"training.precision=\"fp8\"", "training.fp8_param_gather=true", "training.fp8_recipe=\"mxfp8\"", b200});
  CHECK(gathered(mx) == 2 * (params - fp8_weights) + 2 * (fp8_weights + fp8_weights / 32));
  // ZeRO-3 keeps a shard of the gathered row-wise FP8 copy instead of a shard of 16-bit weights.
  const std::vector<std::string> zero3 = {"parallelism.use_distributed_optimizer=false", "parallelism.zero_stage=3",
                                          "training.overlap_param_gather=false", "training.precision=\"fp8\""};
  const models::Workload z = lowered(kLlama, zero3);
  const models::Workload zg = lowered(kLlama, with(zero3, {"training.fp8_param_gather=true"}));
  const std::int64_t dp = z.data_parallel_size;
  CHECK(z.stages[0].static_memory.weights - zg.stages[0].static_memory.weights ==
        doctest::Approx(static_cast<double>(fp8_weights) / static_cast<double>(dp)).epsilon(1e-3));
  // End to end: less to cast and to gather.
  CHECK(tests::simulate_file(kLlama, {"training.precision=\"fp8\"", "training.fp8_param_gather=true"}).iteration_time_s <
        tests::simulate_file(kLlama, {"training.precision=\"fp8\""}).iteration_time_s);
}

TEST_CASE("models/parallelism: NVFP4 (precision fp4) casts in 16-element blocks and runs FP4 GEMMs") {
  // Llama-3.1 8B with TP 2 and sequence parallelism on B200, as the FP8 recipes above.
  const std::string b200 = "cluster={\"preset\": \"dgx-b200\", \"num_nodes\": 2}";
  auto nvfp4 = [](std::int64_t n) { return (n + 1) / 2 + n / 16; };  // E2M1 values and an E4M3 scale per 16
  const models::Workload nv = lowered(kLlama, {"training.precision=\"fp4\"", b200});
  const std::int64_t n = nv.dims.sharded_tokens() * nv.dims.h;
  // The per-tensor scale needs an amax pass, reduced over the TP group before the gathered cast;
  // then both copies (1x16 and 16x1 blocks differ), gathered in NVFP4.
  CHECK(kernel(nv, "qkv_proj_input_cast_amax").bytes.count() == 2 * n);
  CHECK(kernel(nv, "qkv_proj_input_cast").bytes.count() == 2 * n + 2 * nvfp4(n));
  CHECK(tasks_named(nv, 0, "qkv_proj_input_cast_amax_all_reduce").size() == tasks_named(nv, 0, "qkv_proj_input_cast").size());
  CHECK(tasks_named(nv, 0, "fp8_amax_all_reduce").empty());
  const auto gather = tasks_named(nv, 0, "qkv_proj_all_gather");
  REQUIRE(!gather.empty());
  CHECK(nv.graph.rank_class(0).comm_ops[gather.front()->payload].bytes.count() == nvfp4(nv.dims.tokens() * nv.dims.h));
  // The decoder's GEMMs run on FP4 tensor cores; attention and the logits stay 16-bit.
  CHECK(kernel(nv, "qkv_proj").dtype == sim::DataType::kFp4);
  CHECK(kernel(nv, "fc2").dtype == sim::DataType::kFp4);
  const auto last = static_cast<std::uint32_t>(nv.graph.num_classes() - 1);
  const auto logits = tasks_named(nv, last, "logits");
  REQUIRE(!logits.empty());
  CHECK(nv.graph.rank_class(last).kernels[logits.front()->payload].dtype == sim::DataType::kBf16);
  CHECK(kernel(nv, "qkv_proj").bytes.count() < kernel(lowered(kLlama, {"training.precision=\"fp8\"", b200}), "qkv_proj").bytes.count());
  // fp4_param_gather: the optimizer quantizes its shard; the gather moves the packed row-wise
  // copy (16x16 weight blocks make the column-wise copy its transpose, made after the gather).
  auto gathered = [](const models::Workload& w) {
    std::int64_t bytes = 0;
    for (const sim::Task* t : tasks_named(w, 0, "param_all_gather")) bytes += w.graph.rank_class(0).comm_ops[t->payload].bytes.count();
    return bytes;
  };
  const models::Workload pg = lowered(kLlama, {"training.precision=\"fp4\"", "training.fp4_param_gather=true", b200});
  const std::int64_t params = nv.stages[0].params.total(), w = nv.stages[0].params.fp8_gemm;
  REQUIRE(w > 0);
  CHECK(gathered(nv) == 2 * params);
  CHECK(static_cast<double>(gathered(pg)) == doctest::Approx(static_cast<double>(2 * (params - w) + nvfp4(w))).epsilon(1e-6));
  CHECK(kernel(nv, "fp4_weight_cast").bytes.count() > 0);
  CHECK(tasks_named(pg, 0, "fp4_weight_cast").empty());
  CHECK(kernel(pg, "fp4_weight_transpose").bytes.count() > 0);
  CHECK(!tasks_named(pg, 0, "fp4_param_quantize").empty());
  // No 16-bit copy of the FP4 GEMM weights; their two NVFP4 copies are kept either way.
  CHECK(nv.stages[0].static_memory.weights - pg.stages[0].static_memory.weights == 2 * w);
  // End to end on B200: FP4 GEMMs make the step faster than MXFP8's, its casts slower.
  const auto fp4_run = tests::simulate_file(kLlama, {"training.precision=\"fp4\"", b200});
  const auto mx_run = tests::simulate_file(kLlama, {"training.precision=\"fp8\"", "training.fp8_recipe=\"mxfp8\"", b200});
  CHECK(fp4_run.iteration_time_s < mx_run.iteration_time_s);
  auto quantization = [](const auto& run) {
    for (const auto& [kind, s] : run.breakdown.compute_by_kernel) {
      if (kind == "fp8_quantization") return s;
    }
    return 0.0;
  };
  CHECK(quantization(fp4_run) > quantization(mx_run));
}

TEST_CASE("models/parallelism: precision fp4 is refused where it cannot run") {
  const std::string b200 = "cluster={\"preset\": \"dgx-b200\", \"num_nodes\": 2}";
  CHECK(load_error(kLlama, {"training.precision=\"fp4\""}).find("/training/precision: fp4 (NVFP4) needs Blackwell") != std::string::npos);
  CHECK(load_error(kLlama, {"training.fp4_recipe=\"nvfp4\""}).find("/training/fp4_recipe: applies with precision \"fp4\" only") !=
        std::string::npos);
  CHECK(load_error(kLlama, {"training.precision=\"fp4\"", "training.fp8_recipe=\"mxfp8\"", b200}).find("/training/fp8_recipe") !=
        std::string::npos);
  CHECK(load_error(kLlama, {"training.precision=\"fp8\"", "training.fp4_param_gather=true"}).find("/training/fp4_param_gather") !=
        std::string::npos);
  CHECK(load_error(kLlama, {"training.precision=\"fp4\"", "training.fp4_recipe=\"mxfp4\"", b200}).find("/training/fp4_recipe") !=
        std::string::npos);
  CHECK(load_error(kLlama, {"training.precision=\"fp4\"", "training.fp4_param_gather=true", "parallelism.use_distributed_optimizer=false",
                            "training.overlap_param_gather=false", b200})
            .find("/training/fp4_param_gather: needs a sharded optimizer") != std::string::npos);
  CHECK(load_error(kLlama, {"training.precision=\"fp4\"", "training.fp4_recipe=\"nvfp4\"", b200}).empty());
}

TEST_CASE("models/parallelism: first_last_layers_bf16 keeps the first and last decoder layers' GEMMs in 16 bits") {
  // Llama-3.1 8B (32 layers) in FP8 current scaling, TP 2, PP 2 with two virtual stages: layer 0
  // opens stage 0's first chunk, layer 31 closes the last stage's last chunk.
  const std::vector<std::string> fp8 = {"training.precision=\"fp8\"", "training.fp8_recipe=\"tensorwise\""};
  const models::Workload q = lowered(kLlama, fp8);
  const models::Workload w = lowered(kLlama, with(fp8, {"training.first_last_layers_bf16=true", "training.num_layers_at_end_in_bf16=2"}));
  const auto last = static_cast<std::uint32_t>(w.graph.num_classes() - 1);
  auto qkv_types = [](const models::Workload& wl, std::uint32_t cls) {
    std::map<std::int32_t, sim::DataType> by_layer;
    for (const sim::Task* t : tasks_named(wl, cls, "qkv_proj")) by_layer[t->layer] = wl.graph.rank_class(cls).kernels[t->payload].dtype;
    return by_layer;
  };
  const auto first_stage = qkv_types(w, 0), last_stage = qkv_types(w, last);
  REQUIRE(first_stage.count(0) == 1);
  REQUIRE(first_stage.count(1) == 1);
  CHECK(first_stage.at(0) == sim::DataType::kBf16);
  CHECK(first_stage.at(1) == sim::DataType::kFp8);
  REQUIRE(last_stage.count(31) == 1);
  REQUIRE(last_stage.count(29) == 1);
  CHECK(last_stage.at(31) == sim::DataType::kBf16);
  CHECK(last_stage.at(30) == sim::DataType::kBf16);
  CHECK(last_stage.at(29) == sim::DataType::kFp8);
  // The 16-bit layers cast nothing: stage 0 loses the casts of one of its 16 layers.
  auto count = [](const models::Workload& wl, std::uint32_t cls, const std::string& name) { return tasks_named(wl, cls, name).size(); };
  CHECK(count(q, 0, "qkv_proj_input_cast") - count(w, 0, "qkv_proj_input_cast") == count(q, 0, "qkv_proj_input_cast") / 16);
  // Their weights get no FP8 copy: the stages' FP8 GEMM weights drop by one and two layers'.
  const std::int64_t per_layer = q.stages[0].params.fp8_gemm / 16;  // 16 layers a stage
  CHECK(q.stages[0].params.fp8_gemm - w.stages[0].params.fp8_gemm == per_layer);
  CHECK(q.stages[last].params.fp8_gemm - w.stages[last].params.fp8_gemm == 2 * per_layer);
  // 16-bit layers keep 16-bit GEMM inputs for the backward and run slower GEMMs.
  const auto qr = tests::simulate_file(kLlama, fp8);
  const auto wr = tests::simulate_file(kLlama, with(fp8, {"training.first_last_layers_bf16=true", "training.num_layers_at_end_in_bf16=2"}));
  CHECK(wr.iteration_time_s > qr.iteration_time_s);
  CHECK(wr.stages.back().activation_peak_bytes > qr.stages.back().activation_peak_bytes);
  // Megatron-Core's refusals, and trainsim's where it does not model the combination.
  CHECK(load_error(kLlama, {"training.first_last_layers_bf16=true"}).find("/training/first_last_layers_bf16: applies with precision") !=
        std::string::npos);
  CHECK(load_error(kLlama, {"training.precision=\"fp8\"", "training.first_last_layers_bf16=true"}).find("other than delayed scaling") !=
        std::string::npos);
  CHECK(load_error(kLlama, with(fp8, {"training.first_last_layers_bf16=true", "training.num_layers_at_start_in_bf16=17"}))
            .find("/training/num_layers_at_start_in_bf16: expected at most the layers of one pipeline stage (16)") != std::string::npos);
  CHECK(load_error(kLlama, with(fp8, {"training.num_layers_at_end_in_bf16=1"})).find("applies with first_last_layers_bf16 true only") !=
        std::string::npos);
}

TEST_CASE("models/parallelism: cpu_offloading copies the first layers' activations to host memory and back on Transformer Engine's schedule") {
  // Llama-3.1 8B cut to 8 layers on one DGX H100 (PCIe Gen5 to the host), DP 8, two micro-batches.
  const std::vector<std::string> base = {
      "model={\"preset\": \"llama3.1-8b\", \"num_layers\": 8}",
      "parallelism={\"tensor_model_parallel_size\": 1, \"use_distributed_optimizer\": true}",
      "training={\"micro_batch_size\": 1, \"global_batch_size\": 16}", "cluster={\"preset\": \"dgx-h100\", \"num_nodes\": 1}"};
  auto offloading = [&](int layers) {
    return with(base, {"training.cpu_offloading=true", "training.cpu_offloading_num_layers=" + std::to_string(layers)});
  };
  const models::Workload plain = lowered(kGpt, base);
  const models::Workload w = lowered(kGpt, offloading(3));
  CHECK(plain.graph.num_streams() == 5);
  REQUIRE(w.graph.num_streams() == 6);
  const sim::RankClass& rc = w.graph.rank_class(0);
  // Layers 0-2 go out as their forward ends and come back in reverse order, once per micro-batch,
  // on the offload stream, each moving the layer's saved activations.
  const auto out = tasks_named(w, 0, "activation_offload"), back = tasks_named(w, 0, "activation_reload");
  REQUIRE(out.size() == 6);
  REQUIRE(back.size() == 6);
  const std::int64_t layer_bytes = models::layer_activation_bytes(w.dims, false);
  std::vector<std::int32_t> order;
  for (sim::TaskIndex i : rc.stream_tasks[models::kOffloadStream]) {
    const sim::Task& t = rc.tasks[i];
    CHECK(t.category == models::kOffload);
    CHECK(rc.kernels[t.payload].kernel_class == sim::KernelClass::kHostCopy);
    CHECK(rc.kernels[t.payload].bytes.count() == layer_bytes);
    order.push_back(w.graph.name(t.name) == "activation_offload" ? t.layer : -1 - t.layer);
  }
  CHECK(order == std::vector<std::int32_t>{0, 1, 2, -3, -2, -1, 0, 1, 2, -3, -2, -1});
  // The copy back allocates the layer's activations again.
  CHECK(back[0]->alloc_bytes == layer_bytes);
  // At most 8 - 3 = 5 layers' activations on the GPU: the forward of layer 5 waits for layer 0's
  // offload, layer 6's for layer 1's.
  auto first_forward_task = [&](std::int32_t layer) -> const sim::Task* {
    for (const sim::Task& t : rc.tasks) {
      if (t.stream == models::kComputeStream && t.layer == layer && t.microbatch == 0 && t.category == models::kForward) return &t;
    }
    return nullptr;
  };
  auto waits_for = [&](const sim::Task* t, const sim::Task* dep) {
    if (t == nullptr) return false;
    for (std::uint32_t k = 0; k < t->deps_count; ++k) {
      if (&rc.tasks[rc.deps[t->deps_begin + k]] == dep) return true;
    }
    return false;
  };
  REQUIRE(first_forward_task(5) != nullptr);
  CHECK(waits_for(first_forward_task(5), out[0]));
  CHECK(waits_for(first_forward_task(6), out[1]));
  CHECK_FALSE(waits_for(first_forward_task(4), out[0]));
  // The quick memory estimate keeps 5 of 8 layers.
  const config::Scenario sp = config::load_scenario(kGpt, base), so = config::load_scenario(kGpt, offloading(3));
  CHECK(models::estimated_peak_bytes(plain, sp.parallel, sp.training) - models::estimated_peak_bytes(w, so.parallel, so.training) ==
        3 * layer_bytes);

  // Simulated: offloading frees the activation memory of the offloaded layers.
  const auto none = tests::simulate_file(kGpt, base), three = tests::simulate_file(kGpt, offloading(3));
  CHECK(none.stages[0].activation_peak_bytes - three.stages[0].activation_peak_bytes >= 2 * layer_bytes);
  // ... and keeps them in host memory: three layers' activations of one micro-batch.
  CHECK(three.host_offload_bytes_per_gpu == 3 * layer_bytes);
  CHECK(none.host_offload_bytes_per_gpu == 0);
  CHECK(report::summary_text(three).find("host memory/GPU") != std::string::npos);
  CHECK(report::summary_json(three)["memory"]["host_offload_bytes_per_gpu"] == 3 * layer_bytes);
  CHECK_FALSE(report::summary_json(none)["memory"].contains("host_offload_bytes_per_gpu"));
  // One layer out: its copies hide behind seven layers' forward and six layers' backward.
  const auto one = tests::simulate_file(kGpt, offloading(1));
  CHECK(one.iteration_time_s == doctest::Approx(none.iteration_time_s).epsilon(1e-9));
  CHECK(one.stages[0].activation_peak_bytes < none.stages[0].activation_peak_bytes);
  // Six out, over PCIe: the compute stream waits for the copies, reported as exposed offload.
  const auto six = tests::simulate_file(kGpt, offloading(6));
  auto exposed = [](const report::RunResult& r, const std::string& kind) {
    for (const auto& [k, v] : r.breakdown.exposed_by_kind) {
      if (k == kind) return v;
    }
    return -1.0;
  };
  CHECK(exposed(none, "offload") == 0);
  CHECK(exposed(six, "offload") > 0);
  CHECK(six.iteration_time_s > none.iteration_time_s);
  // With free copies the schedule is the plain one again (the what-if scales host copies too).
  report::RunOptions free_copies;
  free_copies.comm_time_scale[models::kOffload] = 0;
  CHECK(report::simulate(config::load_scenario(kGpt, offloading(6)), free_copies).iteration_time_s ==
        doctest::Approx(none.iteration_time_s).epsilon(1e-9));
  // The copies get a timeline row of their own.
  const report::Timeline tl = report::build_timeline(report::simulate(config::load_scenario(kGpt, offloading(6))));
  REQUIRE_FALSE(tl.lanes.empty());
  CHECK(std::any_of(tl.lanes[0].rows.begin(), tl.lanes[0].rows.end(), [](const report::Row& r) { return r.label == "offload"; }));

  // Megatron-Core's refusals, and trainsim's where it does not model the combination.
  CHECK(load_error(kGpt, offloading(8)).find("/training/cpu_offloading_num_layers: expected fewer than num_layers (8)") != std::string::npos);
  CHECK(load_error(kGpt, with(offloading(2), {"parallelism.pipeline_model_parallel_size=2"}))
            .find("/training/cpu_offloading: expected pipeline_model_parallel_size 1") != std::string::npos);
  CHECK(load_error(kGpt, with(offloading(2), {"training.recompute_granularity=\"full\""})).find("refuses CPU offloading with recomputation") !=
        std::string::npos);
  CHECK(load_error(kGpt, with(base, {"training.cpu_offloading_num_layers=2"})).find("/training/cpu_offloading_num_layers: applies with cpu_offloading true only") !=
        std::string::npos);
  CHECK(load_error(kGpt, with(offloading(2), {"training.cpu_offloading_activations=false"})).find("/training/cpu_offloading_activations") !=
        std::string::npos);
  // Weights offloading is a no-op in Transformer Engine 2.x, and so here.
  CHECK(lowered(kGpt, with(offloading(3), {"training.cpu_offloading_weights=true"})).graph.rank_class(0).tasks.size() == rc.tasks.size());

  // Transformer Engine's first scheduler (cpu_offloading_v1): 3 of 8 layers synchronise at the
  // window points 2, 5 and 7 (8 / 3 = 2 layers apart, the first 8 mod 3 = 2 one later each).
  const models::Workload v1 = lowered(kGpt, with(offloading(3), {"training.cpu_offloading_v1=true"}));
  const sim::RankClass& rv = v1.graph.rank_class(0);
  const auto out1 = tasks_named(v1, 0, "activation_offload"), back1 = tasks_named(v1, 0, "activation_reload");
  REQUIRE(out1.size() == 6);
  REQUIRE(back1.size() == 6);
  auto first_task = [&](const sim::RankClass& c, std::int32_t layer, std::uint8_t category) -> const sim::Task* {
    for (const sim::Task& t : c.tasks) {
      if (t.stream == models::kComputeStream && t.layer == layer && t.microbatch == 0 && t.category == category) return &t;
    }
    return nullptr;
  };
  auto depends = [&](const sim::RankClass& c, const sim::Task* t, const sim::Task* dep) {
    if (t == nullptr) return false;
    for (std::uint32_t k = 0; k < t->deps_count; ++k) {
      if (&c.tasks[c.deps[t->deps_begin + k]] == dep) return true;
    }
    return false;
  };
  // Forward: the compute stream waits for layer 0's copy after layer 2, for layer 1's after layer 5.
  CHECK(depends(rv, first_task(rv, 3, models::kForward), out1[0]));
  CHECK(depends(rv, first_task(rv, 6, models::kForward), out1[1]));
  CHECK_FALSE(depends(rv, first_task(rv, 5, models::kForward), out1[0]));
  // Backward (layers 7 to 0): layer 2's copy back starts before layer 7's backward, layer 1's before
  // layer 5's, which first waits for layer 2's; layer 0 waits for the last.
  CHECK(back1[0]->layer == 2);
  CHECK(back1[1]->layer == 1);
  CHECK(back1[2]->layer == 0);
  CHECK(depends(rv, first_task(rv, 5, models::kBackward), back1[0]));
  CHECK(depends(rv, first_task(rv, 2, models::kBackward), back1[1]));
  CHECK(depends(rv, first_task(rv, 0, models::kBackward), back1[2]));
  const auto v1_run = tests::simulate_file(kGpt, with(offloading(3), {"training.cpu_offloading_v1=true"}));
  CHECK(none.stages[0].activation_peak_bytes - v1_run.stages[0].activation_peak_bytes >= 2 * layer_bytes);
  CHECK(load_error(kGpt, with(offloading(3), {"training.cpu_offloading_v1=true", "training.cpu_offloading_double_buffering=true"}))
            .find("/training/cpu_offloading_double_buffering") != std::string::npos);
}

TEST_CASE("models/parallelism: distributed-optimizer instances shard within a group and replicate across groups") {
  // Megatron-Core's num_distributed_optimizer_instances on DP 32 (4 DGX A100 nodes, TP 1): with 4
  // instances, each holds 8 consecutive data-parallel ranks, one node.
  const std::string dp32 = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-1.7b-dp32-a100.json";
  const std::vector<std::string> dist = {"parallelism.use_distributed_optimizer=true"};
  const auto one = tests::simulate_file(dp32, dist);
  const auto four = tests::simulate_file(dp32, with(dist, {"parallelism.num_distributed_optimizer_instances=4"}));
  const auto all = tests::simulate_file(dp32, with(dist, {"parallelism.num_distributed_optimizer_instances=32"}));
  const auto plain = tests::simulate_file(dp32);
  // The optimizer state is sharded over the 8 ranks of an instance instead of all 32.
  const double ratio = static_cast<double>(four.stages[0].static_memory.optimizer_states) /
                       static_cast<double>(one.stages[0].static_memory.optimizer_states);
  CHECK(ratio == doctest::Approx(4.0).epsilon(0.001));
  CHECK(four.stages[0].static_memory.weights == one.stages[0].static_memory.weights);
  CHECK(four.peak_bytes_per_gpu > one.peak_bytes_per_gpu);
  // One rank per instance is plain data parallelism: every gradient all-reduced over all 32
  // ranks, the whole optimizer state on each, nothing gathered.
  CHECK(all.iteration_time_s == plain.iteration_time_s);
  CHECK(all.peak_bytes_per_gpu == plain.peak_bytes_per_gpu);
  CHECK(all.breakdown.exposed_by_kind == plain.breakdown.exposed_by_kind);

  // The groups: an instance is one node's 8 consecutive ranks (reduce-scatter, gather), the
  // inter-instance group one rank of each node (the shards' all-reduce).
  const config::Scenario s = config::load_scenario(dp32, with(dist, {"parallelism.num_distributed_optimizer_instances=4"}));
  const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus(), s.target_gpu());
  for (std::uint32_t r : {0u, 13u, 31u}) {
    CAPTURE(r);
    const sim::RankId rank{r};
    const auto& shard = w.graph.communicator(w.graph.comm(rank, models::kDpShardSlot)).members;
    const auto& replica = w.graph.communicator(w.graph.comm(rank, models::kDpReplicaSlot)).members;
    REQUIRE(shard.size() == 8);
    REQUIRE(replica.size() == 4);
    for (sim::RankId m : shard) CHECK(sim::index(m) / 8 == r / 8);
    for (std::size_t i = 0; i < replica.size(); ++i) CHECK(sim::index(replica[i]) == r % 8 + 8 * i);
  }
  // One simulated rank per stage gives what every rank simulated gives.
  const auto every_rank = tests::simulate_file(dp32, with(dist, {"parallelism.num_distributed_optimizer_instances=4", "simulation.fidelity=\"full\""}));
  CHECK(every_rank.iteration_time_s == four.iteration_time_s);
  CHECK(every_rank.breakdown.exposed_by_kind == four.breakdown.exposed_by_kind);
  // Without instances those slots stay empty.
  const models::Workload none = lowered(dp32, dist);
  CHECK_FALSE(none.graph.has_comm(sim::RankId{0}, models::kDpShardSlot));

  // Experts split their expert-data-parallel group the same way: Mixtral with EP 1 on 16 GPUs,
  // one rank per instance, is plain data parallelism there too.
  const std::vector<std::string> moe = {"model={\"preset\": \"mixtral-8x7b\", \"num_layers\": 4}",
                                        "parallelism={\"tensor_model_parallel_size\": 1, \"pipeline_model_parallel_size\": 1}",
                                        "training={\"micro_batch_size\": 1, \"global_batch_size\": 32, \"recompute_granularity\": \"full\"}",
                                        "cluster={\"preset\": \"dgx-h100\", \"num_nodes\": 2}"};
  const auto moe_plain = tests::simulate_file(dp32, moe);
  const auto moe_all = tests::simulate_file(dp32, with(moe, {"parallelism.use_distributed_optimizer=true", "parallelism.num_distributed_optimizer_instances=16"}));
  CHECK(moe_all.iteration_time_s == moe_plain.iteration_time_s);
  CHECK(moe_all.peak_bytes_per_gpu == moe_plain.peak_bytes_per_gpu);
  // With EP 8 the two expert-data-parallel ranks form two instances of one: the experts' state
  // is whole on each, the dense state halved against one instance.
  const std::vector<std::string> ep8 = with(moe, {"parallelism.expert_model_parallel_size=8", "parallelism.use_distributed_optimizer=true"});
  const auto ep8_one = tests::simulate_file(dp32, ep8);
  const auto ep8_two = tests::simulate_file(dp32, with(ep8, {"parallelism.num_distributed_optimizer_instances=2"}));
  CHECK(ep8_two.stages[0].static_memory.optimizer_states > ep8_one.stages[0].static_memory.optimizer_states);
  const models::Workload ep8_graph = lowered(dp32, with(ep8, {"parallelism.num_distributed_optimizer_instances=2"}));
  CHECK(ep8_graph.graph.communicator(ep8_graph.graph.comm(sim::RankId{0}, models::kExpertDpShardSlot)).members.size() == 1);
  CHECK(ep8_graph.graph.communicator(ep8_graph.graph.comm(sim::RankId{0}, models::kExpertDpReplicaSlot)).members.size() == 2);

  // The planner's quick memory estimate follows the simulated peak (distributed optimizer and
  // ZeRO-3 / HSDP).
  for (const std::vector<std::string>& plan : {with(dist, {"parallelism.num_distributed_optimizer_instances=4"}),
                                               std::vector<std::string>{"parallelism.zero_stage=3", "parallelism.num_distributed_optimizer_instances=4"}}) {
    const config::Scenario p = config::load_scenario(dp32, plan);
    const models::Workload d = models::describe(p.model, p.parallel, p.training, p.num_gpus(), p.target_gpu());
    const double estimate = static_cast<double>(models::estimated_peak_bytes(d, p.parallel, p.training));
    const report::RunResult r = report::simulate(p);
    CHECK(estimate == doctest::Approx(static_cast<double>(r.peak_bytes_per_gpu)).epsilon(0.03));
  }
}

TEST_CASE(
    "models/memory: Transformer Engine keeps one placeholder weight gradient per GEMM shape, in 16 "
    "bits") {
  // Transformer Engine 2.3+ (module/base.py get_dummy_wgrad) under Megatron's fused gradient
  // accumulation: one cached tensor per distinct weight shape, whatever the layer count; the last
  // stage's output layer (Megatron's own linear) takes one of its shape from the same cache.
  const auto placeholders = [](const std::string& file, const std::vector<std::string>& overrides) {
    const config::Scenario s = config::load_scenario(file, overrides);
    const models::Workload w =
        models::describe(s.model, s.parallel, s.training, s.num_gpus(), s.target_gpu());
    return std::pair{w, models::layer_params(w.dims)};
  };
  {
    const auto [w, lp] = placeholders(kGpt, {});
    const std::int64_t output = w.dims.v * w.dims.h;
    for (const models::StageInfo& st : w.stages) {
      CHECK(st.static_memory.wgrad_placeholders == 2 * (lp.qkv + lp.proj + lp.fc1 + lp.fc2 + (st.has_output ? output : 0)));
    }
    CHECK(w.stages.back().has_output);
    // The same with twice the layers per stage.
    const auto [w2, lp2] = placeholders(kGpt, {"model.num_layers=36"});
    CHECK(w2.stages[0].static_memory.wgrad_placeholders ==
          w.stages[0].static_memory.wgrad_placeholders);
  }
  {
    // Mixture of experts: the attention projections and one local expert's two weights.
    const auto [w, lp] = placeholders(tests::kDefaultScenario, kMoe);
    const models::LayerDims& d = w.dims;
    REQUIRE(d.local_experts == 2);
    for (const models::StageInfo& st : w.stages) {
      CHECK(st.static_memory.wgrad_placeholders ==
            2 * (lp.qkv + lp.proj + (lp.expert_fc1 + lp.expert_fc2) / d.local_experts + (st.has_output ? d.v * d.h : 0)));
    }
  }
  // Megatron's own layers, or the accumulation not fused: none kept (the gradient is returned to
  // autograd and freed once added).
  for (const char* off :
       {"training.transformer_impl=\"local\"", "training.gradient_accumulation_fusion=false"}) {
    CAPTURE(off);
    const auto [w, lp] = placeholders(kGpt, {off});
    for (const models::StageInfo& st : w.stages) CHECK(st.static_memory.wgrad_placeholders == 0);
  }
  // What only Transformer Engine provides is refused with Megatron's local layers.
  CHECK_THROWS_WITH_AS(
      config::load_scenario(kGpt,
                            {"training.transformer_impl=\"local\"", "training.precision=\"fp8\""}),
      doctest::Contains("training/precision: needs transformer_impl \"transformer_engine\""),
      InputError);
}
