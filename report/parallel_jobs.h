#pragma once
// Independent simulations on all cores with a deterministic outcome: each job writes its own
// result slot, and a failure is reported as the first by job index, whatever the timing.

#include <cstddef>
#include <functional>

namespace trainsim::report {

// Runs job(i) for every i in [0, jobs) on `threads` threads (0: one per hardware thread), the
// calling thread among them, and returns when all have run. after_each(i), when given, runs on
// the same thread after job i, whether it succeeded or threw. Then rethrows the exception of
// the lowest-numbered job that threw, if any.
void run_jobs(std::size_t jobs, unsigned threads, const std::function<void(std::size_t)>& job,
              const std::function<void(std::size_t)>& after_each = {});

}  // namespace trainsim::report
