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

std::int64_t ModelSpec::layer_parameters() const {
  const std::int64_t h = hidden_size, d = head_dim();
  const std::int64_t q = num_attention_heads * d, kv = num_query_groups * d;
  const std::int64_t bias = add_bias_linear ? 1 : 0;
  const std::int64_t norm = normalization == Normalization::kLayerNorm ? 2 * h : h;
  std::int64_t attn = h * (q + 2 * kv) + bias * (q + 2 * kv) + q * h + bias * h;
  const std::int64_t f = is_moe() ? expert_ffn_hidden() : ffn_hidden_size;
  const std::int64_t up = gated() ? 2 * f : f;
  std::int64_t mlp = h * up + bias * up + f * h + bias * h;
  if (is_moe()) mlp = mlp * num_experts + h * num_experts;  // experts + router
  if (const std::int64_t sf = shared_expert_ffn_hidden(); sf > 0) {
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
  std::int64_t p = num_layers * layer_parameters() + embedding_parameters(tp) + final_norm;
  if (untie_embeddings_and_output_weights) p += padded_vocab(tp) * hidden_size;
  return p;
}

}  // namespace trainsim::models
