#include "models/memory_model.h"

#include <algorithm>

#include "sim/check.h"

namespace trainsim::models {

LayerDims layer_dims(const ModelSpec& m, const ParallelSpec& p, const TrainingSpec& t) {
  LayerDims d;
  const std::int64_t tp = p.tensor_model_parallel_size;
  d.b = t.micro_batch_size;
  d.s = m.seq_length / p.context_parallel_size;
  d.h = m.hidden_size;
  d.a = m.num_attention_heads / tp;
  d.g = m.num_query_groups / tp;
  d.d = m.head_dim();
  d.f = (m.is_moe() ? m.expert_ffn_hidden() : m.ffn_hidden_size) / tp;
  d.v = m.padded_vocab(tp) / tp;
  d.t = tp;
  d.cp = p.context_parallel_size;
  d.sp = p.sequence_parallel && tp > 1;
  d.gated = m.gated();
  d.layernorm = m.normalization == Normalization::kLayerNorm;
  d.rope = m.position_embedding_type == PositionEmbedding::kRope;
  d.bias = m.add_bias_linear;
  d.hidden_dropout = m.hidden_dropout > 0;
  d.attention_dropout = m.attention_dropout > 0;
  d.flash = t.attention_kernel == AttentionKernel::kFlash;
  d.act = t.precision == Precision::kFp16 ? sim::DataType::kFp16 : sim::DataType::kBf16;
  d.gemm = t.precision == Precision::kFp8 ? sim::DataType::kFp8 : d.act;
  if (m.is_moe()) {
    d.experts = m.num_experts;
    d.ep = p.expert_model_parallel_size;
    d.local_experts = m.num_experts / p.expert_model_parallel_size;
    d.topk = m.moe_router_topk;
  }
  return d;
}

std::int64_t layer_activation_bytes(const LayerDims& d, bool selective) {
  const std::int64_t T = d.tokens(), Ts = d.sharded_tokens(), dt = d.act_bytes();
  // Attention block (Korthikanti Sec. 4.1): QKV input, Q and K for the scores, V, the output
  // projection's input and the dropout mask; softmax output, its dropout mask and dropout output
  // (the 5as^2b term) only when the score matrix is materialised.
  std::int64_t attention = dt * Ts * d.h                  // QKV GEMM input (sharded under SP)
                           + dt * T * (d.a + 2 * d.g) * d.d  // Q, K, V
                           + dt * T * d.a * d.d;             // output-projection input
  if (d.hidden_dropout) attention += Ts * d.h;              // dropout mask, 1 byte
  if (!selective) {
    if (d.flash) {
      attention += 4 * d.b * d.a * d.s;  // softmax statistics (fp32 log-sum-exp per row)
    } else {
      attention += dt * d.b * d.a * d.s * d.s;  // softmax output
      if (d.attention_dropout) attention += d.b * d.a * d.s * d.s + dt * d.b * d.a * d.s * d.s;
    }
  }
  // MLP block (Sec. 4.1): fc1 input, activation input, fc2 input, dropout mask. With MoE, every
  // token visits topk experts, so the expert tensors scale by topk.
  const std::int64_t routed = d.experts > 0 ? d.topk : 1;
  std::int64_t mlp = dt * Ts * d.h + routed * (dt * T * d.fc1_width() + dt * T * d.f);
  if (d.experts > 0) mlp += dt * T * d.h * d.topk + 4 * T * d.experts;  // dispatched tokens, router probs
  if (d.hidden_dropout) mlp += Ts * d.h;
  // Two normalisations keep their inputs.
  const std::int64_t norms = 2 * dt * Ts * d.h;
  return attention + mlp + norms;
}

std::int64_t layer_checkpoint_bytes(const LayerDims& d) { return d.act_bytes() * d.sharded_tokens() * d.h; }

std::int64_t embedding_activation_bytes(const LayerDims& d) {
  return d.hidden_dropout ? d.sharded_tokens() * d.h : 0;  // embedding dropout mask
}

std::int64_t output_activation_bytes(const LayerDims& d) {
  const std::int64_t dt = d.act_bytes();
  return dt * d.sharded_tokens() * d.h     // final norm input
         + dt * d.sharded_tokens() * d.h   // logits GEMM input
         + 4 * d.tokens() * d.v;           // fp32 softmax of the vocab-parallel cross-entropy
}

StaticMemory static_memory(std::int64_t params, std::int64_t dp, const ParallelSpec& p, const TrainingSpec& t) {
  TRAINSIM_CHECK(dp >= 1, "data-parallel size must be positive");
  StaticMemory m;
  // Megatron mixed precision (docs "Distributed optimizer"): 16-bit weights (2 B), main grads
  // (4 B in fp32, 2 B when reduced in bf16), fp32 master weights + Adam m and v (12 B).
  // Distributed optimizer / ZeRO-1 shard the 12 B over dp; ZeRO-2 also the gradients;
  // ZeRO-3 also the weights.
  const std::int64_t grad_bytes = t.grad_reduce_in_fp32 ? 4 : 2;
  const bool shard_optimizer = p.use_distributed_optimizer || p.zero_stage >= 1;
  const bool shard_grads = p.zero_stage >= 2;
  const bool shard_weights = p.zero_stage >= 3;
  const auto shard = [dp](std::int64_t bytes) { return (bytes + dp - 1) / dp; };
  m.weights = 2 * params;
  if (t.precision == Precision::kFp8) m.weights += params;  // FP8 weight copies (Transformer Engine)
  if (shard_weights) m.weights = shard(m.weights);
  m.gradients = shard_grads ? shard(grad_bytes * params) : grad_bytes * params;
  m.optimizer_states = shard_optimizer ? shard(12 * params) : 12 * params;
  return m;
}

}  // namespace trainsim::models
