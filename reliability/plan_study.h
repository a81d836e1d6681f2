// reliability/plan_study.h: the figures of `megascale plan` for one scenario:
// the run model at its iteration time, the Monte Carlo (ETTR, restarts, lost
// time), ETTR per checkpoint interval with the best one and Young/Daly's, and
// ETTR per GPU count for a GPU sweep.
//
// The per-iteration time: [run] iteration_time_s when the scenario gives it
// ("scenario"), else the caller's simulation of one healthy iteration (the
// event-level simulator or the closed form: sim/ and model/ sit beside this
// layer, so the caller passes it in).
//
// Thread-safety: pure function (apart from the callback).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/config.h"
#include "reliability/plan_inputs.h"
#include "reliability/run_model.h"

namespace megascale::reliability {

struct IterationTime {
  double s = 0;
  std::string source;  // "scenario" | "event" | "analytical"
};
// One healthy iteration of a scenario, simulated.
using IterationTimeFn = std::function<IterationTime(const model::Scenario&)>;

struct PlanRequest {
  int runs = 1;
  uint64_t seed = 1;
  // The checkpoint intervals to compare; empty: a geometric grid of 25 from 1 min
  // (or one iteration, when longer) to 4 h.
  std::vector<double> checkpoint_intervals_s;
  // A GPU sweep: the scenario at each count (scaled_to_gpus); empty: none.
  std::vector<model::Scenario> scaled;
};

struct GpuPoint {
  int gpus = 0, dp = 0;
  IterationTime iteration;
  PlanResult plan;
};

struct PlanStudy {
  IterationTime iteration;
  RunModel model;
  PlanResult result;
  std::vector<SweepPoint> sweep;  // ETTR per checkpoint interval
  SweepPoint best;                // the interval of highest mean ETTR
  double mtbf_s = 0;
  double young_daly_s = 0;        // sqrt(2 x checkpoint stall x MTBF)
  std::vector<GpuPoint> gpu_points;  // per request.scaled (common random numbers)
  std::vector<Assumption> assumptions;
};

// Throws as monte_carlo does, and std::invalid_argument for a checkpoint
// interval (the scenario's or a swept one) shorter than one iteration: the job
// checkpoints between iterations, at most once per iteration (the run model
// would have counted checkpoint stalls that never happen).
PlanStudy plan_study(const model::Scenario& s, const PlanRequest& request, const IterationTimeFn& simulate);

}  // namespace megascale::reliability
