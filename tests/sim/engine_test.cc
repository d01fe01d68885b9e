#include "sim/engine.h"

#include <doctest/doctest.h>
#include <map>
#include <string>

using namespace trainsim::sim;

namespace {

// Kernels take `flops` nanoseconds; communication takes 1 us plus bytes at 1 GB/s (1 ns/byte).
class FakeTiming final : public TimingModel {
 public:
  double sm_fraction = 0;  // of every operation (EngineOptions::sm_contention)
  Duration kernel_time(const Kernel& k) override { return Duration::from_ns(static_cast<std::int64_t>(k.flops.count())); }
  const CommCost& collective_cost(const CommOp& op, CommId, bool) override { return cost(op.bytes); }
  const CommCost& transfer_cost(Bytes b, RankId, RankId, std::uint16_t, bool) override { return cost(b); }
  std::vector<Bandwidth> resource_capacities() override { return {}; }

 private:
  const CommCost& cost(Bytes b) {
    CommCost& c = cache_[b.count()];
    c.sm_fraction = sm_fraction;
    c.latency = Duration::from_us(1);
    c.volume = b.as_double();
    c.max_rate = Bandwidth::gb_per_s(1);
    return c;
  }
  std::map<std::int64_t, CommCost> cache_;
};

Kernel work(double ns) {
  Kernel k;
  k.flops = Flops(ns);
  return k;
}

// A graph with `ranks` ranks, two streams, one communicator slot and two peer slots.
TaskGraph make_graph(std::uint32_t ranks) {
  TaskGraph g(ranks, {"compute", "comm"}, {"all"}, {"next", "prev"});
  g.set_reverse_peer_slot(0, 1);
  g.set_reverse_peer_slot(1, 0);
  return g;
}

TaskIndex compute(TaskGraph& g, std::uint32_t c, const std::string& name, double ns, std::vector<TaskIndex> deps = {},
                  std::uint8_t stream = 0) {
  Task t;
  t.kind = TaskKind::kCompute;
  t.stream = stream;
  t.payload = g.add_kernel(c, work(ns));
  t.name = g.intern(name);
  return g.add_task(c, t, deps);
}

TaskIndex gemm(TaskGraph& g, std::uint32_t c, const std::string& name, double ns, std::vector<TaskIndex> deps = {}) {
  Kernel k = work(ns);
  k.kernel_class = KernelClass::kGemm;
  Task t;
  t.kind = TaskKind::kCompute;
  t.payload = g.add_kernel(c, k);
  t.name = g.intern(name);
  return g.add_task(c, t, deps);
}

TaskIndex collective(TaskGraph& g, std::uint32_t c, std::int64_t bytes, std::vector<TaskIndex> deps = {},
                     std::uint8_t stream = 1, std::uint8_t category = 4) {
  Task t;
  t.kind = TaskKind::kCollective;
  t.stream = stream;
  t.slot = 0;
  t.category = category;
  t.payload = g.add_comm_op(c, CommOp{CollectiveKind::kAllReduce, DataType::kBf16, Bytes(bytes)});
  t.name = g.intern("all_reduce");
  return g.add_task(c, t, deps);
}

// A batch of transfers on stream 1; `host_sync`: the host waits for it before it issues more.
TaskIndex p2p(TaskGraph& g, std::uint32_t c, std::vector<Transfer> transfers, std::vector<TaskIndex> deps = {},
              bool host_sync = false, std::uint8_t category = 0) {
  Task t;
  t.kind = TaskKind::kPointToPoint;
  t.stream = 1;
  t.category = category;
  t.host_sync = host_sync;
  t.payload = g.add_transfers(c, transfers);
  t.payload_count = static_cast<std::uint32_t>(transfers.size());
  t.name = g.intern("p2p");
  return g.add_task(c, t, deps);
}

// FakeTiming with a host time per issued task.
class HostBoundTiming final : public TimingModel {
 public:
  explicit HostBoundTiming(Duration host) : host_(host) {}
  Duration kernel_time(const Kernel& k) override { return fake_.kernel_time(k); }
  Duration host_issue_time(const Task&) override { return host_; }
  const CommCost& collective_cost(const CommOp& op, CommId c, bool s) override { return fake_.collective_cost(op, c, s); }
  const CommCost& transfer_cost(Bytes b, RankId a, RankId d, std::uint16_t slot, bool s) override {
    return fake_.transfer_cost(b, a, d, slot, s);
  }
  std::vector<Bandwidth> resource_capacities() override { return {}; }

 private:
  Duration host_;
  FakeTiming fake_;
};

// Ranks 0 and 1 in classes c0 and c1, sharing communicator slot 0 (both simulated).
void pair_up(TaskGraph& g, std::uint32_t c0, std::uint32_t c1) {
  g.set_class_of(RankId{0}, c0);
  g.set_class_of(RankId{1}, c1);
  Communicator comm;
  comm.members = {RankId{0}, RankId{1}};
  const CommId id = g.add_communicator(comm);
  g.set_comm(RankId{0}, 0, id);
  g.set_comm(RankId{1}, 0, id);
  g.set_simulated({RankId{0}, RankId{1}});
}

// Runs a one-rank graph whose collectives use slot 0 (a communicator of that rank alone).
EngineResult run_alone(TaskGraph& g) {
  g.set_simulated({RankId{0}});
  Communicator comm;
  comm.members = {RankId{0}};
  g.set_comm(RankId{0}, 0, g.add_communicator(comm));
  FakeTiming timing;
  Engine engine(g, timing, EngineOptions{true, {}, 0});
  return engine.run();
}

const TaskRecord& record_of(const EngineResult& r, RankId rank, TaskIndex task) {
  for (const TaskRecord& rec : r.records) {
    if (rec.rank == rank && rec.task == task) return rec;
  }
  FAIL("task not recorded");
  static const TaskRecord none{};
  return none;
}

TimePoint end_of(const EngineResult& r, RankId rank, TaskIndex task) { return record_of(r, rank, task).end; }
TimePoint start_of(const EngineResult& r, RankId rank, TaskIndex task) { return record_of(r, rank, task).start; }

}  // namespace

TEST_CASE("sim/Engine: streams run in order and wait for cross-stream dependencies") {
  TaskGraph g = make_graph(1);
  const auto c = g.add_class("only");
  const auto a = compute(g, c, "a", 100);
  const auto b = compute(g, c, "b", 50, {a}, 1);       // other stream, after a
  const auto d = compute(g, c, "d", 10, {}, 0);        // same stream as a: after a
  const auto e = compute(g, c, "e", 10, {b}, 0);       // after d (stream) and b (dependency)
  g.set_simulated({RankId{0}});
  FakeTiming timing;
  Engine engine(g, timing, EngineOptions{true, {RankId{0}}, 0});
  const EngineResult r = engine.run();
  CHECK(end_of(r, RankId{0}, a).ps() == 100'000);
  CHECK(start_of(r, RankId{0}, b).ps() == 100'000);
  CHECK(end_of(r, RankId{0}, d).ps() == 110'000);
  CHECK(start_of(r, RankId{0}, e).ps() == 150'000);
  CHECK(r.makespan.ps() == 160'000);
  CHECK(r.tasks_executed == 4);
}

TEST_CASE("sim/Engine: the host issues tasks in program order and a task never starts before its issue") {
  // Ten 10 ns kernels in a row; the host needs `host` per task.
  auto run = [](std::int64_t host_ns) {
    TaskGraph g = make_graph(1);
    const auto c = g.add_class("only");
    for (int i = 0; i < 10; ++i) compute(g, c, "k", 10);
    g.set_simulated({RankId{0}});
    HostBoundTiming timing(Duration::from_ns(host_ns));
    Engine engine(g, timing, EngineOptions{true, {RankId{0}}, 0});
    return engine.run();
  };
  // CPU-bound: kernel i starts when the host has issued it, at (i + 1) x 25 ns; the GPU idles 15
  // ns before each but the first, and 25 ns before the first.
  const EngineResult slow = run(25);
  CHECK(slow.makespan.ps() == (10 * 25 + 10) * 1000);
  for (TaskIndex i = 0; i < 10; ++i) CHECK(start_of(slow, RankId{0}, i).ps() == (i + 1) * 25'000);
  CHECK(slow.accounts[0].host_wait.ps() == (25 + 9 * 15) * 1000);
  // GPU-bound: the host runs ahead; only the first issue shows.
  const EngineResult fast = run(4);
  CHECK(fast.makespan.ps() == (4 + 10 * 10) * 1000);
  CHECK(fast.accounts[0].host_wait.ps() == 4'000);
  // No host time: as before.
  CHECK(run(0).makespan.ps() == 100'000);
}

TEST_CASE("sim/Engine: communication is posted when the host reaches it") {
  // A 1 us kernel, then an all-reduce of 1000 bytes (1 us latency + 1 us) on the other stream
  // that does not depend on it: the host issues the all-reduce second, at 2 x 3 us.
  TaskGraph g = make_graph(1);
  const auto c = g.add_class("only");
  compute(g, c, "k", 1000);
  const auto ar = collective(g, c, 1000);
  Communicator comm;
  comm.members = {RankId{0}};
  g.set_comm(RankId{0}, 0, g.add_communicator(comm));
  g.set_simulated({RankId{0}});
  HostBoundTiming timing(Duration::from_us(3));
  Engine engine(g, timing, EngineOptions{true, {RankId{0}}, 0});
  const EngineResult r = engine.run();
  CHECK(start_of(r, RankId{0}, ar).ps() == 6'000'000);
  CHECK(end_of(r, RankId{0}, ar).ps() == 8'000'000);
  CHECK(r.makespan.ps() == 8'000'000);
}

TEST_CASE("sim/Engine: at a synchronizing task the host waits for it to end before it issues more") {
  // Rank 0: kernel (10 us), then a send to rank 1 that the host synchronizes on, then a 1 us
  // kernel. Rank 1 receives after a 50 us kernel. Host time 2 us per task.
  auto run = [](bool sync) {
    TaskGraph g = make_graph(2);
    const auto c0 = g.add_class("r0");
    const auto c1 = g.add_class("r1");
    const auto k0 = compute(g, c0, "k0", 10'000);
    const TaskIndex snd = p2p(g, c0, {Transfer{true, 0, Bytes(1000)}}, {k0}, sync);
    const auto after = compute(g, c0, "after", 1'000);
    const auto k1 = compute(g, c1, "k1", 50'000);
    p2p(g, c1, {Transfer{false, 1, Bytes(1000)}}, {k1});
    g.set_class_of(RankId{0}, c0);
    g.set_class_of(RankId{1}, c1);
    g.set_peer(RankId{0}, 0, RankId{1});
    g.set_peer(RankId{1}, 1, RankId{0});
    g.set_simulated({RankId{0}, RankId{1}});
    HostBoundTiming timing(Duration::from_us(2));
    Engine engine(g, timing, EngineOptions{false, {RankId{0}, RankId{1}}, 0});
    const EngineResult r = engine.run();
    return std::make_pair(end_of(r, RankId{0}, snd), start_of(r, RankId{0}, after));
  };
  // The receive is posted at 52 us; the transfer takes 1 us latency + 1 us: the send ends at 54 us.
  const auto [send_end, after_start] = run(true);
  CHECK(send_end.ps() == 54'000'000);
  CHECK(after_start.ps() == 56'000'000);  // issued 2 us after the synchronization
  // Without the synchronization the host issued `after` at 6 us; it runs once k0 is done.
  const auto [free_end, free_start] = run(false);
  CHECK(free_end.ps() == 54'000'000);
  CHECK(free_start.ps() == 12'000'000);
}

TEST_CASE("sim/Engine: a gap the host's synchronization caused is the synchronizing task's") {
  // Rank 0: kernel (10 us), a send (category 3) the host synchronizes on, then a collective
  // (category 4, a third stream) after it and a kernel after that: scatter/gather's all-gather
  // after a pipeline receive. Rank 1 receives after a 50 us kernel. Host time 2 us per task.
  TaskGraph g(2, {"compute", "p2p", "tp"}, {"all"}, {"next", "prev"});
  g.set_reverse_peer_slot(0, 1);
  g.set_reverse_peer_slot(1, 0);
  const auto c0 = g.add_class("r0");
  const auto c1 = g.add_class("r1");
  const auto k0 = compute(g, c0, "k0", 10'000);
  const TaskIndex snd = p2p(g, c0, {Transfer{true, 0, Bytes(1000)}}, {k0}, true, 3);
  const auto gather = collective(g, c0, 1000, {snd}, 2, 4);
  const auto after = compute(g, c0, "after", 1'000, {gather});
  const auto k1 = compute(g, c1, "k1", 50'000);
  p2p(g, c1, {Transfer{false, 1, Bytes(1000)}}, {k1});
  g.set_class_of(RankId{0}, c0);
  g.set_class_of(RankId{1}, c1);
  g.set_peer(RankId{0}, 0, RankId{1});
  g.set_peer(RankId{1}, 1, RankId{0});
  Communicator solo;
  solo.members = {RankId{0}};
  g.set_comm(RankId{0}, 0, g.add_communicator(solo));
  g.set_simulated({RankId{0}, RankId{1}});
  HostBoundTiming timing(Duration::from_us(2));
  Engine engine(g, timing, EngineOptions{false, {RankId{0}, RankId{1}}, 0});
  const EngineResult r = engine.run();
  // The send ends at 54 us (the receive posted at 52); the host issues the collective at 56 us,
  // which ends at 58 us, when `after` starts.
  CHECK(end_of(r, RankId{0}, snd).ps() == 54'000'000);
  CHECK(start_of(r, RankId{0}, gather).ps() == 56'000'000);
  CHECK(start_of(r, RankId{0}, after).ps() == 58'000'000);
  // The compute stream idled from 12 us (k0 ran from its issue at 2 us) to 58 us: to 54 us held
  // back by the send the host waited for, 2 us of the host's own issuing, 2 us of the collective.
  const RankAccount& a = r.accounts[0];
  CHECK(a.gap_issue[3].ps() == 42'000'000);
  CHECK(a.gap_other.ps() == 2'000'000);
  CHECK(a.gap_exposed[4].ps() == 2'000'000);
  CHECK(a.gap_wait[4].ps() == 0);
}

TEST_CASE("sim/Engine: a collective starts when its last member arrives") {
  TaskGraph g = make_graph(2);
  const auto c0 = g.add_class("slow");
  const auto c1 = g.add_class("fast");
  const auto w = compute(g, c0, "work", 5000);
  const auto ar0 = collective(g, c0, 1000, {w});
  const auto ar1 = collective(g, c1, 1000);
  pair_up(g, c0, c1);
  FakeTiming timing;
  Engine engine(g, timing, EngineOptions{false, {RankId{0}, RankId{1}}, 0});
  const EngineResult r = engine.run();
  // Both start at 5 us (rank 0's arrival) and take 1 us + 1000 ns.
  CHECK(start_of(r, RankId{0}, ar0).ps() == 5'000'000);
  CHECK(start_of(r, RankId{1}, ar1).ps() == 5'000'000);
  CHECK(end_of(r, RankId{1}, ar1).ps() == 7'000'000);
  CHECK(end_of(r, RankId{0}, ar0).ps() == 7'000'000);
}

TEST_CASE("sim/Engine: the communication time scale of a category scales its latency and bytes") {
  // The same two-rank all-reduce (category 4) and batched send/receive (category 0) as above,
  // with category 4 at half its time, or free, and category 0 untouched or at twice its time.
  TaskGraph g = make_graph(2);
  const auto c0 = g.add_class("r0");
  const auto c1 = g.add_class("r1");
  const auto ar0 = collective(g, c0, 1000);
  const auto ar1 = collective(g, c1, 1000);
  const auto t0 = p2p(g, c0, {Transfer{true, 0, Bytes(100)}, Transfer{false, 0, Bytes(200)}}, {ar0});
  const auto t1 = p2p(g, c1, {Transfer{false, 1, Bytes(100)}, Transfer{true, 1, Bytes(200)}}, {ar1});
  pair_up(g, c0, c1);
  g.set_peer(RankId{0}, 0, RankId{1});
  g.set_peer(RankId{1}, 1, RankId{0});
  auto run = [&](double collective_scale, double p2p_scale) {
    FakeTiming timing;
    EngineOptions o{false, {RankId{0}, RankId{1}}, 0};
    o.comm_time_scale[4] = collective_scale;
    o.comm_time_scale[0] = p2p_scale;
    Engine engine(g, timing, o);
    return engine.run();
  };
  const EngineResult base = run(1, 1);
  CHECK(end_of(base, RankId{0}, ar0).ps() == 2'000'000);  // 1 us + 1000 ns
  CHECK(end_of(base, RankId{1}, t1).ps() == 3'200'000);   // then 1 us + 200 ns
  const EngineResult faster = run(0.5, 1);
  CHECK(end_of(faster, RankId{1}, ar1).ps() == 1'000'000);
  CHECK(end_of(faster, RankId{0}, t0).ps() == 2'200'000);
  const EngineResult free_collective = run(0, 2);
  CHECK(end_of(free_collective, RankId{0}, ar0).ps() == 0);
  CHECK(end_of(free_collective, RankId{1}, t1).ps() == 2'400'000);  // 2 us + 400 ns
}

TEST_CASE("sim/Engine: batched sends and receives in both directions do not deadlock") {
  // Rank 0 sends to rank 1 and receives from it in one batch; rank 1 does the mirror.
  TaskGraph g = make_graph(2);
  const auto c0 = g.add_class("r0");
  const auto c1 = g.add_class("r1");
  const auto t0 = p2p(g, c0, {Transfer{true, 0, Bytes(100)}, Transfer{false, 0, Bytes(200)}});
  const auto t1 = p2p(g, c1, {Transfer{false, 1, Bytes(100)}, Transfer{true, 1, Bytes(200)}});
  g.set_class_of(RankId{0}, c0);
  g.set_class_of(RankId{1}, c1);
  g.set_peer(RankId{0}, 0, RankId{1});
  g.set_peer(RankId{1}, 1, RankId{0});
  g.set_simulated({RankId{0}, RankId{1}});
  FakeTiming timing;
  Engine engine(g, timing, EngineOptions{false, {RankId{0}, RankId{1}}, 0});
  const EngineResult r = engine.run();
  CHECK(end_of(r, RankId{0}, t0).ps() == 1'200'000);  // the longer transfer: 1 us + 200 ns
  CHECK(end_of(r, RankId{1}, t1).ps() == 1'200'000);
}

TEST_CASE("sim/Engine: an unmatched receive is reported as a deadlock naming the task") {
  TaskGraph g = make_graph(2);
  const auto c0 = g.add_class("r0");
  const auto c1 = g.add_class("r1");
  compute(g, c0, "lonely_compute", 10);
  Task t;
  t.kind = TaskKind::kPointToPoint;
  t.stream = 1;
  const Transfer recv{false, 1, Bytes(64)};
  t.payload = g.add_transfers(c1, {&recv, 1});
  t.payload_count = 1;
  t.name = g.intern("recv_activation");
  g.add_task(c1, t, {});
  compute(g, c1, "needs_input", 10, {0});
  g.set_class_of(RankId{0}, c0);
  g.set_class_of(RankId{1}, c1);
  g.set_peer(RankId{1}, 1, RankId{0});
  g.set_peer(RankId{0}, 0, RankId{1});
  g.set_simulated({RankId{0}, RankId{1}});
  FakeTiming timing;
  Engine engine(g, timing, EngineOptions{false, {}, 0});
  try {
    engine.run();
    FAIL("expected a deadlock");
  } catch (const DeadlockError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("recv_activation") != std::string::npos);
    CHECK(msg.find("needs_input") != std::string::npos);
    CHECK(msg.find("rank 1") != std::string::npos);
  }
}

TEST_CASE("sim/Engine: symmetric and full fidelity agree on a symmetric graph") {
  // Four ranks of one class: compute, then an all-reduce over all four, then compute.
  auto build = []() {
    TaskGraph g = make_graph(4);
    const auto c = g.add_class("all");
    const auto a = compute(g, c, "fwd", 300);
    const auto ar = collective(g, c, 4096, {a});
    compute(g, c, "bwd", 200, {ar});
    Communicator comm;
    comm.members = {RankId{0}, RankId{1}, RankId{2}, RankId{3}};
    const CommId id = g.add_communicator(comm);
    for (std::uint32_t r = 0; r < 4; ++r) {
      g.set_class_of(RankId{r}, c);
      g.set_comm(RankId{r}, 0, id);
    }
    g.set_simulated({RankId{0}});
    return g;
  };
  const TaskGraph g = build();
  FakeTiming t1, t2;
  Engine sym(g, t1, EngineOptions{true, {}, 0});
  Engine full(g, t2, EngineOptions{false, {}, 0});
  const EngineResult a = sym.run();
  const EngineResult b = full.run();
  CHECK(a.ranks.size() == 1);
  CHECK(b.ranks.size() == 4);
  CHECK(a.makespan == b.makespan);
  CHECK(a.makespan.ps() == (300 + 1000 + 4096 + 200) * 1000);
}

TEST_CASE("sim/Engine: memory follows allocations and frees, and the peak is kept") {
  TaskGraph g = make_graph(1);
  const auto c = g.add_class("only");
  g.rank_class(c).static_memory_bytes = 1000;
  const auto a = compute(g, c, "a", 10);
  g.rank_class(c).tasks[a].alloc_bytes = 500;
  const auto b = compute(g, c, "b", 10);
  g.rank_class(c).tasks[b].alloc_bytes = 300;
  g.rank_class(c).tasks[b].free_bytes = 800;
  g.set_simulated({RankId{0}});
  FakeTiming timing;
  Engine engine(g, timing, EngineOptions{true, {RankId{0}}, 0});
  const EngineResult r = engine.run();
  CHECK(r.accounts[0].peak_memory_bytes == 1800);
  CHECK(r.memory.back().bytes == 1000);
}

TEST_CASE("sim/Engine: idle time of the primary stream is attributed to what it waited for") {
  TaskGraph g = make_graph(1);
  const auto c = g.add_class("only");
  const auto a = compute(g, c, "a", 1000);
  const auto ar = collective(g, c, 2000, {a});   // 1 us + 2 us, category 4
  compute(g, c, "b", 100, {ar});
  const EngineResult r = run_alone(g);
  CHECK(r.accounts[0].gap_exposed[4].ps() == 3'000'000);
  CHECK(r.accounts[0].busy[0].ps() == 1'100'000);
}

TEST_CASE("sim/Engine: time a task was held back goes to what held back each task before it") {
  // Compute waits for X; X queues behind Y on its stream; Y (category 4, latency only) was
  // itself issued when Z (category 5, 1 us + 10 us, on another stream) ended. The 11 us before
  // Y's issue belong to Z, Y's own microsecond to Y, X's transfer to X.
  TaskGraph g(1, {"compute", "a", "b"}, {"all"}, {"next", "prev"});
  const auto c = g.add_class("only");
  const auto a = compute(g, c, "a", 100);
  const auto z = collective(g, c, 10'000, {a}, 2, 5);
  collective(g, c, 0, {z}, 1, 4);                 // y
  const auto x = collective(g, c, 0, {}, 1, 9);   // after y on stream a
  compute(g, c, "b", 100, {x});
  const EngineResult r = run_alone(g);
  CHECK(r.makespan.ps() == 13'200'000);  // 0.1 + 11 + 1 + 1 + 0.1 us
  CHECK(r.accounts[0].gap_issue[5].ps() == 11'000'000);
  CHECK(r.accounts[0].gap_issue[4].ps() == 1'000'000);
  CHECK(r.accounts[0].gap_exposed[9].ps() == 1'000'000);
  CHECK(r.accounts[0].gap_other.ps() == 0);
}

TEST_CASE("sim/Engine: with SM contention a GEMM beside communication runs on the SMs it leaves") {
  // Stream 0: a 2 us memory-bound kernel, a 10 us GEMM, a 4 us memory-bound kernel. Stream 1: an
  // all-reduce of 3000 bytes (1 us + 3 us) after the first kernel, holding a quarter of the SMs,
  // and another after the GEMM.
  TaskGraph g = make_graph(1);
  const auto c = g.add_class("only");
  const auto a = compute(g, c, "a", 2000);
  const auto ar = collective(g, c, 3000, {a});
  const auto k = gemm(g, c, "gemm", 10'000);
  const auto ar2 = collective(g, c, 3000, {k});
  const auto m = compute(g, c, "m", 4000);
  auto run = [&](bool contention, double fraction) {
    TaskGraph copy = g;
    copy.set_simulated({RankId{0}});
    Communicator comm;
    comm.members = {RankId{0}};
    copy.set_comm(RankId{0}, 0, copy.add_communicator(comm));
    FakeTiming timing;
    timing.sm_fraction = fraction;
    EngineOptions o{true, {RankId{0}}, 0};
    o.sm_contention = contention;
    Engine engine(copy, timing, o);
    return engine.run();
  };
  const EngineResult off = run(false, 0.25);
  CHECK(end_of(off, RankId{0}, k).ps() == 12'000'000);
  CHECK(end_of(off, RankId{0}, m).ps() == 16'000'000);
  // From 2 to 6 us the GEMM runs at 0.75 (3 us of its work), then at full speed: 7 us more.
  const EngineResult on = run(true, 0.25);
  CHECK(end_of(on, RankId{0}, ar).ps() == 6'000'000);
  CHECK(end_of(on, RankId{0}, k).ps() == 13'000'000);
  CHECK(on.accounts[0].busy[0].ps() == 2'000'000 + 11'000'000 + 4'000'000);
  // The memory-bound kernel beside the second all-reduce keeps its time.
  CHECK(start_of(on, RankId{0}, ar2).ps() == 13'000'000);
  CHECK(end_of(on, RankId{0}, m).ps() == 17'000'000);
  CHECK(on.makespan.ps() == 17'000'000);
  // Communication that takes no SMs changes nothing, and the same run gives the same times.
  CHECK(end_of(run(true, 0), RankId{0}, k).ps() == 12'000'000);
  const EngineResult again = run(true, 0.25);
  REQUIRE(again.records.size() == on.records.size());
  for (std::size_t i = 0; i < on.records.size(); ++i) CHECK(again.records[i].end == on.records[i].end);
}

TEST_CASE("sim/Engine: with SM contention concurrent operations add their SMs, down to the floor") {
  // A 10 us GEMM beside two all-reduces on two streams, each holding 60% of the SMs for 4 us:
  // the GEMM runs at the floor (5%) for those 4 us (0.2 us of work), then 9.8 us at full speed.
  TaskGraph g(1, {"compute", "comm", "comm2"}, {"all"}, {});
  const auto c = g.add_class("only");
  const auto k = gemm(g, c, "gemm", 10'000);
  collective(g, c, 3000, {}, 1);
  collective(g, c, 3000, {}, 2);
  g.set_simulated({RankId{0}});
  Communicator comm;
  comm.members = {RankId{0}};
  g.set_comm(RankId{0}, 0, g.add_communicator(comm));
  FakeTiming timing;
  timing.sm_fraction = 0.6;
  EngineOptions o{true, {RankId{0}}, 0};
  o.sm_contention = true;
  Engine engine(g, timing, o);
  const EngineResult r = engine.run();
  CHECK(end_of(r, RankId{0}, k).ps() == 13'800'000);
}
