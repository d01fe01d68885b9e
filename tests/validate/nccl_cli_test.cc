// `trainsim collective` and `trainsim validate nccl-tests` end to end: output shape, JSON, exit
// codes and messages for bad input.

#include <doctest/doctest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/validate/test_files.h"

namespace {

using trainsim::testing::Outcome;
using trainsim::testing::run_trainsim;
using trainsim::testing::temp_file;

std::size_t count_lines_starting_with_digit(const std::string& s) {
  std::size_t rows = 0;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t end = s.find('\n', pos);
    const std::string line =
        s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    const std::size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos && std::isdigit(static_cast<unsigned char>(line[first]))) ++rows;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return rows;
}

}  // namespace

TEST_CASE("cli collective: an nccl-tests-style table from 8 B to 16 GiB") {
  const Outcome o = run_trainsim(
      "collective --cluster dgx-h100 --nodes 2 --op all_reduce --min-bytes 8 --max-bytes 16G "
      "--step-factor 2");
  CHECK(o.code == 0);
  CHECK(o.output.find("time") != std::string::npos);
  CHECK(o.output.find("busbw") != std::string::npos);
  CHECK(o.output.find("algorithm") != std::string::npos);
  CHECK(count_lines_starting_with_digit(o.output) == 32);  // 8 B, 16 B, ..., 16 GiB
}

TEST_CASE("cli collective: the header states the measured ring's terms where they apply") {
  // One A100 node: the shipped calibration's ring, its start-up term included.
  const Outcome one = run_trainsim("collective --cluster dgx-a100-80gb --nodes 1 -b 1M -e 4M");
  REQUIRE(one.code == 0);
  CHECK(one.output.find("# rings inside the node from 1048576 B up") != std::string::npos);
  CHECK(one.output.find("us per step, link ") != std::string::npos);
  CHECK(one.output.find(", start-up over the first ") != std::string::npos);
  // Two nodes: NCCL's model alone, so no such line.
  const Outcome two = run_trainsim("collective --cluster dgx-a100-80gb --nodes 2 -b 1M -e 4M");
  REQUIRE(two.code == 0);
  CHECK(two.output.find("rings inside the node") == std::string::npos);
}

TEST_CASE("cli collective: --json - writes the rows with nccl-tests' bandwidths") {
  const Outcome o = run_trainsim(
      "collective --cluster dgx-a100-80gb --nodes 1 --op all_gather -b 1M -e 1G -f 4 --json -");
  REQUIRE(o.code == 0);
  const nlohmann::json j = nlohmann::json::parse(o.output);
  REQUIRE(j["rows"].size() == 6);
  for (const auto& r : j["rows"]) {
    for (const char* key :
         {"bytes", "time_us", "algbw_GBps", "busbw_GBps", "algorithm", "protocol"})
      CHECK(r.contains(key));
    // all_gather: busbw = algbw x (n-1)/n, algbw = bytes / time.
    const double algbw = r["bytes"].get<double>() / (r["time_us"].get<double>() * 1e3);
    CHECK(r["algbw_GBps"].get<double>() == doctest::Approx(algbw));
    CHECK(r["busbw_GBps"].get<double>() == doctest::Approx(algbw * 7 / 8));
  }
  // Per-rank sizes are rounded like nccl-tests: 1 MiB over 8 ranks stays 1 MiB.
  CHECK(j["rows"][0]["bytes"] == 1048576);
}

TEST_CASE("cli collective: a huge step factor ends the sweep instead of overflowing") {
  const Outcome o = run_trainsim("collective -b 8 -e 16G -f 4611686018427387904");
  CHECK(o.code == 0);
  CHECK(count_lines_starting_with_digit(o.output) == 1);
}

TEST_CASE("cli collective: bad options exit 2 and say what was expected") {
  struct Case {
    std::string args, fragment;
  };
  const Case cases[] = {
      {"collective --op gather", "unknown collective 'gather'"},
      {"collective --max-bytes 1X", "--max-bytes: expected a size in bytes"},
      {"collective --min-bytes 1G --max-bytes 1M", "--max-bytes: expected at least --min-bytes"},
      {"collective --nodes 2 --gpus 5", "--gpus: expected a multiple of --nodes"},
      {"collective --cluster nope", "nope"},
      {"collective --dtype float17", "--dtype: expected one of"},
      {"collective --step-factor 1", "--step-factor"},
      {"collective --gpus-per-thread 0", "--gpus-per-thread"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const Outcome o = run_trainsim(c.args);
    CHECK(o.code == 2);
    CHECK(o.output.find(c.fragment) != std::string::npos);
  }
}

TEST_CASE("cli validate nccl-tests: measured beside predicted, bad logs name the file and line") {
  const std::string log = temp_file("nccl_cli_ok.log",
                                    "# Collective test starting: all_reduce_perf\n"
                                    "# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: "
                                    "2(factor) warmup iters: 5 iters: 20\n"
                                    "#       size         count      type   redop    root     time "
                                    "  algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
                                    "           8             2     float     sum      -1    13.67 "
                                    "   0.00    0.00       0    13.03    0.00    0.00       0\n"
                                    "    67108864      16777216     float     sum      -1    324.7 "
                                    " 206.67  361.67       0    324.7  206.67  361.68       0\n"
                                    " 17179869184    4294967296     float     sum      -1    62648 "
                                    " 274.23  479.90       0    62636  274.28  479.99       0\n");
  const Outcome o =
      run_trainsim("validate nccl-tests " + log + " --cluster dgx-h100 --nodes 1 --gpus 8");
  CHECK(o.code == 0);
  CHECK(o.output.find("all_reduce_perf on 8 GPUs") != std::string::npos);
  CHECK(o.output.find("NVLS") != std::string::npos);
  CHECK(o.output.find("mean absolute error") != std::string::npos);
  const Outcome j =
      run_trainsim("validate nccl-tests " + log + " --cluster dgx-h100 --gpus 8 --json -");
  REQUIRE(j.code == 0);
  const nlohmann::json doc = nlohmann::json::parse(j.output);
  REQUIRE(doc["rows"].size() == 3);
  CHECK(std::abs(doc["rows"][2]["busbw_error"].get<double>()) < 0.15);

  const std::string bad =
      temp_file("nccl_cli_bad.log",
                "#       size         count      type   redop    root     time   algbw   busbw  "
                "#wrong     time   algbw   busbw  #wrong\n"
                "           8             2     float     sum      -1    13.67    0.00\n");
  const Outcome b = run_trainsim("validate nccl-tests " + bad + " --cluster dgx-h100");
  CHECK(b.code == 2);
  CHECK(b.output.find(bad + ": line 2: expected 13 columns") != std::string::npos);
  const Outcome missing = run_trainsim("validate nccl-tests /no/such/all_reduce.log");
  CHECK(missing.code == 2);
  CHECK(missing.output.find("/no/such/all_reduce.log") != std::string::npos);
  const Outcome unnamed = run_trainsim("validate nccl-tests " + bad + " --cluster dgx-h100 --nodes 3");
  CHECK(unnamed.code == 2);
  std::remove(log.c_str());
  std::remove(bad.c_str());
}
