#!/usr/bin/env python3
"""Builds validate/data/nccl_xla_alltoall.json from XLA's measured collective table.

OpenXLA ships a default performance table of NCCL collectives measured by its generator
(xla/tools/collective_perf_table_gen.cc: one-collective XLA modules, network_throughput =
tensor bytes / median runtime of the profiled runs) in
xla/service/gpu/model/collective_interpolator_data.h. Commit e97611c4c4 (PR #36518) holds
blocks for B200 ("sm_100_B200", one 8-GPU node) and GB200 ("sm_100_GB200", one NVL72 NVLink
domain). validate/data/nccl_xla_gb200.json has GB200's all-reduce, all-gather and
reduce-scatter; this script copies the all-to-all sweeps of both blocks: GB200 in 1 x 64,
2 x 32, 4 x 16, 8 x 8 and 16 x 4 groups of consecutive GPUs, B200 in 1 x 8, 2 x 4 and 4 x 2.
For all-to-all the tensor is each rank's buffer (GetInputDim = GetOutputDim = bytes / 4),
nccl-tests' size convention. Rows keep the published throughput (GB/s, 2 decimals) and give
time_us = bytes / throughput.

Usage: tools/make_xla_alltoall.py collective_interpolator_data.h [out.json]
  (the file at openxla/xla e97611c4c41c1f2dd331aca646792089f7f86b66, e.g. from the ROCm/xla mirror:
   git show e97611c4c4:xla/service/gpu/model/collective_interpolator_data.h)
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMIT = "e97611c4c41c1f2dd331aca646792089f7f86b66"
SOURCE = ("github openxla/xla (mirror ROCm/xla) xla/service/gpu/model/collective_interpolator_data.h @%s "
          "(PR #36518 '[GPU] Add default perf table for GB200/GB300', 2026-02-13), block key \"%s\"")
BLOCKS = {
    "sm_100_GB200": ("gb200", [(1, 64), (2, 32), (4, 16), (8, 8), (16, 4)], {
        "gpu": "NVIDIA GB200 (Blackwell, sm_100)",
        "node": "GB200 NVL72 rack: one NVLink domain (NVLink 5 switch trays); 64 GPUs in the job",
        "network": "not exercised (every group inside the NVLink domain)"}),
    "sm_100_B200": ("b200", [(1, 8), (2, 4), (4, 2)], {
        "gpu": "NVIDIA B200 (Blackwell, sm_100)",
        "node": "8x B200 on NVLink 5 switches (one node)",
        "network": "not exercised (every group inside the node)"}),
}
ENTRY = re.compile(r'opcode: "([a-z\-]+)".*?dimensions: (\d+).*?num_replica_groups: (\d+)\s+'
                   r'num_devices_per_group: (\d+).*?network_throughput_bytes_per_sec: (\d+)', re.S)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    out_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(ROOT, "validate/data/nccl_xla_alltoall.json")
    blocks = re.split(r'\n  entries \{\n    key: "', text)
    records = []
    for block in blocks[1:]:
        key = block[:block.index('"')]
        if key not in BLOCKS:
            continue
        name, groupings, hardware = BLOCKS[key]
        entries = ENTRY.findall(block)
        for groups, size in groupings:
            rows = {}
            for op, dim, g, n, throughput in entries:
                if op != "all-to-all" or int(g) != groups or int(n) != size:
                    continue
                nbytes = int(dim) * 4
                if nbytes in rows:
                    sys.exit("%s: two all-to-all entries of %d bytes for %d x %d" % (key, nbytes, groups, size))
                rows[nbytes] = {"bytes": nbytes, "time_us": round(nbytes / int(throughput) * 1e6, 3),
                                "algbw_GBps": round(int(throughput) / 1e9, 2)}
            records.append({
                "id": "xla_perf_table_%s_alltoall_%dgpu_x%d" % (name, size, groups),
                "source": SOURCE % (COMMIT, key),
                "exactness": "table values: network_throughput_bytes_per_sec = tensor bytes / median runtime of the "
                             "profiled runs of a one-collective XLA module (xla/tools/collective_perf_table_gen.cc, "
                             "same commit); time_us here = bytes / throughput.",
                "hardware": hardware,
                "collective": "alltoall",
                "dtype": "float32",
                "tool": "XLA collective_perf_table_gen (NCCL underneath): %d concurrent groups of %d consecutive "
                        "devices (iota replica groups)" % (groups, size),
                "n_gpus": size,
                "n_nodes": 1,
                "concurrent_groups": groups,
                "notes": "size = each rank's buffer (XLA's tensor_size_bytes for all-to-all), the nccl-tests size "
                         "convention. Runtime is XLA's measured module time, not nccl-tests' per-op average: small "
                         "sizes carry XLA's launch and synchronisation costs.",
                "rows": [rows[b] for b in sorted(rows)],
            })
    with open(out_path, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
