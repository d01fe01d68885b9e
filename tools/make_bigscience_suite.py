#!/usr/bin/env python3
"""Builds validate/suites/bigscience_tr11_topology.json from validate/data/bigscience_tr11_topology.json.

Before BLOOM-176B's training, BigScience timed one 181B GPT model under many 3D-parallel plans on
the 48 Jean Zay nodes (384 A100 80GB) it would train on (train/tr11-176B-ml/chronicles-prequel.md).
Each timed row becomes a case: that model and plan, the recipe of the benchmark's slurm script
(Megatron-DeepSpeed, fp16, ZeRO-1, full recomputation), the cluster as BigScience describes it, and
the measured seconds per iteration, and every case whether it ran out of memory (the three that
did have no time), which validate compares with trainsim's memory verdict. Families group the
plans of one global batch, so the ranking is of plans for the same work. No fit reads these cases.

Usage: tools/make_bigscience_suite.py [bigscience_tr11_topology.json] [bigscience_tr11_topology_suite.json]
"""

import suite_files

# Narayanan et al. (SC'21) Eq. 3, as Megatron-DeepSpeed logs it: recomputation counted.
LAYERS, HIDDEN, SEQ, VOCAB, GPUS = 72, 14336, 2048, 250880, 384

NOTES = [
    "model of the table: 72 layers, hidden 14,336, 64 heads, MLP 4 x hidden, sequence 2,048, BLOOM's tokenizer (250,680 tokens) "
    "padded by Megatron to 250,880 (a multiple of 128 x TP for TP 2, 4 and 8), tied embeddings, biases, GeLU, LayerNorm; "
    "dropout 0.1 (Megatron's defaults: the script sets none)",
    "ALiBi (--position-embedding-type alibi) modelled as learned absolute positions (one add in the embedding): Megatron-DeepSpeed "
    "adds the ALiBi bias inside the QK^T batched GEMM (baddbmm), whose extra read of the bias trainsim does not price; "
    "--embed-layernorm's one LayerNorm after the embedding is not priced either",
    "recipe of train/tr11-200B-ml/tr11-200B-ml.slurm @f65824340997529473aaba6203c56f862ea1eae1 (2022-02-25): --fp16 (gradients "
    "reduced in fp16), ZeRO stage 1 (optimizer state sharded over data parallelism; gradients reduce-scattered and parameters "
    "all-gathered after the backward pass, as DeepSpeed's pipeline engine reduces them after the last micro-batch), "
    "--checkpoint-activations with --deepspeed-activation-checkpointing (every layer recomputed), attention without a fused kernel "
    "(QK^T, fused scale-mask-softmax, dropout, PV), Megatron's own layers (no Transformer Engine)",
    "DeepSpeed's pipeline engine (1F1B order; activations partitioned over the tensor-parallel group when sent and all-gathered by "
    "the receiver) modelled as Megatron's 1F1B schedule with scatter/gather; its layer partition 'type:transformer' spreads the "
    "72 layers evenly, the embedding on the first stage and the tied output layer on the last",
    "cluster: 48 nodes of 8 A100 80GB on NVSwitch (taken from the 'HGX' node type: BigScience's README says 'NVLink 4 inter-gpu "
    "connects') and 4 Omni-Path links of 100 Gb/s per node on a non-blocking fat tree ('4 OmniPath links'; the author who ran "
    "these benchmarks later wrote that Jean Zay's Omni-Path 'was only 135Gbps', which the what-if in README.md prices)",
    "host time per task: Megatron-DeepSpeed's, fitted to vTrain's runs (scenarios/calibration/a100-megatron-deepspeed.json); "
    "whether these runs set CUDA_LAUNCH_BLOCKING=1 (BLOOM's training did, against hangs at 320+ GPUs) the table does not say",
    "measured: seconds per iteration at the second iteration of one run (the source: the snapshot 'isn't exact and can fluctuate "
    "a bit'); three plans were timed twice (TP 4 PP 12 MBS 2: 110.48 s and 113.54 s on 02-25, 110.42 s on 02-26)",
]


def eq3_tflops(r):
    """The TFLOPs column from the row's plan and Sec/it (the transcription check)."""
    flops = 96 * r["gbs"] * SEQ * LAYERS * HIDDEN ** 2 * (1 + SEQ / (6 * HIDDEN) + VOCAB / (16 * LAYERS * HIDDEN))
    return flops / (r["seconds_per_iteration"] * GPUS) / 1e12


def scenario(r):
    return {
        "name": r["id"],
        "model": {"name": "BigScience 181B (tr11 prequel)", "num_layers": LAYERS, "hidden_size": HIDDEN,
                  "num_attention_heads": 64, "ffn_hidden_size": 4 * HIDDEN, "vocab_size": VOCAB,
                  "make_vocab_size_divisible_by": 1, "seq_length": SEQ, "activation": "gelu", "normalization": "layernorm",
                  "position_embedding_type": "learned_absolute", "untie_embeddings_and_output_weights": False,
                  "add_bias_linear": True, "hidden_dropout": 0.1, "attention_dropout": 0.1},
        "parallelism": {"tensor_model_parallel_size": r["tp"], "pipeline_model_parallel_size": r["pp"], "zero_stage": 1},
        "training": {"micro_batch_size": r["mbs"], "global_batch_size": r["gbs"], "precision": "fp16",
                     "attention_kernel": "unfused", "overlap_grad_reduce": False, "grad_reduce_in_fp32": False,
                     "recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1,
                     "transformer_impl": "local", "scatter_gather_tensors_in_pipeline": r["tp"] > 1},
        "cluster": {"preset": "dgx-a100-80gb", "num_nodes": r["nodes"],
                    "inter_node": {"topology": "fat_tree", "nics_per_node": 4, "nic_bandwidth_Gbps": 100},
                    "calibration": "a100-megatron-deepspeed.json"},
    }


def cases(data):
    made = []
    for r in data["runs"]:
        if r["dp"] * r["tp"] * r["pp"] != r["nodes"] * 8:
            raise SystemExit("%s: DP x TP x PP is not the GPU count" % r["id"])
        if r.get("out_of_memory"):
            measured = {"out_of_memory": True}
            memory = "OOM"
        else:
            if abs(eq3_tflops(r) / r["tflops_per_gpu"] - 1) > 5e-4:
                raise SystemExit("%s: Sec/it and TFLOPs disagree (%.2f from Eq. 3)" % (r["id"], eq3_tflops(r)))
            measured = {"iteration_time_s": r["seconds_per_iteration"], "out_of_memory": False}
            memory = r.get("memory_column", "empty")
        made.append({"id": r["id"], "family": "bigscience-181b-gbs%d" % r["gbs"], "source": r["source"],
                     "notes": NOTES + ["row of %s: DP %d TP %d PP %d, MBS %d, GBS %d, Mem column %s" % (
                         r["date"], r["dp"], r["tp"], r["pp"], r["mbs"], r["gbs"], memory)],
                     "scenario": scenario(r), "measured": measured})
    return made


def main():
    suite_files.build("validate/data/bigscience_tr11_topology.json", "validate/suites/bigscience_tr11_topology.json",
                      "BigScience's February 2022 benchmark of 3D-parallel plans for one 181B model on 384 A100 80GB of Jean "
                      "Zay, in no fit; built by tools/make_bigscience_suite.py from validate/data/bigscience_tr11_topology.json",
                      cases)


if __name__ == "__main__":
    main()
