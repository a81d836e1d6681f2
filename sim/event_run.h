// sim/event_run.h: one event-level run as a user asks for it (the options of
// `megascale simulate --fidelity event`) -> sim::SimOptions, and the two
// event-level answers other commands need: the healthy iteration's estimate
// (`validate`, `plan`, `compare`, `search --refine`, `calibrate runs-check`) and
// the MFU that computational stragglers cost (`validate`'s section-5 row).
//
// The scenario's fabric comes from sim/fabric_config.h; a CPU profile (the
// engine on one machine) has no fabric, so its collectives take the profile's
// measured MPI times (analytical links).
//
// Thread-safety: pure functions of their arguments (each run builds its own
// SimGrid engine, sim/job_sim.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/estimator.h"
#include "sim/job_sim.h"

namespace megascale::sim {

struct RunRequest {
  std::string trace;          // --trace FILE ("" = none): FILE(.json) + .csv of step 0
  bool trace_layers = false;  // --trace-layers: per-layer operators and TP collectives
  std::string heatmap;        // --heatmap FILE.svg ("" = none)
  int steps = 1;
  std::optional<double> jitter_sigma;  // default: 0 for 1 step, else kDefaultJitterSigma
  uint64_t seed = 1;
  std::vector<int> straggler_gpus;  // global GPU ranks that are slow
  double straggler_fraction = 0;    // of machines
  // Compute-time multiplier of a straggler (MegaScale section 5 saw ~10% slower machines).
  double straggler_factor = 1.1;
  bool straggler_per_step = false;  // draw the slow machines again every step
  std::string comm = "network";     // network | analytical | zero
  // DP replicas simulated per step (the rest are statistically alike; sim/job_sim.h).
  int max_replicas = 8;
  std::optional<int> fail_gpu;  // its host fails part-way (sim/failure_sim.h)
  double fail_at_s = 0;         // seconds into the step
  bool simgrid_check = false;   // sim/network_crosscheck.h
};

// Throws std::invalid_argument for an unknown `comm`.
SimOptions sim_options(const model::Scenario& s, const RunRequest& r);

// One healthy iteration (network communication, one step, no jitter or
// stragglers): what `simulate --fidelity event --json` reports. Throws
// std::invalid_argument for an invalid layout.
model::Estimate event_estimate(const model::Scenario& s);

// MFU (fraction) that computational stragglers cost at event level: the mean over
// seeds 1..`seeds` of (MFU without - MFU with) `machine_fraction` of the machines
// slower by `forward_slowdown` in the forward pass (a micro-batch then slower by
// forward_slowdown x the forward's share of its compute). Used by `validate`
// against MegaScale's ~0.7% MFU gained by removing such stragglers.
double straggler_cost(const model::Scenario& s, double machine_fraction, double forward_slowdown, int seeds);

}  // namespace megascale::sim
