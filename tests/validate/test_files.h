#pragma once
// Helpers for the validate tests: temporary files and the trainsim binary.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "tests/process.h"

namespace trainsim::testing {

inline std::string source_path(const std::string& relative) { return std::string(TRAINSIM_SOURCE_DIR) + "/" + relative; }

// Writes `text` to a file named `name` in the temporary directory and returns its path.
inline std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / ("trainsim_validate_test_" + name)).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

using Outcome = tests::ProcessOutcome;

// Runs the trainsim binary with `args` (a shell fragment).
inline Outcome run_trainsim(const std::string& args) {
  return tests::run_command(std::string(TRAINSIM_BINARY) + " " + args + " 2>&1");
}

using tests::contains;

}  // namespace trainsim::testing
