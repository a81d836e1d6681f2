// network/routing.cc: hashes, ECMP path choice, path counting, placement.
#include "network/routing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace megascale::network {

// ---------------------------------------------------------------------------
// Hashes

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

constexpr uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = (crc >> 8) ^ kCrc32cTable[(crc ^ p[i]) & 0xFFu];
  return crc ^ 0xFFFFFFFFu;
}

uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

uint32_t murmur3_32(const void* data, size_t size, uint32_t seed) {
  constexpr uint32_t c1 = 0xCC9E2D51u;
  constexpr uint32_t c2 = 0x1B873593u;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t h = seed;
  const size_t blocks = size / 4;
  for (size_t i = 0; i < blocks; ++i) {
    uint32_t k = load_le32(p + 4 * i);
    k *= c1;
    k = rotl32(k, 15);
    k *= c2;
    h ^= k;
    h = rotl32(h, 13);
    h = h * 5 + 0xE6546B64u;
  }
  const uint8_t* tail = p + 4 * blocks;
  uint32_t k = 0;
  switch (size & 3u) {
    case 3: k ^= static_cast<uint32_t>(tail[2]) << 16; [[fallthrough]];
    case 2: k ^= static_cast<uint32_t>(tail[1]) << 8; [[fallthrough]];
    case 1:
      k ^= tail[0];
      k *= c1;
      k = rotl32(k, 15);
      k *= c2;
      h ^= k;
  }
  h ^= static_cast<uint32_t>(size);
  return fmix32(h);
}

void pack_tuple(const FiveTuple& t, uint8_t bytes[13]) {
  auto put32 = [](uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v >> 24);
    p[1] = static_cast<uint8_t>(v >> 16);
    p[2] = static_cast<uint8_t>(v >> 8);
    p[3] = static_cast<uint8_t>(v);
  };
  put32(bytes, t.src_ip);
  put32(bytes + 4, t.dst_ip);
  bytes[8] = static_cast<uint8_t>(t.src_port >> 8);
  bytes[9] = static_cast<uint8_t>(t.src_port);
  bytes[10] = static_cast<uint8_t>(t.dst_port >> 8);
  bytes[11] = static_cast<uint8_t>(t.dst_port);
  bytes[12] = t.protocol;
}

uint32_t ecmp_hash(EcmpHash hash, const FiveTuple& t, uint32_t seed) {
  uint8_t bytes[13];
  pack_tuple(t, bytes);
  if (hash == EcmpHash::kCrc32) return fmix32(crc32c(bytes, sizeof(bytes)) ^ seed);
  return murmur3_32(bytes, sizeof(bytes), seed);
}

const char* to_string(EcmpHash hash) {
  switch (hash) {
    case EcmpHash::kCrc32: return "crc32";
    case EcmpHash::kMurmur3: return "murmur3";
  }
  return "?";
}

std::optional<EcmpHash> parse_ecmp_hash(std::string_view name) {
  if (name == "crc32") return EcmpHash::kCrc32;
  if (name == "murmur3") return EcmpHash::kMurmur3;
  return std::nullopt;
}

const char* to_string(RoutingMode mode) {
  switch (mode) {
    case RoutingMode::kEcmp: return "ecmp";
    case RoutingMode::kAdaptive: return "adaptive";
  }
  return "?";
}

std::optional<RoutingMode> parse_routing_mode(std::string_view name) {
  if (name == "ecmp") return RoutingMode::kEcmp;
  if (name == "adaptive") return RoutingMode::kAdaptive;
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// PathSet

void PathSet::add(std::span<const LinkId> path, double flow_bytes) {
  links.insert(links.end(), path.begin(), path.end());
  offsets.push_back(static_cast<uint32_t>(links.size()));
  bytes.push_back(flow_bytes);
}

void PathSet::clear() {
  links.clear();
  offsets.assign(1, 0);
  bytes.clear();
}

// ---------------------------------------------------------------------------
// Router

Router::Router(const Topology& topology, EcmpConfig config)
    : topology_(topology), config_(config) {
  if (config_.qps_per_connection < 1 || config_.qps_per_connection > kMaxQpsPerConnection) {
    throw std::invalid_argument("qps_per_connection must be in 1.." +
                                std::to_string(kMaxQpsPerConnection) + ", got " +
                                std::to_string(config_.qps_per_connection));
  }
  for (int tier = 0; tier < 3; ++tier) {
    tier_seed_[tier] = config_.polarized
                           ? config_.seed
                           : fmix32(config_.seed ^ (0x9E3779B9u * static_cast<uint32_t>(tier + 1)));
  }
}

FiveTuple Router::tuple(NodeId src_nic, NodeId dst_nic, uint16_t src_port) const {
  FiveTuple t;
  t.src_ip = nic_ip(topology_.index_in_kind(src_nic));
  t.dst_ip = nic_ip(topology_.index_in_kind(dst_nic));
  t.src_port = src_port;
  return t;
}

uint16_t Router::qp_source_port(uint16_t base_port, int qp) {
  int offset = (static_cast<int>(base_port) - kRoceSourcePortMin) % kRoceSourcePorts;
  if (offset < 0) offset += kRoceSourcePorts;
  return static_cast<uint16_t>(kRoceSourcePortMin + (offset + qp) % kRoceSourcePorts);
}

uint16_t Router::connection_base_port(NodeId src_nic, NodeId dst_nic, uint32_t connection) const {
  const uint32_t words[3] = {static_cast<uint32_t>(src_nic), static_cast<uint32_t>(dst_nic),
                             connection};
  uint8_t bytes[12];
  for (int i = 0; i < 3; ++i) {
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<uint8_t>(words[i] >> (8 * b));
  }
  return static_cast<uint16_t>(kRoceSourcePortMin +
                               murmur3_32(bytes, sizeof(bytes), config_.seed) % kRoceSourcePorts);
}

uint32_t Router::seed_at(NodeId node) const {
  const int tier = topology_.switch_tier(node);
  return tier < 0 ? config_.seed : tier_seed_[tier];
}

namespace {

bool is_down(const LinkDownMask* down, LinkId id) {
  return down != nullptr && static_cast<size_t>(id) < down->size() &&
         (*down)[static_cast<size_t>(id)] != 0;
}

// Longest shortest path: NIC-ToR-agg-core-agg-ToR-NIC.
constexpr int kMaxHops = 6;

}  // namespace

void Router::candidate_links(NodeId at, NodeId dst_nic, std::vector<LinkId>* out,
                             const LinkDownMask* down) const {
  const LinkRange range = topology_.next_hops(at, dst_nic);
  for (int32_t i = 0; i < range.count; ++i) {
    if (!is_down(down, range[i])) out->push_back(range[i]);
  }
}

bool Router::route(NodeId src_nic, NodeId dst_nic, const FiveTuple& tuple, std::vector<LinkId>* out,
                   const LinkDownMask* down, LinkLoad* load, double flow_bytes) const {
  if (topology_.kind(src_nic) != NodeKind::kNic || topology_.kind(dst_nic) != NodeKind::kNic) {
    throw std::invalid_argument("route: endpoints must be NIC nodes, got " +
                                std::to_string(src_nic) + " and " + std::to_string(dst_nic));
  }
  if (load != nullptr && load->size() != static_cast<size_t>(topology_.num_links())) {
    throw std::invalid_argument("route: the link load has " + std::to_string(load->size()) + " entries for " +
                                std::to_string(topology_.num_links()) + " links");
  }
  if (down != nullptr && down->empty()) down = nullptr;
  uint8_t bytes[13];
  pack_tuple(tuple, bytes);
  const uint32_t crc = config_.hash == EcmpHash::kCrc32 ? crc32c(bytes, sizeof(bytes)) : 0u;
  // The candidates at `at` that are up, and the one ECMP's hash picks (its
  // index among them); 0 candidates when all are down.
  auto candidates_at = [&](NodeId at, LinkRange* range, int32_t* alive) {
    *range = topology_.next_hops(at, dst_nic);
    *alive = range->count;
    if (down != nullptr) {
      *alive = 0;
      for (int32_t i = 0; i < range->count; ++i) *alive += is_down(down, (*range)[i]) ? 0 : 1;
    }
  };
  auto hash_index = [&](NodeId at, int32_t alive) -> int32_t {
    if (alive <= 1) return 0;
    const uint32_t seed = seed_at(at);
    const uint32_t hash =
        config_.hash == EcmpHash::kCrc32 ? fmix32(crc ^ seed) : murmur3_32(bytes, sizeof(bytes), seed);
    return static_cast<int32_t>(hash % static_cast<uint32_t>(alive));
  };
  auto nth_alive = [&](const LinkRange& range, int32_t n) {
    if (down == nullptr) return range[n];
    for (int32_t i = 0; i < range.count; ++i) {
      if (is_down(down, range[i])) continue;
      if (n-- == 0) return range[i];
    }
    return range[0];
  };
  if (load != nullptr) {
    // Adaptive: the equal-cost path whose most-loaded link carries the least
    // (ties: ECMP's pick, then the next candidates in order), by memoised
    // recursion over the switches of the shortest paths; its links then carry
    // flow_bytes more. All paths cut: the ECMP walk below reports where.
    std::unordered_map<NodeId, std::pair<double, LinkId>> memo;
    auto least = [&](auto&& self, NodeId at, int depth) -> double {
      if (at == dst_nic) return 0.0;
      if (depth == kMaxHops) throw std::logic_error("route: no shortest path (fabric wiring bug)");
      if (auto it = memo.find(at); it != memo.end()) return it->second.first;
      LinkRange range;
      int32_t alive = 0;
      candidates_at(at, &range, &alive);
      double best = std::numeric_limits<double>::infinity();
      LinkId best_link = -1;
      if (alive > 0) {
        const LinkId start = nth_alive(range, hash_index(at, alive));
        int32_t first = 0;
        while (range[first] != start) ++first;
        for (int32_t k = 0; k < range.count; ++k) {
          const LinkId c = range[(first + k) % range.count];
          // A link already as loaded as the best path cannot lower it.
          if (is_down(down, c) || (*load)[static_cast<size_t>(c)] >= best) continue;
          const double v = std::max((*load)[static_cast<size_t>(c)], self(self, topology_.link(c).dst, depth + 1));
          if (v < best) {
            best = v;
            best_link = c;
          }
        }
      }
      memo.emplace(at, std::make_pair(best, best_link));
      return best;
    };
    if (std::isfinite(least(least, src_nic, 0))) {
      for (NodeId at = src_nic; at != dst_nic;) {
        const LinkId link = memo.at(at).second;
        (*load)[static_cast<size_t>(link)] += flow_bytes;
        out->push_back(link);
        at = topology_.link(link).dst;
      }
      return true;
    }
  }
  NodeId at = src_nic;
  for (int hop = 0; at != dst_nic; ++hop) {
    if (hop == kMaxHops) throw std::logic_error("route: no shortest path (fabric wiring bug)");
    LinkRange range;
    int32_t alive = 0;
    candidates_at(at, &range, &alive);
    if (alive == 0) return false;
    const LinkId link = nth_alive(range, hash_index(at, alive));
    out->push_back(link);
    at = topology_.link(link).dst;
  }
  return true;
}

bool Router::route_gpus(int src_gpu, int dst_gpu, uint16_t src_port, std::vector<LinkId>* out,
                        const LinkDownMask* down, LinkLoad* load, double flow_bytes) const {
  const Topology& t = topology_;
  if (src_gpu == dst_gpu) return true;
  if (t.server_of_gpu(src_gpu) == t.server_of_gpu(dst_gpu)) {
    const LinkId up = t.nvlink_up(src_gpu);
    const LinkId down_link = Topology::reverse(t.nvlink_up(dst_gpu));
    if (is_down(down, up) || is_down(down, down_link)) return false;
    out->push_back(up);
    out->push_back(down_link);
    return true;
  }
  const LinkId pcie_out = t.pcie_up(src_gpu);
  const LinkId pcie_in = Topology::reverse(t.pcie_up(dst_gpu));
  if (is_down(down, pcie_out) || is_down(down, pcie_in)) return false;
  const NodeId a = t.nic_node_of_gpu(src_gpu);
  const NodeId b = t.nic_node_of_gpu(dst_gpu);
  out->push_back(pcie_out);
  if (!route(a, b, tuple(a, b, src_port), out, down, load, flow_bytes)) return false;
  out->push_back(pcie_in);
  return true;
}

bool Router::route_connection(NodeId src_nic, NodeId dst_nic, uint16_t base_src_port,
                              double bytes, PathSet* out, const LinkDownMask* down) const {
  const int qps = config_.qps_per_connection;
  std::vector<LinkId> path;
  bool all_routed = true;
  for (int qp = 0; qp < qps; ++qp) {
    path.clear();
    const FiveTuple t = tuple(src_nic, dst_nic, qp_source_port(base_src_port, qp));
    if (!route(src_nic, dst_nic, t, &path, down)) {
      all_routed = false;
      continue;
    }
    out->add(path, bytes / qps);
  }
  return all_routed;
}

int64_t Router::count_paths(NodeId src_nic, NodeId dst_nic) const {
  std::unordered_map<NodeId, int64_t> memo;
  std::vector<LinkId> candidates;
  auto count = [&](auto&& self, NodeId at) -> int64_t {
    if (at == dst_nic) return 1;
    if (auto it = memo.find(at); it != memo.end()) return it->second;
    candidates.clear();
    candidate_links(at, dst_nic, &candidates);
    const std::vector<LinkId> here = candidates;  // the recursion reuses `candidates`
    int64_t total = 0;
    for (LinkId id : here) total += self(self, topology_.link(id).dst);
    memo.emplace(at, total);
    return total;
  };
  return count(count, src_nic);
}

size_t Router::enumerate_paths(NodeId src_nic, NodeId dst_nic, size_t max_paths,
                               PathSet* out) const {
  std::vector<LinkId> path;
  size_t added = 0;
  auto walk = [&](auto&& self, NodeId at) -> void {
    if (added >= max_paths) return;
    if (at == dst_nic) {
      out->add(path);
      ++added;
      return;
    }
    std::vector<LinkId> candidates;
    candidate_links(at, dst_nic, &candidates);
    for (LinkId id : candidates) {
      path.push_back(id);
      self(self, topology_.link(id).dst);
      path.pop_back();
      if (added >= max_paths) return;
    }
  };
  if (src_nic != dst_nic) walk(walk, src_nic);
  return added;
}

// ---------------------------------------------------------------------------
// Placement

PlacementSpread placement_spread(const Topology& topology, std::span<const int> gpus) {
  std::vector<int> tors, groups, pods;
  for (int gpu : gpus) {
    const int tor = topology.tor_of_nic(topology.nic_of_gpu(gpu));
    tors.push_back(tor);
    groups.push_back(topology.group_of_server(topology.server_of_gpu(gpu)));
    pods.push_back(topology.pod_of_tor(tor));
  }
  auto distinct = [](std::vector<int>& v) {
    std::sort(v.begin(), v.end());
    return static_cast<int>(std::unique(v.begin(), v.end()) - v.begin());
  };
  return {distinct(tors), distinct(groups), distinct(pods)};
}

std::vector<int> place_ranks(const Topology& topology, int ranks, int ranks_per_server,
                             std::span<const int> free_servers, int first_local_gpu) {
  const FabricSpec& spec = topology.spec();
  const FabricShape& shape = topology.shape();
  if (ranks < 1) throw std::invalid_argument("place_ranks: ranks must be >= 1");
  if (ranks_per_server < 1 || first_local_gpu < 0 ||
      first_local_gpu + ranks_per_server > spec.gpus_per_server) {
    throw std::invalid_argument("place_ranks: local GPUs " + std::to_string(first_local_gpu) +
                                ".." + std::to_string(first_local_gpu + ranks_per_server - 1) +
                                " do not fit a server of " +
                                std::to_string(spec.gpus_per_server) + " GPUs");
  }
  const size_t needed = static_cast<size_t>((ranks + ranks_per_server - 1) / ranks_per_server);
  std::vector<int> servers(free_servers.begin(), free_servers.end());
  std::sort(servers.begin(), servers.end());
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
  if (!servers.empty() && (servers.front() < 0 || servers.back() >= shape.servers)) {
    throw std::invalid_argument("place_ranks: free server out of range 0.." +
                                std::to_string(shape.servers - 1));
  }
  if (servers.size() < needed) {
    throw std::invalid_argument("place_ranks: " + std::to_string(ranks) + " ranks need " +
                                std::to_string(needed) + " servers, " +
                                std::to_string(servers.size()) + " free");
  }

  // Free servers by ToR set (contiguous: a group is a range of server ids), and
  // ToR sets by pod.
  struct Group {
    int id = 0;
    int pod = 0;
    std::span<const int> servers;
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < servers.size();) {
    const int id = topology.group_of_server(servers[i]);
    size_t j = i;
    while (j < servers.size() && topology.group_of_server(servers[j]) == id) ++j;
    const int pod = topology.pod_of_tor(id * shape.tors_per_group);
    groups.push_back({id, pod, std::span<const int>(servers).subspan(i, j - i)});
    i = j;
  }
  auto fuller = [](const Group* a, const Group* b) {
    return a->servers.size() != b->servers.size() ? a->servers.size() > b->servers.size()
                                                  : a->id < b->id;
  };

  std::vector<int> chosen;
  auto take = [&](const Group& g) {
    for (int s : g.servers) {
      if (chosen.size() == needed) return;
      chosen.push_back(s);
    }
  };
  // 1. The smallest single ToR set that fits.
  const Group* best = nullptr;
  for (const Group& g : groups) {
    if (g.servers.size() >= needed && (best == nullptr || g.servers.size() < best->servers.size())) {
      best = &g;
    }
  }
  if (best != nullptr) {
    take(*best);
  } else {
    // 2. The smallest pod that fits, from its fullest ToR sets; 3. else the
    // fullest pods first.
    std::vector<std::vector<const Group*>> by_pod(static_cast<size_t>(shape.pods));
    for (const Group& g : groups) by_pod[static_cast<size_t>(g.pod)].push_back(&g);
    std::vector<std::pair<size_t, int>> pods;  // (free servers, pod)
    for (int p = 0; p < shape.pods; ++p) {
      size_t total = 0;
      for (const Group* g : by_pod[static_cast<size_t>(p)]) total += g->servers.size();
      if (total > 0) pods.emplace_back(total, p);
    }
    int fit = -1;
    size_t fit_size = 0;
    for (const auto& [total, p] : pods) {
      if (total >= needed && (fit < 0 || total < fit_size)) {
        fit = p;
        fit_size = total;
      }
    }
    std::vector<int> order;
    if (fit >= 0) {
      order.push_back(fit);
    } else {
      std::sort(pods.begin(), pods.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (const auto& [total, p] : pods) order.push_back(p);
    }
    for (int p : order) {
      std::vector<const Group*>& in_pod = by_pod[static_cast<size_t>(p)];
      std::sort(in_pod.begin(), in_pod.end(), fuller);
      for (const Group* g : in_pod) take(*g);
      if (chosen.size() == needed) break;
    }
  }

  std::vector<int> gpus(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const int server = chosen[static_cast<size_t>(r / ranks_per_server)];
    gpus[static_cast<size_t>(r)] =
        server * spec.gpus_per_server + first_local_gpu + r % ranks_per_server;
  }
  return gpus;
}

}  // namespace megascale::network
