// trainsim-bench-nccl: runs one NCCL collective over all local GPUs (one thread per GPU, one
// communicator per GPU) across a range of message sizes and prints the result in nccl-tests'
// output format (the table `trainsim validate nccl-tests` and nccl-tests users read).
//
// Sizes and bandwidths follow nccl-tests (doc/PERFORMANCE.md): size is the buffer for
// all_reduce/broadcast/reduce/sendrecv and the whole gathered/scattered array for
// all_gather/reduce_scatter/all_to_all; algbw = size / time; busbw = algbw x 2(n-1)/n for
// all_reduce, x (n-1)/n for all_gather, reduce_scatter and all_to_all, x 1 otherwise.
// Usage (flags as nccl-tests): trainsim-bench-nccl --op all_reduce -b 8 -e 8G -f 2 -g 8

#include <cuda_runtime.h>
#include <nccl.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sizes.h"

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "trainsim-bench-nccl: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    std::fprintf(stderr, "trainsim-bench-nccl: %s: %s\n", what, ncclGetErrorString(r));
    std::exit(1);
  }
}

enum class Op { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce, kSendRecv };

struct OpInfo {
  const char* name;
  const char* test;  // nccl-tests binary name
  Op op;
};

constexpr OpInfo kOps[] = {
    {"all_reduce", "all_reduce_perf", Op::kAllReduce},         {"all_gather", "all_gather_perf", Op::kAllGather},
    {"reduce_scatter", "reduce_scatter_perf", Op::kReduceScatter}, {"all_to_all", "alltoall_perf", Op::kAllToAll},
    {"broadcast", "broadcast_perf", Op::kBroadcast},           {"reduce", "reduce_perf", Op::kReduce},
    {"sendrecv", "sendrecv_perf", Op::kSendRecv},
};

struct TypeInfo {
  const char* name;  // nccl-tests type column
  ncclDataType_t type;
  std::size_t bytes;
};

constexpr TypeInfo kTypes[] = {{"float", ncclFloat32, 4}, {"half", ncclFloat16, 2}, {"bfloat16", ncclBfloat16, 2},
                               {"int8", ncclInt8, 1},     {"int32", ncclInt32, 4},   {"double", ncclFloat64, 8}};

std::size_t parse_size(const char* text) { return trainsim_cuda::parse_size("trainsim-bench-nccl", text); }

__global__ void fill(unsigned char* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] = static_cast<unsigned char>(i & 0x3f);
  }
}

struct Rank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

// Enqueues one operation of `bytes` (nccl-tests size) on rank r. `in_place`: results land in the
// send buffer (or the send buffer is this rank's slice of the output, for gathers).
void enqueue(Op op, const TypeInfo& t, std::size_t bytes, int nranks, int r, Rank& rank, bool in_place) {
  const std::size_t count = bytes / t.bytes;  // elements of the size column
  char* send = static_cast<char*>(rank.send);
  char* recv = in_place ? send : static_cast<char*>(rank.recv);
  const std::size_t slice = count / static_cast<std::size_t>(nranks);
  switch (op) {
    case Op::kAllReduce:
      check_nccl(ncclAllReduce(send, recv, count, t.type, ncclSum, rank.comm, rank.stream), "all_reduce");
      break;
    case Op::kAllGather:
      check_nccl(ncclAllGather(in_place ? send + static_cast<std::size_t>(r) * slice * t.bytes : send, recv, slice, t.type,
                               rank.comm, rank.stream),
                 "all_gather");
      break;
    case Op::kReduceScatter:
      check_nccl(ncclReduceScatter(send, in_place ? send + static_cast<std::size_t>(r) * slice * t.bytes : recv, slice, t.type,
                                   ncclSum, rank.comm, rank.stream),
                 "reduce_scatter");
      break;
    case Op::kBroadcast:
      check_nccl(ncclBroadcast(send, recv, count, t.type, 0, rank.comm, rank.stream), "broadcast");
      break;
    case Op::kReduce:
      check_nccl(ncclReduce(send, recv, count, t.type, ncclSum, 0, rank.comm, rank.stream), "reduce");
      break;
    case Op::kAllToAll: {
      // As nccl-tests does: grouped point-to-point, one slice to and from every rank.
      char* out = static_cast<char*>(rank.recv);
      check_nccl(ncclGroupStart(), "group start");
      for (int peer = 0; peer < nranks; ++peer) {
        check_nccl(ncclSend(send + static_cast<std::size_t>(peer) * slice * t.bytes, slice, t.type, peer, rank.comm, rank.stream), "send");
        check_nccl(ncclRecv(out + static_cast<std::size_t>(peer) * slice * t.bytes, slice, t.type, peer, rank.comm, rank.stream), "recv");
      }
      check_nccl(ncclGroupEnd(), "group end");
      break;
    }
    case Op::kSendRecv: {
      // Ring: send to the next rank, receive from the previous one.
      check_nccl(ncclGroupStart(), "group start");
      check_nccl(ncclSend(send, count, t.type, (r + 1) % nranks, rank.comm, rank.stream), "send");
      check_nccl(ncclRecv(static_cast<char*>(rank.recv), count, t.type, (r + nranks - 1) % nranks, rank.comm, rank.stream), "recv");
      check_nccl(ncclGroupEnd(), "group end");
      break;
    }
  }
}

double bus_factor(Op op, int n) {
  switch (op) {
    case Op::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Op::kAllGather:
    case Op::kReduceScatter:
    case Op::kAllToAll:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

// nccl-tests prints numbers with as many decimals as fit the column.
std::string fit_number(double v, int width) {
  char buf[64];
  for (int decimals = 2; decimals >= 0; --decimals) {
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    if (static_cast<int>(std::strlen(buf)) <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

void usage() {
  std::fprintf(stderr,
               "usage: trainsim-bench-nccl [--op all_reduce|all_gather|reduce_scatter|all_to_all|broadcast|reduce|sendrecv]\n"
               "                           [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-g NGPUS] [-n ITERS] [-w WARMUP]\n"
               "                           [-d float|half|bfloat16|int8|int32|double]\n"
               "Prints the nccl-tests table for one collective over the local GPUs (one thread per GPU).\n");
}

}  // namespace

int main(int argc, char** argv) {
  const OpInfo* op = &kOps[0];
  const TypeInfo* type = &kTypes[0];
  std::size_t min_bytes = 8, max_bytes = std::size_t{128} << 20;
  double factor = 2;
  int ngpus = 0, iterations = 20, warmup = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "trainsim-bench-nccl: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--op") {
      const std::string v = value();
      op = nullptr;
      for (const OpInfo& o : kOps) {
        if (v == o.name) op = &o;
      }
      if (op == nullptr) {
        std::fprintf(stderr, "trainsim-bench-nccl: unknown collective '%s'\n", v.c_str());
        usage();
        return 2;
      }
    } else if (arg == "-d" || arg == "--datatype") {
      const std::string v = value();
      type = nullptr;
      for (const TypeInfo& t : kTypes) {
        if (v == t.name) type = &t;
      }
      if (type == nullptr) {
        std::fprintf(stderr, "trainsim-bench-nccl: unknown data type '%s'\n", v.c_str());
        return 2;
      }
    } else if (arg == "-b" || arg == "--minbytes") {
      min_bytes = parse_size(value());
    } else if (arg == "-e" || arg == "--maxbytes") {
      max_bytes = parse_size(value());
    } else if (arg == "-f" || arg == "--stepfactor") {
      factor = std::atof(value());
    } else if (arg == "-g" || arg == "--ngpus") {
      ngpus = std::atoi(value());
    } else if (arg == "-n" || arg == "--iters") {
      iterations = std::atoi(value());
    } else if (arg == "-w" || arg == "--warmup_iters") {
      warmup = std::atoi(value());
    } else if (arg == "-h" || arg == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "trainsim-bench-nccl: unknown argument '%s'\n", arg.c_str());
      usage();
      return 2;
    }
  }
  if (factor <= 1 || iterations < 1 || warmup < 0 || min_bytes > max_bytes) {
    std::fprintf(stderr, "trainsim-bench-nccl: need -f > 1, -n >= 1, -w >= 0 and -b <= -e\n");
    return 2;
  }
  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), "device count");
  if (ngpus <= 0) ngpus = devices;
  if (ngpus > devices || ngpus < 1) {
    std::fprintf(stderr, "trainsim-bench-nccl: %d GPUs asked, %d present\n", ngpus, devices);
    return 2;
  }

  std::vector<Rank> ranks(static_cast<std::size_t>(ngpus));
  std::vector<int> devlist(static_cast<std::size_t>(ngpus));
  for (int r = 0; r < ngpus; ++r) devlist[static_cast<std::size_t>(r)] = r;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ngpus));
  check_nccl(ncclCommInitAll(comms.data(), ngpus, devlist.data()), "communicator init");
  // Buffers sized for the largest message (all_gather/reduce_scatter/all_to_all use it whole).
  const std::size_t buffer = max_bytes + 4096;
  for (int r = 0; r < ngpus; ++r) {
    Rank& rk = ranks[static_cast<std::size_t>(r)];
    rk.device = r;
    rk.comm = comms[static_cast<std::size_t>(r)];
    check_cuda(cudaSetDevice(r), "set device");
    check_cuda(cudaStreamCreateWithFlags(&rk.stream, cudaStreamNonBlocking), "stream");
    check_cuda(cudaMalloc(&rk.send, buffer), "allocate send buffer");
    check_cuda(cudaMalloc(&rk.recv, buffer), "allocate receive buffer");
    fill<<<256, 256, 0, rk.stream>>>(static_cast<unsigned char*>(rk.send), buffer);
    check_cuda(cudaStreamSynchronize(rk.stream), "fill");
  }

  int version = 0;
  ncclGetVersion(&version);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  std::printf("# trainsim-bench-nccl (nccl-tests format) nccl-library=%d\n", version);
  std::printf("# Collective test starting: %s\n", op->test);
  std::printf("# nThread %d nGpus 1 minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d iters: %d agg iters: 1 validation: 0 graph: 0\n",
              ngpus, min_bytes, max_bytes, factor, warmup, iterations);
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < ngpus; ++r) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, r), "device properties");
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", r, static_cast<int>(getpid()), host, r,
                prop.pciDomainID, prop.pciBusID, prop.pciDeviceID, prop.name);
  }
  std::printf("#\n");
  std::printf("#                                                              out-of-place                       in-place          \n");
  std::printf("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n");
  std::printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         \n");

  const bool reduces = op->op == Op::kAllReduce || op->op == Op::kReduceScatter || op->op == Op::kReduce;
  const int root = op->op == Op::kBroadcast || op->op == Op::kReduce ? 0 : -1;
  const std::size_t align = type->bytes * static_cast<std::size_t>(ngpus);
  double busbw_sum = 0;
  int busbw_count = 0;
  for (double size = static_cast<double>(min_bytes); size <= static_cast<double>(max_bytes) * 1.0000001; size *= factor) {
    const std::size_t bytes = std::max(align, static_cast<std::size_t>(size) / align * align);
    double us[2] = {0, 0};
    for (int place = 0; place < 2; ++place) {
      const bool in_place = place == 1;
      // One thread per GPU enqueues its rank's operations; the threads start together.
      auto run = [&](int count) {
        std::vector<std::thread> threads;
        for (int r = 0; r < ngpus; ++r) {
          threads.emplace_back([&, r]() {
            Rank& rk = ranks[static_cast<std::size_t>(r)];
            check_cuda(cudaSetDevice(rk.device), "set device");
            for (int i = 0; i < count; ++i) enqueue(op->op, *type, bytes, ngpus, r, rk, in_place);
          });
        }
        for (std::thread& t : threads) t.join();
      };
      // Per-op NCCL calls of different threads on their own communicators need no group.
      run(warmup);
      for (Rank& rk : ranks) {
        check_cuda(cudaSetDevice(rk.device), "set device");
        check_cuda(cudaStreamSynchronize(rk.stream), "synchronize");
      }
      std::vector<cudaEvent_t> start(static_cast<std::size_t>(ngpus)), stop(static_cast<std::size_t>(ngpus));
      for (int r = 0; r < ngpus; ++r) {
        check_cuda(cudaSetDevice(r), "set device");
        check_cuda(cudaEventCreate(&start[static_cast<std::size_t>(r)]), "event");
        check_cuda(cudaEventCreate(&stop[static_cast<std::size_t>(r)]), "event");
        check_cuda(cudaEventRecord(start[static_cast<std::size_t>(r)], ranks[static_cast<std::size_t>(r)].stream), "event record");
      }
      run(iterations);
      double slowest = 0;
      for (int r = 0; r < ngpus; ++r) {
        check_cuda(cudaSetDevice(r), "set device");
        check_cuda(cudaEventRecord(stop[static_cast<std::size_t>(r)], ranks[static_cast<std::size_t>(r)].stream), "event record");
        check_cuda(cudaEventSynchronize(stop[static_cast<std::size_t>(r)]), "synchronize");
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, start[static_cast<std::size_t>(r)], stop[static_cast<std::size_t>(r)]), "elapsed");
        slowest = std::max(slowest, static_cast<double>(ms));
        cudaEventDestroy(start[static_cast<std::size_t>(r)]);
        cudaEventDestroy(stop[static_cast<std::size_t>(r)]);
      }
      us[place] = slowest * 1e3 / iterations;
    }
    std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, bytes / type->bytes, type->name, reduces ? "sum" : "none", root);
    for (int place = 0; place < 2; ++place) {
      const double algbw = static_cast<double>(bytes) / (us[place] * 1e-6) * 1e-9;
      const double busbw = algbw * bus_factor(op->op, ngpus);
      busbw_sum += busbw;
      ++busbw_count;
      std::printf("  %7s  %6s  %6s  %6s", fit_number(us[place], 7).c_str(), fit_number(algbw, 6).c_str(),
                  fit_number(busbw, 6).c_str(), "N/A");
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("# Out of bounds values : 0 OK\n");
  std::printf("# Avg bus bandwidth    : %g \n", busbw_count > 0 ? busbw_sum / busbw_count : 0.0);
  std::printf("#\n# Collective test concluded: %s\n", op->test);

  for (Rank& rk : ranks) {
    cudaSetDevice(rk.device);
    cudaFree(rk.send);
    cudaFree(rk.recv);
    cudaStreamDestroy(rk.stream);
    ncclCommDestroy(rk.comm);
  }
  return 0;
}
