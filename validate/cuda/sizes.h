#pragma once
// Byte sizes as nccl-tests writes them on its command line (8, 64K, 128M, 8G), shared by the
// measurement programs of validate/cuda.

#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace trainsim_cuda {

// The size `text` names; on a bad or out-of-range size prints why, prefixed by `program`, and
// exits with status 2.
inline std::size_t parse_size(const char* program, const char* text, double max_bytes = 1e15) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  double scale = 1;
  if (end != nullptr && *end != '\0') {
    switch (*end) {
      case 'K': case 'k': scale = 1024.0; break;
      case 'M': case 'm': scale = 1024.0 * 1024; break;
      case 'G': case 'g': scale = 1024.0 * 1024 * 1024; break;
      default:
        std::fprintf(stderr, "%s: bad size '%s' (e.g. 8, 64K, 128M, 8G)\n", program, text);
        std::exit(2);
    }
  }
  if (end == text || !(v > 0) || v * scale > max_bytes) {
    std::fprintf(stderr, "%s: bad size '%s'\n", program, text);
    std::exit(2);
  }
  return static_cast<std::size_t>(v * scale);
}

}  // namespace trainsim_cuda
