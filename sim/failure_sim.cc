// sim/failure_sim.cc: see failure_sim.h.
#include "sim/failure_sim.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "sim/op_costs.h"
#include "sim/trace_writer.h"
#include "sim/variability.h"

namespace megascale::sim {

FailureResult simulate_failure(const model::Scenario& s, const SimOptions& o, int gpu, double at_s) {
  const model::ParallelConfig& p = s.parallel;
  if (gpu < 0 || gpu >= p.gpus())
    throw std::invalid_argument("--fail-gpu: GPU " + std::to_string(gpu) + " is not in the job (0.." +
                                std::to_string(p.gpus() - 1) + ")");
  if (!(at_s >= 0) || !std::isfinite(at_s))
    throw std::invalid_argument("--fail-at: the failure time must be >= 0 seconds into the step");

  FailureResult out;
  out.gpu = gpu;
  out.at_s = at_s;
  // The scenario's rank order (model/config.h gpu_of, grid_coord_of).
  const model::GridCoord at = model::grid_coord_of(p, gpu);
  out.tp_rank = at.tp;
  out.dp_replica = at.dp;
  out.pp_rank = at.pp;

  const JobInputs in(s, o);
  const OpCosts& costs = in.costs;
  const model::Schedule& schedule = in.schedule;
  const StepFactors f = in.variability.step(0);

  // The most gating replicas, with the failed one among them and, when DP > 1,
  // at least one other.
  std::vector<int> replicas = choose_replicas(f, costs.busy_s(), o.max_replicas).replicas;
  if (std::find(replicas.begin(), replicas.end(), out.dp_replica) == replicas.end()) {
    if (static_cast<int>(replicas.size()) < o.max_replicas) {
      replicas.push_back(out.dp_replica);
    } else {
      replicas.back() = out.dp_replica;
    }
  }
  if (p.dp > 1 && replicas.size() == 1) replicas.push_back((out.dp_replica + 1) % p.dp);
  out.replicas = replicas;
  out.failed_sim_replica =
      static_cast<int>(std::find(replicas.begin(), replicas.end(), out.dp_replica) - replicas.begin());

  const auto duration = [&](int i, int r, const model::Op& op) {
    return costs.duration_s(r, op, f.factor(replicas[i], r));
  };
  const int n = static_cast<int>(replicas.size());
  out.healthy_step_s = run_events(schedule, n, duration, EventOptions{o.share_nic, std::nullopt}).iteration_s;
  const HostFailure failure{out.failed_sim_replica, out.pp_rank, at_s};
  out.timeline = run_events(schedule, n, duration, EventOptions{o.share_nic, failure});
  out.hang = analyse_hang(schedule, out.timeline, failure);
  out.trace_events = timeline_events(p, schedule, out.timeline, replicas, costs);
  return out;
}

}  // namespace megascale::sim
