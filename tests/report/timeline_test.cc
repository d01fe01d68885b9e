// Timelines and pictures: the SVG is well-formed XML with one lane per pipeline stage, the
// memory peaks where the schedule puts it, the bubbles change as the pipeline formulas say, the
// page is self-contained, and the same run gives the same bytes.

#include <doctest/doctest.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "config/scenario.h"
#include "report/comparison.h"
#include "report/html_timeline.h"
#include "report/picture_layout.h"
#include "report/simulation.h"
#include "report/svg_timeline.h"
#include "report/timeline.h"
#include "tests/scenario_helpers.h"

using namespace trainsim;

namespace {

std::string teaching(const std::string& name) { return std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/teaching/" + name; }

report::RunResult run_recorded(const std::string& file, const std::vector<std::string>& overrides = {}) {
  return report::simulate(config::load_scenario(file, overrides));
}

std::string svg_of(const std::vector<report::Timeline>& panels) {
  std::ostringstream out;
  report::write_svg(panels, out);
  return out.str();
}

// A parsed XML document with XPath queries; the parse fails on anything not well-formed.
class Xml {
 public:
  explicit Xml(const std::string& text)
      : doc_(xmlReadMemory(text.data(), static_cast<int>(text.size()), "picture.svg", "UTF-8", XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)) {}
  ~Xml() {
    if (doc_ != nullptr) xmlFreeDoc(doc_);
  }
  Xml(const Xml&) = delete;
  Xml& operator=(const Xml&) = delete;
  bool ok() const { return doc_ != nullptr; }
  // Values of `attribute` on the elements `xpath` selects (local names, so no namespace set-up).
  std::vector<std::string> attributes(const std::string& xpath, const std::string& attribute) const {
    std::vector<std::string> out;
    xmlXPathContextPtr ctx = xmlXPathNewContext(doc_);
    xmlXPathObjectPtr res = xmlXPathEvalExpression(reinterpret_cast<const xmlChar*>(xpath.c_str()), ctx);
    if (res != nullptr && res->nodesetval != nullptr) {
      for (int i = 0; i < res->nodesetval->nodeNr; ++i) {
        xmlChar* v = xmlGetProp(res->nodesetval->nodeTab[i], reinterpret_cast<const xmlChar*>(attribute.c_str()));
        out.emplace_back(v != nullptr ? reinterpret_cast<const char*>(v) : "");
        xmlFree(v);
      }
    }
    xmlXPathFreeObject(res);
    xmlXPathFreeContext(ctx);
    return out;
  }

 private:
  xmlDocPtr doc_;
};

// Start of the first compute-row slice of `kind` for micro-batch `mb` (any micro-batch if -1).
std::int64_t first_start(const report::Lane& lane, report::SliceKind kind, std::int32_t mb) {
  for (const report::Slice& s : lane.rows[0].slices) {
    if (s.kind == kind && (mb < 0 || s.microbatch == mb)) return s.start_ps;
  }
  FAIL("no such slice");
  return -1;
}

// Each lane's compute-row gaps against its stage's breakdown: the bubble, the host's launch lag
// and each kind of exposed communication (a gap named "exposed KIND communication...").
void check_gaps_are_breakdown(const report::RunResult& r, const report::Timeline& t) {
  REQUIRE(t.lanes.size() == r.stages.size());
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    CAPTURE(i);
    const auto& b = r.stages[i].breakdown;
    std::map<std::string, std::int64_t> drawn;  // by kind of exposed communication
    std::int64_t host = 0;
    for (const report::Slice& g : t.lanes[i].rows[0].gaps) {
      if (g.kind == report::SliceKind::kHostLaunch) host += g.busy_ps;
      const std::string& name = g.name < t.names.size() ? t.names[g.name] : "";
      if (name.rfind("exposed ", 0) == 0) drawn[name.substr(8, name.find(' ', 8) - 8)] += g.busy_ps;
    }
    CHECK(static_cast<double>(t.lanes[i].bubble_ps) * 1e-12 == doctest::Approx(b.pipeline_bubble_s).epsilon(1e-9));
    CHECK(static_cast<double>(host) * 1e-12 == doctest::Approx(b.host_launch_s).epsilon(1e-9));
    for (const auto& by_kind : b.exposed_by_kind) {
      const std::string& kind = by_kind.first;  // a plain variable: clang 14 cannot capture a binding
      CAPTURE(kind);
      CHECK(static_cast<double>(drawn[kind]) * 1e-12 == doctest::Approx(by_kind.second).epsilon(1e-9));
    }
  }
}

// Memory just after the first forward pass of micro-batch 0 on the lane, minus what was
// allocated before the iteration: the activations one micro-batch keeps.
// Activations micro-batch 0 keeps after its forward pass, and the most it holds during it
// (the last stage's 16-bit logits live only until the cross-entropy has read them).
struct MicrobatchMemory {
  std::int64_t kept = 0, high = 0;
};
MicrobatchMemory one_microbatch(const report::Lane& lane) {
  std::int64_t end = 0;
  for (const report::Slice& s : lane.rows[0].slices) {
    if (s.kind == report::SliceKind::kForward && s.microbatch == 0) end = s.end_ps;
    if (s.kind == report::SliceKind::kBackward) break;
  }
  const std::int64_t base = lane.memory.front().bytes;
  MicrobatchMemory m;
  for (const report::MemoryPoint& p : lane.memory) {
    if (p.time_ps > end) break;
    m.kept = p.bytes - base;
    m.high = std::max(m.high, p.bytes - base);
  }
  return m;
}

}  // namespace

TEST_CASE("report/svg: well-formed XML with one lane per pipeline stage (1F1B)") {
  const report::RunResult r = run_recorded(teaching("03b-pipeline-1f1b.json"));
  const std::string svg = svg_of({report::build_timeline(r)});
  const Xml xml(svg);
  REQUIRE(xml.ok());
  const auto stages = xml.attributes("//*[local-name()='g'][@class='lane']", "data-stage");
  REQUIRE(stages.size() == 4);
  CHECK(std::set<std::string>(stages.begin(), stages.end()) == std::set<std::string>{"0", "1", "2", "3"});
  // Rows: compute plus the streams the plan uses (TP, DP, PP); a legend, an axis, a memory strip.
  const auto rows = xml.attributes("//*[local-name()='g'][@class='lane'][1]//*[local-name()='g'][@class='row']", "data-stream");
  CHECK(rows == std::vector<std::string>{"compute", "TP", "DP", "PP"});
  CHECK(!xml.attributes("//*[local-name()='g'][@class='legend']/*[local-name()='rect']", "class").empty());
  CHECK(xml.attributes("//*[local-name()='g'][@class='axis']/*[local-name()='text']", "x").size() >= 10);
  CHECK(xml.attributes("//*[local-name()='polyline'][@class='mem']", "data-rank").size() == 4);
  // Micro-batch numbers are drawn on the forward/backward blocks: 8 micro-batches, 4 stages.
  CHECK(xml.attributes("//*[local-name()='text'][@class='mb']", "x").size() >= 2 * 8 * 4 - 8);
}

TEST_CASE("report/svg: a host-bound run's merged compute blocks are as high as the GPU is busy, the host's lag above them") {
  // TP 8 on a 1.7B model at Megatron-DeepSpeed's host time per task: about a third of the
  // iteration waits for the host, in gaps between kernels far below a pixel.
  const report::RunResult r = run_recorded(teaching("02-tensor-parallel.json"),
                                           {"cluster.calibration=\"a100-megatron-deepspeed.json\"",
                                            "parallelism.tensor_model_parallel_size=8", "training.global_batch_size=8"});
  const auto& b = r.stages[0].breakdown;
  REQUIRE(b.host_launch_s > 0.25 * r.iteration_time_s);
  const Xml xml(svg_of({report::build_timeline(r)}));
  REQUIRE(xml.ok());
  const std::string row = "//*[local-name()='g'][@class='lane'][1]//*[local-name()='g'][@data-stream='compute']";
  double row_height = 0;
  for (const std::string& h : xml.attributes("//*[local-name()='g'][@class='lane'][1]/*[local-name()='rect'][@class='bg']", "height")) {
    row_height = std::stod(h);
  }
  REQUIRE(row_height > 0);
  // The work drawn (width x height over the row's height) is the rank's busy time in pixels,
  // to the drawing's rounding: without the heights it would be the whole forward and backward
  // spans, host lag included.
  double drawn_px = 0;
  for (const char* k : {"k0", "k1", "k2", "k3"}) {  // forward, backward, recompute, optimizer
    const std::string blocks = row + "/*[local-name()='g'][@class='" + k + "']/*[local-name()='rect']";
    const auto widths = xml.attributes(blocks, "width");
    const auto heights = xml.attributes(blocks, "height");
    REQUIRE(widths.size() == heights.size());
    for (std::size_t i = 0; i < widths.size(); ++i) drawn_px += std::stod(widths[i]) * std::stod(heights[i]) / row_height;
  }
  const report::PictureLayout layout;
  const double busy_px = (b.compute_s + b.recompute_s + b.optimizer_s) / r.iteration_time_s * layout.plot_width;
  CHECK(drawn_px == doctest::Approx(busy_px).epsilon(0.03));
  // The host's lag is drawn underneath (k14), and the note says what a low block means.
  CHECK(!xml.attributes(row + "/*[local-name()='g'][@class='k14']/*[local-name()='rect']", "width").empty());
  CHECK(svg_of({report::build_timeline(r)}).find("A low block: short tasks merged") != std::string::npos);
}

TEST_CASE("report/timeline: the compute row's bubble is the summary's pipeline bubble") {
  const report::RunResult r = run_recorded(teaching("03b-pipeline-1f1b.json"));
  const report::Timeline t = report::build_timeline(r);
  REQUIRE(t.lanes.size() == r.stages.size());
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    CAPTURE(i);
    const double bubble = static_cast<double>(t.lanes[i].bubble_ps) * 1e-12;
    CHECK(bubble == doctest::Approx(r.stages[i].breakdown.pipeline_bubble_s).epsilon(1e-9));
    CHECK(bubble > 0);
    // The compute row's work adds up to the breakdown's compute, recompute and optimizer time.
    std::int64_t busy = 0;
    for (const report::Slice& s : t.lanes[i].rows[0].slices) busy += s.busy_ps;
    const auto& b = r.stages[i].breakdown;
    CHECK(static_cast<double>(busy) * 1e-12 == doctest::Approx(b.compute_s + b.recompute_s + b.optimizer_s).epsilon(1e-9));
  }
}

TEST_CASE("report/timeline: a bubble behind the host's wait for scatter/gather's all-gather, and the host's launch lag, are drawn as the summary counts them") {
  // With scatter/gather (Megatron's --scatter-gather-tensors-in-pipeline, DeepSpeed's pipeline
  // engine) the host waits for the all-gather that reassembles a received activation before it
  // issues the next pipeline transfer; the summary charges that wait to the pipeline, so the
  // compute row must draw it as a bubble too, not as idle time.
  const report::RunResult r = run_recorded(teaching("03b-pipeline-1f1b.json"),
                                           {"training.scatter_gather_tensors_in_pipeline=true",
                                            "cluster.calibration=\"a100-megatron-deepspeed.json\""});
  for (const report::StageReport& st : r.stages) {
    CAPTURE(st.stage);
    CHECK(st.breakdown.pipeline_bubble_s > 0);
    CHECK(st.breakdown.host_launch_s > 0);
  }
  check_gaps_are_breakdown(r, report::build_timeline(r));
}

TEST_CASE("report/timeline: on every teaching scenario the compute row's gaps are the summary's bubble, exposed communication and host launch") {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/teaching")) {
    if (entry.path().extension() != ".json") continue;
    CAPTURE(entry.path().filename().string());
    const report::RunResult r = run_recorded(entry.path().string());
    check_gaps_are_breakdown(r, report::build_timeline(r));
  }
}

// Each recorded rank's gap records against the engine's own account of it: per category they sum
// to the account's gap arrays to the picosecond, and they tile the compute stream's idle time
// (every stretch from the end of one compute task to the issue of the next, and from the last
// one's end to the rank's last task's, nothing else).
void check_gap_records(const report::RunResult& r) {
  const sim::EngineResult& e = r.engine;
  const sim::TaskGraph& g = r.workload->graph;
  std::map<std::uint32_t, std::vector<const sim::TaskRecord*>> compute_of;  // by start
  for (const sim::TaskRecord& rec : e.records) {
    if (g.rank_class(g.class_of(rec.rank)).tasks[rec.task].stream == 0) compute_of[sim::index(rec.rank)].push_back(&rec);
  }
  REQUIRE(!compute_of.empty());
  for (auto& entry : compute_of) {
    const std::uint32_t rank = entry.first;
    CAPTURE(rank);
    auto& tasks = entry.second;
    std::sort(tasks.begin(), tasks.end(), [](const sim::TaskRecord* a, const sim::TaskRecord* b) { return a->start < b->start; });
    const auto at = std::find(e.ranks.begin(), e.ranks.end(), sim::RankId{rank});
    REQUIRE(at != e.ranks.end());
    const sim::RankAccount& acc = e.accounts[static_cast<std::size_t>(at - e.ranks.begin())];
    sim::RankAccount sum;
    std::map<sim::TaskIndex, sim::Duration> before;  // gap charged before each task
    std::size_t tails = 0;                           // gaps after the last task
    sim::TimePoint last;
    for (const sim::GapRecord& gr : e.gaps) {
      if (sim::index(gr.rank) != rank) continue;
      CHECK(gr.from < gr.to);
      CHECK(gr.from >= last);  // in time order, no overlap
      last = gr.to;
      const sim::Duration d = gr.to - gr.from;
      if (gr.cause == sim::GapRecord::Cause::kTail) {
        ++tails;
        CHECK(gr.to == acc.finish);  // the rank's last task ends the tail...
      } else {
        CHECK(tails == 0);  // ...which is its last gap
        before[gr.task] += d;
      }
      switch (gr.cause) {
        case sim::GapRecord::Cause::kHeldBack:
        case sim::GapRecord::Cause::kHostSync:
          sum.gap_issue[gr.category] += d;
          break;
        case sim::GapRecord::Cause::kWaiting:
          sum.gap_wait[gr.category] += d;
          break;
        case sim::GapRecord::Cause::kTransferring:
          sum.gap_exposed[gr.category] += d;
          break;
        case sim::GapRecord::Cause::kUnattributed:
          sum.gap_other += d;
          break;
        case sim::GapRecord::Cause::kTail:
          sum.gap_tail[gr.category] += d;
          break;
      }
    }
    CHECK(sum.gap_other == acc.gap_other);
    for (std::size_t c = 0; c < sim::kMaxCategories; ++c) {
      CAPTURE(c);
      CHECK(sum.gap_issue[c] == acc.gap_issue[c]);
      CHECK(sum.gap_wait[c] == acc.gap_wait[c]);
      CHECK(sum.gap_exposed[c] == acc.gap_exposed[c]);
      CHECK(sum.gap_tail[c] == acc.gap_tail[c]);
    }
    CHECK(tails <= 1);
    sim::TimePoint free_since;
    std::size_t gaps = 0;
    for (const sim::TaskRecord* rec : tasks) {
      const sim::Duration idle = rec->posted > free_since ? rec->posted - free_since : sim::Duration::zero();
      const auto charged = before.find(rec->task);
      CHECK((charged == before.end() ? sim::Duration::zero() : charged->second) == idle);
      if (idle > sim::Duration::zero()) ++gaps;
      free_since = rec->end;
    }
    CHECK(before.size() == gaps);  // no record charged to a task that did not wait
    // From the last compute task's end to the rank's last task's end, if that is later.
    CHECK(tails == (acc.finish > free_since ? 1u : 0u));
  }
}

TEST_CASE("sim/Engine: on every teaching scenario a recorded rank's gap records tile its compute idle time and sum to its account") {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/teaching")) {
    if (entry.path().extension() != ".json") continue;
    CAPTURE(entry.path().filename().string());
    check_gap_records(run_recorded(entry.path().string()));
  }
  // Every rank simulated and recorded, the host synchronizing before scatter/gather's all-gather.
  check_gap_records(run_recorded(teaching("03b-pipeline-1f1b.json"),
                                 {"simulation.fidelity=\"full\"", "training.scatter_gather_tensors_in_pipeline=true",
                                  "cluster.calibration=\"a100-megatron-deepspeed.json\""}));
}

TEST_CASE("report/timeline: memory peaks at the end of the warm-up (1F1B) and of all forwards (GPipe)") {
  for (const char* schedule : {"1f1b", "gpipe"}) {
    CAPTURE(schedule);
    const report::RunResult r = run_recorded(teaching("03b-pipeline-1f1b.json"), {std::string("training.pipeline_schedule=") + schedule});
    const report::Timeline t = report::build_timeline(r);
    const std::int64_t p = 4, m = 8;
    REQUIRE(t.lanes.size() == static_cast<std::size_t>(p));
    for (const report::Lane& lane : t.lanes) {
      CAPTURE(lane.stage);
      // 1F1B: stage s runs p-s-1 warm-up forwards, then the forward of micro-batch p-s-1 before
      // its first backward; p-s micro-batches are in flight at that point. GPipe: all m.
      const bool one_f_one_b = std::string(schedule) == "1f1b";
      const std::int64_t in_flight = one_f_one_b ? p - lane.stage : m;
      const auto last_forward = static_cast<std::int32_t>(in_flight - 1);
      const std::int64_t from = first_start(lane, report::SliceKind::kForward, last_forward);
      const std::int64_t to = first_start(lane, report::SliceKind::kBackward, -1);
      CHECK(lane.peak_time_ps >= from);
      CHECK(lane.peak_time_ps <= to);
      const MicrobatchMemory one = one_microbatch(lane);
      CHECK(lane.peak_bytes - lane.memory.front().bytes == (in_flight - 1) * one.kept + one.high);
    }
  }
}

TEST_CASE("report/svg: the memory strip marks each lane's peak where the timeline has it") {
  const report::RunResult r = run_recorded(teaching("03b-pipeline-1f1b.json"));
  const report::Timeline t = report::build_timeline(r);
  const Xml xml(svg_of({t}));
  REQUIRE(xml.ok());
  const auto times = xml.attributes("//*[local-name()='circle'][@class='peak']", "data-time-ps");
  REQUIRE(times.size() == t.lanes.size());
  for (std::size_t i = 0; i < t.lanes.size(); ++i) CHECK(std::stoll(times[i]) == t.lanes[i].peak_time_ps);
}

TEST_CASE("report/timeline: gaps held back by a chain of communication are drawn as the summary counts them") {
  // GPT 7.5B TP 4 PP 2: after the backward pass the embedding all-reduce is issued behind the
  // layernorm all-reduce, which waited for the data-parallel gradient reduction; the summary
  // charges that wait to dp, and so must the picture.
  const report::RunResult r = run_recorded(std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/golden/gpt3-7.5b-tp4-pp2-a100.json");
  const report::Timeline t = report::build_timeline(r);
  REQUIRE(t.lanes.size() == r.stages.size());
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    CAPTURE(i);
    CHECK(static_cast<double>(t.lanes[i].bubble_ps) * 1e-12 == doctest::Approx(r.stages[i].breakdown.pipeline_bubble_s).epsilon(1e-9));
    std::int64_t dp = 0;
    for (const report::Slice& g : t.lanes[i].rows[0].gaps) {
      if (g.name < t.names.size() && t.names[g.name].rfind("exposed dp communication", 0) == 0) dp += g.busy_ps;
    }
    double summary_dp = 0;
    for (const auto& [kind, v] : r.stages[i].breakdown.exposed_by_kind) {
      if (kind == "dp") summary_dp = v;
    }
    CHECK(summary_dp > 0.01);
    CHECK(static_cast<double>(dp) * 1e-12 == doctest::Approx(summary_dp).epsilon(1e-6));
  }
}

TEST_CASE("report/pipeline: GPipe, 1F1B and interleaved bubbles follow the schedule formulas") {
  // Narayanan et al. 2021, Sec. 2.2: GPipe and 1F1B idle (p-1)(t_f+t_b) per stage; interleaving
  // v chunks divides that by v. The last stage also computes the logits, so every other stage
  // additionally waits for it once per micro-batch; that part does not depend on the schedule and
  // cancels in the differences.
  const report::RunResult gpipe = run_recorded(teaching("03a-pipeline-gpipe.json"));
  const report::RunResult ofob = run_recorded(teaching("03b-pipeline-1f1b.json"));
  const report::RunResult inter = run_recorded(teaching("03c-pipeline-interleaved.json"));
  const double p = 4, m = 8, v = 2;
  CHECK(gpipe.breakdown.pipeline_bubble_s == doctest::Approx(ofob.breakdown.pipeline_bubble_s).epsilon(0.02));
  const double ideal = ofob.breakdown.compute_s;  // m (t_f + t_b) on the critical rank
  const double saved = ofob.breakdown.pipeline_bubble_s - inter.breakdown.pipeline_bubble_s;
  CHECK(saved == doctest::Approx((p - 1) / m * (1 - 1 / v) * ideal).epsilon(0.05));
  CHECK(report::bubble_fraction(inter) < report::bubble_fraction(ofob));
  // 1F1B keeps p - s micro-batches per stage instead of all m: less memory, same bubble.
  CHECK(ofob.peak_bytes_per_gpu < gpipe.peak_bytes_per_gpu);

  const report::Comparison c = report::compare_runs(ofob, inter);
  CHECK(c.causes[c.largest].name == "pipeline_bubble");
  double sum = 0;
  for (const report::Cause& cause : c.causes) sum += cause.change_s();
  CHECK(sum == doctest::Approx(c.change_s).epsilon(1e-6));
  CHECK(c.change_s < 0);
  const std::string text = report::comparison_text(ofob, inter);
  CHECK(text.find("largest cause: pipeline bubble") != std::string::npos);
  // The same kernels on both sides: the interleaved schedule changes when they run, not what.
  const auto json = report::comparison_json(ofob, inter, false);
  REQUIRE(json["kernels_by_kind"].size() == 5);
  for (const auto& k : json["kernels_by_kind"]) {
    CAPTURE(k["kind"].get<std::string>());
    CHECK(k["change_s"].get<double>() == doctest::Approx(0).epsilon(1e-9).scale(1));
  }
  CHECK(text.find("kernels of those ranks by kind") != std::string::npos);
}

TEST_CASE("report/timeline: merging bounds the blocks and keeps the work") {
  const report::RunResult r = run_recorded(teaching("03b-pipeline-1f1b.json"));
  const report::Timeline t = report::build_timeline(r);
  auto totals = [](const report::Timeline& x) {
    std::pair<std::size_t, std::int64_t> n{0, 0};
    for (const report::Lane& lane : x.lanes) {
      for (const report::Row& row : lane.rows) {
        n.first += row.slices.size() + row.gaps.size();
        for (const report::Slice& s : row.slices) n.second += s.busy_ps;
      }
    }
    return n;
  };
  const auto raw = totals(t);
  for (std::size_t cap : {std::size_t{200}, std::size_t{2000}, raw.first}) {
    CAPTURE(cap);
    const report::Timeline merged = report::merge(t, t.makespan_ps / 1000, cap);
    const auto n = totals(merged);
    CHECK(n.first <= std::max<std::size_t>(cap, 1));
    CHECK(n.second == raw.second);
    for (std::size_t i = 0; i < t.lanes.size(); ++i) {
      // Peaks survive the memory summary.
      std::int64_t peak = 0;
      for (const report::MemoryPoint& mp : merged.lanes[i].memory) peak = std::max(peak, mp.bytes);
      CHECK(peak == t.lanes[i].peak_bytes);
    }
  }
}

TEST_CASE("report/html: self-contained page with the data its script draws") {
  const report::RunResult r = run_recorded(teaching("03c-pipeline-interleaved.json"));
  std::ostringstream out;
  report::write_html({report::build_timeline(r)}, out);
  const std::string html = out.str();
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<script src") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  // The only URL is the SVG namespace (no network access).
  std::size_t urls = 0;
  for (std::size_t at = html.find("http"); at != std::string::npos; at = html.find("http", at + 1)) {
    CHECK(html.compare(at, 26, "http://www.w3.org/2000/svg") == 0);
    ++urls;
  }
  CHECK(urls >= 1);
  const std::size_t begin = html.find("var DATA = ") + 11;
  const std::size_t end = html.find(";\n", begin);
  const auto data = nlohmann::json::parse(html.substr(begin, end - begin));
  REQUIRE(data["panels"].size() == 1);
  CHECK(data["panels"][0]["lanes"].size() == 4);
  CHECK(data["panels"][0]["lanes"][0]["rows"][0]["s"].size() % 10 == 0);
  CHECK(data["kinds"].size() == report::kSliceKinds);
}

TEST_CASE("report/pictures: the same run gives the same bytes, and two panels share one axis") {
  const config::Scenario s = config::load_scenario(teaching("03c-pipeline-interleaved.json"));
  const report::Timeline a = report::build_timeline(report::simulate(s));
  const report::Timeline b = report::build_timeline(report::simulate(s));
  CHECK(svg_of({a}) == svg_of({b}));
  std::ostringstream ha, hb;
  report::write_html({a}, ha);
  report::write_html({b}, hb);
  CHECK(ha.str() == hb.str());

  const report::Timeline gpipe = report::build_timeline(run_recorded(teaching("03a-pipeline-gpipe.json")));
  const Xml xml(svg_of({gpipe, a}));
  REQUIRE(xml.ok());
  CHECK(xml.attributes("//*[local-name()='g'][@class='panel']", "data-panel") == std::vector<std::string>{"A", "B"});
  CHECK(xml.attributes("//*[local-name()='g'][@class='lane']", "data-stage").size() == 8);
}

TEST_CASE("report/svg: large runs are summarised within the block budget") {
  // GPT-3 175B on 1,024 GPUs: 16 stages, 192 micro-batches, about a million tasks.
  const report::RunResult r = run_recorded(tests::kDefaultScenario);
  const std::string svg = svg_of({report::build_timeline(r)});
  const Xml xml(svg);
  REQUIRE(xml.ok());
  CHECK(xml.attributes("//*[local-name()='g'][@class='lane']", "data-stage").size() == 16);
  CHECK(xml.attributes("//*[local-name()='g'][@class='row']/*[local-name()='g']/*[local-name()='rect']", "x").size() <=
        report::kMaxSvgBlocks);
  CHECK(svg.size() < 2'000'000);
}
