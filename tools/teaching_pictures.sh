#!/usr/bin/env bash
# tools/teaching_pictures.sh [--check] [TRAINSIM]
#   Regenerates the pictures in docs/pictures/ and the numbers in docs/teaching.md from the
#   scenarios in scenarios/teaching/. docs/teaching.md carries its own recipe: each block
#       <!-- trainsim: ARGS -->
#       ...
#       <!-- /trainsim -->
#   is replaced by the output of `trainsim ARGS` (run from the repository root) in a text block;
#   ARGS write the pictures (--svg/--html docs/pictures/...). The simulator's wall-clock line
#   (the only output that varies between runs) is left out.
#   --check: regenerate into a scratch folder and compare byte for byte with the committed files;
#   exit 1 and show the differences when they differ.
#   TRAINSIM: the binary (default: build/cli/trainsim).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
trainsim=$(realpath "${1:-$repo/build/cli/trainsim}")
[ -x "$trainsim" ] || { echo "teaching_pictures: no trainsim binary at $trainsim (build first)" >&2; exit 2; }

# Where the outputs go: the repository itself, or a scratch copy of docs/ next to the scenarios.
if ((check)); then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/docs/pictures"
  ln -s "$repo/scenarios" "$work/scenarios"
else
  work=$repo
  rm -f "$repo"/docs/pictures/*.svg "$repo"/docs/pictures/*.html
  mkdir -p "$repo/docs/pictures"
fi

source_md="$repo/docs/teaching.md"
out_md="$work/docs/teaching.md.new"
(
  cd "$work"
  skipping=0
  while IFS= read -r line || [ -n "$line" ]; do
    if ((skipping)); then
      if [[ "$line" == "<!-- /trainsim -->" ]]; then
        skipping=0
        printf '%s\n' "$line"
      fi
      continue
    fi
    printf '%s\n' "$line"
    if [[ "$line" =~ ^\<!--\ trainsim:\ (.*)\ --\>$ ]]; then
      args=${BASH_REMATCH[1]}
      printf '```text\n'
      # shellcheck disable=SC2086  # ARGS are words, as typed in a shell
      "$trainsim" $args | grep -v '^  simulated [0-9]* rank(s)' | sed -e 's/[[:space:]]*$//'
      printf '```\n'
      skipping=1
    fi
  done <"$source_md"
) >"$out_md"
mv "$out_md" "$work/docs/teaching.md"

if ((check)); then
  status=0
  diff -u "$repo/docs/teaching.md" "$work/docs/teaching.md" || status=1
  diff -r "$repo/docs/pictures" "$work/docs/pictures" >/dev/null || {
    echo "teaching_pictures: docs/pictures/ differs from what the scenarios produce:" >&2
    diff -rq "$repo/docs/pictures" "$work/docs/pictures" >&2 || true
    status=1
  }
  if ((status)); then
    echo "teaching_pictures: run tools/teaching_pictures.sh and commit the result" >&2
  else
    echo "teaching_pictures: docs/teaching.md and $(ls "$work/docs/pictures" | wc -l) pictures match byte for byte"
  fi
  exit $status
fi
echo "teaching_pictures: wrote docs/teaching.md and $(ls "$repo/docs/pictures" | wc -l) pictures"
