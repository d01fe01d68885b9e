#!/usr/bin/env bash
# tests/sanitizer_skip_check.sh BUILD_DIR: every prefix in tests/sanitizer_skip.txt names exactly
# one test of BUILD_DIR, so that a renamed test or a short prefix cannot leave more tests out of
# the sanitizer build than the list says.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: tests/sanitizer_skip_check.sh BUILD_DIR}
names=$(ctest --test-dir "$build" -N | sed -n 's/^ *Test *#[0-9]*: //p')
status=0
while IFS= read -r prefix; do
  case "$prefix" in ''|'#'*) continue ;; esac
  n=$(printf '%s\n' "$names" | awk -v p="$prefix" 'index($0, p) == 1' | wc -l)
  if [ "$n" -ne 1 ]; then
    echo "tests/sanitizer_skip.txt: \"$prefix\" names $n tests, expected exactly 1" >&2
    status=1
  fi
done < tests/sanitizer_skip.txt
exit $status
