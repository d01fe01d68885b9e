#pragma once
// LayerDims: the per-GPU shape of one Transformer layer for one micro-batch under a parallel
// plan (tensor-parallel shards, sequence-parallel and context-parallel splits, data types).

#include <cstdint>

#include "models/model_spec.h"
#include "models/training_spec.h"
#include "sim/task_graph.h"

namespace trainsim::models {

struct LayerDims {
  std::int64_t b = 1;   // micro-batch size
  std::int64_t s = 1;   // sequence length per context-parallel rank
  std::int64_t h = 1;   // hidden size
  std::int64_t a = 1;   // attention heads per tensor-parallel rank
  std::int64_t g = 1;   // query groups (key/value heads) per tensor-parallel rank
  std::int64_t d = 1;   // head dimension
  std::int64_t f = 1;   // MLP hidden size per tensor-parallel rank (one expert for MoE)
  std::int64_t v = 1;   // padded vocabulary per tensor-parallel rank
  std::int64_t t = 1;   // tensor-parallel size
  std::int64_t cp = 1;  // context-parallel size
  bool sp = false;      // sequence parallel
  bool gated = false;   // SwiGLU: fc1 produces 2f
  bool layernorm = true;
  bool rope = false;
  bool bias = true;
  bool hidden_dropout = true;
  bool attention_dropout = true;
  bool flash = true;
  sim::DataType act = sim::DataType::kBf16;   // activations
  sim::DataType gemm = sim::DataType::kBf16;  // GEMM inputs (fp8 under Transformer Engine)
  // MoE (experts = 0: dense)
  std::int64_t experts = 0;        // routed experts in total
  std::int64_t local_experts = 0;  // experts on this rank
  std::int64_t topk = 0;
  std::int64_t ep = 1;

  std::int64_t tokens() const { return b * s; }                // tokens of a micro-batch on this rank
  std::int64_t sharded_tokens() const { return sp ? b * s / t : b * s; }  // in norm/dropout regions
  std::int64_t act_bytes() const { return sim::size_of(act); }
  std::int64_t qkv_width() const { return (a + 2 * g) * d; }
  std::int64_t fc1_width() const { return gated ? 2 * f : f; }
};

LayerDims layer_dims(const ModelSpec& m, const ParallelSpec& p, const TrainingSpec& t);

}  // namespace trainsim::models
