#pragma once
// GemmSweep: measured matmul throughput by shape and data type, as `trainsim-bench-gemm` writes
// it and as validate/data/gemm_measurements.json holds it: an array of tables, each with its id,
// source and rows. Two row layouts are read:
//   shape rows  {"b", "m", "n", "k", "<a>x<b>-><c>": TFLOP/s, ...}  (a column per data type, e.g.
//               "bf16xbf16->bf16"; the table's "gpu" names the trainsim GPU preset it ran on)
//   best rows   {"gpu": "H100 SXM", "dtype": "bf16", "m", "n", "k", "tflops": ...}
// FLOPs = 2 b m n k. Malformed input is an InputError with the file and JSON path.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/task_graph.h"

namespace trainsim::validate {

struct GemmPoint {
  std::string table;   // id of the table it comes from
  std::string gpu;     // GPU the row names (best rows) or the table's "gpu" preset (may be empty)
  std::string column;  // the column or dtype as written in the file
  sim::DataType dtype = sim::DataType::kBf16;
  std::int64_t b = 1, m = 0, n = 0, k = 0;
  double tflops = 0;
  double flops() const { return 2.0 * static_cast<double>(b) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

struct GemmTable {
  std::string id;
  std::string source;
  std::string gpu_preset;                  // the table's "gpu" key, when present
  std::vector<GemmPoint> points;
  std::vector<std::string> unused_columns;  // data-type columns trainsim does not model (e.g. mixed FP8 formats)
};

std::vector<GemmTable> read_gemm_sweep(const std::string& file);

// Whether a GPU named in a measurement ("H100 SXM", "A100-SXM4-80GB") is the trainsim GPU
// `preset` ("h100-sxm5-80gb") whose spec name is `spec_name`: after lower-casing and dropping
// everything but letters and digits, the measurement's name must be a prefix of either.
bool same_gpu(const std::string& measured, const std::string& preset, const std::string& spec_name);

}  // namespace trainsim::validate
