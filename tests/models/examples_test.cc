// Every example under scenarios/examples/ runs (symmetric fidelity), fits in memory and writes a
// Perfetto trace. The slowest, GPT-3 175B interleaved and Llama-3.1 70B FP8 on 1,024 GPUs, take
// about 2 s each on one core.

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "config/scenario.h"
#include "report/simulation.h"
#include "report/trace_writer.h"

using namespace trainsim;
namespace fs = std::filesystem;

TEST_CASE("models/examples: every example scenario runs and produces a trace") {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(TRAINSIM_SOURCE_DIR) / "scenarios" / "examples")) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 5);
  for (const fs::path& f : files) {
    CAPTURE(f.filename().string());
    const config::Scenario s = config::load_scenario(f.string());
    const report::RunResult r = report::simulate(s, report::RunOptions{{0}, true});
    CHECK(r.iteration_time_s > 0);
    CHECK(r.mfu > 0);
    CHECK(r.mfu < 1);
    CHECK(r.fits);
    std::ostringstream trace;
    report::write_trace(r, trace);
    CHECK(trace.str().find("\"ph\":\"X\"") != std::string::npos);
  }
}
