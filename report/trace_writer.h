#pragma once
// Chrome/Perfetto trace (JSON object form, "traceEvents") of a run's recorded ranks, in the
// conventions of PyTorch's profiler (Kineto): a process per rank, a thread per stream, `X`
// complete events with microsecond timestamps carrying nanosecond decimals, categories
// "kernel" for compute, "nccl" for collectives and "p2p" for point-to-point transfers, and a
// memory counter per rank. Beside them, what the summary counts as waiting: "sync" where
// communication waited for its peers, "host_wait" where a kernel waited for its launch, and on
// the compute thread the idle time the engine charged to a cause ("bubble", "blocked"; see
// report::gap_view). Deterministic: the same run writes the same bytes.

#include <ostream>

#include "report/simulation.h"

namespace trainsim::report {

void write_trace(const RunResult& r, std::ostream& out);

}  // namespace trainsim::report
