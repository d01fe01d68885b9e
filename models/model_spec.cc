#include "models/model_spec.h"

namespace trainsim::models {

const char* to_string(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kSwiglu:
      return "swiglu";
    case Activation::kSquaredRelu:
      return "squared_relu";
  }
  return "?";
}

const char* to_string(Normalization n) { return n == Normalization::kLayerNorm ? "layernorm" : "rmsnorm"; }

const char* to_string(PositionEmbedding p) {
  return p == PositionEmbedding::kLearnedAbsolute ? "learned_absolute" : "rope";
}

std::int64_t ModelSpec::padded_vocab(std::int64_t tp) const {
  const std::int64_t multiple = make_vocab_size_divisible_by * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

std::int64_t ModelSpec::num_moe_layers() const {
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < num_layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

std::int64_t ModelSpec::layer_parameters(bool moe_layer) const {
  const bool moe = moe_layer && is_moe();
  const std::int64_t h = hidden_size, d = head_dim();
  const std::int64_t q = num_attention_heads * d, kv = num_query_groups * d;
  const std::int64_t bias = add_bias_linear ? 1 : 0;
  const std::int64_t norm = normalization == Normalization::kLayerNorm ? 2 * h : h;
  std::int64_t attn = h * (q + 2 * kv) + bias * (q + 2 * kv) + q * h + bias * h;
  if (qk_layernorm) attn += 2 * (norm / h) * d;  // q_layernorm and k_layernorm
  if (multi_latent_attention) {
    // Megatron-Core's MLA: q down/up projections with a norm between (or one q projection), kv
    // down projection (latent plus the shared rotary key) with a norm, kv up projection, output.
    const std::int64_t a = num_attention_heads, qk = qk_head_dim + qk_pos_emb_head_dim;
    const std::int64_t q_params = q_lora_rank > 0 ? h * q_lora_rank + q_lora_rank + q_lora_rank * a * qk : h * a * qk;
    attn = q_params + h * (kv_lora_rank + qk_pos_emb_head_dim) + kv_lora_rank + kv_lora_rank * a * (qk_head_dim + v_head_dim) +
           a * v_head_dim * h + bias * h;
  }
  const std::int64_t f = moe ? expert_ffn_hidden() : ffn_hidden_size;
  const std::int64_t up = gated() ? 2 * f : f;
  std::int64_t mlp = h * up + bias * up + f * h + bias * h;
  if (moe) mlp = mlp * num_experts + h * num_experts;  // experts + router
  if (const std::int64_t sf = moe ? shared_expert_ffn_hidden() : 0; sf > 0) {
    const std::int64_t sup = gated() ? 2 * sf : sf;
    mlp += h * sup + bias * sup + sf * h + bias * h;  // the shared expert
  }
  return attn + mlp + 2 * norm;
}

std::int64_t ModelSpec::embedding_parameters(std::int64_t tp) const {
  std::int64_t p = padded_vocab(tp) * hidden_size;
  if (position_embedding_type == PositionEmbedding::kLearnedAbsolute) p += seq_length * hidden_size;
  return p;
}

std::int64_t ModelSpec::total_parameters(std::int64_t tp) const {
  const std::int64_t final_norm = normalization == Normalization::kLayerNorm ? 2 * hidden_size : hidden_size;
  const std::int64_t moe_layers = num_moe_layers();
  std::int64_t p = moe_layers * layer_parameters(true) + (num_layers - moe_layers) * layer_parameters(false) +
                   embedding_parameters(tp) + final_norm;
  if (untie_embeddings_and_output_weights) p += padded_vocab(tp) * hidden_size;
  return p;
}

std::int64_t ModelSpec::mtp_parameters() const {
  const std::int64_t norm = normalization == Normalization::kLayerNorm ? 2 * hidden_size : hidden_size;
  // enorm, hnorm, eh_proj (2h x h, no bias) and the final norm around each module's layer.
  return mtp_num_layers * (layer_parameters(is_moe_layer(num_layers)) + 3 * norm + 2 * hidden_size * hidden_size);
}

}  // namespace trainsim::models
