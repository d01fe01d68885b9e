#include "config/presets.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "sim/error.h"

#ifndef TRAINSIM_SOURCE_SCENARIOS_DIR
#define TRAINSIM_SOURCE_SCENARIOS_DIR ""
#endif

namespace trainsim::config {

namespace fs = std::filesystem;

std::string scenarios_dir() {
  if (const char* env = std::getenv("TRAINSIM_DATA_DIR"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "trainsim" / "scenarios";
    if (fs::is_directory(installed / "models", ec)) return installed.string();
  }
  return TRAINSIM_SOURCE_SCENARIOS_DIR;
}

std::vector<std::string> preset_names(const std::string& kind) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(scenarios_dir()) / kind, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string preset_file(const std::string& kind, const std::string& name, const std::string& file,
                        const std::string& path) {
  const bool plain = !name.empty() && name.find('/') == std::string::npos && name.find("..") == std::string::npos;
  const fs::path p = fs::path(scenarios_dir()) / kind / (name + ".json");
  std::error_code ec;
  if (plain && fs::is_regular_file(p, ec)) return p.string();
  std::string list;
  for (const auto& n : preset_names(kind)) list += (list.empty() ? "" : ", ") + n;
  std::string singular = kind.substr(0, kind.size() - 1);
  if (kind == "calibration") singular = "calibration";
  throw InputError(file, path, "unknown " + singular + " preset \"" + name + "\"; available: " +
                                   (list.empty() ? "(none found in " + scenarios_dir() + ")" : list));
}

std::string resolve_file(const std::string& name, const std::string& kind, const std::string& from_file,
                         const std::string& path) {
  std::error_code ec;
  const fs::path given(name);
  if (given.is_absolute()) {
    if (fs::is_regular_file(given, ec)) return given.string();
    throw InputError(from_file, path, "no such file \"" + name + "\"");
  }
  const fs::path relative = fs::path(from_file).parent_path() / given;
  if (name.find('/') != std::string::npos || given.extension() == ".json") {
    // A file never names itself: scenarios/gpus/b200.json's "calibration": "b200.json" is the
    // calibration preset, not the GPU file next to it.
    if (fs::is_regular_file(relative, ec) && !fs::equivalent(relative, from_file, ec)) return relative.string();
    const fs::path in_presets = fs::path(scenarios_dir()) / kind / given;
    if (fs::is_regular_file(in_presets, ec)) return in_presets.string();
    throw InputError(from_file, path, "no such file \"" + name + "\" (looked next to " + from_file + " and in " +
                                          (fs::path(scenarios_dir()) / kind).string() + ")");
  }
  return preset_file(kind, name, from_file, path);
}

}  // namespace trainsim::config
