#include "models/stage_builder.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "models/gradient_buckets.h"
#include "models/graph_vocabulary.h"
#include "models/memory_model.h"
#include "models/pipeline_schedule.h"
#include "sim/check.h"

namespace trainsim::models {

using sim::Bytes;
using sim::CollectiveKind;
using sim::DataType;
using sim::Flops;
using sim::Kernel;
using sim::KernelClass;
using sim::TaskIndex;

std::int64_t embedding_params(const ModelSpec& m, const LayerDims& d) {
  return d.v * d.h + (d.rope ? 0 : m.seq_length * d.h);
}

std::int64_t output_params(const ModelSpec& m, const ParallelSpec& p, const LayerDims& d) {
  const std::int64_t norm = d.layernorm ? 2 * d.h : d.h;
  // The output layer has its own weight when untied; when tied and split over stages, the last
  // stage keeps a copy of the word embedding (Megatron's shared_embedding_or_output_weight).
  const bool own_weight = m.untie_embeddings_and_output_weights || p.pipeline_model_parallel_size > 1;
  return norm + (own_weight ? d.v * d.h : 0);
}

std::int64_t mtp_embedding_copy_params(const ModelSpec& m, const ParallelSpec& p, const LayerDims& d) {
  // Tied embeddings already put the word embedding on the last stage as the output weight.
  const bool copy = m.mtp_num_layers > 0 && m.untie_embeddings_and_output_weights && p.pipeline_model_parallel_size > 1;
  return copy ? embedding_params(m, d) : 0;
}

StageParameters mtp_params(const ModelSpec& m, const ParallelSpec& p, const TrainingSpec& t, const LayerDims& d) {
  StageParameters out;
  if (m.mtp_num_layers <= 0) return out;
  const bool moe = m.is_moe_layer(m.num_layers);
  const LayerParams lp = layer_params(moe ? d : dense_layer_dims(d));
  out.dense = m.mtp_num_layers * (lp.dense() + 3 * lp.norm + mtp_projection_params(d)) + mtp_embedding_copy_params(m, p, d);
  out.expert = m.mtp_num_layers * lp.expert();
  out.fp8_gemm = t.quantized() ? m.mtp_num_layers * (lp.gemm_weights + mtp_projection_params(d)) : 0;
  return out;
}

namespace {

// Kernel constructors. GEMM bytes: both operands once and the 16-bit output.
Kernel gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DataType in) {
  Kernel g;
  g.kernel_class = KernelClass::kGemm;
  g.dtype = in;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.flops = Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch));
  const std::int64_t operands = in == DataType::kFp4 ? quantized_bytes(m * k, QuantRecipe::kNvfp4) + quantized_bytes(k * n, QuantRecipe::kNvfp4)
                                                    : sim::size_of(in) * (m * k + k * n);
  g.bytes = Bytes(batch * (operands + 2 * m * n));
  return g;
}

Kernel memory_op(std::int64_t bytes, double flops = 0) {
  Kernel k;
  k.kernel_class = KernelClass::kMemoryBound;
  k.bytes = Bytes(bytes);
  k.flops = Flops(flops);
  return k;
}

// Transformer Engine's FP8 quantization kernels (memory-bound; reported apart).
Kernel quantize_op(std::int64_t bytes) {
  Kernel k = memory_op(bytes);
  k.quantize = true;
  return k;
}

// `window` > 0 (causal self-attention only): each query sees itself and the `window` keys before it.
Kernel flash(std::int64_t b_heads, std::int64_t q, std::int64_t kv, std::int64_t head_dim, std::int64_t bytes, bool causal,
             bool backward, DataType dt, std::int64_t window = 0) {
  Kernel k;
  k.kernel_class = KernelClass::kFlashAttention;
  k.dtype = dt;
  k.causal = causal;
  k.backward = backward;
  k.m = q;
  k.n = kv;
  k.k = head_dim;
  k.batch = b_heads;
  // Q K^T and P V: 2 x 2 q kv d FLOPs per head, half of them under a causal mask; the backward
  // recomputes the scores and forms dV, dP, dQ, dK (2.5x the forward, Dao 2023, FlashAttention-2).
  const double share = attention_score_share(q, kv, causal, window);
  if (sliding_window_applies(q, kv, causal, window)) k.window = window;
  const double fwd = 4.0 * static_cast<double>(b_heads) * static_cast<double>(q) * static_cast<double>(kv) *
                     static_cast<double>(head_dim) * share;
  k.flops = Flops(backward ? 2.5 * fwd : fwd);
  k.bytes = Bytes(bytes);
  return k;
}

// Row counts of `rows` split into `parts` nearly equal chunks.
std::vector<std::int64_t> split_rows(std::int64_t rows, std::int64_t parts) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < parts; ++i) out.push_back(rows * (i + 1) / parts - rows * i / parts);
  return out;
}

// Transformer Engine userbuffers' default for pipelined reduce-scatter overlap
// (transformer_engine/pytorch/module/base.py, initialize_ub: num_splits 4 for "pipeline";
// ring exchange uses tp_size steps).
constexpr std::int64_t kPipelineSplits = 4;

// Transformer Engine's first offload scheduler (AsyncDoubleBufferGroupOffloadHandler's
// layer_window_map): offloaded layer i synchronises at layer (L / N)(i + 1) - 1 of L, plus i + 1
// for the first L mod N of the N offloaded layers and L mod N for the others, which spreads the
// copies evenly over the layers.
std::vector<std::int64_t> offload_windows(std::int64_t layers, std::int64_t offloaded) {
  std::vector<std::int64_t> w(static_cast<std::size_t>(std::max<std::int64_t>(0, offloaded)));
  std::int64_t constant = 0;
  for (std::int64_t i = 0; i < offloaded; ++i) {
    std::int64_t v = (layers / offloaded) * (i + 1) - 1;
    if (i < layers % offloaded) {
      v += i + 1;
      constant = i + 1;
    } else {
      v += constant;
    }
    w[static_cast<std::size_t>(i)] = v;
  }
  return w;
}

class StageBuilder {
 public:
  StageBuilder(sim::TaskGraph& graph, std::uint32_t cls, const StageContext& c)
      : g_(graph),
        cls_(cls),
        m_(c.model),
        p_(c.parallel),
        t_(c.training),
        d_(c.dims),
        quantized_model_(c.dims.quantized()),
        info_(c.info),
        microbatches_(c.microbatches),
        dp_cp_(c.dp * c.dims.cp),
        shard_(c.parallel.shard_group_size(c.dp * c.dims.cp)),
        edp_(c.expert_dp),
        eshard_(c.parallel.shard_group_size(c.expert_dp)),
        dense_dims_(dense_layer_dims(c.dims)),
        lp_(layer_params(c.dims)),
        dense_lp_(layer_params(dense_dims_)),
        layer_dims_{c.dims, dense_dims_, unquantized(c.dims), unquantized(dense_dims_)},
        offload_bytes_(static_cast<std::size_t>(c.training.cpu_offload_layers), 0),
        offloaded_(static_cast<std::size_t>(c.training.cpu_offload_layers), kNoTask),
        reloaded_(static_cast<std::size_t>(c.training.cpu_offload_layers), kNoTask),
        offload_window_(offload_windows(c.model.num_layers, c.training.cpu_offload_layers)) {}

  void build();

 private:
  static constexpr TaskIndex kNoTask = 0xffffffffu;
  static constexpr TaskIndex kNothingToGather = kNoTask - 1;
  static constexpr std::int64_t kEmbeddingUnit = -1;
  // Units (layers, for parameter gathers) in forward order: the embedding, the decoder layers,
  // the final norm and output layer, the multi-token-prediction modules (after the final norm,
  // before the logits, which the output unit's gather has already brought).
  std::int64_t output_unit() const { return m_.num_layers; }

  // ---- emission helpers ----
  TaskIndex compute(const std::string& name, const Kernel& k, std::uint8_t cat, std::int64_t alloc = 0,
                    std::int64_t free = 0) {
    sim::Task task;
    task.kind = sim::TaskKind::kCompute;
    task.stream = kComputeStream;
    task.category = cat;
    if (k.kernel_class == sim::KernelClass::kGemm && k.dtype == DataType::kFp8 && d_.mxfp8()) {
      Kernel scaled = k;
      scaled.block_scaled = true;
      task.payload = g_.add_kernel(cls_, scaled);
    } else if (k.kernel_class == sim::KernelClass::kFlashAttention && (d_.attention_dropout || d_.mla)) {
      Kernel flagged = k;
      flagged.dropout = d_.attention_dropout;  // fused attention draws the dropout mask inside the kernel
      flagged.mixed_head_dims = d_.mla;        // query-key 192 and value 128: k is their mean
      task.payload = g_.add_kernel(cls_, flagged);
    } else {
      task.payload = g_.add_kernel(cls_, k);
    }
    task.name = g_.intern(name);
    label(task);
    task.alloc_bytes = alloc + pending_alloc_;
    task.free_bytes = free;
    pending_alloc_ = 0;
    const TaskIndex id = g_.add_task(cls_, task, pending_);
    pending_.clear();
    last_compute_ = id;
    has_compute_ = true;
    return id;
  }
  // A collective issued after the compute work enqueued so far (PyTorch makes the NCCL stream
  // wait for the current stream at issue time, and so for whatever the current stream has been
  // told to wait for), plus `extra` dependencies.
  TaskIndex collective(const std::string& name, CommSlot slot, Stream stream, CollectiveKind kind, std::int64_t bytes,
                       DataType dtype, std::uint8_t cat, std::vector<TaskIndex> extra = {}, std::int64_t alloc = 0) {
    return collective(name, slot, stream, sim::CommOp{kind, dtype, Bytes(bytes)}, cat, std::move(extra), alloc);
  }
  TaskIndex collective(const std::string& name, CommSlot slot, Stream stream, const sim::CommOp& op, std::uint8_t cat,
                       std::vector<TaskIndex> extra = {}, std::int64_t alloc = 0) {
    sim::Task task;
    task.kind = sim::TaskKind::kCollective;
    task.stream = stream;
    task.category = cat;
    task.slot = slot;
    task.payload = g_.add_comm_op(cls_, op);
    task.name = g_.intern(name);
    label(task);
    task.alloc_bytes = alloc;
    if (has_compute_) extra.push_back(last_compute_);
    extra.insert(extra.end(), pending_.begin(), pending_.end());
    return g_.add_task(cls_, task, extra);
  }
  // The expert-parallel exchange of routed tokens (`bytes`: each token once per chosen expert):
  // an all-to-all under the alltoall dispatcher; under flex (DeepEP) a node-aggregated multicast,
  // the routing probabilities travelling with the tokens.
  bool flex() const { return t_.moe_token_dispatcher_type == models::TokenDispatcher::kFlex; }
  TaskIndex token_exchange(const std::string& name, std::int64_t bytes) {
    sim::CommOp op{CollectiveKind::kAllToAll, d_.act, Bytes(bytes)};
    if (flex()) {
      op.multicast_fanout = static_cast<std::uint32_t>(d_.topk);
      op.multicast_targets = static_cast<std::uint32_t>(d_.experts);
      op.multicast_groups = static_cast<std::uint32_t>(m_.moe_router_num_groups);
      op.multicast_groups_chosen = static_cast<std::uint32_t>(m_.moe_router_group_topk);
    }
    return collective(name, kEpSlot, kCpEpStream, op, kEpComm);
  }
  TaskIndex p2p(const std::string& name, const std::vector<sim::Transfer>& transfers, Stream stream, std::uint8_t cat,
                std::vector<TaskIndex> extra = {}, bool after_compute = true, std::int64_t alloc = 0) {
    sim::Task task;
    task.kind = sim::TaskKind::kPointToPoint;
    task.stream = stream;
    task.category = cat;
    task.payload = g_.add_transfers(cls_, transfers);
    task.payload_count = static_cast<std::uint32_t>(transfers.size());
    task.name = g_.intern(name);
    label(task);
    task.alloc_bytes = alloc;
    if (after_compute && has_compute_) extra.push_back(last_compute_);
    if (after_compute) extra.insert(extra.end(), pending_.begin(), pending_.end());
    return g_.add_task(cls_, task, extra);
  }
  std::vector<sim::Transfer> exchange(PeerSlot next, PeerSlot prev, std::int64_t bytes) const {
    return {sim::Transfer{true, next, Bytes(bytes)}, sim::Transfer{false, prev, Bytes(bytes)}};
  }
  void label(sim::Task& task) const {
    task.microbatch = static_cast<std::int32_t>(mb_);
    task.layer = static_cast<std::int32_t>(layer_);
  }
  void wait(TaskIndex t) {
    if (t != kNoTask) pending_.push_back(t);
  }
  // The host waits for task `t` to end before it issues the next one.
  void host_waits_for(TaskIndex t) { g_.rank_class(cls_).tasks[t].host_sync = true; }
  void free_at(TaskIndex task, std::int64_t bytes) { g_.rank_class(cls_).tasks[task].free_bytes += bytes; }
  // A tensor-parallel collective on activations, blocking the compute stream unless `blocking`
  // is false (then the caller waits later).
  TaskIndex tp_collective(const std::string& name, CollectiveKind kind, std::int64_t bytes, bool blocking = true,
                          DataType dtype = DataType::kBf16, std::int64_t alloc = 0) {
    if (d_.t <= 1) return kNoTask;
    const TaskIndex c = collective(name, kTpSlot, kTpStream, kind, bytes, dtype == DataType::kBf16 ? d_.act : dtype,
                                   kTpComm, {}, alloc);
    if (blocking) wait(c);
    return c;
  }

  std::int64_t dt() const { return d_.act_bytes(); }
  std::int64_t hidden_bytes() const { return dt() * d_.tokens() * d_.h; }
  std::int64_t sharded_hidden_bytes() const { return dt() * d_.sharded_tokens() * d_.h; }
  // This rank's K and V of one micro-batch (what context parallelism exchanges).
  std::int64_t kv_bytes() const { return 2 * dt() * d_.tokens() * d_.g * d_.d; }
  // The attention output O of this rank's tokens (what the context-parallel all-to-alls send back).
  std::int64_t attention_out_bytes() const { return dt() * d_.tokens() * d_.a * d_.dv; }
  DataType gather_dtype() const { return d_.quantized() ? d_.gemm : d_.act; }
  // The low-precision format in the names of the weight casts: "fp8", or "fp4" under NVFP4.
  std::string quant_format() const { return d_.nvfp4() ? "fp4" : "fp8"; }
  // Transformer Engine's userbuffers overlap; moe_shared_expert_overlap turns it off for the
  // shared expert's linears (SharedExpertMLP.__init__ clears their ub_overlap flags).
  bool tp_overlap() const { return t_.tp_comm_overlap && d_.sp && !shared_beside_; }
  std::int64_t grad_bytes() const { return t_.main_grad_bytes(); }
  // A linear layer's weight-gradient GEMM. With gradient_accumulation_fusion it accumulates into
  // the main_grad buffer (beta 1: TE's wgrad GEMM with accumulate=True, Megatron's
  // fused_weight_gradient_mlp_cuda), reading and writing it at its width instead of writing a
  // 16-bit gradient.
  Kernel wgrad_gemm(Kernel g) const {
    if (t_.gradient_accumulation_fusion) g.bytes = g.bytes + Bytes(g.batch * g.m * g.n * (2 * grad_bytes() - 2));
    return g;
  }
  DataType grad_dtype() const { return t_.grad_reduce_in_fp32 ? DataType::kFp32 : d_.act; }

  // ---- linear layers (tensor_parallel/layers.py and Transformer Engine's modules) ----
  // `experts`: the routed tokens' cast, one kernel per local expert under SequentialMLP (each
  // expert's own Linear), one multi-tensor kernel under GroupedLinear (fused_multi_quantize).
  void fp8_cast(const std::string& name, std::int64_t elements, std::uint8_t cat, bool gathered = false, bool experts = false);
  template <typename ChunkKernel>
  TaskIndex ring_exchange_gemm(const std::string& exchange_name, const std::string& gemm_name, std::int64_t gathered,
                               std::uint8_t cat, ChunkKernel chunk_kernel);
  // `k`: the input width, h unless given (MLA's up projections read a latent).
  void column_forward(const std::string& name, std::int64_t n, std::uint8_t cat, bool fp8, std::int64_t k = 0);
  void row_forward(const std::string& name, std::int64_t k, std::uint8_t cat);
  void column_backward(const std::string& name, std::int64_t n, std::int64_t params, bool fp8, std::int64_t k = 0);
  void row_backward(const std::string& name, std::int64_t k, std::int64_t params);
  // The grouped expert GEMMs: one group per local expert, each over its share of the routed tokens.
  std::int64_t expert_groups() const { return std::max<std::int64_t>(1, d_.local_experts); }
  std::int64_t expert_rows() const { return std::max<std::int64_t>(1, d_.routed_tokens() / expert_groups()); }
  // One of the grouped linear layers' GEMMs over the local experts: one GEMM per expert (see
  // sim::Kernel::grouped), or one grouped kernel over all of them (moe_use_grouped_tensor).
  Kernel expert_gemm(std::int64_t m, std::int64_t n, std::int64_t k) const {
    Kernel g = gemm(m, n, k, expert_groups(), d_.gemm);
    g.grouped = !t_.moe_use_grouped_tensor;
    return g;
  }
  // A memory-bound kernel over all local experts' tokens: under SequentialMLP
  // (moe_grouped_gemm off) one kernel per expert, each with its own start cost.
  Kernel per_expert(Kernel k) const {
    if (!t_.moe_grouped_gemm && expert_groups() > 1) {
      k.batch = expert_groups();
      k.grouped = true;
    }
    return k;
  }
  // `wgrad` false: the data gradient only; expert_wgrad then adds the weight gradient.
  void expert_backward(const std::string& name, std::int64_t k, std::int64_t n, std::int64_t params, bool wgrad = true);
  void expert_wgrad(const std::string& name, std::int64_t k, std::int64_t n, std::int64_t params);

  // ---- model pieces ----
  void embedding_forward();
  void embedding_backward();
  void output_forward();
  void output_backward();
  // Their steps, which overlap_moe_expert_parallel_comm's combined steps take apart to pair the
  // multi-token-prediction layer with the decoder's.
  void output_forward_begin();  // the final norm
  void output_forward_end();    // the logits and the loss
  void output_logits_backward();
  void mtp_logits_backward(std::int64_t module);
  void output_backward_end();   // the final norm's backward
  void mtp_forward_begin(std::int64_t module);  // embedding lookup, norms, projection
  void mtp_forward_end(std::int64_t module);    // final norm, logits, loss
  void mtp_backward_begin(std::int64_t module);  // final norm's backward
  void mtp_backward_end(std::int64_t module);    // projection, norms, embedding lookup
  void logits_forward(const std::string& prefix);
  void logits_backward(const std::string& prefix, std::int64_t params);
  void mtp_forward(std::int64_t module);
  void mtp_backward(std::int64_t module);
  void mtp_projection(std::uint8_t cat);
  std::int64_t mtp_layer(std::int64_t module) const { return m_.num_layers + 1 + module; }
  // What a multi-token-prediction module keeps per micro-batch (allocated as its forward starts,
  // freed as its backward ends).
  std::int64_t mtp_bytes(std::int64_t module) const {
    return mtp_activation_bytes(dims_of(mtp_layer(module)), d_, t_.recomputes_core_attention(), t_.recomputes_mtp_modules());
  }
  // The vocab-parallel embedding lookup of a micro-batch's tokens (the first stage's, and each
  // multi-token-prediction module's of the tokens further ahead) and its backward.
  void vocab_lookup(const std::string& name, std::int64_t alloc);
  TaskIndex vocab_lookup_backward(const std::string& name);
  // A dense tensor-parallel MLP (fc1, activation, fc2) of per-rank hidden size `f`: the dense
  // layers' (prefix "") and the shared expert's ("shared_").
  void dense_mlp_forward(const std::string& prefix, std::int64_t f, std::uint8_t cat);
  void dense_mlp_backward(const std::string& prefix, std::int64_t f, std::int64_t fc1_params, std::int64_t fc2_params);
  // Its halves: fc1 with the activation, and their backward (the activation's, then fc1's).
  void dense_fc1_forward(const std::string& prefix, std::int64_t f, std::uint8_t cat);
  void dense_fc1_backward(const std::string& prefix, std::int64_t f, std::int64_t fc1_params);
  void layer_forward(std::int64_t layer, std::uint8_t cat, std::int64_t alloc);
  void layer_backward(std::int64_t layer, std::int64_t free);
  void attention_forward(std::uint8_t cat);
  void attention_backward();
  void attention_core_forward(std::uint8_t cat);
  void attention_core_backward();
  void cp_all_to_all(const std::string& name, std::int64_t bytes, std::uint8_t cat, CommSlot slot = kCpSlot);
  void cp_kv_all_gather(std::uint8_t cat);
  void all_gather_attention_steps(bool backward, std::uint8_t cat);
  void mlp_forward(std::uint8_t cat);
  void mlp_backward();
  void moe_forward(std::uint8_t cat);
  void moe_backward();
  void shared_expert_forward(std::uint8_t cat);
  void mla_projections_forward(std::uint8_t cat);
  void mla_up_projections(std::uint8_t cat);
  void moe_block_forward(std::uint8_t cat);
  // MoELayer's steps (router and permutation; dispatch; experts; combine; unpermutation), which
  // overlap_moe_expert_parallel_comm runs as separate nodes, and their backward passes.
  void moe_route_forward(std::uint8_t cat);
  void moe_dispatch_forward(std::uint8_t cat = kForward);
  void moe_experts_forward(std::uint8_t cat);
  void moe_combine_forward(std::uint8_t cat = kForward);
  void moe_unpermute_forward(std::uint8_t cat);
  void moe_combine_backward();
  void moe_experts_backward(bool wgrad);
  void moe_dispatch_backward();
  void moe_experts_wgrad();
  void moe_norm_recompute();
  void expert_activation(std::uint8_t cat);
  void moe_route_backward();
  // overlap_moe_expert_parallel_comm: one layer as Megatron-Core's schedule nodes
  // (fine_grained_callables.py). Compute nodes on the compute stream, the all-to-alls on their
  // own; the combine node's unpermutation and residual add follow as compute (`tail`).
  bool overlapped_nodes() const { return t_.overlap_moe_expert_parallel_comm; }
  // moe_shared_expert_overlap: the shared expert's halves emitted while the all-to-alls are in
  // flight (its own CUDA stream in Megatron-Core; here the compute stream, which the all-to-alls
  // do not block until the routed experts wait for them).
  bool shared_overlap() const { return t_.moe_shared_expert_overlap && d_.sf > 0 && !overlapped_nodes(); }
  // Emits `emit`, a piece of the shared expert's work, with Transformer Engine's userbuffers
  // overlap off for its linears.
  template <typename Emit>
  void shared_beside(Emit emit) {
    shared_beside_ = true;
    emit();
    shared_beside_ = false;
  }
  void fp8_weights(std::int64_t layer, std::uint8_t cat);
  void attn_node_forward(std::int64_t layer, std::int64_t alloc);
  void dispatch_node_forward();
  void mlp_node_forward();
  void combine_node_forward();
  void combine_node_forward_tail();
  void combine_node_backward(std::int64_t layer);
  void mlp_node_backward();
  void dispatch_node_backward();
  void mlp_node_backward_dw();
  void attn_node_backward(std::int64_t free);
  void mla_projections_backward();
  void shared_expert_backward();
  void norm(const std::string& name, std::uint8_t cat, std::int64_t alloc = 0);
  // The residual add after an attention or MLP block, with its dropout mask when dropout is on.
  void bias_dropout_add(std::uint8_t cat);
  void norm_backward(const std::string& name, std::int64_t free = 0);

  // ---- pipeline ----
  void chunk_forward(std::int64_t mb, std::int64_t chunk);
  void chunk_backward(std::int64_t mb, std::int64_t chunk);
  void forward_begin(std::int64_t mb, std::int64_t chunk);
  void forward_layer(std::int64_t index);  // layer `index` of the current chunk
  // mtp_done / mtp_apart: a combined step runs the multi-token-prediction layer as one of the
  // chunk's layers; the output's other steps stay here.
  void forward_end(bool mtp_done = false);
  void backward_begin(std::int64_t mb, std::int64_t chunk, bool mtp_apart = false);
  void backward_layer(std::int64_t index);
  void backward_end();
  std::int64_t forward_alloc(std::int64_t index) const;
  // overlap_moe_expert_parallel_comm's combined step (combined_1f1b.py, TransformerModelChunk-
  // SchedulePlan.run): the forward pass's layers paired with the backward pass's, last first.
  void forward_backward(const PipelineStep& step, bool final_backward);
  void switch_pass(int pass);
  void communicate(const PipelineStep& step);
  bool full_recompute_layer(std::int64_t index_in_chunk) const;

  // ---- data parallelism ----
  std::vector<ParamGroup> param_groups(std::int64_t chunk) const;
  std::int64_t bucket_size(std::int64_t chunk) const;
  void gradient_ready(std::int64_t params, bool expert, TaskIndex producer);
  void reduce_bucket(const GradientBucket& b, TaskIndex producer);
  bool reduces_in_hooks() const;
  void reduce_chunk(std::int64_t chunk);
  TaskIndex param_gather(const GradientBucket& b);
  std::vector<std::size_t> gather_order(std::int64_t chunk) const;
  void gather_bucket(std::int64_t chunk, std::size_t bucket);
  void gather_chunk(std::int64_t chunk);
  void distributed_optimizer_gathers(std::int64_t unit);
  std::int64_t unit_dense(std::int64_t unit) const;
  std::int64_t param_gather_bytes(std::int64_t params, std::int64_t fp8) const;
  // The communicator slot that shards the dense parameters' state: one distributed-optimizer
  // instance, or the whole data x context parallel group.
  CommSlot dense_shard_slot() const { return p_.num_distributed_optimizer_instances > 1 ? kDpShardSlot : kDpSlot; }
  CommSlot expert_shard_slot() const { return p_.num_distributed_optimizer_instances > 1 ? kExpertDpShardSlot : kExpertDpSlot; }
  // The reduction of `params` gradients (experts' or dense) over their data-parallel group: a
  // reduce-scatter (or, unsharded, an all-reduce) over the shard group, then, with
  // distributed-optimizer instances, each shard all-reduced across the instances, on the DP
  // stream. Registers the last task as a gradient sync; returns the first task and the last.
  std::pair<TaskIndex, TaskIndex> reduce_gradients(const std::string& prefix, bool expert, std::int64_t params, CollectiveKind kind,
                                                   std::vector<TaskIndex> deps);
  std::int64_t unit_gather_bytes(std::int64_t unit, bool expert) const;
  std::int64_t unit_expert(std::int64_t unit) const;
  void fsdp_acquire(std::int64_t unit, bool backward);
  void fsdp_issue(std::int64_t unit);
  void fsdp_release(std::int64_t unit);
  void fsdp_reduce(std::int64_t unit);
  void amax_reduction(std::int64_t layers, bool forward);
  void finalize();

  sim::TaskGraph& g_;
  std::uint32_t cls_;
  const ModelSpec& m_;
  const ParallelSpec& p_;
  const TrainingSpec& t_;
  // The dims of the layer being emitted: the stage's, with 16-bit GEMMs in the layers
  // first_last_layers_bf16 keeps out of FP8/FP4 (enter_layer).
  LayerDims d_;
  const bool quantized_model_;  // the stage quantizes GEMM inputs (in its quantized layers)
  const StageInfo& info_;
  std::int64_t microbatches_;
  std::int64_t dp_cp_;
  // The ranks the sharded state divides over: dp_cp_, or one distributed-optimizer instance.
  std::int64_t shard_;
  std::int64_t edp_;
  std::int64_t eshard_;  // edp_, or one distributed-optimizer instance of it
  LayerDims dense_dims_;  // a layer without experts (the only kind in a dense model)
  LayerParams lp_;        // an MoE model's MoE layer, or a dense model's layer
  LayerParams dense_lp_;  // a layer without experts
  // An MoE layer's and a dense layer's dims as quantized, then with 16-bit GEMMs.
  std::array<LayerDims, 4> layer_dims_;

  // Dims and parameters of decoder layer `layer` (MoE layers and dense ones may mix).
  const LayerDims& dims_of(std::int64_t layer) const {
    return layer_dims_[(m_.is_moe_layer(layer) ? 0u : 1u) + (quantized_layer(layer) ? 0u : 2u)];
  }
  bool quantized_layer(std::int64_t layer) const { return quantized_model_ && t_.quantized_layer(layer, m_.num_layers); }
  // A parameter-gather unit's GEMM weights are quantized: a decoder layer's as quantized_layer,
  // the embedding's, the output layer's and the MTP modules' as the stage.
  bool quantized_unit(std::int64_t unit) const {
    return unit >= 0 && unit < m_.num_layers ? quantized_layer(unit) : quantized_model_;
  }
  // Emitting decoder layer `layer`: its GEMMs quantized or 16-bit; leave_layers() when back in
  // the embedding or the output layer.
  void enter_layer(std::int64_t layer) {
    layer_ = layer;
    d_.gemm = dense_dims_.gemm = dims_of(layer).gemm;
  }
  void leave_layers() {
    layer_ = -1;
    d_.gemm = dense_dims_.gemm = layer_dims_[0].gemm;
  }
  const LayerParams& params_of(std::int64_t layer) const { return m_.is_moe_layer(layer) ? lp_ : dense_lp_; }

  // cpu_offloading: per offloaded layer of the current micro-batch, its activations' bytes, its
  // copy to host memory and (default schedule) its copy back.
  bool offloads(std::int64_t layer) const { return layer >= 0 && layer < t_.cpu_offload_layers; }
  // A copy of layer `layer`'s activations on the offload stream, issued after the compute work
  // enqueued so far (Transformer Engine makes the offload stream wait for the current stream, and
  // so for whatever it has been told to wait for), allocating `alloc` bytes as it starts.
  TaskIndex host_copy(const std::string& name, std::int64_t layer, std::int64_t bytes, std::int64_t alloc = 0) {
    Kernel k;
    k.kernel_class = KernelClass::kHostCopy;
    k.bytes = Bytes(bytes);
    sim::Task task;
    task.kind = sim::TaskKind::kCompute;
    task.stream = kOffloadStream;
    task.category = kOffload;
    task.payload = g_.add_kernel(cls_, k);
    task.name = g_.intern(name);
    label(task);
    task.layer = static_cast<std::int32_t>(layer);
    task.alloc_bytes = alloc;
    std::vector<TaskIndex> deps = pending_;
    if (has_compute_) deps.push_back(last_compute_);
    return g_.add_task(cls_, task, deps);
  }
  void offload_release(std::int64_t layer);
  void offload_commit(std::int64_t layer, std::int64_t bytes);
  void offload_reload(std::int64_t layer);
  std::vector<std::int64_t> offload_bytes_;
  std::vector<TaskIndex> offloaded_, reloaded_;
  // The first scheduler (cpu_offload_v1): per offloaded layer, the layer at whose end (forward)
  // or start (backward) it synchronises; the offloaded layers it has passed; its last copy back.
  std::vector<std::int64_t> offload_window_;
  std::size_t offload_count_ = 0;
  TaskIndex last_reload_ = kNoTask;

  std::vector<TaskIndex> pending_;  // tasks the next compute task waits for
  bool shared_beside_ = false;      // emitting the shared expert beside the token all-to-alls
  std::int64_t pending_alloc_ = 0;  // bytes the next compute task allocates
  TaskIndex last_compute_ = 0;
  bool has_compute_ = false;
  std::int64_t mb_ = -1, layer_ = -1, chunk_ = 0;
  // overlap_p2p_comm: batches the next forward / backward pass waits for.
  std::vector<TaskIndex> gate_forward_, gate_backward_;

  // Gradient buckets per chunk and the walk through them during a backward pass.
  std::vector<std::vector<ParamGroup>> groups_;
  std::vector<std::vector<GradientBucket>> buckets_;
  std::size_t cursor_ = 0;
  bool final_backward_ = false;  // the backward pass that completes this chunk's gradients
  // A combined step's two passes (0: forward, 1: backward): what each carries while the other
  // emits. active_pass_ is -1 outside combined steps.
  struct Pass {
    std::int64_t mb = -1, chunk = 0, layer = -1;
    std::size_t cursor = 0;
    bool final_backward = false;
    std::vector<TaskIndex> pending;
    std::int64_t pending_alloc = 0;
    TaskIndex last = 0;  // its last compute task
    bool has_last = false;
  };
  Pass passes_[2];
  int active_pass_ = -1;
  TaskIndex pass_entry_last_ = 0;
  // After a combined step, the forward pass's last compute task, which its activations' send
  // waits for (Megatron-Core issues post_forward on the communication stream).
  TaskIndex combined_forward_last_ = 0;
  bool combined_forward_done_ = false;
  std::vector<TaskIndex> grad_syncs_;
  std::vector<std::int64_t> last_backward_step_;
  std::set<std::int64_t> forwarded_chunks_;
  // Distributed optimizer with overlap_param_gather: per chunk, per bucket, its gather task;
  // per chunk and buffer, the next bucket (forward order) not yet waited for.
  std::vector<std::vector<TaskIndex>> bucket_gathers_;
  std::vector<std::vector<std::size_t>> forward_order_;
  std::vector<std::size_t> gather_next_;
  // align_param_gather: the schedule dispatches whole chunks' gathers; the pre-hook only waits.
  bool aligned_gather_ = false;
  // ZeRO-3: gathers in flight or held per unit, and the gathered bytes to free.
  std::map<std::int64_t, std::vector<TaskIndex>> fsdp_held_;
  std::vector<std::int64_t> backward_units_;
};

// ---------------------------------------------------------------------------------------------
// Linear layers.

// TE userbuffers' ring exchange (comm_gemm_overlap, "ring_exchange"): the t sequence chunks of
// an all-gather travel around the TP ring in t-1 point-to-point steps while the GEMM computes,
// chunk by chunk, the rows it already has. Returns the last GEMM chunk.
template <typename ChunkKernel>
TaskIndex StageBuilder::ring_exchange_gemm(const std::string& exchange_name, const std::string& gemm_name,
                                           std::int64_t gathered, std::uint8_t cat, ChunkKernel chunk_kernel) {
  std::vector<TaskIndex> steps;
  for (std::int64_t i = 0; i + 1 < d_.t; ++i) {
    steps.push_back(p2p(exchange_name, exchange(kTpNext, kTpPrev, gathered / d_.t), kTpStream, kTpComm, {}, true,
                        i == 0 ? gathered : 0));
  }
  const auto rows = split_rows(d_.tokens(), d_.t);
  TaskIndex last = kNoTask;
  for (std::int64_t i = 0; i < d_.t; ++i) {
    if (i > 0) wait(steps[static_cast<std::size_t>(i - 1)]);
    last = compute(gemm_name, chunk_kernel(rows[static_cast<std::size_t>(i)]), cat);
  }
  return last;
}

// Transformer Engine's quantization of a 16-bit tensor for a GEMM and its backward: the row-wise
// FP8 copy and, unless the tensor cores read it column-wise, the column-wise one (cast_transpose
// on Hopper; the block-scaled recipes' column-wise blocks always differ). Current scaling
// ("tensorwise") and NVFP4 (its per-tensor FP32 scale) first read the tensor for its amax
// (compute_amax), and a tensor that is then all-gathered over the tensor-parallel group has its
// amax all-reduced there first, so every rank casts with one scale (Transformer Engine docs, "FP8
// Current Scaling", Amax reduction; NVFP4Quantizer's with_amax_reduction).
void StageBuilder::fp8_cast(const std::string& name, std::int64_t elements, std::uint8_t cat, bool gathered, bool experts) {
  const std::int64_t bytes = d_.quantize_bytes(elements, dt());
  const auto op = [&](std::int64_t b) { return experts ? per_expert(quantize_op(b)) : quantize_op(b); };
  if (!amax_pass(d_.quant_recipe)) {
    compute(name, op(bytes), cat);
    return;
  }
  compute(name + "_amax", op(dt() * elements), cat);
  if (gathered && d_.sp) tp_collective(name + "_amax_all_reduce", CollectiveKind::kAllReduce, 4, true, DataType::kFp32);
  compute(name, op(bytes - dt() * elements), cat);
}

// Column-parallel linear forward (QKV, fc1, logits): Y[T, n] = X[T, h] W[h, n]. Under sequence
// parallelism the input is all-gathered first (blocking, as Megatron's and TE's Linear do), or,
// with tp_comm_overlap, gathered chunk by chunk around the ring while the GEMM computes the
// chunks it has (TE userbuffers "ring_exchange" for qkv_fprop / fc1_fprop).
void StageBuilder::column_forward(const std::string& name, std::int64_t n, std::uint8_t cat, bool fp8, std::int64_t k) {
  const std::int64_t T = d_.tokens(), K = k > 0 ? k : d_.h;
  const DataType in = fp8 ? d_.gemm : d_.act;
  const bool q = fp8 && d_.quantized();
  if (q) fp8_cast(name + "_input_cast", d_.sharded_tokens() * K, cat, true);
  if (!d_.sp) {
    compute(name, gemm(T, n, K, 1, in), cat);
    return;
  }
  const std::int64_t gathered = q ? d_.quant_bytes(T * K) : dt() * T * K;
  const DataType gdt = q ? d_.gemm : d_.act;
  if (tp_overlap()) {
    const TaskIndex last = ring_exchange_gemm(name + "_ring_exchange", name + "_chunk", gathered, cat,
                                              [&](std::int64_t rows) { return gemm(rows, n, K, 1, in); });
    free_at(last, gathered);
    return;
  }
  tp_collective(name + "_all_gather", CollectiveKind::kAllGather, gathered, true, gdt, gathered);
  const TaskIndex c = compute(name, gemm(T, n, K, 1, in), cat);
  free_at(c, gathered);
}

// Row-parallel linear forward (out_proj, fc2): Y[T, h] = X[T, k] W[k, h], then the partial sums
// reduce-scattered over the sequence (sequence parallelism) or all-reduced; with
// tp_comm_overlap the GEMM runs in 4 row chunks, each chunk's reduce-scatter overlapping the
// next chunk (TE userbuffers "pipeline" for proj_fprop / fc2_fprop).
void StageBuilder::row_forward(const std::string& name, std::int64_t k, std::uint8_t cat) {
  const std::int64_t T = d_.tokens();
  if (d_.quantized()) fp8_cast(name + "_input_cast", T * k, cat);
  if (tp_overlap()) {
    std::vector<TaskIndex> scatters;
    for (std::int64_t rows : split_rows(T, kPipelineSplits)) {
      compute(name + "_chunk", gemm(rows, d_.h, k, 1, d_.gemm), cat);
      scatters.push_back(tp_collective(name + "_reduce_scatter_chunk", CollectiveKind::kReduceScatter, dt() * rows * d_.h, false));
    }
    for (TaskIndex s : scatters) wait(s);
    return;
  }
  compute(name, gemm(T, d_.h, k, 1, d_.gemm), cat);
  tp_collective(d_.sp ? name + "_reduce_scatter" : name + "_all_reduce",
                d_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, hidden_bytes());
}

// Column-parallel backward (LinearWithGradAccumulationAndAsyncCommunication; TE's "bulk"
// overlap does the same): the sequence-sharded input is re-gathered while the data gradient
// computes; the input gradient is reduce-scattered (or all-reduced) while the weight gradient
// computes.
void StageBuilder::column_backward(const std::string& name, std::int64_t n, std::int64_t params, bool fp8, std::int64_t k) {
  const std::int64_t T = d_.tokens(), K = k > 0 ? k : d_.h;
  const bool q = fp8 && d_.quantized();
  const DataType in = q ? d_.gemm : d_.act;
  if (q) fp8_cast(name + "_grad_cast", T * n, kBackward);
  TaskIndex gather = kNoTask;
  const std::int64_t gathered = q ? d_.quant_bytes(T * K) : dt() * T * K;
  if (d_.sp) {
    gather = tp_collective(name + "_input_all_gather", CollectiveKind::kAllGather, gathered, false,
                           q ? d_.gemm : d_.act, gathered);
  }
  compute(name + "_dgrad", gemm(T, K, n, 1, in), kBackward);
  const TaskIndex reduce = tp_collective(d_.sp ? name + "_grad_reduce_scatter" : name + "_grad_all_reduce",
                                         d_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, dt() * T * K,
                                         false);
  // Without the asynchronous all-reduce the compute stream waits for it before the weight
  // gradient (Megatron-LM before --async-tensor-model-parallel-allreduce).
  const bool blocking = !d_.sp && !t_.async_tensor_model_parallel_allreduce;
  if (blocking) wait(reduce);
  wait(gather);
  const TaskIndex wgrad = compute(name + "_wgrad", wgrad_gemm(gemm(K, n, T, 1, in)), kBackward);
  if (gather != kNoTask) free_at(wgrad, gathered);
  if (!blocking) wait(reduce);
  gradient_ready(params, false, wgrad);
}

// Row-parallel backward: under sequence parallelism the output gradient is all-gathered first
// (the backward of the forward reduce-scatter), or, with tp_comm_overlap, around the ring while
// the data gradient computes chunk by chunk (TE "ring_exchange" for proj_dgrad / fc2_dgrad; the
// weight gradient reuses the gathered tensor).
void StageBuilder::row_backward(const std::string& name, std::int64_t k, std::int64_t params) {
  const std::int64_t T = d_.tokens();
  if (d_.quantized()) fp8_cast(name + "_grad_cast", d_.sharded_tokens() * d_.h, kBackward, true);
  const std::int64_t gathered = d_.gather_bytes(T * d_.h);
  if (tp_overlap()) {
    ring_exchange_gemm(name + "_grad_ring_exchange", name + "_dgrad_chunk", gathered, kBackward,
                       [&](std::int64_t rows) { return gemm(rows, k, d_.h, 1, d_.gemm); });
  } else {
    if (d_.sp) tp_collective(name + "_grad_all_gather", CollectiveKind::kAllGather, gathered, true, gather_dtype(), gathered);
    compute(name + "_dgrad", gemm(T, k, d_.h, 1, d_.gemm), kBackward);
  }
  const TaskIndex wgrad = compute(name + "_wgrad", wgrad_gemm(gemm(k, d_.h, T, 1, d_.gemm)), kBackward);
  if (d_.sp) free_at(wgrad, gathered);
  gradient_ready(params, false, wgrad);
}

// Grouped expert GEMM backward (TE GroupedLinear): per local expert, data and weight gradients
// over the tokens routed to it. Forward: Y[R/e, n] = X[R/e, k] W[k, n].
void StageBuilder::expert_backward(const std::string& name, std::int64_t k, std::int64_t n, std::int64_t params, bool wgrad) {
  if (d_.quantized()) fp8_cast(name + "_grad_cast", d_.routed_tokens() * n, kBackward, false, true);
  compute(name + "_dgrad", expert_gemm(expert_rows(), k, n), kBackward);
  if (wgrad) expert_wgrad(name, k, n, params);
}

void StageBuilder::expert_wgrad(const std::string& name, std::int64_t k, std::int64_t n, std::int64_t params) {
  gradient_ready(params, true, compute(name + "_wgrad", wgrad_gemm(expert_gemm(k, n, expert_rows())), kBackward));
}

// ---------------------------------------------------------------------------------------------
// Layers.

void StageBuilder::norm(const std::string& name, std::uint8_t cat, std::int64_t alloc) {
  // Read input, write output (and the 16-bit statistics) over the sharded tokens.
  compute(name, memory_op(2 * sharded_hidden_bytes(), 8.0 * static_cast<double>(d_.sharded_tokens() * d_.h)), cat, alloc);
}

void StageBuilder::bias_dropout_add(std::uint8_t cat) {
  compute("bias_dropout_add", memory_op(3 * sharded_hidden_bytes() + (d_.hidden_dropout ? d_.sharded_tokens() * d_.h : 0)), cat);
}

void StageBuilder::norm_backward(const std::string& name, std::int64_t free) {
  const TaskIndex n = compute(name + "_bwd", memory_op(4 * sharded_hidden_bytes()), kBackward, 0, free);
  gradient_ready(lp_.norm, false, n);
}

// Core attention forward. Flash attention; under context parallelism Transformer Engine's ring
// (AttnFuncWithCPAndKVP2P): each rank keeps two load-balanced sequence chunks (i and 2cp-1-i),
// so every step costs half a block of scores; step i computes with the K/V received in step
// i-1 while sending them on to the next rank, and each step's partial output is merged with
// the running one (flash_attn_fwd_out_correction). Under a2a+p2p the same class first trades
// Q, K and V for 1/A of the heads over A x the sequence by all-to-alls in the group of A
// (flash_attn_a2a_communicate, as cp_comm_type a2a does), runs the ring over the cp / A ranks at
// stride A with those, and sends the output back by an all-to-all; the bytes each step moves and
// merges stay those of the plain ring.
void StageBuilder::attention_core_forward(std::uint8_t cat) {
  const std::int64_t T = d_.tokens(), bh = d_.b * d_.a;
  if (!d_.flash) {
    // Unfused: Q K^T, scale + mask + softmax, dropout, P V.
    const std::int64_t scores = d_.b * d_.a * d_.s * d_.s;
    compute("attention_scores", gemm(d_.s, d_.s, d_.d, bh, d_.act), cat);
    compute("softmax", memory_op(2 * dt() * scores, 5.0 * static_cast<double>(scores)), cat);
    if (d_.attention_dropout) compute("attention_dropout", memory_op((2 * dt() + 1) * scores), cat);
    compute("attention_values", gemm(d_.s, d_.d, d_.s, bh, d_.act), cat);
    return;
  }
  const std::int64_t qkvo_bytes = dt() * T * (2 * d_.a + 2 * d_.g) * d_.d;
  if (d_.cp == 1) {
    compute("flash_attention_fwd", flash(bh, d_.s, d_.s, d_.d, qkvo_bytes, true, false, d_.act, m_.window_of(layer_)), cat);
    return;
  }
  if (d_.cp_a2a) {
    // All-to-alls: Q, K and V trade sequence shards for head groups; the attention runs over the
    // whole sequence with 1/CP of the heads (the sliding window, if any, applies as without CP);
    // the output goes back to sequence shards.
    const std::int64_t out_bytes = attention_out_bytes(), S = d_.s * d_.cp;
    cp_all_to_all("cp_qkv_all_to_all", qkvo_bytes - out_bytes, cat);
    compute("flash_attention_fwd", flash(bh / d_.cp, S, S, d_.d, qkvo_bytes, true, false, d_.act, m_.window_of(layer_)), cat);
    cp_all_to_all("cp_out_all_to_all", out_bytes, cat);
    return;
  }
  if (d_.cp_all_gather) {
    cp_kv_all_gather(cat);
    all_gather_attention_steps(false, cat);
    return;
  }
  const std::int64_t kv_bytes = this->kv_bytes();
  const std::int64_t out_bytes = 3 * dt() * T * d_.a * d_.d + 8 * bh * d_.s;
  const std::int64_t A = d_.cp_inner, ring = d_.cp / A, heads = bh / A, s = d_.s * A;
  if (A > 1) cp_all_to_all("cp_qkv_all_to_all", qkvo_bytes - attention_out_bytes(), cat, kCpA2aSlot);
  std::vector<TaskIndex> exchanges, steps;
  for (std::int64_t i = 0; i < ring; ++i) {
    if (i + 1 < ring) {
      // Issued on the stream that ran step i-2 (TE alternates two streams), after the previous
      // exchange (ring order on the CP stream); the first one after K and V are produced.
      std::vector<TaskIndex> deps;
      if (i >= 2) deps.push_back(steps[static_cast<std::size_t>(i - 2)]);
      exchanges.push_back(p2p("cp_kv_exchange", exchange(kCpNext, kCpPrev, kv_bytes), kCpEpStream, kCpComm, deps, i == 0));
    }
    if (i > 0) wait(exchanges[static_cast<std::size_t>(i - 1)]);
    // Step 0: the diagonal blocks (causal); later steps: all queries against half the keys, or
    // half the queries against all keys (same work; the former shape is used).
    const Kernel k = i == 0 ? flash(heads, s, s, d_.d, qkvo_bytes, true, false, d_.act)
                            : flash(heads, s, s / 2, d_.d, qkvo_bytes / 2, false, false, d_.act);
    steps.push_back(compute("flash_attention_fwd_step", k, cat));
    if (i > 0) compute("attention_out_correction", memory_op(out_bytes), cat);
  }
  if (A > 1) cp_all_to_all("cp_out_all_to_all", attention_out_bytes(), cat, kCpA2aSlot);
}

// Core attention backward; under context parallelism the ring carries K/V and the partial
// dK/dV (TE: step 0 sends K/V, middle steps K/V and dK/dV, the last step dK/dV only); each
// step's dK/dV is added to the received partial sums once they arrive. Under a2a+p2p the output
// gradient goes to head groups by an all-to-all before the ring, and the gradients of Q, K and V
// back to sequence shards after it.
void StageBuilder::attention_core_backward() {
  const std::int64_t T = d_.tokens(), bh = d_.b * d_.a;
  if (!d_.flash) {
    const std::int64_t scores = d_.b * d_.a * d_.s * d_.s;
    compute("attention_values_dgrad", gemm(d_.s, d_.s, d_.d, bh, d_.act), kBackward);
    compute("attention_values_wgrad", gemm(d_.s, d_.d, d_.s, bh, d_.act), kBackward);
    if (d_.attention_dropout) compute("attention_dropout_bwd", memory_op((2 * dt() + 1) * scores), kBackward);
    compute("softmax_bwd", memory_op(3 * dt() * scores, 4.0 * static_cast<double>(scores)), kBackward);
    compute("attention_scores_dgrad_q", gemm(d_.s, d_.d, d_.s, bh, d_.act), kBackward);
    compute("attention_scores_dgrad_k", gemm(d_.s, d_.d, d_.s, bh, d_.act), kBackward);
    return;
  }
  const std::int64_t io_bytes = 2 * dt() * T * (2 * d_.a + 2 * d_.g) * d_.d;
  if (d_.cp == 1) {
    compute("flash_attention_bwd", flash(bh, d_.s, d_.s, d_.d, io_bytes, true, true, d_.act, m_.window_of(layer_)), kBackward);
    return;
  }
  if (d_.cp_a2a) {
    // The output gradient to head groups (Q, K, V and the output were saved so, after the
    // forward all-to-alls); the gradients of Q, K and V back to sequence shards.
    const std::int64_t out_bytes = attention_out_bytes(), S = d_.s * d_.cp;
    cp_all_to_all("cp_dout_all_to_all", out_bytes, kBackward);
    compute("flash_attention_bwd", flash(bh / d_.cp, S, S, d_.d, io_bytes, true, true, d_.act, m_.window_of(layer_)), kBackward);
    cp_all_to_all("cp_dqkv_all_to_all", io_bytes / 2 - out_bytes, kBackward);
    return;
  }
  if (d_.cp_all_gather) {
    // K and V gathered again (the forward's are not kept); the steps' dK and dV summed into
    // whole-sequence buffers, then reduce-scattered over the CP group, the compute stream waiting.
    const std::int64_t gathered = d_.cp * kv_bytes();
    cp_kv_all_gather(kBackward);
    all_gather_attention_steps(true, kBackward);
    compute("cp_dkv_accumulate", memory_op(2 * gathered), kBackward, gathered);
    wait(collective("cp_dkv_reduce_scatter", kCpSlot, kCpEpStream, CollectiveKind::kReduceScatter, gathered, d_.act, kCpComm));
    free_at(compute("attention_dkv_update", memory_op(2 * gathered / d_.cp), kBackward), gathered);
    return;
  }
  const std::int64_t kv_bytes = this->kv_bytes();
  const std::int64_t A = d_.cp_inner, ring = d_.cp / A, heads = bh / A, s = d_.s * A;
  if (A > 1) cp_all_to_all("cp_dout_all_to_all", attention_out_bytes(), kBackward, kCpA2aSlot);
  TaskIndex previous = kNoTask;
  for (std::int64_t i = 0; i < ring; ++i) {
    const std::int64_t bytes = (i == 0 || i + 1 == ring) ? kv_bytes : 2 * kv_bytes;
    const TaskIndex exchanged = p2p("cp_kv_dkv_exchange", exchange(kCpNext, kCpPrev, bytes), kCpEpStream, kCpComm);
    wait(previous);
    const Kernel k = i == 0 ? flash(heads, s, s, d_.d, io_bytes, true, true, d_.act)
                            : flash(heads, s, s / 2, d_.d, io_bytes / 2, false, true, d_.act);
    compute("flash_attention_bwd_step", k, kBackward);
    wait(exchanged);
    compute("attention_dkv_update", memory_op(3 * kv_bytes), kBackward);
    previous = exchanged;
  }
  if (A > 1) cp_all_to_all("cp_dqkv_all_to_all", io_bytes / 2 - attention_out_bytes(), kBackward, kCpA2aSlot);
}

// One of Transformer Engine's context-parallel all-to-alls (flash_attn_a2a_communicate) over
// `bytes` of this rank's tensors: each tensor is copied into per-destination order (movedim +
// contiguous), exchanged over the context-parallel group (one all_to_all_single per tensor, here
// one collective for their sum) and copied once more to reorder its sequence chunks; the compute
// stream waits for the exchange (wait_stream on the CP stream).
void StageBuilder::cp_all_to_all(const std::string& name, std::int64_t bytes, std::uint8_t cat, CommSlot slot) {
  compute(name + "_layout", memory_op(2 * bytes), cat);
  wait(collective(name, slot, kCpEpStream, CollectiveKind::kAllToAll, bytes, d_.act, kCpComm));
  compute(name + "_reorder", memory_op(2 * bytes), cat);
}

// Transformer Engine's K/V all-gather (AttnFuncWithCPAndKVAllGather): K and V copied sequence
// first, all-gathered over the context-parallel group with the compute stream waiting ("KV
// all-gather between CP ranks is exposed"), and their 2 CP chunks put in sequence order
// (index_select); the gathered copies live until the attention steps end.
void StageBuilder::cp_kv_all_gather(std::uint8_t cat) {
  const std::int64_t gathered = d_.cp * kv_bytes();
  compute("cp_kv_layout", memory_op(2 * kv_bytes()), cat);
  wait(collective("cp_kv_all_gather", kCpSlot, kCpEpStream, CollectiveKind::kAllGather, gathered, d_.act, kCpComm, {}, gathered));
  compute("cp_kv_reorder", memory_op(2 * gathered), cat, gathered, gathered);
}

// The two attention steps of all-gathered context parallelism: each of the rank's two query
// chunks (chunks r and 2 CP - 1 - r of the 2 CP in the sequence; here r = 0, every rank doing the
// same work in total) attends to the keys up to its own end: the whole chunks before it and its
// causal diagonal. Transformer Engine runs each step as one kernel with a bottom-right causal
// mask; trainsim prices the rectangle before the diagonal as a kernel of its own.
void StageBuilder::all_gather_attention_steps(bool backward, std::uint8_t cat) {
  const std::int64_t c = d_.s / 2, bh = d_.b * d_.a, passes = backward ? 2 : 1;
  // Bytes read and written: Q and O of the chunk's queries, K and V of `keys` keys (twice over in
  // the backward, for the gradients).
  const auto io = [&](std::int64_t keys) { return passes * dt() * d_.b * (c * 2 * d_.a + keys * 2 * d_.g) * d_.d; };
  const char* name = backward ? "flash_attention_bwd_step" : "flash_attention_fwd_step";
  compute(name, flash(bh, c, c, d_.d, io(c), true, backward, d_.act), cat);
  const std::int64_t before = (2 * d_.cp - 1) * c;
  compute(name, flash(bh, c, before, d_.d, io(before), false, backward, d_.act), cat);
  const TaskIndex last = compute(name, flash(bh, c, c, d_.d, io(c), true, backward, d_.act), cat);
  free_at(last, d_.cp * kv_bytes());
}

void StageBuilder::attention_forward(std::uint8_t cat) {
  const std::int64_t T = d_.tokens();
  norm("input_norm", cat);
  if (d_.mla) {
    mla_projections_forward(cat);
  } else {
    column_forward("qkv_proj", d_.qkv_width(), cat, true);
    if (d_.qk_norm) compute("qk_layernorm", memory_op(2 * dt() * T * (d_.a + d_.g) * d_.d), cat);
    if (d_.rope) compute("rotary_embedding", memory_op(2 * dt() * T * (d_.a + d_.g) * d_.d), cat);
  }
  attention_core_forward(cat);
  row_forward("out_proj", d_.a * d_.dv, cat);
  bias_dropout_add(cat);
}

void StageBuilder::attention_backward() {
  const std::int64_t T = d_.tokens();
  compute("bias_dropout_add_bwd", memory_op(3 * sharded_hidden_bytes()), kBackward);
  // recompute_modules layernorm: latent attention's input norm is a module of its own; its
  // output, dropped after the forward pass, is recomputed as the attention's backward begins.
  if (d_.mla && t_.recomputes_layernorm()) norm("input_norm", kRecompute);
  row_backward("out_proj", d_.a * d_.dv, lp_.proj);
  if (t_.recomputes_mla_up_proj()) mla_up_projections(kRecompute);
  if (t_.recomputes_core_attention()) attention_core_forward(kRecompute);
  attention_core_backward();
  if (d_.mla) {
    mla_projections_backward();
    return;
  }
  if (d_.rope) compute("rotary_embedding_bwd", memory_op(2 * dt() * T * (d_.a + d_.g) * d_.d), kBackward);
  if (d_.qk_norm) {
    gradient_ready(lp_.qk_norm, false, compute("qk_layernorm_bwd", memory_op(4 * dt() * T * (d_.a + d_.g) * d_.d), kBackward));
  }
  column_backward("qkv_proj", d_.qkv_width(), lp_.qkv, true);
}

// Multi-head latent attention's projections (Megatron-Core MLASelfAttention with its default
// spec): the down projections are replicated linears applied to each rank's sequence shard; the
// q latent goes through its norm into a column-parallel up projection (which all-gathers the
// latent, not the hidden state, under sequence parallelism), as do the kv latent and, beside it,
// the rotary key (all-gathered from the sequence shards); rotary embedding on the rope parts.
void StageBuilder::mla_projections_forward(std::uint8_t cat) {
  const std::int64_t T = d_.tokens(), Ts = d_.sharded_tokens();
  if (d_.quantized()) fp8_cast("mla_down_proj_input_cast", Ts * d_.h, cat);
  if (d_.ql > 0) {
    compute("q_down_proj", gemm(Ts, d_.ql, d_.h, 1, d_.gemm), cat);
    compute("q_norm", memory_op(2 * dt() * Ts * d_.ql), cat);
  }
  compute("kv_down_proj", gemm(Ts, d_.kl + d_.dr, d_.h, 1, d_.gemm), cat);
  if (d_.sp) tp_collective("k_rope_all_gather", CollectiveKind::kAllGather, dt() * T * d_.dr);
  compute("kv_norm", memory_op(2 * dt() * Ts * d_.kl), cat);
  mla_up_projections(cat);
}

// The up projections and the rotary embedding: what recompute_modules mla_up_proj runs again
// before the attention backward (Megatron-Core checkpoints them and drops Q, K and V).
void StageBuilder::mla_up_projections(std::uint8_t cat) {
  const std::int64_t T = d_.tokens();
  if (d_.ql > 0) {
    column_forward("q_up_proj", d_.q_width(), cat, true, d_.ql);
  } else {
    column_forward("q_proj", d_.q_width(), cat, true);
  }
  column_forward("kv_up_proj", d_.kv_up_width(), cat, true, d_.kl);
  if (d_.rope) compute("rotary_embedding", memory_op(2 * dt() * T * (d_.a + 1) * d_.dr), cat);
}

// Reverse order: the kv path's gradients first (its ops were recorded last), then the q path's.
// The down projections' weight gradients are partial sums over the sequence shards under
// sequence parallelism (all-reduced with the norms' at the end of the step).
void StageBuilder::mla_projections_backward() {
  const std::int64_t T = d_.tokens(), Ts = d_.sharded_tokens();
  if (d_.rope) compute("rotary_embedding_bwd", memory_op(2 * dt() * T * (d_.a + 1) * d_.dr), kBackward);
  column_backward("kv_up_proj", d_.kv_up_width(), lp_.kv_up, true, d_.kl);
  compute("kv_norm_bwd", memory_op(4 * dt() * Ts * d_.kl), kBackward);
  if (d_.sp) tp_collective("k_rope_grad_reduce_scatter", CollectiveKind::kReduceScatter, dt() * T * d_.dr, false);
  compute("kv_down_proj_dgrad", gemm(Ts, d_.h, d_.kl + d_.dr, 1, d_.gemm), kBackward);
  gradient_ready(lp_.kv_down, false, compute("kv_down_proj_wgrad", wgrad_gemm(gemm(d_.h, d_.kl + d_.dr, Ts, 1, d_.gemm)), kBackward));
  if (d_.ql > 0) {
    column_backward("q_up_proj", d_.q_width(), lp_.q_up, true, d_.ql);
    compute("q_norm_bwd", memory_op(4 * dt() * Ts * d_.ql), kBackward);
    compute("q_down_proj_dgrad", gemm(Ts, d_.h, d_.ql, 1, d_.gemm), kBackward);
    gradient_ready(lp_.q_down, false, compute("q_down_proj_wgrad", wgrad_gemm(gemm(d_.h, d_.ql, Ts, 1, d_.gemm)), kBackward));
  } else {
    column_backward("q_proj", d_.q_width(), lp_.q_up, true);
  }
}

void StageBuilder::mlp_forward(std::uint8_t cat) {
  if (m_.is_moe_layer(layer_)) {
    moe_forward(cat);
    return;
  }
  norm("pre_mlp_norm", cat);
  dense_mlp_forward("", d_.f, cat);
  bias_dropout_add(cat);
}

void StageBuilder::mlp_backward() {
  if (m_.is_moe_layer(layer_)) {
    moe_backward();
    return;
  }
  compute("bias_dropout_add_bwd", memory_op(3 * sharded_hidden_bytes()), kBackward);
  if (t_.recomputes_mlp()) dense_mlp_forward("", d_.f, kRecompute);  // the checkpointed MLP, forward again
  dense_mlp_backward("", d_.f, dense_lp_.fc1, dense_lp_.fc2);
  norm_backward("pre_mlp_norm");
}

void StageBuilder::dense_mlp_forward(const std::string& prefix, std::int64_t f, std::uint8_t cat) {
  dense_fc1_forward(prefix, f, cat);
  row_forward(prefix + "fc2", f, cat);
}

void StageBuilder::dense_mlp_backward(const std::string& prefix, std::int64_t f, std::int64_t fc1_params,
                                      std::int64_t fc2_params) {
  row_backward(prefix + "fc2", f, fc2_params);
  dense_fc1_backward(prefix, f, fc1_params);
}

void StageBuilder::dense_fc1_forward(const std::string& prefix, std::int64_t f, std::uint8_t cat) {
  const std::int64_t T = d_.tokens(), fc1 = d_.gated ? 2 * f : f;
  column_forward(prefix + "fc1", fc1, cat, true);
  compute(prefix + (d_.gated ? "swiglu" : "activation"), memory_op(dt() * T * (fc1 + f)), cat);
}

void StageBuilder::dense_fc1_backward(const std::string& prefix, std::int64_t f, std::int64_t fc1_params) {
  const std::int64_t T = d_.tokens(), fc1 = d_.gated ? 2 * f : f;
  compute(prefix + (d_.gated ? "swiglu_bwd" : "activation_bwd"), memory_op(dt() * T * (2 * fc1 + f)), kBackward);
  column_backward(prefix + "fc1", fc1, fc1_params, true);
}

// Mixture of experts with Megatron's alltoall token dispatcher (transformer/moe/
// token_dispatcher.py, MoEAlltoAllTokenDispatcher): the router scores the sequence-sharded
// tokens, tokens are permuted by expert and exchanged over the expert-parallel group (tokens,
// then routing probabilities), all-gathered over the expert-tensor-parallel group, sorted by
// local expert, run through the grouped expert GEMMs, and sent back the same way. Router load
// is assumed balanced: every rank's experts receive topk x its tokens.
void StageBuilder::moe_forward(std::uint8_t cat) {
  norm("pre_mlp_norm", cat);
  moe_block_forward(cat);
  bias_dropout_add(cat);
}

// MoELayer.forward: routing, dispatch, experts, combine and the shared experts; what
// recompute_modules moe checkpoints and runs again before the layer's backward.
void StageBuilder::moe_block_forward(std::uint8_t cat) {
  moe_route_forward(cat);
  moe_dispatch_forward(cat);
  moe_experts_forward(cat);
  moe_combine_forward(cat);
  moe_unpermute_forward(cat);
  if (shared_overlap()) {
    compute("shared_expert_add", memory_op(3 * sharded_hidden_bytes()), cat);
  } else if (d_.sf > 0) {
    shared_expert_forward(cat);
  }
}

void StageBuilder::moe_route_forward(std::uint8_t cat) {
  const std::int64_t Ts = d_.moe_tokens(), k = d_.topk, E = d_.experts;
  compute("router", gemm(Ts, E, d_.h, 1, d_.act), cat);
  compute("router_softmax_topk", memory_op(Ts * E * (dt() + 4) + 12 * Ts * k), cat);
  if (!flex() && (d_.ep > 1 || d_.etp > 1)) {
    // MoEAlltoAllTokenDispatcher.preprocess (dropless): each rank's token count per expert
    // (int64) all-gathered over the expert TP x EP group (priced over the EP group, which it is
    // with expert_tensor_parallel_size 1), copied to the host, which waits for the copy before it
    // issues the all-to-all (cuda_sync_point "before_ep_alltoall"). The flex dispatchers
    // exchange their counts as their dispatch begins (moe_dispatch_forward).
    const TaskIndex counts = collective("moe_token_counts_all_gather", kEpSlot, kCpEpStream, CollectiveKind::kAllGather,
                                        8 * E * d_.ep, DataType::kFp32, kEpComm);
    host_waits_for(counts);
  }
  compute("permute", memory_op(2 * dt() * Ts * k * d_.h), cat);
}

void StageBuilder::moe_dispatch_forward(std::uint8_t cat) {
  const std::int64_t Ts = d_.moe_tokens(), R = d_.routed_tokens(), k = d_.topk;
  std::vector<TaskIndex> exchanges;
  if (d_.ep > 1 && flex()) {
    // DeepEP's dispatch (fused_a2a.py, "the CPU will wait for GPU's signal to arrive") and
    // HybridEP's without num_permuted_tokens: the ranks first exchange their token counts per
    // rank and per expert (int32), and the host waits for them before it launches the dispatch.
    const TaskIndex notify = collective("moe_dispatch_notify", kEpSlot, kCpEpStream, CollectiveKind::kAllToAll,
                                        4 * (d_.experts + d_.ep), DataType::kFp32, kEpComm);
    host_waits_for(notify);
  }
  if (d_.ep > 1) {
    exchanges.push_back(token_exchange("moe_dispatch_all_to_all", dt() * Ts * k * d_.h));
    if (!flex()) {
      exchanges.push_back(collective("moe_dispatch_probs_all_to_all", kEpSlot, kCpEpStream, CollectiveKind::kAllToAll,
                                     4 * Ts * k, DataType::kFp32, kEpComm));
    }
  }
  // SharedExpertMLP.linear_fc1_forward_and_act after the tokens' all-to-all is issued, with the
  // shared expert's sequence-parallel gather (pre_forward_comm).
  if (shared_overlap()) shared_beside([&] { dense_fc1_forward("shared_", d_.sf, cat); });
  for (TaskIndex e : exchanges) wait(e);
  if (d_.etp > 1) {
    wait(collective("moe_tokens_all_gather", kExpertTpSlot, kTpStream, CollectiveKind::kAllGather, dt() * R * d_.h, d_.act,
                    kEpComm));
  }
}

void StageBuilder::moe_experts_forward(std::uint8_t cat) {
  const std::int64_t R = d_.routed_tokens(), rows = expert_rows();
  if (d_.local_experts > 1) compute("sort_chunks_by_expert", memory_op(2 * dt() * R * d_.h), cat);
  if (d_.quantized()) fp8_cast("expert_fc1_input_cast", R * d_.h, cat, false, true);
  compute("expert_fc1", expert_gemm(rows, d_.expert_fc1_width(), d_.h), cat);
  expert_activation(cat);
  compute("expert_fc2", expert_gemm(rows, d_.h, d_.ef), cat);
  // SequentialMLP joins the experts' outputs with torch.cat (its backward splits into views).
  if (!t_.moe_grouped_gemm && d_.local_experts > 1) compute("expert_outputs_cat", memory_op(2 * dt() * R * d_.h), cat);
  if (d_.local_experts > 1) compute("unsort_chunks_by_expert", memory_op(2 * dt() * R * d_.h), cat);
  if (d_.etp > 1) {
    wait(collective("moe_tokens_reduce_scatter", kExpertTpSlot, kTpStream, CollectiveKind::kReduceScatter, dt() * R * d_.h,
                    d_.act, kEpComm));
  }
}

void StageBuilder::moe_combine_forward(std::uint8_t cat) {
  const TaskIndex exchange = d_.ep > 1 ? token_exchange("moe_combine_all_to_all", dt() * d_.moe_tokens() * d_.topk * d_.h) : kNoTask;
  // SharedExpertMLP.linear_fc2_forward after the combine's all-to-all is issued, with its
  // reduce-scatter (post_forward_comm); the flex dispatcher runs it in combine_postprocess, after
  // the combine.
  const auto fc2 = [&] { shared_beside([&] { row_forward("shared_fc2", d_.sf, cat); }); };
  if (shared_overlap() && !flex()) fc2();
  wait(exchange);
  if (shared_overlap() && flex()) fc2();
}

void StageBuilder::moe_unpermute_forward(std::uint8_t cat) {
  const std::int64_t Ts = d_.moe_tokens();
  compute("unpermute", memory_op(dt() * Ts * d_.topk * d_.h + dt() * Ts * d_.h), cat);
}

// Shared experts (Megatron-Core SharedExpertMLP, moe_shared_expert_overlap off): after the
// routed experts' output is unpermuted, the layer's input also goes through a dense
// tensor-parallel MLP whose output is added to it (MoELayer.forward).
void StageBuilder::shared_expert_forward(std::uint8_t cat) {
  dense_mlp_forward("shared_", d_.sf, cat);
  compute("shared_expert_add", memory_op(3 * sharded_hidden_bytes()), cat);
}

// Autograd reaches the shared expert first: its ops were recorded after the routed experts'.
void StageBuilder::shared_expert_backward() { dense_mlp_backward("shared_", d_.sf, lp_.shared_fc1, lp_.shared_fc2); }

void StageBuilder::moe_backward() {
  compute("bias_dropout_add_bwd", memory_op(3 * sharded_hidden_bytes()), kBackward);
  moe_norm_recompute();
  if (t_.recomputes_moe()) moe_block_forward(kRecompute);  // the checkpointed layer, forward again
  if (d_.sf > 0 && !shared_overlap()) shared_expert_backward();
  moe_combine_backward();
  moe_experts_backward(true);
  moe_dispatch_backward();
  moe_route_backward();
  norm_backward("pre_mlp_norm");
}

void StageBuilder::moe_combine_backward() {
  const std::int64_t Ts = d_.moe_tokens(), R = d_.routed_tokens(), k = d_.topk;
  compute("unpermute_bwd", memory_op(2 * dt() * Ts * k * d_.h + dt() * Ts * d_.h), kBackward);
  const TaskIndex exchange = d_.ep > 1 ? token_exchange("moe_combine_bwd_all_to_all", dt() * Ts * k * d_.h) : kNoTask;
  // moe_shared_expert_overlap: the combine output's sequence number (raised in
  // linear_fc2_forward) has autograd issue this all-to-all first, then the shared fc2's backward.
  if (shared_overlap()) shared_beside([&] { row_backward("shared_fc2", d_.sf, lp_.shared_fc2); });
  wait(exchange);
  if (d_.etp > 1) {
    wait(collective("moe_tokens_grad_all_gather", kExpertTpSlot, kTpStream, CollectiveKind::kAllGather, dt() * R * d_.h,
                    d_.act, kEpComm));
  }
}

// The experts' activation over the routed tokens and the cast of fc2's input.
void StageBuilder::expert_activation(std::uint8_t cat) {
  const std::int64_t R = d_.routed_tokens();
  compute(d_.gated ? "expert_swiglu" : "expert_activation", per_expert(memory_op(dt() * R * (d_.expert_fc1_width() + d_.ef))), cat);
  if (d_.quantized()) fp8_cast("expert_fc2_input_cast", R * d_.ef, cat, false, true);
}

void StageBuilder::moe_experts_backward(bool wgrad) {
  const std::int64_t R = d_.routed_tokens();
  if (d_.local_experts > 1) compute("unsort_chunks_bwd", memory_op(2 * dt() * R * d_.h), kBackward);
  if (t_.recomputes_moe_act() && !t_.recomputes_moe()) {
    // recompute_modules moe_act: fc2's input, dropped after the forward pass, recomputed from the
    // kept activation input before fc2's backward (TEGroupedMLP, CheckpointWithoutOutput).
    expert_activation(kRecompute);
  }
  expert_backward("expert_fc2", d_.ef, d_.h, lp_.expert_fc2, wgrad);
  compute(d_.gated ? "expert_swiglu_bwd" : "expert_activation_bwd",
          per_expert(memory_op(dt() * R * (2 * d_.expert_fc1_width() + d_.ef))), kBackward);
  expert_backward("expert_fc1", d_.h, d_.expert_fc1_width(), lp_.expert_fc1, wgrad);
  if (d_.local_experts > 1) compute("sort_chunks_bwd", memory_op(2 * dt() * R * d_.h), kBackward);
  if (d_.etp > 1) {
    wait(collective("moe_tokens_grad_reduce_scatter", kExpertTpSlot, kTpStream, CollectiveKind::kReduceScatter,
                    dt() * R * d_.h, d_.act, kEpComm));
  }
}

void StageBuilder::moe_experts_wgrad() {
  expert_wgrad("expert_fc2", d_.ef, d_.h, lp_.expert_fc2);
  expert_wgrad("expert_fc1", d_.h, d_.expert_fc1_width(), lp_.expert_fc1);
}

void StageBuilder::moe_dispatch_backward() {
  const std::int64_t Ts = d_.moe_tokens(), k = d_.topk;
  std::vector<TaskIndex> exchanges;
  if (d_.ep > 1) {
    if (!flex()) {
      exchanges.push_back(collective("moe_dispatch_probs_bwd_all_to_all", kEpSlot, kCpEpStream, CollectiveKind::kAllToAll,
                                     4 * Ts * k, DataType::kFp32, kEpComm));
    }
    exchanges.push_back(token_exchange("moe_dispatch_bwd_all_to_all", dt() * Ts * k * d_.h));
  }
  // moe_shared_expert_overlap: "probs A2A -> tokens A2A -> shared experts fc1" (token_dispatcher.py);
  // _BackwardStreamWait holds the shared fc1 backward until the routed experts' is issued.
  if (shared_overlap()) shared_beside([&] { dense_fc1_backward("shared_", d_.sf, lp_.shared_fc1); });
  for (TaskIndex e : exchanges) wait(e);
}

void StageBuilder::moe_route_backward() {
  const std::int64_t Ts = d_.moe_tokens(), k = d_.topk, E = d_.experts;
  compute("permute_bwd", memory_op(2 * dt() * Ts * k * d_.h), kBackward);
  compute("router_softmax_topk_bwd", memory_op(Ts * E * (2 * dt() + 4)), kBackward);
  compute("router_dgrad", gemm(Ts, d_.h, E, 1, d_.act), kBackward);
  const TaskIndex router = compute("router_wgrad", gemm(d_.h, E, Ts, 1, d_.act), kBackward);
  gradient_ready(lp_.router, false, router);
}

void StageBuilder::layer_forward(std::int64_t layer, std::uint8_t cat, std::int64_t alloc) {
  if (overlapped_nodes() && cat != kRecompute) {
    attn_node_forward(layer, alloc);
    dispatch_node_forward();
    mlp_node_forward();
    combine_node_forward();
    combine_node_forward_tail();
    return;
  }
  enter_layer(layer);
  if (p_.zero_stage >= 3 && cat != kRecompute) fsdp_acquire(layer, false);
  if (!bucket_gathers_.empty() && cat != kRecompute) distributed_optimizer_gathers(layer);
  if (cat != kRecompute) fp8_weights(layer, cat);
  if (cat == kForward) offload_release(layer);
  pending_alloc_ += alloc;  // the layer's saved activations, allocated as its forward starts
  attention_forward(cat);
  mlp_forward(cat);
  if (cat == kForward) offload_commit(layer, alloc);
  if (p_.zero_stage >= 3 && cat != kRecompute) fsdp_release(layer);
}

// cpu_offloading, as the forward of `layer` ends. Default schedule: an offloaded layer's copy
// starts (Transformer Engine starts each tensor's as it is saved; here the layer's as its forward
// ends); its GPU copy is freed later (offload_release). First scheduler (group commit,
// synchronize_on_group_commit_forward): layer 0's copy starts after its forward; at the window
// point of offloaded layer k the compute stream waits for k's copy, frees it, and layer k + 1's
// copy starts.
void StageBuilder::offload_commit(std::int64_t layer, std::int64_t bytes) {
  if (offloads(layer)) offload_bytes_[static_cast<std::size_t>(layer)] = bytes;
  auto copy_out = [&](std::int64_t l) {
    offloaded_[static_cast<std::size_t>(l)] = host_copy("activation_offload", l, offload_bytes_[static_cast<std::size_t>(l)]);
  };
  if (!t_.cpu_offload_v1) {
    if (offloads(layer)) copy_out(layer);
    return;
  }
  if (layer == 0 && offloads(0)) copy_out(0);
  const std::size_t k = offload_count_;
  if (k < offload_window_.size() && offload_window_[k] == layer) {
    wait(offloaded_[k]);
    pending_alloc_ -= offload_bytes_[k];
    if (offloads(static_cast<std::int64_t>(k) + 1)) copy_out(static_cast<std::int64_t>(k) + 1);
    ++offload_count_;
  }
}

// cpu_offloading, before the forward of `layer` (DefaultOffloadSynchronizer.fwd_step): the
// compute stream waits for the offload of layer `layer` - (num_layers - offloaded layers), whose
// GPU copy is then released, so that at most num_layers - offloaded layers sets of activations
// are on the GPU.
void StageBuilder::offload_release(std::int64_t layer) {
  if (t_.cpu_offload_v1) return;  // released at the window points (offload_commit)
  const std::int64_t i = layer - (m_.num_layers - t_.cpu_offload_layers);
  if (!offloads(i)) return;
  wait(offloaded_[static_cast<std::size_t>(i)]);
  pending_alloc_ -= offload_bytes_[static_cast<std::size_t>(i)];
}

// cpu_offloading, before the backward of `layer` (DefaultOffloadSynchronizer.bwd_step): the copy
// back of layer `layer` - (num_layers - 1 - offloaded layers) starts once the compute stream's
// work so far is done (the offload stream waits for it), its GPU buffers allocated; then the
// backward of `layer` waits for its own copy back.
void StageBuilder::offload_reload(std::int64_t layer) {
  if (t_.cpu_offload_v1) {
    // First scheduler (on_group_commit_backward): at the window point of the last offloaded layer
    // not yet brought back, the compute stream waits for the copies back issued so far and that
    // layer's copy back starts; the backward of layer 0 waits for all of them.
    const std::size_t k = offload_count_;
    if (k >= 1 && offload_window_[k - 1] == layer) {
      if (last_reload_ != kNoTask) wait(last_reload_);
      const std::int64_t bytes = offload_bytes_[k - 1];
      last_reload_ = host_copy("activation_reload", static_cast<std::int64_t>(k) - 1, bytes, bytes);
      if (k > 1) --offload_count_;
    }
    if (layer == 0) {
      if (last_reload_ != kNoTask) wait(last_reload_);
      offload_count_ = 0;
    }
    return;
  }
  const std::int64_t i = layer - (m_.num_layers - 1 - t_.cpu_offload_layers);
  if (offloads(i)) {
    const std::int64_t bytes = offload_bytes_[static_cast<std::size_t>(i)];
    reloaded_[static_cast<std::size_t>(i)] = host_copy("activation_reload", i, bytes, bytes);
  }
}

void StageBuilder::layer_backward(std::int64_t layer, std::int64_t free) {
  if (overlapped_nodes()) {
    combine_node_backward(layer);
    mlp_node_backward();
    dispatch_node_backward();
    mlp_node_backward_dw();
    attn_node_backward(free);
    return;
  }
  enter_layer(layer);
  offload_reload(layer);
  if (p_.zero_stage >= 3) {
    fsdp_acquire(layer, true);
    // The layer's full gradients, reduce-scattered once it is done.
    pending_alloc_ += grad_bytes() * (unit_dense(layer) + unit_expert(layer));
  }
  if (offloads(layer) && !t_.cpu_offload_v1) wait(reloaded_[static_cast<std::size_t>(layer)]);
  mlp_backward();
  attention_backward();
  norm_backward("input_norm");
  if (free != 0) free_at(last_compute_, free);  // the layer's saved activations
  if (p_.zero_stage >= 3) {
    fsdp_reduce(layer);
    fsdp_release(layer);
  }
}

// Weights cast to FP8 once per iteration and cached, or after every gather under ZeRO-3. With
// fp8_param_gather they arrive in FP8: only Hopper's transpose of the per-tensor-scaled row-wise
// copy remains (post_all_gather_processing).
void StageBuilder::fp8_weights(std::int64_t layer, std::uint8_t cat) {
  if (!d_.quantized() || (p_.zero_stage < 3 && forwarded_chunks_.contains(chunk_))) return;
  const std::int64_t weights = params_of(layer).gemm_weights;
  if (!t_.fp8_param_gather) {
    compute(quant_format() + "_weight_cast", quantize_op(d_.quantize_bytes(weights, 2)), cat);
  } else if (d_.nvfp4()) {
    compute("fp4_weight_transpose", quantize_op(2 * d_.quant_bytes(weights)), cat);
  } else if (!d_.fp8_columnwise_native && !d_.mxfp8()) {
    compute("fp8_weight_transpose", quantize_op(2 * weights), cat);
  }
}

// The attention node: the layer's parameter gathers and FP8 weights as layer_forward has them,
// the attention block, and in an MoE layer the pre-MLP norm, the shared expert (computed here,
// before the dispatch, as MoELayer's shared_experts_compute) and the router with the
// permutation. A dense layer's MLP is its mlp node.
void StageBuilder::attn_node_forward(std::int64_t layer, std::int64_t alloc) {
  enter_layer(layer);
  if (!bucket_gathers_.empty()) distributed_optimizer_gathers(layer);
  fp8_weights(layer, kForward);
  pending_alloc_ += alloc;
  attention_forward(kForward);
  if (!m_.is_moe_layer(layer_)) return;
  norm("pre_mlp_norm", kForward);
  if (d_.sf > 0) dense_mlp_forward("shared_", d_.sf, kForward);
  moe_route_forward(kForward);
}

void StageBuilder::dispatch_node_forward() {
  if (m_.is_moe_layer(layer_)) moe_dispatch_forward();
}

void StageBuilder::mlp_node_forward() {
  if (m_.is_moe_layer(layer_)) {
    moe_experts_forward(kForward);
  } else {
    mlp_forward(kForward);
  }
}

void StageBuilder::combine_node_forward() {
  if (m_.is_moe_layer(layer_)) moe_combine_forward();
}

void StageBuilder::combine_node_forward_tail() {
  if (!m_.is_moe_layer(layer_)) return;
  moe_unpermute_forward(kForward);
  if (d_.sf > 0) compute("shared_expert_add", memory_op(3 * sharded_hidden_bytes()), kForward);
  bias_dropout_add(kForward);
}

void StageBuilder::combine_node_backward(std::int64_t layer) {
  enter_layer(layer);
  if (!m_.is_moe_layer(layer_)) return;
  compute("bias_dropout_add_bwd", memory_op(3 * sharded_hidden_bytes()), kBackward);
  moe_norm_recompute();
  moe_combine_backward();
}

// recompute_modules layernorm: an MoE layer's pre-MLP norm output (the router's and the shared
// expert's input), dropped after the forward pass, is recomputed as the layer's backward begins
// (TransformerLayer: discard_output_and_register_recompute on the MLP output); the "moe"
// checkpoint keeps it instead.
void StageBuilder::moe_norm_recompute() {
  if (t_.recomputes_layernorm() && !t_.recomputes_moe()) norm("pre_mlp_norm", kRecompute);
}

void StageBuilder::mlp_node_backward() {
  if (m_.is_moe_layer(layer_)) {
    moe_experts_backward(!t_.delay_wgrad_compute);
  } else {
    mlp_backward();
  }
}

void StageBuilder::dispatch_node_backward() {
  if (m_.is_moe_layer(layer_)) moe_dispatch_backward();
}

void StageBuilder::mlp_node_backward_dw() {
  if (m_.is_moe_layer(layer_) && t_.delay_wgrad_compute) moe_experts_wgrad();
}

void StageBuilder::attn_node_backward(std::int64_t free) {
  if (m_.is_moe_layer(layer_)) {
    moe_route_backward();
    if (d_.sf > 0) shared_expert_backward();
    norm_backward("pre_mlp_norm");
  }
  attention_backward();
  norm_backward("input_norm");
  if (free != 0) free_at(last_compute_, free);
}

void StageBuilder::embedding_forward() {
  leave_layers();
  if (p_.zero_stage >= 3) fsdp_acquire(kEmbeddingUnit, false);
  if (!bucket_gathers_.empty()) distributed_optimizer_gathers(kEmbeddingUnit);
  vocab_lookup("embedding", embedding_activation_bytes(d_));
  if (d_.hidden_dropout) compute("embedding_dropout", memory_op(2 * sharded_hidden_bytes() + d_.sharded_tokens() * d_.h), kForward);
  if (p_.zero_stage >= 3) fsdp_release(kEmbeddingUnit);
}

void StageBuilder::embedding_backward() {
  leave_layers();
  if (p_.zero_stage >= 3) {
    fsdp_acquire(kEmbeddingUnit, true);
    pending_alloc_ += grad_bytes() * unit_dense(kEmbeddingUnit);
  }
  const TaskIndex bwd = vocab_lookup_backward("embedding");
  free_at(bwd, embedding_activation_bytes(d_));
  gradient_ready(embedding_params(m_, d_), false, bwd);
  if (p_.zero_stage >= 3) {
    fsdp_reduce(kEmbeddingUnit);
    fsdp_release(kEmbeddingUnit);
  }
}

void StageBuilder::vocab_lookup(const std::string& name, std::int64_t alloc) {
  const std::int64_t T = d_.tokens();
  std::int64_t bytes = 2 * dt() * T * d_.h;  // gather rows, write output
  if (!d_.rope) bytes += 3 * dt() * T * d_.h;  // learned position embedding: read both, write sum
  compute(name, memory_op(bytes), kForward, alloc);
  // Vocab-parallel lookup: partial rows summed over the tensor-parallel group (reduce-scattered
  // onto the sequence shards under sequence parallelism).
  tp_collective(name + (d_.sp ? "_reduce_scatter" : "_all_reduce"), d_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                hidden_bytes());
}

TaskIndex StageBuilder::vocab_lookup_backward(const std::string& name) {
  if (d_.sp) tp_collective(name + "_grad_all_gather", CollectiveKind::kAllGather, hidden_bytes());
  // Scatter-add of the token gradients into the fp32 embedding gradient.
  return compute(name + "_bwd", memory_op(d_.tokens() * d_.h * (dt() + 8)), kBackward);
}

void StageBuilder::output_forward() {
  output_forward_begin();
  // Multi-token prediction runs on the decoder's normalised output before the logits
  // (GPTModel._postprocess), each module on the previous one's output.
  for (std::int64_t k = 0; k < m_.mtp_num_layers; ++k) mtp_forward(k);
  output_forward_end();
}

void StageBuilder::output_forward_begin() {
  leave_layers();
  if (p_.zero_stage >= 3) fsdp_acquire(output_unit(), false);
  if (!bucket_gathers_.empty()) distributed_optimizer_gathers(output_unit());
  compute("final_norm", memory_op(2 * sharded_hidden_bytes()), kForward, output_activation_bytes(d_));
}

void StageBuilder::output_forward_end() {
  leave_layers();
  logits_forward("");
  if (p_.zero_stage >= 3) fsdp_release(output_unit());
}

// The output layer's logits and the loss. The output layer runs outside Transformer Engine's
// FP8 region (Megatron wraps only the decoder block in fp8_autocast), so the logits GEMM stays
// 16-bit.
void StageBuilder::logits_forward(const std::string& prefix) {
  const std::int64_t T = d_.tokens(), logits = T * d_.v;
  if (d_.te_cross_entropy) {
    // The logits stay, as the gradient (output_activation_bytes): two passes over them, the
    // second writing the gradient, and each row's max, sum and target logit all-gathered.
    column_forward(prefix + "logits", d_.v, kForward, false);
    compute(prefix + "cross_entropy_online_softmax", memory_op(dt() * logits), kForward);
    tp_collective(prefix + "cross_entropy_stats_all_gather", CollectiveKind::kAllGather, 12 * T * d_.t, true, DataType::kFp32);
    compute(prefix + "cross_entropy_loss_grad", memory_op(2 * dt() * logits), kForward);
    return;
  }
  pending_alloc_ += dt() * logits;  // the 16-bit logits
  column_forward(prefix + "logits", d_.v, kForward, false);
  // Vocab-parallel cross-entropy (tensor_parallel/cross_entropy.py): logits cast to fp32, max,
  // exp and sum passes over the shard with three small all-reduces over the TP group (max,
  // target logit, sum of exponentials); exp(logits) in fp32 is kept for the backward.
  compute(prefix + "cross_entropy_max", memory_op(logits * (dt() + 4)), kForward, 0, dt() * logits);
  tp_collective(prefix + "cross_entropy_max_all_reduce", CollectiveKind::kAllReduce, 4 * T, true, DataType::kFp32);
  compute(prefix + "cross_entropy_exp", memory_op(logits * 8), kForward);
  tp_collective(prefix + "cross_entropy_target_all_reduce", CollectiveKind::kAllReduce, 4 * T, true, DataType::kFp32);
  tp_collective(prefix + "cross_entropy_sum_all_reduce", CollectiveKind::kAllReduce, 4 * T, true, DataType::kFp32);
  compute(prefix + "cross_entropy_loss", memory_op(logits * 4), kForward);
}

void StageBuilder::logits_backward(const std::string& prefix, std::int64_t params) {
  const std::int64_t logits = d_.tokens() * d_.v;
  if (d_.te_cross_entropy) {
    // The kept gradient scaled in place by the loss's gradient.
    compute(prefix + "cross_entropy_bwd", memory_op(2 * dt() * logits), kBackward);
    column_backward(prefix + "logits", d_.v, params, false);
    return;
  }
  // Softmax minus one-hot, in place in the fp32 buffer, cast to the 16-bit logits gradient.
  compute(prefix + "cross_entropy_bwd", memory_op(logits * (4 + dt())), kBackward, dt() * logits);
  column_backward(prefix + "logits", d_.v, params, false);
  free_at(last_compute_, dt() * logits);
}

// One multi-token-prediction module (MultiTokenPredictionLayer): the embedding of the tokens k + 1
// further ahead (the last stage's own lookup, vocab-parallel as on the first stage), both inputs
// normalised (enorm, hnorm) and concatenated, the column-parallel projection 2h -> h whose output
// is all-gathered over the TP group and re-split over the sequence, one transformer layer, the
// module's final norm, then the shared output layer's logits and loss.
void StageBuilder::mtp_forward(std::int64_t module) {
  mtp_forward_begin(module);
  layer_forward(mtp_layer(module), kForward, 0);
  mtp_forward_end(module);
}

void StageBuilder::mtp_forward_begin(std::int64_t module) {
  const std::int64_t layer = mtp_layer(module);
  enter_layer(layer);
  if (!bucket_gathers_.empty()) distributed_optimizer_gathers(layer);
  vocab_lookup("mtp_embedding", mtp_bytes(module));
  mtp_projection(kForward);
}

void StageBuilder::mtp_forward_end(std::int64_t module) {
  layer_ = mtp_layer(module);
  norm("mtp_final_norm", kForward);
  logits_forward("mtp_");
}

// _concat_embeddings: both inputs normalised (enorm, hnorm) and concatenated, the projection
// 2h -> h inside the module's FP8 context (as the decoder's linear layers), its h / t output shard
// all-gathered over the TP group (then re-split over the sequence: no communication).
void StageBuilder::mtp_projection(std::uint8_t cat) {
  norm("mtp_enorm", cat);
  norm("mtp_hnorm", cat);
  compute("mtp_concat", memory_op(4 * sharded_hidden_bytes()), cat);
  column_forward("mtp_eh_proj", d_.h / d_.t, cat, true, 2 * d_.h);
  tp_collective("mtp_eh_proj_output_all_gather", CollectiveKind::kAllGather, hidden_bytes());
}

void StageBuilder::mtp_backward(std::int64_t module) {
  const std::int64_t layer = mtp_layer(module);
  mtp_backward_begin(module);
  if (t_.recomputes_mtp_modules()) {
    // Megatron checkpoints the projection and the layer (uniform method): both run again.
    mtp_projection(kRecompute);
    layer_forward(layer, kRecompute, layer_activation_bytes(dims_of(layer), false));
    layer_backward(layer, layer_activation_bytes(dims_of(layer), false));
  } else {
    layer_backward(layer, 0);
  }
  mtp_backward_end(module);
}

void StageBuilder::mtp_backward_begin(std::int64_t module) {
  layer_ = mtp_layer(module);
  norm_backward("mtp_final_norm");
}

void StageBuilder::mtp_backward_end(std::int64_t module) {
  layer_ = mtp_layer(module);
  // The backward of the forward's re-split over the sequence (scatter_to_sequence_parallel_region).
  if (d_.sp) tp_collective("mtp_eh_proj_output_grad_all_gather", CollectiveKind::kAllGather, hidden_bytes());
  column_backward("mtp_eh_proj", d_.h / d_.t, mtp_projection_params(d_), true, 2 * d_.h);
  norm_backward("mtp_hnorm");
  norm_backward("mtp_enorm");
  const TaskIndex bwd = vocab_lookup_backward("mtp_embedding");
  free_at(bwd, mtp_bytes(module));
  // The last module's lookup (module 0 comes last) completes the embedding copy's gradient.
  if (module == 0) gradient_ready(mtp_embedding_copy_params(m_, p_, d_), false, bwd);
}

void StageBuilder::output_backward() {
  leave_layers();
  if (p_.zero_stage >= 3) {
    fsdp_acquire(output_unit(), true);
    pending_alloc_ += grad_bytes() * unit_dense(output_unit());
  }
  // Megatron's order (process_mtp_loss): the main loss's backward reaches each module's loss
  // through MTPLossAutoScaler, so the main logits come first, then the modules' logits (the last
  // completes the output weight's gradient), then the modules themselves, last one first, whose
  // input gradient joins the main one before the final norm.
  output_logits_backward();
  for (std::int64_t k = m_.mtp_num_layers - 1; k >= 0; --k) mtp_logits_backward(k);
  for (std::int64_t k = m_.mtp_num_layers - 1; k >= 0; --k) mtp_backward(k);
  output_backward_end();
}

void StageBuilder::output_logits_backward() {
  leave_layers();
  logits_backward("", m_.mtp_num_layers > 0 ? 0 : output_params(m_, p_, d_) - lp_.norm);
}

void StageBuilder::mtp_logits_backward(std::int64_t module) {
  layer_ = mtp_layer(module);
  logits_backward("mtp_", module == 0 ? output_params(m_, p_, d_) - lp_.norm : 0);
}

void StageBuilder::output_backward_end() {
  leave_layers();
  norm_backward("final_norm", output_activation_bytes(d_));
  if (p_.zero_stage >= 3) {
    fsdp_reduce(output_unit());
    fsdp_release(output_unit());
  }
}

// ---------------------------------------------------------------------------------------------
// Pipeline.

bool StageBuilder::full_recompute_layer(std::int64_t index_in_chunk) const {
  if (t_.recompute_granularity != RecomputeGranularity::kFull) return false;
  if (t_.recompute_method == RecomputeMethod::kBlock) return index_in_chunk < t_.recompute_num_layers;
  return true;
}

void StageBuilder::chunk_forward(std::int64_t mb, std::int64_t chunk) {
  forward_begin(mb, chunk);
  const std::int64_t count = info_.chunks[static_cast<std::size_t>(chunk)].second;
  for (std::int64_t i = 0; i < count; ++i) forward_layer(i);
  forward_end();
}

void StageBuilder::forward_begin(std::int64_t mb, std::int64_t chunk) {
  mb_ = mb;
  chunk_ = chunk;
  for (TaskIndex t : gate_forward_) wait(t);
  gate_forward_.clear();
  if (chunk == 0 && info_.has_embedding) embedding_forward();
}

std::int64_t StageBuilder::forward_alloc(std::int64_t index) const {
  const std::int64_t first = info_.chunks[static_cast<std::size_t>(chunk_)].first;
  if (full_recompute_layer(index)) {
    // Uniform: one checkpoint per group of recompute_num_layers layers; block: per layer.
    const std::int64_t group = std::max<std::int64_t>(1, t_.recompute_num_layers);
    const bool group_start = t_.recompute_method == RecomputeMethod::kBlock || index % group == 0;
    return group_start ? layer_checkpoint_bytes(d_) : 0;
  }
  return layer_activation_bytes(dims_of(first + index), t_.recomputes_core_attention());
}

void StageBuilder::forward_layer(std::int64_t index) {
  layer_forward(info_.chunks[static_cast<std::size_t>(chunk_)].first + index, kForward, forward_alloc(index));
}

void StageBuilder::forward_end(bool mtp_done) {
  const std::int64_t count = info_.chunks[static_cast<std::size_t>(chunk_)].second;
  const bool last_chunk = chunk_ == static_cast<std::int64_t>(info_.chunks.size()) - 1;
  if (last_chunk && info_.has_output) {
    if (mtp_done) {
      output_forward_end();
    } else {
      output_forward();
    }
  }
  // The multi-token-prediction layers' FP8 scaling state is reduced with the chunk's.
  const std::int64_t mtp = last_chunk && info_.has_output ? m_.mtp_num_layers : 0;
  amax_reduction(count + mtp, true);
  forwarded_chunks_.insert(chunk_);
}

void StageBuilder::chunk_backward(std::int64_t mb, std::int64_t chunk) {
  backward_begin(mb, chunk);
  const std::int64_t count = info_.chunks[static_cast<std::size_t>(chunk)].second;
  for (std::int64_t i = count - 1; i >= 0; --i) backward_layer(i);
  backward_end();
}

void StageBuilder::backward_begin(std::int64_t mb, std::int64_t chunk, bool mtp_apart) {
  mb_ = mb;
  chunk_ = chunk;
  cursor_ = 0;
  for (TaskIndex t : gate_backward_) wait(t);
  gate_backward_.clear();
  const auto [first, count] = info_.chunks[static_cast<std::size_t>(chunk)];
  const bool last_chunk = chunk == static_cast<std::int64_t>(info_.chunks.size()) - 1;
  if (p_.zero_stage >= 3) {
    // Order in which this backward pass first uses each unit's parameters (recomputation runs a
    // group's forwards, first layer first, before the group's backwards).
    backward_units_.clear();
    if (last_chunk && info_.has_output) backward_units_.push_back(output_unit());
    const std::int64_t group = std::max<std::int64_t>(1, t_.recompute_num_layers);
    std::int64_t i = count - 1;
    while (i >= 0) {
      std::int64_t lo = i;
      if (full_recompute_layer(i) && t_.recompute_method == RecomputeMethod::kUniform) lo = (i / group) * group;
      for (std::int64_t j = lo; j <= i; ++j) backward_units_.push_back(first + j);
      i = lo - 1;
    }
    if (chunk == 0 && info_.has_embedding) backward_units_.push_back(kEmbeddingUnit);
  }
  if (last_chunk && info_.has_output) {
    if (mtp_apart) {
      output_logits_backward();
    } else {
      output_backward();
    }
  }
}

void StageBuilder::backward_layer(std::int64_t i) {
  const auto [first, count] = info_.chunks[static_cast<std::size_t>(chunk_)];
  const std::int64_t group = std::max<std::int64_t>(1, t_.recompute_num_layers);
  std::int64_t free = layer_activation_bytes(dims_of(first + i), t_.recomputes_core_attention());
  if (full_recompute_layer(i)) {
    const bool block = t_.recompute_method == RecomputeMethod::kBlock;
    const std::int64_t group_start = block ? i : (i / group) * group;
    if (block || i == std::min(count - 1, group_start + group - 1)) {
      // Recompute the forward of the whole group from its checkpoint before its backward.
      const std::int64_t group_end = block ? i : std::min(count - 1, group_start + group - 1);
      for (std::int64_t j = group_start; j <= group_end; ++j) {
        if (p_.zero_stage >= 3) {
          layer_ = first + j;
          fsdp_acquire(first + j, true);
        }
        layer_forward(first + j, kRecompute, layer_activation_bytes(dims_of(first + j), false));
      }
    }
    free = layer_activation_bytes(dims_of(first + i), false) + (i == group_start ? layer_checkpoint_bytes(d_) : 0);
  }
  layer_backward(first + i, free);
}

void StageBuilder::backward_end() {
  const std::int64_t count = info_.chunks[static_cast<std::size_t>(chunk_)].second;
  const bool last_chunk = chunk_ == static_cast<std::int64_t>(info_.chunks.size()) - 1;
  if (chunk_ == 0 && info_.has_embedding) embedding_backward();
  TRAINSIM_CHECK(cursor_ == groups_[static_cast<std::size_t>(chunk_)].size(), "gradient groups out of step with the buckets");
  amax_reduction(count + (last_chunk && info_.has_output ? m_.mtp_num_layers : 0), false);
}

// Makes pass 0 (forward) or 1 (backward) of a combined step the one emitting: the other keeps
// its micro-batch, chunk, gradient cursor and the waits and allocation its next compute task
// carries.
void StageBuilder::switch_pass(int pass) {
  if (active_pass_ == pass) return;
  if (active_pass_ >= 0) {
    Pass& out = passes_[active_pass_];
    out.mb = mb_;
    out.chunk = chunk_;
    out.layer = layer_;
    out.cursor = cursor_;
    out.final_backward = final_backward_;
    out.pending = std::move(pending_);
    out.pending_alloc = pending_alloc_;
    if (has_compute_ && last_compute_ != pass_entry_last_) {
      out.last = last_compute_;
      out.has_last = true;
    }
  }
  Pass& in = passes_[pass];
  mb_ = in.mb;
  chunk_ = in.chunk;
  layer_ = in.layer;
  cursor_ = in.cursor;
  final_backward_ = in.final_backward;
  pending_ = std::move(in.pending);
  in.pending.clear();
  pending_alloc_ = in.pending_alloc;
  pass_entry_last_ = last_compute_;
  active_pass_ = pass;
}

void StageBuilder::forward_backward(const PipelineStep& step, bool final_backward) {
  // The waits pending before the step (the receive a passed gate or batch left) go with the
  // forward pass, which computes first.
  passes_[0] = Pass{};
  passes_[1] = Pass{};
  passes_[1].final_backward = final_backward;
  passes_[0].pending = std::move(pending_);
  pending_.clear();
  passes_[0].pending_alloc = pending_alloc_;
  pending_alloc_ = 0;
  active_pass_ = -1;
  // The layers each pass runs: the chunk's decoder layers and, on the output chunk, the
  // multi-token-prediction layer after them (forward) or first (backward), as Megatron-Core's
  // schedule plan lists it (its post-process, the logits and loss, beside it).
  const std::int64_t last_chunk = static_cast<std::int64_t>(info_.chunks.size()) - 1;
  const bool f_mtp = step.chunk == last_chunk && info_.has_output && m_.mtp_num_layers == 1;
  const bool b_mtp = step.backward_chunk == last_chunk && info_.has_output && m_.mtp_num_layers == 1;
  const auto [f_first, f_count] = info_.chunks[static_cast<std::size_t>(step.chunk)];
  const auto [b_first, b_count] = info_.chunks[static_cast<std::size_t>(step.backward_chunk)];
  const std::int64_t f_entries = f_count + (f_mtp ? 1 : 0), b_entries = b_count + (b_mtp ? 1 : 0);
  const std::int64_t mtp = mtp_layer(0);
  auto f_layer = [&, f_first = f_first, f_count = f_count](std::int64_t e) { return e < f_count ? f_first + e : mtp; };
  auto b_layer = [&, b_first = b_first, b_count = b_count](std::int64_t e) {
    return b_mtp && e == 0 ? mtp : b_first + b_count - 1 - (e - (b_mtp ? 1 : 0));
  };
  auto free_of = [&](std::int64_t layer) {
    return layer == mtp ? 0 : layer_activation_bytes(dims_of(layer), t_.recomputes_core_attention());
  };
  switch_pass(0);
  forward_begin(step.microbatch, step.chunk);
  switch_pass(1);
  backward_begin(step.backward_microbatch, step.backward_chunk, b_mtp);
  // TransformerLayerSchedulePlan.run: per pair, in issue order
  //   comm: combine_bwd | dispatch_fwd, dispatch_bwd | combine_fwd
  //   comp: attn_fwd    | mlp_bwd, mlp_bwd_dw, mlp_fwd | attn_bwd
  const std::int64_t pairs = std::min(f_entries, b_entries);
  for (std::int64_t i = 0; i < pairs; ++i) {
    const std::int64_t f = f_layer(i), b = b_layer(i);
    switch_pass(1);
    if (b == mtp) {
      mtp_logits_backward(0);
      mtp_backward_begin(0);
    }
    combine_node_backward(b);
    switch_pass(0);
    if (f == mtp) {
      output_forward_begin();
      mtp_forward_begin(0);
    }
    attn_node_forward(f, f == mtp ? 0 : forward_alloc(i));
    switch_pass(1);
    mlp_node_backward();
    switch_pass(0);
    dispatch_node_forward();
    switch_pass(1);
    dispatch_node_backward();
    mlp_node_backward_dw();
    switch_pass(0);
    mlp_node_forward();
    combine_node_forward();
    switch_pass(1);
    attn_node_backward(free_of(b));
    if (b == mtp) {
      mtp_backward_end(0);
      output_backward_end();
    }
    switch_pass(0);
    combine_node_forward_tail();
    if (f == mtp) mtp_forward_end(0);
  }
  // Unpaired layers run alone: the backward pass's, then the forward pass's.
  switch_pass(1);
  for (std::int64_t e = pairs; e < b_entries; ++e) {
    if (b_layer(e) == mtp) {
      mtp_logits_backward(0);
      mtp_backward(0);
      output_backward_end();
    } else {
      backward_layer(b_layer(e) - b_first);
    }
  }
  switch_pass(0);
  for (std::int64_t e = pairs; e < f_entries; ++e) {
    if (f_layer(e) == mtp) {
      output_forward_begin();
      mtp_forward(0);
    } else {
      forward_layer(e);
    }
  }
  forward_end(f_mtp);
  switch_pass(1);
  backward_end();
  switch_pass(0);
  combined_forward_last_ = passes_[0].has_last ? passes_[0].last : last_compute_;
  combined_forward_done_ = true;
  // Back to a single pass: the next compute task waits for what either pass left pending.
  std::vector<TaskIndex> left = std::move(pending_);
  left.insert(left.end(), passes_[1].pending.begin(), passes_[1].pending.end());
  pending_ = std::move(left);
  pending_alloc_ += passes_[1].pending_alloc;
  final_backward_ = false;
  active_pass_ = -1;
}

void StageBuilder::communicate(const PipelineStep& step) {
  // Activations and gradients sent between stages: the micro-batch's hidden states, sharded over
  // the context-parallel group and, under sequence parallelism, over the tensor-parallel group.
  // With scatter/gather each tensor-parallel rank sends 1/TP of the replicated tensor
  // (split_tensor_into_1d_equal_chunks) and the receiver all-gathers it (gather_split_1d_tensor).
  const bool scatter_gather = t_.scatter_gather_tensors_in_pipeline && d_.t > 1 && !d_.sp;
  const Bytes bytes(scatter_gather ? sharded_hidden_bytes() / d_.t : sharded_hidden_bytes());
  std::vector<sim::Transfer> transfers;
  std::string name;
  for (const PipelineP2P& op : step.transfers) {
    transfers.push_back(sim::Transfer{op.is_send, static_cast<std::uint16_t>(op.to_next() ? kPpNext : kPpPrev), bytes});
    if (!name.empty()) name += "+";
    name += std::string(op.is_send ? "send_" : "recv_") + (op.forward ? "forward" : "backward");
  }
  layer_ = -1;
  // After a combined step the activations' send waits for the forward pass only.
  const bool forward_only = std::all_of(step.transfers.begin(), step.transfers.end(), [](const PipelineP2P& op) { return op.forward; });
  const TaskIndex issued_after = last_compute_;
  if (combined_forward_done_ && forward_only) last_compute_ = combined_forward_last_;
  const TaskIndex batch = p2p(name, transfers, kPpStream, kPpComm);
  last_compute_ = issued_after;
  switch (step.wait) {
    case PipelineStep::Wait::kNow:
      wait(batch);  // Megatron waits for the batch's requests before continuing
      // ... on the host too: torch.cuda.synchronize() after batch_isend_irecv (Megatron-LM
      // p2p_communication.py, "to protect against race condition"; batch_p2p_sync in Megatron Core).
      host_waits_for(batch);
      if (scatter_gather) {
        // After torch.cuda.synchronize(), each received slice is all-gathered on the compute
        // stream's critical path (scenario validation keeps scatter/gather to this blocking case).
        for (const PipelineP2P& op : step.transfers) {
          if (op.is_send) continue;
          wait(collective(std::string(op.forward ? "recv_forward" : "recv_backward") + "_all_gather", kTpSlot, kTpStream,
                          CollectiveKind::kAllGather, sharded_hidden_bytes(), d_.act, kPpComm));
        }
      }
      break;
    case PipelineStep::Wait::kBeforeNextForward:
      gate_forward_.push_back(batch);
      break;
    case PipelineStep::Wait::kBeforeNextBackward:
      gate_backward_.push_back(batch);
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Data parallelism.

// Parameter groups of one chunk in the order the backward pass produces their gradients; the
// backward emission calls gradient_ready() in exactly this order.
std::vector<ParamGroup> StageBuilder::param_groups(std::int64_t chunk) const {
  const auto [first, count] = info_.chunks[static_cast<std::size_t>(chunk)];
  std::vector<ParamGroup> out;
  out.reserve(static_cast<std::size_t>(12 * count + 3));  // at most 11 groups a layer
  auto add = [&](std::int64_t params, bool expert, std::int64_t unit, bool gemm = false) {
    if (params > 0) out.push_back(ParamGroup{params, expert, unit, gemm && quantized_unit(unit) ? params : 0});
  };
  auto add_layer = [&](std::int64_t l) {
    if (m_.is_moe_layer(l) && overlapped_nodes()) {
      // The schedule nodes' order: the experts (mlp node), then the attention node's router and
      // shared expert.
      add(lp_.expert_fc2, true, l, true);
      add(lp_.expert_fc1, true, l, true);
      add(lp_.router, false, l);
      add(lp_.shared_fc2, false, l, true);
      add(lp_.shared_fc1, false, l, true);
    } else if (m_.is_moe_layer(l) && shared_overlap()) {
      // moe_shared_expert_overlap: the shared fc2 beside the combine's backward, fc1 beside the
      // dispatch's, before the router.
      add(lp_.shared_fc2, false, l, true);
      add(lp_.expert_fc2, true, l, true);
      add(lp_.expert_fc1, true, l, true);
      add(lp_.shared_fc1, false, l, true);
      add(lp_.router, false, l);
    } else if (m_.is_moe_layer(l)) {
      add(lp_.shared_fc2, false, l, true);
      add(lp_.shared_fc1, false, l, true);
      add(lp_.expert_fc2, true, l, true);
      add(lp_.expert_fc1, true, l, true);
      add(lp_.router, false, l);
    } else {
      add(dense_lp_.fc2, false, l, true);
      add(dense_lp_.fc1, false, l, true);
    }
    add(lp_.norm, false, l);
    add(lp_.proj, false, l, true);
    add(lp_.qk_norm, false, l);
    add(lp_.qkv, false, l, true);  // 0 under MLA, whose projections follow
    add(lp_.kv_up, false, l, true);
    add(lp_.kv_down, false, l, true);
    add(lp_.q_up, false, l, true);
    add(lp_.q_down, false, l, true);
    add(lp_.norm, false, l);
  };
  if (chunk == static_cast<std::int64_t>(info_.chunks.size()) - 1 && info_.has_output) {
    // output_backward's order: the logits (the output weight, complete after the modules'
    // logits), the multi-token-prediction modules (last first), the final norm.
    add(output_params(m_, p_, d_) - lp_.norm, false, output_unit());
    for (std::int64_t k = m_.mtp_num_layers - 1; k >= 0; --k) {
      add(lp_.norm, false, mtp_layer(k));  // final norm
      add_layer(mtp_layer(k));
      add(mtp_projection_params(d_), false, mtp_layer(k), true);  // eh_proj
      add(lp_.norm, false, mtp_layer(k));                 // hnorm
      add(lp_.norm, false, mtp_layer(k));                 // enorm
    }
    add(mtp_embedding_copy_params(m_, p_, d_), false, mtp_layer(0));
    add(lp_.norm, false, output_unit());
  }
  for (std::int64_t l = first + count - 1; l >= first; --l) add_layer(l);
  if (chunk == 0 && info_.has_embedding) add(embedding_params(m_, d_), false, kEmbeddingUnit);
  return out;
}

std::int64_t StageBuilder::bucket_size(std::int64_t chunk) const {
  // Megatron-Core default: max(40M, 1M x data-parallel size with CP) parameters
  // (training.py, resolve_ddp_bucket_size); no bucketing without overlap_grad_reduce, on
  // pipeline stages after the first, or for model chunks after the first (training.py,
  // per_chunk_bucket_sizes). ZeRO-2 reduces every micro-batch and always buckets.
  const std::int64_t size = t_.ddp_bucket_size > 0 ? t_.ddp_bucket_size : std::max<std::int64_t>(40'000'000, 1'000'000 * dp_cp_);
  if (p_.zero_stage == 2) return size;
  if (!t_.overlap_grad_reduce || info_.stage > 0 || chunk > 0 || t_.overlap_param_gather_with_optimizer_step) return 0;
  return size;
}

void StageBuilder::gradient_ready(std::int64_t params, bool expert, TaskIndex producer) {
  if (params <= 0) return;
  const auto& groups = groups_[static_cast<std::size_t>(chunk_)];
  TRAINSIM_CHECK(cursor_ < groups.size() && groups[cursor_].params == params && groups[cursor_].expert == expert,
                 "gradient groups out of step with the buckets");
  if (p_.zero_stage < 3) {
    const bool now = p_.zero_stage == 2 || (final_backward_ && reduces_in_hooks());
    if (now) {
      for (const GradientBucket& b : buckets_[static_cast<std::size_t>(chunk_)]) {
        if (b.closing_group == cursor_) reduce_bucket(b, producer);
      }
    }
  }
  ++cursor_;
}

// Whether buckets are reduced from DDP's backward hooks as they fill during a chunk's last
// backward pass. With align_grad_reduce (schedules.py), only the first stage of the
// non-interleaved schedule does so; other stages, and every stage of the interleaved schedule,
// reduce a chunk's buckets together through grad_sync_func (reduce_chunk).
bool StageBuilder::reduces_in_hooks() const {
  if (!t_.overlap_grad_reduce) return false;
  if (!t_.align_grad_reduce) return true;
  return info_.chunks.size() == 1 && info_.stage == 0;
}

void StageBuilder::reduce_chunk(std::int64_t chunk) {
  const auto saved_mb = mb_, saved_layer = layer_;
  for (const GradientBucket& b : buckets_[static_cast<std::size_t>(chunk)]) reduce_bucket(b, kNoTask);
  mb_ = saved_mb;
  layer_ = saved_layer;
}

void StageBuilder::reduce_bucket(const GradientBucket& b, TaskIndex producer) {
  const std::int64_t group = b.expert ? edp_ : dp_cp_;
  if (group <= 1) return;
  const bool scatter = p_.shards_optimizer();
  const CollectiveKind kind = scatter ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
  const auto saved_mb = mb_, saved_layer = layer_;
  mb_ = p_.zero_stage == 2 ? mb_ : -1;
  layer_ = -1;
  std::vector<TaskIndex> deps;
  if (producer != kNoTask) deps.push_back(producer);
  reduce_gradients(b.expert ? "expert_" : "", b.expert, b.params, kind, deps);
  mb_ = saved_mb;
  layer_ = saved_layer;
}

std::pair<TaskIndex, TaskIndex> StageBuilder::reduce_gradients(const std::string& prefix, bool expert, std::int64_t params,
                                                              CollectiveKind kind, std::vector<TaskIndex> deps) {
  const std::int64_t shard = expert ? eshard_ : shard_;
  TaskIndex first = kNoTask, last = kNoTask;
  if (shard > 1) {
    const std::string name = prefix + (kind == CollectiveKind::kReduceScatter ? "grad_reduce_scatter" : "grad_all_reduce");
    first = last = collective(name, expert ? expert_shard_slot() : dense_shard_slot(), kDpStream, kind, grad_bytes() * params,
                              grad_dtype(), kDpComm, deps);
    deps = {last};
  }
  if (p_.num_distributed_optimizer_instances > 1) {
    // Each shard all-reduced across the instances, after the reduce-scatter within one
    // (param_and_grad_buffer.py's start_grad_sync).
    last = collective(prefix + "grad_shard_all_reduce", expert ? kExpertDpReplicaSlot : kDpReplicaSlot, kDpStream,
                      CollectiveKind::kAllReduce, grad_bytes() * ((params + shard - 1) / shard), grad_dtype(), kDpComm, deps);
    if (first == kNoTask) first = last;
  }
  if (last != kNoTask) grad_syncs_.push_back(last);
  return {first, last};
}

// The all-gather of bucket `b`'s parameters over its data-parallel group (expert buckets over the
// expert-data-parallel one); kNothingToGather when that group is one rank.
TaskIndex StageBuilder::param_gather(const GradientBucket& b) {
  if ((b.expert ? eshard_ : shard_) <= 1) return kNothingToGather;
  return collective(b.expert ? "expert_param_all_gather" : "param_all_gather", b.expert ? expert_shard_slot() : dense_shard_slot(), kDpStream,
                    CollectiveKind::kAllGather, param_gather_bytes(b.params, b.fp8_params), d_.act, kDpComm);
}

// The distributed optimizer's gather of bucket `bucket` of `chunk` (param_gather), once.
void StageBuilder::gather_bucket(std::int64_t chunk, std::size_t bucket) {
  TaskIndex& task = bucket_gathers_[static_cast<std::size_t>(chunk)][bucket];
  if (task == kNoTask) task = param_gather(buckets_[static_cast<std::size_t>(chunk)][bucket]);
}

// DistributedDataParallel.start_param_sync's order for a chunk's buckets: bucket order (the
// order the backward pass fills them, so the first bucket the forward pass needs comes last),
// dense buckets before expert ones.
std::vector<std::size_t> StageBuilder::gather_order(std::int64_t chunk) const {
  const auto& buckets = buckets_[static_cast<std::size_t>(chunk)];
  std::vector<std::size_t> order;
  for (int expert = 0; expert < 2; ++expert) {
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      if (buckets[b].expert == (expert == 1)) order.push_back(b);
    }
  }
  return order;
}

// align_param_gather: start_param_sync, the gathers of every bucket of a chunk dispatched at once.
void StageBuilder::gather_chunk(std::int64_t chunk) {
  for (std::size_t b : gather_order(chunk)) gather_bucket(chunk, b);
}

// overlap_param_gather: Megatron's forward pre-hook (distributed_data_parallel.py) waits for the
// bucket holding a module's parameters, dispatching its gather if needed, then, unless the
// schedule dispatches the gathers (align_param_gather), dispatches the next bucket's (buckets
// gathered in reverse order of the backward pass, per buffer).
void StageBuilder::distributed_optimizer_gathers(std::int64_t unit) {
  if (forwarded_chunks_.contains(chunk_)) return;  // only the first forward pass of a chunk
  const auto c = static_cast<std::size_t>(chunk_);
  const auto& order = forward_order_[c];
  const auto& buckets = buckets_[c];
  for (int expert = 0; expert < 2; ++expert) {
    std::size_t& next = gather_next_[c * 2 + static_cast<std::size_t>(expert)];
    auto find = [&](std::size_t from) {
      while (from < order.size() && buckets[order[from]].expert != (expert == 1)) ++from;
      return from;
    };
    next = find(next);
    while (next < order.size() && buckets[order[next]].first_unit <= unit) {
      gather_bucket(chunk_, order[next]);
      const TaskIndex t = bucket_gathers_[c][order[next]];
      if (t != kNothingToGather) wait(t);
      const std::size_t after = find(next + 1);
      if (aligned_gather_ || (c == 0 && t_.overlap_param_gather_with_optimizer_step)) {
        // skip_next_bucket_dispatch
      } else if (after < order.size()) {
        gather_bucket(chunk_, order[after]);
      } else if (c + 1 < bucket_gathers_.size()) {
        // The chunk's last bucket: the hook dispatches the next bucket in access order, the
        // first of the next model chunk (whose forward pass comes after this one's).
        const auto& next_order = forward_order_[c + 1];
        const auto& next_buckets = buckets_[c + 1];
        for (std::size_t i = 0; i < next_order.size(); ++i) {
          if (next_buckets[next_order[i]].expert == (expert == 1)) {
            gather_bucket(chunk_ + 1, next_order[i]);
            break;
          }
        }
      }
      next = after;
    }
  }
}

std::int64_t StageBuilder::unit_dense(std::int64_t unit) const {
  if (unit == kEmbeddingUnit) return embedding_params(m_, d_);
  if (unit == output_unit()) return output_params(m_, p_, d_);
  return params_of(unit).dense();
}

std::int64_t StageBuilder::unit_expert(std::int64_t unit) const {
  return (unit == kEmbeddingUnit || unit == output_unit()) ? 0 : params_of(unit).expert();
}

// Bytes a data-parallel gather moves for `params` parameters, `fp8` of them FP8 GEMM weights: 16
// bits each, but fp8_param_gather's FP8 weights (gathered_quantized_param_bytes).
std::int64_t StageBuilder::param_gather_bytes(std::int64_t params, std::int64_t fp8) const {
  return models::param_gather_bytes(params, fp8, quantized_model_, t_, d_.quant_recipe);
}

// ZeRO-3: the bytes of a unit's dense (or expert) parameter gather; every expert weight is an FP8
// GEMM weight under FP8.
std::int64_t StageBuilder::unit_gather_bytes(std::int64_t unit, bool expert) const {
  const std::int64_t n = expert ? unit_expert(unit) : unit_dense(unit);
  const bool layer = unit != kEmbeddingUnit && unit != output_unit();
  const std::int64_t fp8 = !layer || !quantized_unit(unit) ? 0 : expert ? n : std::max<std::int64_t>(0, params_of(unit).gemm_weights - unit_expert(unit));
  return param_gather_bytes(n, std::min(n, fp8));
}

// ZeRO-3 / FSDP (Megatron-FSDP's runtime schedule, fsdp/src/docs/runtime_schedule.md): each
// unit's 16-bit parameters are all-gathered before use and freed after; the next unit's gather
// is prefetched as a unit starts, so it overlaps the unit's compute (double buffering).
void StageBuilder::fsdp_issue(std::int64_t unit) {
  if (fsdp_held_.contains(unit)) return;
  std::vector<TaskIndex> tasks;
  const std::int64_t dense = unit_gather_bytes(unit, false), expert = unit_gather_bytes(unit, true);
  const auto saved = layer_;
  layer_ = unit >= 0 && unit < output_unit() ? unit : -1;
  if (dense > 0) {
    tasks.push_back(shard_ > 1 ? collective("fsdp_param_all_gather", dense_shard_slot(), kDpStream, CollectiveKind::kAllGather,
                                            dense, d_.act, kDpComm, {}, dense)
                               : kNoTask);
  }
  if (expert > 0) {
    tasks.push_back(eshard_ > 1 ? collective("fsdp_expert_param_all_gather", expert_shard_slot(), kDpStream,
                                          CollectiveKind::kAllGather, expert, d_.act, kDpComm, {}, expert)
                             : kNoTask);
  }
  layer_ = saved;
  fsdp_held_[unit] = tasks;
}

void StageBuilder::fsdp_acquire(std::int64_t unit, bool backward) {
  fsdp_issue(unit);
  // Prefetch the unit used next: in the backward pass the next in its order of use, in the
  // forward pass the next layer of the chunk (or the output layer after the last).
  if (backward) {
    auto it = std::find(backward_units_.begin(), backward_units_.end(), unit);
    if (it != backward_units_.end() && it + 1 != backward_units_.end()) fsdp_issue(*(it + 1));
  } else if (unit != output_unit()) {
    const auto [first, count] = info_.chunks[static_cast<std::size_t>(chunk_)];
    const std::int64_t next = unit == kEmbeddingUnit ? first : unit + 1;
    const bool last_chunk = chunk_ == static_cast<std::int64_t>(info_.chunks.size()) - 1;
    if (next < first + count) {
      fsdp_issue(next);
    } else if (last_chunk && info_.has_output) {
      fsdp_issue(output_unit());
    }
  }
  for (TaskIndex t : fsdp_held_[unit]) wait(t);
}

void StageBuilder::fsdp_release(std::int64_t unit) {
  auto it = fsdp_held_.find(unit);
  if (it == fsdp_held_.end()) return;
  const std::int64_t bytes = unit_gather_bytes(unit, false) + unit_gather_bytes(unit, true);
  bool gathered = false;
  for (TaskIndex t : it->second) gathered |= t != kNoTask;
  if (gathered && has_compute_) free_at(last_compute_, bytes);
  fsdp_held_.erase(it);
}

// ZeRO-3: the unit's gradients reduce-scattered as soon as its backward is done; the full
// gradient buffer is released when the reduce-scatter ends.
void StageBuilder::fsdp_reduce(std::int64_t unit) {
  const std::int64_t dense = unit_dense(unit), expert = unit_expert(unit);
  // Each part's full gradient buffer is released once it is reduce-scattered (or, with one rank
  // per distributed-optimizer instance, all-reduced across the instances); without instances,
  // both parts when the last reduction ends.
  auto done = [&](std::int64_t params, bool is_expert, const std::string& prefix) {
    return params > 0 ? reduce_gradients(prefix, is_expert, params, CollectiveKind::kReduceScatter, {})
                      : std::pair<TaskIndex, TaskIndex>{kNoTask, kNoTask};
  };
  const auto [dense_first, dense_last] = done(dense, false, "fsdp_");
  const auto [expert_first, expert_last] = done(expert, true, "fsdp_expert_");
  const auto at = [&](TaskIndex t) { return t == kNoTask ? last_compute_ : t; };
  if (p_.num_distributed_optimizer_instances > 1) {
    if (dense > 0) free_at(at(dense_first), grad_bytes() * dense);
    if (expert > 0) free_at(at(expert_first), grad_bytes() * expert);
  } else {
    free_at(at(expert_last != kNoTask ? expert_last : dense_last), grad_bytes() * (dense + expert));
  }
}

// FP8 delayed scaling: Transformer Engine all-reduces the amax history of the region's FP8
// tensors (max) over the amax-reduction group (tensor x data x context parallel ranks, Megatron's
// get_amax_reduction_group) when a forward pass leaves fp8_autocast and when the backward pass
// finishes (fp8.py, reduce_and_update_fp8_tensors): 3 forward and 2 backward tensors per GEMM,
// 4 GEMMs per layer, one fp32 each.
void StageBuilder::amax_reduction(std::int64_t layers, bool forward) {
  if (!quantized_model_ || d_.quant_recipe != QuantRecipe::kDelayed || layers == 0) return;
  if (d_.t * dp_cp_ <= 1) return;
  layer_ = -1;
  wait(collective(forward ? "fp8_amax_all_reduce" : "fp8_amax_bwd_all_reduce", kAmaxSlot, kTpStream,
                  CollectiveKind::kAllReduce, 4 * (forward ? 3 : 2) * 4 * layers, DataType::kFp32, kOtherComm));
}

void StageBuilder::finalize() {
  mb_ = -1;
  layer_ = -1;
  const std::int64_t chunks = static_cast<std::int64_t>(info_.chunks.size());
  if (!t_.overlap_grad_reduce && p_.zero_stage < 2) {
    // finalize_model_grads -> finish_grad_sync: per chunk, every bucket reduced, then waited.
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::size_t before = grad_syncs_.size();
      for (const GradientBucket& b : buckets_[static_cast<std::size_t>(c)]) reduce_bucket(b, kNoTask);
      for (std::size_t i = before; i < grad_syncs_.size(); ++i) wait(grad_syncs_[i]);
    }
  }
  for (TaskIndex s : grad_syncs_) wait(s);
  // Sequence parallelism: the gradients of replicated norm weights (and row-parallel biases)
  // differ per TP rank and are summed over the TP group
  // (finalize_model_grads._allreduce_non_tensor_model_parallel_grads); so are qk_layernorm's,
  // each rank's a sum over its own heads, with or without sequence parallelism.
  if (d_.sp || (lp_.qk_norm > 0 && d_.t > 1)) {
    std::int64_t layers = 0;
    for (const auto& c : info_.chunks) layers += c.second;
    // MLA's down projections (with their norms) are replicated too.
    // Each multi-token-prediction module adds a layer and three norms.
    const std::int64_t mtp = info_.has_output ? m_.mtp_num_layers : 0;
    const std::int64_t per_layer = d_.sp ? 2 * lp_.norm + (d_.bias ? 2 * d_.h : 0) + lp_.q_down + lp_.kv_down : 0;
    const std::int64_t outside = d_.sp ? (info_.has_output ? lp_.norm : 0) + 3 * mtp * lp_.norm : 0;
    const std::int64_t replicated = (layers + mtp) * (per_layer + lp_.qk_norm) + outside;
    wait(collective("layernorm_grad_all_reduce", kTpSlot, kTpStream, CollectiveKind::kAllReduce, grad_bytes() * replicated,
                    grad_dtype(), kTpComm));
  }
  // Tied embedding and output weights live on the first and last stage, and so does the
  // embedding of multi-token prediction: sum their gradients
  // (finalize_model_grads._allreduce_word_embedding_grads).
  const bool tied_split = (!m_.untie_embeddings_and_output_weights || m_.mtp_num_layers > 0) && p_.pipeline_model_parallel_size > 1;
  if (tied_split && (info_.has_embedding || info_.has_output)) {
    const std::int64_t shard = p_.zero_stage >= 2 ? shard_ : 1;
    wait(collective("embedding_grad_all_reduce", kEmbeddingSlot, kDpStream, CollectiveKind::kAllReduce,
                    grad_bytes() * d_.v * d_.h / shard, grad_dtype(), kEmbeddingComm));
  }
  // Gradient clipping: local squared norm, then a sum over the gradient-statistics group.
  const bool sharded = p_.shards_optimizer();
  const std::int64_t shard = optimizer_shard_params(info_.params, shard_, eshard_, sharded);
  // 16-bit main gradients are cast to fp32 copies that the optimizer keeps as the master weights'
  // .grad (MixedPrecisionOptimizer._copy_model_grads_to_main_grads: main_param.grad =
  // model_grad.float()); they live through clipping and the Adam step. Megatron Core's
  // "Distributed optimizer" guide counts them: 20 B per parameter with 16-bit parameters and
  // gradients (4 + 16/d under the distributed optimizer) against 18 (6 + 12/d) with fp32 ones.
  // The precision-aware optimizer holding the master weights reads the gradients as they are.
  const std::int64_t fp32_grad_copy = t_.copies_grads_to_fp32() ? 4 * shard : 0;
  if (fp32_grad_copy > 0) compute("main_grad_to_fp32", memory_op(grad_bytes() * shard + fp32_grad_copy), kOptimizer, fp32_grad_copy);
  compute("grad_norm", memory_op(4 * shard), kOptimizer);
  wait(collective("grad_norm_all_reduce", kGradStatsSlot, kTpStream, CollectiveKind::kAllReduce, 4, DataType::kFp32,
                  kOtherComm));
  // Adam over the local shard (Megatron's fused multi-tensor kernel): read the gradient, fp32
  // master weight and both moments, write master and moments and the 16-bit weight copy (the
  // precision-aware optimizer: the gradient as reduced, its moment and master-weight bytes).
  // With fp8_param_gather the FP8 GEMM weights of the shard get no 16-bit copy: Transformer
  // Engine's cast_master_weights_to_fp8 quantizes their fp32 masters into the gather buffer.
  const std::int64_t fp8_shard = quantized_model_ && t_.fp8_param_gather
                                     ? std::min(shard, sharded ? (info_.params.fp8_gemm + shard_ - 1) / shard_ : info_.params.fp8_gemm)
                                     : 0;
  const std::int64_t grad_read = fp32_grad_copy > 0 || t_.grad_reduce_in_fp32 ? 4 : grad_bytes();
  auto step = [&](std::int64_t part, std::int64_t fp8_part, std::int64_t free) {
    Kernel adam;
    adam.kernel_class = KernelClass::kOptimizer;
    adam.bytes = Bytes(part * (grad_read + 2 * t_.optimizer_state_bytes() + 2) - 2 * fp8_part);
    adam.flops = Flops(12.0 * static_cast<double>(part));
    compute("adam_step", adam, kOptimizer, 0, free);
    if (fp8_part > 0) {
      compute(quant_format() + "_param_quantize", quantize_op(4 * fp8_part + gathered_quantized_param_bytes(fp8_part, d_.quant_recipe)),
              kOptimizer);
    }
  };
  if (!bucket_gathers_.empty() && t_.overlap_param_gather_with_optimizer_step) {
    // The first chunk's optimizer steps its shard, its parameters' gathers are dispatched (for the
    // next iteration's first forward pass), then the other chunks' optimizer steps.
    std::int64_t dense = 0, expert = 0;
    for (const GradientBucket& b : buckets_[0]) (b.expert ? expert : dense) += b.params;
    const std::int64_t first = std::min(shard, (dense + shard_ - 1) / shard_ + (expert + eshard_ - 1) / eshard_);
    const std::int64_t fp8_first = shard > 0 ? fp8_shard * first / shard : 0;
    step(first, fp8_first, 0);
    for (std::size_t b : gather_order(0)) param_gather(buckets_[0][b]);
    step(shard - first, fp8_shard - fp8_first, fp32_grad_copy);
  } else {
    step(shard, fp8_shard, fp32_grad_copy);
  }
  if (sharded && p_.zero_stage < 3 && !t_.overlap_param_gather) {
    // Updated 16-bit parameters gathered back to every data-parallel rank, bucket by bucket
    // (DistributedOptimizer.step -> start_param_sync).
    std::vector<TaskIndex> gathers;
    for (const auto& chunk_buckets : buckets_) {
      for (const GradientBucket& bucket : chunk_buckets) {
        if (const TaskIndex t = param_gather(bucket); t != kNothingToGather) gathers.push_back(t);
      }
    }
    for (TaskIndex t : gathers) wait(t);
  }
}

void StageBuilder::build() {
  sim::RankClass& rc = g_.rank_class(cls_);
  rc.static_memory_bytes = info_.static_memory.total();
  const std::int64_t chunks = static_cast<std::int64_t>(info_.chunks.size());
  for (std::int64_t c = 0; c < chunks; ++c) {
    groups_.push_back(param_groups(c));
    buckets_.push_back(p_.zero_stage >= 3 ? std::vector<GradientBucket>{} : make_buckets(groups_.back(), bucket_size(c)));
  }
  if (p_.shards_optimizer() && p_.zero_stage < 3 && t_.overlap_param_gather) {
    for (std::int64_t c = 0; c < chunks; ++c) {
      const auto& b = buckets_[static_cast<std::size_t>(c)];
      bucket_gathers_.emplace_back(b.size(), kNoTask);
      std::vector<std::size_t> order;
      for (std::size_t i = b.size(); i-- > 0;) order.push_back(i);
      forward_order_.push_back(order);
      gather_next_.push_back(0);
      gather_next_.push_back(0);
    }
    // overlap_param_gather_with_optimizer_step: the first chunk's parameters arrive with the
    // previous step's optimizer (finalize gathers them for the next iteration).
    if (t_.overlap_param_gather_with_optimizer_step) std::fill(bucket_gathers_[0].begin(), bucket_gathers_[0].end(), kNothingToGather);
  }

  PipelineShape shape;
  shape.stages = p_.pipeline_model_parallel_size;
  shape.chunks = chunks;
  shape.microbatches = microbatches_;
  shape.group = p_.microbatch_group_size_per_vp_stage;
  shape.overlap_p2p = t_.overlap_p2p_comm;
  shape.combined_1f1b = t_.overlap_moe_expert_parallel_comm;
  const std::vector<PipelineStep> steps = pipeline_steps(t_.pipeline_schedule, info_.stage, shape);
  // align_param_gather (schedules.py, forward_backward_pipelining_with_interleaving): the first
  // two chunks' gathers when the schedule starts, on every stage at once; chunk c + 1's at the
  // forward pass whose virtual micro-batch id plus this stage's rank is chunk c's first
  // (forward_step_helper_preprocess), so that the stages dispatch together.
  aligned_gather_ = !bucket_gathers_.empty() && t_.align_param_gather &&
                    t_.pipeline_schedule == PipelineSchedule::kInterleaved && chunks > 1;
  std::vector<const PipelineStep*> forwards;  // in virtual micro-batch order (aligned only)
  if (aligned_gather_) {
    for (const PipelineStep& step : steps) {
      if (step.kind == PipelineStep::Kind::kForward || step.kind == PipelineStep::Kind::kForwardBackward) forwards.push_back(&step);
    }
    gather_chunk(0);
    gather_chunk(1);
  }
  std::size_t forward_index = 0;
  last_backward_step_.assign(info_.chunks.size(), -1);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == PipelineStep::Kind::kBackward) {
      last_backward_step_[static_cast<std::size_t>(steps[i].chunk)] = static_cast<std::int64_t>(i);
    } else if (steps[i].kind == PipelineStep::Kind::kForwardBackward) {
      last_backward_step_[static_cast<std::size_t>(steps[i].backward_chunk)] = static_cast<std::int64_t>(i);
    }
  }
  // align_grad_reduce: a chunk's reduction is launched after the backward pass `stage` virtual
  // micro-batches after the chunk's last one (backward_step_helper_postprocess), or, when
  // that lies past the end, once the schedule is done.
  const bool aligned = t_.overlap_grad_reduce && p_.zero_stage < 2 && !reduces_in_hooks();
  std::vector<std::pair<std::int64_t, std::int64_t>> backwards;  // (micro-batch, chunk) in order
  std::vector<bool> reduced(info_.chunks.size(), false);
  auto forward_gathers = [&]() {
    const std::size_t ahead = forward_index++ + static_cast<std::size_t>(info_.stage);
    if (aligned_gather_ && ahead < forwards.size() && forwards[ahead]->microbatch == 0) {
      const std::int64_t next = forwards[ahead]->chunk + 1;
      if (next > 1 && next < chunks) gather_chunk(next);
    }
  };
  auto backward_done = [&](std::int64_t mb, std::int64_t chunk) {
    backwards.emplace_back(mb, chunk);
    const auto delayed = static_cast<std::int64_t>(backwards.size()) - 1 - info_.stage;
    if (aligned && chunks > 1 && delayed >= 0) {
      const auto due = backwards[static_cast<std::size_t>(delayed)];
      if (due.first == microbatches_ - 1 && !reduced[static_cast<std::size_t>(due.second)]) {
        reduce_chunk(due.second);
        reduced[static_cast<std::size_t>(due.second)] = true;
      }
    }
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const PipelineStep& step = steps[i];
    if (step.kind != PipelineStep::Kind::kCommunicate) combined_forward_done_ = false;
    switch (step.kind) {
      case PipelineStep::Kind::kForward:
        forward_gathers();
        chunk_forward(step.microbatch, step.chunk);
        break;
      case PipelineStep::Kind::kBackward:
        final_backward_ = last_backward_step_[static_cast<std::size_t>(step.chunk)] == static_cast<std::int64_t>(i);
        chunk_backward(step.microbatch, step.chunk);
        final_backward_ = false;
        backward_done(step.microbatch, step.chunk);
        break;
      case PipelineStep::Kind::kForwardBackward:
        forward_gathers();
        forward_backward(step, last_backward_step_[static_cast<std::size_t>(step.backward_chunk)] == static_cast<std::int64_t>(i));
        backward_done(step.backward_microbatch, step.backward_chunk);
        break;
      case PipelineStep::Kind::kCommunicate:
        communicate(step);
        break;
    }
  }
  for (TaskIndex t : gate_forward_) wait(t);
  for (TaskIndex t : gate_backward_) wait(t);
  if (aligned) {
    for (std::int64_t c = 0; c < chunks; ++c) {
      if (!reduced[static_cast<std::size_t>(c)]) reduce_chunk(c);
    }
  }
  finalize();
}

}  // namespace

void build_stage(sim::TaskGraph& graph, std::uint32_t cls, const StageContext& ctx) {
  StageBuilder builder(graph, cls, ctx);
  builder.build();
}

}  // namespace trainsim::models
