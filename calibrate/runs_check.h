// calibrate/runs_check.h: the simulator as it stands against published
// iteration times of whole training runs (`megascale calibrate runs-check`;
// its report is report/runs_check_report.h). Input: a runs CSV (fit.h
// read_measured_runs: scenario, iteration_time_s, source, note, scored), e.g.
// calibrate/runs/published.csv.
//
// Each run's scenario is simulated at event fidelity (and in closed form) with
// its own hardware profile. Scored rows count
// towards issue 12's bounds (median |error| <= 8%, max <= 20%); unscored ones
// (a stack the format cannot express, ..., or a run a value of the scenario's
// profile was fitted on: its provenance names the run) are predicted and
// listed.
//
// Thread-safety: pure function (reads the scenario files).
#pragma once

#include <string>
#include <vector>

#include "calibrate/fit.h"  // defines: MeasuredRun
#include "calibrate/layer_check.h"  // defines: LayerCheckRow

namespace megascale::calibrate {

constexpr double kRunsMedianBound = 0.08;  // issue 12: median iteration-time error
constexpr double kRunsMaxBound = 0.20;     // issue 12: max iteration-time error

struct PublishedRunRow {
  MeasuredRun run;
  int gpus = 0;
  std::string gpu;
  double event_s = 0, analytical_s = 0;
  bool fits_memory = true;
  int hidden = 0;  // the model's hidden size (width), for the grouped summary
  int pp = 1;      // pipeline stages
  // Activation elements one GPU's layers pass over in an iteration: tokens per
  // pipeline rank (global batch x sequence / data-parallel ranks, context
  // parallelism folded in) x layers per stage x hidden / TP. The work of every
  // element-wise kernel, and of each GEMM per unit of width, scales with it.
  double element_steps = 0;
  double peak_tflops = 0, memory_gbs = 0;  // the speeds of the profile it ran on
  double error() const { return event_s / run.iteration_s - 1.0; }
  double analytical_error() const { return analytical_s / run.iteration_s - 1.0; }
  // The time the event fidelity leaves out (published - predicted, > 0: too
  // fast) per activation element, ns; 0 without element_steps.
  double missing_ns_per_element() const {
    return element_steps > 0 ? (run.iteration_s - event_s) / element_steps * 1e9 : 0.0;
  }
};

// The scored rows of one group (a GPU profile, a band of model widths): where
// the simulator is biased, not only how far off it is.
struct RunsGroup {
  std::string label;
  int runs = 0;
  double median_error = 0;      // signed, event fidelity: < 0 predicted too fast
  double median_abs_error = 0;
};

// The missing time per activation element of the scored runs of one GPU
// profile without pipeline parallelism (no bubble or stage traffic to blur
// it), beside the profile's speeds: a missing cost that scales with the GPU's
// rate shrinks on the faster GPU by the ratio of its speeds; one that does not,
// stays.
struct ElementGroup {
  std::string gpu;
  int runs = 0;
  double median_missing_ns = 0;  // per activation element (PublishedRunRow::missing_ns_per_element)
  double peak_tflops = 0;        // the profile's dense BF16 peak
  double memory_gbs = 0;         // the profile's memory bandwidth
};

struct RunsCheck {
  std::vector<PublishedRunRow> rows;  // in the CSV's order
  int scored = 0;
  double median_abs_error = 0, max_abs_error = 0;                        // event, scored rows
  double analytical_median_abs_error = 0, analytical_max_abs_error = 0;  // closed form, scored rows
  // Scored rows whose |error| is within the median bound / the max bound
  // (counted here, so that no reader counts a table by hand).
  int within_median_bound = 0, within_max_bound = 0;                      // event
  int analytical_within_median_bound = 0, analytical_within_max_bound = 0;  // closed form
  bool pass = false;  // scored rows exist and meet both bounds
  std::vector<RunsGroup> by_gpu;    // per GPU profile, in order of first appearance
  std::vector<RunsGroup> by_width;  // hidden <= 4,096 / 4,097-8,192 / > 8,192 (empty bands left out)
  std::vector<ElementGroup> missing_per_element;  // per GPU profile, pp = 1 scored runs, first appearance
  // Published per-layer times (runs-check --layers; calibrate/layer_check.h):
  // reported beside the runs, not part of the bounds.
  std::vector<LayerCheckRow> layers;
};

// Fills `check->by_gpu`, `check->by_width` and `check->missing_per_element`
// from its scored rows (the last with the speeds of each profile's first row).
void group_errors(RunsCheck* check);

// Throws model::ScenarioError for a broken scenario file.
RunsCheck check_published_runs(const std::vector<MeasuredRun>& runs);

}  // namespace megascale::calibrate
