#pragma once
// The trainsim command line: parses argv, runs the chosen subcommand and returns the exit code
// (0 ok, 2 bad input: the message names the file, the JSON path and what was expected; 1
// internal error). Kept apart from main so the CLI11 headers are compiled once, in trainsim_cli.

namespace trainsim::cli {

int run_app(int argc, char** argv);

}  // namespace trainsim::cli
