#!/usr/bin/env python3
"""Trains a GPT-3-style model on one GPU with plain PyTorch, times its iterations and records a
few of them with the PyTorch profiler: a real Kineto trace for `trainsim validate kineto`, and a
measured iteration time for the matching single-GPU scenario.

The model is the GPT-3 architecture as trainsim's `gpt3-*` presets describe it (LayerNorm, GeLU
MLP, learned absolute positions, tied embeddings, biases, dropout), written with PyTorch's own
modules: torch.autocast to BF16 over FP32 weights, scaled_dot_product_attention with the causal
mask (PyTorch picks the backend), cross entropy in FP32, gradient accumulation over micro-batches,
gradient clipping to norm 1 and fused AdamW. It is not Megatron: the layer norms, GeLU, dropout
and residual adds are separate kernels, and autocast casts the FP32 weights to BF16 in every
forward pass, so the element-wise time is PyTorch's, not Transformer Engine's fused kernels'.

Writes OUT_PREFIX.pt.trace.json.gz (the profiled steps) and OUT_PREFIX.json (the configuration,
the device, the measured iteration times and peak memory). usage:
  trace_gpt.py --layers 24 --hidden 2304 --heads 24 --micro-batch 2 --accumulation 2 -o out/gpt1.7b
"""
import argparse
import datetime
import gzip
import json
import math
import os
import shutil
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from measurement import write_json


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        x = x + F.dropout(self.proj(a.transpose(1, 2).reshape(b, s, h)), self.dropout, self.training)
        y = self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x + F.dropout(y, self.dropout, self.training)


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, ffn, vocab, seq, dropout):
        super().__init__()
        self.dropout = dropout
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        for p in self.parameters():  # GPT-2/Megatron init scale; the speed does not depend on it
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = F.dropout(self.wte(tokens) + self.wpe(pos), self.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied output layer
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=2304)
    ap.add_argument("--heads", type=int, default=24)
    ap.add_argument("--ffn", type=int, default=0, help="default 4 x hidden")
    ap.add_argument("--vocab", type=int, default=51200)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--accumulation", type=int, default=2, help="micro-batches per iteration")
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--timed-steps", type=int, default=10)
    ap.add_argument("--profiled-steps", type=int, default=2)
    ap.add_argument("-o", "--output", required=True, help="output prefix")
    a = ap.parse_args()
    ffn = a.ffn or 4 * a.hidden
    torch.manual_seed(1234)
    dev = torch.device("cuda")
    model = GPT(a.layers, a.hidden, a.heads, ffn, a.vocab, a.seq, a.dropout).to(dev)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)
    data = torch.randint(0, a.vocab, (a.accumulation, a.micro_batch, a.seq + 1), device=dev)

    def step():
        for i in range(a.accumulation):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(data[i, :, :-1], data[i, :, 1:]) / a.accumulation
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup_steps):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.timed_steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated()

    trace = a.output + ".pt.trace.json"
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities,
                                schedule=torch.profiler.schedule(wait=0, warmup=1, active=a.profiled_steps),
                                on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for _ in range(1 + a.profiled_steps):
            step()
            prof.step()
    torch.cuda.synchronize()
    with open(trace, "rb") as f, gzip.open(trace + ".gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(trace)

    tokens = a.micro_batch * a.accumulation * a.seq
    mean = sum(times) / len(times)
    # Megatron's model FLOPs per iteration (Narayanan et al. 2021, eq. 3) for the MFU beside it.
    flops = 72 * tokens * a.layers * a.hidden ** 2 * (1 + a.seq / (6 * a.hidden) + a.vocab / (12 * a.layers * a.hidden))
    now = datetime.datetime.now(datetime.timezone.utc)
    meta = {
        "measured": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": torch.cuda.get_device_name(),
        "software": f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}",
        "program": "validate/cuda/trace_gpt.py",
        "model": {"num_layers": a.layers, "hidden_size": a.hidden, "num_attention_heads": a.heads, "ffn_hidden_size": ffn,
                  "vocab_size": a.vocab, "seq_length": a.seq, "dropout": a.dropout, "parameters": params},
        "training": {"micro_batch_size": a.micro_batch, "global_batch_size": a.micro_batch * a.accumulation,
                     "precision": "torch.autocast bf16 over fp32 weights", "optimizer": "torch.optim.AdamW(fused=True)",
                     "clip_grad": 1.0},
        "iteration_time_s": {"mean": mean, "min": min(times), "max": max(times),
                             "stdev": math.sqrt(sum((t - mean) ** 2 for t in times) / len(times)), "steps": len(times)},
        "tokens_per_s": tokens / mean,
        "model_tflops_per_gpu": flops / mean * 1e-12,
        "peak_memory_allocated_bytes": peak,
        "trace": os.path.basename(trace) + ".gz",
        "profiled_steps": a.profiled_steps,
    }
    write_json(meta, a.output + ".json")
    print(json.dumps({k: meta[k] for k in ("device", "iteration_time_s", "model_tflops_per_gpu", "peak_memory_allocated_bytes")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
