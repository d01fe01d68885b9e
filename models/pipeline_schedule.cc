#include "models/pipeline_schedule.h"

#include <algorithm>

#include "sim/check.h"

namespace trainsim::models {

namespace {

using Kind = PipelineStep::Kind;

class StepList {
 public:
  void forward(std::int64_t mb, std::int64_t chunk) { steps_.push_back({Kind::kForward, mb, chunk, {}, PipelineStep::Wait::kNow}); }
  void backward(std::int64_t mb, std::int64_t chunk) { steps_.push_back({Kind::kBackward, mb, chunk, {}, PipelineStep::Wait::kNow}); }
  void forward_backward(std::int64_t mb, std::int64_t chunk, std::int64_t backward_mb, std::int64_t backward_chunk) {
    steps_.push_back({Kind::kForwardBackward, mb, chunk, {}, PipelineStep::Wait::kNow, backward_mb, backward_chunk});
  }
  // One batch; ops that are switched off are dropped, an empty batch is no step.
  void communicate(std::initializer_list<std::pair<bool, PipelineP2P>> ops,
                   PipelineStep::Wait wait = PipelineStep::Wait::kNow) {
    PipelineStep s{Kind::kCommunicate, 0, 0, {}, wait};
    for (const auto& [on, op] : ops) {
      if (on) s.transfers.push_back(op);
    }
    if (!s.transfers.empty()) steps_.push_back(std::move(s));
  }
  std::vector<PipelineStep> take() { return std::move(steps_); }

 private:
  std::vector<PipelineStep> steps_;
};

constexpr PipelineP2P kSendForward{true, true};
constexpr PipelineP2P kRecvForward{false, true};
constexpr PipelineP2P kSendBackward{true, false};
constexpr PipelineP2P kRecvBackward{false, false};

// Python's modulo (Megatron indexes with possibly negative iteration ids).
std::int64_t py_mod(std::int64_t a, std::int64_t b) { return ((a % b) + b) % b; }

std::vector<PipelineStep> gpipe(std::int64_t p, std::int64_t stages, std::int64_t m) {
  const bool first = p == 0, last = p == stages - 1;
  StepList s;
  for (std::int64_t i = 0; i < m; ++i) {
    s.communicate({{!first, kRecvForward}});
    s.forward(i, 0);
    s.communicate({{!last, kSendForward}});
  }
  for (std::int64_t i = 0; i < m; ++i) {
    s.communicate({{!last, kRecvBackward}});
    s.backward(i, 0);
    s.communicate({{!first, kSendBackward}});
  }
  return s.take();
}

std::vector<PipelineStep> one_f_one_b(std::int64_t p, std::int64_t stages, std::int64_t m) {
  const bool first = p == 0, last = p == stages - 1;
  const std::int64_t warmup = std::min(stages - p - 1, m);
  const std::int64_t remaining = m - warmup;
  StepList s;
  for (std::int64_t i = 0; i < warmup; ++i) {
    s.communicate({{!first, kRecvForward}});
    s.forward(i, 0);
    s.communicate({{!last, kSendForward}});
  }
  if (remaining > 0) s.communicate({{!first, kRecvForward}});
  for (std::int64_t i = 0; i < remaining; ++i) {
    s.forward(warmup + i, 0);
    s.communicate({{!last, kSendForward}, {!last, kRecvBackward}});
    s.backward(i, 0);
    if (i == remaining - 1) {
      s.communicate({{!first, kSendBackward}});
    } else {
      s.communicate({{!first, kSendBackward}, {!first, kRecvForward}});
    }
  }
  for (std::int64_t i = 0; i < warmup; ++i) {
    s.communicate({{!last, kRecvBackward}});
    s.backward(remaining + i, 0);
    s.communicate({{!first, kSendBackward}});
  }
  return s.take();
}

// forward_backward_pipelining_with_interleaving (Megatron-Core schedules.py at d98e8a6): the
// schedule table of micro-batch groups, warm-up of 2(p - rank - 1) + (v - 1) * group forward
// passes, recv_tensor_from_previous_stage's rule for when the leading stage receives, and the
// asynchronous sends and receives of overlap_p2p_comm (without overlap_p2p_comm_warmup_flush).
std::vector<PipelineStep> interleaved(std::int64_t p, const PipelineShape& shape) {
  const std::int64_t P = shape.stages, V = shape.chunks, m = shape.microbatches;
  const std::int64_t G = shape.group > 0 ? shape.group : P;
  const bool overlap = shape.overlap_p2p;
  // get_schedule_table: (micro-batch, chunk) of every virtual micro-batch.
  std::vector<std::pair<std::int64_t, std::int64_t>> table;
  for (std::int64_t lo = 0; lo < m; lo += G) {
    const std::int64_t hi = lo + G >= m ? m : lo + G;
    for (std::int64_t c = 0; c < V; ++c) {
      for (std::int64_t mb = lo; mb < hi; ++mb) table.emplace_back(mb, c);
    }
  }
  const std::int64_t total = m * V;
  std::int64_t warmup = (P - p - 1) * 2 + (V - 1) * G + (shape.combined_1f1b ? 1 : 0);
  const bool all_warmup = warmup >= total;
  if (all_warmup) warmup = total;
  const std::int64_t remaining = total - warmup;
  auto chunk = [&](std::int64_t k, bool forward) {
    const std::int64_t c = table[static_cast<std::size_t>(py_mod(k, total))].second;
    return forward ? c : V - 1 - c;
  };
  auto microbatch = [&](std::int64_t k) { return table[static_cast<std::size_t>(k)].first; };
  auto first_virtual = [&](std::int64_t c) { return p == 0 && c == 0; };
  auto last_virtual = [&](std::int64_t c) { return p == P - 1 && c == V - 1; };
  // recv_tensor_from_previous_stage: whether this stage receives a tensor for the pass after k.
  auto receives = [&](std::int64_t k, bool forward) {
    const bool leading = forward ? p == 0 : p == P - 1;
    if (!leading) return true;
    if (k < P - 1) return false;
    return chunk(k - (P - 1), forward) != (forward ? V - 1 : 0);
  };
  using Wait = PipelineStep::Wait;

  StepList s;
  s.communicate({{p != 0, kRecvForward}});
  for (std::int64_t k = 0; k < warmup; ++k) {
    const std::int64_t c = chunk(k, true);
    s.forward(microbatch(k), c);
    const bool recv_prev = receives(k, true) && k != total - 1;
    const bool send = !last_virtual(c);
    if (k == warmup - 1 && !overlap && !all_warmup) {
      s.communicate({{send, kSendForward}, {recv_prev, kRecvForward}, {p != P - 1, kRecvBackward}});
    } else {
      s.communicate({{send, kSendForward}, {recv_prev, kRecvForward}});
    }
    if (overlap && k == warmup - 1 && !all_warmup) s.communicate({{p != P - 1, kRecvBackward}}, Wait::kBeforeNextBackward);
  }
  for (std::int64_t k = 0; k < remaining; ++k) {
    const std::int64_t fk = k + warmup, bk = k;
    const std::int64_t fc = chunk(fk, true), bc = chunk(bk, false);
    const bool recv_prev = receives(fk, true) && k != remaining - 1;
    const bool recv_next = receives(bk, false);
    if (shape.combined_1f1b) s.forward_backward(microbatch(fk), fc, microbatch(bk), bc);
    if (overlap) {
      if (!shape.combined_1f1b) s.forward(microbatch(fk), fc);
      s.communicate({{!last_virtual(fc), kSendForward}, {recv_prev, kRecvForward}}, Wait::kBeforeNextForward);
      if (!shape.combined_1f1b) s.backward(microbatch(bk), bc);
      s.communicate({{!first_virtual(bc), kSendBackward}, {recv_next, kRecvBackward}}, Wait::kBeforeNextBackward);
    } else {
      if (!shape.combined_1f1b) {
        s.forward(microbatch(fk), fc);
        s.backward(microbatch(bk), bc);
      }
      s.communicate({{!last_virtual(fc), kSendForward},
                     {!first_virtual(bc), kSendBackward},
                     {recv_prev, kRecvForward},
                     {recv_next, kRecvBackward}});
    }
  }
  if (all_warmup) s.communicate({{p != P - 1, kRecvBackward}});
  for (std::int64_t k = remaining; k < total; ++k) {
    const std::int64_t bc = chunk(k, false);
    s.backward(microbatch(k), bc);
    const bool recv_next = receives(k, false) && k != total - 1;
    s.communicate({{!first_virtual(bc), kSendBackward}, {recv_next, kRecvBackward}});
  }
  return s.take();
}

// combined_1f1b_schedule_for_no_pipelining (Megatron-Core combined_1f1b.py): micro-batch 0's
// forward alone, then micro-batch i + 1's forward with i's backward, then the last backward.
std::vector<PipelineStep> combined_without_pipelining(std::int64_t m) {
  StepList s;
  s.forward(0, 0);
  for (std::int64_t i = 0; i + 1 < m; ++i) s.forward_backward(i + 1, 0, i, 0);
  s.backward(m - 1, 0);
  return s.take();
}

}  // namespace

std::vector<PipelineStep> pipeline_steps(PipelineSchedule schedule, std::int64_t stage, const PipelineShape& shape) {
  TRAINSIM_CHECK(stage >= 0 && stage < shape.stages && shape.microbatches >= 1 && shape.chunks >= 1, "bad pipeline shape");
  if (shape.combined_1f1b && shape.stages == 1 && shape.chunks == 1) return combined_without_pipelining(shape.microbatches);
  TRAINSIM_CHECK(!shape.combined_1f1b || schedule == PipelineSchedule::kInterleaved,
                 "combined 1F1B needs the interleaved schedule with more than one stage");
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return gpipe(stage, shape.stages, shape.microbatches);
    case PipelineSchedule::k1F1B:
      return one_f_one_b(stage, shape.stages, shape.microbatches);
    case PipelineSchedule::kInterleaved: {
      const std::int64_t G = shape.group > 0 ? shape.group : shape.stages;
      const std::int64_t last = shape.microbatches % G;
      TRAINSIM_CHECK(G >= shape.stages && G <= shape.microbatches && (last == 0 || last >= shape.stages),
                     "interleaved schedule: bad micro-batch group size");
      return interleaved(stage, shape);
    }
  }
  return {};
}

}  // namespace trainsim::models
