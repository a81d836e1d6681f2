// calibrate/runs_check.h: the simulator as it stands against published
// iteration times of whole training runs (`megascale calibrate runs-check`;
// its report is report/runs_check_report.h). Input: a runs CSV (fit.h
// read_measured_runs: scenario, iteration_time_s, source, note, scored), e.g.
// calibrate/runs/published.csv.
//
// Each run's scenario is simulated at event fidelity (and in closed form) with
// its own hardware profile; nothing is fitted to these runs. Scored rows count
// towards issue 12's bounds (median |error| <= 8%, max <= 20%); unscored ones
// (a stack the format cannot express, ...) are predicted and listed.
//
// Thread-safety: pure function (reads the scenario files).
#pragma once

#include <string>
#include <vector>

#include "calibrate/fit.h"  // defines: MeasuredRun

namespace megascale::calibrate {

constexpr double kRunsMedianBound = 0.08;  // issue 12: median iteration-time error
constexpr double kRunsMaxBound = 0.20;     // issue 12: max iteration-time error

struct PublishedRunRow {
  MeasuredRun run;
  int gpus = 0;
  std::string gpu;
  double event_s = 0, analytical_s = 0;
  bool fits_memory = true;
  double error() const { return event_s / run.iteration_s - 1.0; }
  double analytical_error() const { return analytical_s / run.iteration_s - 1.0; }
};

struct RunsCheck {
  std::vector<PublishedRunRow> rows;  // in the CSV's order
  int scored = 0;
  double median_abs_error = 0, max_abs_error = 0;                        // event, scored rows
  double analytical_median_abs_error = 0, analytical_max_abs_error = 0;  // closed form, scored rows
  bool pass = false;  // scored rows exist and meet both bounds
};

// Throws model::ScenarioError for a broken scenario file.
RunsCheck check_published_runs(const std::vector<MeasuredRun>& runs);

}  // namespace megascale::calibrate
