#pragma once
// Running the trainsim binary from tests: a shell command line in, exit code and output out.

#include <doctest/doctest.h>
#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace tests {

struct ProcessOutcome {
  int code = -1;       // exit code; 128 + signal when killed
  std::string output;  // stdout and stderr (the command line should end in 2>&1)
};

inline ProcessOutcome run_command(const std::string& command_line) {
  ProcessOutcome o;
  FILE* pipe = popen(command_line.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) o.output.append(buf.data(), n);
  const int status = pclose(pipe);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

// True when `part` occurs in `s` (an output or an error message).
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace tests
