#pragma once
// AttentionSweep: fused-attention kernel benchmarks, as validate/data/attention_measurements.json
// holds them: {"tables": [{"id", "source", "gpu" (trainsim preset), "implementation",
// "rows": [{"pass": "forward"|"backward", "causal", "head_dim", "seq_len", "tflops",
// "batch"?, "heads"?, "window"?}]}]}. Throughput follows the flash-attention benchmark convention:
// forward FLOPs 4 x batch x heads x seq^2 x head_dim, halved with a causal mask; backward 2.5x
// forward. "window" (causal rows only): a sliding window of that many keys before each query
// (Megatron-Core's window_size left; cuDNN's and FlashAttention's window of W keys is W - 1 here),
// the FLOPs those of the keys each query sees, as trainsim counts them.
// Without batch and heads, a table's "tokens" and "hidden" give them (batch = tokens / seq,
// heads = hidden / head_dim). "dropout" (0 < p < 1): the kernel ran with attention dropout;
// "tflops_without_dropout" beside it: the same shape timed without, in the same run (the pair
// the dropout cost is fitted from).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::validate {

struct AttentionPoint {
  std::string table;
  std::string gpu;             // trainsim GPU preset of the table
  std::string implementation;  // e.g. "cudnn", "flash_attention_2"
  bool backward = false;
  bool causal = false;
  std::int64_t batch = 1, heads = 1, seq_len = 0, head_dim = 0;
  std::int64_t window = 0;  // sliding window: keys before each query (0: none)
  double dropout = 0;       // attention dropout probability the kernel ran with (0: none)
  double tflops = 0;
  std::optional<double> tflops_without_dropout;  // the same shape without dropout, same run
  double flops() const;  // by the convention above
};

struct AttentionTable {
  std::string file;  // where it was read, and its JSON path there (for errors)
  std::string path;
  std::string id;
  std::string source;
  std::string gpu;
  std::string implementation;
  std::vector<AttentionPoint> points;
};

std::vector<AttentionTable> read_attention_sweep(const std::string& file);

}  // namespace trainsim::validate
