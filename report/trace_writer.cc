#include "report/trace_writer.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/graph_vocabulary.h"
#include "report/timeline.h"

namespace trainsim::report {

namespace {

// Microseconds with three decimals from integer picoseconds (rounded to the nanosecond).
std::string micros(std::int64_t ps) {
  const std::int64_t ns = (ps + 500) / 1000;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

const char* cause_name(sim::GapRecord::Cause c) {
  switch (c) {
    case sim::GapRecord::Cause::kHeldBack:
      return "held_back";
    case sim::GapRecord::Cause::kHostSync:
      return "host_sync";
    case sim::GapRecord::Cause::kWaiting:
      return "waiting_for_peers";
    case sim::GapRecord::Cause::kTransferring:
      return "transferring";
    case sim::GapRecord::Cause::kTail:
      return "end_of_iteration";
    case sim::GapRecord::Cause::kUnattributed:
      break;
  }
  return "none";
}

// Thread ids per stream, spaced like Kineto's stream ids so they read as CUDA streams.
int tid_of(std::uint8_t stream) { return 7 + 10 * stream; }

const char* stream_label(std::uint8_t s) {
  switch (s) {
    case models::kComputeStream:
      return "compute";
    case models::kTpStream:
      return "nccl:tp";
    case models::kDpStream:
      return "nccl:dp";
    case models::kPpStream:
      return "nccl:pp";
    case models::kCpEpStream:
      return "nccl:cp/ep";
    case models::kOffloadStream:
      return "memcpy:offload";
    default:
      return "stream";
  }
}

// Middle of a record's slice ("X" event) in trace microseconds: where a flow binds to it.
std::string middle(const sim::TaskRecord& rec) { return micros((rec.start.ps() + rec.end.ps()) / 2); }

// Flow arrows between recorded ranks: from each point-to-point send to its receive (cat
// "p2p_flow"), and from the first member to arrive at a collective to the last (cat
// "collective_flow"). Sends and receives match in order per channel (sender, peer slot), as the
// engine matches them; collectives in order per communicator.
void write_flows(const RunResult& r, const std::function<void()>& sep, std::ostream& out) {
  const models::Workload& w = *r.workload;
  const sim::TaskGraph& g = w.graph;
  struct End {
    const sim::TaskRecord* rec;
    std::uint8_t stream;
  };
  // Records per rank in stream order: for each stream, its tasks in position order.
  std::map<std::uint32_t, std::vector<const sim::TaskRecord*>> by_rank;
  for (const sim::TaskRecord& rec : r.engine.records) by_rank[sim::index(rec.rank)].push_back(&rec);
  std::map<std::pair<std::uint32_t, std::uint16_t>, std::vector<End>> sends, recvs;  // (sender, slot)
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::pair<std::uint32_t, End>>> arrivals;  // (comm, seq)
  for (auto& [rank, recs] : by_rank) {
    const sim::RankId rid{rank};
    const sim::RankClass& rc = g.rank_class(g.class_of(rid));
    std::sort(recs.begin(), recs.end(), [&](const sim::TaskRecord* a, const sim::TaskRecord* b) {
      const sim::Task& ta = rc.tasks[a->task];
      const sim::Task& tb = rc.tasks[b->task];
      return ta.stream != tb.stream ? ta.stream < tb.stream : ta.position < tb.position;
    });
    std::map<std::uint32_t, std::uint32_t> seq;  // per communicator
    for (const sim::TaskRecord* rec : recs) {
      const sim::Task& t = rc.tasks[rec->task];
      if (t.kind == sim::TaskKind::kPointToPoint) {
        for (std::uint32_t i = 0; i < t.payload_count; ++i) {
          const sim::Transfer& tr = rc.transfers[t.payload + i];
          if (tr.is_send) {
            sends[{rank, tr.peer_slot}].push_back(End{rec, t.stream});
          } else {
            const std::uint32_t peer = sim::index(g.peer(rid, tr.peer_slot));
            recvs[{peer, g.reverse_peer_slot(tr.peer_slot)}].push_back(End{rec, t.stream});
          }
        }
      } else if (t.kind == sim::TaskKind::kCollective) {
        const std::uint32_t comm = sim::index(g.comm(rid, t.slot));
        arrivals[{comm, seq[comm]++}].emplace_back(rank, End{rec, t.stream});
      }
    }
  }
  std::uint64_t id = 0;
  auto flow = [&](const char* cat, const std::string& name, std::uint32_t from_rank, const End& from, const std::string& from_ts,
                  std::uint32_t to_rank, const End& to) {
    ++id;
    sep();
    out << "{\"name\":\"" << name << "\",\"cat\":\"" << cat << "\",\"ph\":\"s\",\"id\":" << id << ",\"pid\":" << from_rank
        << ",\"tid\":" << tid_of(from.stream) << ",\"ts\":" << from_ts << "}";
    sep();
    out << "{\"name\":\"" << name << "\",\"cat\":\"" << cat << "\",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << id
        << ",\"pid\":" << to_rank << ",\"tid\":" << tid_of(to.stream) << ",\"ts\":" << middle(*to.rec) << "}";
  };
  for (const auto& [channel, list] : sends) {
    auto it = recvs.find(channel);
    if (it == recvs.end()) continue;
    const std::uint32_t to_rank = sim::index(g.peer(sim::RankId{channel.first}, channel.second));
    const std::string name = escape(g.peer_slot_name(channel.second));
    for (std::size_t k = 0; k < list.size() && k < it->second.size(); ++k) {
      flow("p2p_flow", "send " + name, channel.first, list[k], middle(*list[k].rec), to_rank, it->second[k]);
    }
  }
  for (const auto& [key, members] : arrivals) {
    if (members.size() < 2) continue;
    std::size_t first = 0, last = 0;
    for (std::size_t i = 1; i < members.size(); ++i) {
      if (members[i].second.rec->posted < members[first].second.rec->posted) first = i;
      if (members[i].second.rec->posted >= members[last].second.rec->posted) last = i;
    }
    if (first == last) continue;
    const End& a = members[first].second;
    // The first arrival binds inside its waiting slice ("wait: ..."), which spans [posted, start].
    const std::string from_ts = a.rec->start > a.rec->posted ? micros((a.rec->posted.ps() + a.rec->start.ps()) / 2) : middle(*a.rec);
    const sim::Communicator& cm = g.communicator(sim::CommId{key.first});
    flow("collective_flow", "arrivals " + escape(g.comm_slot_name(cm.slot)), members[first].first, a, from_ts, members[last].first,
         members[last].second);
  }
}

}  // namespace

void write_trace(const RunResult& r, std::ostream& out) {
  const config::Scenario& s = r.scenario;
  const models::Workload& w = *r.workload;
  const sim::TaskGraph& g = w.graph;
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"trainsim\",\"scenario\":\"" << escape(s.name)
      << "\",\"iteration_time_s\":" << r.iteration_time_s << "},\n\"traceEvents\":[\n";
  bool first = true;
  const std::function<void()> sep = [&]() {
    if (!first) out << ",\n";
    first = false;
  };

  // Metadata: one process per recorded rank, one thread per stream.
  std::vector<std::uint32_t> ranks;
  for (const sim::TaskRecord& rec : r.engine.records) ranks.push_back(sim::index(rec.rank));
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (std::uint32_t rank : ranks) {
    const models::RankCoord c = w.layout.coord(rank);
    const auto node = rank / static_cast<std::uint32_t>(s.cluster.gpus_per_node);
    const auto local = rank % static_cast<std::uint32_t>(s.cluster.gpus_per_node);
    char name[160];
    std::snprintf(name, sizeof name, "rank %u \xc2\xb7 pp %lld \xc2\xb7 dp %lld \xc2\xb7 tp %lld%s (node %u, GPU %u)", rank,
                  static_cast<long long>(c.pp), static_cast<long long>(c.dp), static_cast<long long>(c.tp),
                  w.layout.cp() > 1 ? (" \xc2\xb7 cp " + std::to_string(c.cp)).c_str() : "", node, local);
    sep();
    out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":0,\"args\":{\"name\":\"" << name << "\"}}";
    sep();
    out << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":0,\"args\":{\"sort_index\":" << rank << "}}";
    for (std::uint8_t st = 0; st < g.num_streams(); ++st) {
      sep();
      out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << tid_of(st)
          << ",\"args\":{\"name\":\"stream " << tid_of(st) << " " << stream_label(st) << "\"}}";
      sep();
      out << "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << tid_of(st)
          << ",\"args\":{\"sort_index\":" << static_cast<int>(st) << "}}";
    }
  }

  // Task slices.
  for (const sim::TaskRecord& rec : r.engine.records) {
    const std::uint32_t rank = sim::index(rec.rank);
    const sim::RankClass& rc = g.rank_class(g.class_of(rec.rank));
    const sim::Task& t = rc.tasks[rec.task];
    const int tid = tid_of(t.stream);
    const std::string name = escape(g.name(t.name));
    std::string args = "\"category\":\"" + std::string(models::category_name(t.category)) + "\"";
    if (t.microbatch >= 0) args += ",\"microbatch\":" + std::to_string(t.microbatch);
    if (t.layer >= 0) args += ",\"layer\":" + std::to_string(t.layer);
    const char* cat = "kernel";
    if (t.kind == sim::TaskKind::kCompute) {
      const sim::Kernel& k = rc.kernels[t.payload];
      if (k.kernel_class == sim::KernelClass::kHostCopy) cat = "gpu_memcpy";  // Kineto's category for copies
      args += ",\"sim.kind\":\"" + std::string(sim::to_string(k.kernel_class)) + "\",\"dtype\":\"" + sim::to_string(k.dtype) + "\"";
      if (k.kernel_class == sim::KernelClass::kGemm || k.kernel_class == sim::KernelClass::kFlashAttention) {
        args += ",\"shape\":[" + std::to_string(k.batch) + "," + std::to_string(k.m) + "," + std::to_string(k.n) + "," +
                std::to_string(k.k) + "]";
      }
      char flops[64];
      std::snprintf(flops, sizeof flops, ",\"flops\":%.6g,\"bytes\":%lld", k.flops.count(), static_cast<long long>(k.bytes.count()));
      args += flops;
    } else if (t.kind == sim::TaskKind::kCollective) {
      cat = "nccl";
      const sim::CommOp& op = rc.comm_ops[t.payload];
      const sim::Communicator& cm = g.communicator(g.comm(rec.rank, t.slot));
      args += ",\"Collective name\":\"" + std::string(sim::to_string(op.kind)) + "\",\"bytes\":" + std::to_string(op.bytes.count()) +
              ",\"dtype\":\"" + sim::to_string(op.dtype) + "\",\"Group size\":" + std::to_string(cm.members.size()) +
              ",\"Process Group Name\":\"" + g.comm_slot_name(t.slot) + "\",\"algorithm\":\"" +
              (rec.algorithm < r.algorithm_names.size() ? r.algorithm_names[rec.algorithm] : "") + "\",\"protocol\":\"" +
              (rec.protocol < r.protocol_names.size() ? r.protocol_names[rec.protocol] : "") + "\"";
      char frac[48];
      std::snprintf(frac, sizeof frac, ",\"bandwidth_share\":%.4g", rec.speed_fraction);
      args += frac;
    } else {
      cat = "p2p";
      std::int64_t bytes = 0;
      for (std::uint32_t i = 0; i < t.payload_count; ++i) bytes += rc.transfers[t.payload + i].bytes.count();
      args += ",\"bytes\":" + std::to_string(bytes) + ",\"transfers\":" + std::to_string(t.payload_count);
    }
    if (rec.start > rec.posted) {
      // The part a communication task spent waiting for its peers; a kernel, ready, waiting for
      // the host to launch it (the summary's "waiting for the host").
      const bool kernel = t.kind == sim::TaskKind::kCompute;
      sep();
      out << "{\"name\":\"" << (kernel ? "host launch: " : "wait: ") << name << "\",\"cat\":\"" << (kernel ? "host_wait" : "sync")
          << "\",\"ph\":\"X\",\"pid\":" << rank << ",\"tid\":" << tid << ",\"ts\":" << micros(rec.posted.ps())
          << ",\"dur\":" << micros((rec.start - rec.posted).ps()) << "}";
    }
    sep();
    out << "{\"name\":\"" << name << "\",\"cat\":\"" << cat << "\",\"ph\":\"X\",\"pid\":" << rank << ",\"tid\":" << tid
        << ",\"ts\":" << micros(rec.start.ps()) << ",\"dur\":" << micros((rec.end - rec.start).ps()) << ",\"args\":{" << args << "}}";
  }

  // The compute stream's idle time as the engine charged it (the pictures' bubble and waits for
  // communication), between the kernels on its thread.
  for (const sim::GapRecord& gap : r.engine.gaps) {
    const std::optional<GapView> view = gap_view(gap, g);
    if (!view) continue;
    const sim::RankClass& rc = g.rank_class(g.class_of(gap.rank));
    sep();
    out << "{\"name\":\"" << escape(view->label) << "\",\"cat\":\"" << slice_kind_name(view->kind) << "\",\"ph\":\"X\",\"pid\":"
        << sim::index(gap.rank) << ",\"tid\":" << tid_of(models::kComputeStream) << ",\"ts\":" << micros(gap.from.ps())
        << ",\"dur\":" << micros((gap.to - gap.from).ps()) << ",\"args\":{\"cause\":\"" << cause_name(gap.cause)
        << "\",\"charged_to\":\"" << models::category_name(gap.category) << "\"";
    // The tail follows the rank's last kernel; every other gap comes before the kernel that waited.
    if (gap.task != sim::GapRecord::kNone) {
      out << ",\"" << (gap.cause == sim::GapRecord::Cause::kTail ? "after" : "before") << "\":\""
          << escape(g.name(rc.tasks[gap.task].name)) << "\"";
    }
    out << "}}";
  }

  write_flows(r, sep, out);

  // Memory counters.
  for (const sim::MemorySample& m : r.engine.memory) {
    sep();
    char v[64];
    std::snprintf(v, sizeof v, "%.6f", static_cast<double>(m.bytes) / 1073741824.0);
    out << "{\"name\":\"memory\",\"ph\":\"C\",\"pid\":" << sim::index(m.rank) << ",\"ts\":" << micros(m.time.ps())
        << ",\"args\":{\"allocated_GiB\":" << v << "}}";
  }
  out << "\n]}\n";
}

}  // namespace trainsim::report
