// sim/event_run.cc: see event_run.h.
#include "sim/event_run.h"

#include <stdexcept>

#include "model/hardware.h"
#include "model/profile.h"
#include "sim/comm_costs.h"
#include "sim/fabric_config.h"
#include "sim/op_costs.h"

namespace megascale::sim {

sim::SimOptions sim_options(const model::Scenario& s, const RunRequest& r) {
  sim::SimOptions o;
  o.steps = r.steps;
  const std::optional<sim::CommModel> comm = sim::parse_comm_model(r.comm);
  if (!comm) throw std::invalid_argument("--comm must be network, analytical or zero, got '" + r.comm + "'");
  o.comm = *comm;
  // The CPU engine runs on one machine: no fabric; its collectives are the
  // profile's measured MPI times, which the analytical links carry.
  if (o.comm == sim::CommModel::kNetwork && model::hardware_profile(s).is_cpu()) o.comm = sim::CommModel::kAnalytical;
  if (o.comm == sim::CommModel::kNetwork) {
    const model::GpuProfile& gpu = model::hardware_profile(s);
    sim::FabricInputs f;
    f.spec = fabric_spec(s.network, s.hardware, gpu, s.cluster.gpus);
    f.ecmp = ecmp_config(s.network);
    f.collectives = collective_options(gpu, s.hardware.nic_gbps, s.network);
    o.fabric = f;
  }
  o.variability.seed = r.seed;
  o.variability.jitter_sigma = r.jitter_sigma ? *r.jitter_sigma : (r.steps > 1 ? sim::kDefaultJitterSigma : 0.0);
  o.variability.stragglers.gpus = r.straggler_gpus;
  o.variability.stragglers.machine_fraction = r.straggler_fraction;
  o.variability.stragglers.factor = r.straggler_factor;
  o.variability.stragglers.per_step = r.straggler_per_step;
  o.variability.gpu_sigma = s.hardware.gpu_speed_sigma;
  o.max_replicas = r.max_replicas;
  o.trace_step = r.trace.empty() ? -1 : 0;
  o.trace_layers = r.trace_layers;
  return o;
}

model::Estimate event_estimate(const model::Scenario& s) {
  RunRequest r;  // defaults: network communication, one step, no variability
  return sim::simulate_job(s, sim_options(s, r)).estimate;
}

double straggler_cost(const model::Scenario& s, double machine_fraction, double forward_slowdown, int seeds) {
  const model::Estimate e = model::estimate(s);
  const sim::OpCosts costs(s, e, sim::comm_times(s, e, sim::CommModel::kZero, nullptr));
  double forward = 0, total = 0;
  for (int r = 0; r < s.parallel.pp; ++r) {
    forward += costs.forward_busy_s(r);
    total += costs.forward_busy_s(r) + costs.backward_busy_s(r);
  }
  RunRequest r;  // defaults: network communication, one step, no jitter
  double lost = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    sim::SimOptions o = sim_options(s, r);
    o.trace_step = -1;
    o.variability.seed = static_cast<uint64_t>(seed);
    const double clean = sim::simulate_job(s, o).estimate.mfu;
    o.variability.stragglers.machine_fraction = machine_fraction;
    o.variability.stragglers.factor = 1.0 + forward_slowdown * forward / total;
    lost += clean - sim::simulate_job(s, o).estimate.mfu;
  }
  return lost / seeds;
}

}  // namespace megascale::sim
