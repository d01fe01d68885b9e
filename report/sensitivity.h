#pragma once
// What-if by kind of communication: the same scenario re-simulated with one kind (tp, dp, pp,
// cp, ep, embedding, other) at half its modelled speed, twice it, and free, everything else
// unchanged. Faster links shorten an iteration only as far as that traffic was exposed: the
// three runs show whether a kind sits on the critical path (its exposed time halves at twice
// the speed) or is hidden behind compute (nothing changes until it is slowed down), which is
// the question behind "would faster NICs / NVLink help this plan?". Scaling applies to the
// kind's latency and to its bytes on every link it loads, so contention with other traffic
// changes with it.

#include <limits>
#include <vector>

#include "report/simulation.h"

namespace trainsim::report {

// The speeds each kind is re-simulated at (infinity: free).
inline constexpr double kSensitivitySpeeds[] = {0.5, 2.0, std::numeric_limits<double>::infinity()};

// Kinds with time on the wire on any simulated rank of `base`, each re-simulated at
// kSensitivitySpeeds (3 simulations per kind, `threads` at once; 0: one per CPU). Results are in
// category order whatever the thread count.
std::vector<CommunicationSensitivity> communication_sensitivity(const RunResult& base, unsigned threads = 0);

}  // namespace trainsim::report
