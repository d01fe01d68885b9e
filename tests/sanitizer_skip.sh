#!/usr/bin/env bash
# tests/sanitizer_skip.sh regex | check BUILD_DIR: the tests tests/sanitizer_skip.txt leaves out of
# the sanitizer build, read in one place.
#   regex: prints the ctest -E pattern tools/setup.sh sanitize runs with (each line a prefix,
#          matched literally at the start of a test name).
#   check: every line's pattern names exactly one test of BUILD_DIR, so that a renamed test or a
#          short prefix cannot leave more tests out than the list says.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: tests/sanitizer_skip.sh regex | check BUILD_DIR"
prefixes() { grep -v -e '^#' -e '^[[:space:]]*$' tests/sanitizer_skip.txt; }
to_regex() { sed -e 's/[][\\.*^$()+?{}|]/\\&/g' -e 's/^/^/'; }
case "${1:-}" in
  regex) prefixes | to_regex | paste -sd '|' ;;
  check)
    build=${2:?$usage}
    status=0
    while IFS= read -r prefix; do
      n=$(ctest --test-dir "$build" -N -R "$(printf '%s\n' "$prefix" | to_regex)" | grep -c '^ *Test *#' || true)
      if [ "$n" -ne 1 ]; then
        echo "tests/sanitizer_skip.txt: \"$prefix\" names $n tests, expected exactly 1" >&2
        status=1
      fi
    done < <(prefixes)
    exit $status ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
