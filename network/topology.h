// network/topology.h: multi-tier CLOS fabrics of GPU servers, on Boost.Graph.
//
// A Topology is the physical network of one cluster: GPUs, one NVSwitch per
// server, NICs, and two or three tiers of Ethernet switches (ToR, aggregation or
// spine, core), joined by directed links with a capacity (Gb/s), a latency (us)
// and a kind. It is built from a FabricSpec (plain numbers, no dependency on
// model/) by Topology::build(), which validates the spec and throws FabricError
// naming the parameter and the reason when the fabric cannot be built.
//
// Sizing rules (all derived from the switch radix and the ratios):
//   - ToR: `switch_radix` ports of `switch_port_gbps`; downlink:uplink ports =
//     oversubscription[0]. With `split_ports`, a downlink port carries two NICs
//     when nic_gbps <= switch_port_gbps / 2 (Tomahawk-4: a 400G port splits into
//     2 x 200G, REFERENCE.md "Hardware"), so a 1:1 radix-64 ToR has 32 x 400G =
//     64 x 200G NIC lanes down and 32 x 400G up.
//   - Rail-optimised: NIC r of each of the servers of one group goes to ToR r of
//     the group; a group has as many servers as a ToR has NIC lanes (64) and as
//     many ToRs as a server has NICs (8) - MegaScale's "64 servers share one set
//     of 8 ToRs" (REFERENCE.md "MegaScale fabric"). Not rail-optimised: all NICs
//     of a server go to one ToR.
//   - Three tiers: a pod has one aggregation switch per ToR uplink, each ToR has
//     one link to every aggregation switch of its pod, and a pod holds as many
//     ToRs as an aggregation switch has downlinks (ratio oversubscription[1]).
//     Aggregation switch j of every pod connects only to core plane j; a plane has
//     ceil(pods * agg_uplinks / radix) cores, and uplink u of pod q's switch j goes
//     to core (q * agg_uplinks + u) mod cores_per_plane of plane j (parallel links
//     where a core meets a pod more than once). MegaScale at 12,288 GPUs: 192 ToRs,
//     6 pods of 32 ToRs + 32 aggregation switches, 32 planes x 3 = 96 cores, every
//     core port used - the sizing of REFERENCE.md. At most `switch_radix` pods.
//   - Two tiers: ceil(tors * tor_uplinks / radix) spines; uplink u of ToR l goes to
//     spine (l * tor_uplinks + u) mod spines. At most `switch_radix` ToRs.
//   - Partial groups, pods and planes are built for GPU counts that do not fill
//     them: a group always has its full set of ToRs, a pod its full set of
//     aggregation switches; cores are sized for the pods present.
//   These rules guarantee that every top-tier switch reaches every ToR (2 tiers) or
//   pod (3 tiers), so the shortest paths between two NICs go up to their lowest
//   common tier and back down, and hops_to_nic() can say so without a search.
//
// Ids. Nodes are dense 0..num_nodes()-1, laid out by kind: GPUs, NVSwitches (one
// per server), NICs, ToRs, aggregation/spine switches, cores. Links are dense
// 0..num_links()-1 and come in pairs: link 2i goes up (away from the GPU, towards
// a higher tier), link 2i+1 is its reverse (reverse(l) == l ^ 1). Capacities are
// per direction. Other layers (the flow solver) index plain vectors by link id.
//
// Latency of a directed link: link_latency_us (cable propagation) plus, when it
// leaves an Ethernet switch, switch_latency_us (port-to-port), so the latency of
// a path is the sum over its links and counts each switch crossed once.
//
// Sources of default constants:
//   - switch_radix 64, switch_port_gbps 400, 2 x 200G split: Broadcom Tomahawk-4
//     (25.6 Tb/s, 64 x 400G or 128 x 200G; REFERENCE.md "Hardware").
//   - switch_latency_us 0.7: Tomahawk-4 port-to-port latency is unpublished;
//     REFERENCE.md says to model it as a parameter, ~0.6-0.9 us; the middle.
//   - link_latency_us 0.05: propagation over ~10 m of fibre at ~5 ns/m
//     (two-thirds of c); an assumption about cable lengths in a data-centre row.
//   - nic_gbps 200, 8 GPUs and 8 NICs per server: MegaScale's servers
//     (REFERENCE.md "MegaScale fabric").
//   - nvlink_gbps 2400: A100 NVLink3, 600 GB/s bidirectional = 300 GB/s =
//     2400 Gb/s per direction per GPU (REFERENCE.md "Hardware").
//   - pcie_gbps 252: PCIe 4.0 x16, 16 GT/s x 16 lanes x 128/130 encoding, per
//     direction (PCI-SIG PCIe 4.0 base specification); the GPU-to-NIC path of an
//     A100 server.
//   - nvswitch_latency_us, pcie_latency_us 0: not modelled in the fabric; NCCL's
//     per-hop software constants (REFERENCE.md: NVLink Simple 3.4 us) dominate and
//     belong to the collective model.
//
// Thread-safety: a built Topology is immutable; any number of threads may read
// it concurrently. build() has no shared state.
#pragma once

#include <boost/graph/compressed_sparse_row_graph.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace megascale::network {

using NodeId = int32_t;  // dense 0..num_nodes()-1
using LinkId = int32_t;  // dense 0..num_links()-1

// The parameters of a fabric. Plain values; Topology::build() validates them.
// Field names are the parameter names FabricError reports.
struct FabricSpec {
  std::string preset = "megascale-clos";  // informational: the preset it came from
  int gpus = 12288;
  int gpus_per_server = 8;
  int nics_per_server = 8;          // must divide gpus_per_server
  double nic_gbps = 200.0;          // line rate of one NIC, per direction
  int switch_radix = 64;            // ports per Ethernet switch (every tier)
  double switch_port_gbps = 400.0;  // speed of one switch port
  bool split_ports = true;          // a ToR port carries 2 NICs of <= half its speed
  int tiers = 3;                    // 2 (ToR + spine) or 3 (ToR + aggregation + core)
  // Downlink:uplink port ratio of the tiers that have uplinks: one value for all
  // of them, or tiers-1 values (ToR first). 1.0 = non-blocking; 3.0 = 3:1.
  std::vector<double> oversubscription = {1.0};
  bool rail_optimized = true;
  double nvlink_gbps = 2400.0;        // per GPU, per direction, to its NVSwitch
  double pcie_gbps = 252.0;           // GPU <-> NIC, per direction
  double switch_latency_us = 0.7;     // Ethernet switch port-to-port
  double link_latency_us = 0.05;      // cable propagation, every NIC/switch link
  double nvswitch_latency_us = 0.0;   // added on NVSwitch -> GPU links
  double pcie_latency_us = 0.0;       // added on GPU <-> NIC links
};

// The preset fabrics. Each is a FabricSpec with `gpus` filled in; override any
// field before building.
//   "megascale-clos": the MegaScale 3-tier fabric (REFERENCE.md), 1:1 at every
//                     tier, split 400G ToR ports, rail-optimised; up to 64 pods of
//                     2,048 GPUs.
//   "rail-2tier":     the same switches and servers in two tiers (ToR + spine),
//                     rail-optimised; up to 64 ToRs = 4,096 GPUs.
//   "fat-tree":       a plain k-ary fat tree of radix-64 switches (k = 64): three
//                     tiers, 1:1, one NIC per 400G port, all NICs of a server on
//                     one ToR (not rail-optimised); up to k^3/4 = 65,536 NICs.
FabricSpec megascale_clos(int gpus);
FabricSpec rail_2tier(int gpus);
FabricSpec fat_tree(int gpus);
// By name; throws FabricError("preset", ...) for an unknown name.
FabricSpec fabric_preset(std::string_view name, int gpus);
// The preset names, in the order above.
std::span<const std::string_view> fabric_preset_names();

// A fabric that cannot be built: names the FabricSpec parameter at fault and why.
// what() is "<parameter>: <reason>".
class FabricError : public std::invalid_argument {
 public:
  FabricError(std::string parameter, std::string reason);
  const std::string& parameter() const { return parameter_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string parameter_;
  std::string reason_;
};

// The sizes a FabricSpec implies (see the sizing rules above). In a 2-tier fabric
// the "aggregation" fields describe the spines, pods == 1, and there are no cores.
struct FabricShape {
  int servers = 0;
  int nics = 0;
  int lanes_per_tor_port = 1;      // NICs per ToR downlink port (2 when split)
  int tor_down_ports = 0;
  int tor_up_ports = 0;
  int nic_lanes_per_tor = 0;       // tor_down_ports * lanes_per_tor_port
  int servers_per_group = 0;       // servers sharing one ToR set
  int tors_per_group = 0;          // nics_per_server (rail-optimised) or 1
  int groups = 0;                  // ToR sets, the last possibly partial
  int tors = 0;
  int pods = 1;
  int tors_per_pod = 0;
  int aggs_per_pod = 0;            // spines in a 2-tier fabric
  int aggs = 0;
  int agg_down_ports = 0;
  int agg_up_ports = 0;            // 0 in a 2-tier fabric
  int cores_per_plane = 0;         // a plane per aggregation index j
  int cores = 0;
  int64_t max_gpus = 0;            // the most GPUs these switches and tiers hold
  int64_t nodes = 0;
  int64_t links = 0;               // directed
};

// Validates `spec` and returns its sizes; throws FabricError.
FabricShape plan_fabric(const FabricSpec& spec);

enum class NodeKind : uint8_t { kGpu, kNvSwitch, kNic, kTor, kAgg, kCore };
// Where a link sits. kTorAgg joins a ToR to an aggregation switch (or a spine).
enum class LinkKind : uint8_t { kNvlink, kPcie, kNicTor, kTorAgg, kAggCore };

const char* to_string(NodeKind kind);  // "gpu", "nvswitch", "nic", "tor", "agg", "core"
const char* to_string(LinkKind kind);  // "nvlink", "pcie", "nic-tor", "tor-agg", "agg-core"

// A set of link ids in arithmetic progression: first, first + stride, ...
// (count of them). The equal-cost next hops of any node are one such set.
struct LinkRange {
  LinkId first = 0;
  int32_t stride = 2;
  int32_t count = 0;
  LinkId operator[](int32_t i) const { return first + i * stride; }
};

struct Link {
  NodeId src = 0;
  NodeId dst = 0;
  double capacity_gbps = 0;  // per direction
  double latency_us = 0;
  LinkKind kind = LinkKind::kNvlink;
  bool up = false;           // towards the higher tier (away from the GPU)
};

class Topology {
 public:
  // The directed graph: vertex = NodeId, edge bundle = LinkId. CSR storage.
  using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, LinkId,
                                                   boost::no_property, uint32_t, uint32_t>;
  static constexpr int kUnreachable = 1 << 20;

  // Validates and builds; throws FabricError.
  static Topology build(const FabricSpec& spec);

  const FabricSpec& spec() const { return spec_; }
  const FabricShape& shape() const { return shape_; }
  const Graph& graph() const { return graph_; }
  int num_nodes() const { return static_cast<int>(shape_.nodes); }
  int num_links() const { return static_cast<int>(links_.size()); }

  // --- nodes
  NodeKind kind(NodeId node) const;
  // Index of `node` among the nodes of its kind (e.g. GPU 17, ToR 3).
  int index_in_kind(NodeId node) const;
  // 0 ToR, 1 aggregation/spine, 2 core; -1 for GPUs, NVSwitches and NICs.
  int switch_tier(NodeId node) const;
  bool is_fabric_switch(NodeId node) const { return switch_tier(node) >= 0; }
  NodeId gpu_node(int gpu) const { return gpu; }
  NodeId nvswitch_node(int server) const { return nvswitch_base_ + server; }
  NodeId nic_node(int nic) const { return nic_base_ + nic; }
  NodeId tor_node(int tor) const { return tor_base_ + tor; }
  NodeId agg_node(int agg) const { return agg_base_ + agg; }
  NodeId core_node(int core) const { return core_base_ + core; }

  // --- GPUs, NICs, ToRs (indices within their kind)
  int server_of_gpu(int gpu) const { return gpu / spec_.gpus_per_server; }
  // The NIC (rail) of a GPU inside its server: local GPU g uses NIC
  // g / (gpus_per_server / nics_per_server).
  int rail_of_gpu(int gpu) const;
  int nic_of_gpu(int gpu) const { return server_of_gpu(gpu) * spec_.nics_per_server + rail_of_gpu(gpu); }
  NodeId nic_node_of_gpu(int gpu) const { return nic_node(nic_of_gpu(gpu)); }
  int server_of_nic(int nic) const { return nic / spec_.nics_per_server; }
  int rail_of_nic(int nic) const { return nic % spec_.nics_per_server; }
  int tor_of_nic(int nic) const;
  // The ToR set (rail-optimised group; the ToR itself otherwise) of a server.
  int group_of_server(int server) const { return server / shape_.servers_per_group; }
  int pod_of_tor(int tor) const { return spec_.tiers == 2 ? 0 : tor / shape_.tors_per_pod; }
  int pod_of_agg(int agg) const { return spec_.tiers == 2 ? 0 : agg / shape_.aggs_per_pod; }
  // Whether the NICs of two GPUs hang off the same ToR (traffic between them
  // crosses one switch).
  bool same_tor(int gpu_a, int gpu_b) const {
    return tor_of_nic(nic_of_gpu(gpu_a)) == tor_of_nic(nic_of_gpu(gpu_b));
  }
  // Whether two GPUs' servers share one ToR set.
  bool same_group(int gpu_a, int gpu_b) const {
    return group_of_server(server_of_gpu(gpu_a)) == group_of_server(server_of_gpu(gpu_b));
  }

  // --- links
  const Link& link(LinkId id) const { return links_[static_cast<size_t>(id)]; }
  std::span<const Link> links() const { return links_; }
  // Capacity of every link, Gb/s, indexed by LinkId (what a flow solver takes).
  const std::vector<double>& link_capacity_gbps() const { return capacity_gbps_; }
  static LinkId reverse(LinkId id) { return id ^ 1; }
  // The up link of each pair at the edge of a GPU or NIC (down = reverse()).
  LinkId nvlink_up(int gpu) const { return 2 * gpu; }
  LinkId pcie_up(int gpu) const { return pcie_base_ + 2 * gpu; }
  LinkId nic_tor_up(int nic) const { return access_base_ + 2 * nic; }

  // Sum of latencies and smallest capacity along a list of links.
  double path_latency_us(std::span<const LinkId> path) const;
  double path_capacity_gbps(std::span<const LinkId> path) const;

  // --- distances (switch-only paths between NICs)
  // Hops from `node` to `dst_nic` on a shortest path that crosses only Ethernet
  // switches; 0 at the destination; kUnreachable for GPUs, NVSwitches and other
  // NICs (a NIC never forwards). O(1), from the sizing rules.
  // REQUIRES: dst_nic is a NIC node.
  int hops_to_nic(NodeId node, NodeId dst_nic) const;
  // The equal-cost next links from `node` towards `dst_nic`: the links to the
  // neighbours with hops_to_nic one less (the source NIC's link to its ToR; a
  // ToR's or aggregation switch's uplinks on the way up; the parallel links to
  // the next switch on the way down). O(1): by construction they are an
  // arithmetic progression of link ids, in increasing order. Empty at the
  // destination and for GPUs and NVSwitches.
  // REQUIRES: dst_nic is a NIC node.
  LinkRange next_hops(NodeId node, NodeId dst_nic) const;
  // The same distances found by Boost's breadth-first search from `nic` over the
  // fabric (NICs and Ethernet switches); one entry per node, kUnreachable for the
  // rest. O(nodes + links): a cross-check of hops_to_nic(), not for hot loops.
  std::vector<int> fabric_hops_from(NodeId nic) const;

  // One line: "megascale-clos: 12288 GPUs, 1536 servers, 192 ToR / 192 agg / 96
  // core, 6 pods, 26592 nodes, 98304 links".
  std::string describe() const;
  // Bytes held by this object (links, capacities, graph), approximately.
  size_t memory_bytes() const;

 private:
  Topology() = default;

  FabricSpec spec_;
  FabricShape shape_;
  NodeId nvswitch_base_ = 0, nic_base_ = 0, tor_base_ = 0, agg_base_ = 0, core_base_ = 0;
  LinkId pcie_base_ = 0, access_base_ = 0, tor_agg_base_ = 0, agg_core_base_ = 0;
  std::vector<Link> links_;
  std::vector<double> capacity_gbps_;
  Graph graph_;
};

}  // namespace megascale::network
