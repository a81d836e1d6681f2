// calibrate/fit_inputs.cc: profile file, engine runs and predictor of `calibrate fit`.
#include "calibrate/fit_inputs.h"

#include <filesystem>
#include <fstream>

#include "model/profile.h"
#include "model/scenario.h"
#include "sim/event_run.h"

namespace megascale::calibrate {

namespace fs = std::filesystem;

std::string profile_file(const std::string& name_or_file, const std::string& dir) {
  if (fs::is_regular_file(name_or_file)) return name_or_file;
  const std::string text(model::builtin_profile_text(name_or_file));  // throws naming the known ones
  const std::string file = (fs::path(dir) / (name_or_file + ".toml")).string();
  std::ofstream(file) << text;
  return file;
}

MeasuredRun engine_run(const std::string& scenario_file, const CheckOptions& o) {
  const CheckResult c = run_check(scenario_file, o);
  MeasuredRun run;
  run.scenario_file = scenario_file;
  run.name = fs::path(scenario_file).stem().string();
  run.iteration_s = c.measured_step_s;
  run.source = "megascale train, median of " + std::to_string(c.ops.steps_used) + " steps";
  return run;
}

double event_iteration_s(const std::string& scenario_file, const std::string& profile_file) {
  // append(): g++ 12 warns -Wrestrict on "literal" + std::string (GCC bug 105329).
  const std::string set = std::string("hardware.profile=\"").append(fs::absolute(profile_file).string()).append("\"");
  return sim::event_estimate(model::load_scenario(scenario_file, {set})).iteration_time_s;
}

}  // namespace megascale::calibrate
