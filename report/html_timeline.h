#pragma once
// The timeline picture as one self-contained HTML page: the same lanes, legend, axis and memory
// strip as the SVG, drawn by an inline script (no network access) that pans (drag), zooms (wheel,
// buttons) and shows a block's details on hover. The page embeds the timelines summarised at a
// fine resolution (merge()), so zooming in reveals detail down to it; the script merges
// sub-pixel blocks of the current view. Deterministic bytes.

#include <ostream>
#include <vector>

#include "report/timeline.h"

namespace trainsim::report {

// REQUIRES: panels is not empty. With several panels, each is labelled "A", "B", ...
void write_html(const std::vector<Timeline>& panels, std::ostream& out);

// Upper bound on the blocks a page embeds; beyond it the embedded resolution coarsens.
inline constexpr std::size_t kMaxHtmlBlocks = 100000;

}  // namespace trainsim::report
