#!/usr/bin/env python3
"""Builds validate/suites/megatron_bridge_llama.json from validate/data/megatron_bridge_llama.json.

Megatron-Bridge's published pre-training throughput of Llama 3 8B / 70B and Llama 3.1 405B (NeMo
containers 25.09 and 26.04.01; DGX-GB300, DGX-GB200, DGX-B200, DGX-H100) becomes one validation case per row
trainsim can price: the llama3.1 preset of the size, the row's plan and batch, the release's
performance recipe for the rest (each assumption in the case's notes), and the step time the
published tokens/s per GPU give. No fit reads these cases: they
check the calibrations against newer software stacks.

Usage: tools/make_bridge_suite.py [megatron_bridge_llama.json] [megatron_bridge_llama_suite.json]
"""

import suite_files

LAYERS = {"llama3-8b": 32, "llama3-70b": 80, "llama3.1-405b": 126}
PRESETS = {"llama3-8b": "llama3.1-8b", "llama3-70b": "llama3.1-70b", "llama3.1-405b": "llama3.1-405b"}
SYSTEMS = {"DGX-H100": ("dgx-h100", 8, "h100"), "DGX-B200": ("dgx-b200", 8, "b200"), "DGX-GB200": ("gb200-nvl72", 64, "gb200"),
           "DGX-GB300": ("gb300-nvl72", 64, "gb300")}


def run_id(r):
    return "bridge_%s_%s_%s_%dgpu_%s" % (r["model"].replace(".", ""), r["precision"], SYSTEMS[r["system"]][2], r["gpus"],
                                         "v" + r["release"])


def case(r):
    tp, pp, cp, vp = r["tp"], r["pp"], r["cp"], r["vp"]
    big = r["model"] != "llama3-8b"
    parallelism = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp, "context_parallel_size": cp,
                   "sequence_parallel": tp > 1}
    if r["fsdp"]:
        parallelism["zero_stage"] = 3
    else:
        parallelism["use_distributed_optimizer"] = True
    if vp > 1:
        parallelism["virtual_pipeline_model_parallel_size"] = vp
    if r["model"] == "llama3.1-405b" and pp > 1:
        parallelism["account_for_embedding_in_pipeline_split"] = True
        parallelism["account_for_loss_in_pipeline_split"] = True
    recipe = {"fp8_cs": "tensorwise", "fp8_mx": "mxfp8", "nvfp4": "nvfp4"}[r["precision"]]
    if recipe == "nvfp4":
        training = {"micro_batch_size": r["mbs"], "global_batch_size": r["gbs"], "precision": "fp4", "fp4_param_gather": True}
    else:
        training = {"micro_batch_size": r["mbs"], "global_batch_size": r["gbs"], "precision": "fp8", "fp8_recipe": recipe,
                    "fp8_param_gather": True}
    training.update({"recompute_granularity": "none", "attention_kernel": "flash", "overlap_grad_reduce": True,
                     "grad_reduce_in_fp32": False, "tp_comm_overlap": big and tp > 1 and r.get("tp_comm_overlap", True)})
    if not r["fsdp"]:
        # ZeRO-3 prefetches its per-layer gathers anyway.
        training["overlap_param_gather"] = r.get("overlap_param_gather", True)
    if vp > 1:
        training["pipeline_schedule"] = "interleaved"
        training["overlap_p2p_comm"] = True
    if r.get("cpu_offloading_num_layers"):
        # utils/overrides.py: cpu_offloading on, weights not offloaded.
        training["cpu_offloading"] = True
        training["cpu_offloading_num_layers"] = r["cpu_offloading_num_layers"]
        if r["release"] == "25.09":
            training["cpu_offloading_v1"] = True
    padded = r["release"] == "25.09"
    step_overlap = optimizer_step_overlap(r, not padded)
    if step_overlap:
        training["overlap_param_gather_with_optimizer_step"] = True
    notes = [
        "recipe: " + r["recipe"],
        "Llama 3%s as the %s preset (the same shape)" % (" 8B" if r["model"] == "llama3-8b" else " 70B", PRESETS[r["model"]])
        if r["model"] != "llama3.1-405b" else "the llama3.1-405b preset",
        "vocabulary 128,256 %s" % ("padded to a multiple of 128 x TP (make_vocab_size_divisible_by 128)" if padded
                                   else "unpadded (make_vocab_size_divisible_by 1)"),
        precision_note(recipe),
        "step time = global batch x 8,192 / (published tokens/s per GPU x GPUs); model TFLOP/s not compared (Megatron-Bridge "
        "counts the causal half of attention, trainsim Megatron's full score matrix)",
    ]
    if r["fsdp"]:
        notes.append("Megatron FSDP (optim_grads_params, double buffer) over %d ranks modelled as ZeRO stage 3" % r["fsdp"])
    if step_overlap:
        notes.append(step_overlap)
    if not training["tp_comm_overlap"] and big and tp > 1:
        notes.append("no TP communication overlap: the performance scripts turn it off for NVFP4")
    if not training.get("overlap_param_gather", True):
        notes.append("parameter gathers not overlapped (align_param_gather off with them): the scripts' peak-memory workaround for "
                     "this NVFP4 row (disable_param_gather_overlap)")
    if r.get("cpu_offloading_num_layers"):
        v1 = r["release"] == "25.09"
        notes.append("activations of the first %d of %d layers offloaded to the Grace CPU's memory (%s: cpu_offloading with "
                     "cpu_offloading_num_layers %d, weights not offloaded; %s)" %
                     (r["cpu_offloading_num_layers"], LAYERS[r["model"]], "utils/helpers.py" if v1 else "utils/overrides.py",
                      r["cpu_offloading_num_layers"],
                      "Transformer Engine 2.7's scheduler, the only one before 2.10: cpu_offloading_v1" if v1 else
                      "Transformer Engine 2.14's default schedule"))
    if r.get("cuda_graphs"):
        notes.append("CUDA graphs on in the recipe: not modelled (trainsim keeps its per-kernel launch overhead)")
    model = {"preset": PRESETS[r["model"]], "make_vocab_size_divisible_by": 128 if padded else 1}
    return bridge_case(r, run_id(r), model, parallelism, training, notes,
                       "the segment NVIDIA recommends for jobs of 128+ GPUs; the source does not state the placement")


def precision_note(recipe):
    """The case note on the row's low-precision recipe."""
    if recipe == "nvfp4":
        return ("NVFP4 (Megatron-Bridge's 'nvfp4', bf16_with_nvfp4_mixed): precision fp4 with fp4_param_gather; trainsim prices "
                "its FP4 GEMMs at the NVFP4 / FP8 kernel ratio Transformer Engine measured on B300 (no B200 or GB200 FP4 GEMM "
                "measurement exists)")
    return (("FP8 current scaling (Megatron-Bridge's 'cs'): fp8_recipe tensorwise" if recipe == "tensorwise" else
             "MXFP8 (Megatron-Bridge's 'mx'): fp8_recipe mxfp8") + "; FP8 parameters gathered (the recipe's fp8_param_gather; "
            "the performance scripts turn off its BF16 first and last layers)")


def optimizer_step_overlap(r, v042):
    """The note when the release's performance scripts turn on overlap_param_gather_with_optimizer_step
    for row `r` (v0.1.0rc4 scripts/performance/run_script.py: DP, PP and VP > 1; v0.4.2
    utils/overrides.py, set_post_overrides: also not with MXFP8), else None."""
    dp = r["gpus"] // (r["tp"] * r["pp"] * r["cp"])
    if r.get("fsdp") or dp <= 1 or r["pp"] <= 1 or r["vp"] <= 1 or (v042 and r["precision"] in ("fp8_mx", "nvfp4")):
        return None
    return ("overlap_param_gather_with_optimizer_step on: the first model chunk's parameters gathered while the other chunks' "
            "optimizer step runs (the performance scripts set it with DP, PP and VP > 1%s)" %
            (", not with MXFP8 or NVFP4; utils/overrides.py, set_post_overrides" if v042 else "; run_script.py"))


def bridge_case(r, case_id, model, parallelism, training, notes, placement):
    """The validation case of published row `r`: its system's cluster (a GB200 row's GPUs in one
    NVLink domain, or 64-GPU domains as `placement` says), the row's notes after `notes`, and the
    step time its tokens/s per GPU give."""
    preset, per_node, gpu = SYSTEMS[r["system"]]
    if per_node == 64 and r["gpus"] < 64:
        cluster = {"preset": preset, "gpus_per_node": r["gpus"], "num_nodes": 1}
    else:
        cluster = {"preset": preset, "num_nodes": r["gpus"] // per_node}
    if per_node == 64:
        notes.append(r["system"][4:] + " NVL72: " + ("the %d GPUs in one NVLink domain" % r["gpus"] if r["gpus"] < 64 else
                                        "64-GPU NVLink domains (%s)" % placement))
    notes += r.get("notes", [])
    return {
        "id": case_id,
        "family": gpu,
        "source": r["source"],
        "notes": notes,
        "scenario": {"name": case_id, "model": model, "parallelism": parallelism, "training": training, "cluster": cluster},
        "measured": {"iteration_time_s": round(r["gbs"] * r["seq"] / (r["tokens_per_s_per_gpu"] * r["gpus"]), 4)},
    }


def cases(data):
    """Every published row as a case; none is excluded."""
    for r in data["runs"]:
        assert r["gpus"] % (r["tp"] * r["pp"] * r["cp"]) == 0, r
    return [case(r) for r in data["runs"]], []


def main():
    suite_files.build("validate/data/megatron_bridge_llama.json", "validate/suites/megatron_bridge_llama.json",
                      "Megatron-Bridge's published Llama pre-training throughput (NeMo 25.09 and 26.04.01; GB300, GB200, B200, H100; "
                      "FP8 and NVFP4) in no fit; built by tools/make_bridge_suite.py from validate/data/megatron_bridge_llama.json", cases)


if __name__ == "__main__":
    main()
