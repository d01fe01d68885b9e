#!/usr/bin/env bash
# fuzz/run.sh BUILD_DIR SECONDS [TARGET...]: runs each libFuzzer target of BUILD_DIR (configured
# with -DTRAINSIM_FUZZ=ON and built: `ninja -C BUILD_DIR fuzz_targets`) for SECONDS, two at a
# time (TRAINSIM_FUZZ_JOBS), starting from its seeds plus the corpus kept in
# BUILD_DIR/fuzz/corpus/TARGET from earlier runs. Prints per target the executions, coverage
# (edges) and corpus size; exits 1 if any target found a crash, a leak, a timeout (10 s per
# input) or an out-of-memory (2 GiB), leaving the input in BUILD_DIR/fuzz/findings/.
# A finding becomes a regression: copy it to fuzz/regressions/TARGET/ (and, where the CLI can
# reach it, a case in tests/bad_inputs/), fix the bug, and rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
jobs=${TRAINSIM_FUZZ_JOBS:-2}
list="$build/fuzz/targets.txt"
[ -f "$list" ] || { echo "fuzz/run.sh: $list missing; configure $build with -DTRAINSIM_FUZZ=ON" >&2; exit 2; }
mkdir -p "$build/fuzz/findings" "$build/fuzz/logs"

run_one() {  # name seed-folder...
  local name=$1; shift
  local corpus="$build/fuzz/corpus/$name" seeds=()
  mkdir -p "$corpus"
  for d in "$@"; do [ -d "$d" ] && seeds+=("$d"); done
  local status=0 dict=fuzz/json.dict
  [ -f "fuzz/$name.dict" ] && dict="fuzz/$name.dict"  # a target's own format (e.g. logs)
  "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -dict="$dict" -print_final_stats=1 -artifact_prefix="$build/fuzz/findings/$name-" \
    "$corpus" "${seeds[@]}" >"$build/fuzz/logs/$name.log" 2>&1 || status=$?
  local execs cov corp
  execs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz/logs/$name.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -aoE 'cov: [0-9]+' "$build/fuzz/logs/$name.log" | tail -1 | grep -o '[0-9]*' || echo "?")
  corp=$(ls "$corpus" | wc -l)
  if [ "$status" -eq 0 ]; then
    printf '%-22s ok       %10s execs  %6s edges  %5s corpus files\n' "$name" "$execs" "$cov" "$corp"
  else
    printf '%-22s FINDING  (exit %s) see %s\n' "$name" "$status" "$build/fuzz/logs/$name.log"
    grep -E 'fuzz target|ERROR:|runtime error|Test unit written' "$build/fuzz/logs/$name.log" | head -5 | sed 's/^/    /'
    return 1
  fi
}
export -f run_one
export build seconds

selected=("$@")
lines=()
while read -r name rest; do
  if [ ${#selected[@]} -eq 0 ] || printf '%s\n' "${selected[@]}" | grep -qx "$name"; then lines+=("$name $rest"); fi
done <"$list"
[ ${#lines[@]} -gt 0 ] || { echo "fuzz/run.sh: no such target: $*" >&2; exit 2; }
echo "fuzzing ${#lines[@]} targets for ${seconds} s each, $jobs at a time"
if ! printf '%s\n' "${lines[@]}" | xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _; then
  echo "fuzz/run.sh: findings above (inputs in $build/fuzz/findings/)" >&2
  exit 1
fi
