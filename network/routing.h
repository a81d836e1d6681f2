// network/routing.h: shortest-path routing, per-flow ECMP and ToR-local placement.
//
// Routing. Between two NICs the equal-cost paths go up to the lowest tier the two
// share and back down (NIC-ToR-NIC under one ToR; NIC-ToR-agg-ToR-NIC inside a pod
// or a 2-tier fabric; NIC-ToR-agg-core-agg-ToR-NIC across pods). At each switch
// the candidates are the out-links one hop closer to the destination
// (Topology::next_hops, O(1) per hop); they are enumerated per hop, never as a
// product of all paths (a cross-pod pair of the MegaScale fabric has 10,912).
//
// ECMP. Each switch picks one candidate per flow by hashing the flow's 5-tuple
// (src IP, dst IP, src port, dst port, protocol) with a seed, index = hash % n,
// as switch ASICs do. RoCEv2 traffic is UDP to port 4791 (IANA; InfiniBand
// Architecture Specification Annex A17, "RoCEv2"), and the NIC varies the UDP
// source port per queue pair (QP) in 49152..65535, so the QPs of one connection
// are hashed independently. NCCL opens NCCL_IB_QPS_PER_CONNECTION QPs per
// connection (default 1: `NCCL_PARAM(IbQpsPerConn, "IB_QPS_PER_CONNECTION", 1)`
// in NCCL's src/transport/net_ib.cc) and splits each message evenly over them,
// so a connection of Q QPs is Q sub-flows of 1/Q of the bytes each.
//
// Hashes (deterministic on every platform; std::hash is not used):
//   "crc32":   CRC-32C (Castagnoli) of the 13-byte tuple - the kind of CRC switch
//              ASICs compute over header fields - then the seed is XORed in and
//              a murmur3 finaliser (fmix32) applied. A seed XORed into a bare CRC
//              is linear: it would only relabel power-of-two choices, so two tiers
//              with different seeds would still choose alike. The finaliser makes
//              different seeds independent.
//   "murmur3": MurmurHash3 x86_32 of the same 13 bytes with the seed.
// Polarisation: with `polarized` every switch uses the same seed, so a flow's
// hash is the same at every tier and its choices correlate (with equal candidate
// counts, the ToR's choice fixes the aggregation switch's): fewer distinct
// end-to-end paths are used. Otherwise each tier has its own seed.
//
// Adaptive routing (RoutingMode::kAdaptive): InfiniBand switches with AR pick
// the output port of each packet by the ports' load among the candidates the
// subnet manager grants (NVIDIA, "InfiniBand Cluster Bring-up Procedure",
// Adaptive Routing: AR is on by default in opensm.conf, routing engine ar_updn),
// and NCCL turns on AR-capable transfers by default on InfiniBand ports, off on
// RoCE (NCCL 2.19.3 src/transport/net_ib.cc: ar = link_layer ==
// IBV_LINK_LAYER_INFINIBAND, NCCL_IB_ADAPTIVE_ROUTING overrides). No 5-tuple
// hash pins a flow to a path, so ECMP's collisions do not arise. At flow level
// the flows of one step are routed in turn, each on the equal-cost path whose
// most-loaded link carries the fewest bytes of the step's flows routed before it
// (ties: the ECMP hash's pick, then the next candidates in order; AR reacts to
// congestion further down through the credits that back up to the choosing
// switch, so the path's bottleneck counts, not the next link's): the balance AR reaches
// packet by packet, without splitting one flow over several paths. Callers
// pass the step's LinkLoad; without one, routing is ECMP.
//
// A link that is down (optional mask) is left out of the candidates of the switch
// it leaves, as a switch shrinks its ECMP group when a port goes down; failures
// further along are not routed around (no routing-protocol convergence here).
//
// Thread-safety: a Router is immutable after construction and holds a reference
// to its Topology, which must outlive it; its const methods may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "network/topology.h"

namespace megascale::network {

enum class EcmpHash : uint8_t { kCrc32, kMurmur3 };
const char* to_string(EcmpHash hash);  // "crc32", "murmur3"
std::optional<EcmpHash> parse_ecmp_hash(std::string_view name);

enum class RoutingMode : uint8_t { kEcmp, kAdaptive };
const char* to_string(RoutingMode mode);  // "ecmp", "adaptive"
std::optional<RoutingMode> parse_routing_mode(std::string_view name);

// Adaptive routing's load of one step: bytes per LinkId (Topology::num_links()
// entries) of the (sub-)flows routed so far.
using LinkLoad = std::vector<double>;

constexpr uint16_t kRoceV2UdpPort = 4791;       // IANA-assigned RoCEv2 destination port
constexpr uint8_t kUdpProtocol = 17;
constexpr uint16_t kRoceSourcePortMin = 49152;  // dynamic range used for QP source ports
constexpr int kRoceSourcePorts = 16384;         // 49152..65535
// NCCL_IB_MAX_QPS (NCCL src/transport/net_ib.cc): the most QPs per connection.
constexpr int kMaxQpsPerConnection = 128;

struct FiveTuple {
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
  uint16_t src_port = kRoceSourcePortMin;
  uint16_t dst_port = kRoceV2UdpPort;
  uint8_t protocol = kUdpProtocol;
};

// Standard CRC-32C (reflected polynomial 0x82F63B78, initial and final XOR
// 0xFFFFFFFF): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
// MurmurHash3 x86_32 (Austin Appleby, public domain).
uint32_t murmur3_32(const void* data, size_t size, uint32_t seed);
// murmur3's 32-bit finaliser: a bijective avalanche mix.
uint32_t fmix32(uint32_t h);
// The tuple's bytes in network order: src IP, dst IP, src port, dst port, protocol.
void pack_tuple(const FiveTuple& t, uint8_t bytes[13]);
// The ECMP hash of a tuple under `seed` (see the header comment).
uint32_t ecmp_hash(EcmpHash hash, const FiveTuple& t, uint32_t seed);

struct EcmpConfig {
  EcmpHash hash = EcmpHash::kCrc32;
  uint32_t seed = 0x4D534341;     // any fixed value; "MSCA"
  bool polarized = false;         // the same seed at every tier
  int qps_per_connection = 1;     // NCCL_IB_QPS_PER_CONNECTION (NCCL default 1)
  RoutingMode routing = RoutingMode::kEcmp;  // kAdaptive: InfiniBand AR (above)
};

// Paths of many flows, stored flat: flow i is links[offsets[i], offsets[i+1])
// and carries bytes[i]. What a flow solver takes, next to
// Topology::link_capacity_gbps().
struct PathSet {
  std::vector<LinkId> links;
  std::vector<uint32_t> offsets = {0};
  std::vector<double> bytes;

  size_t size() const { return offsets.size() - 1; }
  std::span<const LinkId> path(size_t i) const {
    return std::span<const LinkId>(links).subspan(offsets[i], offsets[i + 1] - offsets[i]);
  }
  void add(std::span<const LinkId> path, double flow_bytes = 0.0);
  void clear();
};

// One byte per link, nonzero = down. Indexed by LinkId; may be empty.
using LinkDownMask = std::vector<uint8_t>;

class Router {
 public:
  // REQUIRES: config.qps_per_connection in 1..kMaxQpsPerConnection (else
  // std::invalid_argument). Keeps a reference to `topology`.
  explicit Router(const Topology& topology, EcmpConfig config = {});

  const Topology& topology() const { return topology_; }
  const EcmpConfig& config() const { return config_; }

  // IPv4 address of a NIC: 10.0.0.0/8 plus nic + 1.
  static uint32_t nic_ip(int nic) { return 0x0A000000u + static_cast<uint32_t>(nic) + 1u; }
  // The RoCEv2 5-tuple of a QP from `src_nic` to `dst_nic` (NodeIds).
  FiveTuple tuple(NodeId src_nic, NodeId dst_nic, uint16_t src_port) const;
  // Source port of QP `qp` of a connection whose first QP uses `base_port`:
  // consecutive, wrapping inside 49152..65535.
  static uint16_t qp_source_port(uint16_t base_port, int qp);
  // A deterministic base source port for connection number `connection` between
  // two NICs (stands in for the NIC deriving it from the QP number).
  uint16_t connection_base_port(NodeId src_nic, NodeId dst_nic, uint32_t connection) const;

  // The seed the switch at `node` hashes with: config.seed when polarised,
  // otherwise one derived from config.seed and the switch's tier.
  uint32_t seed_at(NodeId node) const;

  // The equal-cost next links at `at` (the source NIC or a switch on a shortest
  // path) towards `dst_nic`, in link-id order; appended to *out. Links marked in
  // `down` are left out.
  void candidate_links(NodeId at, NodeId dst_nic, std::vector<LinkId>* out,
                       const LinkDownMask* down = nullptr) const;

  // The path the flow with this tuple takes from `src_nic` to `dst_nic`,
  // appended to *out (nothing when src == dst). Returns false, leaving *out with
  // the links up to the failing hop, when every candidate of a hop is down.
  // With `load` (adaptive routing; REQUIRES load->size() == num_links()) the
  // flow takes the equal-cost path with the least-loaded bottleneck and adds
  // `bytes` to every link of it; without it, the ECMP hash picks each hop.
  bool route(NodeId src_nic, NodeId dst_nic, const FiveTuple& tuple, std::vector<LinkId>* out,
             const LinkDownMask* down = nullptr, LinkLoad* load = nullptr, double bytes = 0) const;

  // GPU to GPU: NVLink through the NVSwitch inside a server; otherwise PCIe to
  // the source GPU's NIC, the fabric, and PCIe from the destination GPU's NIC
  // (rail-crossing traffic goes through the fabric; NCCL's PXN is not modelled).
  // `load` / `bytes`: as route(), for the fabric part.
  bool route_gpus(int src_gpu, int dst_gpu, uint16_t src_port, std::vector<LinkId>* out,
                  const LinkDownMask* down = nullptr, LinkLoad* load = nullptr, double bytes = 0) const;

  // A connection of config().qps_per_connection QPs from `src_nic` to `dst_nic`:
  // one sub-flow per QP, bytes / Q each, source ports qp_source_port(base, q),
  // appended to *out. Returns false if a sub-flow could not be routed.
  bool route_connection(NodeId src_nic, NodeId dst_nic, uint16_t base_src_port, double bytes,
                        PathSet* out, const LinkDownMask* down = nullptr) const;

  // Number of distinct equal-cost paths between two NICs (memoised count over
  // the candidate sets; nothing is materialised).
  int64_t count_paths(NodeId src_nic, NodeId dst_nic) const;
  // Appends up to `max_paths` of those paths to *out, depth-first in link-id
  // order; returns how many were added.
  size_t enumerate_paths(NodeId src_nic, NodeId dst_nic, size_t max_paths, PathSet* out) const;

 private:
  const Topology& topology_;
  EcmpConfig config_;
  uint32_t tier_seed_[3] = {0, 0, 0};
};

// ---------------------------------------------------------------------------
// ToR-local placement: keep a heavy communicator under one ToR set.

// How widely a set of GPUs is spread: distinct ToRs (of their NICs), ToR sets
// (server groups) and pods.
struct PlacementSpread {
  int tors = 0;
  int groups = 0;
  int pods = 0;
};
PlacementSpread placement_spread(const Topology& topology, std::span<const int> gpus);

// Chooses GPUs for a communicator of `ranks` ranks with `ranks_per_server` ranks
// on each server it uses (1 for a DP or PP group of a TP-8 layout, 8 for a TP
// group), taken from `free_servers`. Rank r runs on local GPU
// first_local_gpu + r % ranks_per_server of the (r / ranks_per_server)-th chosen
// server. Servers are chosen to span as few ToR sets as possible, and then as
// few pods: the smallest single ToR set that fits (best fit, leaving large sets
// whole for large communicators); else the smallest pod that fits, filled from
// its fullest ToR sets; else the fullest pods first. Servers of one ToR set are
// consecutive in rank order. Returns the GPU of each rank.
// REQUIRES: ranks >= 1, 1 <= ranks_per_server, first_local_gpu >= 0,
// first_local_gpu + ranks_per_server <= gpus_per_server, enough free servers;
// otherwise std::invalid_argument.
std::vector<int> place_ranks(const Topology& topology, int ranks, int ranks_per_server,
                             std::span<const int> free_servers, int first_local_gpu = 0);

}  // namespace megascale::network
