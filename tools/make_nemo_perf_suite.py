#!/usr/bin/env python3
"""Builds validate/suites/nemo_perf_summary.json from validate/data/nemo_perf_summary.json.

NVIDIA's NeMo Framework performance summary for NeMo 2 on Blackwell (the NeMo 25.02 table on
DGX-B200, the NeMo 25.04 table on DGX-GB200: GPT-3 175B, Llama 3 8B / 70B, Llama 3.1 405B,
Nemotron-4 15B / 340B, Mixtral 8x7B and 8x22B, all FP8) becomes one validation case per row: the
model's preset, the row's plan and batch, the release's performance recipe for the rest (each
assumption in the case's notes), and the step time the published tokens/s per GPU give. No fit
reads these cases.

Usage: tools/make_nemo_perf_suite.py [nemo_perf_summary.json] [nemo_perf_summary_suite.json]
"""

import make_bridge_suite
import suite_files

PRESETS = {"gpt3-175b": "gpt3-175b", "llama3-8b": "llama3.1-8b", "llama3-70b": "llama3.1-70b", "llama3.1-405b": "llama3.1-405b",
           "nemotron4-15b": "nemotron4-15b", "nemotron4-340b": "nemotron4-340b", "mixtral-8x7b": "mixtral-8x7b",
           "mixtral-8x22b": "mixtral-8x22b"}
SYSTEMS = make_bridge_suite.SYSTEMS
# The recipes whose performance mode asks MegatronCommOverlapCallback for TP communication overlap
# (tp_comm_overlap=True in nemo/collections/llm/recipes/{gpt3_175b,llama3_70b,llama31_405b,nemotron4_340b}.py
# at v2.2.0 and v2.3.0); the callback leaves it off otherwise (_get_model_comm_overlap_cfgs).
TP_OVERLAP = {"gpt3-175b", "llama3-70b", "llama3.1-405b", "nemotron4-340b"}


def run_id(r):
    return "nemo_%s_fp8_%s_%dgpu_v%s" % (r["model"].replace(".", ""), SYSTEMS[r["system"]][2], r["gpus"], r["release"])


def case(r):
    tp, pp, cp, vp, ep = r["tp"], r["pp"], r["cp"], r["vp"], r["ep"]
    dp = r["gpus"] // (tp * pp * cp)
    fsdp = bool(r.get("fsdp"))
    current_scaling = r["release"] != "25.02"
    notes = ["recipe: " + r["recipe"]]
    model = {"preset": PRESETS[r["model"]], "seq_length": r["seq"]}
    if r["model"] != PRESETS[r["model"]]:
        notes.append("%s as the %s preset (the same shape)" % (r["model"], PRESETS[r["model"]]))
    if r["model"] == "gpt3-175b":
        model.update({"hidden_dropout": 0.0, "attention_dropout": 0.0})
        notes.append("dropout 0 (NeMo's performance recipes)")
    parallelism = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp, "context_parallel_size": cp,
                   "sequence_parallel": tp > 1}
    if fsdp:
        parallelism["zero_stage"] = 3
        notes.append("Megatron FSDP (use_mcore_fsdp: data_parallel_sharding_strategy optim_grads_params) over %d ranks modelled as "
                     "ZeRO stage 3; FP8 parameters not gathered under it (utils.py disables fp8_param_gather)" % dp)
    else:
        parallelism["use_distributed_optimizer"] = True
    if vp > 1:
        parallelism["virtual_pipeline_model_parallel_size"] = vp
    if ep > 1:
        parallelism["expert_model_parallel_size"] = ep
        parallelism["expert_tensor_parallel_size"] = 1
    if r["model"] == "llama3.1-405b" and pp > 1:
        # 126 layers split evenly over PP x VP only with the embedding and the loss as a layer each.
        parallelism["account_for_embedding_in_pipeline_split"] = True
        parallelism["account_for_loss_in_pipeline_split"] = True
        notes.append("126 layers over PP %d x VP %d with the embedding and the loss counted as one layer each "
                     "(Megatron-Core's account_for_embedding/loss_in_pipeline_split), as for the DGX Cloud rows of this model" % (pp, vp))
    training = {"micro_batch_size": r["mbs"], "global_batch_size": r["gbs"], "precision": "fp8",
                "fp8_recipe": "tensorwise" if current_scaling else "delayed", "recompute_granularity": "none",
                "attention_kernel": "flash", "overlap_grad_reduce": True, "grad_reduce_in_fp32": False}
    if not fsdp:
        training["fp8_param_gather"] = True
        training["overlap_param_gather"] = True
    if current_scaling:
        training["first_last_layers_bf16"] = True
        notes.append("FP8 per-tensor current scaling, as the table states (bf16_with_fp8_current_scaling_mixed: fp8_recipe "
                     "tensorwise, the first and the last layer in BF16%s); attention in BF16" %
                     ("" if fsdp else ", FP8 parameters gathered"))
    else:
        notes.append("FP8 delayed scaling (bf16_with_fp8_mixed, the v2.2.0 scripts' FP8: fp8_params on, so FP8 parameters "
                     "gathered); attention in BF16")
    tp_overlap = r["model"] in TP_OVERLAP and tp > 1
    training["tp_comm_overlap"] = tp_overlap
    if tp > 1:
        notes.append("TP communication overlap %s (the recipe's MegatronCommOverlapCallback%s)" %
                     (("on", "(tp_comm_overlap=True)") if tp_overlap else ("off", ", which the Mixtral recipes leave at its default")))
    if vp > 1:
        training["pipeline_schedule"] = "interleaved"
        training["overlap_p2p_comm"] = True
        notes.append("interleaved schedule with p2p overlapped (the callback: overlap_p2p_comm with virtual stages)")
    if not fsdp and dp > 1 and pp > 1 and vp > 1:
        training["overlap_param_gather_with_optimizer_step"] = True
        notes.append("overlap_param_gather_with_optimizer_step on (set_primary_perf_configs: DP, PP and VP > 1)")
    if r["model"].startswith("mixtral"):
        training["moe_token_dispatcher_type"] = "alltoall"
        notes.append("Mixtral: alltoall token dispatcher (MixtralConfig), one local expert per GPU at EP 8; the recipe's "
                     "MegatronTokenDropCallback pads every expert to capacity factor 1, so each gets the same token count, "
                     "as trainsim's router assumes")
    if r["cuda_graphs"]:
        notes.append("CUDA graphs on in the recipe: not modelled (trainsim keeps its per-kernel launch overhead)")
    notes.append("step time = global batch x %d / (published tokens/s per GPU x GPUs)" % r["seq"])
    # The published TFLOP/s follow Megatron's formula (the full score matrix), which trainsim's
    # model FLOPs use, in every row but Mixtral 8x22B's: NeMo counts the causal half of attention
    # there (0.369 TFLOP per token at 65,536 tokens against the full formula's 0.504).
    causal = r["model"] == "mixtral-8x22b"
    compare_tflops = "model_tflops_per_gpu" in r and not causal
    if compare_tflops:
        notes.append("model TFLOP/s per GPU compared too: at the published tokens/s the published figure follows Megatron's formula"
                     + (" but for 1.0% more per token" if r["model"] == "llama3.1-405b" else " (within 0.1%)"))
    elif causal:
        notes.append("model TFLOP/s not compared: NeMo's figure for this row counts the causal half of attention (36.6% below "
                     "Megatron's full score matrix per token at 65,536 tokens), trainsim's model FLOPs the full one")
    c = make_bridge_suite.bridge_case(r, run_id(r), model, parallelism, training, notes,
                                      "the segment NVIDIA recommends for jobs of 128+ GPUs; the source does not state the placement")
    if compare_tflops:
        c["measured"]["model_tflops_per_gpu"] = r["model_tflops_per_gpu"]
    return c


def cases(data):
    """Every published row as a case; none is excluded."""
    for r in data["runs"]:
        dp = r["gpus"] // (r["tp"] * r["pp"] * r["cp"])
        assert r["gbs"] == r["mbs"] * dp * r["ga"], r
    return [case(r) for r in data["runs"]], []


def main():
    suite_files.build("validate/data/nemo_perf_summary.json", "validate/suites/nemo_perf_summary.json",
                      "NVIDIA's NeMo Framework performance summary on Blackwell (NeMo 25.02 on DGX-B200, NeMo 25.04 on DGX-GB200; "
                      "GPT-3, Llama 3, Nemotron-4, Mixtral; FP8) in no fit; built by tools/make_nemo_perf_suite.py from "
                      "validate/data/nemo_perf_summary.json", cases)


if __name__ == "__main__":
    main()
