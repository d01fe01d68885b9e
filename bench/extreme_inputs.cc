// bench_extreme_inputs [CASES.json]: runs every case of the bad-input corpus
// (tests/bad_inputs/cases.json by default) through the trainsim binary and prints, per case, the
// exit code, wall time, CPU time and peak memory. The promise it measures (README "Input
// limits"): no input runs longer than 10 s; exits 1 when one does.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/bad_inputs/bad_input_cases.h"

namespace {

struct Measurement {
  int exit_code = -1;
  double wall_s = 0, cpu_s = 0, max_rss_mib = 0;
};

// Runs the binary with `args` in `folder`, output discarded.
Measurement measure(const std::string& folder, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string binary = TRAINSIM_BINARY;
  argv.push_back(binary.data());
  std::vector<std::string> storage = args;
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    if (chdir(folder.c_str()) != 0) _exit(127);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Measurement m;
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  m.cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
            static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  m.max_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cases_file = argc > 1 ? argv[1] : std::string(TRAINSIM_SOURCE_DIR) + "/tests/bad_inputs/cases.json";
  const std::string folder = cases_file.substr(0, cases_file.find_last_of('/'));
  std::printf("%-58s %4s %8s %8s %9s\n", "case", "exit", "wall s", "CPU s", "peak MiB");
  double slowest = 0;
  for (const tests::BadInputCase& c : tests::read_bad_input_cases(cases_file)) {
    const Measurement m = measure(folder, c.args);
    std::printf("%-58.58s %4d %8.2f %8.2f %9.1f%s\n", c.id.c_str(), m.exit_code, m.wall_s, m.cpu_s, m.max_rss_mib,
                m.exit_code != c.exit_code ? "  (unexpected exit code)" : "");
    slowest = std::max(slowest, m.wall_s);
  }
  std::printf("slowest case: %.2f s wall (limit 10 s)\n", slowest);
  return slowest > 10 ? 1 : 0;
}
