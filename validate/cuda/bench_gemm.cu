// trainsim-bench-gemm: measures cuBLASLt matmul throughput over a sweep of shapes and data types
// on one GPU and writes it as a GEMM measurement table (the format of
// validate/data/gemm_measurements.json), ready for `trainsim calibrate`.
//
// Shapes follow the batched convention [b, m, k] x [b, k, n] -> [b, m, n], FLOPs = 2 b m n k.
// Each shape runs `--warmup` times, then `--iterations` times between two CUDA events; the
// heuristic's first algorithm is used, as frameworks do (`--algorithms N`: the fastest of its
// first N, as a best-achievable sweep such as MAMF's takes; they run one after another, so on a
// power-limited GPU the later ones may run hotter). Usage:
//   trainsim-bench-gemm --gpu h100-sxm5-80gb -o h100_gemm.json
//   trainsim-bench-gemm --dtypes bf16,fp8 --sizes 1024,4096,8192 --batches 1 -o sweep.json

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <string>
#include <vector>

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "trainsim-bench-gemm: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

bool check_cublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  std::fprintf(stderr, "trainsim-bench-gemm: %s: cuBLAS status %d\n", what, static_cast<int>(s));
  return false;
}

struct DtypeSpec {
  std::string name;    // command-line name
  std::string column;  // column name in the measurement table
  cudaDataType_t in, out;
  cublasComputeType_t compute;
  int in_bytes, out_bytes;
  bool transpose_a;    // FP8 matmuls need A transposed ("TN")
};

bool dtype_spec(const std::string& name, DtypeSpec& out) {
  if (name == "bf16") {
    out = {name, "bf16xbf16->bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2, false};
  } else if (name == "fp16") {
    out = {name, "f16xf16->f16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2, false};
  } else if (name == "tf32") {
    out = {name, "f32xf32->f32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4, false};
  } else if (name == "fp8") {
    out = {name, "f8e4m3fnxf8e4m3fn->bf16", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2, true};
  } else {
    return false;
  }
  return true;
}

// Pseudo-random bytes 0x38-0x3f and 0xb8-0xbf: in every data type the harness reads (e4m3, bf16,
// fp16, fp32 from its most significant byte) a finite value of magnitude 2^-15 .. 2 with a random
// sign and mantissa. Random operands matter: on a power-limited GPU a GEMM over constant data runs
// faster than over real weights and activations (fewer bits toggle), so constants would flatter.
__global__ void fill_bytes(unsigned char* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    unsigned int x = static_cast<unsigned int>(i) ^ static_cast<unsigned int>(i >> 32) * 0x9e3779b9u;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    p[i] = static_cast<unsigned char>(0x38u | (x & 0x87u));
  }
}

std::vector<std::int64_t> parse_list(const char* text) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0' || v < 1) {
      std::fprintf(stderr, "trainsim-bench-gemm: expected a comma-separated list of positive integers, got '%s'\n", text);
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> parse_names(const char* text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

void usage() {
  std::fprintf(stderr,
               "usage: trainsim-bench-gemm [--gpu PRESET] [--dtypes bf16,fp8,tf32,fp16] [--sizes 256,512,...]\n"
               "                           [--batches 1,2,4] [--iterations N] [--warmup N] [--algorithms N] [--device N]\n"
               "                           [-o FILE]\n"
               "Sweeps every (b, m, n, k) with m, n, k in --sizes and b in --batches; writes the GEMM measurement\n"
               "table JSON (stdout without -o). --gpu names the trainsim GPU preset the table is for.\n");
}

// Time of one matmul in seconds, or a negative value when cuBLASLt has no algorithm for it.
double time_matmul(cublasLtHandle_t lt, const DtypeSpec& d, std::int64_t b, std::int64_t m, std::int64_t n, std::int64_t k,
                   void* a_buf, void* b_buf, void* d_buf, void* workspace, std::size_t workspace_bytes, const float* scale,
                   int warmup, int iterations, int algorithms, cudaStream_t stream) {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  double seconds = -1;
  const cublasOperation_t ta = d.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  // Column-major D[m x n] = op(A)[m x k] * B[k x n]; A is stored k x m when transposed.
  const std::int64_t a_rows = d.transpose_a ? k : m, a_cols = d.transpose_a ? m : k;
  if (check_cublas(cublasLtMatmulDescCreate(&op, d.compute, CUDA_R_32F), "matmul descriptor") &&
      check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa") &&
      check_cublas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb") &&
      check_cublas(cublasLtMatrixLayoutCreate(&la, d.in, static_cast<std::uint64_t>(a_rows), static_cast<std::uint64_t>(a_cols), a_rows), "layout A") &&
      check_cublas(cublasLtMatrixLayoutCreate(&lb, d.in, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n), k), "layout B") &&
      check_cublas(cublasLtMatrixLayoutCreate(&ld, d.out, static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(n), m), "layout D")) {
    if (d.in == CUDA_R_8F_E4M3) {
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof scale);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof scale);
    }
    if (b > 1) {
      const int batch = static_cast<int>(b);
      const std::int64_t sa = m * k, sb = k * n, sd = m * n;
      cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
      cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa);
      cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
      cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb);
      cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
      cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sd, sizeof sd);
    }
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof workspace_bytes);
    std::vector<cublasLtMatmulHeuristicResult_t> heuristics(static_cast<std::size_t>(algorithms));
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, algorithms, heuristics.data(), &found) == CUBLAS_STATUS_SUCCESS) {
      const float alpha = 1.0f, beta = 0.0f;
      cudaEvent_t start, stop;
      check_cuda(cudaEventCreate(&start), "event");
      check_cuda(cudaEventCreate(&stop), "event");
      for (int h = 0; h < found; ++h) {
        auto launch = [&]() {
          return cublasLtMatmul(lt, op, &alpha, a_buf, la, b_buf, lb, &beta, d_buf, ld, d_buf, ld, &heuristics[static_cast<std::size_t>(h)].algo,
                                workspace, workspace_bytes, stream);
        };
        bool ok = true;
        for (int i = 0; i < warmup && ok; ++i) ok = check_cublas(launch(), "matmul");
        check_cuda(cudaEventRecord(start, stream), "event record");
        for (int i = 0; i < iterations && ok; ++i) ok = check_cublas(launch(), "matmul");
        check_cuda(cudaEventRecord(stop, stream), "event record");
        check_cuda(cudaEventSynchronize(stop), "synchronize");
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed time");
        const double t = static_cast<double>(ms) * 1e-3 / iterations;
        if (ok && (seconds < 0 || t < seconds)) seconds = t;
      }
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    }
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  std::string gpu_preset, output;
  std::vector<std::string> dtype_names{"bf16", "fp8", "tf32"};
  std::vector<std::int64_t> sizes{256, 512, 1024, 2048, 4096, 8192}, batches{1, 2, 4};
  int iterations = 20, warmup = 5, algorithms = 1, device = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "trainsim-bench-gemm: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--gpu") gpu_preset = value();
    else if (arg == "-o" || arg == "--output") output = value();
    else if (arg == "--dtypes") dtype_names = parse_names(value());
    else if (arg == "--sizes") sizes = parse_list(value());
    else if (arg == "--batches") batches = parse_list(value());
    else if (arg == "--iterations") iterations = static_cast<int>(parse_list(value()).front());
    else if (arg == "--warmup") warmup = static_cast<int>(parse_list(value()).front());
    else if (arg == "--algorithms") algorithms = static_cast<int>(std::min<std::int64_t>(64, parse_list(value()).front()));
    else if (arg == "--device") {
      const char* v = value();
      char* end = nullptr;
      device = static_cast<int>(std::strtol(v, &end, 10));
      if (end == v || *end != '\0' || device < 0) {
        std::fprintf(stderr, "trainsim-bench-gemm: --device expects a device index, got '%s'\n", v);
        return 2;
      }
    }
    else if (arg == "-h" || arg == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "trainsim-bench-gemm: unknown argument '%s'\n", arg.c_str());
      usage();
      return 2;
    }
  }
  std::vector<DtypeSpec> dtypes;
  for (const std::string& n : dtype_names) {
    DtypeSpec d;
    if (!dtype_spec(n, d)) {
      std::fprintf(stderr, "trainsim-bench-gemm: unknown data type '%s' (bf16, fp16, tf32, fp8)\n", n.c_str());
      return 2;
    }
    dtypes.push_back(d);
  }

  check_cuda(cudaSetDevice(device), "select device");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "device properties");
  const bool has_fp8 = prop.major > 8 || (prop.major == 8 && prop.minor >= 9);
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "stream");
  cublasLtHandle_t lt;
  if (!check_cublas(cublasLtCreate(&lt), "cuBLASLt handle")) return 1;

  const std::int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  const std::int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  const std::size_t elements = static_cast<std::size_t>(max_batch * max_size * max_size);
  void *a_buf = nullptr, *b_buf = nullptr, *d_buf = nullptr, *workspace = nullptr;
  float* scale = nullptr;
  const std::size_t workspace_bytes = std::size_t{32} << 20;
  check_cuda(cudaMalloc(&a_buf, elements * 4), "allocate A");
  check_cuda(cudaMalloc(&b_buf, elements * 4), "allocate B");
  check_cuda(cudaMalloc(&d_buf, elements * 4), "allocate D");
  check_cuda(cudaMalloc(&workspace, workspace_bytes), "allocate workspace");
  check_cuda(cudaMalloc(&scale, sizeof(float)), "allocate scale");
  const float one = 1.0f;
  check_cuda(cudaMemcpy(scale, &one, sizeof one, cudaMemcpyHostToDevice), "copy scale");
  fill_bytes<<<1024, 256, 0, stream>>>(static_cast<unsigned char*>(a_buf), elements * 4);
  fill_bytes<<<1024, 256, 0, stream>>>(static_cast<unsigned char*>(b_buf), elements * 4);
  check_cuda(cudaStreamSynchronize(stream), "fill");

  std::ostringstream rows;
  bool first_row = true;
  for (std::int64_t b : batches) {
    for (std::int64_t m : sizes) {
      for (std::int64_t n : sizes) {
        for (std::int64_t k : sizes) {
          std::ostringstream cells;
          for (const DtypeSpec& d : dtypes) {
            if (d.in == CUDA_R_8F_E4M3 && !has_fp8) continue;
            const double s = time_matmul(lt, d, b, m, n, k, a_buf, b_buf, d_buf, workspace, workspace_bytes, scale, warmup,
                                         iterations, algorithms, stream);
            if (s <= 0) continue;
            const double tflops = 2.0 * static_cast<double>(b) * static_cast<double>(m) * static_cast<double>(n) *
                                  static_cast<double>(k) / s * 1e-12;
            char cell[96];
            std::snprintf(cell, sizeof cell, ", \"%s\": %.3f", d.column.c_str(), tflops);
            cells << cell;
          }
          if (cells.str().empty()) continue;
          rows << (first_row ? "" : ",\n") << "    {\"b\": " << b << ", \"m\": " << m << ", \"n\": " << n << ", \"k\": " << k
               << cells.str() << "}";
          first_row = false;
        }
      }
    }
    std::fprintf(stderr, "trainsim-bench-gemm: batch %lld done\n", static_cast<long long>(b));
  }

  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::ostringstream doc;
  doc << "[\n {\n  \"id\": \"trainsim_bench_gemm_" << json_escape(gpu_preset.empty() ? "gpu" : gpu_preset) << "_" << date << "\",\n"
      << "  \"source\": \"trainsim-bench-gemm on " << json_escape(prop.name) << " (" << date << "), cuBLASLt " << cublasLtGetVersion()
      << ", CUDA runtime " << runtime << "\",\n";
  if (!gpu_preset.empty()) doc << "  \"gpu\": \"" << json_escape(gpu_preset) << "\",\n";
  doc << "  \"device\": {\"name\": \"" << json_escape(prop.name) << "\", \"sm_count\": " << prop.multiProcessorCount
      << ", \"compute_capability\": \"" << prop.major << "." << prop.minor << "\"},\n"
      << "  \"settings\": {\"warmup\": " << warmup << ", \"iterations\": " << iterations
      << ", \"algorithm\": \""
      << (algorithms == 1 ? std::string("cuBLASLt heuristic, first result")
                          : "cuBLASLt heuristic, fastest of its first " + std::to_string(algorithms))
      << "\", \"workspace_bytes\": " << workspace_bytes
      << ", \"operands\": \"pseudo-random, magnitude 2^-15..2, random signs\"},\n"
      << "  \"shape_convention\": \"batched matmul [b, m, k] x [b, k, n]; FLOPs = 2*b*m*n*k\",\n"
      << "  \"rows\": [\n" << rows.str() << "\n  ]\n }\n]\n";
  if (output.empty()) {
    std::fputs(doc.str().c_str(), stdout);
  } else {
    FILE* f = std::fopen(output.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "trainsim-bench-gemm: %s: cannot be written\n", output.c_str());
      return 2;
    }
    std::fputs(doc.str().c_str(), f);
    std::fclose(f);
  }
  cublasLtDestroy(lt);
  cudaFree(scale);
  cudaFree(workspace);
  cudaFree(d_buf);
  cudaFree(b_buf);
  cudaFree(a_buf);
  cudaStreamDestroy(stream);
  return 0;
}
