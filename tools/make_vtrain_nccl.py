#!/usr/bin/env python3
"""Builds validate/data/nccl_vtrain_a100.json from the vTrain artifact's measured all-reduce tables.

The vTrain repository (github VIA-Research/vTrain, MIT) ships, beside its training measurements,
the all-reduce times of its A100 node that its predictor looks up for tensor-parallel traffic:
trace/a100/AR_GPU{2..8}_1M_1024M_LUT, one table per GPU count (2 to 8 GPUs of one NVSwitch node),
every MiB from 1 MiB to 1 GiB, in nccl-tests' columns (size, count, type, then time in ns and bus
bandwidth for the out-of-place and the in-place runs). This script copies them into records of
validate/data/nccl_measurements.json's format, keeping the sizes 2^k and 3 x 2^k MiB (20 per
table; the values are not changed, only fewer rows are kept).

Usage: tools/make_vtrain_nccl.py VTRAIN_CHECKOUT [out.json]
  (VTRAIN_CHECKOUT: a checkout of VIA-Research/vTrain at f8dda8473a48b373b1d25f51f52d685bff5150c5)
"""

import csv
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMIT = "f8dda8473a48b373b1d25f51f52d685bff5150c5"
MIB = 1 << 20


def kept(size):
    """2^k MiB and 3 x 2^k MiB."""
    if size % MIB:
        return False
    m = size // MIB
    while m % 2 == 0:
        m //= 2
    return m in (1, 3)


def record(checkout, n):
    path = f"trace/a100/AR_GPU{n}_1M_1024M_LUT"
    rows = []
    with open(os.path.join(checkout, path), newline="") as f:
        for line in csv.reader(f):
            if not line or line[0].startswith("size"):
                continue
            size = int(line[0])
            if not kept(size):
                continue
            rows.append({
                "bytes": size,
                "time_us": float(line[3]) / 1000.0,
                "busbw_GBps": float(line[4]),
                "inplace_time_us": float(line[5]) / 1000.0,
                "inplace_busbw_GBps": float(line[6]),
            })
    return {
        "id": f"vtrain_a100_allreduce_{n}gpu",
        "source": f"github VIA-Research/vTrain {path} @{COMMIT} (MIT)",
        "exactness": "exact values (every MiB in the source; the 2^k and 3 x 2^k MiB rows kept)",
        "hardware": {
            "gpu": "A100 SXM4",
            "node": "8x A100 NVSwitch node (the vTrain testbed; 229 GB/s bus bandwidth at 1 GiB on 8 GPUs)",
        },
        "collective": "all_reduce",
        "dtype": "float32",
        "tool": "nccl-tests all_reduce_perf columns (time converted from ns to us); launch mode not stated",
        "n_gpus": n,
        "n_nodes": 1,
        "notes": "The all-reduce times vTrain's predictor looks up for tensor-parallel all-reduces of n GPUs in one node.",
        "rows": rows,
    }


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "validate/data/nccl_vtrain_a100.json")
    records = [record(sys.argv[1], n) for n in range(2, 9)]
    with open(out, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
