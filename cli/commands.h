#pragma once
// The subcommands of the trainsim CLI. Each add_*_command function registers its options (and
// nested subcommands) on the CLI and its action in the Registry; main runs the action of the
// deepest subcommand the user chose. Actions return the exit code and throw InputError for bad
// input (main maps it to exit code 2).

#include <functional>
#include <map>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

namespace trainsim::cli {

using Action = std::function<int()>;

class Registry {
 public:
  void add(CLI::App* command, Action action) { actions_[command] = std::move(action); }
  // The action of the deepest chosen subcommand that has one; null when none was chosen.
  const Action* chosen(const CLI::App& app) const;

 private:
  std::map<const CLI::App*, Action> actions_;
};

// The subcommand `name` of `parent`, created (with `description`) if it does not exist yet, so
// several files can add nested commands to one group (e.g. `validate`).
CLI::App* subcommand(CLI::App& parent, const std::string& name, const std::string& description);

void add_run_command(CLI::App& app, Registry& registry);
void add_plan_command(CLI::App& app, Registry& registry);
void add_compare_command(CLI::App& app, Registry& registry);
void add_collective_command(CLI::App& app, Registry& registry);
void add_validate_nccl_command(CLI::App& app, Registry& registry);
void add_validate_command(CLI::App& app, Registry& registry);
void add_calibrate_command(CLI::App& app, Registry& registry);

// The most simulations one command runs at once (--threads, --jobs): each holds a plan's task
// graph and engine state in memory, so more threads than this only risk exhausting it.
constexpr int kMaxThreads = 1024;

// Throws InputError unless `jobs` is 0 (one per CPU) to kMaxThreads.
void check_jobs(const char* option, int jobs);

// Opens `path` for writing ("-" is stdout; gzip-compressed when it ends in ".gz") and calls
// `write`. Throws InputError when the file cannot be written.
void write_output(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace trainsim::cli
