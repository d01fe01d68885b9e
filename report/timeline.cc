#include "report/timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "models/graph_vocabulary.h"
#include "report/text_format.h"

namespace trainsim::report {

namespace {

constexpr std::uint8_t kCollapsedCommRow = 0xff;  // Row::stream of the merged communication row

SliceKind kind_of(const sim::Task& t, const sim::RankClass& rc) {
  switch (t.kind) {
    case sim::TaskKind::kCompute:
      switch (t.category) {
        case models::kBackward:
          return SliceKind::kBackward;
        case models::kRecompute:
          return SliceKind::kRecompute;
        case models::kOptimizer:
          return SliceKind::kOptimizer;
        case models::kOffload:
          return SliceKind::kHostCopy;
        default:
          return SliceKind::kForward;
      }
    case sim::TaskKind::kCollective:
      switch (rc.comm_ops[t.payload].kind) {
        case sim::CollectiveKind::kAllReduce:
          return SliceKind::kAllReduce;
        case sim::CollectiveKind::kAllGather:
          return SliceKind::kAllGather;
        case sim::CollectiveKind::kReduceScatter:
          return SliceKind::kReduceScatter;
        case sim::CollectiveKind::kAllToAll:
          return SliceKind::kAllToAll;
        default:
          return SliceKind::kBroadcastReduce;
      }
    case sim::TaskKind::kPointToPoint:
      return SliceKind::kSendRecv;
  }
  return SliceKind::kForward;
}

const char* row_label(std::uint8_t stream) {
  switch (stream) {
    case models::kComputeStream:
      return "compute";
    case models::kTpStream:
      return "TP";
    case models::kDpStream:
      return "DP";
    case models::kPpStream:
      return "PP";
    case models::kCpEpStream:
      return "CP/EP";
    case models::kOffloadStream:
      return "offload";
    default:
      return "comm";
  }
}

// "tp", "dp", "pp", "cp", "ep", "embedding" or "other" for a communication category.
std::string comm_kind_name(std::uint8_t category) {
  const std::string name = models::category_name(category);
  return name.substr(0, name.find("_comm"));
}

class NameTable {
 public:
  explicit NameTable(std::vector<std::string>& names) : names_(names) {}
  std::uint32_t operator()(const std::string& name) {
    auto [it, inserted] = index_.emplace(name, static_cast<std::uint32_t>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }

 private:
  std::vector<std::string>& names_;
  std::map<std::string, std::uint32_t> index_;
};

std::string subtitle_of(const RunResult& r) {
  const config::Scenario& s = r.scenario;
  std::string out = s.model.name + " \xc2\xb7 " + std::to_string(s.num_gpus()) + " \xc3\x97 " + s.cluster.gpu.name;
  out += " \xc2\xb7 " + plan_summary(r);
  out += " \xc2\xb7 iteration " + fmt("%.4g s", r.iteration_time_s);
  out += " \xc2\xb7 MFU " + fmt("%.1f%%", 100 * r.mfu);
  out += " \xc2\xb7 bubble " + fmt("%.1f%%", 100 * bubble_fraction(r));
  out += " \xc2\xb7 peak " + fmt("%.1f", static_cast<double>(r.peak_bytes_per_gpu) / 1073741824.0) + " of " +
         fmt("%.0f GiB", static_cast<double>(r.capacity_bytes_per_gpu) / 1073741824.0);
  if (!r.fits) out += " (does not fit)";
  return out;
}

}  // namespace

std::optional<GapView> gap_view(const sim::GapRecord& gap, const sim::TaskGraph& g) {
  const std::uint8_t category = gap.category;
  if (!models::is_communication(category) || gap.dependency == sim::GapRecord::kNone) return std::nullopt;
  const std::string what = g.name(g.rank_class(g.class_of(gap.rank)).tasks[gap.dependency].name);
  const bool pipeline = category == models::kPpComm;
  const std::string kind = comm_kind_name(category);
  GapView v;
  // A pipeline transfer's own time on the wire is exposed communication, as the breakdown counts it.
  v.kind = pipeline && gap.cause != sim::GapRecord::Cause::kTransferring && gap.cause != sim::GapRecord::Cause::kTail
               ? SliceKind::kBubble
               : SliceKind::kBlocked;
  switch (gap.cause) {
    case sim::GapRecord::Cause::kHeldBack:
      v.label = pipeline ? "pipeline bubble: " + what + " held back by a pipeline transfer"
                         : "exposed " + kind + " communication (queued before " + what + ")";
      return v;
    case sim::GapRecord::Cause::kHostSync:
      v.label = pipeline ? "pipeline bubble: " + what + " issued after the host's wait for a pipeline transfer"
                         : "exposed " + kind + " communication (the host waited for it before " + what + ")";
      return v;
    case sim::GapRecord::Cause::kWaiting:
      v.label = pipeline ? "pipeline bubble: waiting for " + what : "waiting for peers at " + what;
      return v;
    case sim::GapRecord::Cause::kTransferring:
      v.label = "exposed " + kind + " communication: " + what;
      return v;
    case sim::GapRecord::Cause::kTail:
      v.label = "exposed " + kind + " communication at the end of the iteration";
      return v;
    case sim::GapRecord::Cause::kUnattributed:
      break;
  }
  return std::nullopt;
}

std::string plan_summary(const RunResult& r) {
  const config::Scenario& s = r.scenario;
  const models::Workload& w = *r.workload;
  std::string out = "TP " + std::to_string(s.parallel.tensor_model_parallel_size);
  out += " PP " + std::to_string(s.parallel.pipeline_model_parallel_size);
  if (s.parallel.virtual_pipeline_model_parallel_size > 1) {
    out += " (\xc3\x97" + std::to_string(s.parallel.virtual_pipeline_model_parallel_size) + " virtual)";
  }
  if (!s.parallel.pipeline_model_parallel_layout.empty()) out += " layout " + s.parallel.pipeline_model_parallel_layout;
  if (s.parallel.accounts_in_split()) out += " (embedding/loss as layers)";
  if (s.parallel.context_parallel_size > 1) {
    out += " CP " + std::to_string(s.parallel.context_parallel_size);
    if (s.parallel.cp_comm_type != models::CpCommType::kP2p) out += std::string(" (") + models::cp_comm_label(s.parallel) + ")";
  }
  if (s.parallel.expert_model_parallel_size > 1) {
    out += " EP " + std::to_string(s.parallel.expert_model_parallel_size);
    if (s.training.moe_token_dispatcher_type == models::TokenDispatcher::kFlex) out += " (flex)";
    if (s.training.overlap_moe_expert_parallel_comm) out += " +A2A overlap";
    if (s.training.moe_shared_expert_overlap) out += " +shared-expert overlap";
  }
  out += " DP " + std::to_string(w.data_parallel_size);
  if (s.parallel.sequence_parallel && s.parallel.tensor_model_parallel_size > 1) out += " +SP";
  if (s.parallel.use_distributed_optimizer) out += " +dist-opt";
  if (s.parallel.zero_stage > 0) out += " ZeRO-" + std::to_string(s.parallel.zero_stage);
  if (s.parallel.num_distributed_optimizer_instances > 1) {
    out += " x" + std::to_string(s.parallel.num_distributed_optimizer_instances) + " instances";
  }
  out += " \xc2\xb7 " + std::string(models::to_string(s.training.pipeline_schedule));
  out += ", " + std::to_string(w.microbatches) + (w.microbatches == 1 ? " micro-batch of " : " micro-batches of ") +
         std::to_string(s.training.micro_batch_size);
  if (s.training.recompute_granularity != models::RecomputeGranularity::kNone) {
    out += ", " + std::string(models::to_string(s.training.recompute_granularity)) + " recompute";
  }
  if (s.training.cpu_offload_layers > 0) {
    out += ", " + std::to_string(s.training.cpu_offload_layers) + " of " + std::to_string(s.model.num_layers) + " layers offloaded";
  }
  return out;
}

namespace {

// Adds `s` to block `b` (both of one kind and micro-batch, or a summary of mixed work).
void absorb(Slice& b, const Slice& s, bool mixed) {
  if (mixed && s.busy_ps > b.busy_ps) b.kind = s.kind;
  b.end_ps = std::max(b.end_ps, s.end_ps);
  b.busy_ps += s.busy_ps;
  b.tasks += s.tasks;
  if (b.microbatch != s.microbatch) b.microbatch = -1;
  if (b.chunk < 0) {
    b.chunk = s.chunk;
  } else if (s.chunk >= 0 && s.chunk != b.chunk) {
    b.chunk = -1;  // only a mixed block spans chunks
  }
  if (s.layer_first >= 0) {
    b.layer_first = b.layer_first < 0 ? s.layer_first : std::min(b.layer_first, s.layer_first);
    b.layer_last = std::max(b.layer_last, s.layer_last);
  }
  if (b.name != s.name) b.name = kMixedName;
}

bool same_block(const Slice& b, const Slice& s) {
  return b.kind == s.kind && b.microbatch == s.microbatch && (b.chunk == s.chunk || b.chunk < 0 || s.chunk < 0);
}

std::vector<Slice> merge_slices(const std::vector<Slice>& in, std::int64_t resolution) {
  std::vector<Slice> same;
  for (const Slice& s : in) {
    if (!same.empty() && s.start_ps - same.back().end_ps < resolution && same_block(same.back(), s)) {
      absorb(same.back(), s, false);
    } else {
      same.push_back(s);
    }
  }
  std::vector<Slice> out;
  for (const Slice& s : same) {
    if (!out.empty()) {
      Slice& b = out.back();
      if (b.duration() < resolution && s.duration() < resolution && s.start_ps - b.end_ps < resolution) {
        absorb(b, s, true);
        continue;
      }
    }
    out.push_back(s);
  }
  return out;
}

std::vector<MemoryPoint> merge_memory(const std::vector<MemoryPoint>& in, std::int64_t resolution) {
  std::vector<MemoryPoint> out;
  std::size_t i = 0;
  while (i < in.size()) {
    const std::int64_t bucket = in[i].time_ps / resolution;
    MemoryPoint top = in[i];
    std::size_t j = i;
    for (; j < in.size() && in[j].time_ps / resolution == bucket; ++j) {
      if (in[j].bytes > top.bytes) top.bytes = in[j].bytes;
    }
    out.push_back(MemoryPoint{in[i].time_ps, top.bytes});
    const MemoryPoint& last = in[j - 1];
    if (last.bytes != top.bytes) out.push_back(MemoryPoint{std::max(last.time_ps, in[i].time_ps + 1), last.bytes});
    i = j;
  }
  return out;
}

}  // namespace

const char* slice_kind_name(SliceKind k) {
  static constexpr const char* kNames[kSliceKinds] = {"forward",    "backward",   "recompute",      "optimizer",
                                                      "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                      "broadcast",  "send_recv",  "wait",           "bubble",
                                                      "blocked",    "host_copy",  "host_launch"};
  return kNames[static_cast<std::size_t>(k)];
}

const char* slice_kind_label(SliceKind k) {
  static constexpr const char* kLabels[kSliceKinds] = {"forward",
                                                       "backward",
                                                       "recompute",
                                                       "optimizer",
                                                       "all-reduce",
                                                       "all-gather",
                                                       "reduce-scatter",
                                                       "all-to-all",
                                                       "broadcast/reduce",
                                                       "send/recv",
                                                       "waiting for peers",
                                                       "pipeline bubble",
                                                       "waiting for communication",
                                                       "host copy",
                                                       "waiting for the host"};
  return kLabels[static_cast<std::size_t>(k)];
}

const char* slice_kind_color(SliceKind k) {
  // Tableau 10, a palette designed to stay distinguishable (Stone, Tableau Software, 2016); host
  // copies take a dark teal of its 20-colour extension, waiting for the host its light brown.
  static constexpr const char* kColors[kSliceKinds] = {"#4e79a7", "#59a14f", "#b07aa1", "#9c755f", "#e15759",
                                                       "#f28e2b", "#edc948", "#ff9da7", "#bab0ac", "#76b7b2",
                                                       "#d4d4d4", "#e15759", "#8c8c8c", "#499894", "#d7b5a6"};
  return kColors[static_cast<std::size_t>(k)];
}

bool is_gap_kind(SliceKind k) {
  return k == SliceKind::kWaitPeers || k == SliceKind::kBubble || k == SliceKind::kBlocked || k == SliceKind::kHostLaunch;
}

double bubble_fraction(const RunResult& r) {
  return r.iteration_time_s > 0 ? r.breakdown.pipeline_bubble_s / r.iteration_time_s : 0;
}

Timeline build_timeline(const RunResult& r) {
  const config::Scenario& s = r.scenario;
  const models::Workload& w = *r.workload;
  const sim::TaskGraph& g = w.graph;
  Timeline t;
  t.title = s.name;
  t.subtitle = subtitle_of(r);
  t.makespan_ps = r.engine.makespan.ps();
  t.capacity_bytes = r.capacity_bytes_per_gpu;
  t.pipeline_stages = s.parallel.pipeline_model_parallel_size;
  t.virtual_stages = s.parallel.virtual_pipeline_model_parallel_size;
  t.microbatches = w.microbatches;
  NameTable name_of(t.names);

  // The recorded ranks (the first kMaxLanes drawn), each with its records indexed by task and
  // its memory samples.
  std::vector<std::uint32_t> recorded;
  for (const sim::TaskRecord& rec : r.engine.records) recorded.push_back(sim::index(rec.rank));
  std::sort(recorded.begin(), recorded.end());
  recorded.erase(std::unique(recorded.begin(), recorded.end()), recorded.end());
  t.recorded_ranks = static_cast<std::int64_t>(recorded.size());
  if (recorded.size() > kMaxLanes) recorded.resize(kMaxLanes);
  std::map<std::uint32_t, std::vector<const sim::TaskRecord*>> by_rank;
  std::map<std::uint32_t, std::vector<MemoryPoint>> memory_of;
  for (std::uint32_t rank : recorded) {
    by_rank[rank].assign(g.rank_class(g.class_of(sim::RankId{rank})).tasks.size(), nullptr);
    memory_of[rank];
  }
  for (const sim::TaskRecord& rec : r.engine.records) {
    auto it = by_rank.find(sim::index(rec.rank));
    if (it != by_rank.end()) it->second[rec.task] = &rec;
  }
  std::map<std::uint32_t, std::vector<const sim::GapRecord*>> gaps_of;
  for (const sim::GapRecord& gr : r.engine.gaps) {
    if (by_rank.count(sim::index(gr.rank)) != 0) gaps_of[sim::index(gr.rank)].push_back(&gr);
  }
  for (const sim::MemorySample& m : r.engine.memory) {
    auto it = memory_of.find(sim::index(m.rank));
    if (it != memory_of.end()) it->second.push_back(MemoryPoint{m.time.ps(), m.bytes});
  }
  const bool collapse = by_rank.size() > 16;

  // Streams any recorded rank used.
  std::vector<bool> used(g.num_streams(), false);
  used[models::kComputeStream] = true;
  for (const sim::TaskRecord& rec : r.engine.records) {
    used[g.rank_class(g.class_of(rec.rank)).tasks[rec.task].stream] = true;
  }

  for (const auto& entry : by_rank) {
    // Named, not structured bindings: the lambdas below capture them (clang 14 cannot).
    const auto rank = entry.first;
    const auto& records = entry.second;
    const sim::RankId rid{rank};
    const sim::RankClass& rc = g.rank_class(g.class_of(rid));
    const models::RankCoord c = w.layout.coord(rank);
    const models::StageInfo& info = w.stages[static_cast<std::size_t>(c.pp)];
    Lane lane;
    lane.rank = rank;
    lane.stage = c.pp;
    if (s.simulation.full) {
      lane.label = "rank " + std::to_string(rank) + " \xc2\xb7 pp " + std::to_string(c.pp) + " \xc2\xb7 dp " + std::to_string(c.dp) +
                   " \xc2\xb7 tp " + std::to_string(c.tp);
      if (w.layout.cp() > 1) lane.label += " \xc2\xb7 cp " + std::to_string(c.cp);
    } else {
      lane.label = "stage " + std::to_string(c.pp) + " \xc2\xb7 rank " + std::to_string(rank);
    }
    std::vector<int> row_of(g.num_streams(), -1);
    for (std::uint8_t st = 0; st < g.num_streams(); ++st) {
      if (!used[st]) continue;
      if (collapse && st != models::kComputeStream) {
        if (lane.rows.size() < 2) lane.rows.push_back(Row{kCollapsedCommRow, "comm", {}, {}});
        row_of[st] = 1;
        continue;
      }
      row_of[st] = static_cast<int>(lane.rows.size());
      lane.rows.push_back(Row{st, row_label(st), {}, {}});
    }
    auto chunk_of = [&](std::int32_t layer) {
      if (layer < 0) return -1;
      for (std::size_t k = 0; k < info.chunks.size(); ++k) {
        if (layer >= info.chunks[k].first && layer < info.chunks[k].first + info.chunks[k].second) return static_cast<int>(k);
      }
      return -1;
    };

    for (std::size_t ti = 0; ti < records.size(); ++ti) {
      const sim::TaskRecord* rec = records[ti];
      if (rec == nullptr) continue;
      const sim::Task& task = rc.tasks[ti];
      lane.finish_ps = std::max(lane.finish_ps, rec->end.ps());
      Slice sl;
      sl.start_ps = rec->start.ps();
      sl.end_ps = rec->end.ps();
      sl.busy_ps = sl.end_ps - sl.start_ps;
      sl.kind = kind_of(task, rc);
      sl.microbatch = task.microbatch;
      sl.layer_first = sl.layer_last = task.layer;
      sl.chunk = chunk_of(task.layer);
      sl.name = name_of(g.name(task.name));
      Row& row = lane.rows[static_cast<std::size_t>(row_of[task.stream])];
      row.slices.push_back(sl);
      if (task.kind != sim::TaskKind::kCompute && rec->start > rec->posted) {
        Slice wait = sl;
        wait.kind = SliceKind::kWaitPeers;
        wait.start_ps = rec->posted.ps();
        wait.end_ps = rec->start.ps();
        wait.busy_ps = wait.end_ps - wait.start_ps;
        wait.name = name_of("waiting for peers: " + g.name(task.name));
        row.gaps.push_back(wait);
      }
    }

    // The compute row's gaps as the engine charged them (sim::GapRecord): waiting for a pipeline
    // transfer is the bubble, for other communication (in flight, queued, or waiting for peers)
    // blocked; the rest is idle, not drawn. A compute task's record is issued when its
    // dependencies were done and it reached the head of the stream; from then to its start the
    // host was still launching it (the breakdown's host launch).
    Row& compute = lane.rows[0];
    for (const sim::GapRecord* gr : gaps_of[rank]) {
      const std::optional<GapView> view = gap_view(*gr, g);
      if (!view) continue;
      Slice gap;
      gap.kind = view->kind;
      // The end-of-iteration tail belongs to no micro-batch.
      if (gr->cause != sim::GapRecord::Cause::kTail) gap.microbatch = rc.tasks[gr->dependency].microbatch;
      gap.start_ps = gr->from.ps();
      gap.end_ps = gr->to.ps();
      gap.busy_ps = gap.end_ps - gap.start_ps;
      gap.name = name_of(view->label);
      if (gap.kind == SliceKind::kBubble) lane.bubble_ps += gap.busy_ps;
      compute.gaps.push_back(gap);
    }
    for (sim::TaskIndex ti : rc.stream_tasks[models::kComputeStream]) {
      const sim::TaskRecord* rec = records[ti];
      if (rec == nullptr || rec->start <= rec->posted) continue;
      const sim::Task& task = rc.tasks[ti];
      Slice wait;
      wait.kind = SliceKind::kHostLaunch;
      wait.microbatch = task.microbatch;
      wait.start_ps = rec->posted.ps();
      wait.end_ps = rec->start.ps();
      wait.busy_ps = wait.end_ps - wait.start_ps;
      wait.name = name_of("waiting for the host to launch " + g.name(task.name));
      compute.gaps.push_back(wait);
    }

    for (Row& row : lane.rows) {
      auto by_start = [](const Slice& a, const Slice& b) {
        return a.start_ps != b.start_ps ? a.start_ps < b.start_ps : a.end_ps < b.end_ps;
      };
      std::stable_sort(row.slices.begin(), row.slices.end(), by_start);
      std::stable_sort(row.gaps.begin(), row.gaps.end(), by_start);
    }

    lane.memory = std::move(memory_of[rank]);
    for (const MemoryPoint& m : lane.memory) {
      if (m.bytes > lane.peak_bytes) {
        lane.peak_bytes = m.bytes;
        lane.peak_time_ps = m.time_ps;
      }
    }
    t.lanes.push_back(std::move(lane));
  }
  return t;
}

Timeline merge(const Timeline& t, std::int64_t resolution_ps, std::size_t max_slices) {
  // Over budget, the communication rows coarsen first (up to 16x): the compute row's alternation
  // of forward and backward passes is what a reader looks for.
  const std::int64_t base = std::max<std::int64_t>(1, resolution_ps);
  std::int64_t compute = base, comm = base;
  while (true) {
    Timeline out = t;
    std::size_t count = 0;
    for (Lane& lane : out.lanes) {
      for (std::size_t r = 0; r < lane.rows.size(); ++r) {
        Row& row = lane.rows[r];
        const std::int64_t resolution = r == 0 ? compute : comm;
        row.slices = merge_slices(row.slices, resolution);
        row.gaps = merge_slices(row.gaps, resolution);
        count += row.slices.size() + row.gaps.size();
      }
      lane.memory = merge_memory(lane.memory, compute);
    }
    if (count <= max_slices || compute > t.makespan_ps) return out;
    if (comm < 16 * base) {
      comm *= 2;
    } else {
      compute *= 2;
      comm *= 2;
    }
  }
}

}  // namespace trainsim::report
