// model/collective_cost.cc: NCCL-style ring collective cost.
#include "model/collective_cost.h"

#include <cmath>

namespace megascale::model {
namespace {

// NCCL src/graph/tuning.cc constants (REFERENCE.md): base latency of the Ring
// algorithm with the Simple protocol, and per-hop latencies.
constexpr double kRingSimpleBaseUs = 8.4;
constexpr double kNvlinkSimpleHopUs = 3.4;
constexpr double kNetworkSimpleHopUs = 14.0;

}  // namespace

Link nvlink_link(double busbw_gbs) { return {busbw_gbs, kNvlinkSimpleHopUs}; }
Link network_link(double busbw_gbs) { return {busbw_gbs, kNetworkSimpleHopUs}; }

double collective_time_s(CollectiveKind kind, int ranks, double bytes, const Link& link) {
  if (ranks <= 1 || bytes <= 0) return 0.0;
  const double n = ranks;
  const double factor = kind == CollectiveKind::kAllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
  const double steps = kind == CollectiveKind::kAllReduce ? 2.0 * (n - 1) : (n - 1);
  const double latency_s = (kRingSimpleBaseUs + steps * link.hop_latency_us) * 1e-6;
  return latency_s + factor * bytes / (link.busbw_gbs * 1e9);
}

double small_allreduce_time_s(int ranks, const Link& link) {
  if (ranks <= 1) return 0.0;
  const double hops = 2.0 * std::ceil(std::log2(static_cast<double>(ranks)));
  return (kRingSimpleBaseUs + hops * link.hop_latency_us) * 1e-6;
}

double p2p_time_s(double bytes, const Link& link) {
  if (bytes <= 0) return 0.0;
  return (kRingSimpleBaseUs + link.hop_latency_us) * 1e-6 + bytes / (link.busbw_gbs * 1e9);
}

}  // namespace megascale::model
