#include "models/lowering.h"

#include <algorithm>
#include <map>
#include <string>

#include "models/graph_vocabulary.h"
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

std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> split_layers(const ModelSpec& m, const ParallelSpec& p) {
  const std::int64_t P = p.pipeline_model_parallel_size;
  const std::int64_t V = p.virtual_pipeline_model_parallel_size;
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
  g.bytes = Bytes(batch * (sim::size_of(in) * (m * k + k * n) + 2 * m * n));
  return g;
}

Kernel memory_op(std::int64_t bytes, double flops = 0) {
  Kernel k;
  k.kernel_class = KernelClass::kMemoryBound;
  k.bytes = Bytes(bytes);
  k.flops = Flops(flops);
  return k;
}

struct Param {
  std::int64_t count = 0;
  bool expert = false;
};

class StageBuilder {
 public:
  StageBuilder(sim::TaskGraph& graph, std::uint32_t cls, const ModelSpec& m, const ParallelSpec& p,
               const TrainingSpec& t, const LayerDims& d, const StageInfo& info, std::int64_t microbatches,
               std::int64_t dp)
      : g_(graph), cls_(cls), m_(m), p_(p), t_(t), d_(d), info_(info), microbatches_(microbatches), dp_(dp) {}

  void build();

 private:
  // ---- emission helpers ----
  TaskIndex compute(const std::string& name, const Kernel& k, std::uint8_t cat, std::int64_t alloc = 0,
                    std::int64_t free = 0) {
    sim::Task task;
    task.kind = sim::TaskKind::kCompute;
    task.stream = kComputeStream;
    task.category = cat;
    task.payload = g_.add_kernel(cls_, k);
    task.name = g_.intern(name);
    task.microbatch = static_cast<std::int32_t>(mb_);
    task.layer = static_cast<std::int32_t>(layer_);
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
  // wait for the current stream at issue time), plus `extra` dependencies.
  TaskIndex collective(const std::string& name, CommSlot slot, Stream stream, CollectiveKind kind, std::int64_t bytes,
                       DataType dtype, std::uint8_t cat, std::vector<TaskIndex> extra = {}) {
    sim::Task task;
    task.kind = sim::TaskKind::kCollective;
    task.stream = stream;
    task.category = cat;
    task.slot = slot;
    task.payload = g_.add_comm_op(cls_, sim::CommOp{kind, dtype, Bytes(bytes)});
    task.name = g_.intern(name);
    task.microbatch = static_cast<std::int32_t>(mb_);
    task.layer = static_cast<std::int32_t>(layer_);
    if (has_compute_) extra.push_back(last_compute_);
    return g_.add_task(cls_, task, extra);
  }
  TaskIndex p2p(const std::string& name, const std::vector<sim::Transfer>& transfers, Stream stream, std::uint8_t cat,
                std::vector<TaskIndex> extra = {}) {
    sim::Task task;
    task.kind = sim::TaskKind::kPointToPoint;
    task.stream = stream;
    task.category = cat;
    task.payload = g_.add_transfers(cls_, transfers);
    task.payload_count = static_cast<std::uint32_t>(transfers.size());
    task.name = g_.intern(name);
    task.microbatch = static_cast<std::int32_t>(mb_);
    task.layer = static_cast<std::int32_t>(layer_);
    if (has_compute_) extra.push_back(last_compute_);
    return g_.add_task(cls_, task, extra);
  }
  void wait(TaskIndex t) { pending_.push_back(t); }
  // A tensor-parallel collective on activations; the compute stream waits for it unless
  // Transformer Engine overlaps it with the neighbouring GEMM.
  TaskIndex tp_collective(const std::string& name, CollectiveKind kind, std::int64_t bytes, std::uint8_t cat,
                          bool blocking = true) {
    if (d_.t <= 1) return kNoTask;
    (void)cat;
    const TaskIndex c = collective(name, kTpSlot, kTpStream, kind, bytes, d_.act, kTpComm);
    if (blocking) wait(c);
    return c;
  }

  std::int64_t hidden_bytes() const { return d_.act_bytes() * d_.tokens() * d_.h; }
  std::int64_t sharded_hidden_bytes() const { return d_.act_bytes() * d_.sharded_tokens() * d_.h; }

  // ---- model pieces ----
  void embedding_forward(std::uint8_t cat);
  void embedding_backward();
  void output_forward();
  void output_backward();
  void layer_forward(std::int64_t layer, std::uint8_t cat, std::int64_t alloc);
  void layer_backward(std::int64_t layer, std::int64_t free);
  void attention_forward(std::uint8_t cat);
  void attention_backward();
  void attention_core_forward(std::uint8_t cat);
  void mlp_forward(std::uint8_t cat);
  void mlp_backward();
  void linear_backward(const std::string& name, std::int64_t k_fwd, std::int64_t n_fwd, bool column, std::int64_t params,
                       bool expert_group = false, std::int64_t batch = 1, std::int64_t rows = -1);
  void norm(const std::string& name, std::uint8_t cat, std::int64_t alloc = 0);
  void fsdp_gather(std::int64_t layer, std::int64_t prefetch);
  // ZeRO-3 / FSDP: the all-gather issued ahead for the next layer (FSDP's prefetch), and the
  // layer whose parameters a recomputation has already gathered for its backward pass.
  TaskIndex fsdp_prefetched_ = kNoTask;
  std::int64_t fsdp_prefetched_layer_ = -1;
  std::int64_t fsdp_gathered_layer_ = -1;
  std::int64_t chunk_first_ = 0, chunk_last_ = 0;  // layers of the chunk being lowered

  // ---- pipeline and data parallelism ----
  void chunk_forward(std::int64_t mb, std::int64_t chunk);
  void chunk_backward(std::int64_t mb, std::int64_t chunk);
  void communicate(const PipelineStep& step);
  void gradient_ready(const Param& p, TaskIndex producer);
  void flush_bucket(bool expert);
  void finalize();
  std::int64_t bucket_limit() const {
    if (!t_.overlap_grad_reduce) return INT64_MAX;  // one bucket: reduced after the backward pass
    if (t_.ddp_bucket_size > 0) return t_.ddp_bucket_size;
    return std::max<std::int64_t>(40'000'000, 1'000'000 * dp_);  // Megatron-Core DDP default
  }
  bool full_recompute_layer(std::int64_t index_in_chunk, std::int64_t count) const;

  static constexpr TaskIndex kNoTask = 0xffffffffu;

  sim::TaskGraph& g_;
  std::uint32_t cls_;
  const ModelSpec& m_;
  const ParallelSpec& p_;
  const TrainingSpec& t_;
  const LayerDims& d_;
  const StageInfo& info_;
  std::int64_t microbatches_;
  std::int64_t dp_;

  std::vector<TaskIndex> pending_;  // tasks the next compute task waits for
  std::int64_t pending_alloc_ = 0;  // bytes the next compute task allocates
  TaskIndex last_compute_ = 0;
  bool has_compute_ = false;
  std::int64_t mb_ = -1, layer_ = -1;
  bool final_backward_ = false;  // the backward pass that completes this chunk's gradients
  struct Bucket {
    std::int64_t params = 0;
    TaskIndex ready = 0;
  } bucket_[2];
  std::vector<TaskIndex> grad_syncs_;
  std::vector<TaskIndex> param_gathers_;  // per layer (FSDP) or per chunk (distributed optimizer)
  std::vector<std::int64_t> last_backward_step_;
};

void StageBuilder::norm(const std::string& name, std::uint8_t cat, std::int64_t alloc) {
  // Read input, write output (and the 16-bit statistics) over the sharded tokens.
  compute(name, memory_op(2 * sharded_hidden_bytes(), 8.0 * static_cast<double>(d_.sharded_tokens() * d_.h)), cat, alloc);
}

void StageBuilder::attention_core_forward(std::uint8_t cat) {
  const std::int64_t dt = d_.act_bytes();
  if (d_.flash) {
    // Ring attention over context-parallel ranks: one block per step, K/V chunks passed to the
    // next rank while the current block computes (Megatron-Core's p2p context parallelism).
    const std::int64_t steps = d_.cp;
    const std::int64_t kv_bytes = 2 * dt * d_.tokens() * d_.g * d_.d;
    TaskIndex exchange = kNoTask;
    for (std::int64_t step = 0; step < steps; ++step) {
      if (step + 1 < steps) {
        exchange = p2p("cp_kv_exchange",
                       {sim::Transfer{true, kCpNext, Bytes(kv_bytes)}, sim::Transfer{false, kCpPrev, Bytes(kv_bytes)}},
                       kCpEpStream, kCpComm);
      }
      Kernel k;
      k.kernel_class = KernelClass::kFlashAttention;
      k.dtype = d_.act;
      k.causal = true;
      k.m = d_.s;
      k.n = d_.s;
      k.k = d_.d;
      k.batch = d_.b * d_.a;
      // Causal: half the score matrix (balanced across context-parallel ranks).
      k.flops = Flops(4.0 * static_cast<double>(d_.b * d_.a * d_.s) * static_cast<double>(d_.s * d_.d) * 0.5);
      k.bytes = Bytes(dt * d_.tokens() * (2 * d_.a + 2 * d_.g) * d_.d);
      compute(steps > 1 ? "flash_attention_fwd_step" : "flash_attention_fwd", k, cat);
      if (exchange != kNoTask && step + 1 < steps) wait(exchange);
    }
    return;
  }
  // Unfused: Q K^T, scale + mask + softmax, dropout, P V.
  const std::int64_t scores = d_.b * d_.a * d_.s * d_.s;
  compute("attention_scores", gemm(d_.s, d_.s, d_.d, d_.b * d_.a, d_.act), cat);
  compute("softmax", memory_op(2 * dt * scores, 5.0 * static_cast<double>(scores)), cat);
  if (d_.attention_dropout) compute("attention_dropout", memory_op((2 * dt + 1) * scores), cat);
  compute("attention_values", gemm(d_.s, d_.d, d_.s, d_.b * d_.a, d_.act), cat);
}

void StageBuilder::attention_forward(std::uint8_t cat) {
  const std::int64_t T = d_.tokens(), dt = d_.act_bytes();
  norm("input_norm", cat);
  if (d_.sp) tp_collective("qkv_all_gather", CollectiveKind::kAllGather, hidden_bytes(), cat, !t_.tp_comm_overlap);
  compute("qkv_proj", gemm(T, d_.qkv_width(), d_.h, 1, d_.gemm), cat);
  if (d_.rope) compute("rotary_embedding", memory_op(2 * dt * T * (d_.a + d_.g) * d_.d), cat);
  attention_core_forward(cat);
  compute("out_proj", gemm(T, d_.h, d_.a * d_.d, 1, d_.gemm), cat);
  tp_collective(d_.sp ? "out_proj_reduce_scatter" : "out_proj_all_reduce",
                d_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, hidden_bytes(), cat);
  compute("bias_dropout_add", memory_op(3 * sharded_hidden_bytes() + (d_.hidden_dropout ? d_.sharded_tokens() * d_.h : 0)), cat);
}

void StageBuilder::mlp_forward(std::uint8_t cat) {
  const std::int64_t T = d_.tokens(), dt = d_.act_bytes();
  norm("post_attention_norm", cat);
  if (d_.sp) tp_collective("fc1_all_gather", CollectiveKind::kAllGather, hidden_bytes(), cat, !t_.tp_comm_overlap);
  if (d_.experts > 0) {
    // Router, token dispatch to the experts' ranks, grouped expert GEMMs, combine.
    compute("router", gemm(T, d_.experts, d_.h, 1, d_.act), cat);
    compute("permute", memory_op(2 * dt * T * d_.h * d_.topk), cat);
    const std::int64_t routed = T * d_.topk;  // tokens this rank's experts process (balanced)
    if (d_.ep > 1) wait(collective("moe_dispatch_all_to_all", kEpSlot, kCpEpStream, CollectiveKind::kAllToAll,
                                   dt * routed * d_.h, d_.act, kEpComm));
    const std::int64_t per_expert = std::max<std::int64_t>(1, routed / std::max<std::int64_t>(1, d_.local_experts));
    compute("expert_fc1", gemm(per_expert, d_.fc1_width(), d_.h, d_.local_experts, d_.gemm), cat);
    compute("expert_activation", memory_op(dt * routed * (d_.fc1_width() + d_.f)), cat);
    compute("expert_fc2", gemm(per_expert, d_.h, d_.f, d_.local_experts, d_.gemm), cat);
    if (d_.ep > 1) wait(collective("moe_combine_all_to_all", kEpSlot, kCpEpStream, CollectiveKind::kAllToAll,
                                   dt * routed * d_.h, d_.act, kEpComm));
    compute("unpermute", memory_op(2 * dt * T * d_.h * d_.topk), cat);
  } else {
    compute("fc1", gemm(T, d_.fc1_width(), d_.h, 1, d_.gemm), cat);
    compute(d_.gated ? "swiglu" : "activation", memory_op(dt * T * (d_.fc1_width() + d_.f)), cat);
    compute("fc2", gemm(T, d_.h, d_.f, 1, d_.gemm), cat);
  }
  tp_collective(d_.sp ? "fc2_reduce_scatter" : "fc2_all_reduce",
                d_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, hidden_bytes(), cat);
  compute("bias_dropout_add", memory_op(3 * sharded_hidden_bytes() + (d_.hidden_dropout ? d_.sharded_tokens() * d_.h : 0)), cat);
}

void StageBuilder::layer_forward(std::int64_t layer, std::uint8_t cat, std::int64_t alloc) {
  layer_ = layer;
  if (p_.zero_stage >= 3) {
    // Forward: prefetch the next layer; a recomputation runs inside the backward pass, which
    // prefetches the previous layer and keeps this one's parameters for its backward.
    // (Recomputation in groups of several layers runs them in forward order: no prefetch there.)
    const bool recompute = cat == kRecompute;
    const bool per_layer = !recompute || t_.recompute_method == RecomputeMethod::kBlock || t_.recompute_num_layers == 1;
    const std::int64_t next = recompute ? layer - 1 : layer + 1;
    fsdp_gather(layer, per_layer && next >= chunk_first_ && next <= chunk_last_ ? next : -1);
    if (recompute && per_layer) fsdp_gathered_layer_ = layer;
  }
  pending_alloc_ += alloc;  // the layer's saved activations, allocated as its forward starts
  attention_forward(cat);
  mlp_forward(cat);
}

// Column-parallel (QKV, fc1) or row-parallel (out_proj, fc2) linear layer backward: data
// gradient and weight gradient GEMMs with Megatron's overlap of the tensor-parallel
// communication (LinearWithGradAccumulationAndAsyncCommunication).
void StageBuilder::linear_backward(const std::string& name, std::int64_t k_fwd, std::int64_t n_fwd, bool column,
                                   std::int64_t params, bool expert_group, std::int64_t batch, std::int64_t rows) {
  const std::int64_t T = rows < 0 ? d_.tokens() : rows;
  const bool tp_comm = column && d_.t > 1 && !expert_group;
  TaskIndex gather = kNoTask;
  if (tp_comm && d_.sp) {
    // Re-gather the sequence-sharded input for the weight gradient, overlapped with dgrad.
    gather = tp_collective(name + "_input_all_gather", CollectiveKind::kAllGather, hidden_bytes(), kBackward, false);
  }
  compute(name + "_dgrad", gemm(T, k_fwd, n_fwd, batch, d_.gemm), kBackward);
  TaskIndex reduce = kNoTask;
  if (tp_comm) {
    reduce = tp_collective(d_.sp ? name + "_grad_reduce_scatter" : name + "_grad_all_reduce",
                           d_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, hidden_bytes(), kBackward,
                           false);
  }
  if (gather != kNoTask) wait(gather);
  const TaskIndex wgrad = compute(name + "_wgrad", gemm(k_fwd, n_fwd, T, batch, d_.gemm), kBackward);
  if (reduce != kNoTask) wait(reduce);
  gradient_ready(Param{params, expert_group}, wgrad);
}

void StageBuilder::attention_backward() {
  const std::int64_t T = d_.tokens(), dt = d_.act_bytes();
  const std::int64_t bias = d_.bias ? 1 : 0;
  compute("bias_dropout_add_bwd", memory_op(3 * sharded_hidden_bytes()), kBackward);
  if (d_.sp) tp_collective("out_proj_grad_all_gather", CollectiveKind::kAllGather, hidden_bytes(), kBackward);
  linear_backward("out_proj", d_.a * d_.d, d_.h, false, d_.a * d_.d * d_.h + bias * d_.h);
  if (t_.recompute_granularity == RecomputeGranularity::kSelective) attention_core_forward(kRecompute);
  if (d_.flash) {
    const std::int64_t steps = d_.cp;
    const std::int64_t kv_bytes = 2 * dt * d_.tokens() * d_.g * d_.d;
    for (std::int64_t step = 0; step < steps; ++step) {
      TaskIndex exchange = kNoTask;
      if (step + 1 < steps) {
        // K/V forward and their gradients backward around the ring.
        exchange = p2p("cp_kv_grad_exchange",
                       {sim::Transfer{true, kCpNext, Bytes(2 * kv_bytes)}, sim::Transfer{false, kCpPrev, Bytes(2 * kv_bytes)}},
                       kCpEpStream, kCpComm);
      }
      Kernel k;
      k.kernel_class = KernelClass::kFlashAttention;
      k.dtype = d_.act;
      k.backward = true;
      k.causal = true;
      k.m = d_.s;
      k.n = d_.s;
      k.k = d_.d;
      k.batch = d_.b * d_.a;
      // Backward: recomputed scores plus dV, dP, dQ, dK products (2.5x the forward FLOPs).
      k.flops = Flops(2.5 * 4.0 * static_cast<double>(d_.b * d_.a * d_.s) * static_cast<double>(d_.s * d_.d) * 0.5);
      k.bytes = Bytes(2 * dt * T * (2 * d_.a + 2 * d_.g) * d_.d);
      compute(steps > 1 ? "flash_attention_bwd_step" : "flash_attention_bwd", k, kBackward);
      if (exchange != kNoTask) wait(exchange);
    }
  } else {
    const std::int64_t scores = d_.b * d_.a * d_.s * d_.s;
    compute("attention_values_dgrad", gemm(d_.s, d_.s, d_.d, d_.b * d_.a, d_.act), kBackward);
    compute("attention_values_wgrad", gemm(d_.s, d_.d, d_.s, d_.b * d_.a, d_.act), kBackward);
    if (d_.attention_dropout) compute("attention_dropout_bwd", memory_op((2 * dt + 1) * scores), kBackward);
    compute("softmax_bwd", memory_op(3 * dt * scores, 4.0 * static_cast<double>(scores)), kBackward);
    compute("attention_scores_dgrad_q", gemm(d_.s, d_.d, d_.s, d_.b * d_.a, d_.act), kBackward);
    compute("attention_scores_dgrad_k", gemm(d_.s, d_.d, d_.s, d_.b * d_.a, d_.act), kBackward);
  }
  if (d_.rope) compute("rotary_embedding_bwd", memory_op(2 * dt * T * (d_.a + d_.g) * d_.d), kBackward);
  linear_backward("qkv_proj", d_.h, d_.qkv_width(), true, d_.h * d_.qkv_width() + bias * d_.qkv_width());
  const std::int64_t norm_params = d_.layernorm ? 2 * d_.h : d_.h;
  compute("input_norm_bwd", memory_op(4 * sharded_hidden_bytes()), kBackward);
  gradient_ready(Param{norm_params, false}, last_compute_);
}

void StageBuilder::mlp_backward() {
  const std::int64_t T = d_.tokens(), dt = d_.act_bytes();
  const std::int64_t bias = d_.bias ? 1 : 0;
  compute("bias_dropout_add_bwd", memory_op(3 * sharded_hidden_bytes()), kBackward);
  if (d_.sp) tp_collective("fc2_grad_all_gather", CollectiveKind::kAllGather, hidden_bytes(), kBackward);
  if (d_.experts > 0) {
    const std::int64_t routed = T * d_.topk;
    const std::int64_t per_expert = std::max<std::int64_t>(1, routed / std::max<std::int64_t>(1, d_.local_experts));
    compute("unpermute_bwd", memory_op(2 * dt * T * d_.h * d_.topk), kBackward);
    if (d_.ep > 1) wait(collective("moe_combine_bwd_all_to_all", kEpSlot, kCpEpStream, CollectiveKind::kAllToAll,
                                   dt * routed * d_.h, d_.act, kEpComm));
    const std::int64_t expert_params = d_.local_experts;
    linear_backward("expert_fc2", d_.f, d_.h, false, expert_params * d_.f * d_.h, true, d_.local_experts, per_expert);
    compute("expert_activation_bwd", memory_op(dt * routed * (2 * d_.fc1_width() + d_.f)), kBackward);
    linear_backward("expert_fc1", d_.h, d_.fc1_width(), false, expert_params * d_.h * d_.fc1_width(), true,
                    d_.local_experts, per_expert);
    if (d_.ep > 1) wait(collective("moe_dispatch_bwd_all_to_all", kEpSlot, kCpEpStream, CollectiveKind::kAllToAll,
                                   dt * routed * d_.h, d_.act, kEpComm));
    compute("permute_bwd", memory_op(2 * dt * T * d_.h * d_.topk), kBackward);
    const TaskIndex router = compute("router_bwd", gemm(T, d_.h, d_.experts, 1, d_.act), kBackward);
    gradient_ready(Param{d_.h * d_.experts, false}, router);
    if (d_.sp) tp_collective("moe_grad_reduce_scatter", CollectiveKind::kReduceScatter, hidden_bytes(), kBackward);
  } else {
    linear_backward("fc2", d_.f, d_.h, false, d_.f * d_.h + bias * d_.h);
    compute(d_.gated ? "swiglu_bwd" : "activation_bwd", memory_op(dt * T * (2 * d_.fc1_width() + d_.f)), kBackward);
    linear_backward("fc1", d_.h, d_.fc1_width(), true, d_.h * d_.fc1_width() + bias * d_.fc1_width());
  }
  const std::int64_t norm_params = d_.layernorm ? 2 * d_.h : d_.h;
  compute("post_attention_norm_bwd", memory_op(4 * sharded_hidden_bytes()), kBackward);
  gradient_ready(Param{norm_params, false}, last_compute_);
}

void StageBuilder::layer_backward(std::int64_t layer, std::int64_t free) {
  layer_ = layer;
  if (p_.zero_stage >= 3 && fsdp_gathered_layer_ != layer) fsdp_gather(layer, layer - 1 >= chunk_first_ ? layer - 1 : -1);
  fsdp_gathered_layer_ = -1;
  mlp_backward();
  attention_backward();
  if (free != 0) {
    // Release the layer's saved activations with its last backward kernel.
    sim::Task& last = g_.rank_class(cls_).tasks[last_compute_];
    last.free_bytes += free;
  }
  if (p_.zero_stage >= 3 && final_backward_) {
    flush_bucket(false);
  }
}

void StageBuilder::fsdp_gather(std::int64_t layer, std::int64_t prefetch) {
  // ZeRO-3 / FSDP: gather the layer's 16-bit parameters before using them. The gather of the
  // layer that runs next is issued now (FSDP's forward/backward prefetch, DeepSpeed's prefetch
  // bucket), so it overlaps this layer's compute instead of waiting in front of it.
  const std::int64_t params = m_.layer_parameters() / d_.t / (d_.experts > 0 ? d_.ep : 1);
  auto issue = [&]() {
    return collective("fsdp_param_all_gather", kDpSlot, kDpStream, CollectiveKind::kAllGather, 2 * params, d_.act, kDpComm);
  };
  const TaskIndex current = fsdp_prefetched_layer_ == layer ? fsdp_prefetched_ : issue();
  fsdp_prefetched_layer_ = -1;
  if (prefetch >= 0) {
    fsdp_prefetched_ = issue();
    fsdp_prefetched_layer_ = prefetch;
  }
  wait(current);
}

void StageBuilder::embedding_forward(std::uint8_t cat) {
  const std::int64_t T = d_.tokens(), dt = d_.act_bytes();
  layer_ = -1;
  std::int64_t bytes = 2 * dt * T * d_.h;  // gather rows, write output
  if (!d_.rope) bytes += 3 * dt * T * d_.h;  // learned position embedding: read both, write sum
  compute("embedding", memory_op(bytes), cat, embedding_activation_bytes(d_));
  // Vocab-parallel lookup: partial rows summed over the tensor-parallel group.
  tp_collective(d_.sp ? "embedding_reduce_scatter" : "embedding_all_reduce",
                d_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, hidden_bytes(), cat);
  if (d_.hidden_dropout) compute("embedding_dropout", memory_op(2 * sharded_hidden_bytes() + d_.sharded_tokens() * d_.h), cat);
}

void StageBuilder::embedding_backward() {
  const std::int64_t T = d_.tokens(), dt = d_.act_bytes();
  layer_ = -1;
  if (d_.sp) tp_collective("embedding_grad_all_gather", CollectiveKind::kAllGather, hidden_bytes(), kBackward);
  // Scatter-add of the token gradients into the fp32 embedding gradient.
  const TaskIndex bwd = compute("embedding_bwd", memory_op(T * d_.h * (dt + 8)), kBackward);
  sim::Task& task = g_.rank_class(cls_).tasks[bwd];
  task.free_bytes += embedding_activation_bytes(d_);
  std::int64_t params = d_.v * d_.h + (d_.rope ? 0 : m_.seq_length * d_.h);
  gradient_ready(Param{params, false}, bwd);
}

void StageBuilder::output_forward() {
  const std::int64_t T = d_.tokens();
  layer_ = -1;
  compute("final_norm", memory_op(2 * sharded_hidden_bytes()), kForward, output_activation_bytes(d_));
  if (d_.sp) tp_collective("logits_all_gather", CollectiveKind::kAllGather, hidden_bytes(), kForward);
  compute("logits", gemm(T, d_.v, d_.h, 1, d_.gemm), kForward);
  // Vocab-parallel cross-entropy in fp32: max, exp and sum passes over the logits shard, with
  // three small all-reduces (max, target logit, sum of exponentials) over the TP group.
  const std::int64_t logits = T * d_.v;
  compute("cross_entropy_max", memory_op(logits * (d_.act_bytes() + 4)), kForward);
  tp_collective("cross_entropy_max_all_reduce", CollectiveKind::kAllReduce, 4 * T, kForward);
  compute("cross_entropy_exp", memory_op(logits * 8), kForward);
  tp_collective("cross_entropy_target_all_reduce", CollectiveKind::kAllReduce, 4 * T, kForward);
  tp_collective("cross_entropy_sum_all_reduce", CollectiveKind::kAllReduce, 4 * T, kForward);
  compute("cross_entropy_loss", memory_op(logits * 4), kForward);
}

void StageBuilder::output_backward() {
  const std::int64_t T = d_.tokens();
  layer_ = -1;
  compute("cross_entropy_bwd", memory_op(T * d_.v * (4 + d_.act_bytes())), kBackward);
  compute("logits_dgrad", gemm(T, d_.h, d_.v, 1, d_.gemm), kBackward);
  if (d_.t > 1) {
    const TaskIndex reduce = tp_collective(d_.sp ? "logits_grad_reduce_scatter" : "logits_grad_all_reduce",
                                           d_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                                           hidden_bytes(), kBackward, false);
    const TaskIndex wgrad = compute("logits_wgrad", gemm(d_.h, d_.v, T, 1, d_.gemm), kBackward);
    wait(reduce);
    gradient_ready(Param{d_.v * d_.h, false}, wgrad);
  } else {
    const TaskIndex wgrad = compute("logits_wgrad", gemm(d_.h, d_.v, T, 1, d_.gemm), kBackward);
    gradient_ready(Param{d_.v * d_.h, false}, wgrad);
  }
  const TaskIndex n = compute("final_norm_bwd", memory_op(4 * sharded_hidden_bytes()), kBackward,
                              0, output_activation_bytes(d_));
  gradient_ready(Param{d_.layernorm ? 2 * d_.h : d_.h, false}, n);
}

bool StageBuilder::full_recompute_layer(std::int64_t index_in_chunk, std::int64_t count) const {
  if (t_.recompute_granularity != RecomputeGranularity::kFull) return false;
  if (t_.recompute_method == RecomputeMethod::kBlock) return index_in_chunk < t_.recompute_num_layers;
  (void)count;
  return true;
}

void StageBuilder::chunk_forward(std::int64_t mb, std::int64_t chunk) {
  mb_ = mb;
  const auto [first, count] = info_.chunks[static_cast<std::size_t>(chunk)];
  chunk_first_ = first;
  chunk_last_ = first + count - 1;
  if (!param_gathers_.empty() && mb == 0 && p_.zero_stage < 3) {
    wait(param_gathers_[static_cast<std::size_t>(chunk)]);  // distributed optimizer, overlapped gather
  }
  if (chunk == 0 && info_.has_embedding) embedding_forward(kForward);
  const std::int64_t full_act = layer_activation_bytes(d_, t_.recompute_granularity == RecomputeGranularity::kSelective);
  const std::int64_t group = std::max<std::int64_t>(1, t_.recompute_num_layers);
  for (std::int64_t i = 0; i < count; ++i) {
    std::int64_t alloc = full_act;
    if (full_recompute_layer(i, count)) {
      // Uniform: one checkpoint per group of recompute_num_layers layers; block: per layer.
      const bool group_start = t_.recompute_method == RecomputeMethod::kBlock || i % group == 0;
      alloc = group_start ? layer_checkpoint_bytes(d_) : 0;
    }
    layer_forward(first + i, kForward, alloc);
  }
  if (chunk == static_cast<std::int64_t>(info_.chunks.size()) - 1 && info_.has_output) output_forward();
}

void StageBuilder::chunk_backward(std::int64_t mb, std::int64_t chunk) {
  mb_ = mb;
  const auto [first, count] = info_.chunks[static_cast<std::size_t>(chunk)];
  chunk_first_ = first;
  chunk_last_ = first + count - 1;
  if (chunk == static_cast<std::int64_t>(info_.chunks.size()) - 1 && info_.has_output) output_backward();
  const std::int64_t full_act = layer_activation_bytes(d_, false);
  const std::int64_t group = std::max<std::int64_t>(1, t_.recompute_num_layers);
  for (std::int64_t i = count - 1; i >= 0; --i) {
    std::int64_t free = layer_activation_bytes(d_, t_.recompute_granularity == RecomputeGranularity::kSelective);
    if (full_recompute_layer(i, count)) {
      const bool block = t_.recompute_method == RecomputeMethod::kBlock;
      const std::int64_t group_start = block ? i : (i / group) * group;
      if (block || i == std::min(count - 1, group_start + group - 1)) {
        // Recompute the forward of the whole group from its checkpoint before its backward.
        const std::int64_t group_end = block ? i : std::min(count - 1, group_start + group - 1);
        for (std::int64_t j = group_start; j <= group_end; ++j) layer_forward(first + j, kRecompute, full_act);
        layer_ = first + i;
      }
      free = full_act + (i == group_start ? layer_checkpoint_bytes(d_) : 0);
    }
    layer_backward(first + i, free);
  }
  if (chunk == 0 && info_.has_embedding) embedding_backward();
}

void StageBuilder::communicate(const PipelineStep& step) {
  // Activations and gradients sent between stages: the micro-batch's hidden states, sharded over
  // the tensor-parallel group under sequence parallelism.
  const Bytes bytes(sharded_hidden_bytes());
  std::vector<sim::Transfer> transfers;
  std::string name;
  for (const PipelineP2P& op : step.transfers) {
    transfers.push_back(sim::Transfer{op.is_send, op.to_next() ? kPpNext : kPpPrev, bytes});
    if (!name.empty()) name += "+";
    name += std::string(op.is_send ? "send_" : "recv_") + (op.forward ? "forward" : "backward");
  }
  layer_ = -1;
  // Megatron waits for the batch before continuing (p2p_communication._communicate).
  wait(p2p(name, transfers, kPpStream, kPpComm));
}

void StageBuilder::gradient_ready(const Param& param, TaskIndex producer) {
  if (!final_backward_ || param.count <= 0) return;
  const int which = param.expert ? 1 : 0;
  Bucket& b = bucket_[which];
  b.params += param.count;
  b.ready = producer;
  if (b.params >= bucket_limit() && p_.zero_stage < 3) flush_bucket(param.expert);
}

void StageBuilder::flush_bucket(bool expert) {
  Bucket& b = bucket_[expert ? 1 : 0];
  if (b.params <= 0) return;
  const std::int64_t elem = t_.grad_reduce_in_fp32 ? 4 : 2;
  const DataType dtype = t_.grad_reduce_in_fp32 ? DataType::kFp32 : d_.act;
  const bool scatter = p_.use_distributed_optimizer || p_.zero_stage >= 2;
  const std::int64_t group = expert ? (dp_ * d_.cp / std::max<std::int64_t>(1, d_.ep)) : dp_ * d_.cp;
  if (group > 1) {
    const CollectiveKind kind = scatter ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
    const std::string name = std::string(expert ? "expert_" : "") + (scatter ? "grad_reduce_scatter" : "grad_all_reduce");
    const auto saved_mb = mb_, saved_layer = layer_;
    mb_ = -1;
    grad_syncs_.push_back(collective(name, expert ? kExpertDpSlot : kDpSlot, kDpStream, kind, elem * b.params, dtype,
                                     kDpComm, {b.ready}));
    mb_ = saved_mb;
    layer_ = saved_layer;
  }
  b.params = 0;
}

void StageBuilder::finalize() {
  mb_ = -1;
  layer_ = -1;
  flush_bucket(false);
  flush_bucket(true);
  for (TaskIndex s : grad_syncs_) wait(s);
  const bool tied_split = !m_.untie_embeddings_and_output_weights && p_.pipeline_model_parallel_size > 1;
  if (tied_split && (info_.has_embedding || info_.has_output)) {
    // Tied embedding and output weights live on the first and last stage: sum their gradients.
    wait(collective("embedding_grad_all_reduce", kEmbeddingSlot, kDpStream, CollectiveKind::kAllReduce,
                    (t_.grad_reduce_in_fp32 ? 4 : 2) * d_.v * d_.h, t_.grad_reduce_in_fp32 ? DataType::kFp32 : d_.act,
                    kEmbeddingComm));
  }
  // Gradient clipping: local squared norm, then a sum over the model-parallel group.
  const std::int64_t shard = (p_.use_distributed_optimizer || p_.zero_stage >= 1) ? (info_.parameters + dp_ - 1) / dp_
                                                                                  : info_.parameters;
  compute("grad_norm", memory_op((t_.grad_reduce_in_fp32 ? 4 : 2) * shard), kOptimizer);
  if (p_.pipeline_model_parallel_size * d_.t > 1) {
    wait(collective("grad_norm_all_reduce", kModelParallelSlot, kDpStream, CollectiveKind::kAllReduce, 4, DataType::kFp32,
                    kOtherComm));
  }
  // Adam over the local shard (Megatron's fused multi-tensor kernel): read the gradient, fp32
  // master weight and both moments, write master and moments and the 16-bit weight copy.
  Kernel adam;
  adam.kernel_class = KernelClass::kOptimizer;
  adam.bytes = Bytes(shard * (4 + 4 + 4 + 4 + 4 + 4 + 4 + 2));
  adam.flops = Flops(12.0 * static_cast<double>(shard));
  compute("adam_step", adam, kOptimizer);
  const bool dist_opt = p_.use_distributed_optimizer || p_.zero_stage == 1 || p_.zero_stage == 2;
  if (dist_opt && dp_ * d_.cp > 1 && !t_.overlap_param_gather) {
    // Updated 16-bit parameters gathered back to every data-parallel rank.
    wait(collective("param_all_gather", kDpSlot, kDpStream, CollectiveKind::kAllGather, 2 * info_.parameters, d_.act,
                    kDpComm));
  }
}

void StageBuilder::build() {
  sim::RankClass& rc = g_.rank_class(cls_);
  rc.static_memory_bytes = info_.static_memory.total();

  const bool dist_opt = p_.use_distributed_optimizer || p_.zero_stage == 1 || p_.zero_stage == 2;
  if (dist_opt && dp_ * d_.cp > 1 && t_.overlap_param_gather) {
    // The previous optimizer step's parameter all-gathers, overlapped with this forward pass
    // (Megatron dispatches them bucket by bucket ahead of the forward pre-hooks).
    const std::int64_t chunks = static_cast<std::int64_t>(info_.chunks.size());
    for (std::int64_t c = 0; c < chunks; ++c) {
      param_gathers_.push_back(collective("param_all_gather", kDpSlot, kDpStream, CollectiveKind::kAllGather,
                                          2 * info_.parameters / chunks, d_.act, kDpComm));
    }
  }

  const std::vector<PipelineStep> steps =
      pipeline_steps(t_.pipeline_schedule, info_.stage, p_.pipeline_model_parallel_size,
                     static_cast<std::int64_t>(info_.chunks.size()), microbatches_);
  last_backward_step_.assign(info_.chunks.size(), -1);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == PipelineStep::Kind::kBackward) {
      last_backward_step_[static_cast<std::size_t>(steps[i].chunk)] = static_cast<std::int64_t>(i);
    }
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const PipelineStep& step = steps[i];
    switch (step.kind) {
      case PipelineStep::Kind::kForward:
        chunk_forward(step.microbatch, step.chunk);
        break;
      case PipelineStep::Kind::kBackward:
        final_backward_ = last_backward_step_[static_cast<std::size_t>(step.chunk)] == static_cast<std::int64_t>(i) ||
                          p_.zero_stage >= 3;
        chunk_backward(step.microbatch, step.chunk);
        if (final_backward_ && t_.overlap_grad_reduce) flush_bucket(false);
        final_backward_ = false;
        break;
      case PipelineStep::Kind::kCommunicate:
        communicate(step);
        break;
    }
  }
  finalize();
}

}  // namespace

Workload lower(const ModelSpec& model, const ParallelSpec& parallel, const TrainingSpec& training, std::int64_t num_gpus) {
  const std::int64_t tp = parallel.tensor_model_parallel_size;
  const std::int64_t pp = parallel.pipeline_model_parallel_size;
  const std::int64_t cp = parallel.context_parallel_size;
  const std::int64_t ep = parallel.expert_model_parallel_size;
  const std::int64_t dp = num_gpus / (tp * pp * cp);
  TRAINSIM_CHECK(dp >= 1 && dp * tp * pp * cp == num_gpus, "plan does not tile the GPUs");

  Workload w;
  w.layout = RankLayout(tp, cp, dp, pp, ep);
  w.data_parallel_size = dp;
  w.microbatches = training.global_batch_size / (training.micro_batch_size * dp);
  w.tokens_per_iteration = training.global_batch_size * model.seq_length;
  w.dims = layer_dims(model, parallel, training);
  w.flops = count_flops(model, parallel, training);

  const auto layers = split_layers(model, parallel);
  const LayerDims& d = w.dims;
  for (std::int64_t s = 0; s < pp; ++s) {
    StageInfo info;
    info.stage = s;
    info.chunks = layers[static_cast<std::size_t>(s)];
    info.has_embedding = s == 0;
    info.has_output = s == pp - 1;
    std::int64_t layer_count = 0;
    for (const auto& c : info.chunks) layer_count += c.second;
    // Per-GPU parameters: layer weights sharded over TP (experts also over EP), norms replicated.
    const std::int64_t bias = model.add_bias_linear ? 1 : 0;
    const std::int64_t norm = model.normalization == Normalization::kLayerNorm ? 2 * d.h : d.h;
    std::int64_t attn = d.h * d.qkv_width() + bias * d.qkv_width() + d.a * d.d * d.h + bias * d.h;
    std::int64_t mlp = d.h * d.fc1_width() + bias * d.fc1_width() + d.f * d.h + bias * d.h;
    if (d.experts > 0) mlp = mlp * d.local_experts + d.h * d.experts;
    info.parameters = layer_count * (attn + mlp + 2 * norm);
    if (info.has_embedding) info.parameters += d.v * d.h + (d.rope ? 0 : model.seq_length * d.h);
    if (info.has_output) {
      info.parameters += norm;
      if (model.untie_embeddings_and_output_weights || pp > 1) info.parameters += d.v * d.h;
    }
    info.static_memory = static_memory(info.parameters, dp * cp, parallel, training);
    w.stages.push_back(std::move(info));
  }

  // The graph: one rank class per pipeline stage; one simulated representative per stage.
  const std::int64_t world = w.layout.world();
  w.graph = sim::TaskGraph(static_cast<std::uint32_t>(world), stream_names(), comm_slot_names(), peer_slot_names());
  sim::TaskGraph& g = w.graph;
  for (std::int64_t s = 0; s < pp; ++s) g.add_class("stage " + std::to_string(s));
  std::vector<sim::RankId> reps;
  for (std::int64_t r = 0; r < world; ++r) {
    const RankCoord c = w.layout.coord(r);
    g.set_class_of(sim::RankId{static_cast<std::uint32_t>(r)}, static_cast<std::uint32_t>(c.pp));
    if (c.tp == 0 && c.cp == 0 && c.dp == 0) reps.push_back(sim::RankId{static_cast<std::uint32_t>(r)});
  }
  g.set_simulated(reps);

  // Communicators. `key` picks the coordinates that identify a group; `vary` enumerates members.
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
  add_groups(kTpSlot, [&](const RankCoord& c) { return ((c.pp * dp + c.dp) * cp + c.cp); }, stage_of);
  add_groups(kDpSlot, [&](const RankCoord& c) { return c.pp * tp + c.tp; }, stage_of);
  add_groups(kCpSlot, [&](const RankCoord& c) { return (c.pp * dp + c.dp) * tp + c.tp; }, stage_of);
  add_groups(kEpSlot, [&](const RankCoord& c) { return ((c.pp * (dp / ep) + c.dp / ep) * cp + c.cp) * tp + c.tp; },
             stage_of);
  add_groups(kExpertDpSlot, [&](const RankCoord& c) { return (c.pp * ep + c.dp % ep) * tp + c.tp; }, stage_of);
  if (pp > 1) {
    add_groups(kEmbeddingSlot,
               [&](const RankCoord& c) { return (c.pp == 0 || c.pp == pp - 1) ? (c.dp * cp + c.cp) * tp + c.tp : -1; },
               [](const RankCoord&) { return std::int64_t{0}; });
  }
  add_groups(kModelParallelSlot, [&](const RankCoord& c) { return c.dp * cp + c.cp; },
             [](const RankCoord&) { return std::int64_t{0}; });
  for (std::int64_t r = 0; r < world; ++r) {
    const RankCoord c = w.layout.coord(r);
    const auto rid = sim::RankId{static_cast<std::uint32_t>(r)};
    RankCoord next = c, prev = c;
    next.pp = (c.pp + 1) % pp;
    prev.pp = (c.pp + pp - 1) % pp;
    g.set_peer(rid, kPpNext, sim::RankId{static_cast<std::uint32_t>(w.layout.rank(next))});
    g.set_peer(rid, kPpPrev, sim::RankId{static_cast<std::uint32_t>(w.layout.rank(prev))});
    RankCoord cn = c, cpv = c;
    cn.cp = (c.cp + 1) % cp;
    cpv.cp = (c.cp + cp - 1) % cp;
    g.set_peer(rid, kCpNext, sim::RankId{static_cast<std::uint32_t>(w.layout.rank(cn))});
    g.set_peer(rid, kCpPrev, sim::RankId{static_cast<std::uint32_t>(w.layout.rank(cpv))});
  }
  g.set_reverse_peer_slot(kPpNext, kPpPrev);
  g.set_reverse_peer_slot(kPpPrev, kPpNext);
  g.set_reverse_peer_slot(kCpNext, kCpPrev);
  g.set_reverse_peer_slot(kCpPrev, kCpNext);

  for (std::int64_t s = 0; s < pp; ++s) {
    StageBuilder builder(g, static_cast<std::uint32_t>(s), model, parallel, training, d, w.stages[static_cast<std::size_t>(s)],
                         w.microbatches, dp);
    builder.build();
  }
  return w;
}

}  // namespace trainsim::models
