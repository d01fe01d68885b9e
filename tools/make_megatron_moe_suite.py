#!/usr/bin/env python3
"""Builds validate/suites/megatron_moe_readme.json from validate/data/megatron_moe_readme.json.

Megatron-Core's MoE README states Mixtral 8x7B's BF16 training throughput on H100 (MCore v0.8 and
v0.9) beside the parallel mapping it recommends for it (64 GPUs, TP 1 EP 8 PP 4 VP 8, micro-batch
1, global batch 256, the all-to-all dispatcher, dropless). Each statement becomes a case: the
mixtral-8x7b preset, that mapping, Megatron-LM's defaults and the README's MoE training example for
the rest (each assumption in the case's notes), and the published model TFLOP/s per GPU. No fit
reads these cases.

Usage: tools/make_megatron_moe_suite.py [megatron_moe_readme.json] [megatron_moe_readme_suite.json]
"""

import suite_files


def case(r):
    notes = [
        "the mapping of the README's 'Reference Best Parallel Mapping' table (stated for MCore v0.8; the v0.9 README keeps it) "
        "taken as the measured run's, which the README does not state separately",
        "recipe not stated beyond the mapping: the README's MoE training example (--moe-grouped-gemm, --use-distributed-optimizer, "
        "--overlap-grad-reduce, --overlap-param-gather, BF16, no recomputation) and Megatron-LM's defaults (the interleaved "
        "schedule's p2p overlapped: --no-overlap-p2p-communication not given; gradients accumulated and reduced in fp32, which megatron/training/arguments.py forces with --bf16)",
        "dropless routing measured after the early imbalance the README warns of; trainsim's router is balanced",
        "DGX H100 nodes (8 GPUs, NVLink 4, 8 x 400 Gb/s InfiniBand, as the README's benchmark information gives)",
        "container: " + r["container"],
    ]
    scenario = {
        "name": r["id"],
        "model": {"preset": r["model"], "seq_length": r["seq"]},
        "parallelism": {"tensor_model_parallel_size": r["tp"], "pipeline_model_parallel_size": r["pp"],
                        "virtual_pipeline_model_parallel_size": r["vp"], "expert_model_parallel_size": r["ep"],
                        "use_distributed_optimizer": True},
        "training": {"micro_batch_size": r["mbs"], "global_batch_size": r["gbs"], "precision": r["precision"],
                     "recompute_granularity": "none", "pipeline_schedule": "interleaved", "overlap_p2p_comm": True,
                     "overlap_grad_reduce": True, "overlap_param_gather": True, "grad_reduce_in_fp32": True,
                     "moe_grouped_gemm": True,
                     "moe_token_dispatcher_type": r["dispatcher"]},
        "cluster": {"preset": "dgx-h100", "num_nodes": r["gpus"] // 8},
    }
    return {"id": r["id"], "family": "mixtral-h100", "source": r["source"], "notes": notes, "scenario": scenario,
            "measured": {"model_tflops_per_gpu": r["model_tflops_per_gpu"]}}


def cases(data):
    return [case(r) for r in data["runs"]], []


def main():
    suite_files.build("validate/data/megatron_moe_readme.json", "validate/suites/megatron_moe_readme.json",
                      "Megatron-Core's Mixtral 8x7B throughput on H100 as its MoE README states it (MCore v0.8, v0.9) in no fit; "
                      "built by tools/make_megatron_moe_suite.py from validate/data/megatron_moe_readme.json", cases)


if __name__ == "__main__":
    main()
