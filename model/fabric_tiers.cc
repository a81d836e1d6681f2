// model/fabric_tiers.cc: see fabric_tiers.h.
#include "model/fabric_tiers.h"

#include <fmt/format.h>

#include <cmath>

namespace megascale::model {

std::optional<std::string> downlink_ports(int radix, double ratio, std::string_view tier, int* down) {
  const double exact = radix * ratio / (1.0 + ratio);
  const double whole = std::round(exact);
  if (!std::isfinite(exact) || std::abs(exact - whole) > 1e-6 || whole < 1 || whole > radix - 1) {
    return fmt::format("{} ratio {:g}:1 splits {} ports into {:g} down : {:g} up, not whole ports", tier, ratio, radix,
                       exact, radix - exact);
  }
  *down = static_cast<int>(whole);
  return std::nullopt;
}

FabricTiersOrFault fabric_tiers(const NetworkConfig& n, const HardwareConfig& hw, int gpus) {
  auto ratio = [&](int tier) {
    return n.oversubscription.size() == 1 ? n.oversubscription[0] : n.oversubscription[static_cast<size_t>(tier)];
  };
  auto fault = [](std::string key, std::string reason) {
    return FabricTiersOrFault{std::nullopt, FabricFault{std::move(key), std::move(reason)}};
  };
  if (n.oversubscription.empty() || (n.oversubscription.size() != 1 &&
                                     n.oversubscription.size() != static_cast<size_t>(std::max(1, n.tiers - 1)))) {
    return fault("network.oversubscription", fmt::format("{} ratios for {} tiers", n.oversubscription.size(), n.tiers));
  }
  FabricTiers f;
  f.tiers = n.tiers;
  f.port_gbps = n.switch_port_gbps;
  int tor_down = 0;
  if (std::optional<std::string> reason = downlink_ports(n.switch_radix, ratio(0), "ToR", &tor_down)) {
    return fault("network.oversubscription", *reason);
  }
  f.tor_uplinks = n.switch_radix - tor_down;
  const int lanes = n.split_ports && hw.nic_gbps <= n.switch_port_gbps / 2 ? 2 : 1;
  const int64_t nic_lanes = static_cast<int64_t>(tor_down) * lanes;
  f.servers_per_group = nic_lanes;
  f.tors_per_group = hw.nics_per_node;
  if (!n.rail_optimized) {
    if (hw.nics_per_node > nic_lanes) {
      return fault("hardware.nics_per_node",
                   fmt::format("a server's {} NICs do not fit one ToR's {} NIC ports (not rail-optimised: all NICs "
                               "of a server share one ToR)",
                               hw.nics_per_node, nic_lanes));
    }
    f.servers_per_group = nic_lanes / hw.nics_per_node;
    f.tors_per_group = 1;
  }
  f.servers = (static_cast<int64_t>(gpus) + hw.gpus_per_node - 1) / hw.gpus_per_node;
  f.tors = (f.servers + f.servers_per_group - 1) / f.servers_per_group * f.tors_per_group;
  const int64_t gpus_per_group = f.servers_per_group * hw.gpus_per_node;
  if (n.tiers == 2) {
    f.servers_per_pod = f.servers;
    if (f.tors <= n.switch_radix) return {f, std::nullopt};
    const int64_t max_gpus = n.switch_radix / f.tors_per_group * gpus_per_group;
    return fault("cluster.gpus", fmt::format("{} GPUs need {} ToRs, more than a 2-tier fabric of radix-{} switches "
                                             "connects ({} ToRs, at most {} GPUs); use network.tiers = 3",
                                             gpus, f.tors, n.switch_radix, n.switch_radix, max_gpus));
  }
  int agg_down = 0;
  if (std::optional<std::string> reason = downlink_ports(n.switch_radix, ratio(1), "aggregation", &agg_down)) {
    return fault("network.oversubscription", *reason);
  }
  f.agg_uplinks = n.switch_radix - agg_down;
  f.servers_per_pod = static_cast<int64_t>(agg_down) / f.tors_per_group * f.servers_per_group;
  f.pods = (f.tors + agg_down - 1) / agg_down;
  if (f.pods <= n.switch_radix) return {f, std::nullopt};
  const int64_t max_gpus = static_cast<int64_t>(n.switch_radix) * agg_down / f.tors_per_group * gpus_per_group;
  return fault("cluster.gpus", fmt::format("{} GPUs need {} pods of {} ToRs, more than radix-{} core switches "
                                           "connect ({} pods, at most {} GPUs)",
                                           gpus, f.pods, agg_down, n.switch_radix, n.switch_radix, max_gpus));
}

}  // namespace megascale::model
