#include "models/flop_count.h"

#include <algorithm>

#include "models/lowering.h"

namespace trainsim::models {

namespace {

// The MLP part of Megatron's bracket, in units of h^2: the routed experts (times top-k) and the
// shared experts of an MoE layer (Megatron's formula adds shared hidden size / h x the gated
// multiplier, training.py, num_floating_point_operations), or the dense MLP.
double mlp_terms(const ModelSpec& m, bool moe) {
  const double h = static_cast<double>(m.hidden_size);
  const double routed = moe ? static_cast<double>(m.moe_router_topk) : 1.0;
  const double gated = m.gated() ? 1.5 : 1.0;
  const double ffn = static_cast<double>(moe ? m.expert_ffn_hidden() : m.ffn_hidden_size);
  const double shared = static_cast<double>(moe ? m.shared_expert_ffn_hidden() : 0);
  return (ffn / h) * routed * gated + (shared / h) * gated;
}

// The bracket of Megatron's formula without the logits term, per layer, in units of h^2: of an
// MoE layer or of a dense one.
double layer_terms(const ModelSpec& m, bool moe) {
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_length);
  const double q_ratio = static_cast<double>(m.head_dim() * m.num_attention_heads) / h;
  const double groups = static_cast<double>(m.num_query_groups) / static_cast<double>(m.num_attention_heads);
  double attention = (1 + groups + s / h) * q_ratio;
  if (m.multi_latent_attention) {
    // Megatron's MLA term (training.py, num_floating_point_operations): projections with their
    // norms, and the core attention at half the s x s scores (causal), per token and FMA; in
    // units of 2 h^2 here.
    const double a = static_cast<double>(m.num_attention_heads), dn = static_cast<double>(m.qk_head_dim);
    const double dr = static_cast<double>(m.qk_pos_emb_head_dim), dv = static_cast<double>(m.v_head_dim);
    const double ql = static_cast<double>(m.q_lora_rank), kl = static_cast<double>(m.kv_lora_rank);
    const double q_term = m.q_lora_rank > 0 ? ql * (h + a * (dn + dr) + 1) : h * a * (dn + dr);
    const double per_token = q_term + kl * (h + a * (dn + dv) + 1) + h * dr + a * dv * h + s * a * (dn + dr) / 2 + s * a * dv / 2;
    attention = per_token / (2 * h * h);
  }
  return attention + mlp_terms(m, moe);
}

// The layers' mean bracket: MoE and dense layers counted apart, as Megatron's formula does when
// moe_layer_freq mixes them.
double mean_layer_terms(const ModelSpec& m) {
  const double moe = static_cast<double>(m.num_moe_layers()), layers = static_cast<double>(m.num_layers);
  return (moe * layer_terms(m, true) + (layers - moe) * layer_terms(m, false)) / layers;
}

}  // namespace

double model_flops(const ModelSpec& m, double samples, std::int64_t tp) {
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_length);
  const double L = static_cast<double>(m.num_layers);
  const double v = static_cast<double>(m.padded_vocab(tp));
  // 12 = 3 passes x 2 FLOPs/MAC x 2 (each term counts two h x h products per unit).
  // Multi-token prediction, as Megatron counts it (training.py, num_floating_point_operations):
  // per module a layer of the last layer's kind, its norms (3h) and projection (2h^2), and
  // another logits term.
  const double mtp = static_cast<double>(m.mtp_num_layers);
  const double mtp_terms = mtp * (layer_terms(m, m.is_moe_layer(m.num_layers)) + (2 * h * h + 3 * h) / (2 * h * h));
  return 12.0 * samples * s * h * h * (L * mean_layer_terms(m) + mtp_terms + (1 + mtp) * v / (2.0 * h));
}

double layer_forward_flops(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_length);
  return 4.0 * s * h * h * mean_layer_terms(m);
}

double attention_core_forward_flops(const ModelSpec& m) {
  // Scores (Q K^T) and values (P V): 2 GEMMs of 2 s^2 (a d) FLOPs each, causal mask not
  // subtracted (Megatron's convention).
  const double s = static_cast<double>(m.seq_length);
  if (m.multi_latent_attention) {
    // Megatron's MLA term counts the causal half of the scores.
    return s * s * static_cast<double>(m.num_attention_heads * (m.qk_head_dim + m.qk_pos_emb_head_dim + m.v_head_dim));
  }
  return 4.0 * s * s * static_cast<double>(m.num_attention_heads * m.head_dim());
}

FlopCount count_flops(const ModelSpec& m, const ParallelSpec& p, const TrainingSpec& t) {
  FlopCount out;
  const double samples = static_cast<double>(t.global_batch_size);
  out.model = model_flops(m, samples, p.tensor_model_parallel_size);
  double recomputed = 0;
  switch (t.recompute_granularity) {
    case RecomputeGranularity::kNone:
      break;
    case RecomputeGranularity::kSelective: {
      // The multi-token-prediction layers recompute as the decoder's do.
      const double layers = static_cast<double>(m.num_layers + m.mtp_num_layers);
      if (t.recomputes_core_attention()) recomputed += layers * attention_core_forward_flops(m);
      if (t.recomputes_mla_up_proj()) {
        // MLA's up projections (or the plain q projection), forward again.
        const double s = static_cast<double>(m.seq_length), a = static_cast<double>(m.num_attention_heads);
        const double q_in = static_cast<double>(m.q_lora_rank > 0 ? m.q_lora_rank : m.hidden_size);
        recomputed += layers * 2 * s * a *
                      (q_in * static_cast<double>(m.qk_head_dim + m.qk_pos_emb_head_dim) +
                       static_cast<double>(m.kv_lora_rank * (m.qk_head_dim + m.v_head_dim)));
      }
      // Checkpointed MLPs (dense layers) and MoE layers run their forward again; the
      // multi-token-prediction layers are of the last decoder layer's kind.
      const double h = static_cast<double>(m.hidden_size), s = static_cast<double>(m.seq_length);
      const bool mtp_moe = m.is_moe_layer(m.num_layers);
      const double moe_layers = static_cast<double>(m.num_moe_layers() + (mtp_moe ? m.mtp_num_layers : 0));
      const double dense_layers = static_cast<double>(m.num_layers - m.num_moe_layers() + (mtp_moe ? 0 : m.mtp_num_layers));
      if (t.recomputes_mlp()) recomputed += dense_layers * 4.0 * s * h * h * mlp_terms(m, false);
      if (t.recomputes_moe()) recomputed += moe_layers * 4.0 * s * h * h * mlp_terms(m, true);
      break;
    }
    case RecomputeGranularity::kFull: {
      double layers = static_cast<double>(m.num_layers);
      if (t.recompute_method == RecomputeMethod::kBlock) {
        // The first recompute_num_layers layers of every model chunk on every stage.
        if (const std::vector<std::int64_t> counts = virtual_stage_layers(m, p); !counts.empty()) {
          layers = 0;
          for (std::int64_t n : counts) layers += static_cast<double>(std::min(t.recompute_num_layers, n));
        } else {
          const std::int64_t chunks = p.pipeline_model_parallel_size * p.virtual_pipeline_model_parallel_size;
          const std::int64_t per_chunk = m.num_layers / std::max<std::int64_t>(1, chunks);
          layers = static_cast<double>(std::min(t.recompute_num_layers, per_chunk) * chunks);
        }
      }
      recomputed = layers * layer_forward_flops(m);
      if (t.recomputes_mtp_modules() && m.mtp_num_layers > 0) {
        // Each module's projection and layer run again.
        const double h = static_cast<double>(m.hidden_size), s = static_cast<double>(m.seq_length);
        recomputed += static_cast<double>(m.mtp_num_layers) *
                      (4.0 * s * h * h * layer_terms(m, m.is_moe_layer(m.num_layers)) + 2.0 * s * 2 * h * h);
      }
      break;
    }
  }
  out.hardware = out.model + samples * recomputed;
  return out;
}

}  // namespace trainsim::models
