// sim/job_sim.h: the event-level simulation of a training job (issue 4): one or
// more iterations of a scenario, every distinct pipeline rank executing its
// Schedule IR on SimGrid, with stragglers and jitter.
//
// defines: SimOptions, StepResult, JobResult, simulate_job
//
// How a step is simulated
// -----------------------
// 1. The Schedule IR of the scenario (model::build_job_schedule) and one
//    duration per op (sim/op_costs.h: compute from the analytical estimator's
//    per-op costs, communication from sim/comm_costs.h - by default network/'s
//    fabric model with ECMP and congestion control).
// 2. Symmetry (DESIGN.md): the TP ranks of a pipeline stage do the same work
//    (their time is folded into the stage), and data-parallel replicas with
//    the same compute factors run identical timelines, so only distinct
//    replicas are simulated: P pipeline ranks for the whole job when nobody
//    is slow, P more for each distinct straggling replica (at most
//    SimOptions::max_replicas, the most gating first; sim/variability.h).
//    The DP collectives synchronise the simulated replicas, so the slowest
//    gates the step.
// 3. sim/event_engine.h runs the step on SimGrid; sim/critical_path.h says
//    where its time went.
// Steps are simulated one after another; each starts when the previous one
// has ended on every rank (the optimizer's global gradient-norm all-reduce
// synchronises all GPUs), so the run time is the sum of the step times.
// Per step the compute factors change (per-step stragglers, jitter), which is
// what the step-time series and the heat-map show.
//
// The result's `estimate` is a model::Estimate with event-level values
// (iteration_time_s = mean step time, breakdown = mean per-step critical-path
// breakdown, MFU, tokens/s, bubble fraction = bubble / critical rank busy);
// memory and the per-chunk figures are the analytical estimate's.
//
// Thread-safety: one simulation at a time per process (sim/event_engine.h
// serialises them); simulate_job itself keeps no global state.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/estimator.h"
#include "model/schedule.h"
#include "sim/comm_costs.h"
#include "sim/event_engine.h"
#include "sim/op_costs.h"
#include "sim/trace_writer.h"
#include "sim/variability.h"

namespace megascale::sim {

struct SimOptions {
  int steps = 1;
  CommModel comm = CommModel::kNetwork;
  std::optional<FabricInputs> fabric;  // required for CommModel::kNetwork
  VariabilityOptions variability;      // stragglers, jitter, seed
  int max_replicas = 8;                // distinct DP replicas simulated per step
  int trace_step = 0;                  // the step whose timeline is kept (-1: none)
  bool trace_layers = false;           // per-layer slices in the trace (sim/layer_trace.h)
  // Sends and DP collectives of a rank share its NICs in time (event_engine.h).
  bool share_nic = true;
  // Called after each simulated step with (steps done, steps), e.g. for progress
  // on stderr; may be empty.
  std::function<void(int, int)> progress;
};

struct StepResult {
  double time_s = 0;
  model::TimeBreakdown breakdown;  // critical path; sums to time_s
  std::vector<int> replicas;       // DP indices simulated, most gating first
  int distinct_replicas = 0;       // distinct compute-factor vectors this step
  bool exact = true;               // ReplicaChoice::exact
  int critical_replica = 0;        // DP index of the critical rank's replica
  int critical_rank = 0;           // its pipeline rank
  double critical_busy_s = 0;      // its compute + recompute + tp on the path
  std::vector<int> straggler_machines;
  EventRunStats stats;
};

struct JobResult {
  model::Scenario scenario;
  model::Estimate analytical;  // the estimate the compute durations come from
  model::Estimate estimate;    // event-level figures (see the header comment)
  CommTimes comm;
  model::Schedule schedule;
  std::vector<StepResult> steps;
  // Per step, per (replica d, pipeline rank r) at index d*P + r: forward and
  // backward busy seconds (the heat-map).
  std::vector<std::vector<double>> forward_s, backward_s;
  // Timeline of SimOptions::trace_step (empty when -1 or out of range), with
  // the DP index of each simulated replica, and as trace events.
  EventTimeline trace;
  std::vector<int> trace_replicas;
  std::vector<TraceEvent> trace_events;
  int trace_step = -1;
  double wall_s = 0;  // the simulator's own run time (comm + all steps)
};

// What every event-level run of a scenario starts from (simulate_job, and
// sim/failure_sim.h, sim/network_crosscheck.h): the closed form the compute
// durations come from, the compute-speed model, the communication times, the
// op costs and the Schedule IR. Throws std::invalid_argument for max_replicas < 1,
// kNetwork without a fabric or bad straggler / jitter values, and what
// model::estimate / network/ throw for an invalid scenario or fabric.
struct JobInputs {
  JobInputs(const model::Scenario& s, const SimOptions& o);
  model::Estimate analytical;
  Variability variability;
  CommTimes comm;
  OpCosts costs;
  model::Schedule schedule;
};

// Throws std::invalid_argument for steps < 1, and what JobInputs throws.
JobResult simulate_job(const model::Scenario& s, const SimOptions& o);

// The figure each ranked heat-map row / trace rank is labelled with: the global
// GPU rank of TP rank 0 of (replica d, pipeline rank r).
inline int group_rank(const model::ParallelConfig& p, int d, int r) { return gpu_of(p, 0, d, r); }

}  // namespace megascale::sim
