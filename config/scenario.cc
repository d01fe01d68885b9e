#include "config/scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "config/hardware_reader.h"
#include "config/pipeline_layout.h"
#include "config/presets.h"
#include "config/simulation_cost.h"
#include "models/flop_count.h"
#include "models/lowering.h"

namespace trainsim::config {

namespace {

using models::Activation;
using models::ModelSpec;
using models::Normalization;
using models::ParallelSpec;
using models::PositionEmbedding;
using models::ReliabilitySpec;
using models::TrainingSpec;

constexpr std::int64_t kBig = std::int64_t{1} << 40;

// Upper bounds of the model's sizes (README "Input limits"): 40x to 250x the largest published
// model's value, and small enough that the per-layer products the lowering forms in 64-bit
// integers (tokens x widths x bytes) cannot overflow once the derived checks of check_magnitudes
// pass.
struct ModelLimit {
  const char* key;
  std::int64_t max;
};
constexpr ModelLimit kModelLimits[] = {
    {"num_layers", std::int64_t{1} << 16},           // GPT-3 1T: 128
    {"hidden_size", std::int64_t{1} << 20},          // GPT-3 1T: 25,600
    {"num_attention_heads", std::int64_t{1} << 16},  // GPT-3 1T: 160
    {"num_query_groups", std::int64_t{1} << 16},
    {"kv_channels", std::int64_t{1} << 16},          // largest head dimension in use: 256
    {"ffn_hidden_size", std::int64_t{1} << 22},      // Llama 3.1 405B: 53,248
    {"vocab_size", std::int64_t{1} << 26},           // largest vocabularies: 256k
    {"make_vocab_size_divisible_by", std::int64_t{1} << 16},
    {"seq_length", kMaxSeqLength},
    {"num_experts", std::int64_t{1} << 14},          // DeepSeek-V3: 256 routed experts
    {"moe_router_topk", std::int64_t{1} << 14},
    {"moe_router_num_groups", std::int64_t{1} << 14},  // DeepSeek-V3: 8
    {"moe_router_group_topk", std::int64_t{1} << 14},  // DeepSeek-V3: 4
    {"moe_ffn_hidden_size", std::int64_t{1} << 22},
    {"moe_shared_expert_intermediate_size", std::int64_t{1} << 22},
    {"q_lora_rank", std::int64_t{1} << 20},  // DeepSeek-V3: 1,536
    {"kv_lora_rank", std::int64_t{1} << 20},  // DeepSeek-V3: 512
    {"qk_head_dim", std::int64_t{1} << 16},
    {"qk_pos_emb_head_dim", std::int64_t{1} << 16},
    {"v_head_dim", std::int64_t{1} << 16},
    {"mtp_num_layers", 64},  // DeepSeek-V3, GLM-4.5: 1
};
constexpr std::int64_t model_limit(const char* key) {
  for (const ModelLimit& l : kModelLimits) {
    if (std::string_view(l.key) == key) return l.max;
  }
  return kBig;
}

// Where each validated value came from, so plan errors can point at it.
struct Origins {
  std::map<std::string, std::pair<std::string, std::string>> at;  // "model.num_layers" -> (file, path)
  void note(const std::string& key, const ObjectReader& r, const std::string& field) {
    at[key] = {r.file_of(field), r.path_of(field)};
  }
  [[noreturn]] void fail(const std::string& key, const std::string& message) const { throw error<InputError>(key, message); }
  // A value beyond what trainsim simulates rather than a rule Megatron enforces (LimitError).
  [[noreturn]] void fail_limit(const std::string& key, const std::string& message) const {
    throw error<LimitError>(key, message);
  }
  // `key`'s file and JSON path when it was read from one, else the key itself.
  template <typename E>
  E error(const std::string& key, const std::string& message) const {
    auto it = at.find(key);
    return it == at.end() ? E("", key, message) : E(it->second.first, it->second.second, message);
  }
};

// Maps a Hugging Face config.json onto Megatron's names (transformers configuration_*.py). Keys
// trainsim does not use are ignored (the file belongs to another tool); the ones it uses are
// checked like scenario keys.
void read_hf_config(const std::string& file, ModelSpec& m) {
  const Json doc = read_json_file(file);
  if (!doc.is_object()) throw InputError(file, "/", "expected a Hugging Face config.json object, got " + describe(doc));
  auto find = [&](const char* key) -> const Json* {
    auto it = doc.find(key);
    return it == doc.end() || it->is_null() ? nullptr : &*it;
  };
  // The first of `keys` present, as an integer within the limit of `limit_key`.
  auto num = [&](std::initializer_list<const char*> keys, std::int64_t fallback, const char* limit_key) -> std::int64_t {
    const std::int64_t max = model_limit(limit_key);
    for (const char* k : keys) {
      const Json* v = find(k);
      if (v == nullptr) continue;
      const bool integer = v->is_number_integer() && !(v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max));
      if (!integer || v->get<std::int64_t>() < 1 || v->get<std::int64_t>() > max) {
        throw InputError(file, join_path("", k), "expected an integer in [1, " + std::to_string(max) + "], got " + describe(*v));
      }
      return v->get<std::int64_t>();
    }
    if (fallback < 0) throw InputError(file, join_path("", *keys.begin()), "missing; a Hugging Face config needs it");
    return fallback;
  };
  auto text = [&](const char* key, const std::string& fallback) -> std::string {
    const Json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) throw InputError(file, join_path("", key), "expected a string, got " + describe(*v));
    return v->get<std::string>();
  };
  auto flag = [&](const char* key, bool fallback) -> bool {
    const Json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) throw InputError(file, join_path("", key), "expected true or false, got " + describe(*v));
    return v->get<bool>();
  };
  auto fraction = [&](const char* key, double fallback) -> double {
    const Json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !(v->get<double>() >= 0) || !(v->get<double>() <= 0.99)) {
      throw InputError(file, join_path("", key), "expected a number in [0, 0.99], got " + describe(*v));
    }
    return v->get<double>();
  };
  // Configs of models trainsim has no lowering for, named at the key that says so.
  if (flag("is_encoder_decoder", false)) {
    throw InputError(file, "/is_encoder_decoder", "an encoder-decoder model is not modelled by trainsim (decoder-only Transformers are)");
  }
  if (find("text_config") != nullptr && find("hidden_size") == nullptr) {
    throw InputError(file, "/text_config", "a multimodal config: give its language model's config (the text_config object) as its own file");
  }
  m.name = text("_name_or_path", text("model_type", "hf model"));
  m.hidden_size = num({"hidden_size", "n_embd", "d_model"}, -1, "hidden_size");
  m.num_layers = num({"num_hidden_layers", "n_layer"}, -1, "num_layers");
  m.num_attention_heads = num({"num_attention_heads", "n_head"}, -1, "num_attention_heads");
  // Key/value heads: num_key_value_heads, Falcon's num_kv_heads / n_head_kv, or its multi_query
  // flag (one shared head).
  m.num_query_groups = num({"num_key_value_heads", "num_kv_heads", "n_head_kv"}, flag("multi_query", false) ? 1 : m.num_attention_heads,
                           "num_query_groups");
  m.kv_channels = num({"head_dim"}, std::max<std::int64_t>(1, m.hidden_size / m.num_attention_heads), "kv_channels");
  m.ffn_hidden_size = num({"intermediate_size", "n_inner"}, std::min(4 * m.hidden_size, model_limit("ffn_hidden_size")), "ffn_hidden_size");
  m.vocab_size = num({"vocab_size"}, -1, "vocab_size");
  const std::string act = text("hidden_act", text("activation_function", "gelu"));
  // Gemma's MLP is gated (gate_proj, up_proj, down_proj) with a GeLU gate: the GEMMs of SwiGLU.
  // Its config leaves tie_word_embeddings to GemmaConfig's default, true.
  const std::string type = text("model_type", "");
  const bool gemma = type.rfind("gemma", 0) == 0;
  m.activation = (act == "silu" || act == "swiglu" || gemma) ? Activation::kSwiglu
                 : (act == "relu2" ? Activation::kSquaredRelu : Activation::kGelu);
  const bool rms = doc.contains("rms_norm_eps");
  m.normalization = rms ? Normalization::kRmsNorm : Normalization::kLayerNorm;
  const bool rotary = doc.contains("rope_theta") || doc.contains("rope_scaling") || doc.contains("rotary_pct") ||
                      doc.contains("rope_parameters");
  m.position_embedding_type = rotary ? PositionEmbedding::kRope : PositionEmbedding::kLearnedAbsolute;
  m.untie_embeddings_and_output_weights = !flag("tie_word_embeddings", gemma || !rms);
  m.add_bias_linear = flag("attention_bias", flag("bias", !rms)) || flag("mlp_bias", false);  // "bias": Falcon
  // Qwen3 and Qwen3-MoE normalise each query and key head (Qwen3Attention's q_norm, k_norm over
  // head_dim: Megatron-Core's qk_layernorm); their configs do not say so, their model_type does.
  m.qk_layernorm = type == "qwen3" || type == "qwen3_moe";
  m.hidden_dropout = fraction("hidden_dropout", fraction("resid_pdrop", 0.0));
  m.attention_dropout = fraction("attention_dropout", fraction("attn_pdrop", 0.0));
  // Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): q_lora_rank null means no q bottleneck.
  if (find("kv_lora_rank") != nullptr) {
    m.multi_latent_attention = true;
    m.q_lora_rank = find("q_lora_rank") != nullptr ? num({"q_lora_rank"}, 0, "q_lora_rank") : 0;
    m.kv_lora_rank = num({"kv_lora_rank"}, 0, "kv_lora_rank");
    m.qk_head_dim = num({"qk_nope_head_dim"}, m.qk_head_dim, "qk_head_dim");
    m.qk_pos_emb_head_dim = num({"qk_rope_head_dim"}, m.qk_pos_emb_head_dim, "qk_pos_emb_head_dim");
    m.v_head_dim = num({"v_head_dim"}, m.v_head_dim, "v_head_dim");
  } else if (find("q_lora_rank") != nullptr) {
    throw InputError(file, "/q_lora_rank", "q_lora_rank without kv_lora_rank: not a multi-head latent attention config trainsim knows");
  }
  // Routed experts: Mixtral's num_local_experts, DeepSeek's n_routed_experts, Qwen-MoE's and
  // OLMoE's num_experts (0 in some dense configs).
  const Json* experts = nullptr;
  for (const char* key : {"num_local_experts", "n_routed_experts", "num_experts"}) experts = experts != nullptr ? experts : find(key);
  if (experts != nullptr && !(experts->is_number_integer() && experts->get<std::int64_t>() == 0)) {
    m.num_experts = num({"num_local_experts", "n_routed_experts", "num_experts"}, 0, "num_experts");
    m.moe_router_topk = num({"num_experts_per_tok"}, std::min<std::int64_t>(2, m.num_experts), "moe_router_topk");
    m.moe_ffn_hidden_size = num({"moe_intermediate_size"}, m.ffn_hidden_size, "moe_ffn_hidden_size");
    // Group-limited routing (DeepSeek-V2/V3, Kimi K2): n_group groups of experts, topk_group of
    // them per token.
    if (find("n_group") != nullptr && find("topk_group") != nullptr) {
      m.moe_router_num_groups = num({"n_group"}, 0, "moe_router_num_groups");
      m.moe_router_group_topk = num({"topk_group"}, 0, "moe_router_group_topk");
    }
    auto positive = [&](const char* key) {
      const Json* v = find(key);
      return v != nullptr && v->is_number() && v->get<double>() > 0;
    };
    // Shared experts: Qwen-MoE's shared_expert_intermediate_size (its sigmoid gate, one h-vector
    // per layer, is left out), DeepSeek's n_shared_experts experts of moe_intermediate_size.
    if (positive("shared_expert_intermediate_size")) {
      m.moe_shared_expert_intermediate_size = num({"shared_expert_intermediate_size"}, 0, "moe_shared_expert_intermediate_size");
    } else if (positive("n_shared_experts")) {
      const std::int64_t n = num({"n_shared_experts"}, 0, "num_experts");
      if (n > model_limit("moe_shared_expert_intermediate_size") / std::max<std::int64_t>(1, m.moe_ffn_hidden_size)) {
        throw InputError(file, "/n_shared_experts", "n_shared_experts x moe_intermediate_size exceeds " +
                                                        std::to_string(model_limit("moe_shared_expert_intermediate_size")));
      }
      m.moe_shared_expert_intermediate_size = n * m.moe_ffn_hidden_size;
    }
    // Dense layers among the MoE ones: DeepSeek's and GLM's first_k_dense_replace and
    // moe_layer_freq (MoE from layer k on, every freq-th), Qwen-MoE's decoder_sparse_step (layer
    // i is MoE when (i + 1) % step == 0) and mlp_only_layers (dense whatever the step).
    std::int64_t first_dense = 0;  // 0 is allowed here: no dense first layers
    if (const Json* v = find("first_k_dense_replace"); v != nullptr) {
      if (!v->is_number_integer() || v->get<std::int64_t>() < 0 || v->get<std::int64_t>() > m.num_layers) {
        throw InputError(file, "/first_k_dense_replace", "expected an integer in [0, " + std::to_string(m.num_layers) + "], got " + describe(*v));
      }
      first_dense = v->get<std::int64_t>();
    }
    const std::int64_t every = std::max<std::int64_t>(1, num({"moe_layer_freq"}, 1, "num_layers"));
    const std::int64_t step = std::max<std::int64_t>(1, num({"decoder_sparse_step"}, 1, "num_layers"));
    std::vector<std::uint8_t> pattern(static_cast<std::size_t>(std::max<std::int64_t>(0, m.num_layers)), 1);
    for (std::int64_t i = 0; i < m.num_layers; ++i) {
      const bool moe = i >= first_dense && i % every == 0 && (i + 1) % step == 0;
      pattern[static_cast<std::size_t>(i)] = moe ? 1 : 0;
    }
    if (const Json* dense = find("mlp_only_layers"); dense != nullptr) {
      if (!dense->is_array()) throw InputError(file, "/mlp_only_layers", "expected an array of layer indices, got " + describe(*dense));
      for (std::size_t i = 0; i < dense->size(); ++i) {
        const Json& v = (*dense)[i];
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= m.num_layers) {
          throw InputError(file, join_path("/mlp_only_layers", i),
                           "expected a layer index in [0, " + std::to_string(m.num_layers) + "), got " + describe(v));
        }
        pattern[static_cast<std::size_t>(v.get<std::int64_t>())] = 0;
      }
    }
    if (std::find(pattern.begin(), pattern.end(), 0) != pattern.end()) m.moe_layer_pattern = pattern;
  }
  // Multi-token prediction modules (DeepSeek-V3, GLM-4.5: num_nextn_predict_layers), trained with
  // the model as Megatron's bridges set mtp_num_layers from it.
  if (const Json* v = find("num_nextn_predict_layers"); v != nullptr && !(v->is_number_integer() && v->get<std::int64_t>() == 0)) {
    m.mtp_num_layers = num({"num_nextn_predict_layers"}, 0, "mtp_num_layers");
  }
  // Sliding-window attention (sliding_window, unless use_sliding_window is false) as Megatron-Core's
  // window_size, on the layers the config names: layer_types (GPT-OSS, newer configs), Gemma 2's
  // alternation (modeling_gemma2.py: even layers slide), sliding_window_pattern (Gemma 3: every
  // N-th layer full), max_window_layers (Qwen2: layers from it on slide); else every layer.
  if (find("sliding_window") == nullptr || !flag("use_sliding_window", true)) return;
  m.window_size = num({"sliding_window"}, 0, "seq_length");
  std::vector<std::uint8_t> pattern(static_cast<std::size_t>(m.num_layers), 1);
  if (const Json* types = find("layer_types"); types != nullptr) {
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != m.num_layers) {
      throw InputError(file, "/layer_types", "expected one entry per layer (" + std::to_string(m.num_layers) + "), got " + describe(*types));
    }
    for (std::size_t i = 0; i < types->size(); ++i) {
      const Json& t = (*types)[i];
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention")) {
        throw InputError(file, join_path("/layer_types", i), "expected \"sliding_attention\" or \"full_attention\", got " + describe(t));
      }
      pattern[i] = t == "sliding_attention" ? 1 : 0;
    }
  } else if (type == "gemma2") {
    for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = i % 2 == 0 ? 1 : 0;
  } else if (find("sliding_window_pattern") != nullptr) {
    const std::int64_t every = num({"sliding_window_pattern"}, 1, "num_layers");
    for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = (static_cast<std::int64_t>(i) + 1) % every != 0 ? 1 : 0;
  } else if (find("max_window_layers") != nullptr) {
    const std::int64_t from = num({"max_window_layers"}, 1, "num_layers");
    for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::int64_t>(i) >= from ? 1 : 0;
  }
  if (std::find(pattern.begin(), pattern.end(), 0) != pattern.end()) m.window_layer_pattern = pattern;
  if (std::find(pattern.begin(), pattern.end(), 1) == pattern.end()) m.window_size = 0;
}

// A per-layer 0/1 pattern in Megatron's integer-or-list form (moe_layer_freq,
// window_attn_skip_freq) at `key`: for an integer N, layer i (from 0) gets `one_when(i, N)`; a list
// gives each layer's entry. `entries` says what 0 and 1 mean, `every` what an integer does.
std::vector<std::uint8_t> read_layer_pattern(const ObjectReader& r, const char* key, const Json& value, std::int64_t layers,
                                             bool (*one_when)(std::int64_t, std::int64_t), const std::string& entries,
                                             const std::string& every) {
  std::vector<std::uint8_t> pattern(static_cast<std::size_t>(layers), 1);
  if (value.is_number_integer()) {
    const std::int64_t n = value.get<std::int64_t>();
    if (n < 1 || n > layers) r.fail(key, "expected an integer in [1, num_layers] or a list of 0/1, got " + describe(value));
    for (std::int64_t i = 0; i < layers; ++i) pattern[static_cast<std::size_t>(i)] = one_when(i, n) ? 1 : 0;
  } else if (value.is_array()) {
    if (static_cast<std::int64_t>(value.size()) != layers) {
      r.fail(key, "expected one 0/1 entry per layer (" + std::to_string(layers) + "), got " + std::to_string(value.size()));
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
      const Json& v = value[i];
      if (!v.is_number_integer() || (v.get<std::int64_t>() != 0 && v.get<std::int64_t>() != 1)) {
        throw InputError(r.file_of(key), join_path(r.path_of(key), i), "expected " + entries + ", got " + describe(v));
      }
      pattern[i] = static_cast<std::uint8_t>(v.get<std::int64_t>());
    }
  } else {
    r.fail(key, "expected an integer N (" + every + ") or a list of 0/1 per layer, got " + describe(value));
  }
  return pattern;
}

ModelSpec read_model(const Json& section, const std::string& file, const std::string& path, Origins& origins) {
  Json preset;
  ObjectReader r(section, file, path);
  r.allow({"description", "sources"});
  ModelSpec m;
  if (section.is_object() && section.contains("preset")) {
    const std::string name = r.require_string("preset");
    const std::string pf = preset_file("models", name, file, join_path(path, "preset"));
    preset = read_json_file(pf);
    if (preset.is_object() && preset.contains("preset")) throw InputError(pf, "/preset", "a preset cannot name another preset");
    r.set_base(preset, pf, "");
  }
  const bool hf = r.has("hf_config");
  if (hf) {
    const std::string hf_file = resolve_file(r.require_string("hf_config"), "models", r.file_of("hf_config"), r.path_of("hf_config"));
    read_hf_config(hf_file, m);
    if (!r.has("seq_length")) {
      r.fail("hf_config", "seq_length is required next to hf_config (a checkpoint's max_position_embeddings is not the training sequence length)");
    }
  }
  m.name = r.get_string("name", m.name.empty() ? "custom model" : m.name);
  auto integer = [&](const char* key, std::int64_t& field, std::int64_t min, bool required) {
    if (!required || hf) {
      field = r.get_int(key, field, min, model_limit(key));
    } else {
      field = r.require_int(key, min, model_limit(key));
    }
    origins.note(std::string("model.") + key, r, key);
  };
  integer("num_layers", m.num_layers, 1, true);
  integer("hidden_size", m.hidden_size, 1, true);
  integer("num_attention_heads", m.num_attention_heads, 1, true);
  if (m.num_query_groups == 0) m.num_query_groups = m.num_attention_heads;
  integer("num_query_groups", m.num_query_groups, 1, false);
  integer("kv_channels", m.kv_channels, 0, false);
  if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
  integer("ffn_hidden_size", m.ffn_hidden_size, 1, false);
  integer("vocab_size", m.vocab_size, 1, true);
  integer("make_vocab_size_divisible_by", m.make_vocab_size_divisible_by, 1, false);
  integer("seq_length", m.seq_length, 1, true);
  m.activation = static_cast<Activation>(r.get_choice("activation", static_cast<std::size_t>(m.activation), {"gelu", "swiglu", "squared_relu"}));
  m.normalization = static_cast<Normalization>(r.get_choice("normalization", static_cast<std::size_t>(m.normalization), {"layernorm", "rmsnorm"}));
  m.position_embedding_type = static_cast<PositionEmbedding>(
      r.get_choice("position_embedding_type", static_cast<std::size_t>(m.position_embedding_type), {"learned_absolute", "rope"}));
  origins.note("model.position_embedding_type", r, "position_embedding_type");
  m.untie_embeddings_and_output_weights = r.get_bool("untie_embeddings_and_output_weights", m.untie_embeddings_and_output_weights);
  m.add_bias_linear = r.get_bool("add_bias_linear", m.add_bias_linear);
  m.hidden_dropout = r.get_double("hidden_dropout", m.hidden_dropout, 0, 0.99);
  m.attention_dropout = r.get_double("attention_dropout", m.attention_dropout, 0, 0.99);
  integer("num_experts", m.num_experts, 0, false);
  integer("moe_router_topk", m.moe_router_topk, 1, false);
  integer("moe_router_num_groups", m.moe_router_num_groups, 0, false);
  integer("moe_router_group_topk", m.moe_router_group_topk, 0, false);
  integer("moe_ffn_hidden_size", m.moe_ffn_hidden_size, 0, false);
  integer("moe_shared_expert_intermediate_size", m.moe_shared_expert_intermediate_size, 0, false);
  integer("mtp_num_layers", m.mtp_num_layers, 0, false);
  m.multi_latent_attention = r.get_bool("multi_latent_attention", m.multi_latent_attention);
  origins.note("model.multi_latent_attention", r, "multi_latent_attention");
  integer("q_lora_rank", m.q_lora_rank, 0, false);
  integer("kv_lora_rank", m.kv_lora_rank, 0, false);
  integer("qk_head_dim", m.qk_head_dim, 1, false);
  integer("qk_pos_emb_head_dim", m.qk_pos_emb_head_dim, 0, false);
  integer("v_head_dim", m.v_head_dim, 1, false);
  m.qk_layernorm = r.get_bool("qk_layernorm", m.qk_layernorm);
  origins.note("model.qk_layernorm", r, "qk_layernorm");
  if (m.multi_latent_attention && m.qk_layernorm) {
    origins.fail("model.qk_layernorm", "multi-head latent attention normalises its latents (q_lora_rank, kv_lora_rank), not its heads: "
                                       "qk_layernorm does not apply");
  }
  if (m.multi_latent_attention) {
    if (m.kv_lora_rank == 0) origins.fail("model.kv_lora_rank", "multi-head latent attention needs kv_lora_rank > 0");
    // Every head has its own key and value (Megatron asserts MLA without group-query attention).
    if (r.has("num_query_groups") && m.num_query_groups != m.num_attention_heads) {
      origins.fail("model.num_query_groups", "multi-head latent attention has a key and value per head: expected " +
                                                 std::to_string(m.num_attention_heads) + " (num_attention_heads)");
    }
    m.num_query_groups = m.num_attention_heads;
  } else {
    for (const char* key : {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"}) {
      if (r.has(key)) origins.fail(std::string("model.") + key, "applies to multi-head latent attention only (set multi_latent_attention)");
    }
  }
  // Megatron's moe_layer_freq: an integer N (layer i is an MoE layer when i % N == 0) or a list
  // of 0/1, one per layer.
  if (const Json* freq = r.raw("moe_layer_freq"); freq != nullptr && !freq->is_null()) {
    if (m.num_experts == 0) r.fail("moe_layer_freq", "dense layers among MoE ones need a mixture-of-experts model (num_experts > 0)");
    const std::vector<std::uint8_t> pattern = read_layer_pattern(
        r, "moe_layer_freq", *freq, m.num_layers, [](std::int64_t i, std::int64_t n) { return i % n == 0; }, "0 (dense) or 1 (MoE)",
        "every N-th layer MoE");
    if (std::find(pattern.begin(), pattern.end(), 1) == pattern.end()) r.fail("moe_layer_freq", "expected at least one MoE layer");
    m.moe_layer_pattern = std::find(pattern.begin(), pattern.end(), 0) != pattern.end() ? pattern : std::vector<std::uint8_t>{};
  } else if (!m.moe_layer_pattern.empty() && static_cast<std::int64_t>(m.moe_layer_pattern.size()) != m.num_layers) {
    // A Hugging Face config's pattern, then num_layers changed next to it.
    r.fail("num_layers", "the Hugging Face config's dense/MoE layer pattern has " + std::to_string(m.moe_layer_pattern.size()) +
                             " layers; give moe_layer_freq for " + std::to_string(m.num_layers));
  }
  // Megatron-Core's window_size [left, right] (-1: unbounded) and window_attn_skip_freq (an integer
  // N: layer l, from 1, keeps full attention when l % N == 0; or a list of 0/1 per layer, 1 for the
  // window): sliding-window attention for a causal decoder, so right is 0.
  if (const Json* ws = r.raw("window_size"); ws != nullptr && !ws->is_null()) {
    if (!ws->is_array() || ws->size() != 2 || !(*ws)[0].is_number_integer() || !(*ws)[1].is_number_integer()) {
      r.fail("window_size", "expected [left, right] (two integers, e.g. [4096, 0]), got " + describe(*ws));
    }
    const std::int64_t left = (*ws)[0].get<std::int64_t>(), right = (*ws)[1].get<std::int64_t>();
    if (right != 0) {
      throw InputError(r.file_of("window_size"), join_path(r.path_of("window_size"), 1),
                       "expected 0 (a causal decoder sees no keys after a query), got " + describe((*ws)[1]));
    }
    if (left != -1 && (left < 1 || left > model_limit("seq_length"))) {
      throw InputError(r.file_of("window_size"), join_path(r.path_of("window_size"), 0),
                       "expected -1 (no window) or a window in [1, " + std::to_string(model_limit("seq_length")) + "], got " + describe((*ws)[0]));
    }
    m.window_size = left == -1 ? 0 : left;
    m.window_layer_pattern.clear();
  }
  origins.note("model.window_size", r, "window_size");
  if (const Json* freq = r.raw("window_attn_skip_freq"); freq != nullptr && !freq->is_null()) {
    if (m.window_size == 0) r.fail("window_attn_skip_freq", "picks the layers of a sliding window: it needs window_size");
    const std::vector<std::uint8_t> pattern = read_layer_pattern(
        r, "window_attn_skip_freq", *freq, m.num_layers, [](std::int64_t i, std::int64_t n) { return (i + 1) % n != 0; },
        "1 (sliding window) or 0 (full attention)", "every N-th layer full attention");
    m.window_layer_pattern = pattern;
  } else if (!m.window_layer_pattern.empty() && static_cast<std::int64_t>(m.window_layer_pattern.size()) != m.num_layers) {
    // A Hugging Face config's pattern, then num_layers changed next to it.
    r.fail("num_layers", "the Hugging Face config's sliding/full attention pattern has " + std::to_string(m.window_layer_pattern.size()) +
                             " layers; give window_attn_skip_freq for " + std::to_string(m.num_layers));
  }
  origins.note("model.window_attn_skip_freq", r, "window_attn_skip_freq");
  if (m.moe_shared_expert_intermediate_size > 0 && m.num_experts == 0) {
    origins.fail("model.moe_shared_expert_intermediate_size", "a shared expert needs a mixture-of-experts model (num_experts > 0)");
  }
  if (m.kv_channels == 0 && m.hidden_size % m.num_attention_heads != 0) {
    origins.fail("model.num_attention_heads", "expected a divisor of hidden_size (" + std::to_string(m.hidden_size) +
                                                  ") or an explicit kv_channels, got " + std::to_string(m.num_attention_heads));
  }
  if (m.num_attention_heads % m.num_query_groups != 0) {
    origins.fail("model.num_query_groups", "expected a divisor of num_attention_heads (" +
                                               std::to_string(m.num_attention_heads) + "), got " + std::to_string(m.num_query_groups));
  }
  if (m.num_experts > 0 && m.moe_router_topk > m.num_experts) {
    origins.fail("model.moe_router_topk", "expected at most num_experts (" + std::to_string(m.num_experts) + ")");
  }
  // Megatron's group-limited routing: both or neither, groups dividing the experts, a token's
  // top-k drawn from its chosen groups' experts.
  if ((m.moe_router_num_groups > 0) != (m.moe_router_group_topk > 0)) {
    origins.fail(m.moe_router_num_groups > 0 ? "model.moe_router_num_groups" : "model.moe_router_group_topk",
                 "moe_router_num_groups and moe_router_group_topk go together (group-limited routing)");
  }
  if (m.moe_router_num_groups > 0) {
    if (m.num_experts == 0 || m.num_experts % m.moe_router_num_groups != 0) {
      origins.fail("model.moe_router_num_groups", "expected a divisor of num_experts (" + std::to_string(m.num_experts) + ")");
    }
    if (m.moe_router_group_topk > m.moe_router_num_groups) {
      origins.fail("model.moe_router_group_topk", "expected at most moe_router_num_groups (" + std::to_string(m.moe_router_num_groups) + ")");
    }
    if (m.moe_router_topk > m.moe_router_group_topk * (m.num_experts / m.moe_router_num_groups)) {
      origins.fail("model.moe_router_topk", "expected at most the experts of moe_router_group_topk groups (" +
                                                std::to_string(m.moe_router_group_topk * (m.num_experts / m.moe_router_num_groups)) + ")");
    }
  }
  r.finish();
  return m;
}

ParallelSpec read_parallel(ObjectReader r, Origins& origins) {
  r.allow({"description"});
  ParallelSpec p;
  auto integer = [&](const char* key, std::int64_t& field) {
    field = r.get_int(key, field, 1, kMaxParallelSize);
    origins.note(std::string("parallelism.") + key, r, key);
  };
  integer("tensor_model_parallel_size", p.tensor_model_parallel_size);
  integer("pipeline_model_parallel_size", p.pipeline_model_parallel_size);
  integer("virtual_pipeline_model_parallel_size", p.virtual_pipeline_model_parallel_size);
  integer("context_parallel_size", p.context_parallel_size);
  integer("expert_model_parallel_size", p.expert_model_parallel_size);
  p.expert_tensor_parallel_size = r.get_int("expert_tensor_parallel_size", 0, 1, kMaxParallelSize);
  origins.note("parallelism.expert_tensor_parallel_size", r, "expert_tensor_parallel_size");
  // Megatron-Core's cp_comm_type, and hierarchical_context_parallel_sizes for its "a2a+p2p".
  p.cp_comm_type = static_cast<models::CpCommType>(r.get_choice("cp_comm_type", 0, {"p2p", "a2a", "allgather", "a2a+p2p"}));
  origins.note("parallelism.cp_comm_type", r, "cp_comm_type");
  if (const Json* sizes = r.raw("hierarchical_context_parallel_sizes"); sizes != nullptr && !sizes->is_null()) {
    const char* key = "hierarchical_context_parallel_sizes";
    if (p.cp_comm_type != models::CpCommType::kA2aP2p) {
      r.fail(key, "only applies with cp_comm_type \"a2a+p2p\" (got \"" + std::string(models::to_string(p.cp_comm_type)) + "\")");
    }
    if (!sizes->is_array() || sizes->size() != 2) {
      r.fail(key, "expected [all-to-all group size, ring size] (two integers whose product is context_parallel_size), got " +
                      describe(*sizes));
    }
    for (std::size_t i = 0; i < 2; ++i) {
      const Json& v = (*sizes)[i];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > kMaxParallelSize) {
        throw InputError(r.file_of(key), join_path(r.path_of(key), i),
                         "expected an integer in [1, " + std::to_string(kMaxParallelSize) + "], got " + describe(v));
      }
      p.hierarchical_context_parallel_sizes.push_back(v.get<std::int64_t>());
    }
    origins.note("parallelism.hierarchical_context_parallel_sizes", r, key);
  } else if (p.cp_comm_type == models::CpCommType::kA2aP2p) {
    r.fail("cp_comm_type", "\"a2a+p2p\" needs hierarchical_context_parallel_sizes [all-to-all group size, ring size] "
                           "(Megatron-Core's --hierarchical-context-parallel-sizes)");
  }
  p.microbatch_group_size_per_vp_stage = r.get_int("microbatch_group_size_per_vp_stage", 0, 1, 1 << 20);
  origins.note("parallelism.microbatch_group_size_per_vp_stage", r, "microbatch_group_size_per_vp_stage");
  p.sequence_parallel = r.get_bool("sequence_parallel", false);
  origins.note("parallelism.sequence_parallel", r, "sequence_parallel");
  p.use_distributed_optimizer = r.get_bool("use_distributed_optimizer", false);
  origins.note("parallelism.use_distributed_optimizer", r, "use_distributed_optimizer");
  p.zero_stage = static_cast<int>(r.get_int("zero_stage", 0, 0, 3));
  origins.note("parallelism.zero_stage", r, "zero_stage");
  p.num_distributed_optimizer_instances = r.get_int("num_distributed_optimizer_instances", 1, 1, 1 << 20);
  origins.note("parallelism.num_distributed_optimizer_instances", r, "num_distributed_optimizer_instances");
  p.decoder_first_pipeline_num_layers = r.get_optional_int("decoder_first_pipeline_num_layers", 0, kBig);
  origins.note("parallelism.decoder_first_pipeline_num_layers", r, "decoder_first_pipeline_num_layers");
  p.decoder_last_pipeline_num_layers = r.get_optional_int("decoder_last_pipeline_num_layers", 0, kBig);
  origins.note("parallelism.decoder_last_pipeline_num_layers", r, "decoder_last_pipeline_num_layers");
  p.account_for_embedding_in_pipeline_split = r.get_bool("account_for_embedding_in_pipeline_split", false);
  origins.note("parallelism.account_for_embedding_in_pipeline_split", r, "account_for_embedding_in_pipeline_split");
  p.account_for_loss_in_pipeline_split = r.get_bool("account_for_loss_in_pipeline_split", false);
  origins.note("parallelism.account_for_loss_in_pipeline_split", r, "account_for_loss_in_pipeline_split");
  if (const Json* layout_value = r.raw("pipeline_model_parallel_layout"); layout_value && !layout_value->is_null()) {
    const char* key = "pipeline_model_parallel_layout";
    p.pipeline_model_parallel_layout = r.require_string(key);
    origins.note("parallelism.pipeline_model_parallel_layout", r, key);
    PipelineLayout layout = parse_pipeline_layout(p.pipeline_model_parallel_layout);
    if (!layout.error.empty()) r.fail(key, layout.error);
    const auto stages = static_cast<std::int64_t>(layout.layers.size());
    const std::int64_t pp = p.pipeline_model_parallel_size;
    if (stages % pp != 0) {
      r.fail(key, "expected a multiple of pipeline_model_parallel_size (" + std::to_string(pp) + ") virtual stages, got " +
                      std::to_string(stages));
    }
    if (r.has("virtual_pipeline_model_parallel_size") && p.virtual_pipeline_model_parallel_size != stages / pp) {
      r.fail("virtual_pipeline_model_parallel_size",
             "expected " + std::to_string(stages / pp) + " (the layout's " + std::to_string(stages) +
                 " virtual stages over " + std::to_string(pp) + " pipeline stages), or leave it to the layout");
    }
    p.virtual_pipeline_model_parallel_size = stages / pp;
    p.layout_layers = std::move(layout.layers);
    p.layout_mtp_layers = layout.mtp_layers;
  }
  r.finish();
  return p;
}

ReliabilitySpec read_reliability(ObjectReader r) {
  r.allow({"description", "source"});
  ReliabilitySpec m;
  m.gpu_mtbf_hours = r.require_double("gpu_mtbf_hours", 1, 1e12);
  m.restart_minutes = r.require_double("restart_minutes", 0, 1e6);
  m.checkpoint_write_GBps = r.require_double("checkpoint_write_GBps", 1e-3, 1e9);
  m.async_checkpoint = r.get_bool("async_checkpoint", false);
  m.checkpoint_interval_iterations = r.get_optional_int("checkpoint_interval_iterations", 1, std::numeric_limits<std::int32_t>::max());
  if (const Json* spares = r.raw("spare_nodes"); spares != nullptr && spares->is_string()) {
    if (spares->get<std::string>() != "cheapest") {
      r.fail("spare_nodes", "expected a number of spare nodes in [0, " + std::to_string(1 << 20) + "] or \"cheapest\", got " +
                                describe(*spares));
    }
    m.cheapest_spares = true;
  } else {
    m.spare_nodes = r.get_optional_int("spare_nodes", 0, 1 << 20);
  }
  if (m.has_spares()) {
    m.node_repair_hours = r.require_double("node_repair_hours", 1e-3, 1e6);
    m.node_repair_share = r.get_double("node_repair_share", 1.0, 1e-6, 1.0);
    m.idle_failure_share = r.get_double("idle_failure_share", 0.0, 0.0, 1.0);
  } else {
    for (const char* key : {"node_repair_hours", "node_repair_share", "idle_failure_share"}) {
      if (r.has(key)) r.fail(key, "applies with spare_nodes only (without them a spare is always ready)");
    }
  }
  r.finish();
  return m;
}

TrainingSpec read_training(ObjectReader r, const ParallelSpec& p, Origins& origins) {
  r.allow({"description"});
  TrainingSpec t;
  auto note = [&](const char* key) { origins.note(std::string("training.") + key, r, key); };
  t.micro_batch_size = r.require_int("micro_batch_size", 1, kMaxMicroBatchSize);
  note("micro_batch_size");
  t.global_batch_size = r.require_int("global_batch_size", 1, kMaxGlobalBatchSize);
  note("global_batch_size");
  const auto precision = static_cast<models::Precision>(r.get_choice("precision", 0, {"bf16", "fp16", "fp8", "fp4"}));
  note("precision");
  if (r.has("fp8_recipe") && precision != models::Precision::kFp8) {
    r.fail("fp8_recipe", "applies with precision \"fp8\" only");
  }
  t.quant_recipe = static_cast<models::QuantRecipe>(r.get_choice("fp8_recipe", 0, {"delayed", "tensorwise", "mxfp8"}));
  note("fp8_recipe");
  t.set_precision(precision);  // fp4 brings its one recipe, NVFP4
  t.fp8_param_gather = r.get_bool("fp8_param_gather", false);
  if (t.fp8_param_gather && t.precision != models::Precision::kFp8) r.fail("fp8_param_gather", "applies with precision \"fp8\" only");
  note("fp8_param_gather");
  // Megatron-Core's --fp4-format e2m1 with --fp4-recipe nvfp4 (its one recipe trainsim prices) and
  // --fp4-param-gather (Megatron-Bridge's fp4_param_gather).
  if (r.has("fp4_recipe") && t.precision != models::Precision::kFp4) r.fail("fp4_recipe", "applies with precision \"fp4\" only");
  r.get_choice("fp4_recipe", 0, {"nvfp4"});
  note("fp4_recipe");
  if (r.get_bool("fp4_param_gather", false)) {
    if (t.precision != models::Precision::kFp4) r.fail("fp4_param_gather", "applies with precision \"fp4\" only");
    t.fp8_param_gather = true;
  }
  note("fp4_param_gather");
  // Megatron-Core's first_last_layers_bf16 (default 1 layer at each end, its defaults).
  if (r.get_bool("first_last_layers_bf16", false)) {
    t.bf16_layers_at_start = r.get_int("num_layers_at_start_in_bf16", 1, 0, 1 << 20);
    t.bf16_layers_at_end = r.get_int("num_layers_at_end_in_bf16", 1, 0, 1 << 20);
  } else {
    for (const char* key : {"num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"}) {
      if (r.has(key)) r.fail(key, "applies with first_last_layers_bf16 true only");
    }
  }
  note("first_last_layers_bf16");
  note("num_layers_at_start_in_bf16");
  note("num_layers_at_end_in_bf16");
  // Megatron-Core's cpu_offloading family (ModelParallelConfig), through Transformer Engine 2.x's
  // get_cpu_offload_context: activations are offloaded; offload_weights is deprecated there and
  // has no effect; neither activations nor weights is an error.
  if (r.get_bool("cpu_offloading", false)) {
    const bool activations = r.get_bool("cpu_offloading_activations", true);
    const bool weights = r.get_bool("cpu_offloading_weights", false);
    if (!activations && !weights) {
      r.fail("cpu_offloading_activations", "expected true, or cpu_offloading_weights true (Transformer Engine refuses to offload nothing)");
    }
    const std::int64_t layers = r.get_int("cpu_offloading_num_layers", 0, 0, 1 << 20);
    t.cpu_offload_layers = activations ? layers : 0;
    // NVTE_CPU_OFFLOAD_V1=1, or a Transformer Engine before 2.10.
    t.cpu_offload_v1 = r.get_bool("cpu_offloading_v1", false);
    // Double buffering is the first scheduler's (Transformer Engine 2.10+'s default ignores it).
    if (r.get_bool("cpu_offloading_double_buffering", false) && t.cpu_offload_v1) {
      r.fail("cpu_offloading_double_buffering", "expected false: the first scheduler's double-buffered copies back are not modelled");
    }
  } else {
    for (const char* key : {"cpu_offloading_num_layers", "cpu_offloading_activations", "cpu_offloading_weights", "cpu_offloading_v1",
                            "cpu_offloading_double_buffering"}) {
      if (r.has(key)) r.fail(key, "applies with cpu_offloading true only");
    }
  }
  note("cpu_offloading");
  note("cpu_offloading_num_layers");
  note("cpu_offloading_v1");
  t.recompute_granularity =
      static_cast<models::RecomputeGranularity>(r.get_choice("recompute_granularity", 0, {"none", "selective", "full"}));
  note("recompute_granularity");
  if (const Json* modules = r.raw("recompute_modules"); modules != nullptr && !modules->is_null()) {
    // Megatron-Core's recompute_modules: the ones trainsim has tasks for.
    if (!modules->is_array() || modules->empty()) r.fail("recompute_modules", "expected a non-empty list, e.g. [\"core_attn\"]");
    if (t.recompute_granularity != models::RecomputeGranularity::kSelective) {
      r.fail("recompute_modules", "applies with recompute_granularity \"selective\" (Megatron-Core's recompute_modules)");
    }
    t.recompute_core_attn = false;
    for (std::size_t i = 0; i < modules->size(); ++i) {
      const Json& m = (*modules)[i];
      const std::string name = m.is_string() ? m.get<std::string>() : "";
      const auto known = std::find_if(std::begin(models::kRecomputeModules), std::end(models::kRecomputeModules),
                                      [&](const models::RecomputeModule& k) { return name == k.name; });
      if (known == std::end(models::kRecomputeModules)) {
        std::string names;  // "a", "b" or "c"
        const std::size_t count = std::size(models::kRecomputeModules);
        for (std::size_t k = 0; k < count; ++k) {
          names += std::string(k == 0 ? "" : k + 1 == count ? " or " : ", ") + "\"" + models::kRecomputeModules[k].name + "\"";
        }
        throw InputError(r.file_of("recompute_modules"), join_path(r.path_of("recompute_modules"), i),
                         "expected " + names + " (the recompute modules trainsim models), got " + describe(m));
      }
      t.*(known->flag) = true;
    }
  }
  note("recompute_modules");
  t.recompute_method = static_cast<models::RecomputeMethod>(r.get_choice("recompute_method", 0, {"uniform", "block"}));
  t.recompute_num_layers = r.get_int("recompute_num_layers", 1, 1, model_limit("num_layers"));
  note("recompute_num_layers");
  t.attention_kernel = static_cast<models::AttentionKernel>(r.get_choice("attention_kernel", 0, {"flash", "unfused"}));
  note("attention_kernel");
  t.attention_implementation = r.get_string("attention_implementation", "");
  note("attention_implementation");
  const std::size_t default_schedule = p.virtual_pipeline_model_parallel_size > 1 ? 2 : 1;
  t.pipeline_schedule =
      static_cast<models::PipelineSchedule>(r.get_choice("pipeline_schedule", default_schedule, {"gpipe", "1f1b", "interleaved"}));
  note("pipeline_schedule");
  t.overlap_grad_reduce = r.get_bool("overlap_grad_reduce", true);
  t.align_grad_reduce = r.get_bool("align_grad_reduce", true);
  t.overlap_param_gather = r.get_bool("overlap_param_gather", false);
  note("overlap_param_gather");
  t.align_param_gather = r.get_bool("align_param_gather", true);
  t.overlap_param_gather_with_optimizer_step = r.get_bool("overlap_param_gather_with_optimizer_step", false);
  note("overlap_param_gather_with_optimizer_step");
  t.tp_comm_overlap = r.get_bool("tp_comm_overlap", false);
  note("tp_comm_overlap");
  t.transformer_engine = r.get_choice("transformer_impl", 0, {"transformer_engine", "local"}) == 0;
  note("transformer_impl");
  t.gradient_accumulation_fusion = r.get_bool("gradient_accumulation_fusion", true);
  note("gradient_accumulation_fusion");
  t.cross_entropy_loss_fusion = r.get_bool("cross_entropy_loss_fusion", false);
  note("cross_entropy_loss_fusion");
  if (r.has("cross_entropy_fusion_impl") && !t.cross_entropy_loss_fusion) {
    r.fail("cross_entropy_fusion_impl", "applies with cross_entropy_loss_fusion true only");
  }
  t.cross_entropy_fusion_te = r.get_choice("cross_entropy_fusion_impl", 0, {"native", "te"}) == 1;
  note("cross_entropy_fusion_impl");
  t.moe_token_dispatcher_type =
      static_cast<models::TokenDispatcher>(r.get_choice("moe_token_dispatcher_type", 0, {"alltoall", "flex"}));
  note("moe_token_dispatcher_type");
  t.async_tensor_model_parallel_allreduce = r.get_bool("async_tensor_model_parallel_allreduce", true);
  note("async_tensor_model_parallel_allreduce");
  t.overlap_p2p_comm = r.get_bool("overlap_p2p_comm", false);
  note("overlap_p2p_comm");
  t.overlap_moe_expert_parallel_comm = r.get_bool("overlap_moe_expert_parallel_comm", false);
  note("overlap_moe_expert_parallel_comm");
  t.delay_wgrad_compute = r.get_bool("delay_wgrad_compute", false);
  note("delay_wgrad_compute");
  t.moe_shared_expert_overlap = r.get_bool("moe_shared_expert_overlap", false);
  note("moe_shared_expert_overlap");
  t.moe_use_grouped_tensor = r.get_bool("moe_use_grouped_tensor", false);
  note("moe_use_grouped_tensor");
  t.moe_grouped_gemm = r.get_bool("moe_grouped_gemm", true);
  note("moe_grouped_gemm");
  t.scatter_gather_tensors_in_pipeline = r.get_bool("scatter_gather_tensors_in_pipeline", false);
  note("scatter_gather_tensors_in_pipeline");
  t.grad_reduce_in_fp32 = r.get_bool("grad_reduce_in_fp32", true);
  t.use_precision_aware_optimizer = r.get_bool("use_precision_aware_optimizer", false);
  note("use_precision_aware_optimizer");
  t.exp_avg_16bit = r.get_choice("exp_avg_dtype", 0, {"fp32", "bf16", "fp16"}) != 0;
  note("exp_avg_dtype");
  t.exp_avg_sq_16bit = r.get_choice("exp_avg_sq_dtype", 0, {"fp32", "bf16", "fp16"}) != 0;
  note("exp_avg_sq_dtype");
  t.store_param_remainders = r.get_bool("store_param_remainders", true);
  note("store_param_remainders");
  t.apex_distributed_adam = r.get_choice("optimizer_implementation", 0, {"megatron_core", "apex_distributed_fused_adam"}) == 1;
  note("optimizer_implementation");
  t.optimizer_state_16bit = r.get_choice("optimizer_dtype", 0, {"fp32", "bf16"}) == 1;
  note("optimizer_dtype");
  t.ddp_bucket_size = r.get_int("ddp_bucket_size", 0, 0, kBig);
  t.train_tokens = r.get_optional_double("train_tokens", 1, kMaxTrainTokens);
  if (r.has("reliability")) t.reliability = read_reliability(r.object("reliability"));
  r.finish();
  return t;
}

SimulationSpec read_simulation(ObjectReader r) {
  r.allow({"description"});
  SimulationSpec s;
  s.full = r.get_choice("fidelity", 0, {"symmetric", "full"}) == 1;
  s.seed = r.get_int("seed", 0, 0, std::numeric_limits<std::int64_t>::max());
  s.max_events = r.get_double("max_events", kDefaultMaxEvents, 1, 1e15);
  s.sm_contention = r.get_bool("sm_contention", false);
  if (const Json* list = r.raw("stragglers")) {
    if (!list->is_array()) r.fail("stragglers", "expected an array of {\"rank\" or \"node\", \"slowdown\"} objects");
    for (std::size_t i = 0; i < list->size(); ++i) {
      ObjectReader e((*list)[i], r.file_of("stragglers"), join_path(r.path_of("stragglers"), i));
      Straggler st;
      st.rank = e.get_optional_int("rank", 0, kBig);
      st.node = e.get_optional_int("node", 0, kBig);
      if (st.rank.has_value() == st.node.has_value()) e.fail("rank", "expected exactly one of \"rank\" and \"node\"");
      st.slowdown = e.require_double("slowdown", 0.01, 1000);
      e.finish();
      s.stragglers.push_back(st);
    }
  }
  if (const Json* list = r.raw("degraded_links")) {
    if (!list->is_array()) r.fail("degraded_links", "expected an array of {\"node\", \"nic\", \"bandwidth_fraction\"} objects");
    for (std::size_t i = 0; i < list->size(); ++i) {
      ObjectReader e((*list)[i], r.file_of("degraded_links"), join_path(r.path_of("degraded_links"), i));
      DegradedLink d;
      d.node = e.require_int("node", 0, kBig);
      d.nic = e.get_optional_int("nic", 0, 1024);
      d.nvlink = e.get_bool("nvlink", false);
      if (d.nvlink && d.nic) e.fail("nic", "give \"nic\" or \"nvlink\": true, not both");
      d.bandwidth_fraction = e.require_double("bandwidth_fraction", 1e-6, 1.0);
      e.finish();
      s.degraded_links.push_back(d);
    }
  }
  r.finish();
  return s;
}

std::string plural(std::int64_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

std::string approx(double v) {
  char buf[32];
  if (v >= 1e12) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else if (v >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.3g billion", v * 1e-9);
  } else if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3g million", v * 1e-6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

std::string bytes_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g PiB", bytes / 1125899906842624.0);
  return buf;
}

// Magnitudes the lowering, the memory model and the engine turn into 64-bit integer bytes and
// picoseconds, bounded here with doubles so that no accepted input overflows them. The bounds are
// upper estimates of every per-layer tensor and of the memory a GPU could hold at once; they sit
// far beyond any GPU (a single layer's tensors under 4 PiB, all live activations under 1 EiB).
// Returns the per-layer bound for check_live_activations.
double check_magnitudes(const Scenario& s, const Origins& o) {
  const ModelSpec& m = s.model;
  const ParallelSpec& p = s.parallel;
  const TrainingSpec& t = s.training;
  const auto dbl = [](std::int64_t v) { return static_cast<double>(v); };
  const double tp = dbl(p.tensor_model_parallel_size), cp = dbl(p.context_parallel_size);
  const double h = dbl(m.hidden_size), heads = dbl(m.num_attention_heads), groups = dbl(m.num_query_groups);
  // Under latent attention the heads are qk + rope wide for the scores and v wide for the values
  // (and num_query_groups = heads), fed from latents of q_lora_rank and kv_lora_rank.
  const bool mla = m.multi_latent_attention;
  const double d = mla ? std::max(dbl(m.qk_head_dim + m.qk_pos_emb_head_dim), dbl(m.v_head_dim))
                       : (m.kv_channels > 0 ? dbl(m.kv_channels) : h / heads);
  if (heads * d > 4194304.0) {
    o.fail_limit(
        mla ? "model.qk_head_dim"
            : (m.kv_channels > 0 ? "model.kv_channels" : "model.num_attention_heads"),
        "num_attention_heads x head dimension (" + approx(heads * d) + ") exceeds 4,194,304");
  }
  const double latents = mla ? dbl(m.q_lora_rank + m.kv_lora_rank) : 0.0;
  const double experts = dbl(m.num_experts), topk = m.is_moe() ? dbl(m.moe_router_topk) : 1.0;
  const double ffn = dbl(m.is_moe() ? m.expert_ffn_hidden() : m.ffn_hidden_size);
  const double fc1 = m.gated() ? 2 * ffn : ffn;
  const double shared = dbl(m.shared_expert_ffn_hidden()), shared_fc1 = m.gated() ? 2 * shared : shared;
  const double multiple = dbl(m.make_vocab_size_divisible_by) * tp;
  const double vocab = std::ceil(dbl(m.vocab_size) / multiple) * multiple;
  const double b = dbl(t.micro_batch_size), seq = dbl(m.seq_length) / cp, tokens = b * seq;
  // Per token and layer, every activation, gradient and routed copy the lowering forms (16 bytes
  // per element bounds every data type and fp32 statistics); plus the score matrix when the
  // attention is unfused.
  const double per_token = h * (8 + 4 * topk) + 4 * (heads + 2 * groups) * d / tp + 4 * fc1 * topk / tp + 4 * shared_fc1 / tp + 2 * vocab / tp + 4 * experts +
                           8 * latents;
  const double scores = t.attention_kernel == models::AttentionKernel::kFlash ? b * heads / tp * seq : b * heads / tp * seq * seq;
  const double per_layer = 16 * (tokens * per_token + scores);
  if (per_layer > 4.5e15) {  // 4 PiB
    o.fail_limit(t.micro_batch_size > 1 ? "training.micro_batch_size" : "model.seq_length",
                 "one layer's tensors for one micro-batch (" + approx(tokens) +
                     " tokens per GPU) would take about " + bytes_text(per_layer) +
                     ", beyond what trainsim models (4 PiB)");
  }
  const double experts_or_one = m.is_moe() ? experts : 1.0;
  const double layer_params = h * (heads + 2 * groups) * d + heads * d * h + (h * fc1 + ffn * h) * experts_or_one + h * experts + (h * shared_fc1 + shared * h) + 8 * h +
                              (h + 2 * heads * d) * latents;
  const double params = dbl(m.num_layers + m.mtp_num_layers) * (layer_params + 2 * h * h) + 2 * vocab * h + dbl(m.seq_length) * h;
  if (params > 1.1e15) {
    o.fail_limit("model.hidden_size", "the model would have about " + approx(params) +
                                          " parameters; trainsim models up to 1.1e15");
  }
  return per_layer;
}

// The activations a stage can hold at once (every micro-batch under GPipe; at most two rounds of
// the pipeline under 1F1B and interleaving) under 1 EiB, so the engine's 64-bit memory counter
// cannot overflow. A plan below that but beyond the GPU's memory is a result (fits: false).
void check_live_activations(const Scenario& s, const Origins& o, double per_layer) {
  const auto dbl = [](std::int64_t v) { return static_cast<double>(v); };
  const ParallelSpec& p = s.parallel;
  const double pp = dbl(p.pipeline_model_parallel_size), vp = dbl(p.virtual_pipeline_model_parallel_size);
  const double microbatches = dbl(s.microbatches());
  const double in_flight = s.training.pipeline_schedule == models::PipelineSchedule::kGpipe ? microbatches : std::min(microbatches, 2 * pp * vp);
  // The last stage also holds the multi-token-prediction modules (each with its own logits,
  // which per_layer's vocabulary term covers).
  const double live = per_layer * in_flight * (std::ceil(dbl(s.model.num_layers) / pp) + dbl(s.model.mtp_num_layers));
  if (live > 1.15e18) {  // 1 EiB
    o.fail_limit("training.global_batch_size", "the activations of " + approx(in_flight) +
                                                   " micro-batches in flight would take about " +
                                                   bytes_text(live) +
                                                   " per GPU, beyond what trainsim models (1 EiB)");
  }
}

// Rejects plans that would take too long to simulate (config/simulation_cost.h) or whose
// iteration outlasts the simulated clock, before anything big is built.
void check_simulation_size(const Scenario& s, const Origins& o) {
  const SimulationCost cost = estimate_simulation_cost(s.model, s.parallel, s.training, s.num_gpus(), s.simulation.full);
  // Whatever max_events says: task indices are 32-bit (sim/task_graph.h), and a graph this large
  // would need tens of gigabytes.
  if (cost.graph_tasks > 1e9) {
    o.fail_limit("training.global_batch_size",
                 approx(cost.microbatches) + " micro-batches per iteration x " +
                     std::to_string(s.model.num_layers) + " layers make about " +
                     approx(cost.graph_tasks) +
                     " tasks; trainsim's task graphs hold at most 1 billion");
  }
  if (cost.work() > s.simulation.max_events) {
    const std::string limit = "simulation.max_events (" + approx(s.simulation.max_events) + ")";
    const std::string hint = "; raise " + limit.substr(0, limit.find(' ')) + " to simulate it anyway";
    const SimulationCost symmetric =
        estimate_simulation_cost(s.model, s.parallel, s.training, s.num_gpus(), /*full_fidelity=*/false);
    if (s.simulation.full && symmetric.work() <= s.simulation.max_events) {
      o.fail_limit("simulation.fidelity",
                   "full fidelity would simulate every one of " + approx(cost.gpus) +
                       " ranks: about " + approx(cost.work()) +
                       " units of work (executed tasks), more than " + limit +
                       "; use \"symmetric\" (the same result on symmetric plans)" + hint);
    }
    if (kGpuWeight * cost.gpus > s.simulation.max_events / 2) {
      o.fail_limit("cluster.size", approx(cost.gpus) + " GPUs take about " + approx(cost.work()) +
                                       " units of work (executed tasks) to simulate, more than " +
                                       limit + "; use fewer GPUs" + hint);
    }
    o.fail_limit("training.global_batch_size",
                 approx(cost.microbatches) + " micro-batches per iteration x " +
                     std::to_string(s.model.num_layers) + " layers take about " +
                     approx(cost.work()) +
                     " units of work (executed tasks) to simulate, more than " + limit +
                     "; use fewer micro-batches (beyond a few times pipeline_model_parallel_size "
                     "the time per micro-batch no longer changes)" +
                     hint);
  }
  // The engine's clock (int64 picoseconds, sim/units.h) covers Duration::max(), 26.7 days; an
  // iteration takes at least its FLOPs at the GPUs' dense peak.
  const sim::DataType type = models::tensor_core_type(s.training.precision);
  const double peak = s.cluster.gpu.peak(type).per_second() * static_cast<double>(s.num_gpus());
  const double at_least = models::count_flops(s.model, s.parallel, s.training).hardware / peak;
  if (!(at_least < sim::Duration::max().seconds())) {
    char days[96];
    std::snprintf(days, sizeof days, "%.3g days on these GPUs (its FLOPs at their peak); trainsim simulates up to %.1f days",
                  at_least / 86400, sim::Duration::max().seconds() / 86400);
    o.fail_limit("training.global_batch_size", "one iteration takes at least " + std::string(days) +
                                                   ": use more GPUs or a smaller batch");
  }
}

void validate_plan(const Scenario& s, const Origins& o) {
  const ModelSpec& m = s.model;
  const ParallelSpec& p = s.parallel;
  const TrainingSpec& t = s.training;
  const std::int64_t tp = p.tensor_model_parallel_size, pp = p.pipeline_model_parallel_size;
  const std::int64_t cp = p.context_parallel_size, ep = p.expert_model_parallel_size;
  const std::int64_t vp = p.virtual_pipeline_model_parallel_size;
  const std::int64_t gpus = s.num_gpus();
  if (gpus % (tp * pp * cp) != 0) {
    o.fail("parallelism.tensor_model_parallel_size",
           "tensor x pipeline x context parallel size (" + std::to_string(tp) + " x " + std::to_string(pp) + " x " +
               std::to_string(cp) + " = " + std::to_string(tp * pp * cp) + ") must divide the GPU count (" +
               std::to_string(gpus) + ")");
  }
  const std::int64_t dp = gpus / (tp * pp * cp);
  if (const std::int64_t instances = p.num_distributed_optimizer_instances; instances > 1) {
    const char* key = "parallelism.num_distributed_optimizer_instances";
    // Megatron-LM's arguments.py: the instances split the data-parallel x context-parallel
    // group, and only the distributed optimizer has state to shard within one.
    if (!p.shards_optimizer()) o.fail(key, "needs a sharded optimizer (use_distributed_optimizer or zero_stage >= 1)");
    if ((dp * cp) % instances != 0) {
      o.fail(key, "expected a divisor of the data-parallel x context-parallel size (" + std::to_string(dp) + " x " +
                      std::to_string(cp) + " = " + std::to_string(dp * cp) + "), got " + std::to_string(instances));
    }
  }
  if (m.num_attention_heads % tp != 0) {
    o.fail("model.num_attention_heads", "expected a multiple of tensor_model_parallel_size (" + std::to_string(tp) +
                                            "), got " + std::to_string(m.num_attention_heads));
  }
  if (m.num_query_groups % tp != 0) {
    o.fail("model.num_query_groups", "expected a multiple of tensor_model_parallel_size (" + std::to_string(tp) +
                                         "), got " + std::to_string(m.num_query_groups));
  }
  if (m.ffn_hidden_size % tp != 0) {
    o.fail("model.ffn_hidden_size", "expected a multiple of tensor_model_parallel_size (" + std::to_string(tp) + ")");
  }
  // Layers over stages and virtual stages.
  if (vp > 1 && pp < 2) {
    o.fail("parallelism.virtual_pipeline_model_parallel_size", "virtual stages need pipeline_model_parallel_size >= 2");
  }
  if (vp > 1 && t.pipeline_schedule != models::PipelineSchedule::kInterleaved) {
    o.fail("training.pipeline_schedule", "virtual_pipeline_model_parallel_size > 1 runs the \"interleaved\" schedule");
  }
  if (vp == 1 && t.pipeline_schedule == models::PipelineSchedule::kInterleaved) {
    o.fail("training.pipeline_schedule", "the interleaved schedule needs virtual_pipeline_model_parallel_size > 1");
  }
  std::int64_t rest = m.num_layers, even = pp;
  if (!p.layout_layers.empty()) {
    // The layout places every layer: nothing else may say where layers go.
    const std::pair<const char*, bool> others[] = {
        {"parallelism.decoder_first_pipeline_num_layers", p.decoder_first_pipeline_num_layers.has_value()},
        {"parallelism.decoder_last_pipeline_num_layers", p.decoder_last_pipeline_num_layers.has_value()},
        {"parallelism.account_for_embedding_in_pipeline_split", p.account_for_embedding_in_pipeline_split},
        {"parallelism.account_for_loss_in_pipeline_split", p.account_for_loss_in_pipeline_split}};
    for (const auto& [key, set] : others) {
      if (set) o.fail(key, "not with pipeline_model_parallel_layout, which places every layer");
    }
    std::int64_t placed = 0;
    for (std::int64_t n : p.layout_layers) placed += n;
    if (placed != m.num_layers) {
      o.fail("parallelism.pipeline_model_parallel_layout", "places " + plural(placed, "transformer layer") +
                                                               ", the model has " + std::to_string(m.num_layers));
    }
    rest = 0, even = 0;  // no even split to check
  } else if (p.accounts_in_split()) {
    const char* flag = p.account_for_embedding_in_pipeline_split ? "parallelism.account_for_embedding_in_pipeline_split"
                                                                 : "parallelism.account_for_loss_in_pipeline_split";
    if (p.decoder_first_pipeline_num_layers || p.decoder_last_pipeline_num_layers) {
      o.fail(flag, "not with decoder_first/last_pipeline_num_layers (Megatron-Core refuses the pair)");
    }
    // Megatron-Core (TransformerConfig): the embedding and the loss count as layers, and the
    // total splits evenly over every virtual stage.
    const std::int64_t units = p.split_units(m.num_layers);
    if (units % (pp * vp) != 0) {
      o.fail("model.num_layers", plural(m.num_layers, "layer") + " and " + p.counted_in_split() + " (" + std::to_string(units) +
                                     ") cannot be split evenly over " + plural(pp, "pipeline stage") +
                                     (vp > 1 ? " x " + std::to_string(vp) + " virtual stages" : ""));
    }
    rest = 0, even = 0;
  }
  if (p.decoder_first_pipeline_num_layers) {
    if (pp < 2) o.fail("parallelism.decoder_first_pipeline_num_layers", "needs pipeline_model_parallel_size >= 2");
    rest -= *p.decoder_first_pipeline_num_layers;
    --even;
    if (*p.decoder_first_pipeline_num_layers % vp != 0 || *p.decoder_first_pipeline_num_layers == 0) {
      o.fail("parallelism.decoder_first_pipeline_num_layers", "expected a positive multiple of the virtual stages (" + std::to_string(vp) + ")");
    }
  }
  if (p.decoder_last_pipeline_num_layers) {
    if (pp < 2) o.fail("parallelism.decoder_last_pipeline_num_layers", "needs pipeline_model_parallel_size >= 2");
    rest -= *p.decoder_last_pipeline_num_layers;
    --even;
    if (*p.decoder_last_pipeline_num_layers % vp != 0 || *p.decoder_last_pipeline_num_layers == 0) {
      o.fail("parallelism.decoder_last_pipeline_num_layers", "expected a positive multiple of the virtual stages (" + std::to_string(vp) + ")");
    }
  }
  if (rest < 0 || (even == 0 && rest != 0) || (even > 0 && (rest % (even * vp) != 0 || rest == 0))) {
    o.fail("model.num_layers", plural(m.num_layers, "layer") + " cannot be split evenly over " +
                                   (even == pp ? plural(pp, "pipeline stage") : plural(even, "middle stage")) +
                                   (vp > 1 ? " x " + std::to_string(vp) + " virtual stages" : "") +
                                   (even != pp ? " after decoder_first/last_pipeline_num_layers"
                                               : "; for uneven stages set parallelism.decoder_first_pipeline_num_layers / "
                                                 "decoder_last_pipeline_num_layers, account_for_embedding_in_pipeline_split / "
                                                 "account_for_loss_in_pipeline_split, or pipeline_model_parallel_layout"));
  }
  // Batches.
  if (t.global_batch_size % (t.micro_batch_size * dp) != 0) {
    o.fail("training.global_batch_size", "expected a multiple of micro_batch_size x data-parallel size (" +
                                             std::to_string(t.micro_batch_size) + " x " + std::to_string(dp) + " = " +
                                             std::to_string(t.micro_batch_size * dp) + "), got " +
                                             std::to_string(t.global_batch_size));
  }
  const std::int64_t microbatches = t.global_batch_size / (t.micro_batch_size * dp);
  if (p.microbatch_group_size_per_vp_stage > 0 && t.pipeline_schedule != models::PipelineSchedule::kInterleaved) {
    o.fail("parallelism.microbatch_group_size_per_vp_stage", "applies to the interleaved schedule only");
  }
  if (t.pipeline_schedule == models::PipelineSchedule::kInterleaved) {
    // Megatron-Core (schedules.py, forward_backward_pipelining_with_interleaving): the group
    // size lies in [pipeline size, micro-batches], and the last group is empty or at least the
    // pipeline size.
    const std::int64_t group = p.vp_group();
    const std::int64_t last = microbatches % group;
    if (group < pp || group > microbatches) {
      o.fail(p.microbatch_group_size_per_vp_stage > 0 ? "parallelism.microbatch_group_size_per_vp_stage" : "training.global_batch_size",
             "the interleaved schedule needs micro-batches per iteration (" + std::to_string(microbatches) +
                 ") >= micro-batch group size (" + std::to_string(group) + ") >= pipeline_model_parallel_size (" +
                 std::to_string(pp) + ")");
    }
    if (last != 0 && last < pp) {
      o.fail("training.global_batch_size", "the interleaved schedule needs the micro-batches per iteration (" +
                                               std::to_string(microbatches) + ") to leave a last group of 0 or at least " +
                                               std::to_string(pp) + " after groups of " + std::to_string(group) +
                                               " (got " + std::to_string(last) + ")");
    }
  }
  // Sequence and context parallelism.
  const bool hierarchical = p.cp_comm_type == models::CpCommType::kA2aP2p;
  if (hierarchical) {
    // parallel_state.py: assert np.prod(hierarchical_context_parallel_sizes) == context_parallel_size.
    const std::vector<std::int64_t>& sizes = p.hierarchical_context_parallel_sizes;
    if (sizes.size() != 2) {
      o.fail("parallelism.hierarchical_context_parallel_sizes", "expected [all-to-all group size, ring size] with cp_comm_type \"a2a+p2p\"");
    }
    if (sizes[0] * sizes[1] != cp) {
      o.fail("parallelism.hierarchical_context_parallel_sizes",
             "expected sizes whose product is context_parallel_size (" + std::to_string(cp) + "), got [" + std::to_string(sizes[0]) +
                 ", " + std::to_string(sizes[1]) + "]");
    }
  }
  const std::int64_t a2a_ranks = p.cp_a2a_size();
  const bool a2a = p.cp_runs_all_to_all();
  if (cp > 1 && !a2a && m.window_size > 0 && m.window_size + 1 < m.seq_length) {
    o.fail("parallelism.context_parallel_size", std::string("context parallelism over ") +
                                                    (p.cp_comm_type == models::CpCommType::kAllGather
                                                         ? "all-gathered K/V (cp_comm_type \"allgather\")"
                                                         : hierarchical ? "a ring (cp_comm_type \"a2a+p2p\" with a ring of more than one rank)"
                                                                        : "the ring (cp_comm_type \"p2p\")") +
                                                    " with sliding-window attention (window_size) is not modelled by trainsim: its "
                                                    "steps would skip the blocks outside the window (cp_comm_type \"a2a\" is)");
  }
  if (cp > 1 && a2a_ranks > 1) {
    // Transformer Engine's all-to-alls (AttnFuncWithCPAndQKVOA2A; flash_attn_a2a_communicate under
    // a2a+p2p) split the heads of Q and of K/V on each tensor-parallel rank over the all-to-all
    // group's ranks.
    const std::int64_t heads = m.num_attention_heads / tp;
    const std::int64_t kv_heads = (m.multi_latent_attention ? m.num_attention_heads : m.num_query_groups) / tp;
    if (heads % a2a_ranks != 0 || kv_heads % a2a_ranks != 0) {
      o.fail(hierarchical ? "parallelism.hierarchical_context_parallel_sizes" : "parallelism.cp_comm_type",
             std::string("cp_comm_type \"") + models::to_string(p.cp_comm_type) + "\" needs the attention heads (" + std::to_string(heads) +
                 ") and key/value heads (" + std::to_string(kv_heads) + ") of each tensor-parallel rank divisible by " +
                 (hierarchical ? "the all-to-all group size (" : "context_parallel_size (") + std::to_string(a2a_ranks) + ")");
    }
  }
  if (m.seq_length % (2 * cp) != 0 && cp > 1) {
    o.fail("parallelism.context_parallel_size", "expected seq_length (" + std::to_string(m.seq_length) +
                                                    ") divisible by 2 x context_parallel_size (load-balanced chunks)");
  }
  if (p.sequence_parallel && tp > 1 && (m.seq_length / cp) % tp != 0) {
    o.fail("parallelism.sequence_parallel", "sequence parallelism needs the sequence per context-parallel rank (" +
                                                std::to_string(m.seq_length / cp) + ") divisible by tensor_model_parallel_size");
  }
  if (cp > 1 && t.attention_kernel == models::AttentionKernel::kUnfused) {
    o.fail("training.attention_kernel", "context parallelism runs Transformer Engine's fused ring attention; use \"flash\"");
  }
  if (!t.attention_implementation.empty() && t.attention_implementation != s.cluster.gpu.calibration.attention.implementation) {
    // Scenarios built in code must select it as parse_scenario does (select_attention_implementation).
    o.fail("training.attention_implementation", "expected the calibration's attention to be \"" + t.attention_implementation +
                                                    "\", got \"" + s.cluster.gpu.calibration.attention.implementation + "\"");
  }
  if (!t.transformer_engine) {
    // What only Transformer Engine's layers provide.
    const std::pair<bool, const char*> needs[] = {{t.quantized(), "training.precision"},
                                                  {t.tp_comm_overlap, "training.tp_comm_overlap"},
                                                  {t.cpu_offload_layers > 0, "training.cpu_offloading"},
                                                  {t.delay_wgrad_compute, "training.delay_wgrad_compute"},
                                                  {t.te_cross_entropy(), "training.cross_entropy_fusion_impl"}};
    for (const auto& [on, key] : needs) {
      if (on) o.fail(key, "needs transformer_impl \"transformer_engine\" (Megatron's local layers have no such path)");
    }
  }
  if (t.tp_comm_overlap && p.tensor_model_parallel_size > s.cluster.gpus_per_node) {
    o.fail("training.tp_comm_overlap", "tp_comm_overlap (Transformer Engine userbuffers) needs the tensor-parallel group inside "
                                       "one node's NVLink domain (" + std::to_string(s.cluster.gpus_per_node) + " GPUs), got " +
                                       std::to_string(p.tensor_model_parallel_size));
  }
  if (t.tp_comm_overlap && !(p.sequence_parallel && tp > 1)) {
    o.fail("training.tp_comm_overlap", "tp_comm_overlap needs sequence_parallel with tensor_model_parallel_size > 1 "
                                       "(Megatron: 'Tensor parallel communication/GEMM overlap can happen only when "
                                       "sequence parallelism is enabled')");
  }
  if (!t.async_tensor_model_parallel_allreduce && p.sequence_parallel) {
    o.fail("training.async_tensor_model_parallel_allreduce",
           "applies without sequence parallelism only (under sequence_parallel the input-gradient reduce-scatter "
           "always overlaps the weight-gradient GEMM)");
  }
  // Experts.
  const std::int64_t etp = p.etp();
  if (ep > 1 && !m.is_moe()) o.fail("parallelism.expert_model_parallel_size", "expert parallelism needs a model with num_experts > 0");
  if (p.expert_tensor_parallel_size > 0 && !m.is_moe()) {
    o.fail("parallelism.expert_tensor_parallel_size", "expert tensor parallelism needs a model with num_experts > 0");
  }
  if (m.is_moe() && m.num_experts % ep != 0) {
    o.fail("parallelism.expert_model_parallel_size", "expected a divisor of num_experts (" + std::to_string(m.num_experts) + ")");
  }
  if (m.is_moe() && (tp * cp * dp) % (etp * ep) != 0) {
    // Megatron-Core's expert rank grid folds over the same ranks as the dense grid
    // (parallel_state.initialize_model_parallel).
    o.fail(p.expert_tensor_parallel_size > 0 ? "parallelism.expert_tensor_parallel_size" : "parallelism.expert_model_parallel_size",
           "expert tensor x expert parallel size (" + std::to_string(etp) + " x " + std::to_string(ep) +
               ") must divide tensor x context x data parallel size (" + std::to_string(tp * cp * dp) + ")");
  }
  if (const std::int64_t instances = p.num_distributed_optimizer_instances; m.is_moe() && instances > 1) {
    // parallel_state.py: intra_partial_expert_data_parallel_size = edp / instances.
    const std::int64_t edp = (tp * cp * dp) / (etp * ep);
    if (edp % instances != 0) {
      o.fail("parallelism.num_distributed_optimizer_instances",
             "expected a divisor of the expert-data-parallel size too (" + std::to_string(edp) + "), got " + std::to_string(instances));
    }
  }
  if (m.is_moe() && m.expert_ffn_hidden() % etp != 0) {
    o.fail(m.moe_ffn_hidden_size > 0 ? "model.moe_ffn_hidden_size" : "model.ffn_hidden_size",
           "expected the expert hidden size to be a multiple of expert_tensor_parallel_size (" + std::to_string(etp) + ")");
  }
  if (m.shared_expert_ffn_hidden() % tp != 0) {
    o.fail("model.moe_shared_expert_intermediate_size",
           "expected a multiple of tensor_model_parallel_size (" + std::to_string(tp) + "): the shared expert is tensor-parallel");
  }
  if (m.is_moe() && tp > 1 && !p.sequence_parallel) {
    o.fail("parallelism.sequence_parallel", "a mixture-of-experts model with tensor parallelism needs sequence_parallel "
                                            "(Megatron's MoELayer refuses to train without it)");
  }
  if (t.recompute_mla_up_proj && !m.multi_latent_attention) {
    o.fail("training.recompute_modules", "mla_up_proj needs a model with multi_latent_attention");
  }
  if (t.recompute_moe && !m.is_moe()) o.fail("training.recompute_modules", "moe needs a mixture-of-experts model (num_experts)");
  if (t.recompute_moe_act && !m.is_moe()) o.fail("training.recompute_modules", "moe_act needs a mixture-of-experts model (num_experts)");
  if (t.recompute_layernorm && !m.is_moe() && !m.multi_latent_attention) {
    o.fail("training.recompute_modules", "layernorm recomputes the norms that are modules of their own (Transformer Engine fuses the "
                                         "others into the next projection): latent attention's input norm and an MoE layer's "
                                         "pre-MLP norm; this model has neither");
  }
  if ((t.recompute_moe_act || t.recompute_layernorm) && t.delayed_scaling()) {
    o.fail("training.recompute_modules", "moe_act and layernorm recomputation need an FP8 recipe other than delayed scaling "
                                         "(Megatron-Core refuses them with delayed scaling)");
  }
  if (t.moe_token_dispatcher_type == models::TokenDispatcher::kFlex) {
    if (!m.is_moe()) o.fail("training.moe_token_dispatcher_type", "flex dispatches tokens to experts: it needs a mixture-of-experts model");
    if (p.etp() > 1) {
      o.fail("training.moe_token_dispatcher_type",
             "flex (DeepEP) with expert_tensor_parallel_size > 1 is not modelled: give expert_tensor_parallel_size 1 or the alltoall dispatcher");
    }
  }
  // first_last_layers_bf16: Megatron-Core's TransformerConfig checks (FP8/FP4 only, not with
  // delayed scaling, at most a pipeline stage's layers at each end); trainsim does not model it
  // beside multi-token prediction or the EP overlap's interleaved layer nodes.
  if (t.bf16_layers_at_start > 0 || t.bf16_layers_at_end > 0) {
    if (!t.quantized()) o.fail("training.first_last_layers_bf16", "applies with precision \"fp8\" or \"fp4\" only");
    if (t.delayed_scaling()) {
      o.fail("training.first_last_layers_bf16", "needs an FP8 recipe other than delayed scaling (Megatron-Core refuses it with delayed scaling)");
    }
    const std::int64_t per_stage = m.num_layers / p.pipeline_model_parallel_size;
    if (t.bf16_layers_at_start > per_stage) {
      o.fail("training.num_layers_at_start_in_bf16", "expected at most the layers of one pipeline stage (" + std::to_string(per_stage) + ")");
    }
    if (t.bf16_layers_at_end > per_stage) {
      o.fail("training.num_layers_at_end_in_bf16", "expected at most the layers of one pipeline stage (" + std::to_string(per_stage) + ")");
    }
    if (m.mtp_num_layers > 0) o.fail("training.first_last_layers_bf16", "is not modelled with multi-token prediction (mtp_num_layers)");
    if (t.overlap_moe_expert_parallel_comm) {
      o.fail("training.first_last_layers_bf16", "is not modelled with overlap_moe_expert_parallel_comm");
    }
  }
  // overlap_moe_expert_parallel_comm: Megatron-Core's own conditions (TransformerConfig's
  // __post_init__ and combined_1f1b.py), and ZeRO-3, whose per-layer gathers trainsim does not
  // interleave across two passes.
  if (t.overlap_moe_expert_parallel_comm) {
    if (const auto why = ep_overlap_refusal(m, p, t)) o.fail("training.overlap_moe_expert_parallel_comm", *why);
  }
  // Megatron-Core's OptimizerConfig and get_megatron_optimizer.
  if (t.use_precision_aware_optimizer && !p.use_distributed_optimizer) {
    o.fail("training.use_precision_aware_optimizer", "the precision-aware optimizer needs use_distributed_optimizer (Megatron-Core refuses it without)");
  }
  for (const auto& [key, low] : {std::pair{"exp_avg_dtype", t.exp_avg_16bit}, std::pair{"exp_avg_sq_dtype", t.exp_avg_sq_16bit}}) {
    if (low && !t.use_precision_aware_optimizer) {
      o.fail(std::string("training.") + key, std::string(key) + " can only be fp32 without use_precision_aware_optimizer (Megatron-Core refuses it)");
    }
  }
  // NeMo 1's distributed_fused_adam is its distributed optimizer (megatron_base_model.py).
  if (t.apex_distributed_adam && !p.use_distributed_optimizer) {
    o.fail("training.optimizer_implementation", "apex_distributed_fused_adam shards the optimizer over data parallelism: it needs use_distributed_optimizer");
  }
  if (t.apex_distributed_adam && t.use_precision_aware_optimizer) {
    o.fail("training.optimizer_implementation", "apex_distributed_fused_adam is not Megatron-Core's optimizer: use_precision_aware_optimizer does not apply to it");
  }
  if (t.optimizer_state_16bit && !t.apex_distributed_adam) {
    o.fail("training.optimizer_dtype", "optimizer_dtype is the state dtype of apex_distributed_fused_adam (NeMo's optim.dtype); Megatron-Core's optimizer takes exp_avg_dtype and exp_avg_sq_dtype");
  }
  if (t.moe_shared_expert_overlap) {
    // Megatron-Core: TransformerConfig (alltoall only through core_r0.17; main adds flex) and the
    // EP overlap's assertion. The flag does nothing without a shared expert: refused, not ignored.
    if (m.shared_expert_ffn_hidden() == 0) {
      o.fail("training.moe_shared_expert_overlap",
             "overlaps the shared expert with the token dispatch: it needs a mixture-of-experts model with a shared expert "
             "(moe_shared_expert_intermediate_size)");
    } else if (t.overlap_moe_expert_parallel_comm) {
      o.fail("training.moe_shared_expert_overlap",
             "cannot be combined with overlap_moe_expert_parallel_comm (Megatron-Core refuses it; the combined steps run the "
             "shared expert in the attention node)");
    }
  }
  if (t.moe_use_grouped_tensor && !m.is_moe()) {
    o.fail("training.moe_use_grouped_tensor", "runs the expert GEMMs as one grouped kernel: it needs a mixture-of-experts model (num_experts)");
  }
  if (!t.moe_grouped_gemm) {
    // Megatron-Core's TransformerConfig refuses both without grouped GEMMs.
    if (!m.is_moe()) {
      o.fail("training.moe_grouped_gemm", "chooses how the experts run: it needs a mixture-of-experts model (num_experts)");
    } else if (t.moe_use_grouped_tensor) {
      o.fail("training.moe_use_grouped_tensor", "needs moe_grouped_gemm true (Megatron-Core refuses it without)");
    } else if (t.recomputes_moe_act()) {
      o.fail("training.recompute_modules", "moe_act is recomputed only with moe_grouped_gemm true (Megatron-Core refuses it without)");
    }
  }
  if (t.delay_wgrad_compute && !t.overlap_moe_expert_parallel_comm) {
    o.fail("training.delay_wgrad_compute", "delay_wgrad_compute needs overlap_moe_expert_parallel_comm (Megatron-Core refuses it without)");
  }
  if (t.recompute_mlp && m.num_moe_layers() == m.num_layers) {
    o.fail("training.recompute_modules", "mlp recomputes the dense layers' MLP, and every layer of this model is a mixture-of-experts "
                                         "layer (Megatron leaves MoE layers to \"moe\")");
  }
  if (m.mtp_num_layers == 0 && p.layout_mtp_layers > 0) {
    o.fail("parallelism.pipeline_model_parallel_layout",
           "places " + plural(p.layout_mtp_layers, "multi-token-prediction layer") + " ('m'), but the model has none (mtp_num_layers)");
  }
  if (m.mtp_num_layers > 0) {
    // The model asks for them (a preset or a Hugging Face config's num_nextn_predict_layers
    // may): say how to train without.
    const std::string off = " (the model has " + plural(m.mtp_num_layers, "multi-token-prediction module") +
                            "; \"mtp_num_layers\": 0 in the model section trains without)";
    // Megatron's layout must place every module ('m', modelled before the loss).
    if (!p.layout_layers.empty() && p.layout_mtp_layers != m.mtp_num_layers) {
      o.fail("parallelism.pipeline_model_parallel_layout",
             "places " + plural(p.layout_mtp_layers, "multi-token-prediction layer") + " ('m'); expected " +
                 std::to_string(m.mtp_num_layers) + " (mtp_num_layers)" + off);
    }
    if (p.zero_stage >= 3) o.fail("parallelism.zero_stage", "multi-token prediction under ZeRO stage 3 is not modelled" + off);
    if (m.position_embedding_type != models::PositionEmbedding::kRope) {
      // Megatron's arguments.py: MTP supports rope (or no) position embeddings only.
      o.fail("model.position_embedding_type", "multi-token prediction needs rotary position embeddings (Megatron refuses "
                                              "learned absolute ones with it)" + off);
    }
    if (t.recomputes_mtp_modules() && t.recompute_num_layers != 1) {
      // MultiTokenPredictionLayer._checkpointed_forward asserts it.
      o.fail("training.recompute_num_layers", "multi-token prediction under full uniform recomputation needs "
                                              "recompute_num_layers 1 (Megatron checkpoints each module on its own)");
    }
  }
  // Optimizer sharding and overlap options.
  if (t.overlap_param_gather && !p.use_distributed_optimizer && p.zero_stage == 0) {
    o.fail("training.overlap_param_gather", "overlap_param_gather needs use_distributed_optimizer");
  }
  if (p.zero_stage >= 3 && t.overlap_param_gather) {
    o.fail("training.overlap_param_gather", "ZeRO stage 3 always prefetches its per-layer parameter gathers; "
                                            "overlap_param_gather is for the distributed optimizer");
  }
  // Megatron-LM arguments.py's assertions.
  if (t.overlap_param_gather_with_optimizer_step) {
    const char* key = "training.overlap_param_gather_with_optimizer_step";
    if (!p.shards_optimizer() || p.zero_stage >= 2) {
      o.fail(key, "needs use_distributed_optimizer (ZeRO stage 1; Megatron-LM refuses it without)");
    } else if (!t.overlap_param_gather) {
      o.fail(key, "needs overlap_param_gather (Megatron-LM refuses it without)");
    } else if (t.pipeline_schedule != models::PipelineSchedule::kInterleaved) {
      o.fail(key, "needs the interleaved pipeline schedule (Megatron-LM refuses it without virtual pipeline stages)");
    }
  }
  if (t.overlap_p2p_comm && t.pipeline_schedule != models::PipelineSchedule::kInterleaved) {
    o.fail("training.overlap_p2p_comm", "overlap_p2p_comm applies to the interleaved schedule only");
  }
  if (t.scatter_gather_tensors_in_pipeline && p.sequence_parallel) {
    o.fail("training.scatter_gather_tensors_in_pipeline",
           "applies without sequence parallelism only (Megatron-LM skips it under sequence_parallel: each rank "
           "already sends its own sequence shard)");
  }
  if (t.scatter_gather_tensors_in_pipeline && t.overlap_p2p_comm) {
    o.fail("training.scatter_gather_tensors_in_pipeline",
           "expected false with overlap_p2p_comm: Megatron Core's asynchronous pipeline sends (2023) never scatter/gather "
           "(the option left Megatron-LM when its p2p code moved into Megatron Core)");
  }
  if (t.precision == models::Precision::kFp8 && s.cluster.gpu.dense_fp8.per_second() <= 0) {
    o.fail("training.precision", "fp8 needs FP8 tensor cores; " + s.cluster.gpu.name + " has none");
  }
  if (t.precision == models::Precision::kFp4 && s.cluster.gpu.dense_fp4.per_second() <= 0) {
    // Transformer Engine's NVFP4BlockScaling runs on SM 10.0 and later only.
    o.fail("training.precision", "fp4 (NVFP4) needs Blackwell tensor cores (block-scaled FP4); " + s.cluster.gpu.name + " has none");
  }
  // cpu_offloading: Megatron-Core's TransformerConfig checks (no pipeline parallelism, no
  // recomputation, fewer layers than the model's: Transformer Engine keeps the last one), and the
  // GPU's host copy rate, which prices the copies; trainsim does not model it beside multi-token
  // prediction or the EP overlap's interleaved layer nodes.
  if (t.cpu_offload_layers > 0) {
    if (t.cpu_offload_layers >= m.num_layers) {
      o.fail("training.cpu_offloading_num_layers", "expected fewer than num_layers (" + std::to_string(m.num_layers) +
                                                       "): Transformer Engine's default schedule keeps the last layer's activations on the GPU");
    }
    if (pp > 1) {
      o.fail("training.cpu_offloading", "expected pipeline_model_parallel_size 1: Megatron-Core has no CPU offloading with pipeline parallelism");
    }
    if (t.recompute_granularity != models::RecomputeGranularity::kNone) {
      o.fail("training.cpu_offloading", "expected recompute_granularity \"none\": Megatron-Core refuses CPU offloading with recomputation");
    }
    if (t.pipeline_schedule == models::PipelineSchedule::kGpipe) {
      o.fail("training.pipeline_schedule", "expected \"1f1b\" with cpu_offloading: Transformer Engine's schedule expects each "
                                           "micro-batch's backward right after its forward (Megatron's schedule without pipelining)");
    }
    if (m.mtp_num_layers > 0) o.fail("training.cpu_offloading", "is not modelled with multi-token prediction (mtp_num_layers)");
    if (t.overlap_moe_expert_parallel_comm) o.fail("training.cpu_offloading", "is not modelled with overlap_moe_expert_parallel_comm");
    if (s.cluster.gpu.host_copy_bandwidth.bytes_per_second() <= 0) {
      o.fail("training.cpu_offloading", "needs the GPU's host copy rate (host_copy_GBps in its preset); " + s.cluster.gpu.name + " gives none");
    }
  }
  if (t.fp8_param_gather && !p.shards_optimizer()) {
    // Megatron-LM arguments.py: only with the distributed optimizer or FSDP.
    const char* key = t.precision == models::Precision::kFp4 ? "training.fp4_param_gather" : "training.fp8_param_gather";
    o.fail(key, "needs a sharded optimizer (use_distributed_optimizer or zero_stage >= 1)");
  }
  if (t.precision == models::Precision::kFp8 && t.quant_recipe == models::QuantRecipe::kMxfp8 &&
      s.cluster.gpu.architecture != topo::Architecture::kBlackwell) {
    // Transformer Engine's MXFP8BlockScaling runs on SM 10.0 and later only (its mxfp8 docs).
    o.fail("training.fp8_recipe", "mxfp8 needs Blackwell tensor cores (block-scaled FP8); " + s.cluster.gpu.name + " has none");
  }
  if (t.recompute_granularity == models::RecomputeGranularity::kFull) {
    const std::int64_t per_chunk = m.num_layers / (pp * vp);
    if (t.recompute_num_layers > per_chunk) {
      o.fail("training.recompute_num_layers", "expected at most the layers of one model chunk (" + std::to_string(per_chunk) + ")");
    }
  }
  // Simulation what-ifs.
  for (const Straggler& st : s.simulation.stragglers) {
    if ((st.rank && *st.rank >= gpus) || (st.node && *st.node >= s.cluster.num_nodes)) {
      throw InputError(s.file, "/simulation/stragglers", "straggler outside the cluster (" + std::to_string(gpus) + " GPUs on " +
                                                             std::to_string(s.cluster.num_nodes) + " nodes)");
    }
  }
  if (!s.simulation.stragglers.empty() && !s.simulation.full) {
    throw InputError(s.file, "/simulation/stragglers", "stragglers break the symmetry between ranks: set simulation.fidelity to \"full\"");
  }
  for (const DegradedLink& d : s.simulation.degraded_links) {
    const int nics = s.cluster.inter_node.nics_per_node * s.cluster.inter_node.nics_per_gpu;
    if (d.node >= s.cluster.num_nodes || (d.nic && *d.nic >= nics)) {
      throw InputError(s.file, "/simulation/degraded_links", "link outside the cluster (" + std::to_string(s.cluster.num_nodes) +
                                                                 " nodes, " + std::to_string(nics) + " NICs each)");
    }
  }
  if (!s.simulation.degraded_links.empty() && !s.simulation.full) {
    throw InputError(s.file, "/simulation/degraded_links", "a degraded link breaks the symmetry between ranks: set simulation.fidelity to \"full\"");
  }
  const double per_layer = check_magnitudes(s, o);
  check_simulation_size(s, o);
  check_live_activations(s, o, per_layer);
}

// The value of `--set key=value`: JSON when it parses as JSON (checked like a file: depth,
// duplicate keys), otherwise the plain string.
Json parse_value(const std::string& assignment, std::size_t eq) {
  const std::string text = assignment.substr(eq + 1);
  if (!Json::accept(text)) return Json(text);
  try {
    return parse_json_text(text, "--set");
  } catch (const InputError& e) {
    throw InputError("--set", assignment, e.detail());
  }
}

}  // namespace

void validate(const Scenario& scenario) { validate_plan(scenario, Origins{}); }

std::optional<std::string> ep_overlap_refusal(const models::ModelSpec& m, const models::ParallelSpec& p, const models::TrainingSpec& t) {
  if (!m.is_moe() || p.expert_model_parallel_size <= 1) return "overlaps expert-parallel all-to-alls: it needs expert_model_parallel_size > 1";
  if (p.pipeline_model_parallel_size > 1 && t.pipeline_schedule != models::PipelineSchedule::kInterleaved) {
    return "with pipeline parallelism it runs in the interleaved schedule only (Megatron-Core asserts "
           "virtual_pipeline_model_parallel_size)";
  }
  if (t.recompute_granularity == models::RecomputeGranularity::kFull) return "expected no full recomputation (Megatron-Core refuses it)";
  if (t.recomputes_moe()) return "expected recompute_modules without moe (Megatron-Core refuses it)";
  if (m.mtp_num_layers > 1) return "expected at most one multi-token-prediction layer (Megatron-Core refuses more)";
  if (m.mtp_num_layers == 1 && p.pipeline_model_parallel_size == 1) {
    return "with a multi-token-prediction layer it needs pipeline parallelism (Megatron-Core refuses it without)";
  }
  if (p.zero_stage >= 3) return "ZeRO stage 3 with overlapped expert-parallel passes is not modelled by trainsim";
  return std::nullopt;
}

std::int64_t Scenario::data_parallel_size() const {
  return num_gpus() / (parallel.tensor_model_parallel_size * parallel.pipeline_model_parallel_size *
                       parallel.context_parallel_size);
}

std::int64_t Scenario::microbatches() const {
  return training.global_batch_size / (training.micro_batch_size * data_parallel_size());
}

void apply_override(Json& doc, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError("--set", assignment, "expected key.path=value (e.g. parallelism.tensor_model_parallel_size=4)");
  }
  if (!is_valid_utf8(assignment)) {
    std::string shown = assignment;
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    }
    throw InputError("--set", shown, "not valid UTF-8");
  }
  const std::string path = assignment.substr(0, eq);
  if (std::count(path.begin(), path.end(), '.') >= kMaxJsonDepth) {
    throw InputError("--set", assignment, "key path nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  }
  Json* node = &doc;
  std::size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw InputError("--set", assignment, "empty key in \"" + path + "\"");
    if (!node->is_object()) throw InputError("--set", assignment, "\"" + path.substr(0, start - 1) + "\" is not an object");
    if (dot == std::string::npos) {
      (*node)[key] = parse_value(assignment, eq);
      return;
    }
    node = &(*node)[key];
    if (node->is_null()) *node = Json::object();
    start = dot + 1;
  }
}

// training.attention_implementation: the GPU calibration's fused-attention parameters become
// those of the named implementation (its own, or one of its alternatives).
void select_attention_implementation(Scenario& s, const Origins& o) {
  const std::string& name = s.training.attention_implementation;
  if (name.empty()) return;
  if (s.training.attention_kernel != models::AttentionKernel::kFlash) {
    o.fail("training.attention_implementation", "applies to attention_kernel \"flash\" only");
  }
  topo::ComputeCalibration& c = s.cluster.gpu.calibration;
  if (c.select_attention(name)) return;
  std::string known = "\"" + c.attention.implementation + "\"";
  for (const topo::AttentionCalibration& a : c.attention_alternatives) known += ", \"" + a.implementation + "\"";
  o.fail("training.attention_implementation", "expected an implementation the " + s.cluster.gpu.name +
                                                  " calibration was fitted on (" + known + "), got \"" + name + "\"");
}

Scenario parse_scenario(const Json& doc, const std::string& file, const std::string& path) {
  ObjectReader r(doc, file, path);
  r.allow({"description", "sources", "notes"});
  Origins origins;
  Scenario s;
  s.file = file;
  s.name = r.get_string("name", is_valid_utf8(file) ? file : "scenario");
  if (!r.has("model")) r.fail("model", "missing; expected a model section ({\"preset\": \"gpt3-175b\"} or explicit fields)");
  if (!r.has("cluster")) r.fail("cluster", "missing; expected a cluster section ({\"preset\": \"dgx-a100-80gb\", \"num_nodes\": 128})");
  if (!r.has("training")) r.fail("training", "missing; expected a training section with micro_batch_size and global_batch_size");
  s.model = read_model(*r.raw("model"), file, join_path(path, "model"), origins);
  s.parallel = read_parallel(r.object("parallelism"), origins);
  s.training = read_training(r.object("training"), s.parallel, origins);
  s.cluster = read_cluster(*r.raw("cluster"), file, join_path(path, "cluster"));
  s.simulation = read_simulation(r.object("simulation"));
  r.finish();
  select_attention_implementation(s, origins);
  // Keys the size checks may point at (read by hardware_reader and read_simulation).
  const Json& cluster = *r.raw("cluster");
  const bool by_gpus = cluster.is_object() && cluster.contains("num_gpus") && !cluster["num_gpus"].is_null();
  origins.at["cluster.size"] = {file, join_path(join_path(path, "cluster"), by_gpus ? "num_gpus" : "num_nodes")};
  origins.at["simulation.fidelity"] = {file, join_path(join_path(path, "simulation"), "fidelity")};
  validate_plan(s, origins);
  return s;
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  Json doc = read_json_file(path);
  if (!doc.is_object()) throw InputError(path, "/", "expected a JSON object (a scenario), got " + describe(doc));
  for (const std::string& o : overrides) apply_override(doc, o);
  return parse_scenario(doc, path);
}

ModelSpec load_model(const std::string& preset_or_file) {
  Json section = Json::object();
  const bool is_file = preset_or_file.find('/') != std::string::npos || preset_or_file.ends_with(".json");
  if (is_file) {
    section = read_json_file(preset_or_file);
    Origins origins;
    return read_model(section, preset_or_file, "", origins);
  }
  section["preset"] = preset_or_file;
  Origins origins;
  return read_model(section, "--model", "", origins);
}

topo::ClusterSpec load_cluster(const std::string& preset_or_file, std::int64_t num_nodes) {
  const bool is_file = preset_or_file.find('/') != std::string::npos || preset_or_file.ends_with(".json");
  Json section = is_file ? read_json_file(preset_or_file) : Json{{"preset", preset_or_file}};
  if (section.is_object()) section["num_nodes"] = num_nodes;
  return read_cluster(section, is_file ? preset_or_file : "--cluster", "");
}

}  // namespace trainsim::config
