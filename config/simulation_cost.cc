#include "config/simulation_cost.h"

namespace trainsim::config {

SimulationCost estimate_simulation_cost(const models::ModelSpec& m, const models::ParallelSpec& p,
                                        const models::TrainingSpec& t, std::int64_t num_gpus, bool full_fidelity) {
  const auto tp = static_cast<double>(p.tensor_model_parallel_size);
  const auto pp = static_cast<double>(p.pipeline_model_parallel_size);
  const auto cp = static_cast<double>(p.context_parallel_size);
  const auto vp = static_cast<double>(p.virtual_pipeline_model_parallel_size);
  const double gpus = static_cast<double>(num_gpus);
  const double dp = gpus / (tp * pp * cp);
  SimulationCost c;
  c.gpus = gpus;
  c.microbatches = static_cast<double>(t.global_batch_size) / (static_cast<double>(t.micro_batch_size) * dp);
  // Tasks of one layer for one micro-batch, forward and backward (models/lowering.cc): about 24
  // kernels; the tensor-parallel collectives (more under sequence parallelism); two tasks per
  // context-parallel ring step each way; the recomputed forward; MoE routing and all-to-alls.
  const bool flash = t.attention_kernel == models::AttentionKernel::kFlash;
  double per_layer = 24 + 4 * cp;
  if (tp > 1) per_layer += p.sequence_parallel ? 12 : 6;
  if (!flash) per_layer += 6;
  if (t.recompute_granularity == models::RecomputeGranularity::kSelective) per_layer += flash ? 2 * cp : 4;
  if (t.recompute_granularity == models::RecomputeGranularity::kFull) per_layer += 16 + 4 * cp;
  if (m.num_experts > 0) per_layer += p.expert_model_parallel_size > 1 ? 14 : 10;
  if (m.shared_expert_ffn_hidden() > 0) per_layer += tp > 1 ? 14 : 8;
  if (p.zero_stage >= 3) per_layer += 2;
  // Per micro-batch: the pipeline's send/receive batches of every model chunk, the embedding and
  // the loss; per stage: gradient buckets, norm and optimizer.
  const double layers = static_cast<double>(m.num_layers + m.mtp_num_layers);  // MTP modules: a layer and more each
  c.graph_tasks = c.microbatches * (layers * per_layer + pp * vp * 4 + 12) + pp * 20 + layers * 4;
  // Symmetric mode runs one rank per stage; full fidelity runs every rank of every stage.
  c.executed_tasks = full_fidelity ? c.graph_tasks * gpus / pp : c.graph_tasks;
  return c;
}

}  // namespace trainsim::config
