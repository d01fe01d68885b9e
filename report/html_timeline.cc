#include "report/html_timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "report/picture_layout.h"

namespace trainsim::report {

namespace {

// A JSON string that is also safe inside <script> ("<" escaped, so no "</script>").
std::string js_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '<') {
      out += "\\u003c";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Nanoseconds (the page's time unit), rounded.
std::string ns(std::int64_t ps) { return std::to_string((ps + 500) / 1000); }

void slices_json(const std::vector<Slice>& slices, std::ostream& out) {
  out << "[";
  bool first = true;
  for (const Slice& s : slices) {
    if (!first) out << ",";
    first = false;
    out << ns(s.start_ps) << "," << ns(s.end_ps) << "," << static_cast<int>(s.kind) << "," << s.microbatch << "," << s.chunk << ","
        << (s.name == kMixedName ? -1 : static_cast<std::int64_t>(s.name)) << "," << s.tasks << "," << ns(s.busy_ps) << ","
        << s.layer_first << "," << s.layer_last;
  }
  out << "]";
}

// `top`: where the chart starts in the layout (the title and legend above it are HTML).
void data_json(const std::vector<Timeline>& panels, const PictureLayout& L, double top, std::ostream& out) {
  out << "{\"width\":" << fixed(L.width, 0) << ",\"height\":" << fixed(L.height - top, 0) << ",\"plotX\":" << fixed(L.plot_x, 1)
      << ",\"plotW\":" << fixed(L.plot_width, 1) << ",\"axis\":" << ns(L.axis_ps) << ",\"labelFont\":" << fixed(L.label_font, 1)
      << ",\"rowFont\":" << fixed(L.row_font, 1) << ",\n\"kinds\":[";
  for (std::size_t k = 0; k < kSliceKinds; ++k) {
    const auto kind = static_cast<SliceKind>(k);
    out << (k ? "," : "") << "{\"name\":" << js_string(slice_kind_name(kind)) << ",\"label\":" << js_string(slice_kind_label(kind))
        << ",\"color\":" << js_string(slice_kind_color(kind)) << ",\"gap\":" << (is_gap_kind(kind) ? "true" : "false") << "}";
  }
  out << "],\n\"panels\":[";
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const Timeline& t = panels[p];
    const PanelBox& box = L.panels[p];
    out << (p ? ",\n" : "") << "{\"tag\":" << js_string(panels.size() > 1 ? std::string(1, static_cast<char>('A' + p % 26)) : "")
        << ",\"title\":" << js_string(t.title) << ",\"virtual\":" << t.virtual_stages << ",\"sectionY\":" << fixed(box.section_y - top, 1) << ",\"axisY\":" << fixed(box.axis_y - top, 1)
        << ",\"lanesTop\":" << fixed(box.lanes_top - top, 1) << ",\"memY\":" << fixed(box.memory_y - top, 1) << ",\"memH\":"
        << fixed(box.memory_height, 1) << ",\"makespan\":" << ns(t.makespan_ps) << ",\"capacity\":" << t.capacity_bytes
        << ",\"memTop\":" << memory_top(panels) << ",\"memTicks\":[";
    const auto mticks = memory_ticks(memory_top(panels));
    for (std::size_t i = 0; i < mticks.size(); ++i) out << (i ? "," : "") << "[" << mticks[i].first << "," << js_string(mticks[i].second) << "]";
    out << "],\n\"names\":[";
    for (std::size_t i = 0; i < t.names.size(); ++i) out << (i ? "," : "") << js_string(t.names[i]);
    out << "],\n\"lanes\":[";
    for (std::size_t i = 0; i < t.lanes.size(); ++i) {
      const Lane& lane = t.lanes[i];
      out << (i ? ",\n" : "") << "{\"label\":" << js_string(lane.label) << ",\"rank\":" << lane.rank << ",\"stage\":" << lane.stage
          << ",\"bubble\":" << ns(lane.bubble_ps) << ",\"peak\":" << lane.peak_bytes << ",\"peakT\":" << ns(lane.peak_time_ps)
          << ",\"color\":" << js_string(lane_color(i, t.lanes.size())) << ",\"mem\":[";
      for (std::size_t m = 0; m < lane.memory.size(); ++m) {
        out << (m ? "," : "") << ns(lane.memory[m].time_ps) << "," << lane.memory[m].bytes;
      }
      out << "],\"rows\":[";
      for (std::size_t r = 0; r < lane.rows.size(); ++r) {
        const Row& row = lane.rows[r];
        const RowBox& rb = box.lanes[i].rows[r];
        out << (r ? ",\n" : "") << "{\"label\":" << js_string(row.label) << ",\"y\":" << fixed(rb.y - top, 1) << ",\"h\":" << fixed(rb.height, 0)
            << ",\"s\":";
        slices_json(row.slices, out);
        out << ",\"g\":";
        slices_json(row.gaps, out);
        out << "}";
      }
      out << "]}";
    }
    out << "]}";
  }
  out << "]}";
}

// The page's script: draws DATA into the #chart SVG for the current view [t0, t1] and handles
// pan, zoom and hover. Blocks narrower than a pixel of the view merge as in report::merge.
constexpr const char* kScript = R"JS(
(function () {
  "use strict";
  var D = DATA, NS = "http://www.w3.org/2000/svg";
  var svg = document.getElementById("chart"), tip = document.getElementById("tip"), view = document.getElementById("view");
  var t0 = 0, t1 = D.axis, blocks = [];
  var STRIDE = 10;
  function el(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function x(t) { return D.plotX + (t - t0) / (t1 - t0) * D.plotW; }
  function human(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (ns / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (ns / 1e3).toPrecision(4) + " \u00b5s";
    return Math.round(ns) + " ns";
  }
  function niceStep(raw) {
    var m = Math.pow(10, Math.floor(Math.log10(raw)));
    var c = [1, 2, 5, 10];
    for (var i = 0; i < c.length; i++) if (c[i] * m >= raw * (1 - 1e-9)) return c[i] * m;
    return 10 * m;
  }
  function ticks(a, b, target) {
    var step = Math.max(1e-3, niceStep((b - a) / target)), unit = 1, name = "ns";
    if (step >= 1e9) { unit = 1e9; name = "s"; } else if (step >= 1e6) { unit = 1e6; name = "ms"; } else if (step >= 1e3) { unit = 1e3; name = "\u00b5s"; }
    var dec = 0;
    while (dec < 3 && Math.abs(step / unit * Math.pow(10, dec) - Math.round(step / unit * Math.pow(10, dec))) > 1e-6) dec++;
    var out = [];
    for (var i = Math.ceil(a / step); i * step <= b + 1e-6; i++) out.push([i * step, (i * step / unit).toFixed(dec) + " " + name]);
    return out;
  }
  // Blocks of one row in the view, merged below a pixel: same kind and micro-batch closer than a
  // pixel join; runs of sub-pixel blocks join under the kind that covers the most time.
  function visible(arr, res) {
    var out = [], n = arr.length / STRIDE, lo = 0, hi = n;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid * STRIDE + 1] < t0) lo = mid + 1; else hi = mid; }
    for (var i = Math.max(0, lo - 1); i < n; i++) {
      var o = i * STRIDE, s = arr[o], e = arr[o + 1];
      if (s > t1) break;
      if (e < t0) continue;
      var b = { s: s, e: e, k: arr[o + 2], mb: arr[o + 3], ch: arr[o + 4], nm: arr[o + 5], n: arr[o + 6], busy: arr[o + 7], l0: arr[o + 8], l1: arr[o + 9] };
      var p = out.length ? out[out.length - 1] : null;
      if (p && b.s - p.e < res && ((p.k === b.k && p.mb === b.mb) || (p.e - p.s < res && b.e - b.s < res))) {
        if (p.k !== b.k && b.busy > p.busy) p.k = b.k;
        if (p.mb !== b.mb) p.mb = -1;
        if (p.ch !== b.ch) p.ch = p.ch < 0 ? b.ch : (b.ch < 0 ? p.ch : -1);
        if (p.nm !== b.nm) p.nm = -1;
        if (b.l0 >= 0) { p.l0 = p.l0 < 0 ? b.l0 : Math.min(p.l0, b.l0); p.l1 = Math.max(p.l1, b.l1); }
        p.e = Math.max(p.e, b.e); p.busy += b.busy; p.n += b.n;
      } else {
        out.push(b);
      }
    }
    return out;
  }
  function defs() {
    var d = el("defs", {}, svg);
    [["hatch-bubble", "#fbe4e4", "#e15759"], ["hatch-blocked", "#ececec", "#9a9a9a"]].forEach(function (h) {
      var p = el("pattern", { id: h[0], width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, d);
      el("rect", { width: 6, height: 6, fill: h[1] }, p);
      el("rect", { width: 2, height: 6, fill: h[2] }, p);
    });
    var c = el("clipPath", { id: "plot" }, d);
    el("rect", { x: D.plotX, y: 0, width: D.plotW, height: D.height }, c);
  }
  function fill(k) {
    var name = D.kinds[k].name;
    if (name === "bubble") return "url(#hatch-bubble)";
    if (name === "blocked") return "url(#hatch-blocked)";
    return D.kinds[k].color;
  }
  function drawBlocks(g, arr, h, panel, lane, row, labels) {
    var res = (t1 - t0) / D.plotW;
    visible(arr, res).forEach(function (b) {
      var x0 = Math.max(D.plotX - 1, x(b.s)), x1 = Math.min(D.plotX + D.plotW + 1, x(b.e));
      // Work merged below a pixel is as high as the share of its span its tasks run (one task
      // fills the row; report::block_height), gaps fill the row.
      var bh = h;
      if (!D.kinds[b.k].gap && b.e > b.s && b.busy < b.e - b.s) {
        bh = h * b.busy / (b.e - b.s);
        bh = bh > h - 0.05 ? h : Math.max(1, bh);
      }
      var r = el("rect", { x: x0.toFixed(1), y: (h - bh).toFixed(1), width: Math.max(0.4, x1 - x0).toFixed(1), height: bh.toFixed(1), fill: fill(b.k) }, g);
      if (b.ch > 0 && b.ch % 2 === 1) r.setAttribute("fill-opacity", "0.55");
      b.panel = panel; b.lane = lane; b.row = row;
      r.setAttribute("data-b", blocks.length);
      blocks.push(b);
      var font = Math.min(10, h - 5), text = String(b.mb + 1);
      if (labels && b.mb >= 0 && !D.kinds[b.k].gap && x1 - x0 >= 0.62 * font * text.length + 4) {
        var inside = bh >= font + 2;  // on the block, else in dark type over the row
        el("text", { x: ((x0 + x1) / 2).toFixed(1), y: ((inside ? h - bh / 2 : h / 2) + font * 0.36).toFixed(1), "font-size": font, fill: inside ? "#fff" : "#333", "text-anchor": "middle", "pointer-events": "none" }, g, text);
      }
    });
  }
  function render() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    blocks = [];
    defs();
    el("rect", { width: "100%", height: "100%", fill: "#fff" }, svg);
    var tk = ticks(t0, t1, 12);
    D.panels.forEach(function (P, pi) {
      var pg = el("g", { "class": "panel", "data-panel": P.tag }, svg);
      if (P.tag) el("text", { x: 8, y: P.sectionY, "font-size": 12.5, "font-weight": "bold" }, pg, P.tag + " \u00b7 " + P.title);
      var ax = el("g", { "class": "axis" }, pg);
      var bottom = P.memY + P.memH;
      tk.forEach(function (t) {
        var xx = x(t[0]).toFixed(1);
        el("line", { x1: xx, x2: xx, y1: P.lanesTop - 3, y2: bottom, stroke: "#e3e3e3" }, ax);
        el("text", { x: xx, y: P.axisY, "font-size": 10, fill: "#555", "text-anchor": "middle" }, ax, t[1]);
        el("text", { x: xx, y: bottom + 13, "font-size": 10, fill: "#555", "text-anchor": "middle" }, ax, t[1]);
      });
      var endX = Math.min(D.plotX + D.plotW, x(P.makespan));
      P.lanes.forEach(function (L, li) {
        var lg = el("g", { "class": "lane", "data-rank": L.rank, "data-stage": L.stage }, pg);
        var r0 = L.rows[0];
        var font = Math.min(D.labelFont, (D.plotX - 14) / (0.6 * L.label.length));
        el("text", { x: 8, y: (r0.y + r0.h / 2 + font * 0.36).toFixed(1), "font-size": font.toFixed(1), "font-weight": "bold" }, lg, L.label);
        var share = P.makespan > 0 ? 100 * L.bubble / P.makespan : 0;
        el("text", { x: D.plotX + D.plotW + 6, y: (r0.y + Math.min(r0.h, 18) * 0.75).toFixed(1), "font-size": Math.min(9.5, r0.h), fill: "#444" }, lg,
           "bubble " + share.toFixed(1) + "% \u00b7 " + (L.peak / 1073741824).toFixed(1) + " GiB");
        L.rows.forEach(function (R, ri) {
          if (endX > D.plotX) el("rect", { x: D.plotX, y: R.y, width: (endX - D.plotX).toFixed(1), height: R.h, fill: ri === 0 ? "#f2f2f2" : "#fafafa" }, lg);
          if (ri > 0 && D.rowFont > 0) el("text", { x: D.plotX - 4, y: R.y + R.h - 1, "font-size": D.rowFont, fill: "#777", "text-anchor": "end" }, lg, R.label);
          var g = el("g", { "class": "row", "data-stream": R.label, transform: "translate(0," + R.y + ")", "clip-path": "url(#plot)" }, lg);
          drawBlocks(g, R.g, R.h, pi, li, ri, false);
          drawBlocks(g, R.s, R.h, pi, li, ri, ri === 0 && R.h >= 12);
        });
      });
      // Memory strip.
      var mg = el("g", { "class": "memory" }, pg);
      function y(b) { return P.memY + P.memH - b / P.memTop * P.memH; }
      el("rect", { x: D.plotX, y: P.memY, width: D.plotW, height: P.memH, fill: "#fafafa" }, mg);
      el("text", { x: 8, y: P.memY + 12, "font-weight": "bold" }, mg, "memory per GPU");
      P.memTicks.forEach(function (m) {
        el("line", { x1: D.plotX, x2: D.plotX + D.plotW, y1: y(m[0]).toFixed(1), y2: y(m[0]).toFixed(1), stroke: "#e3e3e3" }, mg);
        el("text", { x: D.plotX - 4, y: (y(m[0]) + 3.5).toFixed(1), "font-size": 10, fill: "#555", "text-anchor": "end" }, mg, m[1]);
      });
      if (P.capacity <= P.memTop) {
        el("line", { x1: D.plotX, x2: D.plotX + D.plotW, y1: y(P.capacity).toFixed(1), y2: y(P.capacity).toFixed(1), stroke: "#d62728", "stroke-dasharray": "5 3" }, mg);
        el("text", { x: D.plotX + D.plotW - 4, y: (y(P.capacity) - 3).toFixed(1), "font-size": 9.5, fill: "#d62728", "text-anchor": "end" }, mg,
           "capacity " + (P.capacity / 1073741824).toFixed(1) + " GiB");
      } else {
        el("text", { x: D.plotX + D.plotW - 4, y: P.memY - 3, "font-size": 9.5, fill: "#d62728", "text-anchor": "end" }, mg,
           "capacity " + (P.capacity / 1073741824).toFixed(1) + " GiB \u2191 above this scale");
      }
      if (P.lanes.length <= 6) {
        P.lanes.forEach(function (L, li) {
          var ky = P.memY + 8 + 11 * li;
          el("line", { x1: D.plotX + D.plotW + 6, x2: D.plotX + D.plotW + 16, y1: ky, y2: ky, stroke: L.color, "stroke-width": 2 }, mg);
          el("text", { x: D.plotX + D.plotW + 19, y: ky + 3, "font-size": 9.5, fill: "#444" }, mg, L.label.split(" \u00b7 ")[0]);
        });
      }
      var clip = el("g", { "clip-path": "url(#plot)" }, mg);
      P.lanes.forEach(function (L) {
        var pts = [], m = L.mem, prev = m.length ? m[1] : 0;
        for (var i = 0; i < m.length; i += 2) {
          if (m[i] > t1) break;
          var nextT = i + 2 < m.length ? m[i + 2] : P.makespan;
          if (nextT >= t0) { pts.push(x(m[i]).toFixed(1) + "," + y(prev).toFixed(1)); pts.push(x(m[i]).toFixed(1) + "," + y(m[i + 1]).toFixed(1)); }
          prev = m[i + 1];
        }
        pts.push(x(Math.min(P.makespan, t1)).toFixed(1) + "," + y(prev).toFixed(1));
        el("polyline", { fill: "none", stroke: L.color, "stroke-width": 1.3, points: pts.join(" ") }, clip);
        var c = el("circle", { cx: x(L.peakT).toFixed(1), cy: y(L.peak).toFixed(1), r: 3, fill: L.color }, clip);
        c.setAttribute("data-peak", L.label + ": peak " + (L.peak / 1073741824).toFixed(2) + " GiB at " + human(L.peakT));
      });
    });
    view.textContent = "view " + human(t0) + " \u2013 " + human(t1) + " of " + human(D.axis);
  }
  function describe(b) {
    var P = D.panels[b.panel], L = P.lanes[b.lane], R = L.rows[b.row], K = D.kinds[b.k];
    var lines = [(P.tag ? P.tag + " \u00b7 " : "") + L.label + " \u00b7 " + R.label, K.label + (b.nm >= 0 ? ": " + P.names[b.nm] : "")];
    if (b.mb >= 0) lines.push("micro-batch " + (b.mb + 1));
    if (b.ch >= 0 && P.virtual > 1) lines.push("model chunk " + (b.ch + 1) + " of " + P.virtual);
    if (b.l0 >= 0) lines.push(b.l0 === b.l1 ? "layer " + b.l0 : "layers " + b.l0 + "\u2013" + b.l1);
    lines.push(human(b.s) + " \u2192 " + human(b.e) + " (" + human(b.e - b.s) + ")");
    if (b.n > 1) lines.push(b.n + " tasks, busy " + human(b.busy) + " (" + (100 * b.busy / Math.max(1, b.e - b.s)).toFixed(0) + "% of the span)");
    return lines.join("\n");
  }
  svg.addEventListener("mousemove", function (ev) {
    if (drag) return;
    var t = ev.target, text = null;
    if (t.hasAttribute && t.hasAttribute("data-b")) text = describe(blocks[+t.getAttribute("data-b")]);
    else if (t.hasAttribute && t.hasAttribute("data-peak")) text = t.getAttribute("data-peak");
    if (!text) { tip.style.display = "none"; return; }
    tip.textContent = text;
    tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + "px";
    tip.style.top = (ev.clientY + 14) + "px";
  });
  svg.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  function clampView(a, b) {
    var span = Math.max(Math.min(b - a, D.axis), Math.min(D.axis, 1000));
    a = Math.max(0, Math.min(a, D.axis - span));
    t0 = a; t1 = a + span;
  }
  function zoom(f, at) {
    clampView(at - (at - t0) * f, at + (t1 - at) * f);
    render();
  }
  function timeAt(clientX) {
    var r = svg.getBoundingClientRect();
    var px = (clientX - r.left) * (D.width / r.width);
    return t0 + (Math.max(D.plotX, Math.min(D.plotX + D.plotW, px)) - D.plotX) / D.plotW * (t1 - t0);
  }
  svg.addEventListener("wheel", function (ev) { ev.preventDefault(); zoom(ev.deltaY < 0 ? 0.8 : 1.25, timeAt(ev.clientX)); }, { passive: false });
  var drag = null;
  svg.addEventListener("mousedown", function (ev) { drag = { x: ev.clientX, t0: t0, t1: t1 }; svg.style.cursor = "grabbing"; tip.style.display = "none"; });
  window.addEventListener("mouseup", function () { drag = null; svg.style.cursor = "grab"; });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    var dt = (ev.clientX - drag.x) * (D.width / r.width) / D.plotW * (drag.t1 - drag.t0);
    clampView(drag.t0 - dt, drag.t1 - dt);
    render();
  });
  document.getElementById("zin").onclick = function () { zoom(0.5, (t0 + t1) / 2); };
  document.getElementById("zout").onclick = function () { zoom(2, (t0 + t1) / 2); };
  document.getElementById("reset").onclick = function () { t0 = 0; t1 = D.axis; render(); };
  svg.addEventListener("dblclick", function () { t0 = 0; t1 = D.axis; render(); });
  // A view to open with: page.html#t=START-END (nanoseconds).
  var m = /#t=([0-9.]+)-([0-9.]+)/.exec(window.location.hash);
  if (m && +m[2] > +m[1]) clampView(+m[1], +m[2]);
  render();
})();
)JS";

}  // namespace

void write_html(const std::vector<Timeline>& panels_in, std::ostream& out) {
  std::int64_t axis = 1;
  for (const Timeline& t : panels_in) axis = std::max(axis, t.makespan_ps);
  const PictureLayout probe;
  // Embedded resolution: 1/64 of a pixel of the full view, so a 64x zoom still shows every block.
  const auto resolution = static_cast<std::int64_t>(std::ceil(static_cast<double>(axis) / (probe.plot_width * 64)));
  std::vector<Timeline> panels;
  for (const Timeline& t : panels_in) panels.push_back(merge(t, resolution, kMaxHtmlBlocks / panels_in.size()));
  const PictureLayout L = layout_picture(panels);
  const double top = panels.size() > 1 ? L.panels[0].section_y - 16 : L.panels[0].axis_y - 14;
  const double height = L.height - top;

  std::string title;
  for (std::size_t p = 0; p < panels.size(); ++p) title += (p ? " vs " : "") + panels[p].title;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << xml_escape(title) << "</title>\n";
  out << "<style>\n"
         "body{font-family:\"DejaVu Sans\",Helvetica,Arial,sans-serif;margin:10px;color:#222;background:#fff}\n"
         "h1{font-size:16px;margin:6px 0 2px}\n"
         ".sub{font-size:12px;color:#333;margin:1px 0}\n"
         "#legend{margin:8px 0 2px;font-size:12px}\n"
         "#legend .item{display:inline-block;margin:2px 14px 2px 0;white-space:nowrap}\n"
         "#legend .sw{display:inline-block;width:14px;height:12px;vertical-align:-2px;margin-right:5px;border:0.5px solid #888}\n"
         ".note{font-size:11px;color:#555;margin:3px 0}\n"
         "#controls{margin:6px 0;font-size:12px}\n"
         "#controls button{font-size:12px;margin-right:4px}\n"
         "#chart{display:block;cursor:grab;user-select:none;max-width:100%;height:auto}\n"
         "#tip{position:fixed;display:none;pointer-events:none;background:#fffff8;border:1px solid #999;padding:4px 7px;"
         "font-size:12px;white-space:pre;box-shadow:2px 2px 6px rgba(0,0,0,.2)}\n"
         "</style>\n</head>\n<body>\n";
  for (std::size_t p = 0; p < panels.size(); ++p) {
    out << "<h1>" << xml_escape((panels.size() > 1 ? std::string(1, static_cast<char>('A' + p % 26)) + " \xc2\xb7 " : "") + panels[p].title)
        << "</h1>\n";
    for (const std::string& line : L.panels[p].subtitle_lines) out << "<div class=\"sub\">" << xml_escape(line) << "</div>\n";
  }
  out << "<div id=\"legend\">";
  for (const LegendItem& item : L.legend) {
    std::string background = slice_kind_color(item.kind);
    if (item.kind == SliceKind::kBubble) background = "repeating-linear-gradient(45deg,#e15759 0 2px,#fbe4e4 2px 6px)";
    if (item.kind == SliceKind::kBlocked) background = "repeating-linear-gradient(45deg,#9a9a9a 0 2px,#ececec 2px 6px)";
    out << "<span class=\"item\"><span class=\"sw\" style=\"background:" << background << "\"></span>"
        << xml_escape(slice_kind_label(item.kind)) << "</span>";
  }
  // The note describes the first view, the whole iteration at one pixel per block.
  out << "</div>\n<div class=\"note\">" << xml_escape(legend_note(whole_view(panels_in, kMaxHtmlBlocks))) << "</div>\n";
  out << "<div id=\"controls\"><button id=\"zin\">zoom in</button><button id=\"zout\">zoom out</button><button id=\"reset\">"
         "whole iteration</button> <span class=\"note\">drag to pan, wheel to zoom, double-click to reset, hover for details"
         "</span> <span id=\"view\" class=\"note\"></span></div>\n";
  out << "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fixed(L.width, 0) << "\" height=\"" << fixed(height, 0)
      << "\" viewBox=\"0 0 " << fixed(L.width, 0) << " " << fixed(height, 0)
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\"></svg>\n<div id=\"tip\"></div>\n";
  out << "<script>\nvar DATA = ";
  data_json(panels, L, top, out);
  out << ";\n" << kScript << "</script>\n</body>\n</html>\n";
}

}  // namespace trainsim::report
