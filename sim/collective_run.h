// sim/collective_run.h: one collective on a fabric, as `megascale net
// collective` runs it (the fabric alone, without a training job): the machine
// (a scenario's hardware, fabric, ECMP and congestion control, or the MegaScale
// defaults), the communicators laid out as Megatron-LM's data-parallel groups,
// and NCCL's tuner choosing the algorithm and protocol (network/collective_tuner.h).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "model/config.h"
#include "model/hardware.h"
#include "network/collective_tuner.h"
#include "network/collectives.h"
#include "network/routing.h"
#include "network/topology.h"

namespace megascale::sim {

// The GPU a collective runs on without --gpu or a scenario.
inline constexpr const char* kDefaultCollectiveGpu = "A100-SXM4-80GB";

struct CollectiveMachine {
  model::GpuProfile gpu;
  int gpus_per_server = 8;
  double nic_gbps = 0;
  std::optional<model::Scenario> scenario;  // its fabric; none: the MegaScale 3-tier one sized for the job
  network::EcmpConfig ecmp;                 // the fabric's (a caller may override qps_per_connection)
  network::CollectiveOptions options;       // (and congestion_control)
};

// `gpu`: a profile name; "" for the scenario's GPU, else `profile` (a loaded
// profile file, `net collective --profile`), else kDefaultCollectiveGpu.
// Throws model::ScenarioError for an unknown profile name.
CollectiveMachine collective_machine(const std::optional<model::Scenario>& scenario, const std::string& gpu,
                                     const std::optional<model::GpuProfile>& profile = std::nullopt);

struct CollectiveJob {
  network::CollectiveOp op = network::CollectiveOp::kAllReduce;
  double bytes = 0;
  int ranks = 2;             // per communicator
  int groups = 1;            // communicators running at once
  int ranks_per_server = 1;  // of each communicator
  bool scattered = false;    // servers shuffled (rings cross the upper tiers)
  uint64_t seed = 1;         // of the shuffle
  // nullopt: NCCL's choice. Hierarchical (three NCCL calls, not an NCCL
  // algorithm) runs as asked, with Simple unless a protocol is given.
  std::optional<network::CollectiveAlgorithm> algorithm;
  std::optional<network::NcclProtocol> protocol;
};

struct CollectiveRun {
  network::FabricSpec spec;
  std::string fabric;  // Topology::describe()
  network::TunedCollective tuned;
};

// Thrown when the job as asked cannot run: no algorithm / protocol pair allowed
// runs it, or its layout does not fit the machine (the caller's request, not
// the fabric).
class CollectiveChoiceError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws network::FabricError for a fabric that cannot be built,
// CollectiveChoiceError as above.
CollectiveRun run_collective(const CollectiveMachine& m, const CollectiveJob& job);

// `megascale net collective` as asked: the machine's source and the job, with
// the fabric settings a user may override.
struct CollectiveQuery {
  std::optional<model::Scenario> scenario;  // its hardware, fabric, ECMP, CC; none: the MegaScale defaults
  std::string gpu;                          // a GPU profile name; "": the scenario's (collective_machine)
  std::optional<model::GpuProfile> profile; // without gpu and scenario: this GPU (collective_machine)
  CollectiveJob job;                        // ranks_per_server 0: gcd(ranks, GPUs per server)
  std::optional<int> qps_per_connection;    // the fabric's otherwise
  std::optional<network::RoutingMode> routing;  // the fabric's otherwise
  std::optional<network::CcAlgorithm> congestion_control;
};

struct CollectiveAnswer {
  CollectiveMachine machine;
  CollectiveJob job;  // ranks_per_server filled in
  CollectiveRun run;
  double wall_s = 0;  // of run_collective
};

// The largest job answer_collective lays out (GPUs, all groups together).
inline constexpr int64_t kMaxCollectiveGpus = int64_t{1} << 24;

// Builds the machine, checks that the job fits it and runs it. Throws
// CollectiveChoiceError saying which quantity is wrong: tree / NVLS-tree for an op NCCL runs them for (allreduce; sendrecv
// ignores the algorithm), ranks per server that do not divide both the ranks and
// the server, more GPUs than kMaxCollectiveGpus or than the scenario's cluster;
// model::ScenarioError for an unknown GPU profile, network::FabricError for a
// fabric that cannot be built.
CollectiveAnswer answer_collective(const CollectiveQuery& q);

}  // namespace megascale::sim
