#include "cli/app.h"

#include <iostream>

#include "cli/commands.h"
#include "sim/error.h"

namespace trainsim::cli {

int run_app(int argc, char** argv) {
  CLI::App app{"trainsim: simulate distributed Transformer training (Megatron plans on A100, H100, H200, B200, GB200 and GB300 clusters)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "trainsim 0.1.0");
  Registry registry;
  add_run_command(app, registry);
  add_plan_command(app, registry);
  add_compare_command(app, registry);
  add_collective_command(app, registry);
  add_validate_nccl_command(app, registry);
  add_validate_command(app, registry);
  add_calibrate_command(app, registry);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    const Action* action = registry.chosen(app);
    if (action == nullptr) {
      std::cerr << "trainsim: choose a subcommand (try --help)\n";
      return 2;
    }
    return (*action)();
  } catch (const InputError& e) {
    std::cerr << "trainsim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "trainsim: error: out of memory (the scenario is too large to simulate at this fidelity)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "trainsim: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace trainsim::cli
