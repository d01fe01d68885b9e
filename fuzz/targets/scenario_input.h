#pragma once
// How the scenario targets split their input: the scenario file's bytes up to the first NUL,
// then one --set override per line.

#include <string>
#include <string_view>
#include <vector>

namespace trainsim::fuzz {

struct ScenarioInput {
  explicit ScenarioInput(std::string_view input) {
    const std::size_t nul = input.find('\0');
    scenario = std::string(input.substr(0, nul));
    if (nul == std::string_view::npos) return;
    std::string_view rest = input.substr(nul + 1);
    while (!rest.empty()) {
      const std::size_t eol = rest.find('\n');
      overrides.emplace_back(rest.substr(0, eol));
      if (eol == std::string_view::npos) break;
      rest.remove_prefix(eol + 1);
    }
  }
  std::string scenario;
  std::vector<std::string> overrides;
};

}  // namespace trainsim::fuzz
