#pragma once
// How the model is split over GPUs and trained: Megatron-Core's parallelism and training
// options, with their names. Plain value types; validated where they are read (config/).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/task_graph.h"

namespace trainsim::models {

// Megatron-Core's cp_comm_type (--cp-comm-type): how Transformer Engine's attention exchanges the
// sequence under context parallelism. kP2p: the ring of K/V blocks (AttnFuncWithCPAndKVP2P);
// kA2a: all-to-alls of Q, K, V before and of the output after the attention, so that each rank
// attends over the whole sequence with 1/CP of the heads (AttnFuncWithCPAndQKVOA2A, DeepSpeed
// Ulysses, arXiv:2309.14509); kAllGather: K and V all-gathered before the attention and their
// gradients reduce-scattered after its backward (AttnFuncWithCPAndKVAllGather, the Llama 3
// paper's Sec. 3.3.2, arXiv:2407.21783). kA2aP2p: Megatron-Core's hierarchical "a2a+p2p" over
// hierarchical_context_parallel_sizes [A, B]: all-to-alls within groups of A consecutive CP ranks
// (Q, K, V to 1/A of the heads over A x the sequence, the output back), between them the ring over
// the B ranks at stride A (AttnFuncWithCPAndKVP2P with cp_group [a2a group, p2p group]; with A or
// B of 1 Transformer Engine runs the plain ring or the plain all-to-alls).
enum class CpCommType : std::uint8_t { kP2p, kA2a, kAllGather, kA2aP2p };

struct ParallelSpec {
  std::int64_t tensor_model_parallel_size = 1;
  std::int64_t pipeline_model_parallel_size = 1;
  std::int64_t virtual_pipeline_model_parallel_size = 1;
  std::int64_t context_parallel_size = 1;
  std::int64_t expert_model_parallel_size = 1;
  std::int64_t expert_tensor_parallel_size = 0;  // 0 = tensor_model_parallel_size (Megatron's default)
  CpCommType cp_comm_type = CpCommType::kP2p;
  // Megatron-Core's hierarchical_context_parallel_sizes (--hierarchical-context-parallel-sizes):
  // under cp_comm_type a2a+p2p, [all-to-all group size, ring size], their product the CP size
  // (parallel_state.py's create_hierarchical_groups: level 0 consecutive CP ranks, level 1 at
  // their stride). Empty otherwise.
  std::vector<std::int64_t> hierarchical_context_parallel_sizes;
  // The ranks one all-to-all of the attention spans: the CP size under a2a, the first
  // hierarchical size under a2a+p2p, else 1.
  std::int64_t cp_a2a_size() const {
    if (cp_comm_type == CpCommType::kA2a) return context_parallel_size;
    if (cp_comm_type == CpCommType::kA2aP2p && !hierarchical_context_parallel_sizes.empty()) return hierarchical_context_parallel_sizes.front();
    return 1;
  }
  // What Transformer Engine runs (attn_forward_func_with_cp): the all-to-alls alone under a2a, or
  // a2a+p2p with a ring of one rank; a2a+p2p with an all-to-all group of one rank is the ring.
  bool cp_runs_all_to_all() const {
    return cp_comm_type == CpCommType::kA2a || (cp_comm_type == CpCommType::kA2aP2p && cp_a2a_size() == context_parallel_size);
  }
  // a2a+p2p with both levels longer than one rank: its all-to-all group's size; 1 otherwise.
  std::int64_t cp_hierarchical_a2a_size() const {
    const std::int64_t a = cp_a2a_size();
    return cp_comm_type == CpCommType::kA2aP2p && a > 1 && a < context_parallel_size ? a : 1;
  }
  // Interleaved schedule: micro-batches run per model chunk before switching chunks; 0 = the
  // pipeline size (Megatron-Core's default).
  std::int64_t microbatch_group_size_per_vp_stage = 0;
  bool sequence_parallel = false;
  bool use_distributed_optimizer = false;
  // 0 | 1 | 2 | 3. 1 = distributed optimizer; 2 = also gradients sharded (reduce-scattered every
  // micro-batch); 3 = FSDP: also parameters, gathered per layer in forward and backward.
  int zero_stage = 0;
  // Megatron-Core's num_distributed_optimizer_instances (--num-distributed-optimizer-instances;
  // PyTorch's HSDP): the data-parallel (x context-parallel) group splits into this many groups of
  // consecutive ranks (parallel_state.py's intra_partial_data_parallel_group_with_cp). The sharded
  // state (optimizer; with ZeRO 2/3 gradients and parameters) is sharded within a group and
  // replicated across groups: gradients are reduce-scattered within the group, then each shard is
  // all-reduced across the groups (the inter-instance group: the same position in every group;
  // param_and_grad_buffer.py's start_grad_sync), and parameters are gathered within the group.
  // Experts' state is split the same way over the expert-data-parallel group (its intra- and
  // inter-partial expert-data-parallel groups).
  std::int64_t num_distributed_optimizer_instances = 1;
  // Ranks over which the sharded state is divided, for a data-parallel group of `dp` ranks (the
  // dense parameters' dp x cp, or the experts' expert-data-parallel size).
  std::int64_t shard_group_size(std::int64_t dp) const {
    return num_distributed_optimizer_instances > 1 ? dp / num_distributed_optimizer_instances : dp;
  }
  std::int64_t etp() const { return expert_tensor_parallel_size > 0 ? expert_tensor_parallel_size : tensor_model_parallel_size; }
  std::int64_t vp_group() const {
    return microbatch_group_size_per_vp_stage > 0 ? microbatch_group_size_per_vp_stage : pipeline_model_parallel_size;
  }
  bool shards_optimizer() const { return use_distributed_optimizer || zero_stage >= 1; }
  std::optional<std::int64_t> decoder_first_pipeline_num_layers;
  std::optional<std::int64_t> decoder_last_pipeline_num_layers;
  // Megatron-Core's pipeline_model_parallel_layout (config/pipeline_layout.h) as written, and
  // the transformer layers of each of its P x V virtual stages (virtual stage i is model chunk
  // i / P of pipeline rank i % P). Empty: layers split evenly, after decoder_first/last.
  std::string pipeline_model_parallel_layout;
  std::vector<std::int64_t> layout_layers;
  std::int64_t layout_mtp_layers = 0;  // the layout's multi-token-prediction layers ('m')
  // Megatron-Core's account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split:
  // the embedding (the loss, with the output layer) counts as one layer in the even split, and
  // the first (last) virtual stage builds one transformer layer fewer.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  bool accounts_in_split() const {
    return account_for_embedding_in_pipeline_split || account_for_loss_in_pipeline_split;
  }
  // The units the even split divides: the transformer layers, plus one for each of the
  // embedding and the loss counted as a layer.
  std::int64_t split_units(std::int64_t num_layers) const {
    return num_layers + (account_for_embedding_in_pipeline_split ? 1 : 0) + (account_for_loss_in_pipeline_split ? 1 : 0);
  }
  // What counts as layers besides the transformer layers, for messages: "the embedding and the
  // loss", "the embedding", "the loss" or "" (neither).
  const char* counted_in_split() const {
    if (account_for_embedding_in_pipeline_split && account_for_loss_in_pipeline_split) return "the embedding and the loss";
    if (account_for_embedding_in_pipeline_split) return "the embedding";
    return account_for_loss_in_pipeline_split ? "the loss" : "";
  }
};

enum class Precision : std::uint8_t { kBf16, kFp16, kFp8, kFp4 };
// How Transformer Engine scales FP8 tensors (Megatron-Core's --fp8-recipe): "delayed" (one scale
// per tensor from an amax history, reduced over the amax group at the end of each pass),
// "tensorwise" (current scaling: the tensor's own amax, one extra read), "mxfp8" (one E8M0 scale
// per 32 consecutive elements, row-wise and column-wise copies quantized separately; Blackwell).
// Under precision fp4 (Megatron-Core's --fp4-format e2m1) the one recipe is "nvfp4" (Transformer
// Engine's NVFP4BlockScaling: E2M1 values with one E4M3 scale per 16 consecutive elements and an
// FP32 scale per tensor from its amax; row-wise and column-wise copies quantized separately from
// the 16-bit tensor, weights in 16x16 blocks; Blackwell).
enum class QuantRecipe : std::uint8_t { kDelayed, kTensorwise, kMxfp8, kNvfp4 };
enum class RecomputeGranularity : std::uint8_t { kNone, kSelective, kFull };
enum class RecomputeMethod : std::uint8_t { kUniform, kBlock };
enum class AttentionKernel : std::uint8_t { kFlash, kUnfused };
// Megatron-Core's moe_token_dispatcher_type: "alltoall" (NCCL all-to-alls of each token-expert
// pair) or "flex" with DeepEP (each token crosses to a node once, then NVLink forwarding).
enum class TokenDispatcher : std::uint8_t { kAllToAll, kFlex };
enum class PipelineSchedule : std::uint8_t { kGpipe, k1F1B, kInterleaved };

const char* to_string(Precision p);
// The data type of the tensor cores a precision's GEMMs run on: FP8 and FP4 for the quantized
// precisions, else 16-bit (the peak MFU divides by, as Megatron-Bridge and DGX Cloud count it).
inline sim::DataType tensor_core_type(Precision p) {
  return p == Precision::kFp4 ? sim::DataType::kFp4 : p == Precision::kFp8 ? sim::DataType::kFp8 : sim::DataType::kBf16;
}
const char* to_string(QuantRecipe r);
const char* to_string(RecomputeGranularity g);
const char* to_string(RecomputeMethod m);
const char* to_string(AttentionKernel k);
const char* to_string(PipelineSchedule s);
const char* to_string(CpCommType c);
const char* to_string(TokenDispatcher d);  // Megatron's names: "alltoall", "flex"


// How reports name a context-parallel exchange other than the ring: "all-to-all", "all-gather",
// "all-to-all 4 x ring 2" (a2a+p2p with its sizes); "" for the ring.
std::string cp_comm_label(const ParallelSpec& p);

// What interrupts a long run and what it costs to come back (report/reliability.h): the inputs
// of the expected time to train with checkpoint-restart.
struct ReliabilitySpec {
  // GPU-hours between job-stopping interruptions, per GPU: a job on N GPUs is interrupted every
  // gpu_mtbf_hours / N hours on average (every cause counted against the GPUs: the job stops
  // whatever failed). Llama 3's 419 unexpected interruptions in 54 days on 16,384 H100 give
  // 50,677 (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.4).
  double gpu_mtbf_hours = 0;
  // From an interruption to training again: detection, replacing the node, relaunch, loading
  // the last checkpoint.
  double restart_minutes = 0;
  // Storage write bandwidth of all writers together (GB/s).
  double checkpoint_write_GBps = 0;
  // Megatron's --async-save: training stops only while each GPU copies its shard to host memory;
  // the write runs behind and must end before the next save begins.
  bool async_checkpoint = false;
  // Megatron's --save-interval, in iterations; absent: the interval that maximises goodput.
  std::optional<std::int64_t> checkpoint_interval_iterations;
  // Hot spare nodes held beside the job's, and the hours a failed node takes to come back to the
  // pool (diagnosis, repair or replacement): each interruption swaps the failed node for a spare,
  // or, with every spare in repair, waits for the first to return. Absent: a spare is always there.
  std::optional<std::int64_t> spare_nodes;
  // "spare_nodes": "cheapest": the count that minimises the GPU-hours held per unit of work
  // (report/reliability.h), chosen for each plan; spare_nodes is then absent.
  bool cheapest_spares = false;
  double node_repair_hours = 0;
  // With spare nodes: the share of interruptions that take a node out for repair (the rest, a
  // software fault or a job that only restarts, need no spare). Llama 3 attributes about 78% of its
  // unexpected interruptions to confirmed or suspected hardware issues (Dubey et al. 2024,
  // section 3.3.4, Table 5); 1, the default, sends a node to repair each time.
  double node_repair_share = 1;
  // With spare nodes: how often an idle node (a spare, or one of the job's while it waits for a
  // repair) goes to repair, as a share of a working node's rate of interruptions that take a node
  // out (gpus_per_node x node_repair_share / gpu_mtbf_hours). 0, the default: faults show under
  // load, so a faulty idle node fails once it works, which the job's measured rate already counts
  // (no rate of idle nodes is published); 1: idle hardware fails as working hardware does.
  double idle_failure_share = 0;

  // Spares in the model at all: a count or the cheapest one.
  bool has_spares() const { return spare_nodes.has_value() || cheapest_spares; }
};

struct TrainingSpec {
  std::int64_t micro_batch_size = 1;
  std::int64_t global_batch_size = 1;
  Precision precision = Precision::kBf16;
  QuantRecipe quant_recipe = QuantRecipe::kDelayed;  // with precision fp8 (kNvfp4 with fp4)
  // Megatron-Core's --fp8-param-gather (with a sharded optimizer): the FP8 GEMMs' weights are
  // kept only as FP8 copies (no 16-bit copy), the optimizer quantizes its fp32 shard straight to
  // FP8 (Transformer Engine's cast_master_weights_to_fp8) and the data-parallel gather moves the
  // FP8 bytes: the row-wise copy under per-tensor scaling (Hopper makes the transpose after the
  // gather), both copies under MXFP8 and NVFP4. Under precision fp4 it is Megatron-Core's
  // --fp4-param-gather, the same with the NVFP4 copies.
  bool fp8_param_gather = false;
  bool quantized() const { return precision == Precision::kFp8 || precision == Precision::kFp4; }
  // Sets the precision; fp4 brings its one recipe (NVFP4), the others keep quant_recipe.
  void set_precision(Precision p) {
    precision = p;
    if (p == Precision::kFp4) quant_recipe = QuantRecipe::kNvfp4;
  }
  // FP8 with Transformer Engine's delayed scaling (the recipe several Megatron-Core options refuse).
  bool delayed_scaling() const { return precision == Precision::kFp8 && quant_recipe == QuantRecipe::kDelayed; }
  // Megatron-Core's first_last_layers_bf16 with num_layers_at_start_in_bf16 /
  // num_layers_at_end_in_bf16 (0 when off): the first and last decoder layers of the model run
  // their GEMMs in 16 bits (fp8_utils.py, is_first_last_bf16_layer, by global layer index).
  std::int64_t bf16_layers_at_start = 0;
  std::int64_t bf16_layers_at_end = 0;
  bool quantized_layer(std::int64_t layer, std::int64_t num_layers) const {
    return quantized() && layer >= bf16_layers_at_start && (layer >= num_layers || layer < num_layers - bf16_layers_at_end);
  }
  // Megatron-Core's cpu_offloading with cpu_offloading_num_layers (0 when off): Transformer
  // Engine's default offload schedule (cpu_offload.py, DefaultOffloadSynchronizer) copies the
  // saved activations of the model's first `cpu_offload_layers` layers to pinned host memory as
  // their forward ends, and back before their backward; at most num_layers - cpu_offload_layers
  // layers' activations stay on the GPU.
  std::int64_t cpu_offload_layers = 0;
  // Transformer Engine's first offload scheduler (cpu_offload_v1.py, AsyncDoubleBufferGroupOffloadHandler:
  // the only one before 2.10, NVTE_CPU_OFFLOAD_V1=1 since): offloads and copies back spaced over
  // the layers by a window map, each synchronised with the compute stream at window points.
  bool cpu_offload_v1 = false;
  RecomputeGranularity recompute_granularity = RecomputeGranularity::kNone;
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;
  std::int64_t recompute_num_layers = 1;
  // Megatron-Core's recompute_modules under selective granularity: the attention core
  // ("core_attn", the default), MLA's up projections with their rotary embedding
  // ("mla_up_proj"), the dense layers' MLP ("mlp": TransformerLayer checkpoints self.mlp) and
  // the whole MoE layer ("moe": MoELayer checkpoints routing, dispatch, experts, combine and the
  // shared experts, so the expert-parallel all-to-alls run again in the backward pass), the
  // normalisations that are modules of their own ("layernorm": TransformerLayer's
  // recompute_input_layernorm / recompute_pre_mlp_layernorm, CheckpointWithoutOutput; under
  // Transformer Engine's spec the input norm is fused into the QKV projection unless attention is
  // latent, and the pre-MLP norm into fc1 unless the layer is an MoE one) and the experts'
  // activation ("moe_act": TEGroupedMLP's activation_recompute).
  bool recompute_core_attn = true;
  bool recompute_mla_up_proj = false;
  bool recompute_mlp = false;
  bool recompute_moe = false;
  bool recompute_layernorm = false;
  bool recompute_moe_act = false;
  bool recomputes_core_attention() const {
    return recompute_granularity == RecomputeGranularity::kSelective && recompute_core_attn;
  }
  bool recomputes_mla_up_proj() const {
    return recompute_granularity == RecomputeGranularity::kSelective && recompute_mla_up_proj;
  }
  // The selected modules, comma-separated in Megatron's names ("" unless selective).
  std::string recompute_modules() const;
  bool recomputes_mlp() const { return recompute_granularity == RecomputeGranularity::kSelective && recompute_mlp; }
  bool recomputes_moe() const { return recompute_granularity == RecomputeGranularity::kSelective && recompute_moe; }
  bool recomputes_layernorm() const { return recompute_granularity == RecomputeGranularity::kSelective && recompute_layernorm; }
  bool recomputes_moe_act() const { return recompute_granularity == RecomputeGranularity::kSelective && recompute_moe_act; }
  // Megatron checkpoints each multi-token-prediction module (its projection and layer) under full
  // recomputation with the uniform method only (MultiTokenPredictionLayer; block: a warning, none).
  bool recomputes_mtp_modules() const {
    return recompute_granularity == RecomputeGranularity::kFull && recompute_method == RecomputeMethod::kUniform;
  }
  AttentionKernel attention_kernel = AttentionKernel::kFlash;
  // Which fused-attention implementation's calibration prices the flash kernels: empty = the GPU
  // calibration's own (cuDNN on H100, FlashAttention-2 on A100); otherwise one of its
  // flash_attention_alternatives (e.g. "flash_attention_2" on H100, for stacks without cuDNN's
  // or FlashAttention-3's Hopper kernels).
  std::string attention_implementation;
  PipelineSchedule pipeline_schedule = PipelineSchedule::k1F1B;
  bool overlap_grad_reduce = true;
  // Megatron's align_grad_reduce (default on): gradient reductions start at the same time on
  // every pipeline stage rather than as each bucket becomes ready on stages after the first.
  bool align_grad_reduce = true;
  bool overlap_param_gather = false;
  // Megatron's align_param_gather (--no-align-param-gather turns it off; Megatron-LM
  // arguments.py, default on, and NeMo's MegatronCommOverlapCallback sets it with virtual
  // stages): under the interleaved schedule with overlap_param_gather, every pipeline stage
  // dispatches the all-gathers of all buckets of its first two model chunks when the schedule
  // starts, and those of chunk c + 1 at the forward pass `stage` virtual micro-batches before
  // its own first forward of chunk c (schedules.py, forward_step_helper_preprocess); the forward
  // pre-hook then only waits. Off, or under the other schedules (arguments.py turns it off
  // without virtual stages), each stage dispatches a bucket's gather in the pre-hook of the
  // bucket before it (one bucket prefetched).
  bool align_param_gather = true;
  // Megatron-Core's overlap_param_gather_with_optimizer_step (optimizer/__init__.py: the first
  // model chunk gets an optimizer of its own; ChainedOptimizer.step_with_ready_grads dispatches
  // that chunk's parameter all-gathers as soon as its step is done, while the other chunks'
  // step runs, and the next iteration's forward only waits for them). Every chunk's gradients
  // then form one bucket (training.py: disable_bucketing). In trainsim's one steady-state
  // iteration the first chunk's gathers run after its share of the Adam step, and no longer
  // before its first forward pass.
  bool overlap_param_gather_with_optimizer_step = false;
  bool tp_comm_overlap = false;
  // Megatron's --transformer-impl: Transformer Engine's layers (true) or Megatron's own "local"
  // ones (and stacks that are not Megatron-Core at all), and --gradient-accumulation-fusion (on by
  // default): weight gradients accumulated straight into the main gradients. Together they keep
  // Transformer Engine's placeholder weight gradients (StaticMemory::wgrad_placeholders).
  bool transformer_engine = true;
  bool gradient_accumulation_fusion = true;
  bool wgrad_placeholders() const { return transformer_engine && gradient_accumulation_fusion; }
  // Megatron-Core's --cross-entropy-loss-fusion with --cross-entropy-fusion-impl: "native"
  // (fusions/fused_cross_entropy.py: the same passes and fp32 softmax as the unfused
  // vocab-parallel cross-entropy, in fewer kernels; priced as unfused) or "te" (Transformer
  // Engine's parallel_cross_entropy: see te_cross_entropy()).
  bool cross_entropy_loss_fusion = false;
  bool cross_entropy_fusion_te = false;
  // Transformer Engine's fused cross-entropy (pytorch/triton/cross_entropy.py, releases 2.x up to
  // 2.17): an online-softmax pass over the 16-bit logits, one all-gather of each row's max, sum
  // and target logit over the TP group, and a pass that writes the loss and the logits gradient
  // in place into the logits, which are kept for the backward instead of an fp32 softmax.
  bool te_cross_entropy() const { return cross_entropy_loss_fusion && cross_entropy_fusion_te; }
  // How MoE layers exchange tokens (Megatron-Core's moe_token_dispatcher_type; "flex" with
  // moe_enable_deepep / moe_flex_dispatcher_backend "deepep").
  TokenDispatcher moe_token_dispatcher_type = TokenDispatcher::kAllToAll;
  // Megatron-LM's --async-tensor-model-parallel-allreduce (default on since 2021-09, commit
  // 16c90445 "ColumnParallelLinearWithAsyncAllreduce"): without sequence parallelism a column-
  // parallel layer's input-gradient all-reduce overlaps its weight-gradient GEMM. Off, the
  // all-reduce blocks the compute stream (Megatron-LM before that commit: the backward of
  // copy_to_tensor_model_parallel_region all-reduces synchronously, as in the SC'21 runs).
  bool async_tensor_model_parallel_allreduce = true;
  bool overlap_p2p_comm = false;
  // Megatron-Core's overlap_moe_expert_parallel_comm ("EP A2A overlap", combined_1f1b.py and
  // model_chunk_schedule_plan.py): in the 1F1B steady state one micro-batch's forward pass runs
  // layer by layer with another's backward pass, so that each MoE layer's token all-to-alls,
  // issued on their own stream, run while the other pass computes (a layer pair: the backward
  // combine beside the forward attention; the forward and backward dispatches beside the expert
  // backward and forward; the forward combine beside the backward attention). The interleaved
  // schedule warms up one forward pass more. delay_wgrad_compute: the experts' weight-gradient
  // GEMMs run after the backward dispatch is issued, beside it.
  bool overlap_moe_expert_parallel_comm = false;
  bool delay_wgrad_compute = false;
  // Megatron-Core's moe_shared_expert_overlap (shared_experts.py, SharedExpertMLP on its own CUDA
  // stream, driven by the token dispatcher): the shared expert computes while the layer's tokens
  // travel. alltoall dispatcher (token_dispatcher.py, MoEAlltoAllTokenDispatcher): fc1 and the
  // activation beside the dispatch all-to-all, fc2 beside the combine all-to-all; flex (Megatron-
  // Core main, MoEFlexTokenDispatcher): fc1 beside the dispatch, fc2 after the combine. Backward
  // (autograd's order, arranged by sequence numbers): fc2's gradients beside the combine's
  // backward all-to-all, the activation's and fc1's beside the dispatch's.
  bool moe_shared_expert_overlap = false;
  // Megatron-Core's moe_use_grouped_tensor (transformer_config.py; off by default): the expert
  // GEMMs through Transformer Engine's GroupedTensor, one cuBLASLt grouped GEMM kernel over all
  // local experts (nvte_grouped_gemm, transformer_engine/common/gemm/cublaslt_grouped_gemm.cu,
  // TE b9f4013, 2026-01; needs cuBLAS 13.3+), priced as one kernel whose tiles of every group
  // share the waves. Off: GroupedLinear's one cuBLAS GEMM per expert, one after another.
  bool moe_use_grouped_tensor = false;
  // Megatron-Core's moe_grouped_gemm. On (the NeMo 2, Megatron-Bridge and later DGX Cloud MoE
  // recipes set it; DGX Cloud's 24.11 Grok-1 yaml sets it off; the dataclass defaults to off):
  // TEGroupedMLP, the local experts' GEMMs through one GroupedLinear, their activation as one
  // kernel and, in FP8, their inputs cast by one multi-tensor kernel. Off: SequentialMLP
  // (experts.py), a Python loop over the local experts, each its own MLP (its GEMMs, as
  // GroupedLinear's, one cuBLAS GEMM per expert; its activation and its FP8 casts one kernel per
  // expert), the outputs joined by torch.cat.
  bool moe_grouped_gemm = true;
  // Megatron-LM's --scatter-gather-tensors-in-pipeline (Narayanan et al. 2021, Sec. 4.1, "scatter/
  // gather communication optimization"; on by default from commit 72e4230b, 2021-02-16, until
  // p2p_communication.py moved into Megatron Core, commit 39b83c79, 2023-01-31, which dropped it).
  // Without sequence parallelism every tensor-parallel rank holds the whole activation; with it
  // each rank sends only its 1/TP slice to the next stage, and the receiver all-gathers the slices
  // over the tensor-parallel group (NVLink) before using them. Off (Megatron Core): every rank
  // sends the whole tensor.
  bool scatter_gather_tensors_in_pipeline = false;
  bool grad_reduce_in_fp32 = true;
  // Megatron-Core's precision-aware optimizer (--use-precision-aware-optimizer, Transformer
  // Engine's FusedAdam; distributed optimizer only): Adam's moments in exp_avg_dtype /
  // exp_avg_sq_dtype (fp32, bf16 or fp16: 4 or 2 bytes each). Unless the weights are FP8 under a
  // scaling other than delayed (use_precision_aware_optimizer_no_fp8_or_ds_fp8, optimizer_config.py),
  // FusedAdam also holds the fp32 master weights and reads the 16-bit gradients as they are (no
  // fp32 copy), and with store_param_remainders (default on) over bf16 weights keeps only the 16
  // bits of each master weight the bf16 weight lacks (FP8 weights that are gathered have none).
  bool use_precision_aware_optimizer = false;
  bool exp_avg_16bit = false;     // exp_avg_dtype: fp32 (false), or bf16 or fp16
  bool exp_avg_sq_16bit = false;  // exp_avg_sq_dtype, the same
  bool store_param_remainders = true;
  // NeMo 1's distributed_fused_adam (optim.name; NeMo's MegatronDistributedFusedAdam over Apex's
  // DistributedFusedAdam) instead of Megatron-Core's distributed optimizer, with Adam's state in
  // optim.dtype (fp32 by default, or bf16). NeMo v2.0.0 (the 24.09 container),
  // megatron_base_model.py setup_optimization, decides what it keeps beside the moments: with
  // fp8_params a master copy in that dtype (store_params); with the state in the weights' dtype
  // none (the bf16 weight is the master); with fp32 state over bf16 weights the 16 bits each bf16
  // weight lacks (store_param_remainders). Its fused step reads the gradients in their reduced
  // dtype (grad_sync_dtype): no fp32 copy. The parameter gather is the distributed optimizer's.
  bool apex_distributed_adam = false;
  bool optimizer_state_16bit = false;  // optim.dtype bf16 (apex_distributed_adam only)
  bool optimizer_holds_master_weights() const {
    // Megatron-Core asks about FP8 only: NVFP4 leaves fp8_recipe at its default, delayed.
    return use_precision_aware_optimizer && (precision != Precision::kFp8 || quant_recipe == QuantRecipe::kDelayed);
  }
  // Bytes per element of the main gradients, as reduced over data parallelism.
  std::int64_t main_grad_bytes() const { return grad_reduce_in_fp32 ? 4 : 2; }
  // 16-bit main gradients are cast to fp32 copies for the optimizer step
  // (MixedPrecisionOptimizer._copy_model_grads_to_main_grads), unless the optimizer reads them as
  // they are.
  bool copies_grads_to_fp32() const {
    return !grad_reduce_in_fp32 && !optimizer_holds_master_weights() && !apex_distributed_adam;
  }
  // Bytes per parameter of the master weight and Adam's two moments.
  std::int64_t optimizer_state_bytes() const {
    const bool bf16_weights = precision == Precision::kBf16 || (quantized() && !fp8_param_gather);
    if (apex_distributed_adam) {
      const std::int64_t state = optimizer_state_16bit ? 2 : 4;
      const bool fp8_params = quantized() && fp8_param_gather;
      std::int64_t master = state;  // store_params
      if (!fp8_params && bf16_weights) master = optimizer_state_16bit ? 0 : 2;
      return master + 2 * state;
    }
    const bool remainders = optimizer_holds_master_weights() && store_param_remainders && bf16_weights;
    return (remainders ? 2 : 4) + (exp_avg_16bit ? 2 : 4) + (exp_avg_sq_16bit ? 2 : 4);
  }
  // Parameters per gradient bucket; 0 = Megatron's default, max(40M, 1M x data-parallel size).
  std::int64_t ddp_bucket_size = 0;
  std::optional<double> train_tokens;
  std::optional<ReliabilitySpec> reliability;
};

// Megatron-Core's recompute_modules trainsim models, in Megatron's names, and the flag each sets:
// the one list the scenario reader accepts and recompute_modules() prints.
struct RecomputeModule {
  const char* name;
  bool TrainingSpec::*flag;
};
inline constexpr RecomputeModule kRecomputeModules[] = {{"core_attn", &TrainingSpec::recompute_core_attn},
                                                        {"mla_up_proj", &TrainingSpec::recompute_mla_up_proj},
                                                        {"mlp", &TrainingSpec::recompute_mlp},
                                                        {"moe", &TrainingSpec::recompute_moe},
                                                        {"layernorm", &TrainingSpec::recompute_layernorm},
                                                        {"moe_act", &TrainingSpec::recompute_moe_act}};

inline std::string TrainingSpec::recompute_modules() const {
  if (recompute_granularity != RecomputeGranularity::kSelective) return "";
  std::string out;
  for (const RecomputeModule& m : kRecomputeModules) {
    if (this->*m.flag) out += (out.empty() ? "" : ", ") + std::string(m.name);
  }
  return out;
}

}  // namespace trainsim::models
