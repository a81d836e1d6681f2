// calibrate/fit_inputs.h: what `megascale calibrate fit` hands fit_profile
// (calibrate/fit.h): the profile file to start from, measured runs from the
// engine, and the predictor (the event-level simulator on a profile file).
//
// defines: profile_file, engine_run, event_iteration_s
//
// Thread-safety: profile_file writes a file; engine_run runs the engine
// (calibrate/check.h); event_iteration_s is pure (it reads the files).
#pragma once

#include <string>

#include "calibrate/check.h"
#include "calibrate/fit.h"

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

}  // namespace megascale::calibrate
