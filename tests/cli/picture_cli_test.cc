// The picture, trace and compare options of the trainsim binary end to end: files written,
// gzip output identical to the plain one once decompressed, bad input exits 2.

#include <doctest/doctest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/cli/trainsim_process.h"

namespace fs = std::filesystem;
using trainsim_test::Outcome;
using trainsim_test::trainsim;

namespace {

const std::string kTeaching = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/teaching/";

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("trainsim-picture-test-" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[1 << 15];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  return out;
}

}  // namespace

TEST_CASE("cli: run --svg --html --trace write the pictures and the trace, and .gz compresses") {
  const TempDir dir;
  const Outcome o = trainsim("run " + kTeaching + "03b-pipeline-1f1b.json --svg " + (dir / "a.svg") + " --html " + (dir / "a.html") +
                             " --trace " + (dir / "a.json") + " --json " + (dir / "summary.json"));
  REQUIRE(o.code == 0);
  const std::string svg = read(dir / "a.svg");
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("class=\"lane\"") != std::string::npos);
  CHECK(read(dir / "a.html").find("var DATA = ") != std::string::npos);
  CHECK(nlohmann::json::parse(read(dir / "a.json")).contains("traceEvents"));

  REQUIRE(trainsim("run " + kTeaching + "03b-pipeline-1f1b.json --trace " + (dir / "b.json.gz") + " --svg " + (dir / "b.svg.gz")).code ==
          0);
  const std::string raw = read(dir / "b.json.gz");
  REQUIRE(raw.size() > 18);
  CHECK(static_cast<unsigned char>(raw[0]) == 0x1f);  // gzip magic (RFC 1952)
  CHECK(static_cast<unsigned char>(raw[1]) == 0x8b);
  CHECK(raw.size() * 5 < read(dir / "a.json").size());
  CHECK(gunzip(dir / "b.json.gz") == read(dir / "a.json"));
  CHECK(gunzip(dir / "b.svg.gz") == svg);
}

TEST_CASE("cli: --trace-ranks takes ranks, ranges and 'all', and rejects the rest") {
  const TempDir dir;
  const std::string full = kTeaching + "03b-pipeline-1f1b.json --set 'simulation.fidelity=\"full\"' --trace " + (dir / "t.json");
  REQUIRE(trainsim("run " + full + " --trace-ranks 0-2,5").code == 0);
  const auto trace = nlohmann::json::parse(read(dir / "t.json"));
  std::set<int> pids;
  for (const auto& e : trace["traceEvents"]) pids.insert(e["pid"].get<int>());
  CHECK(pids == std::set<int>{0, 1, 2, 5});
  REQUIRE(trainsim("run " + full + " --trace-ranks all").code == 0);
  pids.clear();
  const auto all = nlohmann::json::parse(read(dir / "t.json"));
  for (const auto& e : all["traceEvents"]) pids.insert(e["pid"].get<int>());
  CHECK(pids.size() == 8);

  struct Case {
    std::string ranks, fragment;
  };
  for (const Case& c : {Case{"3", "not simulated"}, Case{"9", "does not exist"}, Case{"0-99", "beyond"}, Case{"x", "not a rank"},
                        Case{"2-1", "not a rank"}}) {
    CAPTURE(c.ranks);
    const Outcome o = trainsim("run " + kTeaching + "03b-pipeline-1f1b.json --trace " + (dir / "t.json") + " --trace-ranks " + c.ranks);
    CHECK(o.code == 2);
    CHECK(o.output.find(c.fragment) != std::string::npos);
  }
}

TEST_CASE("cli: compare prints both summaries and attributes the change, with --json and --svg") {
  const TempDir dir;
  const Outcome o = trainsim("compare " + kTeaching + "03b-pipeline-1f1b.json " + kTeaching + "03c-pipeline-interleaved.json --svg " +
                             (dir / "c.svg") + " --json " + (dir / "c.json"));
  REQUIRE(o.code == 0);
  CHECK(o.output.find("teaching 3b") != std::string::npos);
  CHECK(o.output.find("teaching 3c") != std::string::npos);
  CHECK(o.output.find("largest cause: pipeline bubble") != std::string::npos);
  const auto j = nlohmann::json::parse(read(dir / "c.json"));
  CHECK(j["attribution"]["largest_cause"] == "pipeline_bubble");
  CHECK(j["a"]["iteration_time_s"].get<double>() > j["b"]["iteration_time_s"].get<double>());
  double sum = 0;
  for (const auto& c : j["attribution"]["causes"]) sum += c["change_s"].get<double>();
  CHECK(sum == doctest::Approx(j["difference"]["iteration_time_s"].get<double>()).epsilon(1e-6));
  const std::string svg = read(dir / "c.svg");
  CHECK(svg.find("data-panel=\"A\"") != std::string::npos);
  CHECK(svg.find("data-panel=\"B\"") != std::string::npos);

  // --set-b changes only B: the same file against itself with GPipe.
  const Outcome same = trainsim("compare " + kTeaching + "03b-pipeline-1f1b.json " + kTeaching +
                                "03b-pipeline-1f1b.json --set-b training.pipeline_schedule=gpipe --json -");
  REQUIRE(same.code == 0);
  const auto k = nlohmann::json::parse(same.output);
  CHECK(k["b"]["memory"]["peak_bytes_per_gpu"].get<double>() > k["a"]["memory"]["peak_bytes_per_gpu"].get<double>());
}

TEST_CASE("cli: compare with bad input exits 2") {
  CHECK(trainsim("compare " + kTeaching + "03b-pipeline-1f1b.json /nonexistent.json").code == 2);
  CHECK(trainsim("compare " + kTeaching + "03b-pipeline-1f1b.json").code == 2);
  const Outcome o = trainsim("compare " + kTeaching + "03b-pipeline-1f1b.json " + kTeaching +
                             "03b-pipeline-1f1b.json --set-a training.pipeline_schedule=sideways");
  CHECK(o.code == 2);
  CHECK(o.output.find("/training/pipeline_schedule") != std::string::npos);
}
