#!/usr/bin/env python3
"""Builds validate/suites/nemo_long_sequence.json from validate/data/nemo_long_sequence.json.

NeMo's long-sequence tables (Llama 2 7B on DGX H100, Llama 3 8B on DGX B200, FP8, sequences of
4K to 1M tokens with context parallelism) become one validation case per row: the model preset at
the row's sequence length, the row's TP/PP/CP/DP and global batch, NeMo's defaults for what the
tables do not state (each assumption in the case's notes), and the published model TFLOP/s per
GPU. No fit reads these cases: they check the attention and context-parallel model.

Usage: tools/make_long_sequence_suite.py [nemo_long_sequence.json] [nemo_long_sequence_suite.json]
"""

import suite_files


CLUSTERS = {"H100": "dgx-h100", "B200": "dgx-b200"}
FAMILIES = {"H100": "llama2-h100", "B200": "llama3-b200"}


def case(run, sources, common_notes):
    gpus = run["num_gpus"]
    cluster = {"preset": CLUSTERS[run["gpu"]], "num_gpus": gpus}
    notes = list(common_notes)
    if gpus < 8:
        # A run on part of one node: the node's NVSwitch domain holds only the run's GPUs.
        cluster["gpus_per_node"] = gpus
        notes.append("%d GPUs of one node, modelled as a node of %d" % (gpus, gpus))
    tp = run["tp"]
    parallelism = {
        "tensor_model_parallel_size": tp,
        "pipeline_model_parallel_size": run["pp"],
        "context_parallel_size": run["cp"],
        "sequence_parallel": tp > 1,
        "use_distributed_optimizer": True,
    }
    training = {
        "micro_batch_size": 1,
        "global_batch_size": run["global_batch_size"],
        "precision": "fp8",
        "recompute_granularity": "none",
        "overlap_grad_reduce": True,
        "overlap_param_gather": True,
    }
    if run["gpu"] == "H100":
        # NeMo 24.03.01 (NeMo 1): the launcher's Llama 2 configs of that tag name its
        # distributed_fused_adam.
        training["optimizer_implementation"] = "apex_distributed_fused_adam"
        notes.append("optimizer: NeMo 1's distributed_fused_adam, Apex's DistributedFusedAdam as NeMo configures it, state in fp32 "
                     "(NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/llama/llama2_7b.yaml @24.03.01: "
                     "optim.name distributed_fused_adam)")
    notes += [
        "micro-batch 1, no recomputation, distributed optimizer with overlapped gradient reduction and parameter gather, "
        "sequence parallelism with TP > 1 (not stated: NeMo's Llama recipe defaults)",
        "FP8 (Transformer Engine) linear layers, attention in BF16 with the GPU calibration's own flash attention",
    ]
    return {
        "id": run["id"],
        "family": FAMILIES[run["gpu"]],
        "source": sources[run["gpu"]],
        "notes": notes,
        "scenario": {
            "name": run["id"],
            "model": {"preset": run["model"], "seq_length": run["seq_length"]},
            "parallelism": parallelism,
            "training": training,
            "cluster": cluster,
        },
        "measured": {"model_tflops_per_gpu": run["model_tflops_per_gpu"]},
    }


def main():
    suite_files.build("validate/data/nemo_long_sequence.json", "validate/suites/nemo_long_sequence.json",
                      "NeMo long-sequence runs (context parallelism, 4K-1M tokens) in no fit; built by "
                      "tools/make_long_sequence_suite.py from validate/data/nemo_long_sequence.json",
                      lambda data: [case(r, data["sources"], data["notes"]) for r in data["runs"]])


if __name__ == "__main__":
    main()
