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
    # Seventeen tests are left to the ordinary build. Every example scenario run whole (the largest,
    # Qwen3-235B's EP all-to-alls, takes 4 s optimized and over 40 s here; each feature an example
    # combines has its own small lowering test in this build). Fourteen that check accuracy or
    # refit a calibration: over 205 published runs, byte-identical plan output across thread counts
    # (hundreds of plans), the NeMo 25.04 refit of h100.json (its 34 runs and checks), the GEMM
    # refit of h100.json (with its check suites), the full B200 fit (GEMMs and attention, with its
    # check suites), the accuracy of Megatron-Bridge's 256-GPU MoE runs, that of its Llama tables,
    # that of the held-out DGX Cloud runs and of their NeMo 25.04 successors, that of NeMo's
    # Blackwell performance summary, that of BigScience's timed plans for one 181B model, that of
    # Korthikanti et al.'s 2022 runs (the 1T's 64 stages), the vTrain host-time fit over 1,549
    # runs, the sustained-fraction bootstrap's properties (three whole fits; 1-5 minutes each
    # here). And the deadline search's exactness and lower-bound checks
    # (dozens of plan searches; the deadline test that stays runs the same code). Every
    # code path they run is run by smaller tests in this build too (the B200 GEMM refit, the
    # attention fit across clocks, the fits' own tests, among them the held-out-family fit, which
    # computes the same bootstrap, the combined-step, MoE, FP4/MXFP8, offloading and ZeRO-3
    # lowering tests, the GB300 compute-model test, the GB200 suite's accuracy test).
    ctest --test-dir "$build" --output-on-failure -j "$(nproc)" \
      -E "models/examples: every example scenario runs|validate/published runs: primary-metric|planner/search: same inputs, same output bytes|validate/calibration: h100-nemo25.json is h100.json|validate/calibrate: refitting the GEMMs of the shipped sweep|validate/secondary suites: Megatron-Bridge's MoE tables|validate/secondary suites: Megatron-Bridge's Llama tables|validate/calibrate: the full B200 fit|validate/secondary suites: DGX Cloud runs held out of every fit|validate/fit_sustained_fraction: the bootstrap interval holds the fit|validate/vTrain suite: the Megatron-DeepSpeed host time|validate/secondary suites: DGX Cloud's NeMo 25.04|validate/secondary suites: Korthikanti|validate/secondary suites: NeMo's Blackwell|validate/secondary suites: BigScience's plans|planner/deadline: a smaller count than the walk's|planner/deadline: the lower bound on time to train"
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
