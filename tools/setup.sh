#!/usr/bin/env bash
# tools/setup.sh demo | test | fuzz | sanitize
#   demo: install missing Debian packages, build, and run the default scenario.
#   test: install missing Debian packages, build, and run every test.
#   fuzz: install missing Debian packages (with clang and libFuzzer), build the fuzz targets
#         with clang, and run each for TRAINSIM_FUZZ_SECONDS (default 60) seconds (fuzz/README.md).
#   sanitize: as fuzz, but the clang build (AddressSanitizer + UndefinedBehaviorSanitizer, any
#         finding fatal) also builds the tests and runs every test before fuzzing: one
#         instrumented build serves both (what CI runs).
# Environment: TRAINSIM_BUILD_DIR (default build, build-fuzz for fuzz), TRAINSIM_WERROR=ON
# (warnings are errors; g++ builds only), TRAINSIM_SANITIZE=ON (AddressSanitizer +
# UndefinedBehaviorSanitizer at -O1; use its own TRAINSIM_BUILD_DIR, e.g. build-asan).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
  demo|test|fuzz|sanitize) ;;
  *) echo "usage: tools/setup.sh demo|test|fuzz|sanitize" >&2; exit 2 ;;
esac

packages=(g++ cmake ninja-build libboost-graph-dev libeigen3-dev nlohmann-json3-dev libcli11-dev doctest-dev zlib1g-dev libxml2-dev)
if [ "$mode" = fuzz ] || [ "$mode" = sanitize ]; then packages+=(clang-14 libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$mode" = fuzz ] || [ "$mode" = sanitize ]; then
  build=${TRAINSIM_BUILD_DIR:-build-fuzz}
  tests=OFF
  if [ "$mode" = sanitize ]; then tests=ON; fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-14 \
    -DTRAINSIM_FUZZ=ON -DTRAINSIM_BUILD_TESTS=$tests -DTRAINSIM_BUILD_BENCH=OFF -DTRAINSIM_BUILD_CUDA=OFF >/dev/null
  if [ "$mode" = sanitize ]; then
    cmake --build "$build" -j "$(nproc)" --target all fuzz_targets
    # tests/sanitizer_skip.txt names the tests left to the ordinary build, and why.
    skip=$(tests/sanitizer_skip.sh regex)
    ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -E "$skip"
  else
    cmake --build "$build" -j "$(nproc)" --target fuzz_targets
  fi
  fuzz/run.sh "$build" "${TRAINSIM_FUZZ_SECONDS:-60}"
  exit 0
fi

build=${TRAINSIM_BUILD_DIR:-build}
# The sanitizer build checks our code under test: it skips the benchmarks and the CUDA harness
# (the ordinary build compiles both).
extra=()
if [ "${TRAINSIM_SANITIZE:-OFF}" = ON ]; then extra=(-DTRAINSIM_BUILD_BENCH=OFF -DTRAINSIM_BUILD_CUDA=OFF); fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTRAINSIM_WERROR="${TRAINSIM_WERROR:-OFF}" -DTRAINSIM_SANITIZE="${TRAINSIM_SANITIZE:-OFF}" "${extra[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"

if [ "$mode" = demo ]; then
  "$build/cli/trainsim" run scenarios/gpt3-175b-1024xa100.json
else
  ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
fi
