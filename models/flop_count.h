#pragma once
// FLOP accounting with Megatron's conventions. Model FLOPs follow Megatron-LM's
// num_floating_point_operations (training.py): 3 GEMM passes (forward, dgrad, wgrad) x 2 FLOPs
// per MAC over the attention projections, the s^2 score and value products, the MLP (3 GEMMs
// for SwiGLU, topk experts for MoE) and the logits; for GPT shapes this is Narayanan et al.
// 2021 Eq. 3 without its recompute term. Hardware FLOPs add the forward work that activation
// recomputation repeats (Eq. 3 itself under full recomputation).

#include <cstdint>

#include "models/model_spec.h"
#include "models/training_spec.h"

namespace trainsim::models {

struct FlopCount {
  double model = 0;     // per iteration, whole job
  double hardware = 0;  // including recomputation
};

// Model FLOPs of `samples` sequences of the model's sequence length (vocabulary padded for
// tensor-parallel size `tp`, as Megatron pads it).
double model_flops(const ModelSpec& m, double samples, std::int64_t tp = 1);
// Forward FLOPs of one layer for one sequence (the mean layer when MoE and dense layers mix), and
// of its attention core alone.
double layer_forward_flops(const ModelSpec& m);
double attention_core_forward_flops(const ModelSpec& m);

FlopCount count_flops(const ModelSpec& m, const ParallelSpec& p, const TrainingSpec& t);

}  // namespace trainsim::models
