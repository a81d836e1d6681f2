// calibrate/fit_inputs.h: what `megascale calibrate fit` hands fit_profile
// (calibrate/fit.h): the profile file to start from, measured runs from the
// engine, and the predictor (the event-level simulator on a profile file).
//
// defines: profile_file, engine_run, event_iteration_s, run_fit
//
// Thread-safety: profile_file writes a file; engine_run runs the engine
// (calibrate/check.h); event_iteration_s is pure (it reads the files); run_fit
// writes only in its own scratch directory (removed when it returns or throws).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "calibrate/check.h"
#include "calibrate/fit.h"
#include "calibrate/layer_fit.h"

namespace megascale::calibrate {

// `name_or_file` when it is a file; else the shipped profile of that name
// written to DIR/NAME.toml. Throws model::ScenarioError naming the known
// profiles for an unknown name.
std::string profile_file(const std::string& name_or_file, const std::string& dir);

// One engine run of `scenario_file` (run_check with `o`) as a measured run: its
// median step, named after the file's stem.
MeasuredRun engine_run(const std::string& scenario_file, const CheckOptions& o);

// One iteration of the scenario with hardware.profile set to `profile_file`,
// at event fidelity (sim/event_run.h): the predictor of fit_profile.
double event_iteration_s(const std::string& scenario_file, const std::string& profile_file);

// `megascale calibrate fit` as asked: the profile to start from, where the
// measured times come from (a runs CSV, or the engine on scenarios), which runs
// are held out and what is fitted.
struct FitRequest {
  std::string profile;                        // a shipped profile's name or a file
  std::string runs_csv;                       // "": run `engine_scenarios` instead
  std::vector<std::string> engine_scenarios;  // each run on `engine_binary` (engine_run)
  std::string engine_binary;
  std::vector<std::string> held_out;          // run names (split_held_out)
  bool same_gpu = false;            // a runs CSV's runs on other GPUs than the profile's are left out
  bool hold_out_pipelined = false;  // every run with pipeline stages (pp > 1) is held out too
  FitParams params;
};

// Reads or measures the runs, splits them, fits with event_iteration_s as the
// predictor. A runs CSV's unscored rows (`scored` = "no: ...") are left out: a
// run whose scenario cannot express its stack is no ground truth to fit on.
// `say` gets a line of progress at a time (engine runs, what was left out, the
// split).
// Throws as read_measured_runs, split_held_out and fit_profile do, and
// std::invalid_argument for a request that names no runs or both sources.
FitResult run_fit(const FitRequest& r, const std::function<void(const std::string& line)>& say);

// `megascale calibrate fit --layers LAYERS.csv`: tp_gather_scatter_extra of
// `profile` (a shipped profile's name or a file) fitted on the CSV's
// per-layer times (calibrate/layer_fit.h), in a scratch directory of its own.
// Throws as read_published_layers does, and fit_layer_gather_scatter's
// std::invalid_argument prefixed with the CSV's path.
LayerFitResult run_layer_fit(const std::string& profile, const std::string& layers_csv);

}  // namespace megascale::calibrate
