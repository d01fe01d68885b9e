#include "models/memory_model.h"

#include <doctest/doctest.h>

#include "config/scenario.h"

using namespace trainsim;

namespace {

struct Shape {
  const char* name;
  std::int64_t h, a, layers;
};
// Korthikanti et al. 2022, Table 3: the model shapes of their evaluation (TP 8, s 2048).
constexpr Shape kShapes[] = {{"22B", 6144, 64, 48}, {"175B", 12288, 96, 96}, {"530B", 20480, 128, 105}, {"1T", 25600, 160, 128}};

models::LayerDims dims(const Shape& sh, bool sp, bool flash) {
  models::ModelSpec m = config::load_model("gpt3-175b");
  m.hidden_size = sh.h;
  m.num_attention_heads = sh.a;
  m.num_query_groups = sh.a;
  m.ffn_hidden_size = 4 * sh.h;
  m.num_layers = sh.layers;
  models::ParallelSpec p;
  p.tensor_model_parallel_size = 8;
  p.sequence_parallel = sp;
  models::TrainingSpec t;
  t.micro_batch_size = 1;
  t.attention_kernel = flash ? models::AttentionKernel::kFlash : models::AttentionKernel::kUnfused;
  return models::layer_dims(m, p, t);
}

}  // namespace

TEST_CASE("models/memory: activations per layer match Korthikanti et al. 2022 Table 2") {
  for (const Shape& sh : kShapes) {
    CAPTURE(sh.name);
    const double s = 2048, b = 1, h = static_cast<double>(sh.h), a = static_cast<double>(sh.a), t = 8;
    // Tensor parallel (baseline): sbh (10 + 24/t + 5as/(ht)).
    CHECK(static_cast<double>(models::layer_activation_bytes(dims(sh, false, false), false)) ==
          doctest::Approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t))).epsilon(0.01));
    // Tensor + sequence parallel: sbh/t (34 + 5as/h).
    CHECK(static_cast<double>(models::layer_activation_bytes(dims(sh, true, false), false)) ==
          doctest::Approx(s * b * h / t * (34 + 5 * a * s / h)).epsilon(0.01));
    // Tensor + sequence parallel + selective recomputation: 34 sbh/t.
    CHECK(static_cast<double>(models::layer_activation_bytes(dims(sh, true, false), true)) ==
          doctest::Approx(34 * s * b * h / t).epsilon(0.01));
    // Full recomputation keeps the layer input: 2 sbh.
    CHECK(static_cast<double>(models::layer_checkpoint_bytes(dims(sh, false, false))) ==
          doctest::Approx(2 * s * b * h).epsilon(0.01));
    // A fused (flash) attention kernel keeps no s^2 score matrix.
    CHECK(static_cast<double>(models::layer_activation_bytes(dims(sh, true, true), false)) ==
          doctest::Approx(34 * s * b * h / t).epsilon(0.01));
  }
}

TEST_CASE("models/memory: the distributed optimizer shards optimizer state over data parallelism") {
  models::ParallelSpec p;
  models::TrainingSpec t;
  const models::StageParameters params{1'000'000, 0, 0};
  const auto plain = models::static_memory(params, 8, 1, p, t);
  p.use_distributed_optimizer = true;
  const auto sharded = models::static_memory(params, 8, 1, p, t);
  CHECK(plain.optimizer_states == 12'000'000);
  CHECK(sharded.optimizer_states == 1'500'000);
  CHECK(sharded.weights == plain.weights);
  CHECK(plain.total() == 18'000'000);  // Megatron: 18 bytes per parameter without sharding
}

TEST_CASE("models/memory: the precision-aware optimizer keeps 16-bit moments, and 16-bit remainders of bf16 master weights") {
  models::ParallelSpec p;
  p.use_distributed_optimizer = true;
  models::TrainingSpec t;
  const models::StageParameters params{1'000'000, 0, 0};
  t.use_precision_aware_optimizer = true;
  // fp32 moments: the master weights as 16-bit remainders of the bf16 weights, 2 + 4 + 4 bytes.
  CHECK(models::static_memory(params, 1, 1, p, t).optimizer_states == 10'000'000);
  t.exp_avg_16bit = t.exp_avg_sq_16bit = true;
  // BF16 weights: Transformer Engine's FusedAdam holds the master weights, 16 bits each beside
  // the bf16 weight (store_param_remainders), and the bf16 moments: 6 bytes.
  CHECK(models::static_memory(params, 1, 1, p, t).optimizer_states == 6'000'000);
  t.store_param_remainders = false;
  CHECK(models::static_memory(params, 1, 1, p, t).optimizer_states == 8'000'000);
  // FP8 under current scaling or MXFP8 with gathered FP8 weights: Megatron-Core keeps the fp32
  // master weights (use_precision_aware_optimizer_no_fp8_or_ds_fp8 false), the moments are bf16.
  t.store_param_remainders = true;
  t.precision = models::Precision::kFp8;
  t.quant_recipe = models::QuantRecipe::kMxfp8;
  t.fp8_param_gather = true;
  CHECK_FALSE(t.optimizer_holds_master_weights());
  CHECK(models::static_memory(params, 1, 1, p, t).optimizer_states == 8'000'000);
  t.quant_recipe = models::QuantRecipe::kDelayed;
  CHECK(t.optimizer_holds_master_weights());
  CHECK(models::static_memory(params, 1, 1, p, t).optimizer_states == 8'000'000);  // FP8 weights: no remainders
}

TEST_CASE("models/memory: NeMo 1's distributed_fused_adam keeps what its state dtype and fp8_params call for") {
  // NeMo v2.0.0 megatron_base_model.py setup_optimization over Apex's DistributedFusedAdam.
  models::ParallelSpec p;
  p.use_distributed_optimizer = true;
  models::TrainingSpec t;
  t.apex_distributed_adam = true;
  const models::StageParameters params{1'000'000, 0, 0};
  const auto states = [&] { return models::static_memory(params, 1, 1, p, t).optimizer_states; };
  // fp32 state over bf16 weights: the 16-bit remainders and two fp32 moments (store_param_remainders).
  CHECK(states() == 10'000'000);
  // bf16 state (optim.dtype bf16, Nemotron-4 340B's recipe): the bf16 weight is the master.
  t.optimizer_state_16bit = true;
  CHECK(states() == 4'000'000);
  // FP8 parameters: a master copy in the state dtype (store_params).
  t.precision = models::Precision::kFp8;
  t.fp8_param_gather = true;
  CHECK(states() == 6'000'000);
  t.optimizer_state_16bit = false;
  CHECK(states() == 12'000'000);
  // FP8 compute over bf16 weights is the bf16 case.
  t.fp8_param_gather = false;
  CHECK(states() == 10'000'000);
  // Its fused step reads the gradients as reduced: no fp32 copy, unlike Megatron-Core's.
  t.grad_reduce_in_fp32 = false;
  CHECK_FALSE(t.copies_grads_to_fp32());
  t.apex_distributed_adam = false;
  CHECK(t.copies_grads_to_fp32());
}
