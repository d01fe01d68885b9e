#!/usr/bin/env python3
"""Builds validate/suites/korthikanti2022.json from validate/data/korthikanti2022.json.

Korthikanti et al. 2022's end-to-end iteration times (Table 5: GPT 22B, 175B, 530B and 1T on DGX
A100 80GB, data-parallel size 1, full recomputation against sequence parallelism with selective
recomputation) become one validation case per run: the model's shape, the paper's TP, PP,
virtual stages and batch, the Megatron-LM recipe of 2022 for what the table does not state (each
assumption in the case's notes), and the measured iteration time. No fit reads these cases.

Usage: tools/make_korthikanti_suite.py [korthikanti2022.json] [korthikanti2022_suite.json]
"""

import suite_files


# What every model shares (Narayanan et al. 2021's GPT presets: GPT-2 BPE vocabulary padded to
# 51,200, learned positions, GeLU, LayerNorm, biases, tied embeddings, dropout 0.1).
GPT = {
    "vocab_size": 51200, "seq_length": 2048, "activation": "gelu", "normalization": "layernorm",
    "position_embedding_type": "learned_absolute", "untie_embeddings_and_output_weights": False,
    "add_bias_linear": True, "hidden_dropout": 0.1, "attention_dropout": 0.1,
}


def case(run, sources, common_notes):
    full = run["mode"] == "full"
    model = dict(run["model"])
    model.update(GPT)
    parallelism = {
        "tensor_model_parallel_size": run["tp"],
        "pipeline_model_parallel_size": run["pp"],
        "sequence_parallel": not full,
        "use_distributed_optimizer": False,
    }
    vp = run["virtual_stages"]
    if vp > 1:
        parallelism["virtual_pipeline_model_parallel_size"] = vp
    training = {
        "micro_batch_size": run["micro_batch_size"],
        "global_batch_size": run["global_batch_size"],
        "precision": "fp16",
        "attention_kernel": "unfused",
        "transformer_impl": "local",
        "pipeline_schedule": "interleaved" if vp > 1 else "1f1b",
        "overlap_p2p_comm": False,
        "grad_reduce_in_fp32": False,
    }
    if full:
        training.update({"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1,
                         "scatter_gather_tensors_in_pipeline": True})
    else:
        training["recompute_granularity"] = "selective"
    return {
        "id": run["id"],
        "family": "gpt-2022",
        "source": "%s; %s" % (sources["times"], sources["configurations"]),
        "notes": list(common_notes) + [
            "%s: TP %d, PP %d%s, %d GPUs, global batch %d, micro-batch %d" % (
                "full recomputation" if full else "sequence parallelism + selective recomputation", run["tp"], run["pp"],
                " x%d virtual stages (interleaved)" % vp if vp > 1 else "", run["num_gpus"], run["global_batch_size"],
                run["micro_batch_size"]),
        ],
        "scenario": {
            "name": run["id"],
            "model": model,
            "parallelism": parallelism,
            "training": training,
            "cluster": {"preset": "dgx-a100-80gb", "num_gpus": run["num_gpus"]},
        },
        "measured": {"iteration_time_s": run["iteration_time_s"]},
    }


def main():
    suite_files.build("validate/data/korthikanti2022.json", "validate/suites/korthikanti2022.json",
                      "Korthikanti et al. 2022's runs (GPT 22B-1T on DGX A100, full against selective recomputation) in no fit; "
                      "built by tools/make_korthikanti_suite.py from validate/data/korthikanti2022.json",
                      lambda data: [case(r, data["sources"], data["notes"]) for r in data["runs"]])


if __name__ == "__main__":
    main()
