#pragma once
// printf-style formatting of one number into a std::string, for the text, CSV and SVG writers.

#include <cstdio>
#include <string>

namespace trainsim::report {

// `format` is a printf format with one double conversion (e.g. "%.3f"); output is cut at 63
// characters.
inline std::string fmt(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

}  // namespace trainsim::report
