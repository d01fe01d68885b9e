#!/usr/bin/env python3
"""Cross-checks trainsim-bench-gemm with PyTorch on one GPU: BF16 torch.matmul (cuBLAS through
PyTorch) on a few square and transformer-layer shapes, each over normally distributed operands
and over constant ones, so that the effect of the operands' values on the clock of a
power-limited GPU is measured, not assumed. Writes a JSON list of rows {m, n, k, data, tflops}
(FLOPs = 2 m n k; mean of --iterations calls after --warmup).
usage: torch_gemm_check.py -o torch_gemm.json
"""
import argparse
import datetime
import sys

import torch

from measurement import seconds_per_call, write_json

# (m, n, k): squares, then GPT-3 175B's layer GEMMs at TP 8, 2,048 tokens x micro-batch 1
# (QKV, projection, fc1, fc2: hidden 12,288, 96 heads) and Llama-3 8B's at TP 1, 8,192 tokens.
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 4608, 12288), (2048, 12288, 1536), (2048, 6144, 12288),
          (2048, 12288, 6144), (8192, 6144, 4096), (8192, 4096, 4096), (8192, 28672, 4096), (8192, 4096, 14336)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    rows = []
    for m, n, k in SHAPES:
        for data in ("normal", "constant"):
            if data == "normal":
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            else:
                x = torch.full((m, k), 0.5, device="cuda", dtype=torch.bfloat16)
                w = torch.full((k, n), 0.5, device="cuda", dtype=torch.bfloat16)
            t = seconds_per_call(lambda: torch.matmul(x, w), a.warmup, a.iterations)
            rows.append({"m": m, "n": n, "k": k, "data": data, "tflops": round(2.0 * m * n * k / t * 1e-12, 1)})
            print(f"torch_gemm_check: {m}x{n}x{k} {data}: {rows[-1]['tflops']} TFLOP/s", file=sys.stderr)
    doc = {"source": f"validate/cuda/torch_gemm_check.py on {torch.cuda.get_device_name()} "
                     f"({datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d')}), PyTorch {torch.__version__}, "
                     f"CUDA {torch.version.cuda}",
           "convention": "[m, k] x [k, n] BF16 torch.matmul; FLOPs = 2 m n k",
           "rows": rows}
    write_json(doc, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
