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
  d.dv = d.d;
  if (m.multi_latent_attention) {
    d.mla = true;
    d.ql = m.q_lora_rank;
    d.kl = m.kv_lora_rank;
    d.dn = m.qk_head_dim;
    d.dr = m.qk_pos_emb_head_dim;
    d.dv = m.v_head_dim;
    d.d = (d.dn + d.dr + d.dv) / 2;
    d.mla_up_recomputed = t.recomputes_mla_up_proj();
  }
  d.mlp_recomputed = t.recomputes_mlp();
  d.moe_recomputed = t.recomputes_moe();
  d.norm_recomputed = t.recomputes_layernorm();
  d.moe_act_recomputed = t.recomputes_moe_act();
  d.f = m.ffn_hidden_size / tp;
  d.v = m.padded_vocab(tp) / tp;
  d.t = tp;
  d.cp = p.context_parallel_size;
  d.cp_a2a = p.cp_runs_all_to_all();
  d.cp_inner = p.cp_hierarchical_a2a_size();
  d.cp_all_gather = p.cp_comm_type == CpCommType::kAllGather;
  d.te_cross_entropy = t.te_cross_entropy();
  d.sp = p.sequence_parallel && tp > 1;
  d.gated = m.gated();
  d.layernorm = m.normalization == Normalization::kLayerNorm;
  d.rope = m.position_embedding_type == PositionEmbedding::kRope;
  d.qk_norm = m.qk_layernorm;
  d.bias = m.add_bias_linear;
  d.hidden_dropout = m.hidden_dropout > 0;
  d.attention_dropout = m.attention_dropout > 0;
  d.flash = t.attention_kernel == AttentionKernel::kFlash;
  d.act = t.precision == Precision::kFp16 ? sim::DataType::kFp16 : sim::DataType::kBf16;
  d.gemm = t.quantized() ? tensor_core_type(t.precision) : d.act;
  d.quant_recipe = t.quant_recipe;
  if (m.is_moe()) {
    d.experts = m.num_experts;
    d.ep = p.expert_model_parallel_size;
    d.etp = p.etp();
    d.local_experts = m.num_experts / p.expert_model_parallel_size;
    d.topk = m.moe_router_topk;
    d.ef = m.expert_ffn_hidden() / d.etp;
    d.sf = m.shared_expert_ffn_hidden() / tp;
  }
  return d;
}

std::int64_t layer_activation_bytes(const LayerDims& d, bool selective) {
  const std::int64_t T = d.tokens(), Ts = d.sharded_tokens(), dt = d.act_bytes();
  // A GEMM's input is kept for its weight gradient; under FP8, Transformer Engine keeps the FP8
  // (column-wise) cast instead of the 16-bit tensor (module/linear.py, saved inputmat), with its
  // scales under MXFP8.
  auto lin = [&](std::int64_t elements) { return d.quantized() ? d.quant_bytes(elements) : dt * elements; };
  // Attention block (Korthikanti Sec. 4.1): QKV input, Q and K for the scores, V, the output
  // projection's input and the dropout mask; softmax output, its dropout mask and dropout output
  // (the 5as^2b term) only when the score matrix is materialised. Grouped-query attention keeps
  // g key/value heads instead of a.
  std::int64_t attention = lin(Ts * d.h)                  // QKV GEMM input (sharded under SP)
                           + dt * T * (d.a + 2 * d.g) * d.d  // Q, K, V
                           + lin(T * d.a * d.dv);           // output-projection input
  // qk_layernorm keeps its inputs, the projected queries and keys.
  if (d.qk_norm) attention += dt * T * (d.a + d.g) * d.d;
  if (d.mla) {
    // MLA: the down projections' input (sharded under SP), each latent's norm input and up
    // projection input (sharded, re-gathered in backward), the shared rotary key, then Q and K
    // of qk + rope dimensions and V of the value dimension.
    const std::int64_t latents = (d.ql > 0 ? d.ql : 0) + d.kl;
    attention = lin(Ts * d.h) + dt * Ts * latents + lin(Ts * latents) + dt * T * d.dr + lin(T * d.a * d.dv);
    // Q, K and V for the attention backward, unless recomputed from the latents.
    if (!d.mla_up_recomputed) attention += dt * T * d.a * (2 * (d.dn + d.dr) + d.dv);
    // recompute_modules layernorm: the input norm's output, the down projections' input, is not kept.
    if (d.norm_recomputed) attention -= lin(Ts * d.h);
  }
  if (d.hidden_dropout) attention += Ts * d.h;              // dropout mask, 1 byte
  if (!selective) {
    if (d.flash) {
      // Flash attention keeps the fp32 log-sum-exp per query row (Dao et al. 2022, Alg. 2) and its
      // output O, which is the output projection's input unless that was cast to FP8, or, under
      // all-to-all context parallelism (a2a, or a2a+p2p's all-to-all level), O by head groups
      // before the all-to-all that makes the projection's input (context_parallel.py: out_part
      // saved for the backward).
      const bool separate_output = d.quantized() || ((d.cp_a2a || d.cp_inner > 1) && d.cp > 1);
      attention += 4 * d.b * d.a * d.s + (separate_output ? dt * T * d.a * d.dv : 0);
    } else {
      attention += dt * d.b * d.a * d.s * d.s;  // softmax output
      if (d.attention_dropout) attention += d.b * d.a * d.s * d.s + dt * d.b * d.a * d.s * d.s;
    }
  }
  std::int64_t mlp = 0;
  if ((d.experts == 0 && d.mlp_recomputed) || (d.experts > 0 && d.moe_recomputed)) {
    // Checkpointed (recompute_modules mlp / moe): only the block's input, the pre-MLP norm's
    // 16-bit output (sharded under SP), is kept; everything inside runs again before its backward.
    mlp = dt * Ts * d.h;
  } else if (d.experts == 0) {
    // MLP block (Sec. 4.1): fc1 input, activation input, fc2 input, dropout mask.
    mlp = lin(Ts * d.h) + dt * T * d.fc1_width() + lin(T * d.f);
  } else {
    // MoE (Megatron's MoELayer with the alltoall dispatcher): the router input, its fp32
    // probabilities, the expert GEMMs' inputs and activation input over the routed tokens, and
    // the combined expert outputs the probability-weighted unpermute needs for the router's
    // gradient.
    const std::int64_t R = d.routed_tokens();
    mlp = dt * Ts * d.h + 4 * Ts * d.experts + lin(R * d.h) + dt * R * d.expert_fc1_width() + lin(R * d.ef) +
          dt * Ts * d.topk * d.h;
    // recompute_modules layernorm / moe_act: the pre-MLP norm's output (the router's input) and
    // fc2's input are recomputed instead of kept.
    if (d.norm_recomputed) mlp -= dt * Ts * d.h;
    if (d.moe_act_recomputed) mlp -= lin(R * d.ef);
    // The shared expert keeps what a dense MLP of its size keeps; its fc1 input is the router's
    // input, plus Transformer Engine's FP8 copy of it under FP8.
    if (d.sf > 0) mlp += (d.quantized() ? d.quant_bytes(Ts * d.h) : 0) + dt * T * d.shared_fc1_width() + lin(T * d.sf);
  }
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
         + dt * d.sharded_tokens() * d.h   // logits GEMM input (re-gathered in backward under SP)
         // fp32 exp(logits) of the vocab-parallel cross-entropy (tensor_parallel/cross_entropy.py,
         // save_for_backward), or Transformer Engine's fused one's logits gradient, in the 16-bit
         // logits themselves
         + (d.te_cross_entropy ? dt : 4) * d.tokens() * d.v;
}

std::int64_t mtp_activation_bytes(const LayerDims& layer, const LayerDims& d, bool selective, bool checkpointed) {
  const std::int64_t hidden = d.act_bytes() * d.sharded_tokens() * d.h;
  // Inputs: the previous hidden states and the shifted tokens' embedding (the norms keep them),
  // then the projection's input, their normalised concatenation (2h).
  if (checkpointed) return 2 * hidden + output_activation_bytes(d);
  return 2 * hidden + 2 * hidden + layer_activation_bytes(layer, selective) + output_activation_bytes(d);
}

std::int64_t optimizer_shard_params(const StageParameters& params, std::int64_t dp, std::int64_t expert_dp, bool sharded) {
  if (!sharded) return params.total();
  return (params.dense + dp - 1) / dp + (params.expert + expert_dp - 1) / expert_dp;
}

std::int64_t param_gather_bytes(std::int64_t params, std::int64_t fp8, bool quantized, const TrainingSpec& t, QuantRecipe r) {
  if (!quantized || !t.fp8_param_gather) return 2 * params;
  return 2 * (params - fp8) + gathered_quantized_param_bytes(fp8, r);
}

StaticMemory static_memory(const StageParameters& params, std::int64_t dp, std::int64_t expert_dp, const ParallelSpec& p,
                           const TrainingSpec& t, const TargetGpu& gpu) {
  TRAINSIM_CHECK(dp >= 1 && expert_dp >= 1, "data-parallel sizes must be positive");
  StaticMemory m;
  // Megatron mixed precision (docs "Distributed optimizer"): 16-bit weights (2 B), main grads
  // (4 B in fp32, 2 B when reduced in bf16), fp32 master weights + Adam m and v (12 B).
  // 16-bit main grads are also cast to an fp32 copy (4 B, sharded like the 12 B) for clipping
  // and the Adam step: the guide's 20 B (4 + 16/d) against 18 B (6 + 12/d). That copy lives only
  // from the end of the backward pass to the end of the step, so the optimizer tasks allocate
  // and free it (StageBuilder's optimizer step) and it shows in the peak, not here.
  // The precision-aware optimizer keeps less (TrainingSpec::optimizer_state_bytes), and without
  // the fp32 gradient copy when it holds the master weights.
  // Distributed optimizer / ZeRO-1 shard the 12 B over the data-parallel group (expert
  // parameters over the expert-data-parallel group); ZeRO-2 also the gradients; ZeRO-3 also the
  // weights.
  const std::int64_t grad_bytes = t.main_grad_bytes();
  const auto shard = [](std::int64_t bytes, std::int64_t n) { return (bytes + n - 1) / n; };
  const auto sharded = [&](std::int64_t per_param, bool on) {
    return on ? shard(per_param * params.dense, dp) + shard(per_param * params.expert, expert_dp)
              : per_param * params.total();
  };
  m.weights = sharded(2, p.zero_stage >= 3);
  if (t.quantized()) {
    // FP8: Transformer Engine caches each GEMM weight's FP8 copies (quantized_copies_bytes) from the
    // first micro-batch on (module/base.py, get_weight_workspace with is_first_microbatch); under
    // ZeRO-3 they live only while a layer is gathered. With fp8_param_gather the copies are the
    // weights: no 16-bit copy is kept. Under ZeRO-3 each rank then keeps its shard of what the
    // gather moves (gathered_quantized_param_bytes; the expert weights sharded over `expert_dp`).
    const std::int64_t fp8 = params.fp8_gemm, expert = std::min(params.expert, fp8);
    const auto copies = [&](std::int64_t n) { return quantized_copies_bytes(n, t.quant_recipe, gpu.fp8_columnwise_native); };
    if (t.fp8_param_gather && p.zero_stage >= 3) {
      const auto gathered = [&](std::int64_t n) { return gathered_quantized_param_bytes(n, t.quant_recipe) - 2 * n; };
      m.weights += shard(gathered(fp8 - expert), dp) + shard(gathered(expert), expert_dp);
    } else if (p.zero_stage < 3) {
      m.weights += copies(fp8) - (t.fp8_param_gather ? 2 * fp8 : 0);
    }
  }
  m.gradients = sharded(grad_bytes, p.zero_stage >= 2);
  if (t.wgrad_placeholders()) {
    // Transformer Engine 2.3+ (module/base.py get_dummy_wgrad, #1651): under fused gradient
    // accumulation each GEMM's backward returns a cached placeholder of the weight's shape and
    // dtype (16-bit, also for FP8 weights, whose nominal dtype it is), one per distinct shape.
    m.wgrad_placeholders = 2 * params.distinct_gemm_weights;
    m.gradients += m.wgrad_placeholders;
  }
  m.optimizer_states = sharded(t.optimizer_state_bytes(), p.shards_optimizer());
  return m;
}

}  // namespace trainsim::models
