#pragma once
// Hardware descriptions: GPUs, nodes, networks, and the calibration parameters of the compute
// and collective models. Plain value types, validated once when they are read (config/), then
// immutable. Every number in the shipped presets cites its source there, not here.

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/task_graph.h"
#include "sim/units.h"

namespace trainsim::topo {

using sim::Bandwidth;
using sim::Bytes;
using sim::DataType;
using sim::Duration;
using sim::FlopRate;

enum class Architecture : std::uint8_t { kAmpere, kHopper, kBlackwell };
const char* to_string(Architecture a);

// GEMM model parameters for one data type (see ComputeModel).
struct GemmCalibration {
  double max_efficiency = 0.8;    // sustained fraction of the dense peak inside a full wave
  Duration wave_overhead;         // fixed cost per wave of tiles (prologue, epilogue, sync)
  Duration launch_overhead;       // per kernel
  std::vector<std::array<std::int64_t, 2>> tiles{{128, 128}};  // candidate CTA tiles (m, n)
  bool operator==(const GemmCalibration&) const = default;
};

// Fused attention (FlashAttention, cuDNN) parameters for one pass (see ComputeModel). The kernel
// works on tiles of `tile` query rows x `tile` key rows; a tile pair costs its matmuls at
// `efficiency` of the dense peak and its score elements (exponentials, rescaling) at
// `softmax_rate`, the shorter of the two hidden behind the longer by `softmax_overlap` (0: one
// after the other, as FlashAttention-2 runs them; 1: fully overlapped, as Hopper kernels that
// ping-pong warp groups approach); each query tile also pays a fixed cost (loading Q, writing O
// or dQ) worth `row_overhead` tile-pair matmuls.
struct AttentionPassCalibration {
  double efficiency = 0.6;
  double softmax_rate = 0;  // score elements per second; 0: free
  double softmax_overlap = 0;
  double row_overhead = 0;
  // Attention dropout inside the kernel: score elements per second of the random numbers and
  // masking it adds, beside the rest (0: not measured; dropout then costs nothing).
  double dropout_rate = 0;
  bool operator==(const AttentionPassCalibration&) const = default;
};

struct AttentionCalibration {
  std::int64_t tile = 128;
  AttentionPassCalibration forward{0.6, 0, 0, 0};
  AttentionPassCalibration backward{0.5, 0, 0, 0};  // recomputes the scores: 2.5x the forward FLOPs
  std::string implementation;                    // what the parameters were fitted on (e.g. "cudnn")
  // An implementation without a benchmark of its own, priced as another one's kernel model
  // (`like`, whose tile and passes are copied: ComputeCalibration::resolve_like_attention) at a
  // relative speed: its attention time is the model's divided by `speed`. `description` says
  // where the speed comes from (kept when calibrate rewrites the file).
  std::string like;
  double speed = 1.0;
  std::string description;
  bool operator==(const AttentionCalibration&) const = default;
};

struct ComputeCalibration {
  GemmCalibration gemm_16bit;           // bf16 / fp16
  GemmCalibration gemm_fp8;             // fp8 (Transformer Engine)
  GemmCalibration gemm_tf32;            // fp32 inputs on tensor cores
  AttentionCalibration attention;
  // Other fused-attention implementations benchmarked on this GPU (e.g. FlashAttention-2 beside
  // the cuDNN kernels Transformer Engine runs on Hopper), sorted by implementation name; a
  // scenario picks one with training.attention_implementation.
  std::vector<AttentionCalibration> attention_alternatives;
  // Makes the named implementation the one attention is priced with (swapping it with the
  // current one); false, and nothing changed, if the calibration has no such implementation.
  bool select_attention(const std::string& implementation);
  // Copies into each `like` alternative the kernel model of the implementation it names (the
  // main one or an alternative measured in its own right). Returns the first alternative whose
  // `like` names no such implementation ("" when all resolve).
  std::string resolve_like_attention();
  double memory_efficiency = 0.85;         // fraction of HBM bandwidth for memory-bound kernels
  Duration memory_kernel_overhead;         // per memory-bound kernel
  double optimizer_efficiency = 0.8;       // fraction of HBM bandwidth for the optimizer step
  // Share of its isolated (benchmark) throughput that a tensor-core kernel sustains inside a
  // training iteration: power-capped clocks under continuous load, NCCL kernels sharing the SMs
  // and HBM, gaps between dependent kernels. One number per GPU type, fitted to published
  // training runs by `trainsim calibrate` (1 = isolated kernels, as a microbenchmark runs them).
  double sustained_fraction = 1.0;
  // Further in-training scales fitted to runs where kernel benchmarks are missing: of the fused
  // attention (no attention benchmark for the GPU) and of FP8 GEMMs (only a best-shape FP8
  // benchmark; Transformer Engine also quantizes every FP8 GEMM's inputs in training).
  double attention_scale = 1.0;
  double fp8_gemm_scale = 1.0;
  // Standard deviation of the sustained tensor-core speed across GPUs of one type, as a fraction
  // of the mean: a synchronous job waits for its slowest GPU (see ComputeModel). Sinha et al.,
  // "Not All GPUs Are Created Equal" (SC'22, arXiv:2208.11035, abstract) measured 8% average
  // performance variation (max 22%) across the identical GPUs of five clusters of a few hundred
  // to 27,648 GPUs; read as the range of that many draws of a normal spread (6 to 8 standard
  // deviations), that is about 1%. Not fitted: the published runs cannot tell it from the
  // sustained fraction (a free fit trades the one for the other and runs to any bound it is
  // given). A calibration file may set its own (training.speed_spread; 0: all GPUs alike).
  static constexpr double kDefaultSpeedSpread = 0.01;
  double speed_spread = kDefaultSpeedSpread;
  // Host (CPU) time to issue one task of the lowered graph: the framework's Python and autograd
  // work for the operators the task stands for, plus the kernel or NCCL launch. The host runs
  // ahead of the GPU, so it only shows where kernels are shorter than it (small models, small
  // micro-batches). Fitted by `trainsim calibrate --host-runs` to measured iterations of such
  // models; zero: launches always hidden.
  Duration host_issue;
  // Ring all-reduce, reduce-scatter and all-gather inside one node as this GPU's nccl-tests
  // sweeps measured them (fitted by `trainsim calibrate` to all_reduce sweeps of 2 to 8 GPUs):
  //   time = latency + steps x step + min(size, fill bytes) / fill rate (a start-up: the ring
  //          reaches its rate only after the first fill bytes; half of it for the one-pass
  //          collectives) + link bytes / link rate + user bytes / user rate,
  // steps 2(n-1) for an all-reduce and n-1 otherwise, link bytes the ring's 2(n-1)/n (or (n-1)/n)
  // x size, user bytes half the input plus output buffers each rank reads and writes (the size for
  // an all-reduce). NCCL's own estimate leaves out the per-step synchronisation and the user-buffer
  // copies, which is why its rate is nearly the same for 2 and 8 GPUs where the sweeps are 15%
  // apart. From `min_bytes` up (the smallest size fitted; below it NCCL's LL protocol and launch
  // costs set the time) the predicted time is the slower of this and NCCL's model; absent: NCCL's
  // model alone.
  struct RingCalibration {
    double min_bytes = 0;
    double latency_us = 0;
    double step_us = 0;
    double link_GBps = 0;
    double user_GBps = 0;
    double fill_bytes = 0;  // 0: no start-up term
    double fill_GBps = 0;
    bool operator==(const RingCalibration&) const = default;
  };
  std::optional<RingCalibration> intra_node_ring;
  // How the fitted calibration reproduced the published runs it was fitted to (the file's
  // fit.training record): the typical error a prediction made with it carries.
  struct Accuracy {
    std::string architecture;  // of the runs ("ampere", "hopper", ...)
    std::int64_t cases = 0;
    double mape = 0;           // mean |predicted - measured| / measured
    double max_abs_error = 0;
    // Mean error on runs left out of the fit (each model family predicted by a fit to the others).
    std::optional<double> held_out_mape;
    bool operator==(const Accuracy&) const = default;
  };
  std::optional<Accuracy> accuracy;
  // Suites of runs no fit read, predicted with this calibration when it was written (the file's
  // fit.checks record): what a prediction on their architecture is worth.
  struct Check {
    std::string suite;         // file name
    std::string architecture;  // of the runs
    std::int64_t cases = 0;
    double mape = 0;
    double max_abs_error = 0;
    double mean_time_error = 0;  // mean (predicted - measured) / measured time: < 0, predictions fast
    bool operator==(const Check&) const = default;
  };
  std::vector<Check> checks;
  std::string source;                      // where these numbers were fitted from
  bool operator==(const ComputeCalibration&) const = default;
};

struct GpuSpec {
  std::string name;
  Architecture architecture = Architecture::kAmpere;
  FlopRate dense_16bit;  // bf16/fp16 tensor core, dense
  FlopRate dense_tf32;
  FlopRate dense_fp8;    // zero when the GPU has no FP8 tensor cores
  FlopRate dense_fp4;    // zero when the GPU has no FP4 tensor cores (before Blackwell)
  FlopRate fp32;         // non-tensor
  Bytes memory;
  Bandwidth memory_bandwidth;
  std::int64_t sm_count = 0;
  Bytes l2_cache;
  int nvlink_generation = 0;
  int nvlink_links = 0;
  Bandwidth nvlink_bandwidth;  // per direction, all links together (line rate)
  // Sustained copy-engine bandwidth between this GPU's memory and pinned host memory, each
  // direction, as activation offloading copies (every GPU of a node at once; the shipped PCIe
  // figures were measured one GPU at a time); zero when the preset gives none.
  Bandwidth host_copy_bandwidth;
  ComputeCalibration calibration;
  FlopRate peak(DataType t) const;
};

// NCCL's performance model as data: the tuning constants (src/graph/tuning.cc), the link speeds
// and topology-search steps (src/graph/topo.h, topo.cc, search.cc), the runtime buffer, channel
// and thread constants (src/init.cc, src/include/device.h, comm.h, src/transport/nvls.cc), and
// our execution terms (pipeline fill, host launch), each cited in scenarios/calibration/nccl.json.
// Indices: algorithm (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT), protocol
// (LL, LL128, Simple), link class (NVLink, PCI, Net), architecture row (Volta, Ampere, Hopper,
// Blackwell), scale (1 node, 2 nodes, more).
struct NcclCalibration {
  static constexpr int kAlgorithms = 7, kProtocols = 3, kLinks = 3, kArchs = 4, kScales = 3;
  using ArchTable = std::array<std::array<double, kScales>, kArchs>;
  using ArchValues = std::array<double, kArchs>;
  using ProtocolValues = std::array<double, kProtocols>;

  // ---- tuning.cc ----
  std::array<std::array<double, kProtocols>, kAlgorithms> base_latency_us{};
  std::array<std::array<std::array<double, kProtocols>, kAlgorithms>, kLinks> hw_latency_us{};
  ArchTable ll_max_bw{};  // row = GPU arch on one node, CPU vendor row (0 Intel, 1 AMD) beyond
  ArchTable per_ch_max_ring_ll128_bw{};
  ArchTable per_ch_max_tree_ll128_bw{};
  ArchTable per_ch_max_tree_bw{};
  ArchTable per_ch_max_nvls_tree_bw{};
  std::array<std::array<double, 24>, kProtocols> tree_correction{};
  ArchValues nvls_efficiency{};
  double net_overhead_us = 1.0;      // per network step, Intel (and other) CPUs
  double net_overhead_amd_us = 2.0;  // AMD CPUs
  double plateau_factor = 1.4;       // multi-node ring/simple all-reduce latency (Ampere+)
  double ll_ring_fraction = 0.5;     // ring LL moves half the bus bandwidth
  double ll128_efficiency = 0.92;
  double tree_efficiency = 0.92;
  double tree_ll_divisor = 3.8;
  double tree_ll128_intra_factor = 7.0 / 9.0;
  double tree_ll128_inter_factor = 120.0 / 128.0;
  double pat_efficiency = 0.75;
  double pat_log_latency_divisor = 3.5;
  double pat_rank_latency_us = 2.8;
  double collnet_inter_efficiency = 0.9;
  double collnet_direct_hopper_efficiency = 0.85;
  double collnet_arity_latency_us = 0.4;

  // ---- topo.h / topo.cc / search.cc ----
  ArchValues nvlink_link_bw{};              // effective GB/s per NVLink link, per direction
  std::array<double, 4> pcie_x16_bw{};      // GB/s per direction for PCIe gen 3, 4, 5, 6 (x16)
  std::vector<double> intra_speeds_pre_hopper, inter_speeds_pre_hopper;  // graph search steps
  std::vector<double> intra_speeds_hopper, inter_speeds_hopper;
  std::vector<double> intra_speeds_blackwell, inter_speeds_blackwell;
  double search_speed_ratio = 0.49;         // keep lowering the speed while next/best > this
  double dup_channels_min_bw = 25.0;        // channels at >= this speed are duplicated ...
  double dup_channels_sm90_bw = 50.0;       // ... on SM90+ only above this speed when > 4 channels
  int max_channels = 64;                    // MAXCHANNELS
  double multi_node_dup_bw = 45.0;          // Hopper+ multi-node: channels doubled again when the
  int multi_node_dup_below = 16;            // ring speed exceeds this and channels are fewer
  int ring_max_channels = 32;               // ring graph search budget (MAXCHANNELS / 2)
  int max_nvls_arity = 32;                  // NCCL_MAX_NVLS_ARITY
  int max_direct_arity = 8;                 // CollNetDirect local ranks (NCCL_MAX_DIRECT_ARITY + 1)

  // ---- runtime: buffers, chunks, channels, threads ----
  int steps = 8;                          // NCCL_STEPS
  ProtocolValues buffer_bytes{};          // per protocol and channel: LL, LL128, Simple
  double ll128_data_fraction = 120.0 / 128.0;
  int ring_chunk_steps = 4;               // all-reduce/all-gather/reduce-scatter rings
  double nvls_chunk_bytes = 131072;       // NCCL_NVLS_CHUNKSIZE default
  ArchValues nvls_channels{};             // one node
  ArchValues nvls_channels_multi_node{};  // several nodes
  ProtocolValues max_threads{};           // per channel
  ProtocolValues thread_threshold{};      // bytes per thread before adding threads/channels

  // ---- execution terms (ours; see nccl.json for the evidence) ----
  double launch_us = 5.5;          // host enqueue + launch per GPU when one thread drives several
  double ring_first_loop_fraction = 1.0 / 7;  // ring start-up: share of the first loop's time
  int nvls_pipeline_stages = 3;    // NVLS: scatter, reduce (multimem), gather

  // ---- point-to-point ----
  double p2p_nvlink_efficiency = 0.8;  // point-to-point share of the NVLink effective bandwidth
  double p2p_net_efficiency = 0.96;    // point-to-point share of a NIC's line rate
  double p2p_latency_us = 8.0;
  // NCCL's point-to-point channels (CollectiveModel::p2p_channels): the chunk a channel moves per
  // step across nodes, inside an all-NVLink communicator and over PCIe (src/init.cc
  // NCCL_P2P_{NET,NVL,PCI}_CHUNKSIZE), the NIC bandwidth one channel is given
  // (src/graph/paths.cc NCCL_P2P_PER_CHANNEL_NET_BW) and the peers one channel serves in a batch
  // (src/include/device.h NCCL_MAX_DEV_WORK_P2P_PER_BATCH).
  double p2p_net_chunk_bytes = 131072;
  double p2p_nvlink_chunk_bytes = 524288;
  double p2p_pcie_chunk_bytes = 131072;
  double p2p_net_channel_GBps = 14;
  int p2p_peers_per_batch = 8;
  std::string source;
};

// An architecture's row in NcclCalibration's per-architecture tables (Volta 0, Ampere 1, Hopper 2,
// Blackwell 3).
inline std::size_t nccl_arch_row(Architecture a) {
  switch (a) {
    case Architecture::kAmpere:
      return 1;
    case Architecture::kHopper:
      return 2;
    case Architecture::kBlackwell:
      return 3;
  }
  return 1;
}

struct IntraNodeSpec {
  std::string fabric = "nvswitch";  // "nvswitch" | "pcie"
  int nvswitch_generation = 0;
  int nvswitches = 0;          // NVSwitch chips per node (0 when unknown or PCIe)
  bool nvls = false;           // NVLink SHARP (in-switch reduction), NVSwitch gen3+
  Bandwidth bandwidth;         // per GPU, per direction (line rate)
  Duration latency;            // one GPU-switch-GPU hop
};

// The scale-out fabric. Rail-optimized: NIC i of every node of a scalable unit on leaf i of that
// unit; fat tree: all NICs of a node on the leaf of its rack. Leaves connect to a non-blocking
// spine; a leaf's uplink capacity is its downlink capacity / oversubscription.
struct InterNodeSpec {
  std::string topology = "rail_optimized";  // "rail_optimized" | "fat_tree"
  // Network devices per node, one NIC each unless nics_per_gpu groups them: AWS p5 (32 EFA NICs
  // of 100 Gb/s, 8 GPUs, "nics_per_gpu": 4 in its file) has 8 devices of 400 Gb/s, as aws-ofi-nccl
  // groups the NICs behind a GPU's PCIe switch into one NCCL device and stripes each message
  // evenly over them (doc/topology.md "Grouping NICs into rails"; src/nccl_ofi_scheduler.cpp).
  int nics_per_node = 8;
  int nics_per_gpu = 1;           // NICs per device above (the cluster file's nics_per_gpu)
  std::string nic;                // NIC model (documentation)
  Bandwidth nic_bandwidth;        // per device, per direction (line rate; a group's sum)
  int switch_radix = 64;          // ports per leaf switch
  double oversubscription = 1.0;  // leaf downlink capacity / uplink capacity
  int nodes_per_leaf = 32;        // rail-optimized: nodes per scalable unit; fat tree: per leaf
  Duration latency;               // one switch hop (port to port, with cables)
  Duration nic_latency;           // NCCL's net latency property (0 for InfiniBand verbs)
  bool gpudirect_rdma = true;     // NICs write into GPU memory (else NCCL's net path is above PXN)
  bool sharp = false;             // in-network reduction (CollNet) available
};

// Nodes per leaf a radix gives: the leaf's down ports (radix * o / (1 + o)), one per node on a
// rail, nics_per_node per node on a fat tree.
int nodes_per_leaf_for_radix(const InterNodeSpec& net);

struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int gpus_per_node = 8;
  int num_nodes = 1;
  IntraNodeSpec intra_node;
  InterNodeSpec inter_node;
  int pcie_generation = 4;
  std::string cpu_vendor = "intel";  // "intel" | "amd" | "arm": NCCL's multi-node LL bandwidth row and network overhead
  NcclCalibration nccl;
  int num_gpus() const { return gpus_per_node * num_nodes; }
  // NCCL's rate of this cluster's PCIe x16 link between a GPU and its NIC (GB/s per direction,
  // topo.cc's table by generation).
  double pcie_x16_GBps() const { return nccl.pcie_x16_bw[static_cast<std::size_t>(std::clamp(pcie_generation, 3, 6) - 3)]; }
  // NCCL's rate of a GPU's NVLink (GB/s per direction): its links times topo.h's effective speed
  // per link for the architecture (SM80 20 GB/s, SM90 20.6, SM100 40.1); 0 on a PCIe node.
  double nvlink_GBps() const {
    if (intra_node.fabric != "nvswitch") return 0;
    return gpu.nvlink_links * nccl.nvlink_link_bw[nccl_arch_row(gpu.architecture)];
  }
};

}  // namespace trainsim::topo
