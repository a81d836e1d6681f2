// cli/simulate_event.h: the hook between `megascale simulate --fidelity event`
// (cli/commands.cc, in megascale_cli_lib) and the event-level simulator
// (sim/, SimGrid).
//
// libsimgrid exports MPI symbols (SMPI), so megascale_cli_lib, which
// megascale-train links together with Open MPI, must not reference sim/. The
// glue (cli/simulate_event.cc) is compiled into the `megascale` executable
// only and registers itself at static initialisation; cmd_simulate asks for
// the registered simulator and reports that this binary has none otherwise.
//
// Thread-safety: register before main() (static initialisation), read after.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/estimator.h"

namespace megascale::cli {

// The event-level options of `megascale simulate` (see usage()).
struct EventRequest {
  bool json = false;
  std::string trace;    // --trace FILE ("" = none): FILE(.json) + .csv
  bool trace_layers = false;  // --trace-layers: per-layer operators and TP collectives
  std::string heatmap;  // --heatmap FILE.svg ("" = none)
  std::string chart;    // --chart FILE.svg ("" = none): the breakdown (model/breakdown_chart.h)
  int steps = 1;
  std::optional<double> jitter_sigma;  // --jitter; default: 0 for 1 step, else the sim default
  uint64_t seed = 1;
  std::vector<int> straggler_gpus;     // --straggler-gpus a,b,c
  double straggler_fraction = 0;       // --stragglers FRACTION (of machines)
  double straggler_factor = 1.1;       // --straggler-factor X
  bool straggler_per_step = false;     // --straggler-per-step
  std::string comm = "network";        // --comm network|analytical|zero
  int max_replicas = 8;                // --max-replicas N
  std::optional<int> fail_gpu;         // --fail-gpu G: its host fails part-way (sim/failure_sim.h)
  double fail_at_s = 0;                // --fail-at T: seconds into the step
  bool simgrid_check = false;          // --simgrid-check: sim/network_crosscheck.h
};

// Runs the simulation and prints the report; returns the exit code. Throws
// std::invalid_argument for bad values (exit code 2 in cmd_simulate).
using EventSimulator = int (*)(const model::Scenario& s, const EventRequest& r, std::ostream& out,
                               std::ostream& err);

void register_event_simulator(EventSimulator fn);
EventSimulator event_simulator();  // nullptr when this binary has none

// The event-level estimate of one healthy iteration (network communication
// model, one step, no jitter or stragglers): the model::Estimate that
// `megascale simulate --fidelity event --json` reports. Used by `validate`
// and `plan`. Throws std::invalid_argument for an invalid layout.
using EventEstimator = model::Estimate (*)(const model::Scenario& s);
void register_event_estimator(EventEstimator fn);
EventEstimator event_estimator();  // nullptr when this binary has none

// MFU (fraction) that computational stragglers cost at event level: the mean over
// seeds 1..`seeds` of (MFU without - MFU with) `machine_fraction` of the machines
// slower by `forward_slowdown` in the forward pass (a micro-batch then slower by
// forward_slowdown x the forward's share of its compute). Used by `validate`
// against MegaScale's ~0.7% MFU gained by removing such stragglers.
using StragglerCost = double (*)(const model::Scenario& s, double machine_fraction, double forward_slowdown,
                                 int seeds);
void register_straggler_cost(StragglerCost fn);
StragglerCost straggler_cost();  // nullptr when this binary has none

}  // namespace megascale::cli
