#pragma once
// Where the shipped presets live and how a preset name becomes a file. The scenarios folder is
// found from any working directory: $TRAINSIM_DATA_DIR if set, else the installed copy next to
// the executable (../share/trainsim/scenarios), else the source tree the binary was built from.

#include <string>
#include <vector>

namespace trainsim::config {

std::string scenarios_dir();
// The file of preset `name` of `kind` ("models", "gpus", "clusters", "calibration").
// Throws InputError naming `file`/`path` (where the name was given) and listing the presets.
std::string preset_file(const std::string& kind, const std::string& name, const std::string& file,
                        const std::string& path);
std::vector<std::string> preset_names(const std::string& kind);
// Resolves a file named in `from_file`: absolute, relative to from_file's folder (never
// from_file itself), or a preset of `kind` by file name or by name.
std::string resolve_file(const std::string& name, const std::string& kind, const std::string& from_file,
                         const std::string& path);

}  // namespace trainsim::config
