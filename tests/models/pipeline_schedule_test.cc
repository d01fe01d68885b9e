#include "models/pipeline_schedule.h"

#include <doctest/doctest.h>
#include <algorithm>
#include <string>
#include <vector>

using namespace trainsim::models;

namespace {

// "F0.1" = forward of micro-batch 0, chunk 1; "B2.0" = backward of micro-batch 2, chunk 0.
std::vector<std::string> compute_order(const std::vector<PipelineStep>& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps) {
    if (s.kind == PipelineStep::Kind::kCommunicate) continue;
    std::string id = s.kind == PipelineStep::Kind::kBackward ? "B" : "F";
    id += std::to_string(s.microbatch);
    id += '.';
    id += std::to_string(s.chunk);
    // A combined step: "F3.0+B0.1".
    if (s.kind == PipelineStep::Kind::kForwardBackward) id += "+B" + std::to_string(s.backward_microbatch) + "." + std::to_string(s.backward_chunk);
    out.push_back(id);
  }
  return out;
}

int count(const std::vector<PipelineStep>& steps, bool send, bool forward) {
  int n = 0;
  for (const auto& s : steps) {
    for (const auto& t : s.transfers) n += (t.is_send == send && t.forward == forward) ? 1 : 0;
  }
  return n;
}

std::vector<PipelineStep> steps_of(PipelineSchedule schedule, std::int64_t stage, std::int64_t stages, std::int64_t chunks,
                                   std::int64_t microbatches) {
  PipelineShape shape;
  shape.stages = stages;
  shape.chunks = chunks;
  shape.microbatches = microbatches;
  return pipeline_steps(schedule, stage, shape);
}

}  // namespace

TEST_CASE("models/pipeline: 1F1B warms up with (stages - stage - 1) forwards") {
  const auto s0 = compute_order(steps_of(PipelineSchedule::k1F1B, 0, 4, 1, 8));
  CHECK(s0 == std::vector<std::string>{"F0.0", "F1.0", "F2.0", "F3.0", "B0.0", "F4.0", "B1.0", "F5.0", "B2.0", "F6.0",
                                       "B3.0", "F7.0", "B4.0", "B5.0", "B6.0", "B7.0"});
  const auto last = compute_order(steps_of(PipelineSchedule::k1F1B, 3, 4, 1, 8));
  CHECK(last.front() == "F0.0");
  CHECK(last[1] == "B0.0");  // the last stage alternates from the start
}

TEST_CASE("models/pipeline: GPipe runs every forward before any backward") {
  const auto order = compute_order(steps_of(PipelineSchedule::kGpipe, 1, 4, 1, 3));
  CHECK(order == std::vector<std::string>{"F0.0", "F1.0", "F2.0", "B0.0", "B1.0", "B2.0"});
}

TEST_CASE("models/pipeline: interleaved order matches Megatron-Core's") {
  // 2 stages, 2 model chunks, 4 micro-batches (forward_backward_pipelining_with_interleaving).
  const auto s0 = compute_order(steps_of(PipelineSchedule::kInterleaved, 0, 2, 2, 4));
  CHECK(s0 == std::vector<std::string>{"F0.0", "F1.0", "F0.1", "F1.1", "F2.0", "B0.1", "F3.0", "B1.1", "F2.1", "B0.0",
                                       "F3.1", "B1.0", "B2.1", "B3.1", "B2.0", "B3.0"});
}

TEST_CASE("models/pipeline: every stage's sends match its neighbour's receives") {
  for (auto schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved}) {
    const std::int64_t stages = 4, chunks = schedule == PipelineSchedule::kInterleaved ? 3 : 1, mb = 8;
    for (std::int64_t p = 0; p < stages; ++p) {
      const auto mine = steps_of(schedule, p, stages, chunks, mb);
      const auto next = steps_of(schedule, (p + 1) % stages, stages, chunks, mb);
      // Activations this stage sends forward = activations the next stage receives.
      if (schedule != PipelineSchedule::kInterleaved && p == stages - 1) continue;
      CHECK(count(mine, true, true) == count(next, false, true));
      CHECK(count(next, true, false) == count(mine, false, false));
    }
  }
}

TEST_CASE("models/pipeline: each micro-batch and chunk runs forward and backward exactly once") {
  const auto steps = compute_order(steps_of(PipelineSchedule::kInterleaved, 1, 4, 2, 8));
  CHECK(steps.size() == 2 * 2 * 8);
  for (int mb = 0; mb < 8; ++mb) {
    for (int c = 0; c < 2; ++c) {
      const std::string id = std::to_string(mb) + "." + std::to_string(c);
      CHECK(std::count(steps.begin(), steps.end(), "F" + id) == 1);
      CHECK(std::count(steps.begin(), steps.end(), "B" + id) == 1);
    }
  }
}

TEST_CASE("models/pipeline: interleaved micro-batch groups follow Megatron-Core's schedule table") {
  // schedules.py, get_schedule_table: PP 2, 3 micro-batches per group, 5 micro-batches, 2 chunks
  // -> virtual micro-batches (0,0) (1,0) (2,0) (0,1) (1,1) (2,1) (3,0) (4,0) (3,1) (4,1).
  PipelineShape shape;
  shape.stages = 2;
  shape.chunks = 2;
  shape.microbatches = 5;
  shape.group = 3;
  const std::vector<std::string> table = {"F0.0", "F1.0", "F2.0", "F0.1", "F1.1", "F2.1", "F3.0", "F4.0", "F3.1", "F4.1"};
  for (std::int64_t stage = 0; stage < 2; ++stage) {
    std::vector<std::string> forwards;
    for (const std::string& s : compute_order(pipeline_steps(PipelineSchedule::kInterleaved, stage, shape))) {
      if (s[0] == 'F') forwards.push_back(s);
    }
    CHECK(forwards == table);
  }
  // Warm-up: 2 (p - rank - 1) + (v - 1) x group forward passes before the first backward.
  const auto s0 = compute_order(pipeline_steps(PipelineSchedule::kInterleaved, 0, shape));
  CHECK(std::find(s0.begin(), s0.end(), "B0.1") - s0.begin() == 2 + 3 + 1);
  // overlap_p2p_comm: the steady state's batches are asynchronous, gated before the next pass.
  shape.overlap_p2p = true;
  int gated = 0;
  for (const auto& step : pipeline_steps(PipelineSchedule::kInterleaved, 0, shape)) {
    gated += step.wait != PipelineStep::Wait::kNow ? 1 : 0;
  }
  CHECK(gated > 0);
}

TEST_CASE("models/pipeline: overlap_moe_expert_parallel_comm pairs each steady-state forward with the backward after it") {
  // Interleaved (Megatron-Core schedules.py, get_pp_rank_microbatches): one more warm-up forward,
  // then the plain schedule's (forward, backward) steady-state pairs as combined steps.
  PipelineShape shape;
  shape.stages = 2;
  shape.chunks = 2;
  shape.microbatches = 4;
  shape.overlap_p2p = true;
  shape.combined_1f1b = true;
  const auto s0 = compute_order(pipeline_steps(PipelineSchedule::kInterleaved, 0, shape));
  CHECK(s0 == std::vector<std::string>{"F0.0", "F1.0", "F0.1", "F1.1", "F2.0", "F3.0+B0.1", "F2.1+B1.1", "F3.1+B0.0",
                                       "B1.0", "B2.1", "B3.1", "B2.0", "B3.0"});
  // Every pass once; the sends still match the neighbour's receives.
  for (std::int64_t p = 0; p < 2; ++p) {
    const auto mine = pipeline_steps(PipelineSchedule::kInterleaved, p, shape);
    const auto next = pipeline_steps(PipelineSchedule::kInterleaved, (p + 1) % 2, shape);
    CHECK(count(mine, true, true) == count(next, false, true));
    CHECK(count(next, true, false) == count(mine, false, false));
    int forwards = 0, backwards = 0;
    for (const auto& step : mine) {
      forwards += step.kind == PipelineStep::Kind::kForward || step.kind == PipelineStep::Kind::kForwardBackward ? 1 : 0;
      backwards += step.kind == PipelineStep::Kind::kBackward || step.kind == PipelineStep::Kind::kForwardBackward ? 1 : 0;
    }
    CHECK(forwards == 8);
    CHECK(backwards == 8);
  }
  // Without pipelining (combined_1f1b_schedule_for_no_pipelining): micro-batch 0's forward, then
  // i + 1's forward with i's backward, then the last backward.
  PipelineShape one;
  one.microbatches = 3;
  one.combined_1f1b = true;
  CHECK(compute_order(pipeline_steps(PipelineSchedule::k1F1B, 0, one)) ==
        std::vector<std::string>{"F0.0", "F1.0+B0.0", "F2.0+B1.0", "B2.0"});
}
