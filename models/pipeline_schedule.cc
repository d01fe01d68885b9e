#include "models/pipeline_schedule.h"

#include <algorithm>

#include "sim/check.h"

namespace trainsim::models {

namespace {

using Kind = PipelineStep::Kind;

class StepList {
 public:
  void forward(std::int64_t mb, std::int64_t chunk) { steps_.push_back({Kind::kForward, mb, chunk, {}}); }
  void backward(std::int64_t mb, std::int64_t chunk) { steps_.push_back({Kind::kBackward, mb, chunk, {}}); }
  // One batch; ops that are switched off are dropped, an empty batch is no step.
  void communicate(std::initializer_list<std::pair<bool, PipelineP2P>> ops) {
    PipelineStep s{Kind::kCommunicate, 0, 0, {}};
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

std::vector<PipelineStep> interleaved(std::int64_t p, std::int64_t P, std::int64_t V, std::int64_t m) {
  const std::int64_t total = m * V;
  const bool all_warmup = m == P;
  std::int64_t warmup = all_warmup ? total : std::min((P - p - 1) * 2 + (V - 1) * P, total);
  const std::int64_t remaining = total - warmup;
  auto chunk = [&](std::int64_t k, bool forward) {
    const std::int64_t c = py_mod(k, P * V) / P;
    return forward ? c : V - 1 - c;
  };
  auto microbatch = [&](std::int64_t k) { return (k / (P * V)) * P + k % P; };
  auto first_virtual = [&](std::int64_t c) { return p == 0 && c == 0; };
  auto last_virtual = [&](std::int64_t c) { return p == P - 1 && c == V - 1; };

  StepList s;
  s.communicate({{p != 0, kRecvForward}});
  for (std::int64_t k = 0; k < warmup; ++k) {
    const std::int64_t c = chunk(k, true);
    s.forward(microbatch(k), c);
    bool recv_prev = !(p == 0 && chunk(k + 1, true) == 0);
    if (k == total - 1) recv_prev = false;
    const bool send = !last_virtual(c);
    if (k == warmup - 1 && !all_warmup) {
      const bool recv_next = p != P - 1;
      s.communicate({{send, kSendForward}, {recv_prev, kRecvForward}, {recv_next, kRecvBackward}});
    } else {
      s.communicate({{send, kSendForward}, {recv_prev, kRecvForward}});
    }
  }
  for (std::int64_t k = 0; k < remaining; ++k) {
    const std::int64_t fk = k + warmup, bk = k;
    const std::int64_t fc = chunk(fk, true), bc = chunk(bk, false);
    s.forward(microbatch(fk), fc);
    s.backward(microbatch(bk), bc);
    bool recv_prev = true;
    if (p == 0 && chunk(fk - (P - 1), true) == V - 1) recv_prev = false;
    bool recv_next = true;
    if (p == P - 1 && chunk(bk - (P - 1), false) == 0) recv_next = false;
    if (k == remaining - 1) recv_prev = false;
    s.communicate({{!last_virtual(fc), kSendForward},
                   {!first_virtual(bc), kSendBackward},
                   {recv_prev, kRecvForward},
                   {recv_next, kRecvBackward}});
  }
  if (all_warmup) s.communicate({{p != P - 1, kRecvBackward}});
  for (std::int64_t k = remaining; k < total; ++k) {
    const std::int64_t bc = chunk(k, false);
    s.backward(microbatch(k), bc);
    bool recv_next = !(p == P - 1 && chunk(k + 1, false) == V - 1);
    if (k == total - 1) recv_next = false;
    s.communicate({{!first_virtual(bc), kSendBackward}, {recv_next, kRecvBackward}});
  }
  return s.take();
}

}  // namespace

std::vector<PipelineStep> pipeline_steps(PipelineSchedule schedule, std::int64_t stage, std::int64_t stages,
                                         std::int64_t chunks, std::int64_t microbatches) {
  TRAINSIM_CHECK(stage >= 0 && stage < stages && microbatches >= 1 && chunks >= 1, "bad pipeline shape");
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return gpipe(stage, stages, microbatches);
    case PipelineSchedule::k1F1B:
      return one_f_one_b(stage, stages, microbatches);
    case PipelineSchedule::kInterleaved:
      TRAINSIM_CHECK(microbatches % stages == 0, "interleaved schedule needs micro-batches divisible by stages");
      return interleaved(stage, stages, chunks, microbatches);
  }
  return {};
}

}  // namespace trainsim::models
