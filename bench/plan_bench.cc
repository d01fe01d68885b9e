// plan-bench: the plan searches of the capacity-planning acceptance cases, timed, with where each
// published plan ranks among the feasible plans the search found.
//
// Usage: plan-bench

#include <chrono>
#include <cstdio>
#include <string>

#include "config/scenario.h"
#include "planner/plan_output.h"
#include "planner/plan_search.h"

namespace {

using namespace trainsim;

struct Published {
  std::int64_t tp, pp, vp, mbs, cp = 1, ep = 1;
};

// Today's Megatron-Core recipe: overlapped gradient reduction and parameter gather.
void modern(planner::PlanRequest& r) {
  r.training.overlap_param_gather = true;
  r.training.overlap_p2p_comm = true;
}

// NeMo's DGX Cloud recipe (dgxc-benchmarking llama3.1/llama3.1_405b.yaml @35a9aecc): today's,
// with Transformer Engine's TP communication overlap.
void nemo_dgxc(planner::PlanRequest& r) {
  modern(r);
  r.training.tp_comm_overlap = true;
}

// The recipe of Narayanan et al.'s 2021 runs (examples/sc21 scripts, training_runs.json), as the
// validate suite's case narayanan2021_table1_145B states it: fp16 with gradients reduced in fp16
// (no --accumulate-allreduce-grads-in-fp32), attention without a fused kernel (no flash
// attention in 2021), full recomputation, no sequence parallelism, no distributed optimizer,
// gradients all-reduced after the backward pass (DDP impl "local"), tensor-parallel input-gradient
// all-reduces blocking the backward pass (no asynchronous all-reduce before September 2021),
// pipeline tensors sent as 1/TP slices and all-gathered (scatter/gather, on since February 2021),
// Megatron-LM's own layers (no Transformer Engine).
void megatron_2021(planner::PlanRequest& r) {
  r.training.transformer_engine = false;
  r.training.precision = models::Precision::kFp16;
  r.training.grad_reduce_in_fp32 = false;
  r.training.attention_kernel = models::AttentionKernel::kUnfused;
  r.training.overlap_grad_reduce = false;
  r.training.async_tensor_model_parallel_allreduce = false;
  r.training.scatter_gather_tensors_in_pipeline = true;
  r.space.recompute = {models::RecomputeGranularity::kFull};
  r.space.optimizer_sharding = {0};
  r.space.sequence_parallel = false;
}

void search_case(const char* label, const planner::PlanRequest& r, const Published& pub);

void case_of(const char* label, const char* model, const char* cluster, std::int64_t gpus, std::int64_t batch,
             const Published& pub, void (*recipe)(planner::PlanRequest&)) {
  planner::PlanRequest r;
  r.model = config::load_model(model);
  r.cluster = config::load_cluster(cluster, 1);
  r.gpu_counts = {gpus};
  r.training.global_batch_size = batch;
  recipe(r);
  search_case(label, r, pub);
}

// The full search on a scenario's GPU count with its model, cluster and recipe (plan --scenario).
void scenario_case(const char* label, const char* file, const Published& pub) {
  search_case(label, planner::request_of(config::load_scenario(std::string(TRAINSIM_SOURCE_DIR) + "/" + file)), pub);
}

void search_case(const char* label, const planner::PlanRequest& r, const Published& pub) {
  const auto t0 = std::chrono::steady_clock::now();
  const planner::PlanReport rep = planner::search(r);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s\n  search: %.1f s wall, %lld plans considered, %lld simulations, %zu feasible\n", label, wall,
              static_cast<long long>(rep.considered), static_cast<long long>(rep.simulated), rep.plans.size());
  if (rep.plans.empty()) return;
  std::printf("  best: %s, %.3f s/iteration, MFU %.1f%%\n", planner::describe_plan(rep.plans.front()).c_str(),
              rep.plans.front().iteration_time_s, 100 * rep.plans.front().mfu);
  // The published layout's best variant (any micro-batch/optimizer setting the search kept).
  for (std::size_t i = 0; i < rep.plans.size(); ++i) {
    const planner::PlanResult& p = rep.plans[i];
    if (p.parallel.tensor_model_parallel_size == pub.tp && p.parallel.pipeline_model_parallel_size == pub.pp &&
        p.parallel.virtual_pipeline_model_parallel_size == pub.vp && p.training.micro_batch_size == pub.mbs &&
        p.parallel.context_parallel_size == pub.cp && p.parallel.expert_model_parallel_size == pub.ep) {
      std::printf("  published plan (TP %lld PP %lld x%lld%s%s mbs %lld): rank %zu of %zu (top %.1f%%), %.3f s/iteration, best is %.1f%% faster\n",
                  static_cast<long long>(pub.tp), static_cast<long long>(pub.pp), static_cast<long long>(pub.vp),
                  pub.cp > 1 ? (" CP " + std::to_string(pub.cp)).c_str() : "",
                  pub.ep > 1 ? (" EP " + std::to_string(pub.ep)).c_str() : "", static_cast<long long>(pub.mbs), i + 1, rep.plans.size(),
                  100.0 * static_cast<double>(i + 1) / static_cast<double>(rep.plans.size()), p.iteration_time_s,
                  100 * (p.iteration_time_s / rep.plans.front().iteration_time_s - 1));
      return;
    }
  }
  std::printf("  published plan not among the feasible plans\n");
}

}  // namespace

int main() {
  case_of("GPT-3 175B on 1,024 H100 (DGX H100), global batch 2048, sequence 2048, bf16", "gpt3-175b", "dgx-h100", 1024,
          2048, {4, 8, 6, 1}, modern);
  case_of("GPT 145.6B on 1,536 A100 80GB (DGX A100), global batch 2304, today's recipe", "gpt3-145b", "dgx-a100-80gb",
          1536, 2304, {8, 8, 2, 2}, modern);
  case_of("GPT 145.6B on 1,536 A100 80GB (DGX A100), global batch 2304, the run's 2021 recipe", "gpt3-145b",
          "dgx-a100-80gb", 1536, 2304, {8, 8, 2, 2}, megatron_2021);
  // A published plan from the held-out suite (validate/suites/dgxc_heldout.json): NeMo's Llama
  // 3.1 405B on 576 H100, TP 8 PP 9 x7 CP 2, measured 17.20 s per iteration in BF16.
  case_of("Llama-3.1 405B on 576 H100 (DGX H100), global batch 252, sequence 8192, bf16, NeMo's recipe", "llama3.1-405b",
          "dgx-h100", 576, 252, {8, 9, 7, 1, 2}, nemo_dgxc);
  // The same model on GB200 NVL72 (validate/suites/dgxc_gb200.json): TP 4 PP 8 x8 CP 2 on 512
  // GPUs, measured 9.508 s per iteration in BF16.
  case_of("Llama-3.1 405B on 512 GB200 (GB200 NVL72), global batch 256, sequence 8192, bf16, NeMo's recipe",
          "llama3.1-405b", "gb200-nvl72", 512, 256, {4, 8, 8, 1, 2}, nemo_dgxc);

  // DeepSeek-V3's 61 layers over Megatron-Bridge's pipeline layout (scenarios/examples/
  // deepseek-v3-mxfp8-256xgb200.json, validate/suites/megatron_bridge_moe.json): PP 4 x4 EP 64,
  // measured 15.40 s per iteration in MXFP8.
  scenario_case("DeepSeek-V3 on 256 GB200 (GB200 NVL72), global batch 4096 x 4K, MXFP8, Megatron-Bridge's recipe",
                "scenarios/examples/deepseek-v3-mxfp8-256xgb200.json", {1, 4, 4, 1, 1, 64});

  // Llama-3.1 70B on 512 H100 with a 15T-token budget, then the deadline search.
  planner::PlanRequest r;
  r.model = config::load_model("llama3.1-70b");
  r.cluster = config::load_cluster("dgx-h100", 1);
  r.training.global_batch_size = 512;
  r.training.train_tokens = 15e12;
  r.training.overlap_param_gather = true;
  r.training.overlap_p2p_comm = true;
  r.gpu_counts = {512};
  auto t0 = std::chrono::steady_clock::now();
  const planner::PlanReport one = planner::search(r);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!one.plans.empty()) {
    std::printf("Llama-3.1 70B on 512 H100, 15T tokens: %s, %.1f days, %.3g GPU-hours (search %.1f s)\n",
                planner::describe_plan(one.plans.front()).c_str(), *one.plans.front().time_to_train_days,
                *one.plans.front().gpu_hours, wall);
  }
  r.deadline_days = 60;
  t0 = std::chrono::steady_clock::now();
  const planner::PlanReport dl = planner::search_deadline(r, 512, 8192);
  wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  deadline 60 days over 512..8192 GPUs: %s (%zu GPU counts probed, %.1f s)\n",
              dl.deadline_gpus ? (std::to_string(*dl.deadline_gpus) + " GPUs").c_str() : "not met",
              dl.per_gpu_count.size(), wall);
  return 0;
}
