#include "models/lowering.h"

#include <algorithm>
#include <map>
#include <string>

#include "models/graph_vocabulary.h"
#include "models/stage_builder.h"
#include "sim/check.h"

namespace trainsim::models {

std::vector<std::int64_t> virtual_stage_layers(const ModelSpec& m, const ParallelSpec& p) {
  if (!p.layout_layers.empty()) return p.layout_layers;
  if (!p.accounts_in_split()) return {};
  // Megatron-Core's get_num_layers_to_build: the embedding and the loss count as layers of the
  // even split, and the first and the last virtual stage build one transformer layer fewer.
  const std::int64_t stages = p.pipeline_model_parallel_size * p.virtual_pipeline_model_parallel_size;
  std::vector<std::int64_t> out(static_cast<std::size_t>(stages), p.split_units(m.num_layers) / stages);
  if (p.account_for_embedding_in_pipeline_split) --out.front();
  if (p.account_for_loss_in_pipeline_split) --out.back();
  for (std::int64_t& n : out) n = std::max<std::int64_t>(0, n);
  return out;
}

std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> split_layers(const ModelSpec& m, const ParallelSpec& p) {
  const std::int64_t P = p.pipeline_model_parallel_size;
  const std::int64_t V = p.virtual_pipeline_model_parallel_size;
  if (const std::vector<std::int64_t> counts = virtual_stage_layers(m, p); !counts.empty()) {
    // Virtual stage i is chunk i / P of stage i % P, in layer order.
    std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> out(static_cast<std::size_t>(P));
    std::int64_t next = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      out[i % static_cast<std::size_t>(P)].push_back({next, counts[i]});
      next += counts[i];
    }
    return out;
  }
  std::vector<std::int64_t> per_stage(static_cast<std::size_t>(P), 0);
  std::int64_t rest = m.num_layers;
  std::int64_t even_stages = P;
  if (P > 1 && p.decoder_first_pipeline_num_layers) {
    per_stage.front() = *p.decoder_first_pipeline_num_layers;
    rest -= per_stage.front();
    --even_stages;
  }
  if (P > 1 && p.decoder_last_pipeline_num_layers) {
    per_stage.back() = *p.decoder_last_pipeline_num_layers;
    rest -= per_stage.back();
    --even_stages;
  }
  for (std::int64_t s = 0; s < P; ++s) {
    const bool fixed = (s == 0 && P > 1 && p.decoder_first_pipeline_num_layers) ||
                       (s == P - 1 && P > 1 && p.decoder_last_pipeline_num_layers);
    if (!fixed) per_stage[static_cast<std::size_t>(s)] = even_stages > 0 ? rest / even_stages : 0;
  }
  // Layer ids: chunk c of stage s is the (c * P + s)-th block; each stage's layers split evenly
  // over its V chunks.
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> out(static_cast<std::size_t>(P));
  std::int64_t next = 0;
  for (std::int64_t c = 0; c < V; ++c) {
    for (std::int64_t s = 0; s < P; ++s) {
      const std::int64_t count = per_stage[static_cast<std::size_t>(s)] / V;
      out[static_cast<std::size_t>(s)].push_back({next, count});
      next += count;
    }
  }
  return out;
}

Workload describe(const ModelSpec& model, const ParallelSpec& parallel, const TrainingSpec& training,
                  std::int64_t num_gpus, const TargetGpu& gpu) {
  const std::int64_t tp = parallel.tensor_model_parallel_size;
  const std::int64_t pp = parallel.pipeline_model_parallel_size;
  const std::int64_t cp = parallel.context_parallel_size;
  const std::int64_t ep = model.is_moe() ? parallel.expert_model_parallel_size : 1;
  const std::int64_t etp = model.is_moe() ? parallel.etp() : 1;
  const std::int64_t dp = num_gpus / (tp * pp * cp);
  TRAINSIM_CHECK(dp >= 1 && dp * tp * pp * cp == num_gpus, "plan does not tile the GPUs");

  Workload w;
  w.layout = RankLayout(tp, cp, dp, pp, ep, etp);
  w.data_parallel_size = dp;
  w.expert_data_parallel_size = w.layout.edp();
  w.microbatches = training.global_batch_size / (training.micro_batch_size * dp);
  w.tokens_per_iteration = training.global_batch_size * model.seq_length;
  w.dims = layer_dims(model, parallel, training);
  w.dims.fp8_columnwise_native = gpu.fp8_columnwise_native;
  w.flops = count_flops(model, parallel, training);
  w.mtp_layers = model.mtp_num_layers;
  w.mtp_moe = model.is_moe_layer(model.num_layers);

  const auto layers = split_layers(model, parallel);
  const LayerDims& d = w.dims;
  const LayerParams lp = layer_params(d), dense_lp = layer_params(dense_layer_dims(d));
  for (std::int64_t s = 0; s < pp; ++s) {
    StageInfo info;
    info.stage = s;
    info.chunks = layers[static_cast<std::size_t>(s)];
    info.has_embedding = s == 0;
    info.has_output = s == pp - 1;
    // ZeRO-3 gather bytes as StageBuilder::unit_gather_bytes: every expert weight of a quantized
    // layer is an FP8 GEMM weight.
    const auto gathered = [&](std::int64_t n, std::int64_t fp8) {
      return param_gather_bytes(n, fp8, d.quantized(), training, d.quant_recipe);
    };
    std::int64_t moe_layers = 0, dense_layers = 0, quantized_moe = 0, quantized_dense = 0;
    for (const auto& [first, count] : info.chunks) {
      for (std::int64_t l = first; l < first + count; ++l) {
        const bool moe = model.is_moe_layer(l), quantized = training.quantized_layer(l, model.num_layers);
        (moe ? moe_layers : dense_layers) += 1;
        if (quantized) (moe ? quantized_moe : quantized_dense) += 1;
        const LayerParams& p = moe ? lp : dense_lp;
        const std::int64_t fp8 = quantized ? p.gemm_weights : 0;
        const StageInfo::GatherUnit u{p.dense(), p.expert(), gathered(p.dense(), std::max<std::int64_t>(0, fp8 - p.expert())),
                                      gathered(p.expert(), std::min(p.expert(), fp8))};
        if (u.dense_bytes + u.expert_bytes > info.largest_layer.dense_bytes + info.largest_layer.expert_bytes) {
          info.largest_layer = u;
        }
      }
    }
    if (info.has_output) {
      const std::int64_t n = output_params(model, parallel, d);
      info.output_layer = {n, 0, gathered(n, 0), 0};
    }
    // One of each distinct GEMM shape (Transformer Engine's placeholder gradients): the attention
    // projections (the same in dense and MoE layers), the dense MLP, one local expert and the
    // shared expert.
    if (moe_layers + dense_layers > 0) {
      info.params.distinct_gemm_weights =
          lp.qkv + lp.proj + lp.q_down + lp.q_up + lp.kv_down + lp.kv_up;
      if (dense_layers > 0) info.params.distinct_gemm_weights += dense_lp.fc1 + dense_lp.fc2;
      if (moe_layers > 0) {
        const std::int64_t experts = std::max<std::int64_t>(1, d.local_experts);
        info.params.distinct_gemm_weights +=
            (lp.expert_fc1 + lp.expert_fc2) / experts + lp.shared_fc1 + lp.shared_fc2;
      }
    }
    // The output layer's, tied or not: Megatron's own linear takes its placeholder from the same
    // cache when Transformer Engine is installed (tensor_parallel/layers.py, from Megatron-LM
    // e7c55de, 2025-08-01).
    if (info.has_output) info.params.distinct_gemm_weights += d.v * d.h;
    info.moe_layers = moe_layers;
    info.bf16_moe_layers = training.quantized() ? moe_layers - quantized_moe : 0;
    info.bf16_dense_layers = training.quantized() ? dense_layers - quantized_dense : 0;
    info.params.dense = moe_layers * lp.dense() + dense_layers * dense_lp.dense();
    info.params.expert = moe_layers * lp.expert();
    info.params.fp8_gemm = quantized_moe * lp.gemm_weights + quantized_dense * dense_lp.gemm_weights;
    if (info.has_embedding) info.params.dense += embedding_params(model, d);
    if (info.has_output) {
      info.params.dense += output_params(model, parallel, d);
      const StageParameters mtp = mtp_params(model, parallel, training, d);
      info.params.dense += mtp.dense;
      info.params.expert += mtp.expert;
      info.params.fp8_gemm += mtp.fp8_gemm;
    }
    info.parameters = info.params.total();
    info.static_memory = static_memory(info.params, parallel.shard_group_size(dp * cp), parallel.shard_group_size(w.expert_data_parallel_size),
                                       parallel, training, gpu);
    info.checkpoint_bytes = (2 + training.optimizer_state_bytes()) *
                            optimizer_shard_params(info.params, dp * cp, w.expert_data_parallel_size, true);
    w.stages.push_back(std::move(info));
  }
  return w;
}

Workload lower(const ModelSpec& model, const ParallelSpec& parallel, const TrainingSpec& training, std::int64_t num_gpus,
               const TargetGpu& gpu) {
  Workload w = describe(model, parallel, training, num_gpus, gpu);
  const std::int64_t tp = parallel.tensor_model_parallel_size;
  const std::int64_t pp = parallel.pipeline_model_parallel_size;
  const std::int64_t cp = parallel.context_parallel_size;
  const std::int64_t ep = model.is_moe() ? parallel.expert_model_parallel_size : 1;
  const std::int64_t etp = model.is_moe() ? parallel.etp() : 1;
  const std::int64_t dp = w.data_parallel_size;
  const LayerDims& d = w.dims;

  // The graph: one rank class per pipeline stage; one simulated representative per stage.
  const std::int64_t world = w.layout.world();
  w.graph = sim::TaskGraph(static_cast<std::uint32_t>(world), stream_names(training.cpu_offload_layers > 0), comm_slot_names(),
                           peer_slot_names());
  sim::TaskGraph& g = w.graph;
  for (std::int64_t s = 0; s < pp; ++s) g.add_class("stage " + std::to_string(s));
  std::vector<sim::RankId> reps;
  for (std::int64_t r = 0; r < world; ++r) {
    const RankCoord c = w.layout.coord(r);
    g.set_class_of(sim::RankId{static_cast<std::uint32_t>(r)}, static_cast<std::uint32_t>(c.pp));
    if (c.tp == 0 && c.cp == 0 && c.dp == 0) reps.push_back(sim::RankId{static_cast<std::uint32_t>(r)});
  }
  g.set_simulated(reps);

  // Communicators. `group_key` names the group of a rank (-1: none); communicators of one slot
  // and stage behave alike, except those `symmetry` separates.
  auto add_groups = [&](CommSlot slot, auto&& group_key, auto&& symmetry) {
    std::map<std::int64_t, std::vector<sim::RankId>> groups;
    for (std::int64_t r = 0; r < world; ++r) {
      const RankCoord c = w.layout.coord(r);
      const std::int64_t key = group_key(c);
      if (key < 0) continue;
      groups[key].push_back(sim::RankId{static_cast<std::uint32_t>(r)});
    }
    for (auto& [key, members] : groups) {
      const RankCoord first = w.layout.coord(sim::index(members.front()));
      sim::Communicator comm;
      comm.slot = slot;
      comm.symmetry_class = static_cast<std::uint32_t>(slot * pp + symmetry(first));
      comm.members = members;
      const sim::CommId id = g.add_communicator(std::move(comm));
      for (sim::RankId m : g.communicator(id).members) g.set_comm(m, slot, id);
    }
  };
  const auto stage_of = [](const RankCoord& c) { return c.pp; };
  const auto one_class = [](const RankCoord&) { return std::int64_t{0}; };
  const std::int64_t edp = w.expert_data_parallel_size;
  add_groups(kTpSlot, [&](const RankCoord& c) { return (c.pp * dp + c.dp) * cp + c.cp; }, stage_of);
  add_groups(kDpSlot, [&](const RankCoord& c) { return c.pp * tp + c.tp; }, stage_of);
  // Distributed-optimizer instances: within the dp_cp group (ranks ordered by dp, then cp),
  // instance i holds the `shard` consecutive ranks from i x shard (Megatron-Core's
  // intra_partial_data_parallel_group_with_cp); the inter-instance group joins the ranks at one
  // position in every instance (inter_partial_data_parallel_group).
  const std::int64_t instances = parallel.num_distributed_optimizer_instances;
  const std::int64_t shard = parallel.shard_group_size(dp * cp);
  if (instances > 1) {
    add_groups(kDpShardSlot, [&](const RankCoord& c) { return (c.pp * tp + c.tp) * instances + (c.dp * cp + c.cp) / shard; }, stage_of);
    add_groups(kDpReplicaSlot, [&](const RankCoord& c) { return (c.pp * tp + c.tp) * shard + (c.dp * cp + c.cp) % shard; }, stage_of);
  }
  add_groups(kCpSlot, [&](const RankCoord& c) { return (c.pp * dp + c.dp) * tp + c.tp; }, stage_of);
  // a2a+p2p: the all-to-all level, consecutive CP ranks (create_hierarchical_groups' level 0);
  // the ring's peers below sit at its stride.
  const std::int64_t cp_inner = d.cp_inner;
  if (cp_inner > 1) {
    add_groups(kCpA2aSlot, [&](const RankCoord& c) { return ((c.pp * dp + c.dp) * tp + c.tp) * cp + c.cp / cp_inner; }, stage_of);
  }
  if (model.is_moe()) {
    add_groups(kEpSlot, [&](const RankCoord& c) { return (c.pp * edp + c.edp) * etp + c.etp; }, stage_of);
    add_groups(kExpertTpSlot, [&](const RankCoord& c) { return (c.pp * edp + c.edp) * ep + c.ep; }, stage_of);
    add_groups(kExpertDpSlot, [&](const RankCoord& c) { return (c.pp * ep + c.ep) * etp + c.etp; }, stage_of);
    if (instances > 1) {
      // The experts' instances (parallel_state.py's intra/inter partial expert-data-parallel
      // groups): consecutive expert-data-parallel ranks, and one of each instance.
      const std::int64_t eshard = parallel.shard_group_size(edp);
      add_groups(kExpertDpShardSlot,
                 [&](const RankCoord& c) { return ((c.pp * ep + c.ep) * etp + c.etp) * instances + c.edp / eshard; }, stage_of);
      add_groups(kExpertDpReplicaSlot,
                 [&](const RankCoord& c) { return ((c.pp * ep + c.ep) * etp + c.etp) * eshard + c.edp % eshard; }, stage_of);
    }
  }
  if (pp > 1) {
    add_groups(kEmbeddingSlot,
               [&](const RankCoord& c) { return (c.pp == 0 || c.pp == pp - 1) ? (c.dp * cp + c.cp) * tp + c.tp : -1; },
               one_class);
  }
  // Gradient norm (Megatron's get_grad_stats_parallel_group): the model-parallel group, or every
  // rank when the optimizer state is sharded over data parallelism.
  if (parallel.shards_optimizer()) {
    // With instances, each instance holds every gradient shard once: its ranks reduce the norm.
    add_groups(kGradStatsSlot, [&](const RankCoord& c) { return (c.dp * cp + c.cp) / shard; }, one_class);
  } else {
    add_groups(kGradStatsSlot, [&](const RankCoord& c) { return c.dp * cp + c.cp; }, one_class);
  }
  add_groups(kAmaxSlot, [](const RankCoord& c) { return c.pp; }, stage_of);
  for (std::int64_t r = 0; r < world; ++r) {
    const RankCoord c = w.layout.coord(r);
    const auto rid = sim::RankId{static_cast<std::uint32_t>(r)};
    auto set = [&](PeerSlot slot, RankCoord other) {
      g.set_peer(rid, slot, sim::RankId{static_cast<std::uint32_t>(w.layout.rank(other))});
    };
    RankCoord n = c, p = c;
    n.pp = (c.pp + 1) % pp;
    p.pp = (c.pp + pp - 1) % pp;
    set(kPpNext, n);
    set(kPpPrev, p);
    n = c, p = c;
    n.cp = (c.cp + cp_inner) % cp;
    p.cp = (c.cp + cp - cp_inner) % cp;
    set(kCpNext, n);
    set(kCpPrev, p);
    n = c, p = c;
    n.tp = (c.tp + 1) % tp;
    p.tp = (c.tp + tp - 1) % tp;
    set(kTpNext, n);
    set(kTpPrev, p);
  }
  g.set_reverse_peer_slot(kPpNext, kPpPrev);
  g.set_reverse_peer_slot(kPpPrev, kPpNext);
  g.set_reverse_peer_slot(kCpNext, kCpPrev);
  g.set_reverse_peer_slot(kCpPrev, kCpNext);
  g.set_reverse_peer_slot(kTpNext, kTpPrev);
  g.set_reverse_peer_slot(kTpPrev, kTpNext);

  for (std::int64_t s = 0; s < pp; ++s) {
    const StageContext ctx{model, parallel, training, d, w.stages[static_cast<std::size_t>(s)], w.microbatches, dp, edp};
    build_stage(g, static_cast<std::uint32_t>(s), ctx);
  }
  return w;
}

}  // namespace trainsim::models

namespace trainsim::models {

std::int64_t offloaded_activation_bytes(const Workload& w, const ModelSpec& model, const TrainingSpec& training) {
  const LayerDims dense = dense_layer_dims(w.dims);
  std::int64_t bytes = 0;
  for (std::int64_t layer = 0; layer < training.cpu_offload_layers; ++layer) {
    const LayerDims& d = model.is_moe_layer(layer) ? w.dims : dense;
    // first_last_layers_bf16's layers keep 16-bit GEMM inputs.
    const bool bf16 = training.quantized() && !training.quantized_layer(layer, model.num_layers);
    bytes += layer_activation_bytes(bf16 ? unquantized(d) : d, training.recomputes_core_attention());
  }
  return bytes;
}

std::int64_t estimated_peak_bytes(const Workload& w, const ParallelSpec& parallel, const TrainingSpec& training) {
  const std::int64_t P = parallel.pipeline_model_parallel_size;
  const std::int64_t V = static_cast<std::int64_t>(w.stages.empty() ? 1 : w.stages.front().chunks.size());
  const std::int64_t m = w.microbatches;
  const LayerDims& d = w.dims;
  const bool selective = training.recomputes_core_attention();
  const bool full = training.recompute_granularity == RecomputeGranularity::kFull;
  const LayerDims dense = dense_layer_dims(d);
  const LayerDims bf16 = unquantized(d), bf16_dense = unquantized(dense);  // first_last_layers_bf16's layers
  const std::int64_t checkpoint = layer_checkpoint_bytes(d);
  const std::int64_t group = std::max<std::int64_t>(1, training.recompute_num_layers);
  // The ranks the sharded state divides over (all of data x context parallelism, or one
  // distributed-optimizer instance of them).
  const std::int64_t shard_group = parallel.shard_group_size(w.data_parallel_size * parallel.context_parallel_size);
  const std::int64_t expert_shard_group = parallel.shard_group_size(w.expert_data_parallel_size);
  std::int64_t peak = 0;
  for (const StageInfo& st : w.stages) {
    const std::int64_t s = st.stage;
    // Virtual micro-batches (model chunks of one micro-batch) alive at the stage's peak.
    std::int64_t in_flight_chunks;
    switch (training.pipeline_schedule) {
      case PipelineSchedule::kGpipe:
        in_flight_chunks = m * V;
        break;
      case PipelineSchedule::k1F1B:
        in_flight_chunks = std::min(P - s, m) * V;
        break;
      case PipelineSchedule::kInterleaved:
      default:
        in_flight_chunks = m == P ? m * V : std::min((P - s - 1) * 2 + (V - 1) * P + 1, m * V);
        break;
    }
    std::int64_t layers = 0;
    for (const auto& c : st.chunks) layers += c.second;
    // A layer's activations, averaged over the stage's MoE and dense layers.
    // first_last_layers_bf16's layers keep 16-bit GEMM inputs.
    const auto mean_layer_bytes = [&](bool sel) {
      const std::int64_t moe = st.moe_layers - st.bf16_moe_layers, plain = layers - st.moe_layers - st.bf16_dense_layers;
      return (moe * layer_activation_bytes(d, sel) + plain * layer_activation_bytes(dense, sel) +
              st.bf16_moe_layers * layer_activation_bytes(bf16, sel) + st.bf16_dense_layers * layer_activation_bytes(bf16_dense, sel)) /
             std::max<std::int64_t>(1, layers);
    };
    const std::int64_t per_layer = mean_layer_bytes(selective);
    // The stage's largest model chunk: under a custom layout or an accounted split its chunks
    // differ.
    std::int64_t largest_chunk = 1;
    for (const auto& c : st.chunks) largest_chunk = std::max(largest_chunk, c.second);
    std::int64_t transient = 0;  // recomputed group during a backward pass
    if (full && training.recompute_method == RecomputeMethod::kUniform) {
      transient = std::min(group, largest_chunk) * mean_layer_bytes(false);
    } else if (full) {
      transient = mean_layer_bytes(false);
    }
    // Activations one model chunk of `n` layers keeps for one micro-batch.
    const auto chunk_bytes = [&](std::int64_t n) -> std::int64_t {
      if (full && training.recompute_method == RecomputeMethod::kUniform) return (n + group - 1) / group * checkpoint;
      if (full) {
        const std::int64_t recomputed = std::min(training.recompute_num_layers, n);
        return recomputed * checkpoint + (n - recomputed) * mean_layer_bytes(false);
      }
      // cpu_offloading (one stage, no recomputation): Transformer Engine keeps at most
      // num_layers - offloaded layers sets of activations on the GPU.
      return std::max<std::int64_t>(n > 0 ? 1 : 0, n - training.cpu_offload_layers) * per_layer;
    };
    // The most the in-flight chunks hold, played through the schedule: the warm-up forwards, then
    // one forward and one backward at a time. Megatron's order of model chunks
    // (schedules.py, get_model_chunk_id): virtual micro-batch k runs chunk (k / P) % V forward,
    // V - 1 - (k / P) % V backward.
    // held_max: the most held after any forward; held_at_output: after a forward of the chunk
    // with the output layer (the last stage's last chunk), whose activations come on top then.
    const bool even = std::all_of(st.chunks.begin(), st.chunks.end(), [&](const auto& c) { return c.second == st.chunks.front().second; });
    std::int64_t held_max = even ? in_flight_chunks * chunk_bytes(st.chunks.front().second) : 0;
    std::int64_t held_at_output = held_max;  // even chunks: the output chunk's forward comes at the peak
    if (!even) {
      held_at_output = 0;
      const auto chunk_of = [&](std::int64_t k, bool forward) {
        const std::int64_t c = (k / P) % V;
        return static_cast<std::size_t>(forward ? c : V - 1 - c);
      };
      const std::int64_t total = m * V;
      std::int64_t held = 0, f = 0, b = 0;
      const auto forward = [&] {
        const std::size_t c = chunk_of(f++, true);
        held += chunk_bytes(st.chunks[c].second);
        held_max = std::max(held_max, held);
        if (c + 1 == st.chunks.size()) held_at_output = std::max(held_at_output, held);
      };
      while (f < std::min(in_flight_chunks - 1, total)) forward();
      // In the steady state both orders repeat every P x V virtual micro-batches, so what is held
      // does too: one period past the warm-up holds the peak (after the forwards, it only falls).
      const std::int64_t last_forward = std::min(total, f + P * V + 1);
      while (f < last_forward) {
        forward();
        held -= chunk_bytes(st.chunks[chunk_of(b++, false)].second);
      }
    }
    // ZeRO-3: while a unit's backward runs, its gathered parameters, the next unit's (prefetched)
    // and its full gradient, until the reduce-scatter ends (StageBuilder::fsdp_acquire).
    const auto fsdp_bytes = [&](const StageInfo::GatherUnit& unit, const StageInfo::GatherUnit& next) {
      if (parallel.zero_stage < 3) return std::int64_t{0};
      const std::int64_t grad = training.main_grad_bytes();
      std::int64_t bytes = 0;
      // Gathers where the parameters are sharded; the full gradient wherever it is reduced
      // (with instances, all-reduced across them even when an instance is one rank).
      const bool instances = parallel.num_distributed_optimizer_instances > 1;
      if (shard_group > 1) bytes += unit.dense_bytes + next.dense_bytes;
      if (shard_group > 1 || instances) bytes += grad * unit.dense;
      if (expert_shard_group > 1) bytes += unit.expert_bytes + next.expert_bytes;
      if (expert_shard_group > 1 || (instances && w.expert_data_parallel_size > 1)) bytes += grad * unit.expert;
      return bytes;
    };
    const std::int64_t in_flight_microbatches = (in_flight_chunks + V - 1) / V;
    std::int64_t bytes = st.static_memory.total();
    if (st.has_embedding) bytes += in_flight_microbatches * embedding_activation_bytes(d);
    // While layers run: the chunks in flight, a recomputed layer and ZeRO-3's buffers.
    std::int64_t stage_peak = bytes + held_max + transient + fsdp_bytes(st.largest_layer, st.largest_layer);
    if (st.has_output) {
      // The output chunk of the last stage holds one micro-batch at a time (its backward follows
      // its forward), except under GPipe.
      const std::int64_t output_in_flight = training.pipeline_schedule == PipelineSchedule::kGpipe ? m : 1;
      // Beside them the 16-bit logits, or their gradient (kept in them by Transformer Engine's
      // fused cross-entropy, so counted above).
      const std::int64_t logits = d.te_cross_entropy ? 0 : d.act_bytes() * d.tokens() * d.v;
      const std::int64_t output = output_in_flight * output_activation_bytes(d) + logits + fsdp_bytes(st.output_layer, st.largest_layer);
      // A recomputed layer's activations and the output layer's never coexist: the forward
      // discards each checkpointed layer's before the logits, and the backward frees the logits
      // and the final norm's before it recomputes the last layer.
      if (w.mtp_layers == 0) {
        stage_peak = std::max(stage_peak, bytes + held_at_output + output);
      } else {
        bytes += held_max + transient + fsdp_bytes(st.largest_layer, st.largest_layer) + output;
        const LayerDims& md = w.mtp_moe ? d : dense;
        const std::int64_t per_module = mtp_activation_bytes(md, d, selective, training.recomputes_mtp_modules());
        bytes += output_in_flight * w.mtp_layers * per_module;
        // A checkpointed module's layer, recomputed before its backward.
        if (training.recomputes_mtp_modules()) {
          bytes += std::max<std::int64_t>(0, layer_activation_bytes(md, false) - transient);
        }
        stage_peak = std::max(stage_peak, bytes);
      }
    }
    // The optimizer step, after the activations are gone: 16-bit main gradients cast to fp32
    // copies of the local shard (StageBuilder::finalize).
    const std::int64_t shard = optimizer_shard_params(st.params, shard_group, expert_shard_group, parallel.shards_optimizer());
    const std::int64_t optimizer_phase = st.static_memory.total() + (training.copies_grads_to_fp32() ? 4 * shard : 0);
    peak = std::max({peak, stage_peak, optimizer_phase});
  }
  return peak;
}

}  // namespace trainsim::models
