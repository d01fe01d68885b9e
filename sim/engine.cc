#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/check.h"

namespace trainsim::sim {

Engine::Engine(const TaskGraph& graph, TimingModel& timing, EngineOptions options)
    : graph_(graph),
      timing_(timing),
      options_(std::move(options)),
      num_streams_(graph.num_streams()),
      network_(timing.resource_capacities()) {
  const std::uint32_t n = graph_.num_ranks();
  streams_.resize(static_cast<std::size_t>(n) * num_streams_);
  chain_.resize(streams_.size());
  last_chain_.resize(streams_.size());
  wake_at_.assign(static_cast<std::size_t>(n) * num_streams_, TimePoint{});
  completed_.assign(static_cast<std::size_t>(n) * num_streams_, 0);
  if (options_.sm_contention) {
    sm_progress_.resize(streams_.size());
    sm_taken_.assign(n, 0.0);
  }
  ranks_.resize(n);
  for (std::uint32_t r = 0; r < n; ++r) {
    ranks_[r].cls = graph_.class_of(RankId{r});
    ranks_[r].rc = &graph_.rank_class(ranks_[r].cls);
  }
  for (double scale : options_.comm_time_scale) {
    TRAINSIM_CHECK(scale >= 0 && scale <= 16, "communication time scale outside [0, 16]");
  }
  for (RankId r : options_.record_ranks) {
    TRAINSIM_CHECK(index(r) < n, "recorded rank out of range");
    ranks_[index(r)].recorded = true;
  }
  if (options_.symmetric) {
    result_.ranks = graph_.simulated_ranks();
  } else {
    result_.ranks.reserve(n);
    for (std::uint32_t r = 0; r < n; ++r) result_.ranks.push_back(RankId{r});
  }
  std::vector<std::uint8_t> simulated(n, 0);
  for (std::size_t i = 0; i < result_.ranks.size(); ++i) {
    const std::uint32_t r = index(result_.ranks[i]);
    ranks_[r].account = static_cast<std::uint32_t>(i);
    simulated[r] = 1;
    ranks_[r].slowdown = timing_.compute_slowdown(result_.ranks[i]);
  }
  result_.accounts.resize(result_.ranks.size());

  collectives_.resize(graph_.num_communicators());
  simulated_members_.assign(graph_.num_communicators(), 0);
  for (std::uint32_t c = 0; c < graph_.num_communicators(); ++c) {
    for (RankId m : graph_.communicator(CommId{c}).members) simulated_members_[c] += simulated[index(m)];
  }
  channels_.resize(static_cast<std::size_t>(n) * graph_.num_peer_slots());

  kernel_time_.resize(graph_.num_classes());
  host_issue_.resize(graph_.num_classes());
  host_syncs_.resize(graph_.num_classes());
  host_.resize(n);
  dependent_streams_.resize(graph_.num_classes());
  dep_refs_.resize(graph_.num_classes());
  for (std::uint32_t c = 0; c < graph_.num_classes(); ++c) {
    const RankClass& rc = graph_.rank_class(c);
    for (const Kernel& k : rc.kernels) kernel_time_[c].push_back(timing_.kernel_time(k));
    // The host issues the tasks in program order, back to back from the start.
    Duration host = Duration::zero();
    std::vector<Duration> issue;
    std::vector<TaskIndex> syncs;
    issue.reserve(rc.tasks.size());
    for (TaskIndex i = 0; i < rc.tasks.size(); ++i) {
      host += timing_.host_issue_time(rc.tasks[i]);
      issue.push_back(host);
      if (rc.tasks[i].host_sync) syncs.push_back(i);
    }
    if (host > Duration::zero()) {
      host_issue_[c] = std::move(issue);
      host_syncs_[c] = std::move(syncs);
    }
    for (TaskIndex d : rc.deps) {
      const Task& dt = rc.tasks[d];
      TRAINSIM_CHECK(dt.position < (1u << 28), "stream longer than the engine's dependency references allow");
      dep_refs_[c].push_back((dt.position << 4) | dt.stream);
    }
    auto& masks = dependent_streams_[c];
    masks.assign(rc.tasks.size(), 0);
    for (const Task& t : rc.tasks) {
      for (std::uint32_t i = 0; i < t.deps_count; ++i) {
        masks[rc.deps[t.deps_begin + i]] |= static_cast<std::uint16_t>(1u << t.stream);
      }
    }
  }
}

EngineResult Engine::run() {
  for (std::size_t i = 0; i < result_.ranks.size(); ++i) {
    const std::uint32_t r = index(result_.ranks[i]);
    change_memory(r, ranks_[r].rc->static_memory_bytes, queue_.now());
  }
  for (RankId r : result_.ranks) try_start_all(index(r));
  for (;;) {
    // Rates settle once all the changes of an instant are in (FlowNetwork::flush).
    if (network_.has_pending() && (queue_.empty() || queue_.top_time() > queue_.now())) {
      network_.flush(queue_.now(), reschedules_);
      schedule_flows();
    }
    if (queue_.empty()) break;
    const auto ev = queue_.pop();
    ++result_.events;
    switch (ev.payload.kind()) {
      case EventKind::kTaskDone:
        if ((ev.payload.b() & kWakeBit) != 0) {
          try_start(ev.payload.a(), ev.payload.b() & ~kWakeBit);
        } else {
          const std::uint32_t s = ev.payload.b() & 0xfu;
          if (const std::uint32_t generation = (ev.payload.b() >> 4) & kGenerationMask; generation != 0) {
            // An SM-bound kernel's completion (sm_contention): current unless re-timed since.
            SmProgress& p = sm_progress_[stream_index(ev.payload.a(), s)];
            if (!p.active || generation != p.generation || ev.time != p.due) break;
            p.active = false;
            const StreamState& st = stream_state(ev.payload.a(), s);
            result_.accounts[ranks_[ev.payload.a()].account].sm_contention += (ev.time - st.transfer_start) - p.nominal;
          }
          complete_task(ev.payload.a(), s);
        }
        break;
      case EventKind::kInstanceDone:
        finish_instance(ev.payload.a());
        break;
      case EventKind::kFlowStart: {
        Instance& in = instances_[ev.payload.a()];
        const FlowNetwork::FlowId f = network_.add(queue_.now(), in.cost->volume * in.time_scale, in.cost->max_rate,
                                                   in.cost->demands, reschedules_);
        if (flow_instance_.size() <= f) flow_instance_.resize(f + 1, kNoInstance);
        flow_instance_[f] = ev.payload.a();
        schedule_flows();
        break;
      }
      case EventKind::kFlowDone: {
        const FlowNetwork::FlowId f = ev.payload.a();
        if (!network_.is_current(f, ev.payload.b())) break;  // rescheduled since
        const std::uint32_t inst = flow_instance_[f];
        Instance& in = instances_[inst];
        const double fraction = network_.speed_fraction(f);
        for (const Waiter& w : in.waiters) stream_state(w.rank, w.stream).speed_fraction = fraction;
        network_.finish(f);
        schedule_flows();
        finish_instance(inst);
        break;
      }
    }
  }
  for (RankId r : result_.ranks) {
    const RankClass& rc = graph_.rank_class(graph_.class_of(r));
    for (std::uint32_t s = 0; s < num_streams_; ++s) {
      if (stream_state(index(r), s).next < rc.stream_tasks[s].size() || stream_state(index(r), s).busy) {
        report_deadlock();
      }
    }
  }
  for (RankId r : result_.ranks) {
    const RankState& rs = ranks_[index(r)];
    RankAccount& acc = result_.accounts[rs.account];
    acc.peak_memory_bytes = rs.memory_peak;
    acc.finish = rs.finish;
    // Every task has ended, so the primary stream's last task is the last in its order.
    const TimePoint primary_end = stream_state(index(r), options_.primary_stream).last_end;
    if (rs.finish > primary_end) {
      const std::vector<TaskIndex>& primary = rs.rc->stream_tasks[options_.primary_stream];
      charge_gap(acc, rs.recorded,
                 GapRecord{r, primary_end, rs.finish, primary.empty() ? GapRecord::kNone : primary.back(), rs.last_task,
                           rs.rc->tasks[rs.last_task].category, GapRecord::Cause::kTail});
    }
  }
  result_.flows = network_.stats();
  return std::move(result_);
}

void Engine::schedule_flows() {
  for (const auto& rs : reschedules_) {
    queue_.push(rs.finish, 0, EventPayload{EventKind::kFlowDone, rs.flow, rs.version});
  }
  reschedules_.clear();
}

bool Engine::dep_done(std::uint32_t rank, const RankClass& rc, TaskIndex dep) {
  const Task& d = rc.tasks[dep];
  return d.position < completed(rank, d.stream);
}

bool Engine::deps_done(std::uint32_t rank, std::uint32_t cls, const Task& task) const {
  const std::uint32_t* ref = dep_refs_[cls].data() + task.deps_begin;
  const std::uint32_t* base = completed_.data() + stream_index(rank, 0);
  for (std::uint32_t i = 0; i < task.deps_count; ++i) {
    if ((ref[i] >> 4) >= base[ref[i] & 15u]) return false;
  }
  return true;
}

void Engine::try_start_all(std::uint32_t rank) {
  for (std::uint32_t s = 0; s < num_streams_; ++s) try_start(rank, s);
}

void Engine::try_start_streams(std::uint32_t rank, std::uint32_t mask) {
  while (mask != 0) {
    const auto s = static_cast<std::uint32_t>(__builtin_ctz(mask));
    mask &= mask - 1;
    try_start(rank, s);
  }
}

void Engine::try_start(std::uint32_t rank, std::uint32_t s) {
  StreamState& st = stream_state(rank, s);
  if (st.busy) return;
  const RankClass& rc = *ranks_[rank].rc;
  const auto& order = rc.stream_tasks[s];
  if (st.next >= order.size()) return;
  const Task& task = rc.tasks[order[st.next]];
  if (!deps_done(rank, ranks_[rank].cls, task)) return;
  const TimePoint now = queue_.now();
  const TimePoint issued = issued_at(rank, ranks_[rank].cls, order[st.next]);
  if (issued == kNotIssued) return;  // the host waits at a synchronization: retried when it ends
  if (issued > now && task.kind != TaskKind::kCompute) {
    // Communication is posted when the host reaches it: come back then.
    TimePoint& wake = wake_at_[stream_index(rank, s)];
    if (wake != issued) {
      wake = issued;
      queue_.push(issued, 0, EventPayload{EventKind::kTaskDone, rank, s | kWakeBit});
    }
    return;
  }
  if (s == options_.primary_stream) attribute_gap(rank, rc, order[st.next], st);
  // What held this task back until now: a dependency that just ended, else the previous task
  // of its own stream (it queued behind it).
  CauseChain& chain = chain_[stream_index(rank, s)];
  chain = CauseChain{};
  const std::uint32_t* ref = dep_refs_[ranks_[rank].cls].data() + task.deps_begin;
  for (std::uint32_t i = 0; i < task.deps_count && chain.holder == CauseChain::kNoHolder; ++i) {
    if (ended_last_at(rank, ref[i] & 15u, ref[i] >> 4, now)) chain_after(chain, rank, ref[i] & 15u, rc.deps[task.deps_begin + i]);
  }
  if (chain.holder == CauseChain::kNoHolder && st.next > 0 && st.last_end == now) chain_after(chain, rank, s, order[st.next - 1]);
  st.busy = true;
  ++st.next;
  st.posted = now;
  st.transfer_start = now;
  st.algorithm = st.protocol = 0;
  st.speed_fraction = 1;
  // Communication that reached this point is issued by now; a compute task starts at its issue.
  const TimePoint start = std::max(now, issued);
  if (task.alloc_bytes != 0) change_memory(rank, task.alloc_bytes, start);
  switch (task.kind) {
    case TaskKind::kCompute:
      start_compute_chain(rank, s, rc, order[st.next - 1], start);
      break;
    case TaskKind::kCollective:
      post_collective(rank, s, task, rc);
      break;
    case TaskKind::kPointToPoint: {
      TRAINSIM_CHECK(task.payload_count > 0, "point-to-point task without transfers");
      const auto* first = &rc.transfers[task.payload];
      const auto* last = first + task.payload_count;
      // Under symmetry a receive from a peer that is not simulated, in a task that also sends on
      // the mirrored slot (a ring step: send to next, receive from previous), is the image of
      // this rank's own send: the send's link load already counts every rank of the class, so
      // the receive ends with it instead of loading the links a second time.
      auto mirrored = [&](const Transfer& t) {
        if (t.is_send || ranks_[index(graph_.peer(RankId{rank}, t.peer_slot))].account != kNoInstance) return false;
        const std::uint16_t twin = graph_.reverse_peer_slot(t.peer_slot);
        return std::any_of(first, last, [&](const Transfer& o) { return o.is_send && o.peer_slot == twin && o.bytes == t.bytes; });
      };
      st.pending = 0;
      for (const auto* t = first; t != last; ++t) st.pending += mirrored(*t) ? 0u : 1u;
      for (const auto* t = first; t != last; ++t) {
        if (!mirrored(*t)) post_transfer(rank, s, *t, task.category);
      }
      break;
    }
  }
}

Duration Engine::compute_duration(std::uint32_t rank, std::uint32_t cls, const Task& task) const {
  Duration d = kernel_time_[cls][task.payload];
  // A straggler's SMs are slow, not its copy engines or its host link.
  const double slowdown = ranks_[rank].slowdown;
  if (slowdown != 1.0 && graph_.rank_class(cls).kernels[task.payload].kernel_class != KernelClass::kHostCopy) {
    d = d.scaled(slowdown);
  }
  // What-if scaling of data movement also covers copies to and from the host.
  const double scale = options_.comm_time_scale[task.category];
  if (scale != 1.0) d = d.scaled(scale);
  return d;
}

// Runs compute task `first` and, without further events, the compute tasks that follow it on
// the stream as long as nothing else waits for the one before and the next one's dependencies
// are already done: their start times are then fixed (each starts when its predecessor ends),
// so one completion event at the end of the chain is exact.
void Engine::start_compute_chain(std::uint32_t rank, std::uint32_t s, const RankClass& rc, TaskIndex first,
                                 TimePoint start) {
  StreamState& st = stream_state(rank, s);
  const std::uint32_t cls = ranks_[rank].cls;
  const auto& order = rc.stream_tasks[s];
  const auto& dependents = dependent_streams_[cls];
  const bool primary = s == options_.primary_stream;
  RankAccount& acc = result_.accounts[ranks_[rank].account];
  if (primary && start > queue_.now()) acc.host_wait += start - queue_.now();
  TaskIndex current = first;
  TimePoint ready = queue_.now();  // deps done and at the head of its stream; `start` adds the host's lag
  TimePoint end = start + compute_duration(rank, cls, rc.tasks[current]);
  if (!sm_progress_.empty()) {
    // Each kernel is its own event: its rate can change while it runs.
    st.posted = ready;
    st.transfer_start = start;
    const KernelClass k = rc.kernels[rc.tasks[current].payload].kernel_class;
    if (k == KernelClass::kGemm || k == KernelClass::kFlashAttention) {
      SmProgress& p = sm_progress_[stream_index(rank, s)];
      p.active = true;
      p.segment = start;
      p.nominal = end - start;
      p.work = static_cast<double>(p.nominal.ps());
      p.rate = sm_rate(rank);
      schedule_sm_kernel(rank, s, p);
    } else {
      queue_.push(end, 0, EventPayload{EventKind::kTaskDone, rank, s});
    }
    return;
  }
  while (dependents[current] == 0 && st.next < order.size()) {
    const TaskIndex next = order[st.next];
    const Task& nt = rc.tasks[next];
    if (nt.kind != TaskKind::kCompute) break;
    if (!deps_done(rank, cls, nt)) break;
    const TimePoint next_issued = issued_at(rank, cls, next);
    if (next_issued == kNotIssued) break;
    // `current` ends at `end`; `next` starts then.
    finish_compute(rank, rc.tasks[current], current, ready, start, end);
    ++st.next;
    ++completed_[stream_index(rank, s)];
    current = next;
    ready = end;
    start = std::max(end, next_issued);
    if (primary && start > end) acc.host_wait += start - end;
    if (nt.alloc_bytes != 0) change_memory(rank, nt.alloc_bytes, start);
    end = start + compute_duration(rank, cls, nt);
  }
  st.posted = ready;
  st.transfer_start = start;
  queue_.push(end, 0, EventPayload{EventKind::kTaskDone, rank, s});
}

// Book-keeping of a compute task that ended inside a chain (no event of its own).
void Engine::finish_compute(std::uint32_t rank, const Task& task, TaskIndex index, TimePoint ready, TimePoint start,
                            TimePoint end) {
  ++result_.tasks_executed;
  if (task.free_bytes != 0) change_memory(rank, -task.free_bytes, end);
  RankAccount& acc = result_.accounts[ranks_[rank].account];
  acc.busy[task.category] += end - start;
  if (ranks_[rank].recorded) result_.records.push_back(TaskRecord{RankId{rank}, index, ready, start, end, 0, 0, 1});
}

void Engine::chain_after(CauseChain& chain, std::uint32_t rank, std::uint32_t ys, TaskIndex y_index) const {
  const Task& y = ranks_[rank].rc->tasks[y_index];
  const CauseChain& prior = last_chain_[stream_index(rank, ys)];
  if (y.kind == TaskKind::kCompute || prior.n == 0) {  // work of its own, or nothing behind it
    chain.n = 1;
    chain.from[0] = TimePoint{};
    chain.cat[0] = y.category;
    chain.holder = y_index;
    return;
  }
  chain = prior;
  chain.holder = y_index;
  if (chain.n == CauseChain::kDepth) {  // drop the oldest segment: the next one reaches back
    std::copy(chain.from.begin() + 1, chain.from.end(), chain.from.begin());
    std::copy(chain.cat.begin() + 1, chain.cat.end(), chain.cat.begin());
    chain.from[0] = TimePoint{};
    --chain.n;
  }
  chain.from[chain.n] = streams_[stream_index(rank, ys)].last_posted;
  chain.cat[chain.n] = y.category;
  ++chain.n;
}

void Engine::charge_gap(RankAccount& acc, bool recorded, const GapRecord& gap) {
  const Duration d = gap.to - gap.from;
  switch (gap.cause) {
    case GapRecord::Cause::kHeldBack:
    case GapRecord::Cause::kHostSync:
      acc.gap_issue[gap.category] += d;
      break;
    case GapRecord::Cause::kWaiting:
      acc.gap_wait[gap.category] += d;
      break;
    case GapRecord::Cause::kTransferring:
      acc.gap_exposed[gap.category] += d;
      break;
    case GapRecord::Cause::kUnattributed:
      acc.gap_other += d;
      break;
    case GapRecord::Cause::kTail:
      acc.gap_tail[gap.category] += d;
      break;
  }
  if (recorded && d > Duration::zero()) result_.gaps.push_back(gap);
}

void Engine::attribute_gap(std::uint32_t rank, const RankClass& rc, TaskIndex ti, StreamState& st) {
  const TimePoint now = queue_.now();
  if (now <= st.last_end) return;
  RankAccount& acc = result_.accounts[ranks_[rank].account];
  const bool recorded = ranks_[rank].recorded;
  const Task& task = rc.tasks[ti];
  using Cause = GapRecord::Cause;
  auto gap = [&](Cause cause, std::uint8_t category, TimePoint from, TimePoint to, TaskIndex dep) {
    return GapRecord{RankId{rank}, from, to, ti, dep, category, cause};
  };
  // The task waited for the dependency that ended last, i.e. at `now`.
  for (std::uint32_t i = 0; i < task.deps_count; ++i) {
    const TaskIndex di = rc.deps[task.deps_begin + i];
    const Task& d = rc.tasks[di];
    if (!ended_last_at(rank, d.stream, d.position, now)) continue;
    if (d.kind == TaskKind::kCompute) {  // hidden work on another stream
      charge_gap(acc, recorded, gap(Cause::kTransferring, d.category, st.last_end, now, di));
      return;
    }
    const StreamState& ds = stream_state(rank, d.stream);
    const TimePoint issued = std::clamp(ds.last_posted, st.last_end, now);
    const TimePoint started = std::clamp(ds.last_transfer_start, issued, now);
    if (issued > st.last_end) {  // not issued yet: held back by something else
      const CauseChain& c = last_chain_[stream_index(rank, d.stream)];
      if (c.n == 0) {
        // Nothing on its stream held it: the host issued it late. Up to the end of the
        // synchronizing task the host waited for, the gap is that task's (a pipeline transfer
        // before scatter/gather's all-gather: the bubble); the host's own issuing after it is
        // not attributed.
        const HostState& h = host_[rank];
        const TimePoint held_until = h.synced ? std::clamp(h.base_time, st.last_end, issued) : st.last_end;
        if (held_until > st.last_end) charge_gap(acc, recorded, gap(Cause::kHostSync, h.sync_category, st.last_end, held_until, di));
        charge_gap(acc, recorded, gap(Cause::kUnattributed, 0, held_until, issued, di));
      }
      for (std::uint8_t k = 0; k < c.n; ++k) {
        const TimePoint lo = std::max(c.from[k], st.last_end);
        const TimePoint hi = k + 1 < c.n ? std::min(c.from[k + 1], issued) : issued;
        if (hi > lo) charge_gap(acc, recorded, gap(Cause::kHeldBack, c.cat[k], lo, hi, di));
      }
    }
    charge_gap(acc, recorded, gap(Cause::kWaiting, d.category, issued, started, di));  // issued, waiting for its peers
    charge_gap(acc, recorded, gap(Cause::kTransferring, d.category, started, now, di));
    return;
  }
  charge_gap(acc, recorded, gap(Cause::kUnattributed, 0, st.last_end, now, GapRecord::kNone));
}

void Engine::post_collective(std::uint32_t rank, std::uint32_t s, const Task& task,
                             const RankClass& rc) {
  const CommId comm = graph_.comm(RankId{rank}, task.slot);
  Rendezvous& rv = collectives_[index(comm)];
  const CommOp& op = rc.comm_ops[task.payload];
  if (rv.arrived == 0) {
    rv.instance = new_instance();
    instances_[rv.instance].time_scale = options_.comm_time_scale[task.category];
    rv.op = op;
  } else {
    TRAINSIM_CHECK(rv.op == op, "members of communicator " + graph_.comm_slot_name(task.slot) +
                                    " issued different collectives at the same point");
  }
  instances_[rv.instance].waiters.push_back(Waiter{rank, static_cast<std::uint8_t>(s)});
  if (++rv.arrived < simulated_members_[index(comm)]) return;
  const std::uint32_t inst = rv.instance;
  rv.arrived = 0;
  rv.instance = kNoInstance;
  instances_[inst].cost = &timing_.collective_cost(op, comm, options_.symmetric);
  start_instance(inst);
}

void Engine::post_transfer(std::uint32_t rank, std::uint32_t s, const Transfer& t, std::uint8_t category) {
  const RankId peer = graph_.peer(RankId{rank}, t.peer_slot);
  const RankId src = t.is_send ? RankId{rank} : peer;
  const RankId dst = t.is_send ? peer : RankId{rank};
  const Waiter me{rank, static_cast<std::uint8_t>(s)};
  const std::uint16_t send_slot = t.is_send ? t.peer_slot : graph_.reverse_peer_slot(t.peer_slot);
  if (ranks_[index(peer)].account == kNoInstance) {  // peer not simulated: it mirrors this rank
    const std::uint32_t inst = new_instance();
    instances_[inst].time_scale = options_.comm_time_scale[category];
    instances_[inst].waiters.push_back(me);
    instances_[inst].cost = &timing_.transfer_cost(t.bytes, src, dst, send_slot, options_.symmetric);
    start_instance(inst);
    return;
  }
  Rendezvous& ch = channels_[static_cast<std::size_t>(index(src)) * graph_.num_peer_slots() + send_slot];
  if (!ch.has_send && !ch.has_recv) {
    ch.instance = new_instance();
    instances_[ch.instance].time_scale = options_.comm_time_scale[category];
    ch.bytes = t.bytes;
  } else {
    TRAINSIM_CHECK(ch.bytes == t.bytes, "send and receive sizes differ on " +
                                            graph_.peer_slot_name(send_slot));
    TRAINSIM_CHECK(t.is_send ? !ch.has_send : !ch.has_recv,
                   "two outstanding transfers on one channel (" + graph_.peer_slot_name(send_slot) + ")");
  }
  (t.is_send ? ch.has_send : ch.has_recv) = true;
  instances_[ch.instance].waiters.push_back(me);
  if (!(ch.has_send && ch.has_recv)) return;
  const std::uint32_t inst = ch.instance;
  ch = Rendezvous{};
  instances_[inst].cost = &timing_.transfer_cost(t.bytes, src, dst, send_slot, options_.symmetric);
  start_instance(inst);
}

std::uint32_t Engine::new_instance() {
  std::uint32_t id;
  if (!free_instances_.empty()) {
    id = free_instances_.back();
    free_instances_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(instances_.size());
    instances_.emplace_back();
  }
  instances_[id].active = true;
  instances_[id].waiters.clear();
  return id;
}

void Engine::start_instance(std::uint32_t inst) {
  const TimePoint now = queue_.now();
  Instance& in = instances_[inst];
  for (const Waiter& w : in.waiters) {
    StreamState& st = stream_state(w.rank, w.stream);
    st.transfer_start = now;
    st.algorithm = in.cost->algorithm;
    st.protocol = in.cost->protocol;
  }
  const CommCost& cost = *in.cost;
  if (!sm_progress_.empty() && cost.sm_fraction > 0) {
    in.holds_sms = true;
    for (const Waiter& w : in.waiters) take_sms(w.rank, cost.sm_fraction);
  }
  const Duration latency = in.time_scale == 1 ? cost.latency : Duration::from_seconds(cost.latency.seconds() * in.time_scale);
  const double volume = cost.volume * in.time_scale;
  if (volume <= 0 || cost.demands.empty()) {
    Duration d = latency;
    if (volume > 0) d += Duration::from_seconds(volume / cost.max_rate.bytes_per_second());
    queue_.push(now + d, 0, EventPayload{EventKind::kInstanceDone, inst, 0});
  } else {
    queue_.push(now + latency, 1, EventPayload{EventKind::kFlowStart, inst, 0});
  }
}

void Engine::take_sms(std::uint32_t rank, double delta) {
  double& taken = sm_taken_[rank];
  taken += delta;
  if (taken < 1e-12) taken = 0;  // the sum of what was taken and given back, rounded
  const double rate = sm_rate(rank);
  const TimePoint now = queue_.now();
  for (std::uint32_t s = 0; s < num_streams_; ++s) {
    SmProgress& p = sm_progress_[stream_index(rank, s)];
    if (!p.active || p.rate == rate) continue;
    if (now > p.segment) {  // (a kernel waiting for its launch has not begun)
      p.work = std::max(0.0, p.work - static_cast<double>((now - p.segment).ps()) * p.rate);
      p.segment = now;
    }
    p.rate = rate;
    schedule_sm_kernel(rank, s, p);
  }
}

void Engine::schedule_sm_kernel(std::uint32_t rank, std::uint32_t s, SmProgress& p) {
  p.due = p.segment + Duration::from_ps(static_cast<std::int64_t>(std::ceil(p.work / p.rate)));
  p.generation = next_generation(p.generation);
  queue_.push(p.due, 0, EventPayload{EventKind::kTaskDone, rank, s | (p.generation << 4)});
}

void Engine::finish_instance(std::uint32_t inst) {
  if (instances_[inst].holds_sms) {
    instances_[inst].holds_sms = false;
    const double f = instances_[inst].cost->sm_fraction;
    for (const Waiter& w : instances_[inst].waiters) take_sms(w.rank, -f);
  }
  // complete_task() may start new instances and so reallocate instances_: index it afresh each
  // time instead of holding a reference (this instance is not free yet, so it is not reused).
  for (std::size_t i = 0; i < instances_[inst].waiters.size(); ++i) {
    const Waiter w = instances_[inst].waiters[i];
    StreamState& st = stream_state(w.rank, w.stream);
    const RankClass& rc = *ranks_[w.rank].rc;
    const Task& task = rc.tasks[rc.stream_tasks[w.stream][st.next - 1]];
    if (task.kind == TaskKind::kPointToPoint && --st.pending > 0) continue;
    complete_task(w.rank, w.stream);
  }
  instances_[inst].active = false;
  free_instances_.push_back(inst);
}

void Engine::complete_task(std::uint32_t rank, std::uint32_t s) {
  const TimePoint now = queue_.now();
  StreamState& st = stream_state(rank, s);
  TRAINSIM_CHECK(st.busy, "completing a task on an idle stream");
  const RankClass& rc = *ranks_[rank].rc;
  const TaskIndex ti = rc.stream_tasks[s][st.next - 1];
  const Task& task = rc.tasks[ti];
  st.busy = false;
  completed_[stream_index(rank, s)] = st.next;
  st.last_end = now;
  st.last_transfer_start = st.transfer_start;
  st.last_posted = st.posted;
  last_chain_[stream_index(rank, s)] = chain_[stream_index(rank, s)];
  ++result_.tasks_executed;
  if (task.free_bytes != 0) change_memory(rank, -task.free_bytes, now);
  RankState& rs = ranks_[rank];
  result_.accounts[rs.account].busy[task.category] += now - st.transfer_start;
  rs.finish = now;
  rs.last_task = ti;
  if (now > result_.makespan) result_.makespan = now;
  if (rs.recorded) {
    result_.records.push_back(
        TaskRecord{RankId{rank}, ti, st.posted, st.transfer_start, now, st.algorithm, st.protocol, st.speed_fraction});
  }
  // Only this stream and the streams with a task depending on this one can start something.
  try_start_streams(rank, (1u << s) | dependent_streams_[rs.cls][ti]);
  if (task.host_sync) host_synchronized(rank, rs.cls, ti);
}

void Engine::host_synchronized(std::uint32_t rank, std::uint32_t cls, TaskIndex ti) {
  const auto& syncs = host_syncs_[cls];
  HostState& h = host_[rank];
  if (h.next_sync >= syncs.size() || syncs[h.next_sync] != ti) return;
  h.base_time = queue_.now();
  h.base_issue = host_issue_[cls][ti];
  ++h.next_sync;
  h.synced = true;
  h.sync_category = ranks_[rank].rc->tasks[ti].category;
  // Every stream whose head waited for the host may go on.
  try_start_all(rank);
}

void Engine::change_memory(std::uint32_t rank, std::int64_t delta, TimePoint at) {
  RankState& rs = ranks_[rank];
  rs.memory_bytes += delta;
  const std::int64_t m = rs.memory_bytes;
  if (m > rs.memory_peak) {
    rs.memory_peak = m;
    result_.accounts[rs.account].peak_memory_time = at;
  }
  if (rs.recorded) {
    if (!result_.memory.empty() && result_.memory.back().rank == RankId{rank} && result_.memory.back().time == at) {
      result_.memory.back().bytes = m;
    } else {
      result_.memory.push_back(MemorySample{RankId{rank}, at, m});
    }
  }
}

void Engine::report_deadlock() {
  std::ostringstream msg;
  msg << "deadlock at t=" << queue_.now().seconds() << " s: no event left but tasks remain:";
  int listed = 0;
  for (RankId r : result_.ranks) {
    const RankClass& rc = graph_.rank_class(graph_.class_of(r));
    for (std::uint32_t s = 0; s < num_streams_ && listed < 12; ++s) {
      const StreamState& st = stream_state(index(r), s);
      if (!st.busy && st.next >= rc.stream_tasks[s].size()) continue;
      const TaskIndex ti = rc.stream_tasks[s][st.busy ? st.next - 1 : st.next];
      const Task& t = rc.tasks[ti];
      msg << "\n  rank " << index(r) << " stream " << graph_.stream_name(s) << ": task #" << ti << " '"
          << graph_.name(t.name) << "'";
      if (t.microbatch >= 0) msg << " mb " << t.microbatch;
      if (t.layer >= 0) msg << " layer " << t.layer;
      if (st.busy) {
        msg << (t.kind == TaskKind::kCollective ? " waits for the other members of its "
                                                 : " waits for its peer on ")
            << (t.kind == TaskKind::kCollective ? graph_.comm_slot_name(t.slot) + " communicator"
                                                : std::string("a point-to-point channel"));
      } else {
        msg << " waits for";
        for (std::uint32_t i = 0; i < t.deps_count; ++i) {
          const TaskIndex d = rc.deps[t.deps_begin + i];
          if (!dep_done(index(r), rc, d)) msg << " #" << d << " '" << graph_.name(rc.tasks[d].name) << "'";
        }
      }
      ++listed;
    }
  }
  throw DeadlockError(msg.str());
}

}  // namespace trainsim::sim
