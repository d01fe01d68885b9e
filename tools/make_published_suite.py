#!/usr/bin/env python3
"""Builds validate/suites/published_runs.json from validate/data/training_runs.json.

Every published run with enough configuration becomes one validation case: a trainsim scenario
(the run's model, plan, recipe and cluster) and the values the source measured, in trainsim's
metric names and with the source's FLOP convention respected. Whatever the source does not
state and the scenario needs is an assumption, written into the case's `notes`.

Usage: tools/make_published_suite.py [training_runs.json] [published_runs.json]
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def source_text(src):
    """One line naming where the values were read from."""
    parts = []
    for key in ("paper", "values_read_from", "config_read_from"):
        if key in src:
            parts.append(src[key])
    return "; ".join(parts)


def gpt_model(m, dropout=0.1):
    """GPT-2/3 style: LayerNorm, GeLU, learned positions, tied embeddings, biases."""
    return {
        "name": m["name"],
        "num_layers": m["layers"],
        "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"],
        "ffn_hidden_size": m["ffn_hidden"],
        "vocab_size": m["vocab"] if isinstance(m["vocab"], int) else 50257,
        "seq_length": m["seq_len"],
        "activation": "gelu",
        "normalization": "layernorm",
        "position_embedding_type": "learned_absolute",
        "untie_embeddings_and_output_weights": False,
        "add_bias_linear": True,
        "hidden_dropout": dropout,
        "attention_dropout": dropout,
    }


# GPUs per node of the cluster presets whose nodes are not 8-GPU servers (scenarios/clusters/).
PRESET_GPUS_PER_NODE = {"gb200-nvl72": 64}


def cluster(preset, gpus, gpus_per_node=None):
    gpus_per_node = gpus_per_node or PRESET_GPUS_PER_NODE.get(preset, 8)
    if gpus < gpus_per_node:
        return {"preset": preset, "gpus_per_node": gpus, "num_nodes": 1}
    assert gpus % gpus_per_node == 0, gpus
    return {"preset": preset, "num_nodes": gpus // gpus_per_node}


DEEPSPEED_ZERO3 = ("DeepSpeed ZeRO-3 (2021) with its prefetch, bucket and partition settings unstated: the published "
                   "throughput (44-144 TFLOP/s/GPU, halving as GPUs double at a fixed batch) is about ten times below what "
                   "bucketed NCCL all-gathers of the same bytes take on this fabric, i.e. it measures DeepSpeed's parameter "
                   "partitioning of the time, which trainsim does not model (it models ZeRO-3 as Megatron-Core and PyTorch FSDP "
                   "issue it: one all-gather per layer, prefetched)")


ASYNC_ALLREDUCE_NOTE = ("tensor-parallel input-gradient all-reduces block the backward pass: the asynchronous all-reduce "
                        "came to Megatron-LM in September 2021 (commit 16c90445), after these runs (the SC'21 artifact "
                        "6985e589 all-reduces in the backward of copy_to_tensor_model_parallel_region)")

SCATTER_GATHER_NOTE = ("pipeline tensors sent as 1/TP slices and all-gathered by the receiver (Sec. 4.1 scatter/gather "
                       "optimization; on by default in Megatron-LM from commit 72e4230b, 2021-02-16, and in the SC'21 "
                       "artifact 6985e589)")


def cluster_preset(r, default):
    """The cluster preset of a record's GPU (hardware.gpu); `default` when the record names none."""
    gpu = r.get("hardware", {}).get("gpu", "").upper()
    if not gpu:
        return default
    # GB200 before B200: the one name contains the other.
    for key, preset in (("GB200", "gb200-nvl72"), ("A100-40", "dgx-a100-40gb"), ("A100-SXM4-40", "dgx-a100-40gb"), ("A100-80", "dgx-a100-80gb"),
                        ("A100-SXM4-80", "dgx-a100-80gb"), ("H100", "dgx-h100"), ("H200", "dgx-h200"), ("B200", "dgx-b200")):
        if key in gpu:
            return preset
    if gpu.startswith("A100") and default.endswith("40gb"):
        return default  # "A100-SXM4 (memory not stated ...)": the builder's reading
    raise ValueError("GPU %r of run %s has no cluster preset" % (r["hardware"]["gpu"], r["id"]))


def excluded_reason(r):
    """Why a run cannot be a case, or None."""
    if r["id"].startswith("narayanan2021_table2_zero3"):
        return DEEPSPEED_ZERO3
    if r.get("parallel", {}).get("activation_cpu_offload"):
        return ("activation CPU offload (Composer's activation_cpu_offload: saved activations copied to host "
                "memory and back over PCIe) is not modelled for FSDP runs")
    return None


def narayanan(r):
    """Narayanan et al. 2021 (SC'21) Tables 1 and 2: Megatron-LM on Selene (DGX A100 80GB)."""
    m, p = r["model"], r["parallel"]
    notes = []
    zero3 = p.get("zero_stage") == 3
    tp, pp = p["tp"], p["pp"]
    vp = p.get("virtual_pipeline_stages") or 1
    training = {
        "micro_batch_size": p["micro_batch_size"],
        "global_batch_size": p["global_batch_size"],
        "precision": "fp16",
        "recompute_granularity": "full",
        "recompute_method": "uniform",
        "recompute_num_layers": 1,
        "attention_kernel": "unfused",
        "pipeline_schedule": "interleaved" if vp > 1 else "1f1b",
        "grad_reduce_in_fp32": False,
        "async_tensor_model_parallel_allreduce": False,
        "transformer_impl": "local",
    }
    if pp > 1 and tp > 1 and not zero3:
        training["scatter_gather_tensors_in_pipeline"] = True
    parallelism = {
        "tensor_model_parallel_size": tp,
        "pipeline_model_parallel_size": pp,
        "sequence_parallel": False,
        "use_distributed_optimizer": False,
    }
    if vp > 1:
        parallelism["virtual_pipeline_model_parallel_size"] = vp
    notes.append("attention without a fused kernel (2021 Megatron-LM: QK^T, fused scale-mask-softmax, dropout, PV)")
    notes.append("Megatron-LM's own layers (transformer_impl local: no Transformer Engine in 2021)")
    notes.append("gradients reduced in fp16 (Megatron-LM 2021 default: no --accumulate-allreduce-grads-in-fp32)")
    notes.append(ASYNC_ALLREDUCE_NOTE)
    if training.get("scatter_gather_tensors_in_pipeline"):
        notes.append(SCATTER_GATHER_NOTE)
    if zero3:
        parallelism["zero_stage"] = 3
        notes.append("DeepSpeed ZeRO-3 modelled as trainsim's zero_stage 3 (parameters all-gathered per layer, gradients reduce-scattered per layer)")
        notes.append("full activation recomputation assumed: the paper's Eq. 3 counts it and the activations of one micro-batch do not fit in 80 GB without it")
    else:
        ddp = p.get("ddp_impl", "local")
        training["overlap_grad_reduce"] = ddp == "torch"
        if "ddp_impl" in p:
            notes.append("--DDP-impl %s: %s" % (ddp, "PyTorch DDP buckets overlap the gradient all-reduce with the backward pass"
                                                  if ddp == "torch" else "gradients all-reduced after the backward pass (no overlap)"))
        else:
            notes.append("gradients all-reduced after the backward pass (Megatron local DDP, the default of the time)")
        if p.get("tp_pp_split") == "inferred":
            notes.append("TP/PP split of the model-parallel size inferred by the source (TP 8 within a node); 1F1B without virtual stages")
        if "recompute" in p and "not stated" in p["recompute"]:
            notes.append("full recomputation: the paper default for these runs")
    notes.append("measured TFLOP/s counts recompute FLOPs (Narayanan Eq. 3): compared with hardware_tflops_per_gpu")
    scenario = {
        "name": r["id"],
        "model": gpt_model(m),
        "parallelism": parallelism,
        "training": training,
        "cluster": cluster(cluster_preset(r, "dgx-a100-80gb"), p["num_gpus"]),
    }
    return scenario, {"hardware_tflops_per_gpu": r["measured"]["tflops_per_gpu"]}, notes, "gpt"


def megatron2020(r):
    """Megatron-LM README scaling table (2020): GPT-2 1B-8B on DGX A100, seq 1024, batch 16 per replica."""
    m, p = r["model"], r["parallel"]
    notes = []
    mbs = p.get("micro_batch_size") or p["global_batch_size"] // p["dp"]
    if p.get("micro_batch_size") is None:
        notes.append("micro-batch %d = global batch / data-parallel size (not stated; one micro-batch per iteration)" % mbs)
    notes.append("A100 40GB (DGX A100 of 2020; memory not stated)")
    notes.append("full activation recomputation: the published TFLOP/s equal Eq. 3 with the recompute term at the published iteration time")
    notes.append("attention without a fused kernel (2020 Megatron-LM); gradients all-reduced in fp16 after the backward pass (local DDP, the default of the time)")
    notes.append("Megatron-LM's own layers (transformer_impl local: no Transformer Engine in 2020)")
    notes.append(ASYNC_ALLREDUCE_NOTE)
    if p["dp"] > 1:
        notes.append("nodes connected as a DGX A100 SuperPOD (8 HDR NICs per node; interconnect not stated)")
    scenario = {
        "name": r["id"],
        "model": gpt_model(m),
        "parallelism": {"tensor_model_parallel_size": p["tp"], "pipeline_model_parallel_size": 1, "sequence_parallel": False},
        "training": {
            "micro_batch_size": mbs,
            "global_batch_size": p["global_batch_size"],
            "precision": "fp16",
            "recompute_granularity": "full",
            "recompute_method": "uniform",
            "recompute_num_layers": 1,
            "attention_kernel": "unfused",
            "overlap_grad_reduce": False,
            "grad_reduce_in_fp32": False,
            "async_tensor_model_parallel_allreduce": False,
            "transformer_impl": "local",
        },
        "cluster": cluster(cluster_preset(r, "dgx-a100-40gb"), p["num_gpus"]),
    }
    measured = {"iteration_time_s": r["measured"]["iteration_time_s"],
                "hardware_tflops_per_gpu": r["measured"]["tflops_per_gpu"]}
    return scenario, measured, notes, "gpt"


def nemo_common(r, notes, tp_comm_overlap_default=True):
    """Parallelism and recipe shared by the NVIDIA DGX Cloud and NeMo performance tables."""
    p = r["parallel"]
    tp, pp = p["tp"], p["pp"]
    cp = p.get("cp") or 1
    vp = p.get("virtual_pipeline_stages") or 1
    sp = p.get("sequence_parallel", tp > 1)
    if "sequence_parallel" not in p:
        notes.append("sequence parallelism %s (NeMo default with TP %d)" % ("on" if sp else "off", tp))
    parallelism = {
        "tensor_model_parallel_size": tp,
        "pipeline_model_parallel_size": pp,
        "context_parallel_size": cp,
        "sequence_parallel": bool(sp and tp > 1),
        "use_distributed_optimizer": True,
    }
    if vp > 1:
        parallelism["virtual_pipeline_model_parallel_size"] = vp
    for flag in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"):
        if p.get(flag):
            parallelism[flag] = True
    if "distributed_optimizer" not in p:
        notes.append("distributed optimizer with overlapped gradient reduce-scatter and parameter all-gather, gradients reduced in bf16 (NeMo performance-recipe defaults; not stated)")
    tp_overlap = p.get("tp_comm_overlap", tp_comm_overlap_default and tp > 1 and sp)
    if tp > 1 and "tp_comm_overlap" not in p:
        notes.append("tensor-parallel communication overlap %s (not stated; NeMo performance recipes enable it with TP and SP)" % ("on" if tp_overlap else "off"))
    overlap_p2p = p.get("overlap_p2p_comm", vp > 1)
    if vp > 1 and "overlap_p2p_comm" not in p:
        notes.append("pipeline p2p overlapped with compute (not stated; NeMo default for the interleaved schedule)")
    training = {
        "micro_batch_size": p["micro_batch_size"],
        "global_batch_size": p["global_batch_size"],
        "attention_kernel": "flash",
        "pipeline_schedule": "interleaved" if vp > 1 else "1f1b",
        "overlap_grad_reduce": True,
        "overlap_param_gather": True,
        "tp_comm_overlap": bool(tp_overlap and tp > 1 and sp),
        "overlap_p2p_comm": bool(overlap_p2p and vp > 1),
        "grad_reduce_in_fp32": False,
    }
    if p.get("overlap_param_gather_with_optimizer_step"):
        training["overlap_param_gather_with_optimizer_step"] = True
    return parallelism, training


def recompute_of(text, notes, default="none"):
    text = (text or "").lower()
    if text.startswith("full"):
        return "full"
    if text.startswith("selective"):
        return "selective"
    if text.startswith("none"):
        return "none"
    notes.append("recomputation not stated: assumed %s" % default)
    return default


# The optimizer each v24.11.1 recipe names (dgxc-benchmarking @35a9aecc, optim.name and optim.dtype
# of its yaml): NeMo 1's distributed_fused_adam (Apex's DistributedFusedAdam as NeMo v2.0.0's
# megatron_base_model.py configures it) or Megatron-Core's distributed optimizer.
OPTIMIZER_2411 = [
    ("dgxc_gpt3_175b", "apex_distributed_fused_adam", "fp32", "nemo_megatron/gpt3_175b_hydra.yaml"),
    ("dgxc_llama31", "apex_distributed_fused_adam", "fp32", "llama3.1/llama3.1_{8b,70b,405b}.yaml"),
    ("dgxc_nemotron4_15b", "apex_distributed_fused_adam", "fp32", "nemotron/nemotron4-15b-synth.yaml"),
    ("dgxc_nemotron4_340b", "apex_distributed_fused_adam", "bf16", "nemotron/nemotron4-340b-synth.yaml"),
    ("dgxc_grok1", "megatron_core", "fp32", "grok1/grok1_314b.yaml"),
]


def dgxc(r):
    """NVIDIA DGX Cloud benchmarking recipes (GPT-3 175B, Llama 3.1 8B) on DGX H100 and GB200 NVL72."""
    m, p = r["model"], r["parallel"]
    notes = []
    parallelism, training = nemo_common(r, notes)
    precision = "fp8" if r["precision"].startswith("fp8") else "bf16"
    training["precision"] = precision
    rc = p.get("recompute", "none")
    training["recompute_granularity"] = "none" if ("none" in rc) else recompute_of(rc, notes)
    if "not stated" in rc:
        notes.append("recomputation: " + rc)
    if r["id"].startswith("dgxc_gpt3"):
        model = gpt_model(m, dropout=0.0)
        notes.append("GPT-3 175B with the README's FLOP vocabulary 51,200; dropout 0 (NeMo performance recipes)")
        family = "gpt"
    else:
        act, norm, pos, untied, bias, family = nemo_arch("LLAMA" if r["id"].startswith("dgxc_llama") else m["name"])
        model = {
            "name": m["name"], "num_layers": m["layers"], "hidden_size": m["hidden"],
            "num_attention_heads": m["heads"], "num_query_groups": m.get("kv_heads", m["heads"]),
            "ffn_hidden_size": m["ffn_hidden"], "vocab_size": m["vocab"], "seq_length": m["seq_len"],
            "activation": act, "normalization": norm, "position_embedding_type": pos,
            "untie_embeddings_and_output_weights": untied, "add_bias_linear": bias,
            "hidden_dropout": 0.0, "attention_dropout": 0.0,
        }
        add_experts(model, parallelism, m, p, notes)
        if p.get("moe_grouped_gemm") is False:
            training["moe_grouped_gemm"] = False
            notes.append("experts without grouped GEMM (the recipe's moe_grouped_gemm: false): Megatron-Core's SequentialMLP, "
                         "one MLP per local expert in turn")
        if family == "grok":
            notes.append("GEGLU experts priced as SwiGLU: the same two up-projections and down-projection GEMMs, a GeLU gate instead of SiLU")
    if r["id"].endswith("_v24.11.1"):
        prefix, impl, dtype, yaml = next(o for o in OPTIMIZER_2411 if r["id"].startswith(o[0]))
        if impl == "apex_distributed_fused_adam":
            training["optimizer_implementation"] = impl
            if dtype != "fp32":
                training["optimizer_dtype"] = dtype
            notes.append("optimizer: NeMo 1's distributed_fused_adam (%s: optim.name distributed_fused_adam%s), "
                         "Apex's DistributedFusedAdam as NeMo v2.0.0 configures it" %
                         (yaml, ", optim.dtype bf16: Adam's state in bf16" if dtype == "bf16" else ", state in fp32"))
        else:
            notes.append("optimizer: Megatron-Core's distributed optimizer (%s: optim.name mcore_distributed_optim)" % yaml)
    preset = cluster_preset(r, "dgx-h100")
    if precision == "fp8":
        notes.append("FP8 (Transformer Engine): linear-layer GEMMs in FP8, attention in BF16" +
                     ("; MFU against the FP8 peak (1,979 TFLOP/s) as the source computes it" if preset == "dgx-h100" else ""))
        release = r["id"].rsplit("_v", 1)[-1]
        sharded = parallelism.get("use_distributed_optimizer") or parallelism.get("zero_stage", 0) >= 1
        if int(release.split(".")[0]) >= 25 and sharded:
            # Releases 25.x run NeMo 2's performance scripts: delayed scaling through
            # bf16_with_fp8_mixed, which gathers FP8 parameters.
            training["fp8_param_gather"] = True
            notes.append("FP8 parameters gathered: NeMo's performance scripts (scripts/performance/utils.py @2b03b748, "
                         "v2.3.0, the 25.04 container) use bf16_with_fp8_mixed (delayed scaling), whose "
                         "fp8_param_gather is on (off only under Megatron FSDP)")
        elif release == "24.11.1" and sharded:
            # The 24.11.1 recipes run NeMo 1's launcher configs, and every one of them asks for
            # FP8 parameters in its FP8 runs.
            training["fp8_param_gather"] = True
            notes.append("FP8 parameters gathered: the v24.11.1 recipes set NeMo's fp8_params for their FP8 runs "
                         "(dgxc-benchmarking @35a9aecc: nemo_megatron/gpt3_175b_hydra.yaml 'fp8_params: true'; "
                         "'+model.fp8_params' or 'model.fp8_params' = the FP8 switch in llama3.1/, nemotron/ and "
                         "grok1/configure.sh)")
    if preset == "gb200-nvl72":
        notes.append("GB200 NVL72 racks as 64-GPU NVLink domains (the 16-tray segment NVIDIA recommends for jobs of 128+ GPUs; "
                     "the source does not state the placement), one 400 Gb/s NIC per GPU between domains; the B200 "
                     "calibration (GEMMs from XLA's measured B200 table, attention from cuDNN's GB200 benchmark, "
                     "in-training factors from the H100 fit): no fit has seen a Blackwell training run")
        if p.get("cuda_graphs"):
            notes.append("CUDA graphs on: not modelled (trainsim keeps its per-kernel launch overhead)")
    else:
        notes.append("DGX H100 SuperPOD (EOS): 8 NDR 400 Gb/s NICs per node, rail-optimized")
    scenario = {"name": r["id"], "model": model, "parallelism": parallelism, "training": training,
                "cluster": cluster(preset, p["num_gpus"])}
    measured = {"iteration_time_s": r["measured"]["iteration_time_s"]}
    if "mfu" in r["measured"]:
        measured["mfu"] = r["measured"]["mfu"]
    else:
        notes.append("MFU not compared (the record leaves it out: see its source notes)")
    if "mfu" in measured and m.get("flops_vocab", m["vocab"]) != m["vocab"]:
        # The source's MFU counts a vocabulary the run did not use: compare the time only.
        del measured["mfu"]
        notes.append("MFU not compared: the source's model FLOPs count a vocabulary of %d, the run used %d" % (m["flops_vocab"], m["vocab"]))
    return scenario, measured, notes, family


NEMO_ARCH = {
    # name -> (activation, normalization, position, untied, bias, family)
    "GPT3": ("gelu", "layernorm", "learned_absolute", False, True, "gpt"),
    "LLAMA": ("swiglu", "rmsnorm", "rope", True, False, "llama"),
    "Nemotron": ("squared_relu", "layernorm", "rope", True, False, "nemotron"),
    "Mixtral": ("swiglu", "rmsnorm", "rope", True, False, "mixtral"),
    # Grok-1's gated GeLU (GEGLU) runs the GEMMs of SwiGLU; only the gate's activation differs.
    "Grok": ("swiglu", "rmsnorm", "rope", True, False, "grok"),
}


def nemo_arch(name):
    """NEMO_ARCH's entry for a model name (case-insensitive prefix); ValueError when unknown."""
    for key, arch in NEMO_ARCH.items():
        if name.lower().startswith(key.lower()):
            return arch
    raise ValueError("architecture of model %r not known to tools/make_published_suite.py" % name)


def add_experts(model, parallelism, m, p, notes):
    """Mixture-of-experts fields of a record, if any (expert count, top-k, expert parallelism)."""
    experts = m.get("num_experts") or m.get("experts") or m.get("moe_num_experts")
    if not experts:
        if model["name"].lower().startswith("mixtral"):
            raise ValueError("MoE model %r without an expert count" % model["name"])
        return
    topk = m.get("moe_router_topk") or m.get("moe_topk") or m.get("topk")
    if not topk:
        topk = 2
        notes.append("router top-2 (not stated)")
    model["num_experts"] = experts
    model["moe_router_topk"] = topk
    ep = p.get("ep") or p.get("expert_parallel") or 1
    if ep > 1:
        parallelism["expert_model_parallel_size"] = ep
    if parallelism.get("tensor_model_parallel_size", 1) > 1:
        parallelism["sequence_parallel"] = True


def nemo2407(r):
    """NeMo 24.07 performance summary (FP8 on DGX H100)."""
    m, p = r["model"], r["parallel"]
    notes = []
    parallelism, training = nemo_common(r, notes)
    training["precision"] = "fp8"
    act, norm, pos, untied, bias, family = nemo_arch(m["name"])
    rc = p.get("recompute", "")
    if m["name"].startswith("Nemotron-340B"):
        training["recompute_granularity"] = "selective"
        notes.append("selective recomputation (the source names it for Nemotron-340B)")
    else:
        training["recompute_granularity"] = "none"
        notes.append("no recomputation (not stated: launcher defaults; the source names recomputation only for Nemotron-340B)")
    vocab = m["vocab"] if isinstance(m["vocab"], int) else 50257
    if not isinstance(m["vocab"], int):
        notes.append("vocabulary 50,257 (GPT-2 BPE), padded by trainsim as Megatron pads it")
    model = {
        "name": m["name"], "num_layers": m["layers"], "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"], "num_query_groups": m.get("kv_heads", m["heads"]),
        "ffn_hidden_size": m["ffn_hidden"], "vocab_size": vocab, "seq_length": m["seq_len"],
        "activation": act, "normalization": norm, "position_embedding_type": pos,
        "untie_embeddings_and_output_weights": untied, "add_bias_linear": bias,
        "hidden_dropout": 0.0, "attention_dropout": 0.0,
    }
    add_experts(model, parallelism, m, p, notes)
    if family == "nemotron":
        notes.append("Nemotron: squared-ReLU MLP, LayerNorm (layernorm1p), RoPE, untied embeddings, no biases")
    # Every training config of the launcher's 24.07 tag names NeMo 1's distributed_fused_adam;
    # Nemotron-340B's keeps Adam's state in bf16.
    training["optimizer_implementation"] = "apex_distributed_fused_adam"
    bf16_state = m["name"].startswith("Nemotron-340B")
    if bf16_state:
        training["optimizer_dtype"] = "bf16"
    notes.append("optimizer: NeMo 1's distributed_fused_adam, Apex's DistributedFusedAdam as NeMo configures it (NVIDIA/NeMo-Framework-Launcher "
                 "launcher_scripts/conf/training/*.yaml @24.07: optim.name distributed_fused_adam%s)" %
                 (", optim.dtype bf16 for nemotron_340b: Adam's state in bf16" if bf16_state else ", state in fp32"))
    notes.append("FP8 (Transformer Engine) linear layers, attention in BF16; dropout 0")
    notes.append("DGX H100 nodes with 8 NDR 400 Gb/s NICs, rail-optimized (system not named by the source)")
    gpus = p["num_gpus"]
    tokens = p["global_batch_size"] * m["seq_len"]
    per_gpu = r["measured"]["tokens_per_s_per_gpu"]
    t = tokens / (per_gpu * gpus)
    notes.append("iteration time derived from the published tokens/s/GPU: global batch x seq / (tokens/s/GPU x GPUs)")
    notes.append("published model TFLOP/s/GPU follow Megatron's FLOP formula (checked: GPT3-175B 825 tokens/s/GPU x 1.075 TFLOP/token = 888)")
    scenario = {"name": r["id"], "model": model, "parallelism": parallelism, "training": training,
                "cluster": cluster(cluster_preset(r, "dgx-h100"), gpus)}
    measured = {"iteration_time_s": round(t, 4), "model_tflops_per_gpu": r["measured"]["model_tflops_per_gpu"]}
    return scenario, measured, notes, family


def mosaic(r):
    """MosaicML llm-foundry benchmarks: MPT on A100 and H100 with PyTorch FSDP (Composer)."""
    m, p, h = r["model"], r["parallel"], r["hardware"]
    notes = []
    gpus = p["num_gpus"]
    preset = cluster_preset(r, "dgx-a100-80gb")
    model = {
        "name": m["name"], "num_layers": m["layers"], "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"], "ffn_hidden_size": m["ffn_hidden"], "vocab_size": m["vocab"],
        "make_vocab_size_divisible_by": 1,
        "seq_length": m["seq_len"], "activation": "gelu", "normalization": "layernorm",
        "position_embedding_type": "learned_absolute", "untie_embeddings_and_output_weights": False,
        "add_bias_linear": False, "hidden_dropout": 0.0, "attention_dropout": 0.0,
    }
    notes.append("MPT: ALiBi inside the flash-attention kernel (modelled as learned absolute positions: one extra add in the embedding), no biases, tied embeddings, vocabulary 50,368 unpadded, no dropout")
    notes.append("PyTorch layers under FSDP (transformer_impl local: no Transformer Engine, no Megatron gradient buffers)")
    pure = p.get("fsdp_mixed_precision_mode") == "PURE"
    recompute = "full" if p["recompute"].startswith("full") else "none"
    training = {
        "micro_batch_size": p["micro_batch_size"],
        "global_batch_size": p["global_batch_size"],
        "precision": "bf16",
        "recompute_granularity": recompute,
        "recompute_method": "uniform",
        "recompute_num_layers": 1,
        "attention_kernel": "flash",
        "overlap_grad_reduce": True,
        "grad_reduce_in_fp32": not pure,
        "transformer_impl": "local",
    }
    impl = p.get("attn_impl")
    if impl is not None and not preset.startswith("dgx-a100"):
        # The A100 calibration's own attention is FlashAttention-2 with an in-training scale fitted
        # to these runs (all on MPT's Triton kernel); elsewhere the record's kernel picks the
        # implementation: FlashAttention-2's benchmarks, or MPT's Triton kernel priced as
        # FlashAttention-2 at the speed the A100 fit found for it (the calibration's mpt_triton).
        triton = impl != "flash"
        training["attention_implementation"] = "mpt_triton" if triton else "flash_attention_2"
        notes.append("attention: MPT attn_impl %s (%s), priced %s" % (
            impl, r["source"].get("attention_read_from", "source"),
            "as FlashAttention-2's benchmarks on this GPU at the speed the A100 fit found for the same kernel "
            "(the calibration's mpt_triton alternative)" if triton else "with FlashAttention-2's benchmarks on this GPU"))
    grad_op = "SHARD_GRAD_OP" in p["zero_stage"]
    if grad_op:
        notes.append("PyTorch FSDP SHARD_GRAD_OP modelled as zero_stage 2 (gradients and optimizer states sharded, parameters kept whole)")
    else:
        notes.append("PyTorch FSDP FULL_SHARD modelled as zero_stage 3 (per-layer parameter all-gather and gradient reduce-scatter)")
    notes.append("FSDP mixed precision %s: gradients reduced in %s" % (p.get("fsdp_mixed_precision_mode"), "bf16" if pure else "fp32"))
    if preset.startswith("dgx-a100"):
        fabric = ("the source's 1600 Gbps RoCE per node" if "1600" in h.get("inter_node", "")
                  else "the source does not state the interconnect")
        notes.append("nodes: 8 x A100 SXM %s on NVSwitch with 8 x 200 Gb/s NICs (%s), modelled as a DGX A100 SuperPOD fabric" % ("40GB" if preset.endswith("40gb") else "80GB", fabric))
    else:
        notes.append("nodes: 8 x %s on NVSwitch (the source's %s), modelled as the %s preset" % (h["gpu"], h.get("inter_node", "interconnect"), preset))
    notes.append("iteration time derived from the published tokens/s: global batch x seq / tokens/s; MFU/HFU not compared (the source counts 2 x parameters per token)")
    scenario = {
        "name": r["id"], "model": model,
        "parallelism": {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "zero_stage": 2 if grad_op else 3},
        "training": training,
        "cluster": cluster(preset, gpus),
    }
    t = p["global_batch_size"] * m["seq_len"] / r["measured"]["tokens_per_s"]
    return scenario, {"iteration_time_s": round(t, 4)}, notes, "mpt"


BUILDERS = [
    ("narayanan2021_", narayanan),
    ("megatron_readme2020_", megatron2020),
    ("dgxc_", dgxc),
    ("nemo2407_", nemo2407),
    ("mosaic_", mosaic),
]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "validate/data/training_runs.json")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "validate/suites/published_runs.json")
    runs = json.load(open(src))
    cases = []
    excluded = []
    for r in runs:
        reason = excluded_reason(r)
        if reason is not None:
            excluded.append({"id": r["id"], "source": source_text(r["source"]), "reason": reason})
            continue
        builder = next((b for prefix, b in BUILDERS if r["id"].startswith(prefix)), None)
        if builder is None:
            excluded.append({"id": r["id"], "source": source_text(r["source"]),
                             "reason": "no conversion for this source's records in tools/make_published_suite.py"})
            continue
        try:
            scenario, measured, notes, family = builder(r)
        except (ValueError, KeyError, TypeError) as e:
            reason = str(e) if isinstance(e, ValueError) else "record lacks a field the conversion needs (%s: %s)" % (type(e).__name__, e)
            excluded.append({"id": r["id"], "source": source_text(r["source"]), "reason": reason})
            continue
        if r.get("notes"):
            notes.append("source notes: " + r["notes"])
        cases.append({
            "id": r["id"],
            "family": family,
            "source": source_text(r["source"]),
            "notes": notes,
            "scenario": scenario,
            "measured": measured,
        })
    doc = {
        "description": "Published training runs (validate/data/" + os.path.basename(src) + ") as trainsim scenarios with their measured values. Generated by tools/make_published_suite.py; each case's notes list the assumptions made where the source is silent.",
        "cases": cases,
        "excluded": excluded,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("%d cases, %d excluded -> %s" % (len(cases), len(excluded), out))


if __name__ == "__main__":
    main()
