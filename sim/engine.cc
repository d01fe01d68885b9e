#include "sim/engine.h"

#include <algorithm>
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
  account_of_.assign(n, kNoInstance);
  memory_.assign(n, 0);
  slowdown_.assign(n, 1.0);
  recorded_.assign(n, 0);
  for (RankId r : options_.record_ranks) {
    TRAINSIM_CHECK(index(r) < n, "recorded rank out of range");
    recorded_[index(r)] = 1;
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
    account_of_[r] = static_cast<std::uint32_t>(i);
    simulated[r] = 1;
    slowdown_[r] = timing_.compute_slowdown(result_.ranks[i]);
  }
  result_.accounts.resize(result_.ranks.size());

  collectives_.resize(graph_.num_communicators());
  simulated_members_.assign(graph_.num_communicators(), 0);
  for (std::uint32_t c = 0; c < graph_.num_communicators(); ++c) {
    for (RankId m : graph_.communicator(CommId{c}).members) simulated_members_[c] += simulated[index(m)];
  }
  channels_.resize(static_cast<std::size_t>(n) * graph_.num_peer_slots());

  kernel_time_.resize(graph_.num_classes());
  for (std::uint32_t c = 0; c < graph_.num_classes(); ++c) {
    for (const Kernel& k : graph_.rank_class(c).kernels) kernel_time_[c].push_back(timing_.kernel_time(k));
  }
}

EngineResult Engine::run() {
  for (std::size_t i = 0; i < result_.ranks.size(); ++i) {
    const std::uint32_t r = index(result_.ranks[i]);
    change_memory(r, graph_.rank_class(graph_.class_of(result_.ranks[i])).static_memory_bytes);
  }
  for (RankId r : result_.ranks) try_start_all(index(r));
  while (!queue_.empty()) {
    const auto ev = queue_.pop();
    ++result_.events;
    switch (ev.payload.kind) {
      case EventKind::kTaskDone:
        complete_task(ev.payload.a, ev.payload.b);
        break;
      case EventKind::kInstanceDone:
        finish_instance(ev.payload.a);
        break;
      case EventKind::kFlowStart: {
        Instance& in = instances_[ev.payload.a];
        const FlowNetwork::FlowId f =
            network_.add(queue_.now(), in.cost.volume, in.cost.max_rate, in.cost.demands, reschedules_);
        if (flow_instance_.size() <= f) flow_instance_.resize(f + 1, kNoInstance);
        flow_instance_[f] = ev.payload.a;
        schedule_flows();
        break;
      }
      case EventKind::kFlowDone: {
        const FlowNetwork::FlowId f = ev.payload.a;
        if (!network_.is_current(f, ev.payload.b)) break;  // rescheduled since
        const std::uint32_t inst = flow_instance_[f];
        Instance& in = instances_[inst];
        const double fraction = network_.speed_fraction(f);
        for (const Waiter& w : in.waiters) stream_state(w.rank, w.stream).speed_fraction = fraction;
        network_.finish(queue_.now(), f, reschedules_);
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
  const StreamState& st = stream_state(rank, d.stream);
  const std::uint32_t completed = st.next - (st.busy ? 1u : 0u);
  return d.position < completed;
}

void Engine::try_start_all(std::uint32_t rank) {
  for (std::uint32_t s = 0; s < num_streams_; ++s) try_start(rank, s);
}

void Engine::try_start(std::uint32_t rank, std::uint32_t s) {
  StreamState& st = stream_state(rank, s);
  if (st.busy) return;
  const RankClass& rc = graph_.rank_class(graph_.class_of(RankId{rank}));
  const auto& order = rc.stream_tasks[s];
  if (st.next >= order.size()) return;
  const Task& task = rc.tasks[order[st.next]];
  for (std::uint32_t i = 0; i < task.deps_count; ++i) {
    if (!dep_done(rank, rc, rc.deps[task.deps_begin + i])) return;
  }
  const TimePoint now = queue_.now();
  if (s == options_.primary_stream) attribute_gap(rank, rc, task, st);
  st.busy = true;
  ++st.next;
  st.posted = now;
  st.transfer_start = now;
  st.algorithm = st.protocol = 0;
  st.speed_fraction = 1;
  if (task.alloc_bytes != 0) change_memory(rank, task.alloc_bytes);
  switch (task.kind) {
    case TaskKind::kCompute: {
      Duration d = kernel_time_[graph_.class_of(RankId{rank})][task.payload];
      if (slowdown_[rank] != 1.0) d = d.scaled(slowdown_[rank]);
      queue_.push(now + d, 0, EventPayload{EventKind::kTaskDone, rank, s});
      break;
    }
    case TaskKind::kCollective:
      post_collective(rank, s, task, rc);
      break;
    case TaskKind::kPointToPoint:
      st.pending = task.payload_count;
      TRAINSIM_CHECK(task.payload_count > 0, "point-to-point task without transfers");
      for (std::uint32_t i = 0; i < task.payload_count; ++i) {
        post_transfer(rank, s, rc.transfers[task.payload + i]);
      }
      break;
  }
}

void Engine::attribute_gap(std::uint32_t rank, const RankClass& rc, const Task& task,
                           StreamState& st) {
  const TimePoint now = queue_.now();
  const Duration gap = now - st.free_since;
  if (gap <= Duration::zero()) return;
  RankAccount& acc = result_.accounts[account_of_[rank]];
  // The task waited for the dependency that ended last, i.e. at `now`.
  for (std::uint32_t i = 0; i < task.deps_count; ++i) {
    const Task& d = rc.tasks[rc.deps[task.deps_begin + i]];
    const StreamState& ds = stream_state(rank, d.stream);
    const std::uint32_t completed = ds.next - (ds.busy ? 1u : 0u);
    if (completed != d.position + 1 || ds.last_end != now) continue;
    if (d.kind == TaskKind::kCompute) {
      acc.gap_exposed[d.category] += gap;  // hidden work on another stream
    } else {
      const TimePoint split = std::clamp(ds.last_transfer_start, st.free_since, now);
      acc.gap_wait[d.category] += split - st.free_since;
      acc.gap_exposed[d.category] += now - split;
    }
    return;
  }
  acc.gap_other += gap;
}

void Engine::post_collective(std::uint32_t rank, std::uint32_t s, const Task& task,
                             const RankClass& rc) {
  const CommId comm = graph_.comm(RankId{rank}, task.slot);
  Rendezvous& rv = collectives_[index(comm)];
  const CommOp& op = rc.comm_ops[task.payload];
  if (rv.arrived == 0) {
    rv.instance = new_instance();
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
  instances_[inst].cost = timing_.collective_cost(op, comm, options_.symmetric);
  start_instance(inst);
}

void Engine::post_transfer(std::uint32_t rank, std::uint32_t s, const Transfer& t) {
  const RankId peer = graph_.peer(RankId{rank}, t.peer_slot);
  const RankId src = t.is_send ? RankId{rank} : peer;
  const RankId dst = t.is_send ? peer : RankId{rank};
  const Waiter me{rank, static_cast<std::uint8_t>(s)};
  const std::uint16_t send_slot = t.is_send ? t.peer_slot : graph_.reverse_peer_slot(t.peer_slot);
  if (account_of_[index(peer)] == kNoInstance) {  // peer not simulated: it mirrors this rank
    const std::uint32_t inst = new_instance();
    instances_[inst].waiters.push_back(me);
    instances_[inst].cost = timing_.transfer_cost(t.bytes, src, dst, send_slot, options_.symmetric);
    start_instance(inst);
    return;
  }
  Rendezvous& ch = channels_[static_cast<std::size_t>(index(src)) * graph_.num_peer_slots() + send_slot];
  if (!ch.has_send && !ch.has_recv) {
    ch.instance = new_instance();
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
  instances_[inst].cost = timing_.transfer_cost(t.bytes, src, dst, send_slot, options_.symmetric);
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
    st.algorithm = in.cost.algorithm;
    st.protocol = in.cost.protocol;
  }
  if (in.cost.volume <= 0 || in.cost.demands.empty()) {
    Duration d = in.cost.latency;
    if (in.cost.volume > 0) {
      d += Duration::from_seconds(in.cost.volume / in.cost.max_rate.bytes_per_second());
    }
    queue_.push(now + d, 0, EventPayload{EventKind::kInstanceDone, inst, 0});
  } else {
    queue_.push(now + in.cost.latency, 1, EventPayload{EventKind::kFlowStart, inst, 0});
  }
}

void Engine::finish_instance(std::uint32_t inst) {
  // complete_task() may start new communication, and new_instance() may grow instances_: hold
  // no reference into it across the loop (the instance stays active, so it is not reused).
  const std::vector<Waiter> waiters = std::move(instances_[inst].waiters);
  for (const Waiter& w : waiters) {
    StreamState& st = stream_state(w.rank, w.stream);
    const RankClass& rc = graph_.rank_class(graph_.class_of(RankId{w.rank}));
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
  const RankClass& rc = graph_.rank_class(graph_.class_of(RankId{rank}));
  const TaskIndex ti = rc.stream_tasks[s][st.next - 1];
  const Task& task = rc.tasks[ti];
  st.busy = false;
  st.free_since = now;
  st.last_end = now;
  st.last_transfer_start = st.transfer_start;
  ++result_.tasks_executed;
  if (task.free_bytes != 0) change_memory(rank, -task.free_bytes);
  RankAccount& acc = result_.accounts[account_of_[rank]];
  acc.busy[task.category] += now - st.transfer_start;
  acc.finish = now;
  acc.last_category = task.category;
  if (s == options_.primary_stream) acc.primary_end = now;
  if (now > result_.makespan) result_.makespan = now;
  if (recorded_[rank]) {
    result_.records.push_back(TaskRecord{RankId{rank}, ti, st.posted, st.transfer_start, now,
                                         st.algorithm, st.protocol, st.speed_fraction});
  }
  try_start_all(rank);
}

void Engine::change_memory(std::uint32_t rank, std::int64_t delta) {
  std::int64_t& m = memory_[rank];
  m += delta;
  RankAccount& acc = result_.accounts[account_of_[rank]];
  if (m > acc.peak_memory_bytes) {
    acc.peak_memory_bytes = m;
    acc.peak_memory_time = queue_.now();
  }
  if (recorded_[rank]) {
    if (!result_.memory.empty() && result_.memory.back().rank == RankId{rank} &&
        result_.memory.back().time == queue_.now()) {
      result_.memory.back().bytes = m;
    } else {
      result_.memory.push_back(MemorySample{RankId{rank}, queue_.now(), m});
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
