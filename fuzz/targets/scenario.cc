// The scenario parser with --set overrides: the bytes up to the first NUL are the scenario file,
// each line after it one override (key.path=value), as `trainsim run FILE --set ...` passes them.
// Presets named in the input are read from scenarios/.

#include <vector>

#include "config/scenario.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/targets/scenario_input.h"

TRAINSIM_FUZZ_TARGET(scenario) {
  const trainsim::fuzz::ScenarioInput in(input);
  const trainsim::fuzz::InputFile file(in.scenario, "scenario");
  trainsim::config::load_scenario(file.path(), in.overrides);
}
