#include "models/flop_count.h"

#include <doctest/doctest.h>

#include "config/scenario.h"

using namespace trainsim;

namespace {

// Narayanan et al. 2021, Eq. 3: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), with activation
// recomputation (one extra forward pass of every layer).
double eq3(double B, double s, double l, double h, double V) {
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}
// The same without the recompute term: 3 passes instead of 4 for the layers.
double eq3_no_recompute(double B, double s, double l, double h, double V) {
  return 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V;
}

}  // namespace

TEST_CASE("models/flops: GPT shapes match Narayanan et al. 2021 Eq. 3") {
  for (const char* preset : {"gpt3-1.7b", "gpt3-3.6b", "gpt3-7.5b", "gpt3-18b", "gpt3-39b", "gpt3-76b", "gpt3-145b",
                             "gpt3-310b", "gpt3-530b", "gpt3-1t", "gpt3-175b"}) {
    CAPTURE(preset);
    const models::ModelSpec m = config::load_model(preset);
    models::ParallelSpec p;
    models::TrainingSpec t;
    t.global_batch_size = 1536;
    const double B = 1536, s = static_cast<double>(m.seq_length), l = static_cast<double>(m.num_layers),
                 h = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
    t.recompute_granularity = models::RecomputeGranularity::kNone;
    const models::FlopCount none = models::count_flops(m, p, t);
    CHECK(none.model == doctest::Approx(eq3_no_recompute(B, s, l, h, V)).epsilon(0.001));
    CHECK(none.hardware == doctest::Approx(none.model));
    t.recompute_granularity = models::RecomputeGranularity::kFull;
    const models::FlopCount full = models::count_flops(m, p, t);
    CHECK(full.model == doctest::Approx(none.model));
    CHECK(full.hardware == doctest::Approx(eq3(B, s, l, h, V)).epsilon(0.001));
  }
}

TEST_CASE("models/flops: selective recompute adds the attention core's forward only") {
  const models::ModelSpec m = config::load_model("gpt3-175b");
  models::ParallelSpec p;
  models::TrainingSpec t;
  t.global_batch_size = 8;
  t.recompute_granularity = models::RecomputeGranularity::kSelective;
  const models::FlopCount f = models::count_flops(m, p, t);
  const double s = 2048, h = 12288, l = 96;
  CHECK(f.hardware - f.model == doctest::Approx(8 * l * 4 * s * s * h));
}

TEST_CASE("models/flops: GQA and SwiGLU follow Megatron's formula") {
  const models::ModelSpec m = config::load_model("llama3.1-70b");
  // 12 B s L h^2 ((1 + g/a + s/h) + 3/2 f/h) + 6 B s h V.
  const double B = 1, s = 8192, L = 80, h = 8192, f = 28672, V = 128256;
  const double expected = 12 * B * s * L * h * h * ((1 + 8.0 / 64 + s / h) + 1.5 * f / h) + 6 * B * s * h * V;
  CHECK(models::model_flops(m, 1) == doctest::Approx(expected).epsilon(1e-9));
}

TEST_CASE("models/presets: Llama 2, Nemotron-4, GLM-4.5, DeepSeek-V3, Qwen3 MoE and GPT-OSS presets have their published parameter counts") {
  // Hugging Face model cards / safetensors totals (Llama 2: 6.74B, 13.0B, 69.0B), the
  // Nemotron-4 reports (15B: 3.2B embedding + 12.5B non-embedding; 340B: 341B) and the GLM-4.5
  // report (106B and 355B; its multi-token-prediction layer is not in the presets), and
  // DeepSeek-V3's main model (README_WEIGHTS.md: 671B), the Qwen3 MoE model cards (30.5B,
  // 235B in total), and GPT-OSS 120B's model card (arXiv:2508.10925: 116.83B).
  const std::vector<std::pair<const char*, double>> published{
      {"llama2-7b", 6.738e9}, {"llama2-13b", 13.016e9}, {"llama2-70b", 68.977e9}, {"nemotron4-15b", 15.7e9},
      {"nemotron4-340b", 341e9}, {"glm4.5-air", 106e9},     {"glm4.5", 355e9}, {"deepseek-v3", 671e9},
      {"qwen3-30b-a3b", 30.5e9},  {"qwen3-235b-a22b", 235e9}, {"gpt-oss-120b", 116.83e9}};
  for (const auto& entry : published) {
    const char* preset = entry.first;
    CAPTURE(preset);
    const models::ModelSpec m = config::load_model(preset);
    CHECK(static_cast<double>(m.total_parameters(1)) == doctest::Approx(entry.second).epsilon(0.01));
  }
  const models::ModelSpec glm = config::load_model("glm4.5");
  CHECK(glm.num_moe_layers() == 89);
  CHECK_FALSE(glm.is_moe_layer(2));
}

TEST_CASE("models/flops: multi-token prediction counts as Megatron counts it, and DeepSeek-V3's published TFLOP/s") {
  // DGX Cloud's DeepSeek-V3 recipe (dgxc-benchmarking deepseek_v3/pretraining @1f6d9f40, NeMo's
  // pretrain_recipe with its MTP module): 1,024 H100, global batch 8,192 of 4,096 tokens, TP 2;
  // 52.04 s per step measured, reported as 163.7 model TFLOP/s per GPU.
  models::ModelSpec m = config::load_model("deepseek-v3");
  REQUIRE(m.mtp_num_layers == 1);
  models::ParallelSpec p;
  p.tensor_model_parallel_size = 2;
  models::TrainingSpec t;
  t.global_batch_size = 8192;
  const double with_mtp = models::count_flops(m, p, t).model;
  CHECK(with_mtp / (1024 * 52.04) * 1e-12 == doctest::Approx(163.7).epsilon(0.002));
  m.mtp_num_layers = 0;
  const double without = models::count_flops(m, p, t).model;
  // The module: one MoE layer, its projection and norms, and another logits pass.
  const double h = 7168, s = 4096, v = static_cast<double>(m.padded_vocab(2));
  const double extra = with_mtp - without;
  CHECK(extra > 6 * 8192 * s * (2 * h * h + h * v));
  CHECK(extra / without == doctest::Approx(0.045).epsilon(0.2));
  // Selective recomputation of the core attention runs in the module's layer too.
  t.recompute_granularity = models::RecomputeGranularity::kSelective;
  const double recompute_without = models::count_flops(m, p, t).hardware - without;
  m.mtp_num_layers = 1;
  const double recompute_with = models::count_flops(m, p, t).hardware - with_mtp;
  CHECK(recompute_with / recompute_without == doctest::Approx(62.0 / 61.0));
}
