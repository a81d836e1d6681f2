// model/fabric_tiers.h: the switch tiers a scenario's [network] and [hardware]
// values build, as numbers: how many servers share one set of ToRs, how many
// uplinks each tier has, how many servers a pod holds.
//
// defines: FabricTiers, FabricFault, downlink_ports, fabric_tiers
//
// The same sizing rules as network/topology.h (plan_fabric), which model/ cannot
// call (DESIGN.md: model/ depends on nothing of ours); tests/sim/
// fabric_tiers_crosscheck_test.cc holds the two to the same answers. Two users:
// the scenario reader (a GPU count the fabric cannot hold is an error naming
// its key) and the closed form's view of ECMP collisions between pipeline
// transfers (model/p2p_contention.h).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/config.h"

namespace megascale::model {

// A fabric the values cannot build: the dotted scenario key at fault and why.
struct FabricFault {
  std::string key;
  std::string reason;
};

struct FabricTiers {
  int tiers = 3;                  // 2 (ToR + spine) or 3 (ToR + aggregation + core)
  int tor_uplinks = 0;            // ToR ports that go up
  int64_t servers_per_group = 0;  // servers sharing one set of ToRs
  int tors_per_group = 0;         // NICs per server (rail-optimised) or 1
  int64_t servers = 0;
  int64_t tors = 0;
  // Three tiers: a pod is tor_uplinks aggregation switches and the ToRs they
  // meet; each aggregation switch has agg_uplinks ports to the core. Two
  // tiers: one pod, agg_uplinks 0 (the spines are the top).
  int64_t servers_per_pod = 0;
  int64_t pods = 1;
  int agg_uplinks = 0;
  double port_gbps = 0;           // every switch port (network.switch_port_gbps)
};

// Downlink ports of a switch of `radix` ports at downlink:uplink `ratio`
// (1.0 = 1:1), written to *down, or the reason the ratio does not split the
// ports into whole ones (`tier` names the switch in it).
std::optional<std::string> downlink_ports(int radix, double ratio, std::string_view tier, int* down);

// The tiers of the fabric `n` and `hw` describe for `gpus` GPUs, or the fault
// (a ratio that splits no whole ports, NICs that do not fit a ToR, more ToRs
// or pods than the top tier connects). Nothing else is checked here: a NIC
// faster than a switch port, or a GPU count that is not a multiple of
// gpus_per_node, is left to the fabric builder.
struct FabricTiersOrFault {
  std::optional<FabricTiers> tiers;
  std::optional<FabricFault> fault;
};
FabricTiersOrFault fabric_tiers(const NetworkConfig& n, const HardwareConfig& hw, int gpus);

}  // namespace megascale::model
