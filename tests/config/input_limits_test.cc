// Input limits and guards (README "Input limits"): JSON reading, --set overrides, Hugging Face
// configs, magnitude checks and the simulation-size guard, each ending in an InputError with the
// file and the JSON path, never another exception.

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/hardware_reader.h"
#include "config/json_reader.h"
#include "config/presets.h"
#include "config/scenario.h"
#include "tests/process.h"
#include "tests/scenario_helpers.h"

using namespace trainsim;

namespace {

const std::string kSmall = std::string(TRAINSIM_SOURCE_DIR) + "/tests/bad_inputs/valid_small.json";

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / ("trainsim_limits_" + name)).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The InputError's "location: message" ("" when the call succeeds). Other exceptions escape.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
    return "";
  } catch (const InputError& e) {
    return e.location() + ": " + e.detail();
  }
}

std::string scenario_error(const std::vector<std::string>& overrides) {
  return error_of([&] { config::load_scenario(kSmall, overrides); });
}


}  // namespace

TEST_CASE("config/limits: JSON files larger than the limit are errors, read no further") {
  const std::string path = temp_file("big.json", "{\"description\": \"" + std::string(17u << 20, 'x') + "\"}");
  CHECK(tests::contains(error_of([&] { config::read_json_file(path); }), "larger than 16 MiB"));
  CHECK(error_of([&] { config::read_json_file(path, 32u << 20); }) == "");
  CHECK(tests::contains(error_of([] { config::read_json_file("/dev/zero"); }), "larger than 16 MiB"));
  CHECK(tests::contains(error_of([] { config::read_json_file("/dev/null"); }), "is empty"));
}

TEST_CASE("config/limits: a large flat document parses, only nesting depth is limited") {
  std::string wide = "{\"a\": [";
  for (int i = 0; i < 200000; ++i) wide += (i ? ",{\"k" : "{\"k") + std::to_string(i) + "\": [1, 2.5, \"s\"]}";
  wide += "]}";
  CHECK(config::parse_json_text(wide, "wide.json")["a"].size() == 200000);
  const std::string deep = std::string(129, '[') + std::string(129, ']');
  CHECK(tests::contains(error_of([&] { config::parse_json_text(deep, "deep.json"); }), "line 1: JSON nested more than 128 levels"));
  CHECK(error_of([] { config::parse_json_text("// [[[[[[\n/* {{{{ */ {\"s\": \"[[[[\"}", "c.json"); }) == "");
  CHECK(config::line_nested_deeper_than("{\n[\n[", 2) == 3);
}

TEST_CASE("config/limits: duplicate keys and out-of-range numbers name the JSON path") {
  CHECK(error_of([] { config::parse_json_text("{\"a\": {\"b\": 1, \"b\": 2}}", "d.json"); }) ==
        "/a/b: duplicate key \"b\" (each key may appear once per object)");
  CHECK(tests::contains(error_of([] { config::parse_json_text("{\"a\": [{}, {\"x\": 1, \"x\": 1}]}", "d.json"); }), "/a/1/x: duplicate key"));
  CHECK(error_of([] { config::parse_json_text("{\"a\": {\"b\": 1}, \"c\": {\"b\": 2}}", "d.json"); }) == "");
  CHECK(tests::contains(error_of([] { config::parse_json_text("{\"a\": [1, 2, 1e999]}", "n.json"); }), "/a/2: invalid JSON: number overflow"));
}

TEST_CASE("config/limits: UTF-8 validation") {
  CHECK(config::is_valid_utf8("plain ascii"));
  CHECK(config::is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK_FALSE(config::is_valid_utf8("caf\xe9"));             // Latin-1
  CHECK_FALSE(config::is_valid_utf8("\xc0\xaf"));            // overlong
  CHECK_FALSE(config::is_valid_utf8("\xed\xa0\x80"));        // surrogate
  CHECK_FALSE(config::is_valid_utf8("\xf4\x90\x80\x80"));    // beyond U+10FFFF
  CHECK_FALSE(config::is_valid_utf8("\xe2\x82"));            // truncated
}

TEST_CASE("config/limits: --set values are checked like files") {
  CHECK(tests::contains(scenario_error({"name=\xff"}), "not valid UTF-8"));
  CHECK(tests::contains(scenario_error({"training={\"micro_batch_size\": 1, \"micro_batch_size\": 2}"}), "duplicate key"));
  CHECK(tests::contains(scenario_error({"x=" + std::string(200, '[') + std::string(200, ']')}), "nested more than 128 levels"));
  std::string deep_key = "a";
  for (int i = 0; i < 200; ++i) deep_key += ".a";
  CHECK(tests::contains(scenario_error({deep_key + "=1"}), "key path nested more than 128 levels"));
  CHECK(tests::contains(scenario_error({"model.num_layers=1e999"}), "/model/num_layers: expected an integer"));
}

TEST_CASE("config/limits: a scenario named after a non-UTF-8 path gets a printable name") {
  const std::string text = "{\"model\": {\"preset\": \"gpt3-1.7b\"}, \"training\": {\"micro_batch_size\": 4, \"global_batch_size\": 256}, "
                           "\"cluster\": {\"preset\": \"dgx-a100-80gb\", \"num_nodes\": 4}}";
  const config::Scenario s = config::load_scenario(temp_file("name_\xff.json", text));
  CHECK(config::is_valid_utf8(s.name));
}

TEST_CASE("config/limits: Hugging Face configs with wrong types are input errors") {
  auto hf_error = [](const std::string& hf_text) {
    const std::string hf = temp_file("hf.json", hf_text);
    const std::string model = temp_file("hf_model.json", "{\"hf_config\": \"" + hf + "\", \"seq_length\": 4096}");
    return error_of([&] { config::load_model(model); });
  };
  const std::string base = "\"hidden_size\": 1024, \"num_hidden_layers\": 4, \"num_attention_heads\": 16, \"vocab_size\": 32000";
  CHECK(hf_error("{" + base + "}") == "");
  CHECK(tests::contains(hf_error("{" + base + ", \"_name_or_path\": 7}"), "/_name_or_path: expected a string"));
  CHECK(tests::contains(hf_error("{" + base + ", \"hidden_act\": [\"silu\"]}"), "/hidden_act: expected a string"));
  CHECK(tests::contains(hf_error("{" + base + ", \"tie_word_embeddings\": \"no\"}"), "/tie_word_embeddings: expected true or false"));
  CHECK(tests::contains(hf_error("{" + base + ", \"resid_pdrop\": \"0.1\"}"), "/resid_pdrop: expected a number"));
  CHECK(tests::contains(hf_error("{\"hidden_size\": 1e30, \"num_hidden_layers\": 4, \"num_attention_heads\": 16, \"vocab_size\": 32000}"),
                 "/hidden_size: expected an integer"));
  CHECK(tests::contains(hf_error("{\"hidden_size\": 18446744073709551615, \"num_hidden_layers\": 4, \"num_attention_heads\": 16, \"vocab_size\": 1}"),
                 "/hidden_size: expected an integer in [1, 1048576]"));
  CHECK(tests::contains(hf_error("[]"), "/: expected a Hugging Face config.json object"));
}

TEST_CASE("config/hf: routed and shared experts and dense layers among them under each family's key, architectures the lowering lacks are refused at their key") {
  auto hf_model = [](const std::string& hf_text) {
    const std::string hf = temp_file("hf_moe.json", hf_text);
    return temp_file("hf_moe_model.json", "{\"hf_config\": \"" + hf + "\", \"seq_length\": 4096}");
  };
  // Qwen3-30B-A3B's config.json (values as published): experts under "num_experts", head_dim apart
  // from hidden / heads.
  const std::string qwen3 =
      "\"hidden_size\": 2048, \"num_hidden_layers\": 48, \"num_attention_heads\": 32, \"num_key_value_heads\": 4, "
      "\"head_dim\": 128, \"intermediate_size\": 6144, \"moe_intermediate_size\": 768, \"num_experts\": 128, "
      "\"num_experts_per_tok\": 8, \"vocab_size\": 151936, \"hidden_act\": \"silu\", \"rms_norm_eps\": 1e-06, "
      "\"rope_theta\": 1000000.0, \"tie_word_embeddings\": false";
  const models::ModelSpec m = config::load_model(hf_model("{" + qwen3 + ", \"decoder_sparse_step\": 1, \"mlp_only_layers\": []}"));
  CHECK(m.num_experts == 128);
  CHECK(m.moe_router_topk == 8);
  CHECK(m.expert_ffn_hidden() == 768);
  CHECK(m.head_dim() == 128);
  CHECK(static_cast<double>(m.total_parameters(1)) == doctest::Approx(30.5e9).epsilon(0.01));
  // Its model_type says its heads are normalised; another model_type's are not.
  CHECK_FALSE(m.qk_layernorm);
  const models::ModelSpec typed = config::load_model(hf_model("{" + qwen3 + ", \"model_type\": \"qwen3_moe\"}"));
  CHECK(typed.qk_layernorm);
  CHECK(typed.total_parameters(1) == m.total_parameters(1) + 48 * 2 * 128);
  CHECK_FALSE(config::load_model(hf_model("{" + qwen3 + ", \"model_type\": \"qwen2_moe\"}")).qk_layernorm);
  // "num_experts": 0 is a dense model.
  CHECK_FALSE(config::load_model(hf_model("{\"hidden_size\": 1024, \"num_hidden_layers\": 4, \"num_attention_heads\": 16, "
                                          "\"vocab_size\": 32000, \"num_experts\": 0}")).is_moe());
  auto error = [&](const std::string& text) { return error_of([&] { config::load_model(hf_model(text)); }); };
  // Dense layers among the MoE ones: Qwen's decoder_sparse_step (layer i MoE when (i + 1) %
  // step == 0) and mlp_only_layers.
  const models::ModelSpec stepped = config::load_model(hf_model("{" + qwen3 + ", \"decoder_sparse_step\": 2, \"mlp_only_layers\": [1]}"));
  CHECK_FALSE(stepped.is_moe_layer(0));
  CHECK_FALSE(stepped.is_moe_layer(1));  // (1 + 1) % 2 == 0, but listed dense
  CHECK(stepped.is_moe_layer(3));
  CHECK(stepped.num_moe_layers() == 23);
  CHECK(tests::contains(error("{" + qwen3 + ", \"mlp_only_layers\": [48]}"), "/mlp_only_layers/0: expected a layer index in [0, 48)"));
  CHECK(config::load_model(hf_model("{" + qwen3 + ", \"shared_expert_intermediate_size\": 5632}")).moe_shared_expert_intermediate_size ==
        5632);
  // Qwen2-57B-A14B's config.json (values as published): 64 experts, top 8, a shared expert of
  // 20,480; 57.4B parameters (its model card), the shared expert's gate (one h-vector per
  // layer, 100k parameters in all) left out.
  const models::ModelSpec qwen2 = config::load_model(hf_model(
      "{\"hidden_size\": 3584, \"num_hidden_layers\": 28, \"num_attention_heads\": 28, \"num_key_value_heads\": 4, "
      "\"intermediate_size\": 18944, \"moe_intermediate_size\": 2560, \"shared_expert_intermediate_size\": 20480, "
      "\"num_experts\": 64, \"num_experts_per_tok\": 8, \"vocab_size\": 151936, \"hidden_act\": \"silu\", "
      "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"tie_word_embeddings\": false, \"decoder_sparse_step\": 1}"));
  CHECK(qwen2.moe_shared_expert_intermediate_size == 20480);
  CHECK(static_cast<double>(qwen2.total_parameters(1)) == doctest::Approx(57.4e9).epsilon(0.005));
  // DeepSeek-V3's config.json: latent attention, a shared expert and three dense layers.
  const std::string deepseek =
      "\"hidden_size\": 7168, \"num_hidden_layers\": 61, \"num_attention_heads\": 128, \"num_key_value_heads\": 128, "
      "\"intermediate_size\": 18432, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256, \"num_experts_per_tok\": 8, "
      "\"moe_layer_freq\": 1, \"vocab_size\": 129280, "
      "\"hidden_act\": \"silu\", \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000";
  const std::string v3 = deepseek + ", \"n_shared_experts\": 1, \"first_k_dense_replace\": 3";
  // With its latent attention: DeepSeek-V3's 671B parameters (its model card; the
  // multi-token-prediction module's 14B are not in a forward pass of the main model).
  const models::ModelSpec v3_mla = config::load_model(hf_model(
      "{" + v3 + ", \"q_lora_rank\": 1536, \"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, "
                 "\"v_head_dim\": 128, \"tie_word_embeddings\": false}"));
  CHECK(v3_mla.multi_latent_attention);
  CHECK(v3_mla.q_lora_rank == 1536);
  CHECK(v3_mla.kv_lora_rank == 512);
  CHECK(v3_mla.qk_pos_emb_head_dim == 64);
  CHECK(static_cast<double>(v3_mla.total_parameters(1)) == doctest::Approx(671e9).epsilon(0.005));
  CHECK(v3_mla.mtp_num_layers == 0);
  // Its num_nextn_predict_layers: one multi-token-prediction module, trained with the model. The
  // model card's 685B total holds the 671B, the module and its copies of the embedding and head.
  const models::ModelSpec v3_mtp = config::load_model(hf_model(
      "{" + v3 + ", \"q_lora_rank\": 1536, \"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, "
                 "\"v_head_dim\": 128, \"tie_word_embeddings\": false, \"num_nextn_predict_layers\": 1}"));
  CHECK(v3_mtp.mtp_num_layers == 1);
  CHECK(v3_mtp.moe_router_num_groups == 0);  // no n_group / topk_group given
  // Its node-limited routing: n_group 8, topk_group 4 (Megatron's moe_router_num_groups / _group_topk).
  const models::ModelSpec v3_groups = config::load_model(hf_model("{" + v3 + ", \"n_group\": 8, \"topk_group\": 4}"));
  CHECK(v3_groups.moe_router_num_groups == 8);
  CHECK(v3_groups.moe_router_group_topk == 4);
  CHECK(v3_mtp.total_parameters(1) == v3_mla.total_parameters(1));
  CHECK(static_cast<double>(v3_mtp.total_parameters(1) + v3_mtp.mtp_parameters() + 2 * v3_mtp.padded_vocab(1) * 7168) ==
        doctest::Approx(685e9).epsilon(0.002));
  CHECK(config::load_model(hf_model("{" + v3 + ", \"num_nextn_predict_layers\": 0}")).mtp_num_layers == 0);
  CHECK(tests::contains(error("{" + v3 + ", \"num_nextn_predict_layers\": 65}"), "/num_nextn_predict_layers: expected an integer in [1, 64]"));
  // DeepSeek-V2-Lite has no q bottleneck (q_lora_rank null).
  CHECK(config::load_model(hf_model("{" + v3 + ", \"q_lora_rank\": null, \"kv_lora_rank\": 512}")).q_lora_rank == 0);
  CHECK(tests::contains(error("{" + v3 + ", \"q_lora_rank\": 1536}"), "/q_lora_rank: q_lora_rank without kv_lora_rank"));
  // DeepSeek-MoE without latent attention: three dense layers, then MoE ones with a shared expert.
  const models::ModelSpec v3_mha = config::load_model(hf_model("{" + v3 + "}"));
  CHECK(v3_mha.num_moe_layers() == 58);
  CHECK_FALSE(v3_mha.is_moe_layer(2));
  CHECK(v3_mha.is_moe_layer(3));
  CHECK(tests::contains(error("{" + deepseek + ", \"first_k_dense_replace\": 62}"), "/first_k_dense_replace: expected an integer in [0, 61]"));
  // GLM-4.5-Air's config.json (values as published): one dense layer, 128 routed experts and a
  // shared one; 106B parameters (its model card), within the 1.5% of what trainsim leaves out
  // (the multi-token-prediction layer's weights are in the checkpoint, not in a forward pass).
  const models::ModelSpec glm = config::load_model(hf_model(
      "{\"attention_bias\": true, \"first_k_dense_replace\": 1, \"head_dim\": 128, \"hidden_act\": \"silu\", \"hidden_size\": 4096, "
      "\"intermediate_size\": 10944, \"moe_intermediate_size\": 1408, \"n_routed_experts\": 128, \"n_shared_experts\": 1, "
      "\"num_attention_heads\": 96, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 46, \"num_key_value_heads\": 8, "
      "\"rms_norm_eps\": 1e-05, \"rope_theta\": 1000000, \"tie_word_embeddings\": false, \"vocab_size\": 151552}"));
  CHECK(glm.num_moe_layers() == 45);
  CHECK(glm.moe_shared_expert_intermediate_size == 1408);
  CHECK(static_cast<double>(glm.total_parameters(1)) == doctest::Approx(106e9).epsilon(0.015));
  CHECK(error("{" + deepseek + ", \"n_shared_experts\": 0, \"first_k_dense_replace\": 0}") == "");
  // DeepSeek's shared experts: n_shared_experts experts of moe_intermediate_size.
  CHECK(config::load_model(hf_model("{" + deepseek + ", \"n_shared_experts\": 2, \"first_k_dense_replace\": 0}"))
            .moe_shared_expert_intermediate_size == 4096);
}

TEST_CASE("config/hf: sliding windows on the layers the config names, encoder-decoders and multimodal wrappers refused, Gemma's MLP, Falcon's heads and bias read") {
  auto model_of = [](const std::string& hf_text, int seq) {
    const std::string hf = temp_file("hf_window.json", hf_text);
    return temp_file("hf_window_model.json", "{\"hf_config\": \"" + hf + "\", \"seq_length\": " + std::to_string(seq) + "}");
  };
  // Mistral-7B-v0.1's config.json, abridged: a 4,096-token window.
  const std::string mistral =
      "{\"model_type\": \"mistral\", \"hidden_size\": 4096, \"num_hidden_layers\": 32, \"num_attention_heads\": 32, "
      "\"num_key_value_heads\": 8, \"intermediate_size\": 14336, \"vocab_size\": 32000, \"hidden_act\": \"silu\", "
      "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"sliding_window\": 4096, \"tie_word_embeddings\": false}";
  const models::ModelSpec windowed = config::load_model(model_of(mistral, 8192));
  CHECK(windowed.window_size == 4096);
  CHECK(windowed.window_layer_pattern.empty());  // every layer
  CHECK(windowed.window_of(31) == 4096);
  // GPT-OSS names each layer's kind; Gemma 2 alternates from a sliding first layer; Gemma 3 keeps
  // every sliding_window_pattern-th layer full; Qwen2 slides from max_window_layers on.
  const std::string four = "\"hidden_size\": 1024, \"num_hidden_layers\": 4, \"num_attention_heads\": 8, \"num_key_value_heads\": 8, "
                           "\"intermediate_size\": 4096, \"vocab_size\": 32000, \"hidden_act\": \"silu\", \"rms_norm_eps\": 1e-05, "
                           "\"rope_theta\": 10000.0, \"sliding_window\": 128, ";
  auto layers = [&](const std::string& rest) {
    const models::ModelSpec m = config::load_model(model_of("{" + four + rest + "}", 4096));
    std::string out;
    for (std::int64_t l = 0; l < m.num_layers; ++l) out += m.window_of(l) == 128 ? "w" : (m.window_of(l) == 0 ? "f" : "?");
    return out;
  };
  CHECK(layers("\"model_type\": \"gpt_oss\", \"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\", "
               "\"sliding_attention\"]") == "wffw");
  CHECK(layers("\"model_type\": \"gemma2\"") == "wfwf");
  CHECK(layers("\"model_type\": \"gemma3_text\", \"sliding_window_pattern\": 4") == "wwwf");
  CHECK(layers("\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"max_window_layers\": 1") == "fwww");
  CHECK(layers("\"model_type\": \"qwen2\", \"use_sliding_window\": false") == "ffff");
  CHECK(tests::contains(error_of([&] { config::load_model(model_of("{" + four + "\"layer_types\": [\"sliding_attention\", \"local\", "
                                                                    "\"full_attention\", \"full_attention\"]}", 4096)); }),
                        "/layer_types/1: expected \"sliding_attention\" or \"full_attention\""));
  // Qwen2 names a window it does not use.
  const std::string qwen2 =
      "{\"model_type\": \"qwen2\", \"hidden_size\": 3584, \"num_hidden_layers\": 28, \"num_attention_heads\": 28, "
      "\"num_key_value_heads\": 4, \"intermediate_size\": 18944, \"vocab_size\": 152064, \"hidden_act\": \"silu\", "
      "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 4096, \"use_sliding_window\": false}";
  CHECK(error_of([&] { config::load_model(model_of(qwen2, 8192)); }) == "");
  // Gemma-7B's config.json, abridged: gelu_pytorch_tanh on a gated MLP, embeddings tied by default.
  const models::ModelSpec gemma = config::load_model(model_of(
      "{\"model_type\": \"gemma\", \"hidden_size\": 3072, \"num_hidden_layers\": 28, \"num_attention_heads\": 16, "
      "\"num_key_value_heads\": 16, \"head_dim\": 256, \"intermediate_size\": 24576, \"vocab_size\": 256000, "
      "\"hidden_act\": \"gelu_pytorch_tanh\", \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0}", 8192));
  CHECK(gemma.activation == models::Activation::kSwiglu);
  CHECK_FALSE(gemma.untie_embeddings_and_output_weights);
  CHECK(static_cast<double>(gemma.total_parameters(1)) == doctest::Approx(8.54e9).epsilon(0.01));
  // Falcon-7B's config.json, abridged: multi-query attention under its own flag.
  const models::ModelSpec falcon = config::load_model(model_of(
      "{\"model_type\": \"falcon\", \"hidden_size\": 4544, \"num_hidden_layers\": 32, \"num_attention_heads\": 71, "
      "\"multi_query\": true, \"vocab_size\": 65024, \"parallel_attn\": true, \"bias\": false}", 2048));
  CHECK(falcon.num_query_groups == 1);
  CHECK_FALSE(falcon.add_bias_linear);
  CHECK(config::load_model(model_of("{\"hidden_size\": 8192, \"num_hidden_layers\": 60, \"num_attention_heads\": 128, "
                                    "\"num_kv_heads\": 8, \"vocab_size\": 65024}", 2048)).num_query_groups == 8);
  // What has no lowering is named at its key.
  CHECK(tests::contains(error_of([&] { config::load_model(model_of("{\"model_type\": \"t5\", \"d_model\": 512, \"num_layers\": 6, "
                                                                    "\"num_heads\": 8, \"vocab_size\": 32128, \"is_encoder_decoder\": true}", 512)); }),
                        "/is_encoder_decoder: an encoder-decoder model is not modelled"));
  CHECK(tests::contains(error_of([&] { config::load_model(model_of("{\"model_type\": \"llama4\", \"text_config\": {\"hidden_size\": 5120}, "
                                                                    "\"vision_config\": {}}", 8192)); }),
                        "/text_config: a multimodal config"));
}

TEST_CASE("config/limits: every shipped preset loads (a file never resolves to itself)") {
  for (const std::string& name : config::preset_names("models")) {
    CAPTURE(name);
    CHECK_NOTHROW(config::load_model(name));
  }
  for (const std::string& name : config::preset_names("clusters")) {
    CAPTURE(name);
    CHECK_NOTHROW(config::load_cluster(name, 2));
  }
  const std::string gpu = config::preset_file("gpus", "b200", "", "");
  CHECK(config::resolve_file("b200.json", "calibration", gpu, "/calibration") != gpu);
}

TEST_CASE("config/limits: sizes beyond the limits name the key to change") {
  CHECK(tests::contains(scenario_error({"model.num_layers=65537"}), "/model/num_layers: expected an integer in [1, 65536]"));
  CHECK(tests::contains(scenario_error({"model.seq_length=67108865"}), "/model/seq_length: expected an integer in [1, 67108864]"));
  CHECK(tests::contains(scenario_error({"model.kv_channels=65536", "model.num_attention_heads=128"}), "/model/kv_channels: num_attention_heads x head"));
  CHECK(tests::contains(scenario_error({"training.micro_batch_size=16777216", "training.global_batch_size=536870912"}),
                 "/training/micro_batch_size: one layer's tensors"));
  CHECK(tests::contains(scenario_error({"model.num_layers=65536", "model.hidden_size=1048576", "model.num_attention_heads=1024"}),
                 "/model/hidden_size: the model would have about"));
}

TEST_CASE("config/limits: plans too big to simulate quickly are rejected before lowering") {
  CHECK(tests::contains(scenario_error({"training.global_batch_size=128000000"}),
                 "/training/global_batch_size: 1 million micro-batches per iteration x 24 layers take about"));
  // Full fidelity on the default scenario fits the default budget; on 16,384 GPUs it needs a raise.
  CHECK(error_of([] { config::load_scenario(tests::kDefaultScenario, {"simulation.fidelity=\"full\""}); }) == "");
  const std::string big = std::string(TRAINSIM_SOURCE_DIR) + "/bench/scenarios/llama3.1-405b-16384xh100.json";
  CHECK(tests::contains(error_of([&] { config::load_scenario(big, {"simulation.fidelity=\"full\""}); }),
                 "/simulation/fidelity: full fidelity would simulate every one of 16384 ranks"));
  CHECK(error_of([&] { config::load_scenario(big, {"simulation.fidelity=\"full\"", "simulation.max_events=1e9"}); }) == "");
  CHECK(tests::contains(scenario_error({"training.global_batch_size=4294967168", "simulation.max_events=1e15"}),
                 "/training/global_batch_size: 33.6 million micro-batches per iteration x 24 layers make about"));
  CHECK(tests::contains(scenario_error({"cluster.num_nodes=250000", "training.global_batch_size=32000000"}), "/cluster/num_nodes: 2 million GPUs"));
  CHECK(tests::contains(scenario_error({"cluster.num_nodes=null", "cluster.num_gpus=2000000", "training.global_batch_size=32000000"}),
                 "/cluster/num_gpus: 2 million GPUs"));
  CHECK(tests::contains(scenario_error({"cluster.num_nodes=125000", "training.global_batch_size=4000000"}), "/cluster/num_nodes: 1 million GPUs"));
  CHECK(scenario_error({"cluster.num_nodes=50000", "training.global_batch_size=1600000"}) == "");  // 400,000 GPUs
  CHECK(tests::contains(scenario_error({"model.preset=\"gpt3-1t\"", "cluster.num_nodes=null", "cluster.num_gpus=1", "cluster.gpus_per_node=1",
                                 "training.global_batch_size=65536", "training.micro_batch_size=64"}),
                 "/training/global_batch_size: one iteration takes at least 30.5 days"));
}
