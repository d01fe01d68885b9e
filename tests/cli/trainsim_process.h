#pragma once
// Runs the trainsim binary with arguments (through the shell) and collects its exit code and
// output, for end-to-end tests of the command line.

#include <string>

#include "tests/process.h"

namespace trainsim_test {

using Outcome = tests::ProcessOutcome;

inline Outcome trainsim(const std::string& args) {
  return tests::run_command(std::string(TRAINSIM_BINARY) + " " + args + " 2>&1");
}

}  // namespace trainsim_test
