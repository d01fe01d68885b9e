#pragma once
// Gradient buckets as Megatron-Core's DistributedDataParallel forms them
// (distributed/param_and_grad_buffer.py): parameters enter a contiguous buffer in the order
// their gradients become ready in the backward pass, dense and expert parameters in separate
// buffers; a bucket closes once it holds at least `bucket_size` parameters (never splitting a
// parameter); its reduction starts when its last gradient is ready. With the distributed
// optimizer the same buckets are all-gathered back, in reverse order, before the forward pass
// uses them.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainsim::models {

// A set of parameters whose gradients are produced by one task (a GEMM's weight gradient, a
// norm's backward). `unit` orders them in the forward pass: a decoder layer index, -1 for the
// embedding, the layer count for the final norm and output layer.
struct ParamGroup {
  std::int64_t params = 0;
  bool expert = false;
  std::int64_t unit = 0;
  std::int64_t fp8 = 0;  // of them, weights of FP8 GEMMs (gathered in FP8 under fp8_param_gather)
  bool operator==(const ParamGroup&) const = default;
};

struct GradientBucket {
  std::int64_t params = 0;
  bool expert = false;
  std::size_t closing_group = 0;  // index of the group whose gradient completes the bucket
  std::int64_t first_unit = 0;    // forward-order span of the units it holds
  std::int64_t last_unit = 0;
  std::int64_t fp8_params = 0;  // of `params`, weights of FP8 GEMMs
};

// Buckets of one model chunk, in the order they close. `groups` in backward order; bucket_size
// 0 = one bucket per buffer (Megatron without overlap_grad_reduce, or with bucketing disabled).
std::vector<GradientBucket> make_buckets(const std::vector<ParamGroup>& groups, std::int64_t bucket_size);

}  // namespace trainsim::models
