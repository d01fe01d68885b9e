#pragma once
// Helpers shared by the test files that load and simulate scenario files. Test executables are
// unity builds (tests/CMakeLists.txt), so shared helpers live here rather than in each file.

#include <string>
#include <vector>

#include "config/scenario.h"
#include "report/simulation.h"

namespace tests {

// The default scenario of the README.
inline const std::string kDefaultScenario = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/gpt3-175b-1024xa100.json";

// Simulates a scenario file with overrides, recording no timeline (summary only).
inline trainsim::report::RunResult simulate_file(const std::string& file, const std::vector<std::string>& overrides = {}) {
  return trainsim::report::simulate(trainsim::config::load_scenario(file, overrides), trainsim::report::RunOptions{{}, false});
}

}  // namespace tests
