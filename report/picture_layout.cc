#include "report/picture_layout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace trainsim::report {

namespace {

constexpr double kCharWidth = 6.4;  // average advance of an 11 px sans-serif character

// Splits `text` at " · " separators into lines of at most `max_chars` characters.
std::vector<std::string> wrap(const std::string& text, std::size_t max_chars) {
  static const std::string kSep = " \xc2\xb7 ";
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (true) {
    const std::size_t next = text.find(kSep, pos);
    parts.push_back(text.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + kSep.size();
  }
  std::vector<std::string> lines;
  std::string line;
  for (const std::string& p : parts) {
    if (!line.empty() && line.size() + kSep.size() + p.size() > max_chars) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : kSep) + p;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

// The largest 1-2-5 multiple of a power of ten not below `raw`.
double nice_step(double raw) {
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  }
  return 10 * magnitude;
}

}  // namespace

std::string fixed(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  if (std::string(buf) == "-0" || std::string(buf) == "-0.0") return decimals == 0 ? "0" : "0.0";
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

std::string human_duration(std::int64_t ps) {
  const double s = static_cast<double>(ps) * 1e-12;
  char buf[48];
  if (std::abs(s) >= 1) {
    std::snprintf(buf, sizeof buf, "%.4g s", s);
  } else if (std::abs(s) >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.4g ms", s * 1e3);
  } else if (std::abs(s) >= 1e-6) {
    std::snprintf(buf, sizeof buf, "%.4g \xc2\xb5s", s * 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g ns", s * 1e9);
  }
  return buf;
}

std::string gib(std::int64_t bytes) { return fixed(static_cast<double>(bytes) / 1073741824.0, 1) + " GiB"; }

std::vector<AxisTick> time_ticks(std::int64_t t0_ps, std::int64_t t1_ps, int target) {
  std::vector<AxisTick> ticks;
  if (t1_ps <= t0_ps || target < 1) return ticks;
  const double step = std::max(1.0, nice_step(static_cast<double>(t1_ps - t0_ps) / target));
  double unit = 1e3;
  const char* name = "ns";
  if (step >= 1e12) {
    unit = 1e12;
    name = "s";
  } else if (step >= 1e9) {
    unit = 1e9;
    name = "ms";
  } else if (step >= 1e6) {
    unit = 1e6;
    name = "\xc2\xb5s";
  }
  int decimals = 0;
  while (decimals < 3 && std::abs(step / unit * std::pow(10.0, decimals) - std::round(step / unit * std::pow(10.0, decimals))) > 1e-6) {
    ++decimals;
  }
  const auto first = static_cast<std::int64_t>(std::ceil(static_cast<double>(t0_ps) / step));
  for (std::int64_t i = first;; ++i) {
    const double t = static_cast<double>(i) * step;
    if (t > static_cast<double>(t1_ps) + 0.5) break;
    ticks.push_back(AxisTick{static_cast<std::int64_t>(std::llround(t)), fixed(t / unit, decimals) + " " + name});
  }
  return ticks;
}

std::int64_t memory_top(const Timeline& t) {
  std::int64_t peak = 0;
  for (const Lane& lane : t.lanes) peak = std::max(peak, lane.peak_bytes);
  // Up to the capacity when the peak uses a fair share of it; otherwise zoomed on the peak (the
  // capacity is then named above the strip) so that the activations' rise and fall stay visible.
  const std::int64_t top = 5 * peak >= 2 * t.capacity_bytes ? std::max(peak, t.capacity_bytes) : peak + peak / 4;
  return std::max<std::int64_t>(1, top + top / 25);
}

std::int64_t memory_top(const std::vector<Timeline>& panels) {
  std::int64_t top = 1;
  for (const Timeline& t : panels) top = std::max(top, memory_top(t));
  return top;
}

std::vector<std::pair<std::int64_t, std::string>> memory_ticks(std::int64_t top_bytes) {
  std::vector<std::pair<std::int64_t, std::string>> ticks;
  const double top = static_cast<double>(top_bytes) / 1073741824.0;
  const double step = nice_step(top / 4);
  for (int i = 0;; ++i) {
    const double v = i * step;
    if (v > top) break;
    ticks.emplace_back(static_cast<std::int64_t>(std::llround(v * 1073741824.0)),
                       fixed(v, step < 1 ? 1 : 0) + " GiB");
  }
  return ticks;
}

std::string lane_color(std::size_t i, std::size_t n) {
  // Three stops of the viridis colour map (van der Walt and Smith, matplotlib 2.0), stopping
  // before its yellow end, which is unreadable on white.
  static constexpr std::array<std::array<double, 3>, 3> kStops = {{{68, 1, 84}, {33, 145, 140}, {122, 209, 81}}};
  const double x = n <= 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(n - 1);
  const std::size_t seg = x < 0.5 ? 0 : 1;
  const double f = x < 0.5 ? x * 2 : (x - 0.5) * 2;
  char buf[16];
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<int>(std::lround(kStops[seg][static_cast<std::size_t>(c)] +
                                          f * (kStops[seg + 1][static_cast<std::size_t>(c)] - kStops[seg][static_cast<std::size_t>(c)])));
  }
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return buf;
}

namespace {

// The share of a work block's span its tasks run (1 for gaps and single tasks).
double busy_share(const Slice& s) {
  const std::int64_t span = s.duration();
  if (is_gap_kind(s.kind) || span <= 0 || s.busy_ps >= span) return 1;
  return static_cast<double>(s.busy_ps) / static_cast<double>(span);
}

}  // namespace

std::vector<Timeline> whole_view(const std::vector<Timeline>& panels, std::size_t max_blocks) {
  std::int64_t axis = 1;
  for (const Timeline& t : panels) axis = std::max(axis, t.makespan_ps);
  const auto resolution = static_cast<std::int64_t>(std::ceil(static_cast<double>(axis) / PictureLayout{}.plot_width));
  std::vector<Timeline> out;
  for (const Timeline& t : panels) out.push_back(merge(t, resolution, max_blocks / panels.size()));
  return out;
}

double block_height(const Slice& s, double row_height) {
  const double h = row_height * busy_share(s);
  return h > row_height - 0.05 ? row_height : std::max(1.0, h);
}

std::string legend_note(const std::vector<Timeline>& panels) {
  std::string note = "Numbers on blocks: micro-batch (from 1). Hatched: pipeline bubble; grey hatched: compute waiting for "
                     "communication; blank: idle.";
  const auto has_short_block = [&] {
    for (const Timeline& t : panels) {
      for (const Lane& lane : t.lanes) {
        for (const Row& row : lane.rows) {
          for (const Slice& s : row.slices) {
            if (busy_share(s) < kShortBlock) return true;
          }
        }
      }
    }
    return false;
  };
  if (has_short_block()) note += " A low block: short tasks merged, as high as the share of its span they run.";
  for (const Timeline& t : panels) {
    if (t.virtual_stages > 1) {
      note += " Lighter blocks: odd model chunks (interleaved virtual stages).";
      break;
    }
  }
  for (const Timeline& t : panels) {
    if (t.recorded_ranks > static_cast<std::int64_t>(t.lanes.size())) {
      note += " Showing " + std::to_string(t.lanes.size()) + " of " + std::to_string(t.recorded_ranks) +
              " recorded ranks (choose them with --trace-ranks).";
      break;
    }
  }
  return note;
}

PictureLayout layout_picture(const std::vector<Timeline>& panels) {
  PictureLayout L;
  for (const Timeline& t : panels) L.axis_ps = std::max(L.axis_ps, t.makespan_ps);
  const std::size_t max_chars = static_cast<std::size_t>((L.width - 20) / kCharWidth);
  std::size_t most_lanes = 0;
  for (const Timeline& t : panels) most_lanes = std::max(most_lanes, t.lanes.size());

  // Header: each panel's title and subtitle.
  double y = 0;
  L.panels.resize(panels.size());
  for (std::size_t p = 0; p < panels.size(); ++p) {
    y += p == 0 ? 24 : 22;
    L.panels[p].heading_y = y;
    L.panels[p].subtitle_lines = wrap(panels[p].subtitle, max_chars);
    L.panels[p].subtitle_y = y + 17;
    y += 17 + 15 * static_cast<double>(L.panels[p].subtitle_lines.size() - 1);
  }

  // Legend: the kinds any panel shows, in a fixed order, wrapped.
  std::array<bool, kSliceKinds> present{};
  for (const Timeline& t : panels) {
    for (const Lane& lane : t.lanes) {
      for (const Row& row : lane.rows) {
        for (const Slice& s : row.slices) present[static_cast<std::size_t>(s.kind)] = true;
        for (const Slice& s : row.gaps) present[static_cast<std::size_t>(s.kind)] = true;
      }
    }
  }
  y += 14;
  double x = 10;
  for (std::size_t k = 0; k < kSliceKinds; ++k) {
    if (!present[k]) continue;
    const auto kind = static_cast<SliceKind>(k);
    const double item = 20 + kCharWidth * static_cast<double>(std::string(slice_kind_label(kind)).size()) + 16;
    if (x + item > L.width - 10) {
      x = 10;
      y += 18;
    }
    L.legend.push_back(LegendItem{kind, x, y});
    x += item;
  }
  L.note_y = y + 28;
  y = L.note_y + 10;

  // Lanes: row heights shrink as lanes multiply so that 64 stages stay on one screen.
  const std::size_t n = most_lanes;
  const double compute_h = n <= 8 ? 26 : n <= 16 ? 18 : n <= 32 ? 11 : 8;
  const double comm_h = n <= 8 ? 9 : n <= 16 ? 7 : n <= 32 ? 5 : 4;
  const double lane_gap = n <= 16 ? 7 : 3;
  L.label_font = n <= 16 ? 11 : n <= 32 ? 9 : 7;
  L.row_font = comm_h >= 7 ? 7.5 : 0;
  for (std::size_t p = 0; p < panels.size(); ++p) {
    PanelBox& box = L.panels[p];
    if (panels.size() > 1) {
      y += 16;
      box.section_y = y;
    }
    box.axis_y = y + 13;
    box.lanes_top = y + 19;
    y = box.lanes_top;
    for (const Lane& lane : panels[p].lanes) {
      LaneBox lb;
      lb.y = y;
      for (std::size_t r = 0; r < lane.rows.size(); ++r) {
        const double h = r == 0 ? compute_h : comm_h;
        lb.rows.push_back(RowBox{y, h});
        y += h + 1;
      }
      lb.height = y - 1 - lb.y;
      box.lanes.push_back(std::move(lb));
      y += lane_gap;
    }
    box.lanes_bottom = y - lane_gap;
    box.memory_y = box.lanes_bottom + 22;
    box.memory_height = (panels.size() == 1 && n <= 16) ? 110 : 80;
    box.bottom = box.memory_y + box.memory_height + 16;
    y = box.bottom + 4;
  }
  L.height = std::ceil(y + 4);
  return L;
}

}  // namespace trainsim::report
