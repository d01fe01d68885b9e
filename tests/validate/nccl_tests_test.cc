#include "validate/nccl_tests.h"

#include <doctest/doctest.h>

#include <string>

#include "sim/error.h"

using namespace trainsim;

namespace {

// nccl-tests 2.13+ layout (with `root` and `#wrong`), as util.cu prints it.
const char* kNewLayout = R"(# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid  1234 on   hostname device  0 [0000:07:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  1235 on   hostname device  1 [0000:08:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
host:1234:1234 [0] NCCL INFO comm 0x55 rank 0 nRanks 2 - Init COMPLETE
           8             2     float     sum      -1    13.67    0.00    0.00       0    13.03    0.00    0.00       0
   134217728      33554432     float     sum      -1   586.40  228.88  228.88       0   586.00  229.05  229.05     N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 114.5
#
# Collective test concluded: all_reduce_perf
)";

// The layout before the 2.13 resync: no `root` column, `error` instead of `#wrong`.
const char* kOldLayout =
    R"( nThread 1 nGpus 8 minBytes 32 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
       32768          8192   float     sum    43.83    0.75    1.31  0e+00    44.10    0.74    1.30  0e+00
  1073741824     268435456   float     sum   8203.9  130.88  229.04  1e-06   8210.1  130.78  228.87  1e-06
)";

}  // namespace

TEST_CASE("validate/nccl-tests: the 2.13+ text layout is read by its header") {
  const auto log = validate::parse_nccl_tests(kNewLayout, "new.log");
  CHECK(log.test == "all_reduce_perf");
  CHECK(log.threads == 1);
  CHECK(log.gpus_per_thread == 1);
  CHECK(log.ranks == 2);
  REQUIRE(log.rows.size() == 2);
  CHECK(log.rows[0].bytes == 8);
  CHECK(log.rows[0].type == "float");
  CHECK(log.rows[0].best_time_us() == doctest::Approx(13.03));  // in-place was faster
  CHECK(log.rows[1].out_of_place->algbw_GBps == doctest::Approx(228.88));
  CHECK(log.rows[1].in_place->time_us == doctest::Approx(586.0));
  CHECK(log.rows[1].line == 14);
}

TEST_CASE("validate/nccl-tests: the old layout without root, with MPI tags and -S timestamps") {
  const auto old_log = validate::parse_nccl_tests(kOldLayout, "old.log");
  CHECK(old_log.gpus_per_thread == 8);
  REQUIRE(old_log.rows.size() == 2);
  CHECK(old_log.rows[1].bytes == 1073741824);
  CHECK(old_log.rows[1].best_time_us() == doctest::Approx(8203.9));

  const std::string tagged =
      "[0] #       size         count      type   redop    root     time   algbw   busbw  #wrong   "
      "  time   algbw   busbw  #wrong timestamp\n"
      "[0]         1024           256     float     sum      -1    16.94    0.06    0.11       0   "
      " 16.17    0.06    0.11       0 2025-01-02 03:04:05\n";
  const auto t = validate::parse_nccl_tests(tagged, "tagged.log");
  REQUIRE(t.rows.size() == 1);
  CHECK(t.rows[0].bytes == 1024);
  CHECK(t.rows[0].best_time_us() == doctest::Approx(16.17));
}

TEST_CASE("validate/nccl-tests: -J JSON output") {
  const std::string json = R"({"version":1,"args":["./build/all_gather_perf","-b","8"],
    "config":{"nthreads":1,"ngpus":2},
    "devices":[{"rank":0},{"rank":1}],
    "results":[{"size":1048576,"count":131072,"type":"float","redop":"none","root":"    -1",
                "out_of_place":{"time":27.4,"alg_bw":38.3,"bus_bw":19.1,"nwrong":0},
                "in_place":{"time":26.9,"alg_bw":39.0,"bus_bw":19.5,"nwrong":null},
                "actual_iterations":20,"experiment_name":""},
               {"size":2048,"count":256,"type":"float","redop":"none","root":"-1",
                "out_of_place":null,"in_place":{"cpu_time":5.1,"alg_bw":"nan","bus_bw":0}}],
    "out_of_bounds":{"count":0,"okay":true}})";
  const auto log = validate::parse_nccl_tests(json, "run.json");
  CHECK(log.test == "all_gather_perf");
  CHECK(log.gpus_per_thread == 2);
  CHECK(log.ranks == 2);
  REQUIRE(log.rows.size() == 2);
  CHECK(log.rows[0].best_time_us() == doctest::Approx(26.9));
  CHECK(log.rows[1].best_time_us() == doctest::Approx(5.1));
  CHECK_FALSE(log.rows[1].out_of_place.has_value());
  bool p2p = true;
  CHECK(validate::collective_of_test(log.test, "run.json", &p2p) ==
        sim::CollectiveKind::kAllGather);
  CHECK_FALSE(p2p);
  // A non-empty message without a time is an error naming the JSON path.
  const auto check_error = [](const std::string& text, const std::string& fragment) {
    try {
      validate::parse_nccl_tests(text, "bad.json");
      FAIL("accepted a bad log");
    } catch (const InputError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(fragment) != std::string::npos, e.what());
    }
  };
  check_error(
      R"({"results":[{"size":8,"count":2,"out_of_place":{"time":"x","alg_bw":0,"bus_bw":0}}]})",
      "bad.json: /results/0/out_of_place/time");
  check_error(R"({"results":[{"size":8,"count":2,"out_of_place":null}]})",
              "/results/0: expected a positive time");
  check_error(R"({"nothing":1})", "bad.json: /results");
}

TEST_CASE("validate/nccl-tests: bad text logs name the file and the line") {
  const auto error_of = [](const std::string& text) {
    try {
      validate::parse_nccl_tests(text, "bad.log");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string header =
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
      "time   algbw   busbw  #wrong\n";
  CHECK(error_of(header + "  8  2  float  sum  -1  13.0  0.0  0.0  0  13.0  0.0\n")
            .find("bad.log: line 2: expected 13 columns") == 0);
  CHECK(error_of(header + "  8  2  float  sum  -1  1x3  0.0  0.0  0  13.0  0.0  0.0  0\n")
            .find("bad.log: line 2: expected a number in column 'time'") == 0);
  CHECK(error_of("just some text\n").find("bad.log: no nccl-tests result table") == 0);
  CHECK(error_of(header).find("bad.log: the nccl-tests table has no result rows") == 0);
  CHECK(error_of(header + "  8  2  float  sum  -1  0  0.0  0.0  0  0  0.0  0.0  0\n")
            .find("line 2: expected a positive time") != std::string::npos);
  CHECK_THROWS_AS(validate::read_nccl_tests("/nonexistent/all_reduce.log"), InputError);
  CHECK_THROWS_AS(validate::collective_of_test("gather_perf", "x.log", nullptr), InputError);
}
