#pragma once
// PictureLayout: where things go in a timeline picture, shared by the SVG and HTML writers. A
// picture stacks one or more panels (a run's lanes and its memory strip) over one time axis;
// this computes the vertical geometry, the legend and the time ticks. x positions depend on the
// view (the HTML pans and zooms), so they are computed by the writers from plot_x/plot_width.

#include <cstdint>
#include <string>
#include <vector>

#include "report/timeline.h"

namespace trainsim::report {

struct RowBox {
  double y = 0, height = 0;
};

struct LaneBox {
  double y = 0, height = 0;
  std::vector<RowBox> rows;
};

struct PanelBox {
  double heading_y = 0;                     // baseline of the panel's title in the header
  std::vector<std::string> subtitle_lines;  // its key numbers, wrapped
  double subtitle_y = 0;                    // baseline of the first subtitle line
  double section_y = 0;   // baseline of the label above the panel's lanes (several panels only)
  double axis_y = 0;      // baseline of the upper tick labels
  double lanes_top = 0, lanes_bottom = 0;
  std::vector<LaneBox> lanes;
  double memory_y = 0, memory_height = 0;  // the memory strip
  double bottom = 0;
};

struct LegendItem {
  SliceKind kind;
  double x = 0, y = 0;  // top-left of the swatch
};

struct PictureLayout {
  double width = 1400;
  double plot_x = 210, plot_width = 1070;  // the time axis spans [plot_x, plot_x + plot_width]
  double height = 0;
  double label_font = 11, row_font = 8;  // lane labels; row labels (0: too small to label)
  std::vector<LegendItem> legend;
  double note_y = 0;  // baseline of the legend's note line
  std::vector<PanelBox> panels;
  std::int64_t axis_ps = 1;  // the axis runs from 0 to the longest makespan
};

// REQUIRES: panels is not empty.
PictureLayout layout_picture(const std::vector<Timeline>& panels);

// `panels` as the whole-iteration view draws them: merged at one pixel of the shared axis, the
// budget of `max_blocks` split between the panels.
std::vector<Timeline> whole_view(const std::vector<Timeline>& panels, std::size_t max_blocks);

// The note under the legend (what the numbers, the lighter shade and short blocks mean).
std::string legend_note(const std::vector<Timeline>& panels);

// Height of block `s` in a row `row_height` high. A gap fills the row; work fills the share of
// its span that its tasks run (one task fills the row; a block merging tasks too short to draw
// apart is as high as they kept the stream busy, at least 1 px), bottom-aligned, so the waiting
// drawn underneath shows above it.
double block_height(const Slice& s, double row_height);
// Below this share of its row a block counts as short (legend_note explains the heights).
inline constexpr double kShortBlock = 0.9;

// Time axis ticks for [t0, t1]: a 1-2-5 step giving about `target` ticks, labelled in s, ms,
// µs or ns.
struct AxisTick {
  std::int64_t time_ps = 0;
  std::string label;
};
std::vector<AxisTick> time_ticks(std::int64_t t0_ps, std::int64_t t1_ps, int target);

// Memory axis ticks (GiB) for [0, top_bytes].
std::vector<std::pair<std::int64_t, std::string>> memory_ticks(std::int64_t top_bytes);
// Upper end of a panel's memory strip: above the capacity when the peak exceeds 40% of it,
// otherwise 1.3x the peak (the capacity line is then off the strip).
std::int64_t memory_top(const Timeline& t);
// The same for several panels: one scale for all, so their strips compare at a glance.
std::int64_t memory_top(const std::vector<Timeline>& panels);

// Colour of lane i of n in the memory strip (dark blue for the first stage to light for the last).
std::string lane_color(std::size_t i, std::size_t n);

// Text helpers: XML escaping, fixed-precision numbers, human durations and sizes.
std::string xml_escape(const std::string& s);
std::string fixed(double x, int decimals);
std::string human_duration(std::int64_t ps);
std::string gib(std::int64_t bytes);  // "31.2 GiB"

}  // namespace trainsim::report
