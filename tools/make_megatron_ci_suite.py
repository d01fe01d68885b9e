#!/usr/bin/env python3
"""Builds validate/suites/megatron_ci_memory.json from validate/data/megatron_ci_memory.json.

Megatron-LM's functional tests 'gpt3_7b_tp1_pp4_memory_speed' and 'gpt3_7b_tp4_pp1_memory_speed'
log the peak memory PyTorch allocated on the last rank (a last-stage GPU) on DGX A100, DGX H100
and GB200. Each run becomes one case that compares that peak with trainsim's peak of the last
pipeline stage. No fit reads these cases: they check the memory model (static memory, the
activations the schedule keeps, the transient buffers), which no calibration touches.

Usage: tools/make_megatron_ci_suite.py [megatron_ci_memory.json] [megatron_ci_memory_suite.json]
"""

import suite_files


CLUSTERS = {
    "A100-SXM4-80GB": {"preset": "dgx-a100-80gb"},
    "H100-SXM5-80GB": {"preset": "dgx-h100"},
    "GB200": {"preset": "gb200-nvl72"},
}


def case(run, sources, common_notes):
    repo = sources["repository"]  # every other source names a path at this commit
    assert sources["metric"].startswith(repo + " ")
    cluster = dict(CLUSTERS[run["gpu"]])
    cluster["gpus_per_node"] = run["gpus_per_node"]
    cluster["num_nodes"] = run["nodes"]
    tp, pp, vp = run["tp"], run["pp"], run["virtual_stages"]
    parallelism = {
        "tensor_model_parallel_size": tp,
        "pipeline_model_parallel_size": pp,
        "sequence_parallel": False,
        "use_distributed_optimizer": True,
    }
    if vp > 1:
        parallelism["virtual_pipeline_model_parallel_size"] = vp
    notes = list(common_notes) + [
        "measured: the last rank's 'mem-max-allocated-bytes' (from step 2 on), compared with trainsim's peak of the "
        "last pipeline stage",
        "--no-gradient-accumulation-fusion: weight gradients returned to autograd and added to the main gradients, so "
        "Transformer Engine keeps no placeholder weight gradients (gradient_accumulation_fusion false)",
        "the test's logged step times (median %.3f s from step 4) are not compared: --deterministic-mode, NCCL's "
        "ring only and a batch of 8 sequences (see validate/data/megatron_ci_memory.json)"
        % run["measured"]["iteration_time_s_median_from_step4"],
    ]
    return {
        "id": run["id"],
        "family": "mcore-ci-7b",
        "source": "%s %s (last written by %s, %s) and %s/model_config.yaml; the metric as %s" % (
            repo, run["golden_values"], run["golden_values_commit"], run["golden_values_date"],
            run["golden_values"].rsplit("/", 1)[0], sources["metric"][len(repo) + 1:]),
        "notes": notes,
        "scenario": {
            "name": run["id"],
            "model": {
                "name": "GPT 7B (Megatron-LM functional test)",
                "num_layers": 32,
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_query_groups": 8,
                "ffn_hidden_size": 16384,
                "vocab_size": 131073,
                "make_vocab_size_divisible_by": 128,
                "seq_length": 8192,
                "activation": "gelu",
                "normalization": "layernorm",
                "position_embedding_type": "learned_absolute",
                "untie_embeddings_and_output_weights": True,
                "add_bias_linear": True,
                "hidden_dropout": 0.1,
                "attention_dropout": 0.1,
            },
            "parallelism": parallelism,
            "training": {
                "micro_batch_size": run["micro_batch_size"],
                "global_batch_size": run["global_batch_size"],
                "precision": "bf16",
                "recompute_granularity": "none",
                "attention_kernel": "flash",
                "overlap_grad_reduce": True,
                "overlap_param_gather": True,
                "grad_reduce_in_fp32": True,
                "gradient_accumulation_fusion": False,
            },
            "cluster": cluster,
        },
        "measured": {"peak_memory_bytes": run["measured"]["peak_allocated_bytes"], "peak_memory_stage": "last"},
    }


def main():
    suite_files.build("validate/data/megatron_ci_memory.json", "validate/suites/megatron_ci_memory.json",
                      "Megatron-LM's functional tests of memory (a 7B GPT, sequence 8,192, TP 1 PP 4 and TP 4 PP 1 on "
                      "DGX A100, DGX H100 and GB200): the peak memory PyTorch allocated, in no fit; built by "
                      "tools/make_megatron_ci_suite.py from validate/data/megatron_ci_memory.json",
                      lambda data: [case(r, data["sources"], data["notes"]) for r in data["runs"]])


if __name__ == "__main__":
    main()
