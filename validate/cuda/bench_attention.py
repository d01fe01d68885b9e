#!/usr/bin/env python3
"""Times PyTorch's fused attention kernels on one GPU and writes them as an attention measurement
table: the format of validate/data/attention_measurements.json, which `trainsim calibrate` fits
and `trainsim validate` compares with.

The sweep is the FlashAttention papers' benchmark: batch x sequence = 16,384 tokens, hidden 2,048
(heads = 2048 / head_dim), BF16, no dropout (--dropout P: with it, each row carrying it and the
same shape timed without, "tflops_without_dropout", the pair `calibrate` fits dropout's cost
from), with and without the causal mask, forward and backward. TFLOP/s = 4 x batch x heads x
seq^2 x head_dim / time, halved with the causal mask; the backward counts 2.5x the forward FLOPs
(flash-attention's benchmark convention). Q, K and V
are [batch, seq, heads, head_dim] tensors viewed as [batch, heads, seq, head_dim], the layout
Megatron and Transformer Engine hand the kernels. The backward is timed through
torch.autograd.grad (no gradient accumulation), so it includes every kernel of the backward pass
(FlashAttention-2's dO.O pre-pass and dQ conversion, cuDNN's).

One table per backend: PyTorch's "flash" backend (FlashAttention-2 kernels compiled into
PyTorch) and its "cudnn" backend (cuDNN's fused SDPA, the engine Transformer Engine uses on
Hopper). usage: bench_attention.py --gpu h100-sxm5-80gb -o attention.json
"""
import argparse
import datetime
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from measurement import seconds_per_call, write_json

BACKENDS = {
    "flash": (SDPBackend.FLASH_ATTENTION, "flash_attention_2", "PyTorch's flash backend (FlashAttention-2 kernels)"),
    "cudnn": (SDPBackend.CUDNN_ATTENTION, "cudnn", "PyTorch's cuDNN backend (cuDNN fused SDPA)"),
}


def sweep(backend, tokens, hidden, head_dims, seq_lens, warmup, iterations, dropout):
    kernel = BACKENDS[backend][0]
    rows = []
    for head_dim in head_dims:
        heads = max(1, round(hidden / head_dim))
        for seq in seq_lens:
            batch = tokens // seq
            if batch < 1:
                continue
            for causal in (False, True):
                gen = torch.Generator(device="cuda").manual_seed(seq * 1000 + head_dim)
                shape = (batch, seq, heads, head_dim)
                q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen).transpose(1, 2)
                           .requires_grad_() for _ in range(3))
                grad = torch.randn((batch, heads, seq, head_dim), device="cuda", dtype=torch.bfloat16, generator=gen)
                flops = 4.0 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
                def timings(p):
                    """Seconds per forward and per backward call at dropout probability p."""
                    with sdpa_kernel([kernel]):
                        def forward():
                            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
                        t_fwd = seconds_per_call(forward, warmup, iterations)
                        out = forward()

                        def backward():
                            return torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
                        return t_fwd, seconds_per_call(backward, warmup, iterations)
                try:
                    measured = timings(dropout)
                    plain = timings(0.0) if dropout > 0 else None  # the pair dropout's cost is fitted from
                except RuntimeError as e:  # the backend refuses this shape
                    print(f"bench_attention: {backend} head_dim {head_dim} seq {seq} causal {causal}: {e}".splitlines()[0],
                          file=sys.stderr)
                    continue
                for i, (name, f) in enumerate((("forward", flops), ("backward", 2.5 * flops))):
                    row = {"pass": name, "causal": causal, "head_dim": head_dim, "seq_len": seq}
                    if heads * head_dim != hidden:
                        row.update({"batch": batch, "heads": heads})
                    if dropout > 0:
                        row["dropout"] = dropout
                    row["tflops"] = round(f / measured[i] * 1e-12, 1)
                    if plain:
                        row["tflops_without_dropout"] = round(f / plain[i] * 1e-12, 1)
                    rows.append(row)
                print(f"bench_attention: {backend} d={head_dim} s={seq} causal={causal}: "
                      f"fwd {flops / measured[0] * 1e-12:.0f}, bwd {2.5 * flops / measured[1] * 1e-12:.0f} TFLOP/s", file=sys.stderr)
                del q, k, v, grad
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", default="", help="the trainsim GPU preset the tables are for (e.g. h100-sxm5-80gb)")
    ap.add_argument("--backends", default="flash,cudnn")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--seq-lens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--dropout", type=float, default=0.0, help="attention dropout probability (rows then carry it)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_attention: PyTorch sees no GPU", file=sys.stderr)
        return 1
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    name = torch.cuda.get_device_name()
    versions = f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    tables = []
    for backend in a.backends.split(","):
        if backend not in BACKENDS:
            print(f"bench_attention: unknown backend '{backend}' (flash, cudnn)", file=sys.stderr)
            return 2
        rows = sweep(backend, a.tokens, a.hidden, [int(x) for x in a.head_dims.split(",")],
                     [int(x) for x in a.seq_lens.split(",")], a.warmup, a.iterations, a.dropout)
        if not rows:
            continue
        table = {
            "id": f"bench_attention_{backend}_{a.gpu or 'gpu'}_{date}" + (f"_dropout{a.dropout:g}" if a.dropout > 0 else ""),
            "source": f"validate/cuda/bench_attention.py on {name} ({date}): {BACKENDS[backend][2]}; {versions}",
            "gpu": a.gpu or "unknown",
            "implementation": BACKENDS[backend][1],
            "setup": (f"batch x seq_len = {a.tokens} tokens, hidden {a.hidden} (heads = hidden / head_dim, rounded; rows "
                      "where that is not exact give batch and heads), BF16, "
                      + (f"dropout {a.dropout:g}; " if a.dropout > 0 else "no dropout; ") +
                      f"mean of {a.iterations} calls after {a.warmup}; TFLOP/s = 4 x batch x heads x seq_len^2 x head_dim "
                      "/ time, halved with the causal mask; backward counts 2.5x the forward FLOPs"),
            "tokens": a.tokens,
            "hidden": a.hidden,
            "rows": rows,
        }
        tables.append(table)
    doc = {"description": f"Fused-attention kernel timings measured with validate/cuda/bench_attention.py on {name}, {date}.",
           "tables": tables}
    write_json(doc, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
