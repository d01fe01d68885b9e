#!/usr/bin/env python3
"""Builds validate/data/nccl_aws_p5.json from a published nccl-tests study on AWS p5.48xlarge.

github crazyguitar/aws-gpu-communication-benchmark (CC BY 4.0) measured NCCL collectives on
Amazon SageMaker HyperPod ml.p5.48xlarge instances (8 H100, 32 EFA NICs, four per GPU) with
nccl-tests: all_reduce_perf and alltoall_perf, 32 MiB to 8 GiB (all-to-all to 2 GiB), 1,000
iterations, on 2, 4, 8, 16 and 32 nodes (k8s/nccl_*_perf.yaml @4fdb5a4f: -b 32M -e 8192M (2048M) -f 2
-n 1000, 8 ranks per node, FI_PROVIDER=efa, NCCL_BUFFSIZE=8388608,
NCCL_P2P_NET_CHUNKSIZE=524288, aws-ofi-nccl's tuner plugin). Its data/*.csv files keep algbw and
busbw (GB/s) for the out-of-place and in-place runs. This script copies every row into records of
validate/data/nccl_measurements.json's format, one record per node count and collective; the
bandwidths are kept as published and time_us is derived from them (size / algbw), since the
files carry no times.

Usage: tools/make_aws_p5_nccl.py CHECKOUT [out.json]
  (CHECKOUT: a checkout of crazyguitar/aws-gpu-communication-benchmark holding
   data/nccl_all_reduce.csv @4fdb5a4fab8b2e173e2c7e87d9faddd9f54ddfea and
   data/nccl_alltoall.csv @a77f70db668034b75db9a430b3cd718f59a6c232)
"""

import csv
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = "github crazyguitar/aws-gpu-communication-benchmark"
FILES = {
    "all_reduce": ("data/nccl_all_reduce.csv", "4fdb5a4fab8b2e173e2c7e87d9faddd9f54ddfea",
                   "k8s/nccl_all_reduce_perf.yaml", "all_reduce_perf -b 32M -e 8192M -f 2 -g 1 -c 1 -n 1000"),
    "alltoall": ("data/nccl_alltoall.csv", "a77f70db668034b75db9a430b3cd718f59a6c232",
                 "k8s/nccl_alltoall_perf.yaml", "alltoall_perf -b 32M -e 2048M -f 2 -n 1000 -w 10 --blocking 0"),
}
MIB = 1 << 20


def records(checkout, collective):
    path, commit, yaml, command = FILES[collective]
    by_nodes = {}
    with open(os.path.join(checkout, path), newline="") as f:
        for row in csv.DictReader(f):
            row = {k.strip(): v.strip() for k, v in row.items()}
            nodes, gpus = int(row["Nodes"]), int(row["GPUs"])
            size = int(row["size(MB)"]) * MIB
            out_alg, in_alg = float(row["out algbw(GB/s)"]), float(row["in algbw(GB/s)"])
            by_nodes.setdefault((nodes, gpus), []).append({
                "bytes": size,
                "time_us": round(size / (out_alg * 1e3), 2),
                "algbw_GBps": out_alg,
                "busbw_GBps": float(row["out busbw(GB/s)"]),
                "inplace_time_us": round(size / (in_alg * 1e3), 2),
                "inplace_algbw_GBps": in_alg,
                "inplace_busbw_GBps": float(row["in busbw(GB/s)"]),
            })
    out = []
    for (nodes, gpus), rows in sorted(by_nodes.items()):
        out.append({
            "id": "aws_p5_%s_%dnode_%dxH100" % (collective, nodes, gpus),
            "source": "%s %s @%s (measurements; launch in %s at the same repository)" % (REPO, path, commit, yaml),
            "exactness": "published table: algbw and busbw as printed by nccl-tests, 2 decimals; "
                         "time_us = bytes / algbw (derived, the table has no times)",
            "hardware": {
                "gpu": "NVIDIA H100 80GB HBM3",
                "node": "AWS ml.p5.48xlarge (SageMaker HyperPod): 8x H100, NVLink4/NVSwitch",
                "network": "AWS EFA, 32 NICs per instance (four per GPU), 3,200 Gb/s; aws-ofi-nccl",
            },
            "collective": collective,
            "dtype": "float32",
            "tool": "nccl-tests %s (mpirun -np %d -N 8)" % (command, gpus),
            "n_gpus": gpus,
            "n_nodes": nodes,
            "notes": "NCCL_TUNER_PLUGIN=libnccl-ofi-tuner.so (aws-ofi-nccl's tuner chooses the algorithm, not "
                     "NCCL's own model), NCCL_BUFFSIZE=8388608, NCCL_P2P_NET_CHUNKSIZE=524288; NCCL and plugin "
                     "versions not stated.",
            "rows": rows,
        })
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(ROOT, "validate/data/nccl_aws_p5.json")
    data = records(sys.argv[1], "all_reduce") + records(sys.argv[1], "alltoall")
    with open(out_path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
