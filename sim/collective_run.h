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

// `gpu`: a profile name; "" for the scenario's GPU (kDefaultCollectiveGpu
// without one). Throws model::ScenarioError for an unknown profile.
CollectiveMachine collective_machine(const std::optional<model::Scenario>& scenario, const std::string& gpu);

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

// Thrown when no algorithm / protocol pair allowed runs the job (the caller's
// restriction, not the fabric).
class CollectiveChoiceError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws network::FabricError for a fabric that cannot be built,
// CollectiveChoiceError as above.
CollectiveRun run_collective(const CollectiveMachine& m, const CollectiveJob& job);

}  // namespace megascale::sim
