#!/usr/bin/env python3
"""Runs BF16 GEMMs back to back on one GPU for a while and records, window by window, the
throughput they sustain beside the GPU's SM clock, power draw, temperature and the reasons the
driver gives for holding the clock down (NVML): what a power-limited GPU sustains under dense
tensor-core work, against the short bursts a GEMM benchmark times.

Two phases: GEMMs alone (8192 x 8192 x 8192, random normal operands), then the same GEMMs each
followed by a memory-bound pass over 1 GiB (as a training step interleaves them). Writes a JSON
list of windows {phase, t_s, tflops, sm_clock_mhz, power_w, temperature_c, clock_event_reasons}.
usage: sustained_gemm.py --seconds 40 --mixed-seconds 20 -o sustained.json
"""
import argparse
import datetime
import sys
import time

import torch

from measurement import write_json

try:
    import pynvml
except ImportError:  # the clock, power and temperature columns are then left out
    pynvml = None


def nvml_reader():
    """A function returning the GPU's state now, or an empty dict without NVML."""
    if pynvml is None:
        return lambda: {}
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    except Exception as e:  # noqa: BLE001 (NVML raises its own error types)
        print(f"sustained_gemm: NVML unavailable ({e})", file=sys.stderr)
        return lambda: {}
    reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)

    def read():
        state = {}
        for key, call in (("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                          ("power_w", lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
                          ("temperature_c", lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
                          ("clock_event_reasons", lambda: hex(reasons(handle)) if reasons else None)):
            try:
                state[key] = call()
            except Exception:  # noqa: BLE001
                pass
        return state
    return read


def run_phase(name, seconds, window_s, step, flops_per_step, read_state, out):
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        steps = 0
        wall = time.perf_counter()
        while time.perf_counter() - wall < window_s:
            for _ in range(8):
                step()
            steps += 8
        end.record()
        end.synchronize()
        gpu_s = begin.elapsed_time(end) * 1e-3
        row = {"phase": name, "t_s": round(time.perf_counter() - start, 2), "tflops": round(steps * flops_per_step / gpu_s * 1e-12, 1)}
        row.update(read_state())
        out.append(row)
        print(f"sustained_gemm: {row}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--mixed-seconds", type=float, default=20)
    ap.add_argument("--window", type=float, default=0.5, help="seconds per recorded window")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    n = a.size
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    buffer = torch.randn(1 << 28, device="cuda", dtype=torch.float32)  # 1 GiB
    flops = 2.0 * n * n * n
    read_state = nvml_reader()
    rows = []
    idle = read_state()
    run_phase("gemm", a.seconds, a.window, lambda: torch.matmul(x, w, out=y), flops, read_state, rows)

    def mixed():
        torch.matmul(x, w, out=y)
        buffer.mul_(1.0001)  # reads and writes 1 GiB: about 0.7 ms at 3 TB/s
    run_phase("gemm+memory", a.mixed_seconds, a.window, mixed, flops, read_state, rows)
    doc = {"source": f"validate/cuda/sustained_gemm.py on {torch.cuda.get_device_name()} "
                     f"({datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}), PyTorch {torch.__version__}",
           "convention": f"BF16 torch.matmul {n} x {n} x {n}, FLOPs 2 n^3 per GEMM, timed by CUDA events per window "
                         "(gemm+memory: the GEMM's FLOPs only, each followed by a 1 GiB read-modify-write)",
           "idle": idle,
           "windows": rows}
    write_json(doc, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
