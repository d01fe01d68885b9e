#pragma once
// Engine: executes a TaskGraph on the ranks it simulates and returns what happened.
//
// Each simulated rank has the graph's streams; a stream starts its next task as soon as the
// previous one on it has ended and the task's cross-stream dependencies are done. Compute tasks
// take the TimingModel's kernel time. A collective starts when every simulated member of its
// communicator has reached it; a point-to-point transfer when both sides have posted it (or at
// once when the peer is not simulated: under symmetry the peer behaves like this rank). Started
// communication waits its latency, then moves its bytes through the FlowNetwork, which shares
// link bandwidth among concurrent transfers. The host issues each rank's tasks in program order at
// the TimingModel's host time per task, from the start of the iteration, running ahead of the GPU
// except at a synchronizing task (Task::host_sync), which it waits for; a task starts no earlier
// than its issue (a CPU-bound rank's GPU idles between kernels). When the queue empties with
// tasks left, run() throws DeadlockError naming the stuck tasks. Each rank's account says where
// its time went, its primary stream's idle time charged to causes; for the recorded ranks the
// result also lists every task's times and every charged stretch of idle time (GapRecord), which
// the pictures and the trace draw. Same graph and model: same result, bit for bit.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/error.h"
#include "sim/event_queue.h"
#include "sim/flow_network.h"
#include "sim/task_graph.h"
#include "sim/timing_model.h"
#include "sim/units.h"

namespace trainsim::sim {

class DeadlockError : public InternalError {
 public:
  using InternalError::InternalError;
};

struct EngineOptions {
  bool symmetric = true;             // simulate only graph.simulated_ranks()
  std::vector<RankId> record_ranks;  // ranks whose task timeline and memory are recorded
  std::uint8_t primary_stream = 0;   // the stream whose idle time is attributed to causes
  // What-if: communication tasks of category c take comm_time_scale[c] times their modelled
  // time (latency and bytes on the links both scaled; 0 makes them free, 0.5 twice as fast).
  // Compute tasks of a scaled category (copies to and from host memory) scale the same way.
  // REQUIRES: each in [0, 16] (slower what-ifs beyond 16x could run past the clock).
  std::array<double, kMaxCategories> comm_time_scale = unit_scales();
  // A communication kernel occupies CommCost::sm_fraction of its GPU's SMs from its start to its
  // end; with this option the GEMM and attention kernels of that rank run meanwhile on the SMs
  // left (rate 1 - the fractions of the rank's running operations, at least kMinSmRate), re-timed
  // at every change. Memory-bound kernels and host copies keep their time. Off: overlapped
  // communication costs the compute nothing.
  bool sm_contention = false;
  static constexpr double kMinSmRate = 0.05;

  static constexpr std::array<double, kMaxCategories> unit_scales() {
    std::array<double, kMaxCategories> a{};
    a.fill(1.0);
    return a;
  }
};

// One executed task of a recorded rank.
struct TaskRecord {
  RankId rank{};
  TaskIndex task = 0;
  TimePoint posted;    // when the task was issued (reached the head of its stream, deps done)
  TimePoint start;     // compute: when the host's launch reached it (>= posted); communication: when the transfer began
  TimePoint end;
  std::uint8_t algorithm = 0, protocol = 0;  // communication only (TimingModel labels)
  double speed_fraction = 1;                 // communication: achieved share of its max rate
};

// One stretch of a recorded rank's primary-stream idle time and what the engine charged it to:
// per rank and category, these sum to RankAccount's gap arrays, so a picture of the gaps draws
// exactly what the breakdown counts.
struct GapRecord {
  enum class Cause : std::uint8_t {
    kHeldBack,      // the dependency was not issued yet: held back by a task of `category` (gap_issue)
    kHostSync,      // the host issued the dependency late: it waited for a synchronizing task of
                    // `category` to end (gap_issue)
    kWaiting,       // the dependency, of `category`, was issued and waited for its peers (gap_wait)
    kTransferring,  // the dependency, of `category`, was transferring, or ran on another stream (gap_exposed)
    kUnattributed,  // nothing ended as the task was issued, or the host was issuing (gap_other)
    kTail,          // after the primary stream's last task, until the rank's last task of `category`,
                    // `dependency`, ended: the end of the iteration (gap_tail)
  };
  static constexpr TaskIndex kNone = 0xffffffffu;
  RankId rank{};
  TimePoint from, to;
  TaskIndex task = 0;         // the primary-stream task that waited (kTail: the last one, which it follows)
  TaskIndex dependency = kNone;  // the dependency that ended as it was issued (kNone when none did)
  std::uint8_t category = 0;  // the category charged
  Cause cause = Cause::kUnattributed;
};

struct MemorySample {
  RankId rank{};
  TimePoint time;
  std::int64_t bytes = 0;
};

// Where a rank's time went.
struct RankAccount {
  TimePoint finish;                                  // end of its last task
  std::array<Duration, kMaxCategories> busy{};       // task time by category (comm: transfer only)
  // Idle time of the primary stream before a task, by the category of the task it waited for:
  // `wait` while that task had been issued and waited for its peers (pipeline bubble, skew),
  // `exposed` while it was transferring or still queued behind earlier communication on its
  // stream (communication not hidden behind compute).
  std::array<Duration, kMaxCategories> gap_wait{};
  std::array<Duration, kMaxCategories> gap_exposed{};
  // ... and before that task was even issued, by the category of what held it back (a
  // dependency of its own that ended when it was issued, or the task before it on its stream).
  std::array<Duration, kMaxCategories> gap_issue{};
  Duration gap_other;
  // After the primary stream's last task, until the rank's last task ended, by that task's category.
  std::array<Duration, kMaxCategories> gap_tail{};
  // Time the primary stream had its next compute task ready but waited for the host to issue it.
  Duration host_wait;
  // EngineOptions::sm_contention: how much longer its SM-bound kernels ran than alone, for the
  // SMs running communication held (part of `busy`).
  Duration sm_contention;
  std::int64_t peak_memory_bytes = 0;
  TimePoint peak_memory_time;
};

struct EngineResult {
  TimePoint makespan;                   // when the last simulated task ended
  std::vector<RankId> ranks;            // simulated ranks, ascending
  std::vector<RankAccount> accounts;    // parallel to `ranks`
  std::vector<TaskRecord> records;      // recorded ranks only, in completion order
  std::vector<GapRecord> gaps;          // recorded ranks only, in time order per rank
  std::vector<MemorySample> memory;     // recorded ranks only
  std::uint64_t events = 0;
  std::uint64_t tasks_executed = 0;
  FlowNetwork::Stats flows;  // the bandwidth solver's work
};

class Engine {
 public:
  Engine(const TaskGraph& graph, TimingModel& timing, EngineOptions options);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  EngineResult run();

 private:
  enum class EventKind : std::uint8_t { kTaskDone, kInstanceDone, kFlowStart, kFlowDone };
  // kind in the low 2 bits, `b` in the next 30, `a` in the high 32 (8 bytes keep the heap small).
  struct EventPayload {
    std::uint64_t bits = 0;
    EventPayload() = default;
    EventPayload(EventKind kind, std::uint32_t a, std::uint32_t b)
        : bits((std::uint64_t{a} << 32) | (std::uint64_t{b & 0x3fffffffu} << 2) | static_cast<std::uint64_t>(kind)) {}
    EventKind kind() const { return static_cast<EventKind>(bits & 3u); }
    std::uint32_t a() const { return static_cast<std::uint32_t>(bits >> 32); }
    std::uint32_t b() const { return static_cast<std::uint32_t>((bits >> 2) & 0x3fffffffu); }
  };
  struct alignas(64) StreamState {  // one cache line
    std::uint32_t next = 0;      // position of the next task to start
    std::uint32_t pending = 0;   // transfers of the running point-to-point task still open
    bool busy = false;
    std::uint8_t algorithm = 0, protocol = 0;
    TimePoint posted;            // when the running task was issued
    TimePoint transfer_start;    // communication: when its (last) transfer began
    TimePoint last_end;          // end of its last completed task (the stream is free since)
    TimePoint last_transfer_start;
    TimePoint last_posted;       // when its last completed task was issued
    double speed_fraction = 1;
  };
  static_assert(sizeof(StreamState) == 64);
  struct Waiter {
    std::uint32_t rank = 0;
    std::uint8_t stream = 0;
  };
  struct Instance {  // a started (or forming) communication operation
    std::vector<Waiter> waiters;
    const CommCost* cost = nullptr;  // owned by the timing model
    double time_scale = 1;           // EngineOptions::comm_time_scale of its category
    bool holds_sms = false;          // its waiters' ranks hold cost->sm_fraction (sm_contention)
    bool active = false;
  };
  struct Rendezvous {  // a collective or channel being formed
    std::uint32_t instance = kNoInstance;
    std::uint32_t arrived = 0;
    CommOp op{};
    Bytes bytes;  // channels
    bool has_send = false, has_recv = false;
  };
  static constexpr std::uint32_t kNoInstance = 0xffffffffu;
  // What held a communication task's issue back, followed back in time (cold data beside
  // StreamState): segment i runs from `from[i]` to `from[i + 1]` (the last one to the issue) and
  // is charged to category `cat[i]`. A task held back by communication that was itself held
  // back inherits that task's chain and adds a segment from its issue: an embedding-gradient
  // all-reduce issued after a short tensor-parallel all-reduce that itself waited for the
  // data-parallel gradient reduction charges the wait to the data-parallel reduction, and only
  // the short all-reduce's own time to tensor parallelism. The oldest causes merge into the
  // oldest segment kept.
  struct CauseChain {
    static constexpr std::size_t kDepth = 4;
    std::array<TimePoint, kDepth> from{};
    std::array<std::uint8_t, kDepth> cat{};
    std::uint8_t n = 0;
    static constexpr TaskIndex kNoHolder = 0xffffffffu;
    TaskIndex holder = kNoHolder;  // the task that held this one back
  };
  // `chain` becomes that of a task held back by task `y` (on stream `ys` of `rank`, ended now).
  void chain_after(CauseChain& chain, std::uint32_t rank, std::uint32_t ys, TaskIndex y) const;

  // Index of stream `s` of `rank` in streams_ and completed_.
  std::size_t stream_index(std::uint32_t rank, std::uint32_t s) const {
    return static_cast<std::size_t>(rank) * num_streams_ + s;
  }
  StreamState& stream_state(std::uint32_t rank, std::uint32_t s) { return streams_[stream_index(rank, s)]; }
  // Tasks of stream `s` of `rank` that have ended.
  std::uint32_t completed(std::uint32_t rank, std::uint32_t s) const { return completed_[stream_index(rank, s)]; }
  // True when the task at `position` of stream `s` is the last one that ended there, at `now`.
  bool ended_last_at(std::uint32_t rank, std::uint32_t s, std::uint32_t position, TimePoint now) {
    return completed(rank, s) == position + 1 && stream_state(rank, s).last_end == now;
  }
  bool dep_done(std::uint32_t rank, const RankClass& rc, TaskIndex dep);
  bool deps_done(std::uint32_t rank, std::uint32_t cls, const Task& task) const;
  void try_start_all(std::uint32_t rank);
  // Streams of `rank` whose head may have become startable: `mask` has one bit per stream.
  void try_start_streams(std::uint32_t rank, std::uint32_t mask);
  void try_start(std::uint32_t rank, std::uint32_t s);
  void attribute_gap(std::uint32_t rank, const RankClass& rc, TaskIndex ti, StreamState& st);
  // Adds `gap` to the account array its cause names (and to the result's gaps when the rank is recorded).
  void charge_gap(RankAccount& acc, bool recorded, const GapRecord& gap);
  void post_collective(std::uint32_t rank, std::uint32_t s, const Task& task, const RankClass& rc);
  void post_transfer(std::uint32_t rank, std::uint32_t s, const Transfer& t, std::uint8_t category);
  std::uint32_t new_instance();
  void start_instance(std::uint32_t inst);
  void finish_instance(std::uint32_t inst);
  void complete_task(std::uint32_t rank, std::uint32_t s);
  void schedule_flows();
  void change_memory(std::uint32_t rank, std::int64_t delta, TimePoint at);
  // EngineOptions::sm_contention: `rank`'s running communication takes `delta` more of its SMs;
  // its running SM-bound kernels are re-timed.
  void take_sms(std::uint32_t rank, double delta);
  double sm_rate(std::uint32_t rank) const { return std::max(EngineOptions::kMinSmRate, 1.0 - sm_taken_[rank]); }
  Duration compute_duration(std::uint32_t rank, std::uint32_t cls, const Task& task) const;
  // When the host of `rank` issues task `ti` (time zero when host time is not modelled), or
  // kNotIssued while the host waits for an earlier synchronizing task to end.
  TimePoint issued_at(std::uint32_t rank, std::uint32_t cls, TaskIndex ti) const {
    const auto& v = host_issue_[cls];
    if (v.empty()) return TimePoint{};
    const HostState& h = host_[rank];
    const auto& syncs = host_syncs_[cls];
    if (h.next_sync < syncs.size() && ti > syncs[h.next_sync]) return kNotIssued;
    return h.base_time + (v[ti] - h.base_issue);
  }
  // A synchronizing task ended: the host goes on from `now`.
  void host_synchronized(std::uint32_t rank, std::uint32_t cls, TaskIndex ti);
  void start_compute_chain(std::uint32_t rank, std::uint32_t s, const RankClass& rc, TaskIndex first, TimePoint start);
  void finish_compute(std::uint32_t rank, const Task& task, TaskIndex index, TimePoint ready, TimePoint start, TimePoint end);
  [[noreturn]] void report_deadlock();

  const TaskGraph& graph_;
  TimingModel& timing_;
  EngineOptions options_;
  std::uint32_t num_streams_ = 0;
  EventQueue<EventPayload> queue_;
  FlowNetwork network_;
  std::vector<FlowNetwork::Reschedule> reschedules_;
  std::vector<std::uint32_t> flow_instance_;  // flow id -> instance
  std::vector<std::vector<Duration>> kernel_time_;  // per class, per kernel
  // Per class, per task (program order): host time until the host has issued it; empty when the
  // timing model charges no host time.
  std::vector<std::vector<Duration>> host_issue_;
  // Per class (where host time is modelled): its synchronizing tasks, in program order.
  std::vector<std::vector<TaskIndex>> host_syncs_;
  // Per rank: where its host stands. It has issued every task up to its next synchronizing task
  // (host_syncs_[cls][next_sync]), task i at base_time + (host_issue_[i] - base_issue).
  struct HostState {
    TimePoint base_time;
    Duration base_issue;
    std::uint32_t next_sync = 0;
    // The synchronizing task the host last waited for (its reporting category), once one has
    // ended: a task issued after it was held back by it until base_time.
    bool synced = false;
    std::uint8_t sync_category = 0;
  };
  std::vector<HostState> host_;
  static constexpr TimePoint kNotIssued = TimePoint{} + Duration::max();
  // Per stream ([rank * streams + stream]): the time a wake-up event is pending for (a
  // communication task waiting for its issue), so that it is queued once.
  std::vector<TimePoint> wake_at_;
  // Marks a kTaskDone event as the wake-up of a stream whose head waits for the host.
  static constexpr std::uint32_t kWakeBit = 1u << 29;
  // Under EngineOptions::sm_contention a compute completion carries its stream in the low 4 bits
  // and the generation of its timing in the next 25 (never 0, which marks the completion of a
  // kernel that cannot be re-timed); a re-timed kernel's older events are stale.
  static constexpr std::uint32_t kGenerationMask = (1u << 25) - 1;
  static std::uint32_t next_generation(std::uint32_t g) {
    g = (g + 1) & kGenerationMask;
    return g == 0 ? 1 : g;
  }
  // Per stream, under sm_contention: the running SM-bound kernel's progress. From `segment` on
  // it runs at `rate`, with `work` picoseconds of full-rate work left then; it ends at `due`.
  struct SmProgress {
    TimePoint segment, due;
    Duration nominal;  // its time alone
    double work = 0;
    double rate = 1;
    std::uint32_t generation = 0;  // masked, as in the events
    bool active = false;
  };
  // Queues the completion of `p`, the SM-bound kernel on stream `s` of `rank`, for when its work
  // left ends at its rate; its earlier completions become stale.
  void schedule_sm_kernel(std::uint32_t rank, std::uint32_t s, SmProgress& p);
  std::vector<SmProgress> sm_progress_;  // [rank * streams + stream]
  std::vector<double> sm_taken_;         // per rank: SM fraction held by its running communication
  std::vector<std::vector<std::uint16_t>> dependent_streams_;  // per class, per task: streams waiting on it
  std::vector<StreamState> streams_;                 // [rank * streams + stream]
  std::vector<CauseChain> chain_, last_chain_;       // per stream: of the running and the last completed task
  // [rank * streams + stream]: tasks ended, apart from StreamState so that the dependency checks
  // of every task start read a few dense bytes (4 per stream) instead of an 80-byte state each.
  std::vector<std::uint32_t> completed_;
  // Per class, parallel to RankClass::deps: the dependency's position in its stream (high 28
  // bits) and its stream (low 4), so a check needs no load of the dependency's Task.
  std::vector<std::vector<std::uint32_t>> dep_refs_;
  // What the engine reads and writes of a rank at nearly every event, in one cache line: at 16K+
  // ranks each separate per-rank array (or account field) costs a cache miss per event. The
  // peak, finish and tail go into the accounts when the run ends; the time of the peak
  // is written there directly (it changes rarely).
  struct alignas(64) RankState {
    const RankClass* rc = nullptr;
    std::uint32_t cls = 0;
    std::uint32_t account = kNoInstance;  // index into result accounts; kNoInstance: not simulated
    double slowdown = 1;                  // compute time factor (stragglers)
    std::int64_t memory_bytes = 0, memory_peak = 0;
    TimePoint finish;                     // end of its last task
    TaskIndex last_task = GapRecord::kNone;  // its last task to end
    bool recorded = false;                // its task timeline and memory are recorded
  };
  static_assert(sizeof(RankState) == 64);
  std::vector<RankState> ranks_;
  std::vector<Rendezvous> collectives_;             // per communicator
  std::vector<std::uint32_t> simulated_members_;    // per communicator
  std::vector<Rendezvous> channels_;                // [sender rank * peer slots + slot]
  std::vector<Instance> instances_;
  std::vector<std::uint32_t> free_instances_;
  EngineResult result_;
};

}  // namespace trainsim::sim
