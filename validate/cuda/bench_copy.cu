// trainsim-bench-copy: measures the copy rate between GPU memory and pinned host memory with every
// local GPU copying at once (one thread per GPU), as activation offloading copies (Transformer
// Engine's CPU offloading: device to host in the forward pass, host to device in the backward),
// and writes the figure a GPU preset's host_copy_GBps takes.
//
// Each GPU copies a `-b` byte buffer `-n` times in each direction on its own stream with
// cudaMemcpyAsync (the copy engines), all GPUs starting each direction together; the rate of a
// GPU in a direction is bytes x iterations / elapsed time between CUDA events. host_copy_GBps is
// the slowest GPU's slower direction: the rate every offloading rank can count on.
// Usage: trainsim-bench-copy [-b 1G] [-n 20] [-g GPUS] [-o copy.json]

#include <cuda_runtime.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sizes.h"

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "trainsim-bench-copy: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

std::size_t parse_size(const char* text) {
  return trainsim_cuda::parse_size("trainsim-bench-copy", text, 64.0 * 1024 * 1024 * 1024);  // up to 64G
}

int parse_int(const char* flag, const char* text, int low, int high) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < low || v > high) {
    std::fprintf(stderr, "trainsim-bench-copy: %s expects an integer in [%d, %d], got '%s'\n", flag, low, high, text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

// All GPU threads wait here, so that every GPU starts a direction at once.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    const int round = round_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, arrived_ = 0, round_ = 0;
};

struct Rates {
  double d2h = 0, h2d = 0;  // GB/s (1e9 bytes)
};

// One direction on one GPU: `iterations` copies of `bytes`, timed by events on the stream.
double time_copies(void* dst, const void* src, std::size_t bytes, int iterations, cudaMemcpyKind kind, cudaStream_t s) {
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start, s), "cudaEventRecord");
  for (int i = 0; i < iterations; ++i) check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync");
  check_cuda(cudaEventRecord(stop, s), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  check_cuda(cudaEventDestroy(start), "cudaEventDestroy");
  check_cuda(cudaEventDestroy(stop), "cudaEventDestroy");
  return static_cast<double>(bytes) * iterations / (ms * 1e-3) * 1e-9;
}

void run_gpu(int gpu, std::size_t bytes, int iterations, Barrier& barrier, Rates& out) {
  check_cuda(cudaSetDevice(gpu), "cudaSetDevice");
  void* device = nullptr;
  void* host = nullptr;
  check_cuda(cudaMalloc(&device, bytes), "cudaMalloc");
  // Pinned (page-locked) host memory, as PyTorch's offloading allocates it; the driver places it
  // on the calling thread's NUMA node (run under numactl to choose another).
  check_cuda(cudaHostAlloc(&host, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  check_cuda(cudaMemset(device, 1, bytes), "cudaMemset");
  std::memset(host, 2, bytes);
  cudaStream_t s;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  // Warm-up: one copy each way.
  check_cuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  check_cuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  barrier.wait();
  out.d2h = time_copies(host, device, bytes, iterations, cudaMemcpyDeviceToHost, s);
  barrier.wait();
  out.h2d = time_copies(device, host, bytes, iterations, cudaMemcpyHostToDevice, s);
  check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
  check_cuda(cudaFreeHost(host), "cudaFreeHost");
  check_cuda(cudaFree(device), "cudaFree");
}

void write_list(std::FILE* f, const char* key, const std::vector<Rates>& rates, bool d2h) {
  std::fprintf(f, "  \"%s\": [", key);
  for (std::size_t i = 0; i < rates.size(); ++i) std::fprintf(f, "%s%.2f", i ? ", " : "", d2h ? rates[i].d2h : rates[i].h2d);
  std::fprintf(f, "],\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = std::size_t{1} << 30;
  int iterations = 20;
  int gpus = 0;
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "trainsim-bench-copy: %s needs a value\nusage: trainsim-bench-copy [-b 1G] [-n 20] [-g GPUS] [-o FILE]\n",
                   a.c_str());
      return 2;
    }
    if (a == "-b") {
      bytes = parse_size(argv[++i]);
    } else if (a == "-n") {
      iterations = parse_int("-n", argv[++i], 1, 10000);
    } else if (a == "-g") {
      gpus = parse_int("-g", argv[++i], 1, 1024);
    } else if (a == "-o") {
      out_path = argv[++i];
    } else {
      std::fprintf(stderr, "trainsim-bench-copy: unknown flag %s\nusage: trainsim-bench-copy [-b 1G] [-n 20] [-g GPUS] [-o FILE]\n",
                   a.c_str());
      return 2;
    }
  }
  int available = 0;
  check_cuda(cudaGetDeviceCount(&available), "cudaGetDeviceCount");
  if (available < 1) {
    std::fprintf(stderr, "trainsim-bench-copy: no GPU\n");
    return 1;
  }
  if (gpus == 0) gpus = available;
  if (gpus > available) {
    std::fprintf(stderr, "trainsim-bench-copy: -g %d but only %d GPUs\n", gpus, available);
    return 2;
  }
  cudaDeviceProp prop;
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");

  std::vector<Rates> rates(static_cast<std::size_t>(gpus));
  Barrier barrier(gpus);
  std::vector<std::thread> threads;
  for (int g = 0; g < gpus; ++g) {
    threads.emplace_back(run_gpu, g, bytes, iterations, std::ref(barrier), std::ref(rates[static_cast<std::size_t>(g)]));
  }
  for (std::thread& t : threads) t.join();

  double slowest = 1e30;
  for (const Rates& r : rates) slowest = std::min({slowest, r.d2h, r.h2d});
  std::printf("# %d x %s, %zu bytes x %d copies each way, all GPUs at once (GB/s)\n", gpus, prop.name, bytes, iterations);
  std::printf("#  gpu   device->host   host->device\n");
  for (int g = 0; g < gpus; ++g) {
    std::printf("  %5d %14.2f %14.2f\n", g, rates[static_cast<std::size_t>(g)].d2h, rates[static_cast<std::size_t>(g)].h2d);
  }
  std::printf("host_copy_GBps %.1f (the slowest GPU's slower direction: the GPU preset's host_copy_GBps)\n", slowest);

  if (!out_path.empty()) {
    std::FILE* f = std::fopen(out_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "trainsim-bench-copy: cannot write %s\n", out_path.c_str());
      return 1;
    }
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    std::fprintf(f, "{\n  \"description\": \"trainsim-bench-copy: pinned host memory copies, all GPUs at once (cudaMemcpyAsync, copy engines)\",\n");
    std::fprintf(f, "  \"date\": \"%s\",\n  \"device\": \"%s\",\n  \"gpus\": %d,\n  \"bytes\": %zu,\n  \"iterations\": %d,\n", date, prop.name,
                 gpus, bytes, iterations);
    write_list(f, "device_to_host_GBps", rates, true);
    write_list(f, "host_to_device_GBps", rates, false);
    std::fprintf(f, "  \"host_copy_GBps\": %.1f\n}\n", slowest);
    std::fclose(f);
  }
  return 0;
}
