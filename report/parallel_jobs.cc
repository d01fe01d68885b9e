#include "report/parallel_jobs.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace trainsim::report {

void run_jobs(std::size_t jobs, unsigned threads, const std::function<void(std::size_t)>& job,
              const std::function<void(std::size_t)>& after_each) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t workers = std::min<std::size_t>(jobs, threads > 0 ? threads : hw);
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> failures(jobs);
  auto work = [&]() {
    while (true) {
      const std::size_t i = next.fetch_add(1);
      if (i >= jobs) return;
      try {
        job(i);
      } catch (...) {
        failures[i] = std::current_exception();
      }
      if (after_each) after_each(i);
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& f : failures) {
    if (f) std::rethrow_exception(f);
  }
}

}  // namespace trainsim::report
