#!/usr/bin/env bash
# Measures this machine's GPUs with the CUDA harness of validate/cuda, in one short run, and writes
# under OUTDIR what a calibration needs, each file naming the date and the device:
#   device.txt        nvidia-smi's identification of every GPU, the driver, the date (UTC)
#   gemm.json         trainsim-bench-gemm on GPU 0: the shapes of validate/data/gemm_measurements.json
#                     (m, n, k in 256..4096, batches 1, 2, 4) plus 8192, in bf16, fp8 and tf32
#   copy.json         trainsim-bench-copy on every GPU at once: the host copy rate (host_copy_GBps)
#   all_reduce_G.log  trainsim-bench-nccl all_reduce over G = 2, 4, 8 GPUs (as many as there are),
#                     with NVLink SHARP off, for the measured ring of "Calibration", step 3
# and, where python3 has PyTorch with a GPU (validate/cuda/*.py, on GPU 0):
#   gpt1.7b.json, gpt1.7b.pt.trace.json.gz
#                     trace_gpt.py: GPT 1.7B trained with plain PyTorch, micro-batch 2 x 2, its
#                     measured iteration time and a Kineto trace of two iterations
#   attention.json    bench_attention.py: PyTorch's flash and cuDNN attention kernels
#   torch_gemm.json   torch_gemm_check.py: BF16 torch.matmul over random and constant operands
#   sustained_gemm.json
#                     sustained_gemm.py: GEMMs back to back for 30 s (then 10 s with memory passes
#                     between them), the throughput, SM clock, power and clock-event reasons by window
#   commands.txt      every command run, with its exit status and wall time
# Then, on any machine: `trainsim calibrate OUTDIR/gemm.json ...` fits them (README, "Validate on
# your cluster in three commands").
#
# The programs are compiled with the machine's own nvcc (-arch=native) into BUILD_DIR, or taken
# from there if already built (e.g. built elsewhere with `tools/device_check.sh --build-only`).
# Each measurement runs under a time limit so that the whole check stays within a few minutes.
#
# usage: tools/device_check.sh [--build-only] OUTDIR [BUILD_DIR]   (BUILD_DIR: build-cuda)
set -uo pipefail

build_only=0
if [[ ${1:-} == --build-only ]]; then
  build_only=1
  shift
fi
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: tools/device_check.sh [--build-only] OUTDIR [BUILD_DIR]" >&2
  exit 2
fi
out=$1
bin=${2:-build-cuda}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" "$bin"
log="$out/commands.txt"
: > "$log"

# Runs a command under a time limit, recording it, its exit status and its wall time.
run() {
  local limit=$1
  shift
  local start=$SECONDS
  timeout "$limit" "$@"
  local rc=$?
  printf '%s  # exit %d, %d s\n' "$*" "$rc" $((SECONDS - start)) >> "$log"
  return $rc
}

# Compiles one harness program unless it is there. With --build-only (no GPU), for A100, H100/H200
# and B200 (sm_80, sm_90, sm_100); otherwise for the GPUs present.
build() {
  local name=$1 source=$2
  shift 2
  [[ -x $bin/$name ]] && return 0
  if ! command -v nvcc > /dev/null; then
    echo "device_check: no nvcc and no $bin/$name: build it elsewhere with --build-only and bring $bin" >&2
    return 1
  fi
  local arch=(-arch=native)
  ((build_only)) && arch=(-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
                          -gencode arch=compute_100,code=sm_100)
  run 600 nvcc -O2 -std=c++17 "${arch[@]}" -I"$root/validate/cuda" "$root/validate/cuda/$source" -o "$bin/$name" "$@"
}

nccl_include=$(dirname "$(find /usr/include /usr/local/cuda*/include -name nccl.h 2>/dev/null | head -1)" 2>/dev/null)
build trainsim-bench-gemm bench_gemm.cu -lcublasLt || exit 1
build trainsim-bench-copy bench_copy.cu -lpthread || exit 1
have_nccl=1
build trainsim-bench-nccl bench_nccl.cu ${nccl_include:+-I"$nccl_include"} -lnccl -lpthread || have_nccl=0
((build_only)) && exit 0

if ! nvidia-smi > /dev/null 2>&1; then
  echo "device_check: nvidia-smi finds no GPU" >&2
  exit 1
fi
{
  date -u '+measured %Y-%m-%dT%H:%M:%SZ'
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,power.limit,clocks.max.sm --format=csv
  nvidia-smi topo -m
} > "$out/device.txt" 2>&1
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in
  *H200*) preset=h200-sxm-141gb ;;
  *H100*) preset=h100-sxm5-80gb ;;
  *A100*40GB*) preset=a100-sxm4-40gb ;;
  *A100*) preset=a100-sxm4-80gb ;;
  *GB300*) preset=gb300 ;;
  *GB200*) preset=gb200 ;;
  *B200*) preset=b200 ;;
  *) preset= ;;
esac

status=0
run 150 "$bin/trainsim-bench-gemm" ${preset:+--gpu "$preset"} --sizes 256,512,1024,2048,4096,8192 --batches 1,2,4 \
  -o "$out/gemm.json" || status=1
run 60 "$bin/trainsim-bench-copy" -b 1G -n 20 -o "$out/copy.json" > "$out/copy.txt" || status=1
if ((have_nccl && gpus >= 2)); then
  for g in 2 4 8; do
    ((g <= gpus)) || break
    NCCL_NVLS_ENABLE=0 run 120 "$bin/trainsim-bench-nccl" --op all_reduce -g "$g" -b 1M -e 1G -f 2 > "$out/all_reduce_$g.log" ||
      status=1
  done
fi
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  run 180 python3 "$root/validate/cuda/trace_gpt.py" -o "$out/gpt1.7b" || status=1
  run 120 python3 "$root/validate/cuda/bench_attention.py" ${preset:+--gpu "$preset"} -o "$out/attention.json" || status=1
  run 60 python3 "$root/validate/cuda/torch_gemm_check.py" -o "$out/torch_gemm.json" || status=1
  run 90 python3 "$root/validate/cuda/sustained_gemm.py" --seconds 30 --mixed-seconds 10 -o "$out/sustained_gemm.json" || status=1
fi
exit $status
