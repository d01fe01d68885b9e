#include "models/training_spec.h"

namespace trainsim::models {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kFp4:
      return "fp4";
  }
  return "?";
}

const char* to_string(QuantRecipe r) {
  switch (r) {
    case QuantRecipe::kDelayed:
      return "delayed";
    case QuantRecipe::kTensorwise:
      return "tensorwise";
    case QuantRecipe::kMxfp8:
      return "mxfp8";
    case QuantRecipe::kNvfp4:
      return "nvfp4";
  }
  return "?";
}

const char* to_string(RecomputeGranularity g) {
  switch (g) {
    case RecomputeGranularity::kNone:
      return "none";
    case RecomputeGranularity::kSelective:
      return "selective";
    case RecomputeGranularity::kFull:
      return "full";
  }
  return "?";
}

const char* to_string(RecomputeMethod m) { return m == RecomputeMethod::kUniform ? "uniform" : "block"; }
const char* to_string(AttentionKernel k) { return k == AttentionKernel::kFlash ? "flash" : "unfused"; }

const char* to_string(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGpipe:
      return "gpipe";
    case PipelineSchedule::k1F1B:
      return "1f1b";
    case PipelineSchedule::kInterleaved:
      return "interleaved";
  }
  return "?";
}

const char* to_string(CpCommType c) {
  switch (c) {
    case CpCommType::kP2p:
      return "p2p";
    case CpCommType::kA2a:
      return "a2a";
    case CpCommType::kAllGather:
      return "allgather";
    case CpCommType::kA2aP2p:
      return "a2a+p2p";
  }
  return "?";
}

const char* to_string(TokenDispatcher d) {
  switch (d) {
    case TokenDispatcher::kAllToAll:
      return "alltoall";
    case TokenDispatcher::kFlex:
      return "flex";
  }
  return "?";
}

std::string cp_comm_label(const ParallelSpec& p) {
  switch (p.cp_comm_type) {
    case CpCommType::kA2a:
      return "all-to-all";
    case CpCommType::kAllGather:
      return "all-gather";
    case CpCommType::kA2aP2p:
      return "all-to-all " + std::to_string(p.hierarchical_context_parallel_sizes.at(0)) + " x ring " +
             std::to_string(p.hierarchical_context_parallel_sizes.at(1));
    case CpCommType::kP2p:
      break;
  }
  return "";
}

}  // namespace trainsim::models
