// fuzz_replay TARGET PATH...: runs a fuzz target (fuzz/fuzz_target.h) over every file given and
// every file in the folders given (not recursive; missing folders are skipped), as libFuzzer runs
// a corpus, without libFuzzer.
// Exit 0 when every input keeps the contract; a finding aborts. The tests run it over each
// target's seeds and fuzz/regressions/TARGET/.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"

namespace trainsim::fuzz {

namespace {

std::map<std::string, TargetBody>& registry() {
  static std::map<std::string, TargetBody> targets;
  return targets;
}

}  // namespace

void register_target(const char* name, TargetBody body) { registry()[name] = body; }

}  // namespace trainsim::fuzz

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const auto& targets = trainsim::fuzz::registry();
  if (argc < 2 || targets.find(argv[1]) == targets.end()) {
    std::cerr << "usage: fuzz_replay TARGET PATH...; targets:";
    for (const auto& [name, body] : targets) std::cerr << " " << name;
    std::cerr << "\n";
    return 2;
  }
  const std::string target = argv[1];
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& entry : fs::directory_iterator(argv[i])) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (fs::is_regular_file(argv[i], ec)) {
      inputs.emplace_back(argv[i]);
    } else if (fs::exists(argv[i], ec)) {
      std::cerr << "fuzz_replay: not a file or folder: " << argv[i] << "\n";
      return 2;
    }  // a missing folder is a target without regressions yet

  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string bytes = buffer.str();
    std::cerr << "fuzz_replay " << target << ": " << p.string() << "\n";
    trainsim::fuzz::run_target(target.c_str(), targets.at(target), reinterpret_cast<const std::uint8_t*>(bytes.data()),
                               bytes.size());
  }
  std::cout << "fuzz_replay " << target << ": " << inputs.size() << " inputs keep the contract\n";
  return 0;
}
