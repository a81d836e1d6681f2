// sim/comm_costs.h: how long each communication op of the Schedule IR takes.
//
// defines: CommModel, FabricInputs, CommTimes, comm_times, gpu_of
//
// Three sources, one shape of answer (seconds per op):
//   kNetwork    network/'s CollectiveSimulator on the scenario's fabric: flows
//               over the CLOS topology, per-QP ECMP hashing, max-min rates, the
//               congestion-control effect on shared switch queues (see
//               network/collectives.h). Every concurrent communicator is in the
//               same solve, so hash collisions and shared links cost what they
//               cost:
//                 DP reduce-scatter / all-gather (all-reduce with ZeRO 0) of a
//                   chunk: ring, all TP x PP data-parallel groups at once;
//                 p2p (one activation / gradient message), per stage boundary
//                   and direction: every (TP rank, DP replica) pipeline sending
//                   to its next stage at once (the steady state of the
//                   pipeline; the wrap-around P-1 -> 0 of the interleaved
//                   schedule only when V > 1), and separately every pipeline
//                   sending to its previous stage; a boundary's time is NCCL's
//                   send latency plus the slowest of its transfers (one
//                   placement can put some boundaries inside a pod and others
//                   across the core);
//                 tied-embedding gradient all-reduce between the first and last
//                   stage: every (TP rank, replica) pair at once.
//               Collectives are memoised by (op, bytes): a 175B iteration needs
//               at most 6 solves.
//   kAnalytical model/collective_cost.h on the links the analytical estimator
//               uses (model/estimator.h parallel_links(): NVLink inside a node, one NIC rail
//               share across): contention-free NCCL cost form; the pipeline
//               transfers and the tied-embedding all-reduce are the estimator's
//               own, with its expected ECMP collisions (model/p2p_contention.h).
//   kZero       every communication op takes 0 s (tests: the event simulation
//               then reproduces model::replay on compute alone).
// TP/SP collectives are not here: they are inside the layer programs and are
// folded into the compute durations as the estimator does (sim/op_costs.h).
//
// Payloads (per GPU, nccl-tests "size"): chunk gradients fp32 (RS input / AR
// buffer), chunk parameters bf16 (AG output); pipeline rank 0's chunk 0 also
// holds the word embedding and the last rank's last chunk its tied copy for
// the output layer (Megatron-LM), vocab x hidden / TP parameters each.
//
// Thread-safety: pure functions (each call builds its own simulator).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/estimator.h"
#include "model/schedule.h"
#include "network/collectives.h"  // defines: CollectiveOptions
#include "network/routing.h"      // defines: EcmpConfig
#include "network/topology.h"     // defines: FabricSpec

namespace megascale::sim {

enum class CommModel { kNetwork, kAnalytical, kZero };
const char* to_string(CommModel m);  // "network", "analytical", "zero"
std::optional<CommModel> parse_comm_model(std::string_view name);

// network/'s plain parameters for the scenario's fabric (filled from the
// scenario by sim/fabric_config.h, which lives above model/ and network/).
struct FabricInputs {
  network::FabricSpec spec;
  network::EcmpConfig ecmp;
  network::CollectiveOptions collectives;
};

struct CommTimes {
  CommModel model = CommModel::kZero;
  int pp = 1, vpp = 1;
  double p2p_s = 0;                 // one activation or gradient message, the slowest boundary
  // Per sending pipeline rank r: to r+1 (mod P; activations) and to r-1 (mod P;
  // gradients). Empty: every boundary takes p2p_s.
  std::vector<double> p2p_next_s, p2p_prev_s;
  std::vector<double> dp_reduce_s;  // [pp_rank * V + chunk]: RS (ZeRO >= 1) or AR (ZeRO 0)
  std::vector<double> dp_gather_s;  // [pp_rank * V + chunk]: parameter AG (ZeRO >= 1)
  double embedding_sync_s = 0;      // tied-embedding gradient AR, first <-> last stage
  int solves = 0;                   // distinct collectives timed by network/
  double wall_s = 0;                // fabric build + solves
  // One line per distinct collective: what it is, its time and its bottleneck.
  std::vector<std::string> notes;

  double dp_reduce(int pp_rank, int chunk) const { return dp_reduce_s[pp_rank * vpp + chunk]; }
  // One message from pipeline rank `from` to its neighbour `to`.
  double p2p(int from, int to) const {
    if (p2p_next_s.empty() || from < 0 || from >= pp) return p2p_s;
    return to == (from + 1) % pp ? p2p_next_s[from] : p2p_prev_s[from];
  }
  double dp_gather(int pp_rank, int chunk) const { return dp_gather_s[pp_rank * vpp + chunk]; }
};

// REQUIRES: `fabric` for kNetwork (std::invalid_argument otherwise); the
// scenario's layout valid. Throws network::FabricError for a fabric that cannot
// be built (e.g. fewer GPUs than the job needs).
CommTimes comm_times(const model::Scenario& s, const model::Estimate& e, CommModel model,
                     const FabricInputs* fabric);

// GPU (the fabric's numbering: server = gpu / gpus_per_server) of TP rank t,
// DP rank d, pipeline rank r in the scenario's rank order (model::gpu_of:
// Megatron-LM's t + d*TP + r*TP*DP by default).
using model::gpu_of;

}  // namespace megascale::sim
