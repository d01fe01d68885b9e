#include "cli/commands.h"

namespace trainsim::cli {

const Action* Registry::chosen(const CLI::App& app) const {
  const Action* found = nullptr;
  const CLI::App* level = &app;
  while (true) {
    const auto subs = level->get_subcommands();
    if (subs.empty()) break;
    level = subs.front();
    auto it = actions_.find(level);
    if (it != actions_.end()) found = &it->second;
  }
  return found;
}

CLI::App* subcommand(CLI::App& parent, const std::string& name, const std::string& description) {
  for (CLI::App* sub : parent.get_subcommands({})) {
    if (sub->get_name() == name) return sub;
  }
  return parent.add_subcommand(name, description);
}

}  // namespace trainsim::cli
