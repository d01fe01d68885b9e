#pragma once
// TRAINSIM_CHECK(cond, msg): always-on invariant check for cheap conditions (time monotonicity,
// queue sanity); throws InternalError so library code never calls exit() or abort().
// TRAINSIM_ASSERT(cond, msg): debug-only; must have no side effects.

#include <string>

#include "sim/error.h"

namespace trainsim::detail {
[[noreturn]] inline void check_failed(const char* cond, const std::string& msg, const char* file,
                                      int line) {
  throw InternalError(std::string("internal error: ") + msg + " [" + cond + "] at " + file + ":" +
                      std::to_string(line));
}
}  // namespace trainsim::detail

#define TRAINSIM_CHECK(cond, msg)                                               \
  do {                                                                          \
    if (!(cond)) ::trainsim::detail::check_failed(#cond, (msg), __FILE__, __LINE__); \
  } while (false)

#ifdef NDEBUG
#define TRAINSIM_ASSERT(cond, msg) \
  do {                             \
  } while (false)
#else
#define TRAINSIM_ASSERT(cond, msg) TRAINSIM_CHECK(cond, msg)
#endif
