// sim/failure_sim.h: one training step with a GPU's host failing part-way
// (`megascale simulate FILE --fail-gpu G --fail-at T`).
//
// defines: FailureResult, simulate_failure
//
// The step of simulate_job (same costs, communication, GPU speed spread and
// stragglers of step 0), run twice on the same simulated replicas: healthy, and
// with the host of GPU G (its data-parallel replica d and pipeline rank r; TP
// ranks share a host in the simulation, as their work is symmetric) turned off T
// seconds into the step (sim/event_engine.h HostFailure). The replica d is always
// among those simulated, with at least one other replica when DP > 1, so that
// the data-parallel collectives show the hang reaching the other replicas. The
// result is the hang, rank by rank (sim/hang_analysis.h): which ranks stop, when,
// on what, and where the wait chains end. What it costs the run (detection,
// restart, redoing work since the last checkpoint) is reliability/'s model
// (`megascale plan`); this answers what the step itself does.
//
// Errors (std::invalid_argument): G outside 0 .. gpus-1, T negative or not
// finite, and whatever simulate_job rejects.
#pragma once

#include <vector>

#include "sim/event_engine.h"
#include "sim/hang_analysis.h"
#include "sim/job_sim.h"

namespace megascale::sim {

struct FailureResult {
  int gpu = 0;
  int dp_replica = 0;            // DP index of the failed GPU's replica
  int pp_rank = 0;               // its pipeline rank
  int tp_rank = 0;               // its TP rank inside the stage
  double at_s = 0;               // into the step
  double healthy_step_s = 0;     // the same step without the failure
  std::vector<int> replicas;     // DP index of each simulated replica
  int failed_sim_replica = 0;    // index of dp_replica in `replicas`
  HangReport hang;               // replica fields index `replicas`
  EventTimeline timeline;        // the failed run (for --trace)
  std::vector<TraceEvent> trace_events;
};

FailureResult simulate_failure(const model::Scenario& s, const SimOptions& o, int gpu, double at_s);

}  // namespace megascale::sim
