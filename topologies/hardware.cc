#include "topologies/hardware.h"

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

}  // namespace trainsim::topo
