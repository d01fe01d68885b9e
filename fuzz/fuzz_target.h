#pragma once
// The fuzz harness. A target is one .cc file under fuzz/targets/ that feeds the bytes to one
// parser (or pipeline) and lets it throw:
//
//   #include "fuzz/fuzz_target.h"
//   TRAINSIM_FUZZ_TARGET(gpu) {
//     const trainsim::fuzz::InputFile file(input, "gpu");  // the bytes as a .json file
//     trainsim::config::read_gpu(file.path(), file.path(), "");
//   }
//
// The macro runs the body on each input and checks the robustness contract: bad input may only
// throw InputError naming the file it is about; any other exception (or a crash, a sanitizer
// report, a hang) is a finding. With -DTRAINSIM_FUZZ=ON (clang) each target is a libFuzzer
// binary, fuzz_<name>; in every normal build one replay binary, fuzz_replay, runs each target
// over its seeds and fuzz/regressions/<name>/ as a test. README.md in this folder has the rest.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "sim/error.h"

namespace trainsim::fuzz {

using TargetBody = void (*)(std::string_view input);

// Reports a broken contract and aborts, so libFuzzer saves the input and the replay test fails.
[[noreturn]] inline void finding(const char* target, const std::string& what) {
  std::fprintf(stderr, "fuzz target %s: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs a target body under the contract.
inline void run_target(const char* target, TargetBody body, const std::uint8_t* data, std::size_t size) {
  try {
    body(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const InputError& e) {
    if (e.file().empty()) finding(target, std::string("InputError without a file: ") + e.what());
  } catch (const std::exception& e) {
    finding(target, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    finding(target, "unexpected non-standard exception");
  }
}

// Replay mode: targets register by name; fuzz/replay_main.cc runs one over files and folders.
void register_target(const char* name, TargetBody body);
struct Registration {
  Registration(const char* name, TargetBody body) { register_target(name, body); }
};

// The input written to a file of this process (tmpfs when available), for parsers that read
// files. Named <tag>.json so preset lookups treat it as a file path. Removed when destroyed.
class InputFile {
 public:
  InputFile(std::string_view contents, const std::string& tag);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace trainsim::fuzz

#ifdef TRAINSIM_LIBFUZZER
#define TRAINSIM_FUZZ_REGISTER(name)                                                  \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    ::trainsim::fuzz::run_target(#name, &fuzz_body_##name, data, size);               \
    return 0;                                                                         \
  }
#else
#define TRAINSIM_FUZZ_REGISTER(name) \
  static const ::trainsim::fuzz::Registration fuzz_registration_##name(#name, &fuzz_body_##name);
#endif

#define TRAINSIM_FUZZ_TARGET(name)                     \
  static void fuzz_body_##name(std::string_view input); \
  TRAINSIM_FUZZ_REGISTER(name)                          \
  static void fuzz_body_##name(std::string_view input)
