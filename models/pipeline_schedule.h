#pragma once
// Pipeline schedules with Megatron-Core's micro-batch order: the sequence of forward passes,
// backward passes and point-to-point batches one pipeline stage executes in an iteration.
// `gpipe`: all forwards, then all backwards. `1f1b`: forward_backward_pipelining_without_
// interleaving (warm-up of p-1-stage forwards, steady one-forward-one-backward, cool-down).
// `interleaved`: forward_backward_pipelining_with_interleaving (virtual stages; micro-batches
// in groups of p), including its rules for which sends and receives each step batches.

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
  enum class Kind : std::uint8_t { kForward, kBackward, kCommunicate };
  Kind kind = Kind::kForward;
  std::int64_t microbatch = 0;  // forward/backward
  std::int64_t chunk = 0;       // model chunk (virtual stage index on this rank)
  std::vector<PipelineP2P> transfers;  // communicate: one batch_isend_irecv
};

// REQUIRES: 0 <= stage < stages; microbatches >= 1; chunks >= 1 (only interleaved uses > 1);
// interleaved: microbatches % stages == 0.
std::vector<PipelineStep> pipeline_steps(PipelineSchedule schedule, std::int64_t stage, std::int64_t stages,
                                         std::int64_t chunks, std::int64_t microbatches);

}  // namespace trainsim::models
