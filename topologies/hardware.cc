#include "topologies/hardware.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace trainsim::topo {

const char* to_string(Architecture a) {
  switch (a) {
    case Architecture::kAmpere:
      return "ampere";
    case Architecture::kHopper:
      return "hopper";
    case Architecture::kBlackwell:
      return "blackwell";
  }
  return "?";
}

FlopRate GpuSpec::peak(DataType t) const {
  switch (t) {
    case DataType::kFp8:
      return dense_fp8.per_second() > 0 ? dense_fp8 : dense_16bit;
    case DataType::kFp4:
      return dense_fp4.per_second() > 0 ? dense_fp4 : peak(DataType::kFp8);
    case DataType::kBf16:
    case DataType::kFp16:
      return dense_16bit;
    case DataType::kTf32:
      return dense_tf32;
    case DataType::kFp32:
      return fp32;
  }
  return dense_16bit;
}

bool ComputeCalibration::select_attention(const std::string& implementation) {
  if (implementation == attention.implementation) return true;
  for (AttentionCalibration& a : attention_alternatives) {
    if (a.implementation == implementation) {
      std::swap(attention, a);
      return true;
    }
  }
  return false;
}

std::string ComputeCalibration::resolve_like_attention() {
  for (AttentionCalibration& a : attention_alternatives) {
    if (a.like.empty()) continue;
    const AttentionCalibration* model = attention.implementation == a.like ? &attention : nullptr;
    for (const AttentionCalibration& b : attention_alternatives) {
      if (b.implementation == a.like && b.like.empty()) model = &b;
    }
    if (model == nullptr) return a.implementation;
    a.tile = model->tile;
    a.forward = model->forward;
    a.backward = model->backward;
  }
  return "";
}

int nodes_per_leaf_for_radix(const InterNodeSpec& net) {
  const double o = std::max(1.0, net.oversubscription);
  const int down = std::max(1, static_cast<int>(std::floor(net.switch_radix * o / (1.0 + o) + 1e-9)));
  if (net.topology == "rail_optimized") return down;
  return std::max(1, down / std::max(1, net.nics_per_node));
}

}  // namespace trainsim::topo
