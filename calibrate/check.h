// calibrate/check.h: `megascale calibrate check`: run the engine on a scenario
// with tracing, simulate the same Schedule IR on the scenario's (or a given)
// cpu profile, and report measured against predicted.
//
// defines: CheckOptions, CheckResult, run_check, check_json, check_markdown
//
// Measured: the engine's own per-step times (world rank 0's clock, `megascale
// train --json`), of which the first `warmup` steps are left out; the
// steady-state step is their median and the spread (max - min) / median. The
// engine's trace gives every op (calibrate/trace_compare.h). Predicted: one step
// of the event-level simulation (sim/job_sim.h) with per-layer slices, on the
// analytical links, which carry the profile's measured MPI collectives.
//
// Thread-safety: run_check starts processes and writes files; one at a time.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"

#include "calibrate/trace_compare.h"
#include "model/config.h"

namespace megascale::calibrate {

struct CheckOptions {
  std::string profile;           // a profile file for the prediction ("" = the scenario's)
  double tolerance = 0.15;       // |predicted / measured - 1| allowed for the step time
  int steps = 0;                 // engine steps; 0 = the scenario's train.steps, at least warmup + 5
  int warmup = 2;                // leading steps left out
  std::string out_dir;           // where <scenario>.md / .svg / .json go ("" = none)
  std::string engine_binary;     // megascale-train
  std::string work_dir;          // scratch for the trace ("" = a fresh temp directory)
  std::vector<std::string> overrides;  // --set KEY=VALUE, for the engine and the simulation
};

struct CheckResult {
  std::string scenario_file, name, profile_name, profile_file;
  int processes = 0;
  std::vector<double> measured_steps_s;  // every step the engine reported
  double measured_step_s = 0;            // median over the steps after the warm-up
  double measured_spread = 0;            // (max - min) / median over them
  double predicted_step_s = 0;
  double error = 0;                      // predicted / measured - 1
  double tolerance = 0;
  bool pass = false;
  Comparison ops;
  std::string svg;                       // the timeline picture
  std::vector<std::string> files;        // what was written
};

// Throws model::ScenarioError for a bad scenario or profile, std::runtime_error
// when the engine fails (its exit status and last output lines in the message).
CheckResult run_check(const std::string& scenario_file, const CheckOptions& o);

base::Json check_json(const CheckResult& r);
std::string check_markdown(const CheckResult& r);

}  // namespace megascale::calibrate
