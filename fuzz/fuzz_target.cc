#include "fuzz/fuzz_target.h"

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace trainsim::fuzz {

namespace {

std::string scratch_dir() {
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return std::filesystem::temp_directory_path(ec).string();
}

}  // namespace

InputFile::InputFile(std::string_view contents, const std::string& tag) {
  static const std::string dir = scratch_dir();
  path_ = dir + "/trainsim-fuzz-" + std::to_string(getpid()) + "-" + tag + ".json";
  std::ofstream out(path_, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) finding(tag.c_str(), "cannot write the scratch file " + path_);
}

InputFile::~InputFile() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace trainsim::fuzz
