#pragma once
// The Transformer being trained, with Megatron-LM's argument names. Plain value type; validated
// where it is read (config/).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::models {

enum class Activation : std::uint8_t { kGelu, kSwiglu, kSquaredRelu };
enum class Normalization : std::uint8_t { kLayerNorm, kRmsNorm };
enum class PositionEmbedding : std::uint8_t { kLearnedAbsolute, kRope };

const char* to_string(Activation a);
const char* to_string(Normalization n);
const char* to_string(PositionEmbedding p);

struct ModelSpec {
  std::string name;
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_query_groups = 0;  // = heads for multi-head attention
  std::int64_t kv_channels = 0;       // head dimension; 0 = hidden / heads
  std::int64_t ffn_hidden_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t make_vocab_size_divisible_by = 128;
  std::int64_t seq_length = 0;
  Activation activation = Activation::kGelu;
  Normalization normalization = Normalization::kLayerNorm;
  PositionEmbedding position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  bool untie_embeddings_and_output_weights = false;
  bool add_bias_linear = true;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  // Megatron-Core's qk_layernorm (Qwen3, OLMoE): a normalisation of each query and key head
  // (weights of head_dim, shared by the heads) between the QKV projection and the rotary embedding.
  bool qk_layernorm = false;
  // Multi-head latent attention (DeepSeek-V2/V3; Megatron-Core MLASelfAttention): queries
  // through a rank-q_lora_rank bottleneck (0: a plain projection), keys and values through a
  // shared rank-kv_lora_rank latent; heads of qk_head_dim + qk_pos_emb_head_dim for scores and
  // v_head_dim for values. num_query_groups is the head count.
  bool multi_latent_attention = false;
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_head_dim = 128;
  std::int64_t qk_pos_emb_head_dim = 64;
  std::int64_t v_head_dim = 128;
  // Mixture of experts (num_experts = 0: dense MLP).
  std::int64_t num_experts = 0;
  std::int64_t moe_router_topk = 2;
  // Group-limited routing (Megatron's moe_router_num_groups / moe_router_group_topk; DeepSeek's
  // n_group / topk_group): experts in equal groups, a token's top-k drawn from the experts of its
  // top groups. 0: none. It changes what crosses nodes only with the flex dispatcher (DeepEP
  // sends a token to each node once).
  std::int64_t moe_router_num_groups = 0;
  std::int64_t moe_router_group_topk = 0;
  std::int64_t moe_ffn_hidden_size = 0;  // 0 = ffn_hidden_size
  // Shared experts (Megatron-Core SharedExpertMLP): a dense MLP of this hidden size every token
  // also goes through, beside its routed experts (0: none; MoE only).
  std::int64_t moe_shared_expert_intermediate_size = 0;
  // Which layers are MoE ones (Megatron's moe_layer_freq as a per-layer list of 0/1); empty: all.
  std::vector<std::uint8_t> moe_layer_pattern;
  // Sliding-window attention (Megatron-Core's window_size (left, 0); Mistral, Gemma 2/3, GPT-OSS):
  // each query sees itself and the window_size keys before it; 0: the whole causal prefix. Which
  // layers use it: Megatron-Core's window_attn_skip_freq as a per-layer list of 0/1 (1: window);
  // empty: all.
  std::int64_t window_size = 0;
  std::vector<std::uint8_t> window_layer_pattern;
  // Multi-token prediction (DeepSeek-V3, arXiv:2412.19437 Sec. 2.2; Megatron-Core's
  // MultiTokenPredictionBlock): after the decoder, each of mtp_num_layers modules normalises the
  // previous hidden states and the embedding of the tokens one further ahead, projects their
  // concatenation (2h -> h), runs one transformer layer of the last decoder layer's kind and a
  // final norm, and scores the shared output layer's logits against the next-further tokens.
  // They live on the last pipeline stage.
  std::int64_t mtp_num_layers = 0;

  std::int64_t head_dim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads; }
  std::int64_t expert_ffn_hidden() const { return moe_ffn_hidden_size > 0 ? moe_ffn_hidden_size : ffn_hidden_size; }
  bool gated() const { return activation == Activation::kSwiglu; }
  bool is_moe() const { return num_experts > 0; }
  std::int64_t shared_expert_ffn_hidden() const { return is_moe() ? moe_shared_expert_intermediate_size : 0; }
  // Whether decoder layer `layer` (0-based) routes to experts; the others have the dense MLP.
  // Indices from num_layers on are the multi-token-prediction layers, of the last layer's kind.
  bool is_moe_layer(std::int64_t layer) const {
    if (!is_moe()) return false;
    if (moe_layer_pattern.empty()) return true;
    const auto i = std::min(static_cast<std::size_t>(layer), moe_layer_pattern.size() - 1);
    return moe_layer_pattern[i] != 0;
  }
  std::int64_t num_moe_layers() const;
  // The attention window of decoder layer `layer` (0-based; 0: none). Indices from num_layers on
  // (multi-token-prediction layers) follow the last layer.
  std::int64_t window_of(std::int64_t layer) const {
    if (window_size <= 0) return 0;
    if (window_layer_pattern.empty()) return window_size;
    const auto i = std::min(static_cast<std::size_t>(std::max<std::int64_t>(0, layer)), window_layer_pattern.size() - 1);
    return window_layer_pattern[i] != 0 ? window_size : 0;
  }
  // Vocabulary padded as Megatron pads it: to a multiple of make_vocab_size_divisible_by * tp.
  std::int64_t padded_vocab(std::int64_t tp) const;
  // Parameters of one decoder layer (an MoE layer with all its experts, or a dense one), of the
  // embedding, of the whole model.
  std::int64_t layer_parameters(bool moe_layer = true) const;
  std::int64_t embedding_parameters(std::int64_t tp) const;
  std::int64_t total_parameters(std::int64_t tp = 1) const;
  // Parameters of the multi-token-prediction modules (their layers, projections and norms; they
  // share the embedding and output layer), not counted in total_parameters.
  std::int64_t mtp_parameters() const;
};

}  // namespace trainsim::models
