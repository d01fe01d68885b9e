#include "report/svg_timeline.h"

#include <algorithm>

#include "report/picture_layout.h"

namespace trainsim::report {

namespace {

std::size_t utf8_length(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

std::string panel_tag(std::size_t p) { return std::string(1, static_cast<char>('A' + p % 26)); }

class SvgWriter {
 public:
  SvgWriter(const std::vector<Timeline>& panels, std::ostream& out)
      : out_(out), panels_(whole_view(panels, kMaxSvgBlocks)), L_(layout_picture(panels_)) {}

  void write() {
    out_ << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fixed(L_.width, 0) << "\" height=\"" << fixed(L_.height, 0)
         << "\" viewBox=\"0 0 " << fixed(L_.width, 0) << " " << fixed(L_.height, 0)
         << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\">\n";
    out_ << "<title>" << xml_escape(title()) << "</title>\n";
    style();
    out_ << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
    header();
    legend();
    for (std::size_t p = 0; p < panels_.size(); ++p) panel(p);
    out_ << "</svg>\n";
  }

 private:
  std::string title() const {
    if (panels_.size() == 1) return panels_[0].title;
    std::string t;
    for (std::size_t p = 0; p < panels_.size(); ++p) t += (p ? " vs " : "") + panels_[p].title;
    return t;
  }

  double x_of(std::int64_t ps) const {
    return L_.plot_x + static_cast<double>(ps) / static_cast<double>(L_.axis_ps) * L_.plot_width;
  }

  void style() {
    out_ << "<style>\n";
    for (std::size_t k = 0; k < kSliceKinds; ++k) {
      const auto kind = static_cast<SliceKind>(k);
      out_ << ".k" << k << "{fill:";
      if (kind == SliceKind::kBubble) {
        out_ << "url(#hatch-bubble)";
      } else if (kind == SliceKind::kBlocked) {
        out_ << "url(#hatch-blocked)";
      } else {
        out_ << slice_kind_color(kind);
      }
      out_ << "}\n";
    }
    out_ << ".c1{fill-opacity:0.55}\n"
            ".bg{fill:#f2f2f2}\n"
            ".bg2{fill:#fafafa}\n"
            ".grid{stroke:#e3e3e3;stroke-width:1}\n"
            ".tick{fill:#555555;font-size:10px;text-anchor:middle}\n"
            ".mb{fill:#ffffff;text-anchor:middle}\n"
            ".mb.dark{fill:#333333}\n"
            ".row{fill:#777777;text-anchor:end}\n"
            ".stat{fill:#444444;font-size:9.5px}\n"
            ".note{fill:#555555;font-size:10.5px}\n"
            ".sub{fill:#333333;font-size:11.5px}\n"
            ".mem{fill:none;stroke-width:1.3}\n"
            ".cap{stroke:#d62728;stroke-width:1.2;stroke-dasharray:5 3}\n"
            "</style>\n";
    out_ << "<defs>\n"
            "<pattern id=\"hatch-bubble\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
            "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fbe4e4\"/><rect width=\"2\" height=\"6\" "
            "fill=\"#e15759\"/></pattern>\n"
            "<pattern id=\"hatch-blocked\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
            "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ececec\"/><rect width=\"2\" height=\"6\" "
            "fill=\"#9a9a9a\"/></pattern>\n"
            "</defs>\n";
  }

  void header() {
    for (std::size_t p = 0; p < panels_.size(); ++p) {
      const PanelBox& box = L_.panels[p];
      out_ << "<text x=\"10\" y=\"" << fixed(box.heading_y, 1) << "\" font-size=\"15\" font-weight=\"bold\">"
           << xml_escape((panels_.size() > 1 ? panel_tag(p) + " \xc2\xb7 " : "") + panels_[p].title) << "</text>\n";
      for (std::size_t i = 0; i < box.subtitle_lines.size(); ++i) {
        out_ << "<text class=\"sub\" x=\"10\" y=\"" << fixed(box.subtitle_y + 15 * static_cast<double>(i), 1) << "\">"
             << xml_escape(box.subtitle_lines[i]) << "</text>\n";
      }
    }
  }

  void legend() {
    out_ << "<g class=\"legend\">\n";
    for (const LegendItem& item : L_.legend) {
      const auto k = static_cast<std::size_t>(item.kind);
      out_ << "<rect class=\"k" << k << "\" x=\"" << fixed(item.x, 1) << "\" y=\"" << fixed(item.y, 1)
           << "\" width=\"14\" height=\"12\" stroke=\"#888888\" stroke-width=\"0.5\"/><text x=\"" << fixed(item.x + 19, 1)
           << "\" y=\"" << fixed(item.y + 10, 1) << "\">" << xml_escape(slice_kind_label(item.kind)) << "</text>\n";
    }
    out_ << "<text class=\"note\" x=\"10\" y=\"" << fixed(L_.note_y, 1) << "\">" << xml_escape(legend_note(panels_))
         << "</text>\n</g>\n";
  }

  void axis(const PanelBox& box) {
    const std::vector<AxisTick> ticks = time_ticks(0, L_.axis_ps, 12);
    out_ << "<g class=\"axis\">\n";
    const double bottom_label = box.memory_y + box.memory_height + 13;
    for (const AxisTick& t : ticks) {
      const std::string x = fixed(x_of(t.time_ps), 1);
      out_ << "<line class=\"grid\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << fixed(box.lanes_top - 3, 1) << "\" y2=\""
           << fixed(box.memory_y + box.memory_height, 1) << "\"/>";
      out_ << "<text class=\"tick\" x=\"" << x << "\" y=\"" << fixed(box.axis_y, 1) << "\">" << xml_escape(t.label) << "</text>";
      out_ << "<text class=\"tick\" x=\"" << x << "\" y=\"" << fixed(bottom_label, 1) << "\">" << xml_escape(t.label)
           << "</text>\n";
    }
    out_ << "</g>\n";
  }

  void blocks(const std::vector<Slice>& slices, double h, bool label_microbatches) {
    for (std::size_t k = 0; k < kSliceKinds; ++k) {
      bool open = false;
      for (const Slice& s : slices) {
        if (static_cast<std::size_t>(s.kind) != k) continue;
        if (!open) {
          out_ << "<g class=\"k" << k << "\">";
          open = true;
        }
        const double x0 = x_of(s.start_ps), x1 = x_of(s.end_ps);
        out_ << "<rect" << (s.chunk > 0 && s.chunk % 2 == 1 ? " class=\"c1\"" : "") << " x=\"" << fixed(x0, 1) << "\" width=\""
             << fixed(std::max(0.4, x1 - x0), 1);
        const double bh = block_height(s, h);
        if (bh < h) {
          out_ << "\" y=\"" << fixed(h - bh, 1) << "\" height=\"" << fixed(bh, 1) << "\"/>";
        } else {
          out_ << "\" height=\"" << fixed(h, 0) << "\"/>";
        }
      }
      if (open) out_ << "</g>\n";
    }
    if (!label_microbatches) return;
    const double font = std::min(10.0, h - 5);
    for (const Slice& s : slices) {
      if (s.microbatch < 0 || is_gap_kind(s.kind)) continue;
      const std::string text = std::to_string(s.microbatch + 1);
      const double w = x_of(s.end_ps) - x_of(s.start_ps);
      if (w < 0.62 * font * static_cast<double>(text.size()) + 4) continue;
      // On the block when it is high enough, else in dark type over the row.
      const double bh = block_height(s, h);
      const bool inside = bh >= font + 2;
      out_ << "<text class=\"" << (inside ? "mb" : "mb dark") << "\" font-size=\"" << fixed(font, 0) << "\" x=\""
           << fixed((x_of(s.start_ps) + x_of(s.end_ps)) / 2, 1) << "\" y=\"" << fixed((inside ? h - bh / 2 : h / 2) + font * 0.36, 1)
           << "\">" << text << "</text>";
    }
    out_ << "\n";
  }

  void lane(const Timeline& t, const Lane& lane, const LaneBox& box) {
    out_ << "<g class=\"lane\" data-rank=\"" << lane.rank << "\" data-stage=\"" << lane.stage << "\">\n";
    const RowBox& first = box.rows[0];
    const double font = std::min(L_.label_font, (L_.plot_x - 14) / (0.6 * static_cast<double>(utf8_length(lane.label))));
    out_ << "<text x=\"8\" y=\"" << fixed(first.y + first.height / 2 + font * 0.36, 1) << "\" font-size=\"" << fixed(font, 1)
         << "\" font-weight=\"bold\">" << xml_escape(lane.label) << "</text>\n";
    const double share = t.makespan_ps > 0 ? 100.0 * static_cast<double>(lane.bubble_ps) / static_cast<double>(t.makespan_ps) : 0;
    const double stat_x = L_.plot_x + L_.plot_width + 6;
    if (first.height >= 18) {
      out_ << "<text class=\"stat\" x=\"" << fixed(stat_x, 1) << "\" y=\"" << fixed(first.y + first.height / 2 - 2, 1)
           << "\">bubble " << fixed(share, 1) << "%</text><text class=\"stat\" x=\"" << fixed(stat_x, 1) << "\" y=\""
           << fixed(first.y + first.height / 2 + 9, 1) << "\">peak " << gib(lane.peak_bytes) << "</text>\n";
    } else {
      out_ << "<text class=\"stat\" font-size=\"" << fixed(std::min(9.5, first.height), 1) << "\" x=\"" << fixed(stat_x, 1)
           << "\" y=\"" << fixed(first.y + first.height * 0.8, 1) << "\">bubble " << fixed(share, 0) << "% \xc2\xb7 "
           << gib(lane.peak_bytes) << "</text>\n";
    }
    for (std::size_t r = 0; r < lane.rows.size(); ++r) {
      const Row& row = lane.rows[r];
      const RowBox& rb = box.rows[r];
      out_ << "<rect class=\"" << (r == 0 ? "bg" : "bg2") << "\" x=\"" << fixed(L_.plot_x, 1) << "\" y=\"" << fixed(rb.y, 1)
           << "\" width=\"" << fixed(x_of(t.makespan_ps) - L_.plot_x, 1) << "\" height=\"" << fixed(rb.height, 0) << "\"/>";
      if (r > 0 && L_.row_font > 0) {
        out_ << "<text class=\"row\" font-size=\"" << fixed(L_.row_font, 1) << "\" x=\"" << fixed(L_.plot_x - 4, 1) << "\" y=\""
             << fixed(rb.y + rb.height - 1, 1) << "\">" << xml_escape(row.label) << "</text>";
      }
      out_ << "\n<g class=\"row\" data-stream=\"" << xml_escape(row.label) << "\" transform=\"translate(0," << fixed(rb.y, 1)
           << ")\">\n";
      blocks(row.gaps, rb.height, false);
      blocks(row.slices, rb.height, r == 0 && rb.height >= 12);
      out_ << "</g>\n";
    }
    out_ << "</g>\n";
  }

  void memory(const Timeline& t, const PanelBox& box) {
    const std::int64_t top = memory_top(panels_);
    const double y0 = box.memory_y, h = box.memory_height;
    auto y_of = [&](std::int64_t bytes) { return y0 + h - static_cast<double>(bytes) / static_cast<double>(top) * h; };
    out_ << "<g class=\"memory\">\n";
    out_ << "<rect class=\"bg2\" x=\"" << fixed(L_.plot_x, 1) << "\" y=\"" << fixed(y0, 1) << "\" width=\"" << fixed(L_.plot_width, 1)
         << "\" height=\"" << fixed(h, 0) << "\"/>\n";
    out_ << "<text x=\"8\" y=\"" << fixed(y0 + 12, 1) << "\" font-weight=\"bold\">memory per GPU</text>\n";
    out_ << "<text class=\"note\" x=\"8\" y=\"" << fixed(y0 + 26, 1) << "\">allocated, one line per lane</text>\n";
    for (const auto& [bytes, label] : memory_ticks(top)) {
      const std::string y = fixed(y_of(bytes), 1);
      out_ << "<line class=\"grid\" x1=\"" << fixed(L_.plot_x, 1) << "\" x2=\"" << fixed(L_.plot_x + L_.plot_width, 1) << "\" y1=\""
           << y << "\" y2=\"" << y << "\"/><text class=\"tick\" text-anchor=\"end\" style=\"text-anchor:end\" x=\""
           << fixed(L_.plot_x - 4, 1) << "\" y=\"" << fixed(y_of(bytes) + 3.5, 1) << "\">" << label << "</text>\n";
    }
    if (t.capacity_bytes <= top) {
      const std::string cap_y = fixed(y_of(t.capacity_bytes), 1);
      out_ << "<line class=\"cap\" x1=\"" << fixed(L_.plot_x, 1) << "\" x2=\"" << fixed(L_.plot_x + L_.plot_width, 1)
           << "\" y1=\"" << cap_y << "\" y2=\"" << cap_y << "\"/><text class=\"stat\" style=\"fill:#d62728;text-anchor:end\" x=\""
           << fixed(L_.plot_x + L_.plot_width - 4, 1) << "\" y=\"" << fixed(y_of(t.capacity_bytes) - 3, 1) << "\">capacity "
           << gib(t.capacity_bytes) << "</text>\n";
    } else {
      out_ << "<text class=\"stat\" style=\"fill:#d62728;text-anchor:end\" x=\"" << fixed(L_.plot_x + L_.plot_width - 4, 1)
           << "\" y=\"" << fixed(y0 - 3, 1) << "\">capacity " << gib(t.capacity_bytes) << " \xe2\x86\x91 above this scale</text>\n";
    }
    const std::size_t n = t.lanes.size();
    for (std::size_t i = 0; i < n; ++i) {
      const Lane& lane = t.lanes[i];
      if (lane.memory.empty()) continue;
      const std::string color = lane_color(i, n);
      out_ << "<polyline class=\"mem\" data-rank=\"" << lane.rank << "\" stroke=\"" << color << "\" points=\"";
      std::int64_t prev = lane.memory.front().bytes;
      for (const MemoryPoint& m : lane.memory) {
        const std::string x = fixed(x_of(m.time_ps), 1);
        out_ << x << "," << fixed(y_of(prev), 1) << " " << x << "," << fixed(y_of(m.bytes), 1) << " ";
        prev = m.bytes;
      }
      out_ << fixed(x_of(t.makespan_ps), 1) << "," << fixed(y_of(prev), 1) << "\"/>\n";
      out_ << "<circle class=\"peak\" data-rank=\"" << lane.rank << "\" data-time-ps=\"" << lane.peak_time_ps << "\" data-bytes=\""
           << lane.peak_bytes << "\" cx=\"" << fixed(x_of(lane.peak_time_ps), 1) << "\" cy=\"" << fixed(y_of(lane.peak_bytes), 1)
           << "\" r=\"2.5\" fill=\"" << color << "\"/>\n";
    }
    // A key for the lines when there are few; otherwise the first and last.
    const double key_x = L_.plot_x + L_.plot_width + 6;
    std::vector<std::size_t> keyed;
    if (n <= 6) {
      for (std::size_t i = 0; i < n; ++i) keyed.push_back(i);
    } else if (n > 0) {
      keyed = {0, n - 1};
    }
    for (std::size_t j = 0; j < keyed.size(); ++j) {
      const std::size_t i = keyed[j];
      const double y = y0 + 8 + 11 * static_cast<double>(j);
      out_ << "<line x1=\"" << fixed(key_x, 1) << "\" x2=\"" << fixed(key_x + 10, 1) << "\" y1=\"" << fixed(y, 1) << "\" y2=\""
           << fixed(y, 1) << "\" stroke=\"" << lane_color(i, n) << "\" stroke-width=\"2\"/><text class=\"stat\" x=\""
           << fixed(key_x + 13, 1) << "\" y=\"" << fixed(y + 3, 1) << "\">"
           << (t.lanes[i].label.substr(0, t.lanes[i].label.find(" \xc2\xb7 "))) << "</text>\n";
    }
    out_ << "</g>\n";
  }

  void panel(std::size_t p) {
    const Timeline& t = panels_[p];
    const PanelBox& box = L_.panels[p];
    out_ << "<g class=\"panel\" data-panel=\"" << panel_tag(p) << "\" data-makespan-ps=\"" << t.makespan_ps << "\">\n";
    if (panels_.size() > 1) {
      out_ << "<text x=\"8\" y=\"" << fixed(box.section_y, 1) << "\" font-size=\"12.5\" font-weight=\"bold\">"
           << xml_escape(panel_tag(p) + " \xc2\xb7 " + t.title) << "</text>\n";
    }
    axis(box);
    for (std::size_t i = 0; i < t.lanes.size(); ++i) lane(t, t.lanes[i], box.lanes[i]);
    memory(t, box);
    out_ << "</g>\n";
  }

  std::ostream& out_;
  std::vector<Timeline> panels_;
  PictureLayout L_;
};

}  // namespace

void write_svg(const std::vector<Timeline>& panels, std::ostream& out) {
  SvgWriter(panels, out).write();
}

}  // namespace trainsim::report
