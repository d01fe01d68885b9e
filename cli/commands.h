#pragma once
// The subcommands of the trainsim CLI. Each add_* function registers its options on `app` and
// returns the action to run when that subcommand is chosen; actions return the exit code and
// throw InputError for bad input (main maps it to exit code 2).

#include <functional>

#include <CLI/CLI.hpp>

namespace trainsim::cli {

using Action = std::function<int()>;

Action add_run_command(CLI::App& app);

// Opens `path` for writing ("-" is stdout) and calls `write`. Throws InputError when the file
// cannot be written.
void write_output(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace trainsim::cli
