#pragma once
// simulate(): one scenario end to end. Lowers the workload, builds the cluster and its timing
// model, runs the engine, and derives the reported quantities (iteration time, throughput,
// MFU/HFU, where the time went, memory per stage). The result owns everything the report
// writers need.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/scenario.h"
#include "models/lowering.h"
#include "sim/engine.h"
#include "topologies/cluster.h"

namespace trainsim::report {

struct RunOptions {
  // Ranks whose timeline is recorded for traces and pictures. Empty: every simulated rank in
  // symmetric mode; the first rank of each pipeline stage in full mode. simulate() throws
  // InputError for a rank that does not exist or (symmetric mode) is not simulated.
  std::vector<std::int64_t> record_ranks;
  bool record = true;  // false: no timeline at all (fastest; summary only)
  // A cluster built once for many runs on the same machine (must match the scenario's cluster;
  // ignored when the scenario degrades links, which needs its own copy).
  std::shared_ptr<const topo::Cluster> cluster = nullptr;
  // With stragglers or degraded links: also simulate the plan without them (nominal_iteration_time_s).
  bool nominal = true;
  // What-if: communication of each reporting category takes this multiple of its modelled time
  // (sim::EngineOptions::comm_time_scale).
  std::array<double, sim::kMaxCategories> comm_time_scale = sim::EngineOptions::unit_scales();
};

// The kinds TimeBreakdown::compute_by_kernel splits a rank's kernel time into, in its order: the
// JSON key and the text label.
struct KernelKind {
  const char* name;
  const char* label;
};
inline constexpr KernelKind kKernelKinds[] = {
    {"gemm", "GEMM"}, {"attention", "attention"}, {"memory_bound", "memory-bound"},
    {"fp8_quantization", "FP8 quantization"}, {"optimizer", "optimizer"}};
// The text label of kind `k` for runs in `precisions`: the quantization kind (JSON
// fp8_quantization) names the formats it casts to, "FP4" for NVFP4 runs, "FP8/FP4" when both.
std::string kernel_kind_label(const KernelKind& k, std::initializer_list<models::Precision> precisions);

// Time of an iteration split by cause, for one rank. The parts add up to the iteration time.
struct TimeBreakdown {
  double compute_s = 0;          // forward and backward kernels
  double recompute_s = 0;        // activation recomputation
  double optimizer_s = 0;        // gradient norm and optimizer step
  double pipeline_bubble_s = 0;  // waiting for another stage's activations or gradients
  double exposed_communication_s = 0;  // communication the compute stream waited for
  double synchronization_wait_s = 0;   // waiting for slower peers at a collective
  double host_launch_s = 0;            // next kernel ready, waiting for the host to issue it (CPU-bound)
  // simulation.sm_contention: of compute, recompute and optimizer, the time GEMM and attention
  // kernels ran longer than alone, on the SMs that communication kernels left them.
  std::optional<double> sm_contention_s;
  double idle_s = 0;                   // anything else (end of iteration waits)
  // Exposed communication by kind (tp, dp, pp, cp, ep, embedding, other) and total busy time of
  // each communication kind (hidden or not).
  std::vector<std::pair<std::string, double>> exposed_by_kind;
  std::vector<std::pair<std::string, double>> communication_by_kind;
  // The rank's kernel time (compute, recompute and optimizer together) by kind, one entry per
  // kKernelKinds: gemm, attention, memory_bound (norms, activations, dropout, softmax, embedding,
  // loss), fp8_quantization (Transformer Engine's casts, amax passes and transposes; NVFP4's under
  // precision fp4), optimizer.
  std::vector<std::pair<std::string, double>> compute_by_kernel;
};

// The rank that bounds a full-fidelity iteration: the one with the most work of its own
// (compute, recompute, optimizer and the communication it could not hide), which the others
// end up waiting for at the next collective.
struct Bottleneck {
  std::int64_t rank = 0;
  models::RankCoord coord;
  double work_s = 0;
  double median_work_s = 0;
};

struct StageReport {
  std::int64_t stage = 0;
  std::int64_t layers = 0;
  std::int64_t rank = 0;  // the rank the figures are taken from
  std::int64_t parameters = 0;
  models::StaticMemory static_memory;
  std::int64_t checkpoint_bytes = 0;  // its share of a checkpoint (models::StageInfo)
  std::int64_t activation_peak_bytes = 0;
  std::int64_t peak_bytes = 0;
  double peak_time_s = 0;
  double finish_s = 0;
  TimeBreakdown breakdown;
};

// One kind of communication run at other speeds, everything else unchanged (report/sensitivity.h).
struct SpeedVariant {
  double speed = 1;              // times the modelled speed; infinity: free
  double iteration_time_s = 0;
  double exposed_s = 0;          // this kind's exposed time on the critical rank
};
struct CommunicationSensitivity {
  std::string kind;       // tp, dp, pp, cp, ep, embedding, other
  double time_s = 0;      // this kind's time on the wire, critical rank (hidden or not)
  double exposed_s = 0;   // of which the compute stream waited for
  std::vector<SpeedVariant> variants;
  // Where the kind stops mattering, found by bisection (report/sensitivity.h), in times its
  // modelled speed: the lowest speed from which the iteration is within kSensitivityTolerance
  // (a share of the modelled iteration) of the iteration with this traffic free (1: already;
  // none: not by kSensitivityRange), and the lowest speed down to which the iteration stays
  // within that of the modelled one (none: it does even at 1 / kSensitivityRange).
  std::optional<double> hide_speed;
  std::optional<double> tolerated_speed;
};
// A hardware what-if (report/sensitivity.h): one kind of link at other speeds, all traffic on it
// together, and where it stops mattering.
struct LinkSweep {
  std::vector<SpeedVariant> variants;  // half, twice, kSensitivityRange; exposed_s: all communication
  std::optional<double> hide_speed;    // as CommunicationSensitivity's, against kSensitivityRange
  std::optional<double> tolerated_speed;
};
// The cluster's NICs at other speeds.
struct NicSensitivity : LinkSweep {
  double nic_gbit_per_s = 0;   // modelled line rate of one NCCL network device
  double pcie_gbit_per_s = 0;  // the GPU's PCIe x16 rate in NCCL's topology, which bounds it too
  int pcie_generation = 0;
};
// Every GPU's NVLink at other speeds, all traffic inside a node on it.
struct NvlinkSensitivity : LinkSweep {
  int links = 0;          // NVLink links per GPU
  double nccl_GBps = 0;   // per GPU and direction, NCCL's effective rate (links x its per-link speed)
  double line_GBps = 0;   // per GPU and direction, the datasheet's line rate
};

struct RunResult {
  config::Scenario scenario;
  std::unique_ptr<models::Workload> workload;
  std::shared_ptr<const topo::Cluster> cluster;
  sim::EngineResult engine;
  std::vector<std::string> algorithm_names, protocol_names;

  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0, hfu = 0;
  double peak_flops_per_gpu = 0;  // dense peak for the scenario's precision
  std::int64_t critical_rank = 0;
  TimeBreakdown breakdown;  // of the critical rank
  std::vector<StageReport> stages;
  std::optional<Bottleneck> bottleneck;          // full fidelity only
  std::optional<double> nominal_iteration_time_s;  // with stragglers/degraded links: the same plan without them
  std::int64_t peak_bytes_per_gpu = 0;
  std::int64_t capacity_bytes_per_gpu = 0;
  std::int64_t host_offload_bytes_per_gpu = 0;  // cpu_offloading: activations a GPU keeps in host memory
  bool fits = true;
  double wall_s = 0;
  // Filled from communication_sensitivity() when asked for (empty: no kind of communication).
  std::optional<std::vector<CommunicationSensitivity>> sensitivity;
  // Filled from nic_sensitivity() when asked for and the scenario spans nodes.
  std::optional<NicSensitivity> nic_sensitivity;
  // Filled from nvlink_sensitivity() when asked for and a node joins GPUs over NVLink.
  std::optional<NvlinkSensitivity> nvlink_sensitivity;
};

RunResult simulate(const config::Scenario& scenario, const RunOptions& options = {});

// The report name of a communication category (models::Category): "tp", "dp", "pp", ...
const char* communication_kind(std::uint8_t category);

}  // namespace trainsim::report
