// calibrate/fit_inputs.cc: profile file, engine runs and predictor of `calibrate fit`.
#include "calibrate/fit_inputs.h"

#include <filesystem>
#include <stdexcept>

#include <unistd.h>

#include "base/text_file.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "sim/event_run.h"

namespace megascale::calibrate {

namespace fs = std::filesystem;

std::string profile_file(const std::string& name_or_file, const std::string& dir) {
  if (fs::is_regular_file(name_or_file)) return name_or_file;
  const std::string text(model::builtin_profile_text(name_or_file));  // throws naming the known ones
  const std::string file = (fs::path(dir) / (name_or_file + ".toml")).string();
  base::write_text_or_throw(file, text);
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

namespace {

// A directory of the fit's own files, gone when the fit returns or throws.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("megascale-fit-" + std::to_string(getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace

FitResult run_fit(const FitRequest& r, const std::function<void(const std::string& line)>& say) {
  if (r.runs_csv.empty() == r.engine_scenarios.empty())
    throw std::invalid_argument("the measured times come from a runs CSV or from engine runs of scenarios, one of them");
  const ScratchDir scratch;
  const std::string base_file = profile_file(r.profile, scratch.path.string());
  std::vector<MeasuredRun> runs;
  std::vector<std::string> held_out = r.held_out;
  if (!r.runs_csv.empty()) {
    const std::string gpu = model::load_profile(base_file).name;
    int unscored = 0, other_gpu = 0;
    for (MeasuredRun& run : read_measured_runs(r.runs_csv)) {
      if (!run.unscored.empty()) {
        ++unscored;
        continue;
      }
      const model::Scenario s = model::load_scenario(run.scenario_file);
      if (r.same_gpu && model::hardware_profile(s).name != gpu) {
        ++other_gpu;
        continue;
      }
      if (r.hold_out_pipelined && s.parallel.pp > 1) held_out.push_back(run.name);
      runs.push_back(std::move(run));
    }
    if (unscored > 0) say(std::to_string(unscored) + " unscored run(s) left out");
    if (other_gpu > 0) say(std::to_string(other_gpu) + " run(s) on other GPUs than " + gpu + " left out");
    if (runs.empty()) throw std::invalid_argument(r.runs_csv + ": no run left to fit on");
  } else {
    CheckOptions co;
    co.profile = base_file;
    co.engine_binary = r.engine_binary;
    for (const std::string& f : r.engine_scenarios) {
      say("running " + f + " on the engine...");
      runs.push_back(engine_run(f, co));
    }
  }
  const auto [fit, held] = split_held_out(runs, held_out);
  say(std::to_string(fit.size()) + " fit run(s), " + std::to_string(held.size()) + " held out");
  return fit_profile(base_file, fit, held, r.params, event_iteration_s, scratch.path.string());
}

LayerFitResult run_layer_fit(const std::string& profile, const std::string& layers_csv) {
  const std::vector<PublishedLayer> layers = read_published_layers(layers_csv);
  const ScratchDir scratch;
  try {
    return fit_layer_gather_scatter(profile_file(profile, scratch.path.string()), layers, scratch.path.string());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(layers_csv + ": " + e.what());  // which file had too few rows
  }
}

}  // namespace megascale::calibrate
