#!/usr/bin/env python3
"""Builds validate/suites/simumax_b200.json from validate/data/simumax_b200.json.

The SimuMax project measured Megatron-LM training steps on one 8-GPU B200 node: Llama 3 70B cut
to 12 layers and Llama 3.1 405B cut to 4 layers, TP 1-8, PP 1-2, DP 1-4, 4 to 32 micro-batches of
one 4,096-token sequence, with nothing overlapped; and, with context parallelism over all-to-alls
(--cp-comm-type a2a) on 4 or 8 GPUs, four micro-batches of one 32,768- or 131,072-token sequence.
Each row becomes one case comparing the step time and, in the run that measured it, the largest
peak memory PyTorch allocated on any rank. No fit reads these cases: they check the Blackwell
model in BF16 on a plain Megatron stack.

The DeepSeek-V2/V3 rows (cut to 4 layers, EP 4-8) are cases too.

Usage: tools/make_simumax_b200_suite.py [simumax_b200.json] [simumax_b200_suite.json]
"""

import suite_files


# The launchers' shapes (simu_tools/megatron_scripts/scripts/run_pretrain_llama3.sh and
# run_pretrain_deepseekv2.sh: the first layer dense, the others MoE, no multi-token prediction;
# DeepSeek-V2 on DeepSeek-V3's preset with V2's sizes, as that launcher sets them).
DEEPSEEK = {"moe_layer_freq": [0, 1, 1, 1], "mtp_num_layers": 0}
MODELS = {
    "llama3-70b": {"preset": "llama3.1-70b"},
    "llama3-405b": {"preset": "llama3.1-405b", "num_query_groups": 16},
    "deepseekv3": dict(DEEPSEEK, preset="deepseek-v3"),
    "deepseekv2": dict(DEEPSEEK, preset="deepseek-v3", name="DeepSeek-V2 (the launcher's shapes)", hidden_size=5120,
                       ffn_hidden_size=12288, vocab_size=102400, num_experts=160, moe_router_topk=6,
                       moe_ffn_hidden_size=1536, moe_shared_expert_intermediate_size=3072),
}
VOCAB = {"llama3-70b": 128256, "llama3-405b": 128256, "deepseekv3": 129280, "deepseekv2": 102400}
FAMILIES = {"llama3-70b": "llama3-70b-l12-b200", "llama3-405b": "llama3-405b-l4-b200",
            "deepseekv3": "deepseek-v3-l4-b200", "deepseekv2": "deepseek-v2-l4-b200"}
DEEPSEEK_NOTE = ("DeepSeek launcher (run_pretrain_deepseekv2.sh): multi-latent attention (q rank 1,536, kv rank 512, "
                 "heads of 128 + 64 and 128), the first layer dense, the rest MoE with a shared expert, alltoall "
                 "dispatcher, grouped GEMMs, permute fusion, capacity factor 1 with the expert inputs padded to "
                 "capacity (every expert gets the same token count: trainsim's balanced router), group-limited "
                 "routing over EP groups (no cost of its own here), no multi-token prediction; the rest as the Llama "
                 "launcher (bf16, fp32 gradient reduction, distributed optimizer, no recomputation, nothing overlapped)")


def source(sources):
    return "%s; %s; %s" % (sources["measurements"], sources["configuration"], sources["software"])


def case(row, sources, common_notes):
    tp, pp, dp, cp, ep = row["tp"], row["pp"], row["dp"], row["cp"], row["ep"]
    model = dict(MODELS[row["model"]])
    model.update({"num_layers": row["layers"], "seq_length": row["seq_length"], "vocab_size": VOCAB[row["model"]],
                  "make_vocab_size_divisible_by": 128})
    measured = {"iteration_time_s": round(row["measured"]["iteration_ms"] / 1000.0, 6)}
    notes = list(common_notes) + [
        "%s cut to %d layers, %d-way data parallel x %d micro-batches of one sequence: global batch %d"
        % (model.get("name", model["preset"]), row["layers"], dp, row["num_microbatches"], dp * row["num_microbatches"]),
        "step time: the smallest of iterations 2 and later on rank %d (%s)"
        % (row["measured"]["timing_rank"], ", ".join(str(i) for i in row["measured"]["timed_iterations"])),
    ]
    if row["measured"]["memory_measured_in_case"] == row["case"]:
        by_rank = row["measured"]["peak_allocated_mib_by_rank"]
        measured["peak_memory_bytes"] = int(round(max(by_rank.values()) * 1048576))
        notes.append("peak memory: the largest torch.cuda.max_memory_allocated() of the 8 ranks (MiB by rank: %s)"
                     % ", ".join("%.0f" % by_rank[k] for k in sorted(by_rank, key=int)))
    else:
        notes.append("peak memory measured once per topology, in %s" % row["measured"]["memory_measured_in_case"])
    return {
        "id": "simumax_b200_" + row["case"],
        "family": FAMILIES[row["model"]],
        "source": source(sources),
        "notes": notes,
        "scenario": {
            "name": row["case"],
            "model": model,
            "parallelism": {
                "tensor_model_parallel_size": tp,
                "pipeline_model_parallel_size": pp,
                "sequence_parallel": tp > 1,
                "use_distributed_optimizer": True,
            } | ({"expert_model_parallel_size": ep} if ep > 1 else {})
              | ({"context_parallel_size": cp, "cp_comm_type": "a2a"} if cp > 1 else {}),
            "training": {
                "micro_batch_size": 1,
                "global_batch_size": dp * row["num_microbatches"],
                "precision": "bf16",
                "recompute_granularity": "none",
                "attention_kernel": "flash",
                "overlap_grad_reduce": False,
                "overlap_param_gather": False,
                "grad_reduce_in_fp32": True,
                "tp_comm_overlap": False,
                "cross_entropy_loss_fusion": True,
                "cross_entropy_fusion_impl": "te",
            },
            "cluster": {"preset": "dgx-b200", "num_nodes": 1},
        },
        "measured": measured,
    }


def excluded(row, sources):
    reason = "model %s has no scenario here" % row["model"]
    return {"id": "simumax_b200_" + row["case"], "source": source(sources), "reason": reason}


def make(data):
    def kept(row):
        return row["model"] in MODELS

    def notes(row):
        return ([DEEPSEEK_NOTE] if row["model"].startswith("deepseek") else data["notes"][:1]) + [data["notes"][2]]

    cases = [case(r, data["sources"], notes(r)) for r in data["rows"] if kept(r)]
    left_out = [excluded(r, data["sources"]) for r in data["rows"] if not kept(r)]
    return cases, left_out


def main():
    suite_files.build("validate/data/simumax_b200.json", "validate/suites/simumax_b200.json",
                      "SimuMax's Megatron-LM runs on one 8-GPU B200 node (Llama 3 70B cut to 12 layers, Llama 3.1 "
                      "405B cut to 4; BF16, nothing overlapped): step time and peak allocated memory, in no fit; built "
                      "by tools/make_simumax_b200_suite.py from validate/data/simumax_b200.json", make)


if __name__ == "__main__":
    main()
