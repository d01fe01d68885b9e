#pragma once
// The timeline picture as a self-contained SVG: a lane per recorded rank with a row per stream,
// blocks coloured by kind (micro-batch numbers where they fit), pipeline bubbles and waits
// hatched, a time axis, a legend, a title with the scenario's key numbers, and a memory strip
// per panel with the capacity line. Several timelines (compare) stack on one time axis. The
// timelines are summarised at one pixel of resolution (merge()); deterministic bytes.

#include <ostream>
#include <vector>

#include "report/timeline.h"

namespace trainsim::report {

// REQUIRES: panels is not empty. With several panels, each is labelled "A", "B", ...
void write_svg(const std::vector<Timeline>& panels, std::ostream& out);

// Upper bound on the blocks one picture draws; beyond it the resolution coarsens.
inline constexpr std::size_t kMaxSvgBlocks = 30000;

}  // namespace trainsim::report
