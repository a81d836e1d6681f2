// model/collective_cost.cc: NCCL-style ring collective cost.
#include "model/collective_cost.h"

#include <cmath>
#include <optional>

#include "model/profile_tables.h"

namespace megascale::model {

namespace {

// NCCL src/graph/tuning.cc constants (REFERENCE.md): base latency of the Ring
// algorithm with the Simple protocol, and per-hop latencies.
constexpr double kRingSimpleBaseUs = 8.4;
constexpr double kNvlinkSimpleHopUs = 3.4;
constexpr double kNetworkSimpleHopUs = 14.0;

const char* op_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
  }
  return "all_reduce";
}

std::optional<double> measured_s(const Link& link, const char* op, int ranks, double bytes) {
  if (link.measured == nullptr) return std::nullopt;
  return link.measured->time_s(op, link.scope, ranks, bytes, link.cold);
}

}  // namespace

Link nvlink_link(double busbw_gbs) { return {busbw_gbs, kNvlinkSimpleHopUs, nullptr, "intra", false, 0.0}; }
Link network_link(double busbw_gbs) { return {busbw_gbs, kNetworkSimpleHopUs, nullptr, "inter", false, 0.0}; }

double collective_time_s(CollectiveKind kind, int ranks, double bytes, const Link& link) {
  if (ranks <= 1 || bytes <= 0) return 0.0;
  if (const std::optional<double> t = measured_s(link, op_name(kind), ranks, bytes)) return *t;
  const double n = ranks;
  const double factor = kind == CollectiveKind::kAllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
  const double steps = kind == CollectiveKind::kAllReduce ? 2.0 * (n - 1) : (n - 1);
  const double latency_s = (kRingSimpleBaseUs + steps * link.hop_latency_us) * 1e-6;
  const double extra = kind == CollectiveKind::kAllReduce ? 0.0 : link.gather_scatter_extra;
  return latency_s + (1.0 + extra) * factor * bytes / (link.busbw_gbs * 1e9);
}

double small_allreduce_time_s(int ranks, const Link& link) {
  if (ranks <= 1) return 0.0;
  // A norm or a loss: one fp32 value (the measured curve's smallest size).
  if (const std::optional<double> t = measured_s(link, "all_reduce", ranks, 4.0)) return *t;
  const double hops = 2.0 * std::ceil(std::log2(static_cast<double>(ranks)));
  return (kRingSimpleBaseUs + hops * link.hop_latency_us) * 1e-6;
}

double p2p_time_s(double bytes, const Link& link) {
  if (bytes <= 0) return 0.0;
  if (const std::optional<double> t = measured_s(link, "sendrecv", 2, bytes)) return *t;
  return (kRingSimpleBaseUs + link.hop_latency_us) * 1e-6 + bytes / (link.busbw_gbs * 1e9);
}

}  // namespace megascale::model
