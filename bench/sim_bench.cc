// trainsim-bench: simulator speed and memory on fixed scenarios.
//
// Each case runs in a child process so its peak resident memory is its own. Prints, per case,
// the fidelity, ranks, tasks, events, wall time, events per second and peak RSS, the network
// flows, the bandwidth re-solves and the flow-resource pairs each re-solve visits, then the
// agreement between symmetric and full fidelity and the scaling in GPUs and micro-batches.
//
// Usage: trainsim-bench [--quick]   (--quick skips the 16,384-GPU full-fidelity case)

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "config/scenario.h"
#include "report/simulation.h"

namespace {

using namespace trainsim;

struct Case {
  std::string label;
  std::string scenario;  // relative to the source tree
  std::vector<std::string> overrides;
};

struct Measurement {
  double wall_s = 0;
  double iteration_s = 0;
  double events = 0;
  double tasks = 0;
  double ranks = 0;
  double rss_mib = 0;
  double cpu_s = 0;  // user + system time of the case's process
  double flows = 0;          // network flows started
  double solves = 0;         // bandwidth re-solves (FlowNetwork::Stats)
  double solved_demands = 0; // flow-resource pairs visited by the re-solves
  bool ok = false;
};

Measurement run_case(const Case& c) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Measurement m;
    try {
      // The benchmark measures big plans on purpose: lift the simulation-size guard.
      std::vector<std::string> overrides = c.overrides;
      overrides.push_back("simulation.max_events=1e12");
      const config::Scenario s = config::load_scenario(std::string(TRAINSIM_SOURCE_DIR) + "/" + c.scenario, overrides);
      const report::RunResult r = report::simulate(s, report::RunOptions{{}, false});
      m.wall_s = r.wall_s;
      m.iteration_s = r.iteration_time_s;
      m.events = static_cast<double>(r.engine.events);
      m.tasks = static_cast<double>(r.engine.tasks_executed);
      m.flows = static_cast<double>(r.engine.flows.flows);
      m.solves = static_cast<double>(r.engine.flows.solves);
      m.solved_demands = static_cast<double>(r.engine.flows.solved_demands);
      m.ranks = static_cast<double>(r.engine.ranks.size());
      m.ok = true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", c.label.c_str(), e.what());
    }
    const ssize_t written = write(fds[1], &m, sizeof m);
    _exit(written == static_cast<ssize_t>(sizeof m) ? 0 : 1);
  }
  close(fds[1]);
  Measurement m;
  const ssize_t got = read(fds[0], &m, sizeof m);
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  if (got != static_cast<ssize_t>(sizeof m)) m.ok = false;
  m.rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
  m.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
            1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  return m;
}

void print(const Case& c, const Measurement& m) {
  if (!m.ok) {
    std::printf("%-52s  FAILED\n", c.label.c_str());
    return;
  }
  std::printf("%-52s %6.0f %10.0f %10.0f %8.2f %8.2f %11.0f %8.1f %9.4f %9.0f %8.0f %8.0f\n", c.label.c_str(), m.ranks,
              m.tasks, m.events, m.wall_s, m.cpu_s, m.events / m.cpu_s, m.rss_mib, m.iteration_s, m.flows, m.solves,
              m.solves > 0 ? m.solved_demands / m.solves : 0.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const std::string gpt3 = "scenarios/gpt3-175b-1024xa100.json";
  const std::string llama = "bench/scenarios/llama3.1-405b-16384xh100.json";
  const std::string full = "simulation.fidelity=\"full\"";
  std::printf("%-52s %6s %10s %10s %8s %8s %11s %8s %9s %9s %8s %8s\n", "case", "ranks", "tasks", "events", "wall_s",
              "cpu_s", "events/s", "rss_MiB", "iter_s", "flows", "solves", "work/slv");

  std::vector<std::pair<Case, Measurement>> results;
  auto run = [&](Case c) {
    const Measurement m = run_case(c);
    print(c, m);
    results.emplace_back(std::move(c), m);
    return m;
  };

  // Headline cases.
  const Measurement g_sym = run({"GPT-3 175B, 1,024 A100, symmetric", gpt3, {}});
  const Measurement g_full = run({"GPT-3 175B, 1,024 A100, full", gpt3, {full}});
  const Measurement l_sym = run({"Llama-3.1 405B, 16,384 H100, symmetric", llama, {}});
  Measurement l_full;
  if (!quick) l_full = run({"Llama-3.1 405B, 16,384 H100, full", llama, {full}});
  // Mixture of experts: EP 32 all-to-alls across 4 nodes, overlapped with the other micro-batch's
  // compute (many concurrent flows on the same NICs).
  run({"Qwen3-235B EP 32, 256 H100, symmetric", "scenarios/examples/qwen3-235b-ep-overlap-256xh100.json", {}});

  // Scaling in GPUs: 16 micro-batches per data-parallel rank at every size (DP 8, 32, 128).
  std::vector<std::pair<double, Measurement>> gpus;
  for (int nodes : {128, 512, 2048}) {
    if (quick && nodes == 2048) break;
    const int dp = nodes * 8 / (8 * 16);
    gpus.emplace_back(nodes * 8, run({"Llama-3.1 405B full, " + std::to_string(nodes * 8) + " GPUs", llama,
                                       {"cluster.num_nodes=" + std::to_string(nodes),
                                        "training.global_batch_size=" + std::to_string(16 * dp), full}}));
  }
  // Scaling in micro-batches at 1,024 GPUs (DP 8).
  std::vector<std::pair<double, Measurement>> micro;
  for (int m : {16, 32, 64}) {
    micro.emplace_back(m, run({"Llama-3.1 405B full, 1,024 GPUs, " + std::to_string(m) + " micro-batches", llama,
                               {"cluster.num_nodes=128", "training.global_batch_size=" + std::to_string(8 * m), full}}));
  }

  std::printf("\nsymmetric vs full iteration time: GPT-3 175B %+.4f%%", 100 * (g_full.iteration_s / g_sym.iteration_s - 1));
  if (!quick) std::printf(", Llama-3.1 405B %+.4f%%", 100 * (l_full.iteration_s / l_sym.iteration_s - 1));
  // The work (events, bandwidth re-solves) and the CPU time it took, per GPU and per micro-batch:
  // flat work with rising time means each event costs more (caches), not that there are more.
  std::printf("\nper GPU at");
  for (const auto& [n, m] : gpus)
    std::printf(" %.0f GPUs: %.1f us CPU, %.0f events, %.2f re-solves;", n, 1e6 * m.cpu_s / n, m.events / n, m.solves / n);
  // Marginal cost: CPU time of each step up divided by the GPUs (micro-batches) it adds. A fixed
  // warm-up/cool-down share makes per-unit averages drift even when the increments are constant.
  std::printf("\nper added GPU:");
  for (std::size_t i = 1; i < gpus.size(); ++i) {
    std::printf(" %.0f->%.0f: %.1f us;", gpus[i - 1].first, gpus[i].first,
                1e6 * (gpus[i].second.cpu_s - gpus[i - 1].second.cpu_s) / (gpus[i].first - gpus[i - 1].first));
  }
  std::printf("\nper micro-batch at 1,024 GPUs with");
  for (const auto& [n, m] : micro)
    std::printf(" %.0f: %.1f ms CPU, %.0f events, %.0f re-solves;", n, 1e3 * m.cpu_s / n, m.events / n, m.solves / n);
  std::printf("\nper added micro-batch:");
  for (std::size_t i = 1; i < micro.size(); ++i) {
    std::printf(" %.0f->%.0f: %.1f ms;", micro[i - 1].first, micro[i].first,
                1e3 * (micro[i].second.cpu_s - micro[i - 1].second.cpu_s) / (micro[i].first - micro[i - 1].first));
  }
  std::printf("\n");
  bool ok = true;
  for (const auto& [c, m] : results) ok = ok && m.ok;
  return ok ? 0 : 1;
}
