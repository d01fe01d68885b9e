#pragma once
// Memory per GPU: parameters, gradients and optimizer state with Megatron's mixed-precision
// layout, and the activations a layer keeps for its backward pass, derived tensor by tensor as
// in Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// Section 4 and Table 2 (34sbh + 5as^2b per layer without parallelism, divided by t under
// tensor + sequence parallelism; the 5as^2b score-matrix term only for unfused attention).
// Extensions beyond the paper, each cited where it is computed: flash attention's saved
// statistics, grouped-query attention, SwiGLU, mixture-of-experts tensors, Transformer Engine's
// FP8 copies of GEMM inputs and its cached placeholder weight gradients.

#include <cstdint>

#include "models/layer_dims.h"
#include "models/model_spec.h"
#include "models/training_spec.h"

namespace trainsim::models {

// Bytes one layer keeps per micro-batch. `selective`: the attention core is recomputed.
std::int64_t layer_activation_bytes(const LayerDims& d, bool selective);
// Full recomputation keeps only the layer (group) input.
std::int64_t layer_checkpoint_bytes(const LayerDims& d);
// Extra activations of the first stage (embedding dropout mask) and the last stage (final norm,
// logits input and the fp32 softmax the vocab-parallel cross-entropy keeps).
std::int64_t embedding_activation_bytes(const LayerDims& d);
std::int64_t output_activation_bytes(const LayerDims& d);
// What one multi-token-prediction module keeps per micro-batch: the normalised embedding and
// hidden inputs of its projection, its layer's activations (`layer`: the dims of its kind), and
// its final norm, logits input and fp32 softmax as the output layer keeps them; under full
// uniform recomputation (`checkpointed`, Megatron's MTP checkpoint) only its two inputs and the
// output part.
std::int64_t mtp_activation_bytes(const LayerDims& layer, const LayerDims& d, bool selective, bool checkpointed);

// Parameters held by one GPU of a stage, split by how they are sharded and reduced.
struct StageParameters {
  std::int64_t dense = 0;   // replicated over the data-parallel (x context-parallel) group
  std::int64_t expert = 0;  // replicated over the expert-data-parallel group
  std::int64_t fp8_gemm = 0;  // weights of GEMMs Transformer Engine runs in FP8 (0 unless fp8)
  // One weight of each distinct GEMM shape of the stage's layers (attention projections, the
  // dense MLP, one expert, the shared expert): the sizes of Transformer Engine's cached placeholder
  // weight gradients (see StaticMemory::wgrad_placeholders).
  std::int64_t distinct_gemm_weights = 0;
  std::int64_t total() const { return dense + expert; }
};

// Parameters whose optimizer step one GPU runs: its shard of each group when the optimizer is
// sharded (dense over `dp` ranks, expert over `expert_dp`), else all of them.
std::int64_t optimizer_shard_params(const StageParameters& params, std::int64_t dp, std::int64_t expert_dp, bool sharded);

// Bytes a data-parallel gather of `params` parameters moves, `fp8` of them FP8 GEMM weights: 16
// bits each, but fp8_param_gather's quantized weights (gathered_quantized_param_bytes) when the
// model is quantized.
std::int64_t param_gather_bytes(std::int64_t params, std::int64_t fp8, bool quantized, const TrainingSpec& t, QuantRecipe r);

struct StaticMemory {
  std::int64_t weights = 0;            // 16-bit parameters and FP8 copies under fp8
  std::int64_t gradients = 0;          // main gradients (fp32 or 16-bit), wgrad_placeholders included
  // Transformer Engine (2.3 on) with Megatron's fused gradient accumulation hands autograd a
  // placeholder weight gradient, one cached tensor per distinct weight shape and dtype for the
  // life of the process (module/base.py get_dummy_wgrad, NVIDIA/TransformerEngine#1651): 2 B x
  // StageParameters::distinct_gemm_weights. Part of `gradients`.
  std::int64_t wgrad_placeholders = 0;
  std::int64_t optimizer_states = 0;   // fp32 master weights and Adam moments (sharded or not)
  std::int64_t total() const { return weights + gradients + optimizer_states; }
};

// Static memory of one GPU: dense parameters replicated over `dp` ranks, expert parameters over
// `expert_dp` ranks.
StaticMemory static_memory(const StageParameters& params, std::int64_t dp, std::int64_t expert_dp, const ParallelSpec& p,
                           const TrainingSpec& t, const TargetGpu& gpu = {});

}  // namespace trainsim::models
