#pragma once
// build_stage(): writes the task program of one pipeline stage (one rank class) for one
// training iteration, in the order Megatron-Core issues the work: the schedule's forward and
// backward passes with their point-to-point batches; per layer the kernels and the tensor-,
// context- and expert-parallel communication; data-parallel gradient buckets, the distributed
// optimizer's parameter gathers or ZeRO-3's per-layer gathers and reduce-scatters; the
// gradient finalisation and the optimizer step. Tasks record the memory they allocate and
// free, so the engine's peak per stage reflects the micro-batches the schedule keeps in flight.

#include <cstdint>

#include "models/layer_dims.h"
#include "models/lowering.h"
#include "models/memory_model.h"
#include "models/model_spec.h"
#include "models/training_spec.h"
#include "sim/task_graph.h"

namespace trainsim::models {

struct StageContext {
  const ModelSpec& model;
  const ParallelSpec& parallel;
  const TrainingSpec& training;
  const LayerDims& dims;
  const StageInfo& info;
  std::int64_t microbatches = 1;  // per data-parallel rank
  std::int64_t dp = 1;            // data-parallel size (without context parallelism)
  std::int64_t expert_dp = 1;     // expert-data-parallel size
};

// Fills rank class `cls` of `graph` (its communicator and peer slots must already be set).
void build_stage(sim::TaskGraph& graph, std::uint32_t cls, const StageContext& ctx);

// Parameters of one model part on one GPU: the embedding (first stage) and the final norm plus
// output layer (last stage), as Megatron places them.
std::int64_t embedding_params(const ModelSpec& m, const LayerDims& d);
std::int64_t output_params(const ModelSpec& m, const ParallelSpec& p, const LayerDims& d);
// The multi-token-prediction modules on one GPU of the last stage: per module a layer of the last
// decoder layer's kind, the 2h x h projection (column-parallel) and three norms; plus, split over
// stages with untied embeddings, the word embedding the modules look up, which the last stage
// then holds a copy of (Megatron builds it where mtp_process, and sums its gradients with the
// first stage's). Zero without multi-token prediction.
StageParameters mtp_params(const ModelSpec& m, const ParallelSpec& p, const TrainingSpec& t, const LayerDims& d);
std::int64_t mtp_embedding_copy_params(const ModelSpec& m, const ParallelSpec& p, const LayerDims& d);
// One module's eh_proj on one GPU: 2h x h, column-parallel, no bias.
inline std::int64_t mtp_projection_params(const LayerDims& d) { return 2 * d.h * d.h / d.t; }

}  // namespace trainsim::models
