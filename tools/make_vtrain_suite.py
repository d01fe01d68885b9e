#!/usr/bin/env python3
"""Builds validate/suites/vtrain_a100.json from validate/data/vtrain_a100.json.

The vTrain artifact's 1,549 measured Megatron-DeepSpeed GPT iteration times on A100 GPUs, each as
a validation case. The CSV gives the model shape, the plan and the batch; the artifact's
simulation configs for the same runs give part of the recipe and cluster (below), and every case
carries the same assumptions for the rest in its notes. Its families group the
configurations of one model on one GPU count, so the Spearman correlation per family measures how
well trainsim ranks parallel plans, which is what the data is good for.

Usage: tools/make_vtrain_suite.py [vtrain_a100.json] [vtrain_a100_suite.json]
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The artifact's own simulation configs for these runs (config/validation/{single,multi}/*.json at
# the same commit, 1,548 files) all state use_checkpoint true, use_gradient_bucket false,
# pipeline_scheduling 1f1b, node_size 8 and inter_node_bandwidth 800 ("total bandwidth of
# inter-node communication in Gbps", src/config.py), and the node's measured all-reduce
# (trace/a100/AR_GPU8_1M_1024M_LUT: nccl-tests, 229 GB/s bus bandwidth at 1 GiB) is an NVSwitch one.
NOTES = [
    "cluster partly in the source: 8 A100 GPUs per node on NVSwitch (the artifact's measured 8-GPU all-reduce reaches 229 GB/s bus bandwidth at 1 GiB) with 800 Gb/s of inter-node bandwidth per node (vTrain config inter_node_bandwidth), taken as 4 HDR 200 Gb/s NICs per node on a rail-optimized fabric; fewer than 8 GPUs use part of one node",
    "recipe partly in the source: activation checkpointing of every layer (vTrain config use_checkpoint: Megatron-DeepSpeed --checkpoint-activations, full recomputation, one layer per checkpoint), gradients all-reduced after the backward pass without bucketing (use_gradient_bucket false), 1F1B; not in the source: fp16, attention without a fused kernel, Megatron's own layers without Transformer Engine (transformer_impl local), gradients reduced in fp16 (Megatron-DeepSpeed defaults of the time), GPT-2 vocabulary padded to 51,200, MLP 4 x hidden, dropout 0.1",
    "host time per task not in the source: Megatron-DeepSpeed's Python and launch work, fitted to these runs (scenarios/calibration/a100-megatron-deepspeed.json, written by trainsim calibrate --gpu a100-sxm4-80gb --host-runs validate/suites/vtrain_a100.json); the shipped a100.json leaves it at zero, as the published A100 runs have it hidden",
    "use for ranking plans of one model on one GPU count (Spearman within the family); absolute errors carry the assumptions above",
]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "validate/data/vtrain_a100.json")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "validate/suites/vtrain_a100.json")
    data = json.load(open(src))
    cases = []
    excluded = []
    for part in ("single", "multi"):
        for i, r in enumerate(data[part]):
            gpus = r["num_gpus"]
            cluster = {"preset": "dgx-a100-80gb", "num_nodes": 1, "gpus_per_node": gpus} if gpus < 8 else \
                      {"preset": "dgx-a100-80gb", "num_nodes": gpus // 8, "inter_node": {"nics_per_node": 4}}
            cluster["calibration"] = "a100-megatron-deepspeed.json"
            h, layers = r["hidden_size"], r["num_layers"]
            cases.append({
                "id": "vtrain_%s_%04d_h%d_l%d_%dgpu_tp%d_pp%d_dp%d_mbs%d_gbs%d" % (
                    part, i, h, layers, gpus, r["tp"], r["pp"], r["dp"], r["micro_batch_size"], r["global_batch_size"]),
                "family": "h%d-l%d-%dgpu" % (h, layers, gpus),
                "source": data["source"].split(". ")[0].replace("{single,multi}", part),
                "notes": NOTES + ["row %d of ground_truth_%s.csv" % (i + 1, part)],
                "scenario": {
                    "name": "vTrain %s row %d" % (part, i + 1),
                    "model": {
                        "name": "GPT h%d L%d" % (h, layers), "num_layers": layers, "hidden_size": h,
                        "num_attention_heads": r["num_attention_heads"], "ffn_hidden_size": 4 * h,
                        "vocab_size": 51200, "seq_length": r["seq_length"], "activation": "gelu",
                        "normalization": "layernorm", "position_embedding_type": "learned_absolute",
                        "untie_embeddings_and_output_weights": False, "add_bias_linear": True,
                    },
                    "parallelism": {"tensor_model_parallel_size": r["tp"], "pipeline_model_parallel_size": r["pp"]},
                    "training": {
                        "micro_batch_size": r["micro_batch_size"], "global_batch_size": r["global_batch_size"],
                        "precision": "fp16", "attention_kernel": "unfused", "overlap_grad_reduce": False,
                        "grad_reduce_in_fp32": False, "recompute_granularity": "full", "recompute_method": "uniform",
                        "recompute_num_layers": 1, "transformer_impl": "local",
                    },
                    "cluster": cluster,
                },
                "measured": {"iteration_time_s": r["iteration_time_s"]},
            })
    doc = {"description": "vTrain (Bang et al., MICRO'24) measured Megatron-DeepSpeed GPT iteration times on A100, as trainsim cases; generated by tools/make_vtrain_suite.py. A ranking benchmark: see the notes of each case.",
           "cases": cases, "excluded": excluded}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("%d cases, %d excluded -> %s" % (len(cases), len(excluded), out))


if __name__ == "__main__":
    main()
