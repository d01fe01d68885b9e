#!/usr/bin/env bash
# tests/report/html_in_chromium.sh TRAINSIM [PNG]
#   Opens the HTML picture of the 1F1B teaching scenario in headless Chromium (Debian's
#   `chromium` package) and checks that its inline script drew what a reader needs: the DOM
#   after the script ran must hold one lane per pipeline stage (4), a memory line per lane, the
#   legend and a labelled time axis. Also writes a screenshot to PNG (default: a scratch file) so
#   a person can look at it. Where Node.js can speak the DevTools protocol (node >= 20 with
#   --experimental-websocket), also hovers a block, zooms and pans (html_interaction.mjs).
#   Exits 77 (ctest: skipped) when chromium is not installed.
set -euo pipefail
trainsim=$1
png=${2:-}
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v chromium >/dev/null || { echo "chromium is not installed (apt-get install chromium): skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$trainsim" run "$repo/scenarios/teaching/03b-pipeline-1f1b.json" --html "$work/page.html" >/dev/null
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update --disable-sync
       --no-first-run --hide-scrollbars --window-size=1400,900)
timeout 120 chromium "${flags[@]}" --user-data-dir="$work/profile-dom" --dump-dom "file://$work/page.html" >"$work/dom.html" 2>/dev/null
timeout 120 chromium "${flags[@]}" --user-data-dir="$work/profile-png" --screenshot="$work/page.png" "file://$work/page.html" \
  >/dev/null 2>&1
# Zoomed in on the first 2 ms (the #t= view the page accepts): finer ticks, still 4 lanes.
timeout 120 chromium "${flags[@]}" --user-data-dir="$work/profile-zoom" --dump-dom "file://$work/page.html#t=0-2000000" \
  >"$work/zoom.html" 2>/dev/null
zoomed_ticks=$(grep -o ' µs</text>' "$work/zoom.html" | wc -l)
zoomed_lanes=$(grep -o '<g class="lane"' "$work/zoom.html" | wc -l)
count() { grep -o "$1" "$work/dom.html" | wc -l; }
lanes=$(count '<g class="lane"')
memory=$(count '<polyline')
legend=$(count '<span class="item">')
ticks=$(count ' ms</text>')
blocks=$(count 'data-b="')
echo "chromium drew: $lanes lanes, $memory memory lines, $legend legend entries, $ticks axis labels, $blocks blocks;" \
  "zoomed to 2 ms: $zoomed_lanes lanes, $zoomed_ticks axis labels in µs"
[ -s "$work/page.png" ] || { echo "FAIL: no screenshot"; exit 1; }
if [ -n "$png" ]; then cp "$work/page.png" "$png"; echo "screenshot: $png"; fi
if command -v node >/dev/null && node --experimental-websocket -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null; then
  node --experimental-websocket "$(dirname "$0")/html_interaction.mjs" "$work/page.html" "$work/profile-interaction" 2>/dev/null
else
  echo "hover/zoom/pan check skipped: no node with --experimental-websocket"
fi
[ "$lanes" -eq 4 ] && [ "$memory" -eq 4 ] && [ "$legend" -ge 5 ] && [ "$ticks" -ge 10 ] && [ "$blocks" -ge 100 ] &&
  [ "$zoomed_lanes" -eq 4 ] && [ "$zoomed_ticks" -ge 10 ] ||
  { echo "FAIL: the page's script did not draw the lanes, legend and axis"; exit 1; }
