#pragma once
// Runs the trainsim binary with arguments (through the shell) and collects its exit code and
// output, for end-to-end tests of the command line.

#include <doctest/doctest.h>
#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace trainsim_test {

struct Outcome {
  int code = -1;
  std::string output;  // stdout and stderr
};

inline Outcome trainsim(const std::string& args) {
  const std::string cmd = std::string(TRAINSIM_BINARY) + " " + args + " 2>&1";
  Outcome o;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) o.output.append(buf.data(), n);
  const int status = pclose(pipe);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

}  // namespace trainsim_test
