#pragma once
// LayerDims: the per-GPU shape of one Transformer layer for one micro-batch under a parallel
// plan (tensor-parallel shards, sequence-parallel and context-parallel splits, data types).

#include <cstdint>

#include "models/model_spec.h"
#include "models/training_spec.h"
#include "sim/task_graph.h"

namespace trainsim::models {

// What the lowering needs to know of the GPU the plan runs on (config::Scenario::target_gpu).
struct TargetGpu {
  bool fp8_columnwise_native = false;  // LayerDims::fp8_columnwise_native (Blackwell)
};

// Bytes of `elements` FP8 values with their scales (MXFP8: one E8M0 byte per 32 elements).
// NVFP4: half a byte per element and one E4M3 byte per 16 (the tensor's FP32 scale is negligible).
inline std::int64_t quantized_bytes(std::int64_t elements, QuantRecipe r) {
  if (r == QuantRecipe::kNvfp4) return (elements + 1) / 2 + elements / 16;
  return elements + (r == QuantRecipe::kMxfp8 ? elements / 32 : 0);
}
// Block-scaled recipes quantize the row-wise and column-wise copies separately: neither is the
// other read the other way (MXFP8's 1x32 and 32x1 blocks, NVFP4's 1x16 and 16x1).
inline bool block_scaled(QuantRecipe r) { return r == QuantRecipe::kMxfp8 || r == QuantRecipe::kNvfp4; }
// Recipes whose scale comes from the tensor's own amax, read in a pass of its own before the cast
// (current scaling; NVFP4's per-tensor FP32 scale).
inline bool amax_pass(QuantRecipe r) { return r == QuantRecipe::kTensorwise || r == QuantRecipe::kNvfp4; }
// Bytes of the FP8 copies a GEMM operand of `elements` values needs for its forward and backward
// GEMMs (Transformer Engine docs, "Handling transposes"): the row-wise copy, and a column-wise
// one unless the tensor cores read the row-wise layout column-wise (Blackwell with per-tensor
// scales; the block-scaled recipes' column blocks always differ from their row blocks).
inline std::int64_t quantized_copies_bytes(std::int64_t elements, QuantRecipe r, bool columnwise_native) {
  const std::int64_t copies = columnwise_native && !block_scaled(r) ? 1 : 2;
  return copies * quantized_bytes(elements, r);
}

// Bytes fp8_param_gather moves, and ZeRO-3 then keeps sharded, per FP8 GEMM weight: the row-wise
// copy; under MXFP8 both copies, the column-wise one not derivable from the other (Transformer
// Engine's cast_master_weights_to_fp8 writes both for the optimizer's shard). NVFP4 quantizes
// weights in 16x16 blocks, so its column-wise copy is the row-wise one transposed: the gather
// moves the packed row-wise copy (Megatron-Core's param buffer holds numel / 2 bytes per NVFP4
// parameter, param_and_grad_buffer.py) and each rank transposes after it.
inline std::int64_t gathered_quantized_param_bytes(std::int64_t elements, QuantRecipe r) {
  return (r == QuantRecipe::kMxfp8 ? 2 : 1) * quantized_bytes(elements, r);
}

// A sliding window of `window` keys before each query applies to a fused attention kernel only
// under a causal mask, in self-attention (q == kv), and when it is shorter than the sequence.
inline bool sliding_window_applies(std::int64_t q, std::int64_t kv, bool causal, std::int64_t window) {
  return causal && window > 0 && window + 1 < q && q == kv;
}

// The share of the q x kv score matrix such a kernel computes: all of it, half under a causal
// mask, or, under a sliding window, the keys each query sees (query i: min(i + 1, window + 1)).
inline double attention_score_share(std::int64_t q, std::int64_t kv, bool causal, std::int64_t window) {
  if (!sliding_window_applies(q, kv, causal, window)) return causal ? 0.5 : 1.0;
  const double n = static_cast<double>(q), w = static_cast<double>(window + 1);
  return (w * (w + 1) / 2 + (n - w) * w) / (n * n);
}

struct LayerDims {
  std::int64_t b = 1;   // micro-batch size
  std::int64_t s = 1;   // sequence length per context-parallel rank
  std::int64_t h = 1;   // hidden size
  std::int64_t a = 1;   // attention heads per tensor-parallel rank
  std::int64_t g = 1;   // query groups (key/value heads) per tensor-parallel rank
  std::int64_t d = 1;   // head dimension (MLA: the mean of the score and value head dimensions,
                        // which prices Q K^T plus P V and the Q/K/V/O bytes exactly)
  std::int64_t dv = 1;  // value head dimension (= d but under MLA)
  // Multi-head latent attention (mla): q and kv latent ranks (ql = 0: no q bottleneck), score
  // head dimensions without and with rotary embedding.
  bool mla = false;
  bool mla_up_recomputed = false;  // recompute_modules mla_up_proj: Q, K, V not kept for backward
  bool mlp_recomputed = false;     // recompute_modules mlp: a dense MLP keeps only its input
  bool moe_recomputed = false;     // recompute_modules moe: an MoE layer keeps only its input
  // recompute_modules layernorm: the outputs of the norms that are modules of their own (MLA's
  // input norm, an MoE layer's pre-MLP norm) are not kept; moe_act: nor the experts' activation.
  bool norm_recomputed = false;
  bool moe_act_recomputed = false;
  std::int64_t ql = 0, kl = 0, dn = 0, dr = 0;
  std::int64_t f = 1;   // dense MLP hidden size per tensor-parallel rank
  std::int64_t v = 1;   // padded vocabulary per tensor-parallel rank
  std::int64_t t = 1;   // tensor-parallel size
  std::int64_t cp = 1;  // context-parallel size
  bool cp_a2a = false;            // context parallelism by all-to-alls (cp_comm_type a2a) rather than the ring
  bool cp_all_gather = false;     // by all-gathered K and V (cp_comm_type allgather)
  // cp_comm_type a2a+p2p with both levels > 1: the all-to-all group's size A (the ring then spans
  // cp / A ranks at stride A, over 1/A of the heads and A x the sequence); 1 otherwise.
  std::int64_t cp_inner = 1;
  bool te_cross_entropy = false;  // Transformer Engine's fused cross-entropy (TrainingSpec::te_cross_entropy)
  bool sp = false;      // sequence parallel
  bool gated = false;   // SwiGLU: fc1 produces 2f
  bool layernorm = true;
  bool rope = false;
  bool qk_norm = false;  // qk_layernorm: each query and key head normalised before the rotary embedding
  bool bias = true;
  bool hidden_dropout = true;
  bool attention_dropout = true;
  bool flash = true;
  sim::DataType act = sim::DataType::kBf16;   // activations
  sim::DataType gemm = sim::DataType::kBf16;  // GEMM inputs (fp8 under Transformer Engine)
  QuantRecipe quant_recipe = QuantRecipe::kDelayed;
  // The GPU's tensor cores read an FP8 operand column-wise from its row-wise layout (Blackwell),
  // so per-tensor-scaled casts need no transposed copy (Transformer Engine's "Handling
  // transposes": Hopper transposes, Blackwell does not; MXFP8's column-wise blocks still differ).
  bool fp8_columnwise_native = false;
  // MoE (experts = 0: dense)
  std::int64_t experts = 0;        // routed experts in total
  std::int64_t local_experts = 0;  // experts on this rank
  std::int64_t topk = 0;
  std::int64_t ep = 1;
  std::int64_t etp = 1;            // expert-tensor-parallel size
  std::int64_t ef = 0;             // expert MLP hidden size per expert-tensor-parallel rank
  std::int64_t sf = 0;             // shared-expert MLP hidden size per tensor-parallel rank (0: none)

  std::int64_t tokens() const { return b * s; }                // tokens of a micro-batch on this rank
  std::int64_t sharded_tokens() const { return sp ? b * s / t : b * s; }  // in norm/dropout regions
  std::int64_t act_bytes() const { return sim::size_of(act); }
  std::int64_t qkv_width() const { return (a + 2 * g) * d; }
  std::int64_t q_width() const { return a * (dn + dr); }   // MLA: q projection output per TP rank
  std::int64_t kv_up_width() const { return a * (dn + dv); }  // MLA: kv up projection output per TP rank
  std::int64_t fc1_width() const { return gated ? 2 * f : f; }
  std::int64_t expert_fc1_width() const { return gated ? 2 * ef : ef; }
  std::int64_t shared_fc1_width() const { return gated ? 2 * sf : sf; }
  bool quantized() const { return gemm == sim::DataType::kFp8 || gemm == sim::DataType::kFp4; }
  bool mxfp8() const { return quantized() && quant_recipe == QuantRecipe::kMxfp8; }
  bool nvfp4() const { return gemm == sim::DataType::kFp4; }
  std::int64_t quant_bytes(std::int64_t elements) const { return quantized_bytes(elements, quant_recipe); }
  // Bytes of `elements` activations all-gathered before a GEMM: Transformer Engine casts to FP8
  // before gathering (distributed.py, gather_along_first_dim with a Float8 quantizer; MXFP8
  // gathers its scales too).
  std::int64_t gather_bytes(std::int64_t elements) const { return quantized() ? quant_bytes(elements) : act_bytes() * elements; }
  // Device-memory traffic of quantizing `elements` values of `source_bytes` each to FP8 for a
  // GEMM and its backward (Transformer Engine's docs, "FP8 Current Scaling", "MXFP8" and
  // "NVFP4"): delayed scaling and MXFP8 read the tensor once, current scaling and NVFP4 twice
  // (amax, then cast; NVFP4's random Hadamard transform of the wgrad operands is fused into the
  // cast), and the copies (quantized_copies_bytes) are written.
  std::int64_t quantize_bytes(std::int64_t elements, std::int64_t source_bytes) const {
    const std::int64_t reads = amax_pass(quant_recipe) ? 2 : 1;
    return reads * source_bytes * elements + quantized_copies_bytes(elements, quant_recipe, fp8_columnwise_native);
  }
  // MoE: tokens entering the layer on this rank (sequence-sharded), and tokens its local experts
  // process after the expert-parallel all-to-all and the expert-tensor-parallel all-gather, with
  // the router's load balanced (Megatron's alltoall token dispatcher).
  std::int64_t moe_tokens() const { return sharded_tokens(); }
  std::int64_t routed_tokens() const { return sharded_tokens() * topk * etp; }
};

LayerDims layer_dims(const ModelSpec& m, const ParallelSpec& p, const TrainingSpec& t);

// Parameters of one decoder layer held by one GPU: weights sharded over tensor parallelism
// (experts over expert-tensor and expert parallelism), norms and row-parallel biases replicated.
struct LayerParams {
  std::int64_t norm = 0;  // each of the two normalisations
  std::int64_t qk_norm = 0;  // qk_layernorm's two head-sized norms, replicated over TP ranks
  std::int64_t qkv = 0, proj = 0, fc1 = 0, fc2 = 0;  // dense MLP (0 for MoE)
  // MLA projections (qkv = 0): the down projections with their norms, replicated over TP ranks
  // (q_down = 0 without a q bottleneck), and the column-parallel up projections (q_up: the q
  // projection without a bottleneck).
  std::int64_t q_down = 0, q_up = 0, kv_down = 0, kv_up = 0;
  std::int64_t router = 0, expert_fc1 = 0, expert_fc2 = 0;  // all local experts together
  std::int64_t shared_fc1 = 0, shared_fc2 = 0;             // the shared expert (dense, tensor-parallel)
  std::int64_t gemm_weights = 0;  // weights of GEMMs in Transformer Engine modules (FP8-capable)
  std::int64_t dense() const {
    return 2 * norm + qk_norm + qkv + q_down + q_up + kv_down + kv_up + proj + fc1 + fc2 + router + shared_fc1 + shared_fc2;
  }
  std::int64_t expert() const { return expert_fc1 + expert_fc2; }
};

// The dims of a dense layer of the same model: an MoE model's layers without experts
// (moe_layer_freq) have the dense MLP of ffn_hidden_size.
inline LayerDims dense_layer_dims(LayerDims d) {
  d.experts = 0;
  d.local_experts = 0;
  d.topk = 0;
  d.ef = 0;
  d.sf = 0;
  return d;
}

// The dims of a layer first_last_layers_bf16 keeps out of FP8/FP4: 16-bit GEMM inputs.
inline LayerDims unquantized(LayerDims d) {
  d.gemm = d.act;
  return d;
}

inline LayerParams layer_params(const LayerDims& d) {
  LayerParams p;
  const std::int64_t bias = d.bias ? 1 : 0;
  p.norm = d.layernorm ? 2 * d.h : d.h;
  p.qk_norm = d.qk_norm ? 2 * (d.layernorm ? 2 : 1) * d.d : 0;
  p.qkv = d.h * d.qkv_width() + bias * d.qkv_width();
  p.proj = d.a * d.dv * d.h + bias * d.h;
  std::int64_t attention_gemm = d.h * (d.qkv_width() + d.a * d.d);
  if (d.mla) {
    p.qkv = 0;
    p.q_down = d.ql > 0 ? d.h * d.ql + d.ql : 0;
    p.q_up = d.ql > 0 ? d.ql * d.q_width() : d.h * d.q_width();
    p.kv_down = d.h * (d.kl + d.dr) + d.kl;
    p.kv_up = d.kl * d.kv_up_width();
    attention_gemm = p.q_down + p.q_up + p.kv_down + p.kv_up + d.a * d.dv * d.h;
  }
  if (d.experts == 0) {
    p.fc1 = d.h * d.fc1_width() + bias * d.fc1_width();
    p.fc2 = d.f * d.h + bias * d.h;
    p.gemm_weights = attention_gemm + d.h * (d.fc1_width() + d.f);
  } else {
    p.router = d.h * d.experts;
    p.expert_fc1 = d.local_experts * (d.h * d.expert_fc1_width() + bias * d.expert_fc1_width());
    p.expert_fc2 = d.local_experts * (d.ef * d.h + bias * d.h);
    p.gemm_weights = attention_gemm + d.local_experts * d.h * (d.expert_fc1_width() + d.ef);
    if (d.sf > 0) {
      p.shared_fc1 = d.h * d.shared_fc1_width() + bias * d.shared_fc1_width();
      p.shared_fc2 = d.sf * d.h + bias * d.h;
      p.gemm_weights += d.h * (d.shared_fc1_width() + d.sf);
    }
  }
  return p;
}

}  // namespace trainsim::models
