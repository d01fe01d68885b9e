// Lowering speed and size: for each scenario, the time to lower it into a task graph (best of
// 3) and the graph's size (tasks per rank class, kernels, communicators).
//
//   build/bench/lowering_bench [SCENARIO...] [--set key=value ...]
//
// With no scenario: the default scenario and every file under scenarios/examples/, plus the
// Llama-3.1 405B 128K example at 16,384 GPUs (its paper's 8 data-parallel replicas).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "config/scenario.h"
#include "models/lowering.h"

using namespace trainsim;

namespace {

void measure(const std::string& file, const std::vector<std::string>& overrides, const std::string& label) {
  const config::Scenario s = config::load_scenario(file, overrides);
  double best = 1e30;
  std::size_t tasks = 0, max_class = 0, kernels = 0;
  std::uint32_t comms = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const models::Workload w = models::lower(s.model, s.parallel, s.training, s.num_gpus());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    tasks = w.graph.total_tasks();
    max_class = 0;
    kernels = 0;
    for (std::uint32_t c = 0; c < w.graph.num_classes(); ++c) {
      max_class = std::max(max_class, w.graph.rank_class(c).tasks.size());
      kernels += w.graph.rank_class(c).kernels.size();
    }
    comms = w.graph.num_communicators();
  }
  std::printf("%-58s %6lld GPUs %9zu tasks %8zu max/class %7zu kernels %7u comms %8.1f ms\n", label.c_str(),
              static_cast<long long>(s.num_gpus()), tasks, max_class, kernels, comms, best * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files, overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--set" && i + 1 < argc) {
      overrides.emplace_back(argv[++i]);
    } else {
      files.push_back(a);
    }
  }
  try {
    if (!files.empty()) {
      for (const auto& f : files) measure(f, overrides, std::filesystem::path(f).filename().string());
      return 0;
    }
    const std::filesystem::path root(TRAINSIM_SOURCE_DIR);
    measure((root / "scenarios" / "gpt3-175b-1024xa100.json").string(), {}, "gpt3-175b-1024xa100.json");
    std::vector<std::filesystem::path> examples;
    for (const auto& e : std::filesystem::directory_iterator(root / "scenarios" / "examples")) examples.push_back(e.path());
    std::sort(examples.begin(), examples.end());
    for (const auto& e : examples) measure(e.string(), {}, e.filename().string());
    measure((root / "scenarios" / "examples" / "llama3.1-405b-cp16-128k-h100.json").string(),
            {"cluster.num_nodes=2048", "training.global_batch_size=128"}, "llama3.1-405b-cp16-128k, DP 8 (16,384 GPUs)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lowering_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
