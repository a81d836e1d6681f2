// reliability/plan_study.cc: scenario -> run model -> Monte Carlo, interval
// sweep, GPU sweep.
#include "reliability/plan_study.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace megascale::reliability {

PlanStudy plan_study(const model::Scenario& s, const PlanRequest& request, const IterationTimeFn& simulate) {
  PlanStudy st;
  st.iteration = s.run.iteration_time_s > 0 ? IterationTime{s.run.iteration_time_s, "scenario"} : simulate(s);
  // The job checkpoints between iterations: an interval below one is refused.
  auto at_least_an_iteration = [](double interval_s, const IterationTime& it, const std::string& what) {
    if (interval_s >= it.s) return;
    throw std::invalid_argument(fmt::format(
        "{} {:.3g} s is shorter than one iteration ({:.3g} s, {}): the job checkpoints between iterations, at most "
        "once per iteration",
        what, interval_s, it.s, it.source));
  };
  at_least_an_iteration(s.recovery.checkpoint_interval_s, st.iteration, s.source + ": recovery.checkpoint_interval");
  for (double interval_s : request.checkpoint_intervals_s)
    at_least_an_iteration(interval_s, st.iteration, "--sweep checkpoint_interval");
  st.model = build_run_model(s, st.iteration.s);
  st.result = monte_carlo(st.model, request.runs, request.seed);
  const std::vector<double> grid =
      request.checkpoint_intervals_s.empty() ? geometric_grid(std::max(60.0, st.iteration.s), 4 * 3600, 25)
                                             : request.checkpoint_intervals_s;
  st.sweep = sweep_checkpoint_interval(st.model, grid, request.runs, request.seed);
  st.best = *std::max_element(st.sweep.begin(), st.sweep.end(),
                              [](const SweepPoint& a, const SweepPoint& b) { return a.ettr_mean < b.ettr_mean; });
  st.mtbf_s = st.model.mtbf_s();
  // Young/Daly's cost: the time the job loses per checkpoint (the stall); with
  // a two-stage checkpoint it is only the GPU -> host copy.
  st.young_daly_s = young_daly_interval_s(st.model.checkpoint_stall_s, st.mtbf_s);
  for (const model::Scenario& x : request.scaled) {
    GpuPoint g;
    g.gpus = x.parallel.gpus();
    g.dp = x.parallel.replicas();  // the user's DP (without CP, model/config.h)
    g.iteration = simulate(x);
    at_least_an_iteration(x.recovery.checkpoint_interval_s, g.iteration,
                          fmt::format("{}: at {} GPUs, recovery.checkpoint_interval", s.source, g.gpus));
    g.plan = monte_carlo(build_run_model(x, g.iteration.s), request.runs, request.seed);
    st.gpu_points.push_back(g);
  }
  st.assumptions = recovery_assumptions(s);
  return st;
}

}  // namespace megascale::reliability
