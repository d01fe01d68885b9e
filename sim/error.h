#pragma once
// The project's error vocabulary. Boundary code (scenario and measurement parsing, the CLI)
// throws InputError for anything a user can get wrong; only `main` catches, mapping InputError
// to exit code 2 and everything else to 1. Inside the engine, TRAINSIM_CHECK guards invariants.
// These types live in the top-level namespace because every module shares them.

#include <stdexcept>
#include <string>

namespace trainsim {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input: names the file, the location inside it (a JSON path such as
// "/parallelism/tensor_model_parallel_size", or "line 12") and what was expected.
class InputError : public Error {
 public:
  InputError(std::string file, std::string location, std::string message)
      : Error(format(file, location, message)),
        file_(std::move(file)),
        location_(std::move(location)),
        detail_(std::move(message)) {}
  const std::string& file() const { return file_; }
  const std::string& location() const { return location_; }
  const std::string& detail() const { return detail_; }

 private:
  static std::string format(const std::string& file, const std::string& location,
                            const std::string& message) {
    std::string out = file.empty() ? std::string("<input>") : file;
    if (!location.empty()) out += ": " + location;
    out += ": " + message;
    return out;
  }
  std::string file_;
  std::string location_;
  std::string detail_;
};

// Bad input of one kind: a plan Megatron could run, but beyond what trainsim simulates (sizes whose
// byte counts would overflow, more work than simulation.max_events, more simulated time than the
// clock holds). The plan search tells these apart from plans Megatron's rules refuse.
class LimitError : public InputError {
 public:
  using InputError::InputError;
};

// The simulated clock would pass its range (Duration::max(), about 26.7 days of int64
// picoseconds): the input asks for more simulated time than trainsim represents. Not a bug;
// boundary code reports it as an InputError about the scenario.
class ClockOverflowError : public Error {
 public:
  using Error::Error;
};

// A broken internal invariant (a bug in trainsim, never the user's fault).
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace trainsim
