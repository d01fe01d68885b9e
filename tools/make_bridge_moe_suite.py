#!/usr/bin/env python3
"""Builds validate/suites/megatron_bridge_moe.json from validate/data/megatron_bridge_moe.json.

Megatron-Bridge's published pre-training throughput of Qwen3-30B-A3B, Qwen3-235B-A22B, DeepSeek-V3
and GPT-OSS 120B (NeMo container 26.04.01; DGX-GB200, DGX-B200, DGX-H100) becomes one validation case
per row: the model's preset, the row's plan and batch, the release's performance recipe for the
rest (each assumption in the case's notes), and the step time the published tokens/s per GPU
give. No fit reads these cases: they check the mixture-of-experts model on a current software
stack.

Usage: tools/make_bridge_moe_suite.py [megatron_bridge_moe.json] [megatron_bridge_moe_suite.json]
"""

import suite_files
from make_bridge_suite import SYSTEMS, bridge_case, optimizer_step_overlap

DISPATCHERS = {
    "alltoall": "Megatron-Core's alltoall token dispatcher (moe_token_dispatcher_type alltoall)",
    "hybridep": "the flex dispatcher with HybridEP (moe_flex_dispatcher_backend hybridep, 32 SMs), priced as trainsim's flex "
                "dispatcher: each token sent once to each node holding one of its experts",
    "deepep": "the flex dispatcher with DeepEP (moe_flex_dispatcher_backend deepep), trainsim's flex dispatcher",
}


def run_id(r):
    return "bridge_%s_%s_%s_%dgpu_v%s" % (r["model"].replace(".", ""), r["precision"], SYSTEMS[r["system"]][2], r["gpus"], r["release"])


def case(r):
    tp, pp, vp = r["tp"], r["pp"], r["vp"]
    parallelism = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp, "context_parallel_size": r["cp"],
                   "expert_model_parallel_size": r["ep"], "expert_tensor_parallel_size": r["etp"], "sequence_parallel": tp > 1,
                   "use_distributed_optimizer": True}
    if vp > 1:
        parallelism["virtual_pipeline_model_parallel_size"] = vp
    if "pipeline_model_parallel_layout" in r:
        parallelism["pipeline_model_parallel_layout"] = r["pipeline_model_parallel_layout"]
    elif pp > 1 and r.get("pipeline_split_counts_embedding_and_loss", True):
        parallelism["account_for_embedding_in_pipeline_split"] = True
        parallelism["account_for_loss_in_pipeline_split"] = True
    recipe = {"fp8_cs": "tensorwise", "fp8_mx": "mxfp8", "bf16": None}[r["precision"]]
    training = {"micro_batch_size": r["mbs"], "global_batch_size": r["gbs"], "precision": "fp8" if recipe else "bf16"}
    if recipe:
        training.update({"fp8_recipe": recipe, "fp8_param_gather": True})
    training.update({"attention_kernel": "flash", "overlap_grad_reduce": True, "overlap_param_gather": True,
                     "grad_reduce_in_fp32": False, "tp_comm_overlap": False,
                     "moe_token_dispatcher_type": "alltoall" if r["dispatcher"] == "alltoall" else "flex"})
    if r.get("recompute_modules"):
        training.update({"recompute_granularity": "selective", "recompute_modules": r["recompute_modules"]})
    else:
        training["recompute_granularity"] = "none"
    if vp > 1:
        training["pipeline_schedule"] = "interleaved"
        training["overlap_p2p_comm"] = True
    if "precision_aware_optimizer" in r:
        training["use_precision_aware_optimizer"] = True
        training.update(r["precision_aware_optimizer"])
    if r["moe_a2a_overlap"]:
        training["overlap_moe_expert_parallel_comm"] = True
        training["delay_wgrad_compute"] = True
    step_overlap = optimizer_step_overlap(r, True)
    if step_overlap:
        training["overlap_param_gather_with_optimizer_step"] = True
    notes = [
        "recipe: " + r["recipe"],
        "token dispatch: " + DISPATCHERS[r["dispatcher"]],
        ("FP8 current scaling (Megatron-Bridge's 'cs'): fp8_recipe tensorwise, every layer in FP8" if recipe == "tensorwise" else
         "MXFP8 (Megatron-Bridge's 'mx'): fp8_recipe mxfp8" if recipe else "BF16") +
        ("; FP8 parameters gathered (fp8_param_gather)" if recipe else ""),
        "EP all-to-all overlap: " + ("overlap_moe_expert_parallel_comm with delay_wgrad_compute" if r["moe_a2a_overlap"] else "off"),
        "the router's load forced balanced and no token dropped, as the table's footnote states (trainsim's MoE model assumes a "
        "balanced router)",
        "step time = global batch x %s / (published tokens/s per GPU x GPUs); model TFLOP/s not compared (Megatron-Bridge's formula "
        "counts the causal half of attention, trainsim Megatron's full score matrix)" % format(r["seq"], ","),
    ]
    if r["cuda_graph_scope"]:
        notes.append("Transformer Engine CUDA graphs over %s: not modelled (trainsim keeps its per-kernel launch overhead)" %
                     ", ".join(r["cuda_graph_scope"]))
    if step_overlap:
        notes.append(step_overlap)
    if r["model"].startswith("qwen3"):
        notes.append("vocabulary 151,936 unpadded (the Hugging Face config's, which the runtime keeps)")
    if r["model"] == "gpt-oss-120b":
        notes.append("the recipe's precision-aware optimizer (set_post_overrides for BF16) with fp32 moments: Transformer Engine's "
                     "FusedAdam holds the fp32 master weights and reads the bf16 gradients as reduced")
        notes.append("attention sinks (one learned logit per head in the softmax) not priced: they add no GEMM work")
    model = {"preset": r["model"]}
    if r["model"].startswith("qwen3"):
        model["make_vocab_size_divisible_by"] = 1
    return bridge_case(r, run_id(r), model, parallelism, training, notes, "the launch scripts' --segment of 16 nodes")

def cases(data):
    made = []
    for r in data["runs"]:
        assert r["gpus"] % (r["tp"] * r["pp"] * r["cp"]) == 0, r
        made.append(case(r))
    return made


def main():
    suite_files.build("validate/data/megatron_bridge_moe.json", "validate/suites/megatron_bridge_moe.json",
                      "Megatron-Bridge's published mixture-of-experts pre-training throughput (NeMo 26.04.01; Qwen3-30B-A3B, "
                      "Qwen3-235B-A22B, DeepSeek-V3, GPT-OSS 120B on GB200, B200, H100; MXFP8, FP8 and BF16) in no fit; built by "
                      "tools/make_bridge_moe_suite.py from validate/data/megatron_bridge_moe.json", cases)


if __name__ == "__main__":
    main()
