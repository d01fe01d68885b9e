#pragma once
// Timeline: the recorded ranks of a run as the pictures draw them. One lane per recorded rank,
// one row per stream; every executed task is a slice classified by what it does (forward,
// backward, recompute, optimizer, collective by type, point-to-point). The compute row's idle
// time is drawn from the stretches the engine charged to causes (sim::GapRecord, the same ones
// the summary's breakdown adds up): waiting for another pipeline stage (bubble), for
// communication in flight or for peers (blocked), for the host's launch, or nothing (idle, not
// drawn). Each lane also carries its memory over time.
//
// merge() summarises a timeline at a resolution so that a picture stays readable and bounded:
// neighbouring slices of one kind and micro-batch closer than the resolution become one block,
// and runs of blocks each shorter than it become one block of the kind that covers the most time.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/simulation.h"

namespace trainsim::report {

enum class SliceKind : std::uint8_t {
  kForward,
  kBackward,
  kRecompute,
  kOptimizer,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcastReduce,  // broadcast and reduce
  kSendRecv,         // point-to-point
  kWaitPeers,        // communication row: posted, waiting for the other side to arrive
  kBubble,           // compute row: waiting for another pipeline stage
  kBlocked,          // compute row: waiting for communication (exposed, or peers at a collective)
  kHostCopy,         // copy to or from host memory (activation offloading)
  kHostLaunch,       // compute row: ready, waiting for the host to launch it (the breakdown's host launch)
  kCount
};
inline constexpr std::size_t kSliceKinds = static_cast<std::size_t>(SliceKind::kCount);

const char* slice_kind_name(SliceKind k);   // identifier: "forward", "all_reduce", "bubble", ...
const char* slice_kind_label(SliceKind k);  // legend text: "forward", "all-reduce", "pipeline bubble", ...
const char* slice_kind_color(SliceKind k);  // "#rrggbb"
bool is_gap_kind(SliceKind k);              // wait, bubble, blocked, host launch: drawn under the work

struct Slice {
  std::int64_t start_ps = 0, end_ps = 0;
  std::int64_t busy_ps = 0;      // time covered by the merged tasks (end - start for one task)
  SliceKind kind = SliceKind::kForward;
  std::int32_t microbatch = -1;  // 0-based; -1 when none or mixed
  std::int32_t chunk = -1;       // model chunk (virtual pipeline stage); -1 when none or mixed
  std::int32_t layer_first = -1, layer_last = -1;
  std::uint32_t name = 0;        // Timeline::names; kMixedName after merging different tasks
  std::uint32_t tasks = 1;       // tasks merged into this slice
  std::int64_t duration() const { return end_ps - start_ps; }
};

struct Row {
  std::uint8_t stream = 0;
  std::string label;          // "compute", "TP", "DP", "PP", "CP/EP", "offload", or "comm" when collapsed
  std::vector<Slice> slices;  // work, by start time
  std::vector<Slice> gaps;    // waiting (drawn underneath), by start time
};

struct MemoryPoint {
  std::int64_t time_ps = 0;
  std::int64_t bytes = 0;
};

struct Lane {
  std::int64_t rank = 0;
  std::int64_t stage = 0;
  std::string label;  // "stage 2 · rank 16" (symmetric) or "rank 17 · pp 2 · dp 1 · tp 1"
  std::vector<Row> rows;            // rows[0] is the compute stream
  std::vector<MemoryPoint> memory;  // allocated bytes after each change, by time
  std::int64_t peak_bytes = 0;
  std::int64_t peak_time_ps = 0;    // first time the peak is reached
  std::int64_t bubble_ps = 0;       // pipeline bubble on the compute row
  std::int64_t finish_ps = 0;       // end of the lane's last task
};

struct Timeline {
  std::string title;     // the scenario's name
  std::string subtitle;  // its key numbers
  std::int64_t makespan_ps = 0;
  std::int64_t capacity_bytes = 0;
  std::int64_t pipeline_stages = 1;
  std::int64_t virtual_stages = 1;
  std::int64_t microbatches = 1;
  std::int64_t recorded_ranks = 0;  // lanes before the cap
  std::vector<std::string> names;   // task and gap names
  std::vector<Lane> lanes;
};

inline constexpr std::uint32_t kMixedName = 0xffffffffu;
inline constexpr std::size_t kMaxLanes = 64;  // more recorded ranks: the first 64 are drawn

// The timeline of `r`'s recorded ranks (empty lanes when the run recorded nothing). More than
// 16 lanes collapse the communication streams of each lane into one row.
Timeline build_timeline(const RunResult& r);

// `t` summarised at `resolution_ps`; when that leaves more than `max_slices` slices and gaps the
// resolution doubles until it does not, for the communication rows first (up to 16 times), then
// for all. Memory keeps, per resolution step, its maximum and last value (so peaks survive).
Timeline merge(const Timeline& t, std::int64_t resolution_ps, std::size_t max_slices);

// How a gap the engine recorded is drawn: a pipeline bubble or a wait for communication, and its
// name ("pipeline bubble: waiting for recv_forward", "exposed tp communication: fc2_all_reduce");
// nullopt for what the summary counts as idle (no cause, or waiting for compute work).
struct GapView {
  SliceKind kind = SliceKind::kBlocked;
  std::string label;
};
std::optional<GapView> gap_view(const sim::GapRecord& gap, const sim::TaskGraph& g);

// The plan in one line: "TP 2 PP 4 DP 1 +SP · 1f1b, 8 micro-batches of 1, selective recompute".
std::string plan_summary(const RunResult& r);

// The pipeline-bubble share of the critical rank's iteration, as the summary reports it.
double bubble_fraction(const RunResult& r);

}  // namespace trainsim::report
