// network/topology.cc: validation, sizing and construction of CLOS fabrics.
// The sizing rules and the sources of the defaults are in topology.h.
#include "network/topology.h"

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/visitors.hpp>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>
#include <fmt/format.h>

namespace megascale::network {

namespace {

[[noreturn]] void fail(std::string parameter, std::string reason) {
  throw FabricError(std::move(parameter), std::move(reason));
}

std::string number(double value) {
  return fmt::format("{:g}", value);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void require_positive(std::string_view name, double value) {
  if (!(value > 0.0 && std::isfinite(value))) {
    fail(std::string(name), "must be a finite number > 0, got " + number(value));
  }
}

void require_non_negative(std::string_view name, double value) {
  if (!(value >= 0.0 && std::isfinite(value))) {
    fail(std::string(name), "must be a finite number >= 0, got " + number(value));
  }
}

void require_at_least(std::string_view name, int value, int min_value) {
  if (value < min_value) {
    fail(std::string(name), "must be >= " + std::to_string(min_value) + ", got " +
                                std::to_string(value));
  }
}

const char* tier_name(int tier, int tiers) {
  if (tier == 0) return "ToR";
  return tiers == 2 ? "spine" : "aggregation";
}

// Downlink ports of a switch of `radix` ports at downlink:uplink `ratio`; the
// rest are uplinks. Both must be whole and at least one.
int downlink_ports(const FabricSpec& s, int tier) {
  const double ratio =
      s.oversubscription.size() == 1 ? s.oversubscription[0] : s.oversubscription[tier];
  if (!(ratio > 0.0 && std::isfinite(ratio))) {
    fail("oversubscription", std::string(tier_name(tier, s.tiers)) +
                                 " ratio must be a finite number > 0, got " + number(ratio));
  }
  const double down = s.switch_radix * ratio / (1.0 + ratio);
  const double whole = std::round(down);
  if (std::abs(down - whole) > 1e-6) {
    fail("oversubscription", std::string(tier_name(tier, s.tiers)) + " ratio " + number(ratio) +
                                 ":1 splits " + std::to_string(s.switch_radix) + " ports into " +
                                 number(down) + " down : " + number(s.switch_radix - down) +
                                 " up, not whole ports");
  }
  if (whole < 1 || whole > s.switch_radix - 1) {
    fail("oversubscription", std::string(tier_name(tier, s.tiers)) + " ratio " + number(ratio) +
                                 ":1 leaves no " + (whole < 1 ? "downlink" : "uplink") +
                                 " port of " + std::to_string(s.switch_radix));
  }
  return static_cast<int>(whole);
}

void check_scalars(const FabricSpec& s) {
  if (s.tiers != 2 && s.tiers != 3) {
    fail("tiers", "must be 2 or 3, got " + std::to_string(s.tiers));
  }
  require_at_least("gpus", s.gpus, 1);
  require_at_least("gpus_per_server", s.gpus_per_server, 1);
  require_at_least("nics_per_server", s.nics_per_server, 1);
  require_at_least("switch_radix", s.switch_radix, 2);
  if (s.gpus % s.gpus_per_server != 0) {
    fail("gpus", std::to_string(s.gpus) + " GPUs is not a multiple of gpus_per_server (" +
                     std::to_string(s.gpus_per_server) + ")");
  }
  if (s.gpus_per_server % s.nics_per_server != 0) {
    fail("nics_per_server", "must divide gpus_per_server (" + std::to_string(s.gpus_per_server) +
                                "), got " + std::to_string(s.nics_per_server));
  }
  require_positive("nic_gbps", s.nic_gbps);
  require_positive("switch_port_gbps", s.switch_port_gbps);
  require_positive("nvlink_gbps", s.nvlink_gbps);
  require_positive("pcie_gbps", s.pcie_gbps);
  require_non_negative("switch_latency_us", s.switch_latency_us);
  require_non_negative("link_latency_us", s.link_latency_us);
  require_non_negative("nvswitch_latency_us", s.nvswitch_latency_us);
  require_non_negative("pcie_latency_us", s.pcie_latency_us);
  if (s.nic_gbps > s.switch_port_gbps) {
    fail("nic_gbps", "a " + number(s.nic_gbps) + " Gb/s NIC does not fit a " +
                         number(s.switch_port_gbps) + " Gb/s switch port");
  }
  const size_t ratios = s.oversubscription.size();
  if (ratios != 1 && ratios != static_cast<size_t>(s.tiers - 1)) {
    fail("oversubscription", std::to_string(ratios) + " ratios given for " +
                                 std::to_string(s.tiers) +
                                 " tiers; give one for all tiers or one per tier below the "
                                 "top (" + std::to_string(s.tiers - 1) + ")");
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Presets

FabricSpec megascale_clos(int gpus) {
  FabricSpec s;
  s.preset = "megascale-clos";
  s.gpus = gpus;
  return s;
}

FabricSpec rail_2tier(int gpus) {
  FabricSpec s;
  s.preset = "rail-2tier";
  s.gpus = gpus;
  s.tiers = 2;
  return s;
}

FabricSpec fat_tree(int gpus) {
  FabricSpec s;
  s.preset = "fat-tree";
  s.gpus = gpus;
  s.split_ports = false;
  s.rail_optimized = false;
  return s;
}

std::span<const std::string_view> fabric_preset_names() {
  static constexpr std::array<std::string_view, 3> kNames = {"megascale-clos", "rail-2tier",
                                                             "fat-tree"};
  return kNames;
}

FabricSpec fabric_preset(std::string_view name, int gpus) {
  if (name == "megascale-clos") return megascale_clos(gpus);
  if (name == "rail-2tier") return rail_2tier(gpus);
  if (name == "fat-tree") return fat_tree(gpus);
  fail("preset", "unknown preset '" + std::string(name) +
                     "' (allowed: megascale-clos, rail-2tier, fat-tree)");
}

FabricError::FabricError(std::string parameter, std::string reason)
    : std::invalid_argument(parameter + ": " + reason),
      parameter_(std::move(parameter)),
      reason_(std::move(reason)) {}

const char* to_string(NodeKind kind) {
  switch (kind) {
    case NodeKind::kGpu: return "gpu";
    case NodeKind::kNvSwitch: return "nvswitch";
    case NodeKind::kNic: return "nic";
    case NodeKind::kTor: return "tor";
    case NodeKind::kAgg: return "agg";
    case NodeKind::kCore: return "core";
  }
  return "?";
}

const char* to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink: return "nvlink";
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kNicTor: return "nic-tor";
    case LinkKind::kTorAgg: return "tor-agg";
    case LinkKind::kAggCore: return "agg-core";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Sizing

FabricShape plan_fabric(const FabricSpec& s) {
  check_scalars(s);
  FabricShape f;
  f.servers = s.gpus / s.gpus_per_server;
  f.nics = f.servers * s.nics_per_server;
  f.tor_down_ports = downlink_ports(s, 0);
  f.tor_up_ports = s.switch_radix - f.tor_down_ports;
  f.lanes_per_tor_port = s.split_ports && s.nic_gbps <= s.switch_port_gbps / 2 ? 2 : 1;
  f.nic_lanes_per_tor = f.tor_down_ports * f.lanes_per_tor_port;
  if (s.rail_optimized) {
    f.servers_per_group = f.nic_lanes_per_tor;
    f.tors_per_group = s.nics_per_server;
  } else {
    if (s.nics_per_server > f.nic_lanes_per_tor) {
      fail("nics_per_server", "a server's " + std::to_string(s.nics_per_server) +
                                  " NICs do not fit one ToR's " +
                                  std::to_string(f.nic_lanes_per_tor) +
                                  " NIC ports (not rail-optimised: all NICs of a server share "
                                  "one ToR)");
    }
    f.servers_per_group = f.nic_lanes_per_tor / s.nics_per_server;
    f.tors_per_group = 1;
  }
  f.groups = static_cast<int>(ceil_div(f.servers, f.servers_per_group));
  const int64_t tors = static_cast<int64_t>(f.groups) * f.tors_per_group;
  const int64_t gpus_per_group = static_cast<int64_t>(f.servers_per_group) * s.gpus_per_server;
  const std::string radix = std::to_string(s.switch_radix);

  if (s.tiers == 2) {
    // Every spine must meet every ToR: at most `radix` ToRs.
    f.max_gpus = s.switch_radix / f.tors_per_group * gpus_per_group;
    if (tors > s.switch_radix) {
      fail("gpus", std::to_string(s.gpus) + " GPUs need " + std::to_string(tors) +
                       " ToRs, more than a 2-tier fabric of radix-" + radix +
                       " switches connects (" + radix + " ToRs, at most " +
                       std::to_string(f.max_gpus) + " GPUs); use tiers = 3");
    }
    f.tors = static_cast<int>(tors);
    f.pods = 1;
    f.tors_per_pod = f.tors;
    f.aggs_per_pod = static_cast<int>(ceil_div(tors * f.tor_up_ports, s.switch_radix));
    f.aggs = f.aggs_per_pod;
    f.agg_down_ports = s.switch_radix;
    f.agg_up_ports = 0;
  } else {
    f.aggs_per_pod = f.tor_up_ports;
    f.agg_down_ports = downlink_ports(s, 1);
    f.agg_up_ports = s.switch_radix - f.agg_down_ports;
    f.tors_per_pod = f.agg_down_ports;
    const int64_t pods = ceil_div(tors, f.tors_per_pod);
    // Every core must meet every pod: at most `radix` pods.
    f.max_gpus = static_cast<int64_t>(s.switch_radix) * f.tors_per_pod / f.tors_per_group *
                 gpus_per_group;
    if (pods > s.switch_radix) {
      fail("gpus", std::to_string(s.gpus) + " GPUs need " + std::to_string(pods) + " pods of " +
                       std::to_string(f.tors_per_pod) + " ToRs, more than radix-" + radix +
                       " core switches connect (" + radix + " pods, at most " +
                       std::to_string(f.max_gpus) + " GPUs)");
    }
    f.tors = static_cast<int>(tors);
    f.pods = static_cast<int>(pods);
    f.aggs = f.pods * f.aggs_per_pod;
    f.cores_per_plane =
        static_cast<int>(ceil_div(static_cast<int64_t>(f.pods) * f.agg_up_ports, s.switch_radix));
    f.cores = f.aggs_per_pod * f.cores_per_plane;
  }
  f.nodes = static_cast<int64_t>(s.gpus) + f.servers + f.nics + f.tors + f.aggs + f.cores;
  f.links = 2 * (2 * static_cast<int64_t>(s.gpus) + f.nics +
                 static_cast<int64_t>(f.tors) * f.tor_up_ports +
                 static_cast<int64_t>(f.aggs) * f.agg_up_ports);
  if (f.nodes > INT_MAX / 2 || f.links > INT_MAX / 2) {
    fail("gpus", std::to_string(s.gpus) + " GPUs give " + std::to_string(f.links) +
                     " links, more than this implementation indexes");
  }
  return f;
}

// ---------------------------------------------------------------------------
// Construction

Topology Topology::build(const FabricSpec& spec) {
  Topology t;
  t.spec_ = spec;
  t.shape_ = plan_fabric(spec);
  const FabricSpec& s = t.spec_;
  const FabricShape& f = t.shape_;

  t.nvswitch_base_ = s.gpus;
  t.nic_base_ = t.nvswitch_base_ + f.servers;
  t.tor_base_ = t.nic_base_ + f.nics;
  t.agg_base_ = t.tor_base_ + f.tors;
  t.core_base_ = t.agg_base_ + f.aggs;

  t.links_.reserve(static_cast<size_t>(f.links));
  auto add_pair = [&](NodeId lower, NodeId upper, double capacity_gbps, double up_latency_us,
                      double down_latency_us, LinkKind kind) {
    t.links_.push_back({lower, upper, capacity_gbps, up_latency_us, kind, true});
    t.links_.push_back({upper, lower, capacity_gbps, down_latency_us, kind, false});
  };
  const double cable_us = s.link_latency_us;
  const double switch_us = s.switch_latency_us + s.link_latency_us;

  for (int gpu = 0; gpu < s.gpus; ++gpu) {
    add_pair(t.gpu_node(gpu), t.nvswitch_node(t.server_of_gpu(gpu)), s.nvlink_gbps, 0.0,
             s.nvswitch_latency_us, LinkKind::kNvlink);
  }
  t.pcie_base_ = static_cast<LinkId>(t.links_.size());
  for (int gpu = 0; gpu < s.gpus; ++gpu) {
    add_pair(t.gpu_node(gpu), t.nic_node_of_gpu(gpu), s.pcie_gbps, s.pcie_latency_us,
             s.pcie_latency_us, LinkKind::kPcie);
  }
  t.access_base_ = static_cast<LinkId>(t.links_.size());
  for (int nic = 0; nic < f.nics; ++nic) {
    add_pair(t.nic_node(nic), t.tor_node(t.tor_of_nic(nic)), s.nic_gbps, cable_us, switch_us,
             LinkKind::kNicTor);
  }
  t.tor_agg_base_ = static_cast<LinkId>(t.links_.size());
  for (int tor = 0; tor < f.tors; ++tor) {
    for (int u = 0; u < f.tor_up_ports; ++u) {
      // 2 tiers: rotate over the spines; 3 tiers: uplink j to aggregation j of the pod.
      const int agg = s.tiers == 2
                          ? static_cast<int>((static_cast<int64_t>(tor) * f.tor_up_ports + u) %
                                             f.aggs)
                          : t.pod_of_tor(tor) * f.aggs_per_pod + u;
      add_pair(t.tor_node(tor), t.agg_node(agg), s.switch_port_gbps, switch_us, switch_us,
               LinkKind::kTorAgg);
    }
  }
  t.agg_core_base_ = static_cast<LinkId>(t.links_.size());
  for (int agg = 0; agg < f.aggs && s.tiers == 3; ++agg) {
    const int pod = agg / f.aggs_per_pod;
    const int plane = agg % f.aggs_per_pod;
    for (int u = 0; u < f.agg_up_ports; ++u) {
      const int core = plane * f.cores_per_plane +
                       static_cast<int>((static_cast<int64_t>(pod) * f.agg_up_ports + u) %
                                        f.cores_per_plane);
      add_pair(t.agg_node(agg), t.core_node(core), s.switch_port_gbps, switch_us, switch_us,
               LinkKind::kAggCore);
    }
  }

  t.capacity_gbps_.resize(t.links_.size());
  std::vector<std::pair<uint32_t, uint32_t>> endpoints(t.links_.size());
  for (size_t i = 0; i < t.links_.size(); ++i) {
    t.capacity_gbps_[i] = t.links_[i].capacity_gbps;
    endpoints[i] = {static_cast<uint32_t>(t.links_[i].src), static_cast<uint32_t>(t.links_[i].dst)};
  }
  std::vector<LinkId> ids(t.links_.size());
  std::iota(ids.begin(), ids.end(), 0);
  t.graph_ = Graph(boost::edges_are_unsorted_multi_pass, endpoints.begin(), endpoints.end(),
                   ids.begin(), static_cast<uint32_t>(f.nodes));
  return t;
}

// ---------------------------------------------------------------------------
// Queries

NodeKind Topology::kind(NodeId node) const {
  if (node < nvswitch_base_) return NodeKind::kGpu;
  if (node < nic_base_) return NodeKind::kNvSwitch;
  if (node < tor_base_) return NodeKind::kNic;
  if (node < agg_base_) return NodeKind::kTor;
  if (node < core_base_) return NodeKind::kAgg;
  return NodeKind::kCore;
}

int Topology::index_in_kind(NodeId node) const {
  switch (kind(node)) {
    case NodeKind::kGpu: return node;
    case NodeKind::kNvSwitch: return node - nvswitch_base_;
    case NodeKind::kNic: return node - nic_base_;
    case NodeKind::kTor: return node - tor_base_;
    case NodeKind::kAgg: return node - agg_base_;
    case NodeKind::kCore: return node - core_base_;
  }
  return -1;
}

int Topology::switch_tier(NodeId node) const {
  switch (kind(node)) {
    case NodeKind::kTor: return 0;
    case NodeKind::kAgg: return 1;
    case NodeKind::kCore: return 2;
    default: return -1;
  }
}

int Topology::rail_of_gpu(int gpu) const {
  const int gpus_per_nic = spec_.gpus_per_server / spec_.nics_per_server;
  return (gpu % spec_.gpus_per_server) / gpus_per_nic;
}

int Topology::tor_of_nic(int nic) const {
  const int server = server_of_nic(nic);
  if (!spec_.rail_optimized) return server / shape_.servers_per_group;
  return group_of_server(server) * spec_.nics_per_server + rail_of_nic(nic);
}

double Topology::path_latency_us(std::span<const LinkId> path) const {
  double total = 0;
  for (LinkId id : path) total += link(id).latency_us;
  return total;
}

double Topology::path_capacity_gbps(std::span<const LinkId> path) const {
  double smallest = std::numeric_limits<double>::infinity();
  for (LinkId id : path) smallest = std::min(smallest, link(id).capacity_gbps);
  return smallest;
}

int Topology::hops_to_nic(NodeId node, NodeId dst_nic) const {
  if (node == dst_nic) return 0;
  const int dst_tor = tor_of_nic(dst_nic - nic_base_);
  switch (kind(node)) {
    case NodeKind::kTor: {
      const int tor = node - tor_base_;
      if (tor == dst_tor) return 1;  // down to the NIC
      if (spec_.tiers == 2) return 3;
      return pod_of_tor(tor) == pod_of_tor(dst_tor) ? 3 : 5;
    }
    case NodeKind::kAgg:
      if (spec_.tiers == 2) return 2;  // every spine meets every ToR
      return pod_of_agg(node - agg_base_) == pod_of_tor(dst_tor) ? 2 : 4;
    case NodeKind::kCore: return 3;  // every core meets every pod
    default: return kUnreachable;
  }
}

LinkRange Topology::next_hops(NodeId node, NodeId dst_nic) const {
  if (node == dst_nic) return {};
  const FabricShape& f = shape_;
  const int dst = dst_nic - nic_base_;
  const int64_t dst_tor = tor_of_nic(dst);
  // First index u >= 0 of the progression u = first_u + k * period with
  // (offset + u) % period == residue, and how many such u lie below `limit`.
  auto progression = [](int64_t residue, int64_t offset, int64_t period, int64_t limit) {
    const int64_t first_u = ((residue - offset) % period + period) % period;
    const int64_t count = first_u < limit ? (limit - first_u + period - 1) / period : 0;
    return std::pair<int64_t, int32_t>(first_u, static_cast<int32_t>(count));
  };
  switch (kind(node)) {
    case NodeKind::kNic: return {nic_tor_up(node - nic_base_), 2, 1};
    case NodeKind::kTor: {
      const int64_t tor = node - tor_base_;
      if (tor == dst_tor) return {reverse(nic_tor_up(dst)), 2, 1};
      return {static_cast<LinkId>(tor_agg_base_ + 2 * tor * f.tor_up_ports), 2, f.tor_up_ports};
    }
    case NodeKind::kAgg: {
      const int64_t agg = node - agg_base_;
      if (spec_.tiers == 2) {
        // Down: the destination ToR's uplinks u with (tor * U + u) % spines == agg.
        const auto [u, count] = progression(agg, dst_tor * f.tor_up_ports, f.aggs, f.tor_up_ports);
        return {static_cast<LinkId>(tor_agg_base_ + 2 * (dst_tor * f.tor_up_ports + u) + 1),
                static_cast<int32_t>(2 * f.aggs), count};
      }
      if (pod_of_agg(static_cast<int>(agg)) == pod_of_tor(static_cast<int>(dst_tor))) {
        const int64_t j = agg % f.aggs_per_pod;  // the ToR's uplink j reaches aggregation j
        return {static_cast<LinkId>(tor_agg_base_ + 2 * (dst_tor * f.tor_up_ports + j) + 1), 2, 1};
      }
      return {static_cast<LinkId>(agg_core_base_ + 2 * agg * f.agg_up_ports), 2, f.agg_up_ports};
    }
    case NodeKind::kCore: {
      // Down: uplinks u of the destination pod's aggregation switch of this
      // plane with (pod * U1 + u) % cores_per_plane == this core's place.
      const int64_t core = node - core_base_;
      const int64_t pod = pod_of_tor(static_cast<int>(dst_tor));
      const int64_t agg = pod * f.aggs_per_pod + core / f.cores_per_plane;
      const auto [u, count] = progression(core % f.cores_per_plane, pod * f.agg_up_ports,
                                          f.cores_per_plane, f.agg_up_ports);
      return {static_cast<LinkId>(agg_core_base_ + 2 * (agg * f.agg_up_ports + u) + 1),
              static_cast<int32_t>(2 * f.cores_per_plane), count};
    }
    default: return {};
  }
}

std::vector<int> Topology::fabric_hops_from(NodeId nic) const {
  // Breadth-first search over the subgraph of NICs and Ethernet switches.
  auto in_fabric = [this](uint32_t v) {
    const NodeKind k = kind(static_cast<NodeId>(v));
    return k != NodeKind::kGpu && k != NodeKind::kNvSwitch;
  };
  using Filtered =
      boost::filtered_graph<Graph, boost::keep_all, std::function<bool(uint32_t)>>;
  const Filtered fabric(graph_, boost::keep_all(), std::function<bool(uint32_t)>(in_fabric));
  std::vector<int> hops(static_cast<size_t>(num_nodes()), kUnreachable);
  hops[static_cast<size_t>(nic)] = 0;
  auto hop_map = boost::make_iterator_property_map(hops.begin(), get(boost::vertex_index, graph_));
  boost::breadth_first_search(
      fabric, static_cast<uint32_t>(nic),
      boost::visitor(boost::make_bfs_visitor(boost::record_distances(hop_map, boost::on_tree_edge()))));
  return hops;
}

std::string Topology::describe() const {
  const FabricShape& f = shape_;
  std::string text = spec_.preset + ": " + std::to_string(spec_.gpus) + " GPUs, " +
                     std::to_string(f.servers) + " servers, " + std::to_string(f.tors) + " ToR / " +
                     std::to_string(f.aggs) + (spec_.tiers == 2 ? " spine" : " agg");
  if (spec_.tiers == 3) text += " / " + std::to_string(f.cores) + " core";
  text += ", " + std::to_string(f.pods) + (f.pods == 1 ? " pod, " : " pods, ") +
          std::to_string(f.nodes) + " nodes, " + std::to_string(f.links) + " links";
  return text;
}

size_t Topology::memory_bytes() const {
  const size_t edges = links_.size();
  return sizeof(*this) + links_.capacity() * sizeof(Link) +
         capacity_gbps_.capacity() * sizeof(double) +
         edges * (sizeof(uint32_t) + sizeof(LinkId)) +  // CSR column + edge bundle
         (static_cast<size_t>(num_nodes()) + 1) * sizeof(uint32_t);  // CSR row starts
}

}  // namespace megascale::network
