#pragma once
// lower(): turns a model, a parallel plan and a training recipe into the TaskGraph of one
// training iteration, as Megatron-Core executes it: per pipeline stage (one rank class), the
// micro-batches in the schedule's order; per layer, the GEMMs, attention, memory-bound kernels
// and the tensor/context/expert-parallel communication; point-to-point transfers between
// stages; bucketed data-parallel gradient reduction overlapped with the backward pass (or
// ZeRO-3's per-layer gathers and reduce-scatters); the optimizer step. Tasks carry shapes and
// bytes; durations come later from the hardware models. StageBuilder (stage_builder.h) writes
// the tasks of one stage; this file lays out ranks, communicators and peers.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/flop_count.h"
#include "models/layer_dims.h"
#include "models/memory_model.h"
#include "models/model_spec.h"
#include "models/rank_layout.h"
#include "models/training_spec.h"
#include "sim/task_graph.h"

namespace trainsim::models {

struct StageInfo {
  std::int64_t stage = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks;  // per model chunk: first layer, count
  bool has_embedding = false;
  bool has_output = false;
  std::int64_t moe_layers = 0;  // of its layers, those that route to experts
  std::int64_t bf16_moe_layers = 0, bf16_dense_layers = 0;  // of its layers, those first_last_layers_bf16 keeps 16-bit
  std::int64_t parameters = 0;  // per GPU
  StageParameters params;       // the same, split by sharding group
  StaticMemory static_memory;
  // This GPU's share of a checkpoint: its 16-bit weights and optimizer state, split over the
  // data-parallel group (expert parameters over the expert-data-parallel group) as Megatron-Core's
  // fully parallel save does (dist_checkpointing, `fully_parallel_save`, on in Megatron-Bridge's
  // recipes).
  std::int64_t checkpoint_bytes = 0;
  // ZeRO-3 gathers one unit (a decoder layer, the output layer) at a time: the stage's largest
  // layer and its output layer, per GPU, as parameters and as the bytes their gathers bring.
  struct GatherUnit {
    std::int64_t dense = 0, expert = 0;                // parameters
    std::int64_t dense_bytes = 0, expert_bytes = 0;  // gathered
  };
  GatherUnit largest_layer, output_layer;
};

struct Workload {
  sim::TaskGraph graph{0, {}, {}, {}};
  RankLayout layout;
  std::vector<StageInfo> stages;
  std::int64_t data_parallel_size = 1;
  std::int64_t expert_data_parallel_size = 1;
  std::int64_t microbatches = 1;       // per data-parallel rank per iteration
  std::int64_t tokens_per_iteration = 0;
  LayerDims dims;
  FlopCount flops;
  std::int64_t mtp_layers = 0;  // multi-token-prediction modules (on the last stage)
  bool mtp_moe = false;         // whose layers route to experts
};

// Transformer layers of each virtual stage (i: chunk i / stages of stage i % stages) where they
// are not an even split: the custom layout, or the even split with the embedding and the loss
// counted as layers (account_for_*_in_pipeline_split). Empty otherwise.
std::vector<std::int64_t> virtual_stage_layers(const ModelSpec& m, const ParallelSpec& p);
// Layers per pipeline stage and model chunk: a custom layout or an accounted split as above,
// else uneven first/last stages as Megatron-Core's decoder_first/last_pipeline_num_layers and the
// rest split evenly; chunk c of stage p holds the (c * stages + p)-th block of layers.
// REQUIRES: the split is valid (config/ checks it).
std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> split_layers(const ModelSpec& m, const ParallelSpec& p);

// REQUIRES: the plan was validated (config/): sizes divide as Megatron requires.
Workload lower(const ModelSpec& model, const ParallelSpec& parallel, const TrainingSpec& training,
               std::int64_t num_gpus, const TargetGpu& gpu = {});
// The workload's stages, shapes and FLOPs without its task graph (cheap: for plan searches).
Workload describe(const ModelSpec& model, const ParallelSpec& parallel, const TrainingSpec& training,
                  std::int64_t num_gpus, const TargetGpu& gpu = {});
// A quick estimate of the largest memory footprint of any stage: static memory plus the
// activations of the micro-batches the schedule keeps in flight (1F1B: stages - stage; GPipe:
// all; interleaved: Megatron's warm-up count of model chunks), without simulating.
std::int64_t estimated_peak_bytes(const Workload& w, const ParallelSpec& parallel, const TrainingSpec& training);
// cpu_offloading: the host memory one GPU's offloaded activations take (its first
// cpu_offload_layers layers' saved activations, one micro-batch: Transformer Engine brings them
// back before the next micro-batch's forward).
std::int64_t offloaded_activation_bytes(const Workload& w, const ModelSpec& model, const TrainingSpec& training);

}  // namespace trainsim::models
