// sim/job_sim.cc: see job_sim.h.
#include "sim/job_sim.h"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>

#include "model/job_schedule.h"
#include "model/op_cost.h"
#include "model/profile.h"
#include "model/throughput.h"
#include "sim/critical_path.h"
#include "sim/op_costs.h"

namespace megascale::sim {
namespace {

const SimOptions& checked(const SimOptions& o) {
  if (o.max_replicas < 1) throw std::invalid_argument("event simulation: max_replicas must be >= 1");
  if (o.comm == CommModel::kNetwork && !o.fabric)
    throw std::invalid_argument("event simulation: the network communication model needs a fabric");
  return o;
}

}  // namespace

JobInputs::JobInputs(const model::Scenario& s, const SimOptions& o)
    : analytical(model::estimate(s)),
      variability(s, checked(o).variability),
      comm(comm_times(s, analytical, o.comm, o.fabric ? &*o.fabric : nullptr)),
      costs(s, analytical, comm),
      schedule(model::build_job_schedule(s)) {}

JobResult simulate_job(const model::Scenario& s, const SimOptions& o) {
  if (o.steps < 1) throw std::invalid_argument("simulate_job: steps must be >= 1");
  const auto t0 = std::chrono::steady_clock::now();

  JobInputs in(s, o);
  JobResult out;
  out.scenario = s;
  out.analytical = in.analytical;
  out.comm = in.comm;
  out.schedule = std::move(in.schedule);  // the run uses out.schedule from here
  const Variability& variability = in.variability;
  const OpCosts& costs = in.costs;
  const std::vector<double> busy = costs.busy_s();
  const model::ParallelConfig& p = s.parallel;

  model::TimeBreakdown mean;
  double total_s = 0, busy_sum_s = 0;
  for (int k = 0; k < o.steps; ++k) {
    const StepFactors f = variability.step(k);
    const ReplicaChoice choice = choose_replicas(f, busy, o.max_replicas);
    // Compute factor of (simulated replica i, rank r).
    auto factor = [&](int i, int r) { return f.factor(choice.replicas[i], r); };
    const EventTimeline t = run_events(
        out.schedule, static_cast<int>(choice.replicas.size()),
        [&](int i, int r, const model::Op& op) { return costs.duration_s(r, op, factor(i, r)); },
        EventOptions{o.share_nic, std::nullopt});
    const std::vector<PathSegment> path = critical_path(out.schedule, t);
    std::vector<std::vector<OpParts>> busy_parts(choice.replicas.size());
    for (size_t i = 0; i < choice.replicas.size(); ++i)
      for (int r = 0; r < p.pp; ++r)
        busy_parts[i].push_back(costs.busy_parts(r).scaled_compute(factor(static_cast<int>(i), r)));
    const PathBreakdown pb = attribute_path(
        out.schedule, path,
        [&](int i, int r, const model::Op& op) { return costs.parts(r, op).scaled_compute(factor(i, r)); },
        busy_parts);

    StepResult step;
    step.time_s = t.iteration_s;
    step.breakdown = pb.breakdown;
    step.replicas = choice.replicas;
    step.distinct_replicas = choice.distinct;
    step.exact = choice.exact;
    step.critical_replica = choice.replicas[pb.critical_replica];
    step.critical_rank = pb.critical_rank;
    step.critical_busy_s = pb.busy_s;
    step.straggler_machines = f.straggler_machines;
    step.stats = t.stats;
    out.steps.push_back(step);
    if (o.progress) o.progress(k + 1, o.steps);

    std::vector<double> fwd(f.group.size()), bwd(f.group.size());
    for (int d = 0; d < p.dp; ++d) {
      for (int r = 0; r < p.pp; ++r) {
        fwd[d * p.pp + r] = costs.forward_busy_s(r) * f.factor(d, r);
        bwd[d * p.pp + r] = costs.backward_busy_s(r) * f.factor(d, r);
      }
    }
    out.forward_s.push_back(std::move(fwd));
    out.backward_s.push_back(std::move(bwd));

    if (k == o.trace_step) {
      out.trace = t;
      out.trace_replicas = choice.replicas;
      const std::optional<LayerTrace> layers =
          o.trace_layers ? std::optional<LayerTrace>(LayerTrace(s)) : std::nullopt;
      out.trace_events = timeline_events(p, out.schedule, t, choice.replicas, costs, layers ? &*layers : nullptr);
      out.trace_step = k;
    }
    mean.add(step.breakdown, 1.0 / o.steps);
    total_s += step.time_s;
    busy_sum_s += step.critical_busy_s;
  }

  model::Estimate& e = out.estimate;
  e = out.analytical;
  e.iteration_time_s = total_s / o.steps;
  e.breakdown = mean;
  const double busy_mean_s = busy_sum_s / o.steps;
  e.bubble_fraction = busy_mean_s > 0 ? mean.bubble_s / busy_mean_s : 0.0;
  const model::Throughput rate = model::throughput(s, e.iteration_time_s);
  e.model_flops = rate.model_flops;
  e.mfu = rate.mfu;
  e.tokens_per_s = rate.tokens_per_s;
  e.p2p_s = out.comm.p2p_s;
  if (!out.comm.dp_reduce_s.empty()) {
    const int middle = p.vpp > 1 ? 1 : 0;
    e.dp_reduce_scatter_chunk_s = out.comm.dp_reduce(0, middle);
    e.dp_all_gather_chunk_s = out.comm.dp_gather(0, middle);
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace megascale::sim
