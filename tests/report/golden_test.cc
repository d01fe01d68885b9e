// Golden whole-scenario outputs: every scenarios/golden/NAME.json must produce exactly
// tests/golden/NAME.expected.json (the JSON summary without the wall-clock time). An intended
// model change regenerates them with TRAINSIM_UPDATE_GOLDEN=1 and the diff is reviewed.

#include <doctest/doctest.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/scenario.h"
#include "report/simulation.h"
#include "report/summary.h"

using namespace trainsim;
namespace fs = std::filesystem;

TEST_CASE("report/golden: whole-scenario summaries match the committed outputs") {
  const fs::path scenarios = fs::path(TRAINSIM_SOURCE_DIR) / "scenarios" / "golden";
  const fs::path expected_dir = fs::path(TRAINSIM_SOURCE_DIR) / "tests" / "golden";
  const bool update = std::getenv("TRAINSIM_UPDATE_GOLDEN") != nullptr;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(scenarios)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 3);
  for (const fs::path& f : files) {
    CAPTURE(f.string());
    config::Scenario s = config::load_scenario(f.string());
    s.file = f.filename().string();  // paths differ between checkouts
    const report::RunResult r = report::simulate(s, {{}, false});
    const std::string actual = report::summary_json(r, false).dump(2) + "\n";
    const fs::path golden = expected_dir / (f.stem().string() + ".expected.json");
    if (update) {
      std::ofstream(golden) << actual;
      continue;
    }
    std::ifstream in(golden);
    REQUIRE_MESSAGE(in.good(), "missing golden file; run with TRAINSIM_UPDATE_GOLDEN=1");
    std::stringstream buf;
    buf << in.rdbuf();
    CHECK(buf.str() == actual);
  }
}
