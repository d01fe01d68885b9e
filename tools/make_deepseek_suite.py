#!/usr/bin/env python3
"""Builds validate/suites/dgxc_deepseek_v3.json from validate/data/dgxc_deepseek_v3.json.

DGX Cloud's DeepSeek-V3 pre-training runs (BF16: release 25.05's tables, 512 and 1,024 H100 and 128
to 512 GB200; the 25.08 and 25.10 READMEs' example runs, 1,024 H100 and 256 GB200) become one
validation case per run: the deepseek-v3 preset (latent attention, 256 routed experts and a shared
one, three dense layers, one multi-token-prediction module), the run's TP/PP/EP and batch, its
release's performance recipe for the rest (each assumption in the case's notes), and the
published step time and model TFLOP/s per GPU. No fit reads these cases: they check the
mixture-of-experts model at scale.

Usage: tools/make_deepseek_suite.py [dgxc_deepseek_v3.json] [dgxc_deepseek_v3_suite.json]
"""

import suite_files


CLUSTERS = {"h100": ("dgx-h100", 8), "gb200": ("gb200-nvl72", 64)}


def case(run, data):
    preset, per_node = CLUSTERS[run["gpu"]]
    gpus, pp = run["gpus"], run["pp"]
    release = run.get("release", "25.05")
    run_id = "dgxc_deepseek_v3_bf16_%s_%dgpu_v%s" % (run["gpu"], gpus, release)
    parallelism = {
        "tensor_model_parallel_size": run["tp"],
        "pipeline_model_parallel_size": pp,
        "expert_model_parallel_size": run["ep"],
        "expert_tensor_parallel_size": run["etp"],
        "sequence_parallel": run["tp"] > 1,
        "use_distributed_optimizer": True,
    }
    training = {
        "micro_batch_size": run["mbs"],
        "global_batch_size": run["gbs"],
        "precision": "bf16",
        "recompute_granularity": "selective",
        "recompute_modules": run["recompute_modules"],
        "overlap_grad_reduce": True,
        "overlap_param_gather": True,
        "tp_comm_overlap": False,
    }
    notes = ["recipe: " + run.get("recipe", data["recipe"])]
    if "layout" in run:
        # The later recipes' explicit layouts: one MTP module built with the loss on the last stage.
        parallelism["virtual_pipeline_model_parallel_size"] = run["vp"]
        parallelism["pipeline_model_parallel_layout"] = run["layout"]
        training["overlap_p2p_comm"] = True
        notes.append("pipeline layout %s: the recipe's layout for PP %d x %d virtual, the MTP module ('m') with the loss on "
                     "the last virtual stage" % (run["layout"], pp, run["vp"]))
    else:
        middle = 64 // pp  # NeMo's split: 64 / PP - 1 layers first, 64 / PP - 2 last (61 = 3 + 58 layers)
        parallelism["decoder_first_pipeline_num_layers"] = middle - 1
        parallelism["decoder_last_pipeline_num_layers"] = middle - 2
        notes.append("first / last pipeline stage %d / %d layers, %d on each other stage (NeMo's split with the MTP module "
                     "on the last)" % (middle - 1, middle - 2, middle))
    notes += [
        "BF16; distributed optimizer with overlapped gradient reduction and parameter gather%s (the recipe's performance "
        "defaults)" % (", sequence parallelism" if run["tp"] > 1 else ""),
        "recompute_modules %s under selective granularity (launch.sh)" % ", ".join(run["recompute_modules"]),
        "published TFLOPS_per_GPU counts the MTP module (Megatron's formula), as trainsim's model TFLOP/s does",
    ]
    if "exactness" in run:
        notes.append("measurement: " + run["exactness"])
    if run.get("dispatcher") == "flex":
        training["moe_token_dispatcher_type"] = "flex"
        notes.append("token dispatcher flex with DeepEP and forced load balancing: a node-aggregated multicast (each token "
                     "crosses once to each node holding one of its 8 experts, then NVLink), with the preset's group-limited "
                     "routing (8 groups, 4 per token: one group per node of the EP group here) and balanced routing")
    if release == "25.10":
        training.update({"use_precision_aware_optimizer": True, "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16",
                         "moe_shared_expert_overlap": True})
        notes.append("the recipe's moe_shared_expert_overlap (the shared expert's fc1 beside the dispatch all-to-all, fc2 "
                     "beside the combine's; SM sharing with the NCCL kernels not modelled) and its precision-aware "
                     "optimizer with bf16 moments and gradients (the fp32 master weights held by Transformer Engine's "
                     "FusedAdam as 16-bit remainders of the bf16 weights)")
    if run["gpu"] == "gb200":
        notes.append("GB200 NVL72 racks as 64-GPU NVLink domains (the 16-tray segment NVIDIA recommends for jobs of "
                     "128+ GPUs; the source does not state the placement); the b200 calibration: no fit has seen a "
                     "Blackwell training run")
    return {
        "id": run_id,
        "family": "deepseek-v3-" + run["gpu"],
        "source": run.get("source", data["source"]),
        "notes": notes,
        "scenario": {
            "name": run_id,
            "model": {"preset": "deepseek-v3"},
            "parallelism": parallelism,
            "training": training,
            "cluster": {"preset": preset, "num_nodes": gpus // per_node},
        },
        "measured": {"iteration_time_s": run["step_time_s"], "model_tflops_per_gpu": run["tflops_per_gpu"]},
    }


def cases(data):
    for run in data["runs"]:
        assert run["tp"] * run["pp"] * run["dp"] == run["gpus"], run
    return [case(r, data) for r in data["runs"]]


def main():
    suite_files.build("validate/data/dgxc_deepseek_v3.json", "validate/suites/dgxc_deepseek_v3.json",
                      "DGX Cloud's DeepSeek-V3 pre-training runs (H100 and GB200, BF16) in no fit; built by "
                      "tools/make_deepseek_suite.py from validate/data/dgxc_deepseek_v3.json", cases)


if __name__ == "__main__":
    main()
