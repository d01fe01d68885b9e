#pragma once
// Pipeline schedules with Megatron-Core's micro-batch order: the sequence of forward passes,
// backward passes and point-to-point batches one pipeline stage executes in an iteration.
// `gpipe`: all forwards, then all backwards. `1f1b`: forward_backward_pipelining_without_
// interleaving (warm-up of p-1-stage forwards, steady one-forward-one-backward, cool-down).
// `interleaved`: forward_backward_pipelining_with_interleaving (virtual stages; micro-batches
// in groups of microbatch_group_size_per_vp_stage, by default p), including its rules for which
// sends and receives each step batches and, with overlap_p2p_comm, its asynchronous sends and
// receives that the compute stream waits for only before the pass that needs them; and the
// combined forward-backward steps of overlap_moe_expert_parallel_comm.

#include <cstdint>
#include <vector>

#include "models/training_spec.h"

namespace trainsim::models {

struct PipelineP2P {
  bool is_send = true;
  bool forward = true;  // activation (forward) or gradient (backward)
  // The peer: sends of activations and receives of gradients go to the next stage.
  bool to_next() const { return is_send == forward; }
  bool operator==(const PipelineP2P&) const = default;
};

struct PipelineStep {
  // kForwardBackward: overlap_moe_expert_parallel_comm's combined 1F1B step, the forward pass of
  // (microbatch, chunk) run layer by layer together with the backward pass of
  // (backward_microbatch, backward_chunk).
  enum class Kind : std::uint8_t { kForward, kBackward, kCommunicate, kForwardBackward };
  // When the compute stream waits for a communicate step: at once (Megatron waits on the
  // batch's requests), or, for overlap_p2p_comm's asynchronous requests, before the next
  // forward or backward pass.
  enum class Wait : std::uint8_t { kNow, kBeforeNextForward, kBeforeNextBackward };
  Kind kind = Kind::kForward;
  std::int64_t microbatch = 0;  // forward/backward
  std::int64_t chunk = 0;       // model chunk (virtual stage index on this rank)
  std::vector<PipelineP2P> transfers;  // communicate: one batch_isend_irecv
  Wait wait = Wait::kNow;
  std::int64_t backward_microbatch = 0;  // forward-backward
  std::int64_t backward_chunk = 0;
};

struct PipelineShape {
  std::int64_t stages = 1;
  std::int64_t chunks = 1;        // model chunks per stage (> 1 only for interleaved)
  std::int64_t microbatches = 1;
  std::int64_t group = 0;         // interleaved: microbatch_group_size_per_vp_stage (0 = stages)
  bool overlap_p2p = false;       // interleaved: overlap_p2p_comm
  // overlap_moe_expert_parallel_comm (Megatron-Core combined_1f1b.py): each steady-state forward
  // pass runs with the backward pass it precedes; the interleaved schedule warms up one forward
  // pass more, and without pipelining (one stage) micro-batch i + 1's forward runs with i's
  // backward.
  bool combined_1f1b = false;
};

// REQUIRES: 0 <= stage < shape.stages; microbatches >= 1; chunks >= 1; interleaved: the group
// size is in [stages, microbatches] and the last group has 0 or >= stages micro-batches.
std::vector<PipelineStep> pipeline_steps(PipelineSchedule schedule, std::int64_t stage, const PipelineShape& shape);

}  // namespace trainsim::models
