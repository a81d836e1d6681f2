// model/collective_cost.h: analytic time of NCCL ring collectives and p2p, the
// cost oracle of the analytical fidelity.
//
// time = latency + wire_bytes / busbw, NCCL's own cost form (src/graph/tuning.cc:
// time_us = latency + bytes / (1000 * bw_GBps)), with the nccl-tests conversions
// of ../shared/REFERENCE.md: a ring all-gather / reduce-scatter of a `bytes`
// tensor over n ranks moves (n-1)/n * bytes per rank, an all-reduce 2(n-1)/n.
// Latency: base (Ring, Simple protocol: 8.4 us) + steps x per-hop latency
// (NVLink Simple 3.4 us, network Simple 14 us), steps = n-1 (AG, RS) or 2(n-1)
// (AR). network/ replaces the bandwidth term with fabric-aware flow rates
// (ECMP, congestion); this is the contention-free baseline. A link carrying a
// profile's measured collectives (Link::measured) answers from them instead
// (nccl-tests imports, the CPU engine's MPI microbenchmarks).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace megascale::model {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce };

struct CollectiveTable;  // model/profile_tables.h

struct Link {
  double busbw_gbs = 0;     // achievable bus bandwidth per rank, GB/s
  double hop_latency_us = 0;
  // A profile's measured collectives (model/profile_tables.h) over this link's
  // scope ("intra": one machine / NVLink, "inter": across machines); when they
  // cover an op, its measured time replaces the formula. nullptr: none.
  const CollectiveTable* measured = nullptr;
  const char* scope = "intra";
  // The buffers this link's collectives move live out of cache (DP gradient
  // and parameter buffers): read the table's cold measurements.
  bool cold = false;
  // The fraction by which an all-gather's or a reduce-scatter's bandwidth term
  // runs longer than the ring formula says (0: none); the TP link inside a node
  // carries the profile's tp_gather_scatter_extra (model/hardware.h). A
  // measured table's time is used as measured.
  double gather_scatter_extra = 0;
};

// NVLink inside a node and one NIC rail across nodes.
Link nvlink_link(double busbw_gbs);
Link network_link(double busbw_gbs);

// Ring collective over `ranks` ranks on `bytes` (the full, unsharded tensor).
double collective_time_s(CollectiveKind kind, int ranks, double bytes, const Link& link);

// A latency-bound all-reduce of a few bytes (gradient norms, loss statistics):
// NCCL picks its tree algorithm, 2 x ceil(log2(ranks)) hops plus the base latency.
double small_allreduce_time_s(int ranks, const Link& link);

// One point-to-point message of `bytes`.
double p2p_time_s(double bytes, const Link& link);

}  // namespace megascale::model
