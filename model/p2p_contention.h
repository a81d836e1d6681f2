// model/p2p_contention.h: how much longer a pipeline p2p transfer takes when
// ECMP hashes every pipeline's transfers onto the fabric's uplinks at once, for
// the closed form.
//
// defines: HashedTier, expected_ecmp_slowdown, pp_p2p_slowdown, embedding_sync_slowdown
//
// In the steady state of a pipeline, every (TP rank, DP replica) sends its
// activation or gradient to the next stage at the same moment. Where the
// neighbouring stage sits behind another set of ToRs, those transfers leave on
// the ToR uplinks, and ECMP hashes each onto one uplink (and, across pods, one
// aggregation uplink) independently of the others: some links get more than
// they carry at full rate. A boundary waits for its slowest transfer, whose rate
// is its most loaded link's capacity over that load (max-min sharing gives every
// transfer at least that and the most loaded link's transfers at most that).
// The event fidelity solves these flows one by one on the built fabric
// (sim/comm_costs.h); the closed form takes the balls-into-bins expectation
// (REFERENCE.md "Congestion control and link faults": a synchronous exchange is
// gated by the most loaded link, efficiency about 1 / E[max load]):
//   loads on the L links of a tier ~ Poisson(lambda) each (m transfers hashed
//   onto n links, lambda = m / n), cut at m, independent across links and
//   tiers;
//   slowdown = E[max(1, max over links of load / capacity)].
// With q queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION) each transfer
// is q sub-flows of 1/q its rate, hashed independently: loads Poisson(q lambda)
// against capacity q x capacity. InfiniBand adaptive routing spreads the load
// evenly: slowdown max(1, lambda / capacity).
//
// Thread-safety: pure functions (pp_p2p_slowdown keeps a thread_local cache of
// its answers, bounded, keyed by every input it reads).
#pragma once

#include <limits>
#include <span>

#include "model/config.h"

namespace megascale::model {

// One tier of equal-cost links a set of transfers is hashed onto.
struct HashedTier {
  double transfers_per_link = 0;  // lambda: mean transfers a link of the tier gets
  double links = 0;               // the links of the tier the transfers land on
  double capacity = 1;            // transfers one link carries, each at its full rate
  // The most transfers one link can get: those hashed onto its set of links
  // (one ToR's leaving transfers); the Poisson tail is cut there.
  double at_most = std::numeric_limits<double>::infinity();
};

// E[max(1, max over the tiers' links of load / capacity)] with each link's
// load Poisson(subflows x transfers_per_link), at most subflows x at_most,
// against subflows x capacity;
// >= 1. Throws std::invalid_argument for subflows < 1, negative or non-finite
// figures, or a capacity <= 0.
double expected_ecmp_slowdown(std::span<const HashedTier> tiers, int subflows);

// The factor (>= 1) by which the slowest p2p transfer of the scenario's worst
// pipeline stage boundary runs longer than a GPU's uncontended share of its
// NIC: the boundary whose transfers all leave their set of ToRs (and pod),
// every pipeline's transfers at once, on the scenario's fabric
// (model/fabric_tiers.h) and routing. 1 when the pipeline has one stage, the
// job fits one set of ToRs, or the fabric cannot be built (the scenario reader
// refuses such a file).
double pp_p2p_slowdown(const Scenario& s);

// The same for the tied embedding's gradient all-reduce between the first and
// the last stage (every TP rank of every replica at once, Megatron-LM): the
// transfers from stage 0 to stage P - 1.
double embedding_sync_slowdown(const Scenario& s);


}  // namespace megascale::model
