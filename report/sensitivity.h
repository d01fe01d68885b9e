#pragma once
// What-if by kind of communication: the same scenario re-simulated with one kind (tp, dp, pp,
// cp, ep, embedding, other) at half its modelled speed, twice it, and free, everything else
// unchanged. Faster links shorten an iteration only as far as that traffic was exposed: the
// three runs show whether a kind sits on the critical path (its exposed time halves at twice
// the speed) or is hidden behind compute (nothing changes until it is slowed down), which is
// the question behind "would faster NICs / NVLink help this plan?". Scaling applies to the
// kind's latency and to its bytes on every link it loads, so contention with other traffic
// changes with it.
//
// Then, per kind, the two speeds at the edges of its slack, each found by bisection (brackets a
// factor of 4 wide, then halved in log-speed to within kSensitivityResolution): the speed it
// needs to be hidden (from which the iteration is within kSensitivityTolerance of the modelled
// iteration of free traffic: the bandwidth a plan needs for that traffic to cost nothing) and
// the speed it tolerates (down to which the iteration stays within that of the modelled one: how
// much a slower or degraded network it can absorb). Each result holds at the speed reported and
// fails at a speed within the resolution below it; it is the edge itself where the iteration
// time does not rise with the speed (the tests check this on a golden plan).

#include <limits>
#include <vector>

#include "report/simulation.h"

namespace trainsim::report {

// The speeds each kind is re-simulated at (infinity: free).
inline constexpr double kSensitivitySpeeds[] = {0.5, 2.0, std::numeric_limits<double>::infinity()};

// A kind is hidden, or tolerates a speed, while it costs at most this share of the modelled
// iteration; the speeds are searched within [1 / kSensitivityRange, kSensitivityRange] and
// bisected until the bracket is at most kSensitivityResolution wide (a ratio).
inline constexpr double kSensitivityTolerance = 0.01;
inline constexpr double kSensitivityRange = 16;  // the engine scales communication time by at most 16 (sim::EngineOptions)
inline constexpr double kSensitivityResolution = 1.05;

// Kinds with time on the wire on any simulated rank of `base`, each re-simulated at
// kSensitivitySpeeds (3 simulations per kind) and then searched for its hide and tolerated
// speeds (about 4-10 simulations each), `threads` kinds at once (0: one per CPU). Results are
// in category order and the same whatever the thread count.
std::vector<CommunicationSensitivity> communication_sensitivity(const RunResult& base, unsigned threads = 0);

// The hardware question beside it: the cluster's NICs (each NCCL network device's line rate,
// latency unchanged) at half, twice and kSensitivityRange times their modelled speed, every kind
// of traffic on them together, NCCL's choices retuned to the new rate; then the hide speed
// (against the kSensitivityRange run, as good as unlimited bandwidth) and the tolerated one, as
// above. nullopt for a scenario on one node. Answers "would 800 Gb/s NICs pay, and how far
// can a degraded fabric fall before it costs 1%?".
std::optional<NicSensitivity> nic_sensitivity(const RunResult& base, unsigned threads = 0);

// The same question inside a node: every GPU's NVLink at half, twice and kSensitivityRange
// times its modelled speed, all intra-node traffic on it together (tensor-parallel collectives,
// the NVLink legs of data-parallel rings and all-to-alls, pipeline transfers between GPUs of a
// node), NCCL's topology search and tuning rerun for the new rate. What scales: NCCL's
// effective per-link speed (topo.h), which the collective model, the cluster's NVLink links and
// point-to-point transfers all take, the line rate, and the rates of the GPU's measured
// intra-node ring (its link rate and start-up fill rate); what does not: every latency, the
// ring's per-step synchronisation, and its user-buffer copies, which move data within the GPU's
// own memory. nullopt for a cluster without NVLink or with one GPU per node. Answers "would a
// faster NVLink generation pay for this plan, and how much of it does the plan need?".
std::optional<NvlinkSensitivity> nvlink_sensitivity(const RunResult& base, unsigned threads = 0);
// `cluster` with every GPU's NVLink at `speed` times its rate, as nvlink_sensitivity runs it.
topo::ClusterSpec with_nvlink_speed(topo::ClusterSpec cluster, double speed);

// The three above into `r` (its sensitivity, nic_sensitivity and nvlink_sensitivity): what
// --sensitivity asks.
void add_sensitivity(RunResult& r, unsigned threads = 0);

}  // namespace trainsim::report
