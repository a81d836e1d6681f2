// sim/collective_run.cc: machine -> fabric -> groups -> tuner.
#include "sim/collective_run.h"

#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "model/profile.h"
#include "sim/fabric_config.h"

namespace megascale::sim {

CollectiveMachine collective_machine(const std::optional<model::Scenario>& scenario, const std::string& gpu,
                                     const std::optional<model::GpuProfile>& profile) {
  CollectiveMachine m;
  m.scenario = scenario;
  m.gpu = gpu.empty() && !scenario && profile
              ? *profile
              : model::gpu_profile(!gpu.empty() ? gpu : scenario ? scenario->hardware.gpu : kDefaultCollectiveGpu);
  const model::NetworkConfig net = scenario ? scenario->network : model::NetworkConfig{};
  m.gpus_per_server = scenario ? scenario->hardware.gpus_per_node : 8;
  m.nic_gbps = scenario ? scenario->hardware.nic_gbps : m.gpu.default_nic_gbps;
  m.ecmp = ecmp_config(net);
  m.options = collective_options(m.gpu, m.nic_gbps, net);
  return m;
}

CollectiveRun run_collective(const CollectiveMachine& m, const CollectiveJob& job) {
  const int64_t needed = network::strided_groups_gpus(m.gpus_per_server, job.groups, job.ranks, job.ranks_per_server);
  CollectiveRun run;
  run.spec = m.scenario ? fabric_spec(m.scenario->network, m.scenario->hardware, m.gpu, m.scenario->cluster.gpus)
                        : default_fabric_spec(m.gpu, static_cast<int>(needed));
  const network::Topology topology = network::Topology::build(run.spec);
  run.fabric = topology.describe();
  const network::Router router(topology, m.ecmp);
  network::CollectiveSimulator sim(topology, router, m.options);
  network::CollectiveRequest req;
  req.op = job.op;
  req.bytes = job.bytes;
  req.groups = network::strided_groups(m.gpus_per_server, job.groups, job.ranks, job.ranks_per_server);
  if (job.scattered) {
    network::scatter_servers(&req.groups, m.gpus_per_server, run.spec.gpus / m.gpus_per_server, job.seed);
  }
  try {
    if (job.algorithm == network::CollectiveAlgorithm::kHierarchical) {
      req.algorithm = *job.algorithm;
      req.protocol = job.protocol.value_or(network::NcclProtocol::kSimple);
      run.tuned.best = sim.run(req);
    } else {
      run.tuned = network::tune_collective(sim, req, job.algorithm, job.protocol);
    }
  } catch (const std::invalid_argument& e) {
    throw CollectiveChoiceError(e.what());
  }
  return run;
}

CollectiveAnswer answer_collective(const CollectiveQuery& q) {
  CollectiveAnswer a;
  a.machine = collective_machine(q.scenario, q.gpu, q.profile);
  a.job = q.job;
  CollectiveJob& job = a.job;
  const int per_server = a.machine.gpus_per_server;
  const bool tree = job.algorithm == network::CollectiveAlgorithm::kTree ||
                    job.algorithm == network::CollectiveAlgorithm::kNvlsTree;
  if (tree && job.op != network::CollectiveOp::kAllReduce && job.op != network::CollectiveOp::kSendRecv)
    throw CollectiveChoiceError(fmt::format("algorithm {} is for allreduce only (as in NCCL)", to_string(*job.algorithm)));
  if (job.ranks_per_server == 0) job.ranks_per_server = std::gcd(job.ranks, per_server);
  if (per_server % job.ranks_per_server != 0 || job.ranks % job.ranks_per_server != 0) {
    throw CollectiveChoiceError(fmt::format("ranks per server ({}) must divide both the ranks ({}) and the GPUs per server ({})",
                                            job.ranks_per_server, job.ranks, per_server));
  }
  const int64_t needed = network::strided_groups_gpus(per_server, job.groups, job.ranks, job.ranks_per_server);
  if (needed > kMaxCollectiveGpus)
    throw CollectiveChoiceError(fmt::format("the job needs {} GPUs; at most {}", needed, kMaxCollectiveGpus));
  if (q.scenario && needed > q.scenario->cluster.gpus) {
    throw CollectiveChoiceError(fmt::format("{} x {} ranks at {} per server need {} GPUs; the scenario's cluster has {}",
                                            job.groups, job.ranks, job.ranks_per_server, needed,
                                            q.scenario->cluster.gpus));
  }
  if (q.qps_per_connection) a.machine.ecmp.qps_per_connection = *q.qps_per_connection;
  if (q.routing) a.machine.ecmp.routing = *q.routing;
  if (q.congestion_control) a.machine.options.congestion_control = *q.congestion_control;
  const auto t0 = std::chrono::steady_clock::now();
  a.run = run_collective(a.machine, job);
  a.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return a;
}

}  // namespace megascale::sim
