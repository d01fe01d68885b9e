"""What the PyTorch measurement programs of validate/cuda share: timing a call, writing JSON."""
import json
import sys

import torch


def seconds_per_call(fn, warmup, iterations):
    """Mean seconds of one `fn()` on the GPU: `warmup` calls, then `iterations` between two CUDA events."""
    for _ in range(warmup):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iterations):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e-3 / iterations


def write_json(doc, output):
    """Writes `doc` as indented JSON to the file `output`, or to stdout when it is "-"."""
    text = json.dumps(doc, indent=1) + "\n"
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w") as f:
            f.write(text)
