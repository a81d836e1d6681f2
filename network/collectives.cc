// network/collectives.cc: see collectives.h for the model and its sources.
#include "network/collectives.h"

#include "base/splitmix64.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <fmt/format.h>

namespace megascale::network {
namespace {

constexpr double kBitsPerByte = 8.0;

[[noreturn]] void bad_request(const std::string& reason) {
  throw std::invalid_argument("collective: " + reason);
}

// The ranks of one communicator grouped by server: servers in order of first
// appearance in rank order, each with its GPUs in rank order.
std::vector<std::vector<int>> by_server(const Topology& t, const std::vector<int>& group) {
  std::vector<std::vector<int>> servers;
  std::unordered_map<int, size_t> index;
  index.reserve(group.size());
  for (int gpu : group) {
    const int server = t.server_of_gpu(gpu);
    auto [it, fresh] = index.emplace(server, servers.size());
    if (fresh) servers.emplace_back();
    servers[it->second].push_back(gpu);
  }
  return servers;
}

size_t min_ranks_per_server(const std::vector<std::vector<int>>& servers) {
  size_t m = std::numeric_limits<size_t>::max();
  for (const auto& s : servers) m = std::min(m, s.size());
  return m;
}

size_t max_ranks_per_server(const std::vector<std::vector<int>>& servers) {
  size_t m = 0;
  for (const auto& s : servers) m = std::max(m, s.size());
  return m;
}

uint64_t mix64(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return h;
}

uint64_t hash_flows(std::span<const StepFlow> flows) {
  uint64_t h = flows.size();
  for (const StepFlow& f : flows) {
    h = mix64(h, (static_cast<uint64_t>(static_cast<uint32_t>(f.src_gpu)) << 32) |
                     static_cast<uint32_t>(f.dst_gpu));
    h = mix64(h, static_cast<uint32_t>(f.connection));
    h = mix64(h, std::bit_cast<uint64_t>(f.bytes));
  }
  return h;
}

std::string node_name(const Topology& t, NodeId node) {
  return std::string(to_string(t.kind(node))) + " " + std::to_string(t.index_in_kind(node));
}

}  // namespace

// ---------------------------------------------------------------------------
// Names and conventions

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather: return "allgather";
    case CollectiveOp::kReduceScatter: return "reducescatter";
    case CollectiveOp::kAllReduce: return "allreduce";
    case CollectiveOp::kSendRecv: return "sendrecv";
  }
  return "?";
}

const char* to_string(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::kRing: return "ring";
    case CollectiveAlgorithm::kTree: return "tree";
    case CollectiveAlgorithm::kHierarchical: return "hierarchical";
    case CollectiveAlgorithm::kNvls: return "nvls";
    case CollectiveAlgorithm::kNvlsTree: return "nvls-tree";
  }
  return "?";
}

std::optional<CollectiveOp> parse_collective_op(std::string_view name) {
  std::string s;
  for (char c : name) {
    if (c != '-' && c != '_') s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (s == "allgather") return CollectiveOp::kAllGather;
  if (s == "reducescatter") return CollectiveOp::kReduceScatter;
  if (s == "allreduce") return CollectiveOp::kAllReduce;
  if (s == "sendrecv") return CollectiveOp::kSendRecv;
  return std::nullopt;
}

std::optional<CollectiveAlgorithm> parse_collective_algorithm(std::string_view name) {
  if (name == "ring") return CollectiveAlgorithm::kRing;
  if (name == "tree") return CollectiveAlgorithm::kTree;
  if (name == "hierarchical") return CollectiveAlgorithm::kHierarchical;
  if (name == "nvls") return CollectiveAlgorithm::kNvls;
  if (name == "nvls-tree" || name == "nvlstree" || name == "nvls_tree") return CollectiveAlgorithm::kNvlsTree;
  return std::nullopt;
}

std::optional<CollectiveAlgorithm> algorithm_choice(std::string_view name) {
  if (name == "auto") return std::nullopt;
  if (const auto a = parse_collective_algorithm(name)) return a;
  throw std::invalid_argument("must be auto, ring, tree, nvls, nvls-tree or hierarchical, got '" + std::string(name) +
                              "'");
}

double busbw_factor(CollectiveOp op, int ranks) {
  if (ranks < 1) throw std::invalid_argument("busbw_factor: ranks must be >= 1");
  const double n = ranks;
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (n - 1.0) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter: return (n - 1.0) / n;
    case CollectiveOp::kSendRecv: return 1.0;
  }
  return 1.0;
}

// ---------------------------------------------------------------------------
// Layouts and step patterns

std::vector<std::vector<int>> strided_groups(int gpus_per_server, int groups, int ranks,
                                             int ranks_per_server) {
  if (gpus_per_server < 1 || groups < 1 || ranks < 1 || ranks_per_server < 1) {
    throw std::invalid_argument("strided_groups: sizes must be positive");
  }
  if (gpus_per_server % ranks_per_server != 0) {
    throw std::invalid_argument("strided_groups: ranks_per_server (" + std::to_string(ranks_per_server) +
                                ") must divide gpus_per_server (" + std::to_string(gpus_per_server) + ")");
  }
  if (ranks % ranks_per_server != 0) {
    throw std::invalid_argument("strided_groups: ranks_per_server (" + std::to_string(ranks_per_server) +
                                ") must divide the ranks (" + std::to_string(ranks) + ")");
  }
  const int slots = gpus_per_server / ranks_per_server;
  const int servers_per_group = ranks / ranks_per_server;
  std::vector<std::vector<int>> out(static_cast<size_t>(groups));
  for (int g = 0; g < groups; ++g) {
    std::vector<int>& group = out[static_cast<size_t>(g)];
    group.reserve(static_cast<size_t>(ranks));
    const int64_t first_server = static_cast<int64_t>(g / slots) * servers_per_group;
    const int first_local = (g % slots) * ranks_per_server;
    for (int r = 0; r < ranks; ++r) {
      const int64_t server = first_server + r / ranks_per_server;
      const int64_t gpu = server * gpus_per_server + first_local + r % ranks_per_server;
      if (gpu > std::numeric_limits<int>::max()) throw std::invalid_argument("strided_groups: too many GPUs");
      group.push_back(static_cast<int>(gpu));
    }
  }
  return out;
}

int64_t strided_groups_gpus(int gpus_per_server, int groups, int ranks, int ranks_per_server) {
  if (gpus_per_server < 1 || groups < 1 || ranks < 1 || ranks_per_server < 1 ||
      gpus_per_server % ranks_per_server != 0 || ranks % ranks_per_server != 0) {
    throw std::invalid_argument("strided_groups_gpus: inconsistent sizes");
  }
  const int64_t slots = gpus_per_server / ranks_per_server;
  const int64_t slices = (groups + slots - 1) / slots;
  return slices * (ranks / ranks_per_server) * gpus_per_server;
}

void scatter_servers(std::vector<std::vector<int>>* groups, int gpus_per_server, int servers, uint64_t seed) {
  if (gpus_per_server < 1 || servers < 1) throw std::invalid_argument("scatter_servers: sizes must be positive");
  std::vector<int> perm(static_cast<size_t>(servers));
  for (int i = 0; i < servers; ++i) perm[static_cast<size_t>(i)] = i;
  base::SplitMix64 rng(seed);
  for (int i = servers - 1; i > 0; --i) {
    const auto j = static_cast<size_t>(rng.next() % static_cast<uint64_t>(i + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[j]);
  }
  for (std::vector<int>& group : *groups) {
    for (int& gpu : group) {
      const int server = gpu / gpus_per_server;
      if (gpu < 0 || server >= servers) {
        throw std::invalid_argument("scatter_servers: GPU " + std::to_string(gpu) + " is not on one of the " +
                                    std::to_string(servers) + " servers");
      }
      gpu = perm[static_cast<size_t>(server)] * gpus_per_server + gpu % gpus_per_server;
    }
  }
}

void ring_step_flows(const Topology& topology, std::span<const std::vector<int>> groups,
                     double chunk_bytes, std::vector<StepFlow>* out) {
  for (const std::vector<int>& group : groups) {
    const std::vector<std::vector<int>> servers = by_server(topology, group);
    const size_t k = servers.size();
    // NVLink: each server's local ranks in a cycle (with several servers, the
    // channels' chains and their PXN hop to the exit GPU, aggregated).
    for (const std::vector<int>& local : servers) {
      const size_t m = local.size();
      if (m < 2) continue;
      for (size_t j = 0; j < m; ++j) out->push_back({local[j], local[(j + 1) % m], 0, chunk_bytes});
    }
    if (k < 2) continue;
    // Network: channel c from local rank c of each server to that of the next.
    const size_t channels = min_ranks_per_server(servers);
    const double per_channel = chunk_bytes / static_cast<double>(channels);
    for (size_t c = 0; c < channels; ++c) {
      for (size_t s = 0; s < k; ++s) {
        out->push_back({servers[s][c], servers[(s + 1) % k][c], static_cast<int32_t>(c), per_channel});
      }
    }
  }
}

int btree_parent(int rank, int ranks) {
  if (rank <= 0 || rank >= ranks) return -1;
  int bit = 1;
  for (; bit < ranks; bit <<= 1) {
    if (bit & rank) break;
  }
  int up = (rank ^ bit) | (bit << 1);
  if (up >= ranks) up = rank ^ bit;
  return up;
}

int dtree_parent(int tree, int rank, int ranks) {
  if (tree == 0) return btree_parent(rank, ranks);
  if (ranks % 2 == 1) {  // shift by one
    const int u = btree_parent((rank - 1 + ranks) % ranks, ranks);
    return u == -1 ? -1 : (u + 1) % ranks;
  }
  const int u = btree_parent(ranks - 1 - rank, ranks);  // mirror
  return u == -1 ? -1 : ranks - 1 - u;
}

int tree_step_flows(const Topology& topology, std::span<const std::vector<int>> groups, double bytes,
                    std::vector<StepFlow>* out, bool chain) {
  int max_depth = 0;
  for (const std::vector<int>& group : groups) {
    const std::vector<std::vector<int>> servers = by_server(topology, group);
    const int k = static_cast<int>(servers.size());
    const size_t channels = min_ranks_per_server(servers);
    // The chain through each server's ranks: S each way per edge (both trees),
    // up (reduce) and down (broadcast). In one node every channel runs the same
    // chain (NCCL 2.19.3 / 2.30.7 src/graph/search.cc ncclTopoSearchRec without
    // a NET replays the previous channel's GPU order). Across nodes each channel's
    // search starts from its own NIC's GPU and takes the next GPU on an
    // NVSwitch (search.cc ncclTopoSearchRecNet, ncclTopoSearchNextGpuSort
    // "NVSwitches prefer ... neighbors"), and the chain's head is the rank that
    // talks to the network (connect.cc ncclTopoPreset: treeToParent =
    // treeIntra[0]): channel c's chain starts at local rank c (the one whose
    // flows cross the network below) and wraps round the server, so the chain's
    // ends, which send only one way, rotate over the GPUs. Per channel S /
    // channels each way per edge; summed per directed pair.
    for (const std::vector<int>& local : servers) {
      const size_t m = local.size();
      if (!chain || m < 2) continue;
      if (k < 2 || channels < 2) {
        for (size_t j = 0; j + 1 < m; ++j) {
          out->push_back({local[j], local[j + 1], 0, bytes});
          out->push_back({local[j + 1], local[j], 0, bytes});
        }
        continue;
      }
      // Cyclic edge i -> i+1 (mod m) is in every channel's chain except those
      // starting at i+1 (the wrap); likewise its reverse.
      std::vector<double> edge(m, 0.0);
      const double per_channel = bytes / static_cast<double>(channels);
      for (size_t c = 0; c < channels; ++c) {
        const size_t head = c % m;
        for (size_t j = 0; j + 1 < m; ++j) edge[(head + j) % m] += per_channel;
      }
      for (size_t i = 0; i < m; ++i) {
        if (!(edge[i] > 0)) continue;
        out->push_back({local[i], local[(i + 1) % m], 0, edge[i]});
        out->push_back({local[(i + 1) % m], local[i], 0, edge[i]});
      }
    }
    if (k < 2) continue;
    const double per_flow = bytes / 2.0 / static_cast<double>(channels);
    for (int tree = 0; tree < 2; ++tree) {
      std::vector<int> depth(static_cast<size_t>(k), -1);
      for (int r = 0; r < k; ++r) {
        const int parent = dtree_parent(tree, r, k);
        if (parent < 0) continue;
        for (size_t c = 0; c < channels; ++c) {
          const auto conn = static_cast<int32_t>(2 * c + static_cast<size_t>(tree));
          out->push_back({servers[static_cast<size_t>(r)][c], servers[static_cast<size_t>(parent)][c], conn, per_flow});
          out->push_back({servers[static_cast<size_t>(parent)][c], servers[static_cast<size_t>(r)][c], conn, per_flow});
        }
      }
      // Depth of each node: follow parents (at most log2(k) + 1 steps each).
      for (int r = 0; r < k; ++r) {
        int d = 0;
        for (int x = r; dtree_parent(tree, x, k) >= 0 && d <= k; x = dtree_parent(tree, x, k)) ++d;
        max_depth = std::max(max_depth, d);
      }
    }
  }
  return max_depth;
}

// ---------------------------------------------------------------------------
// The simulator

struct CollectiveSimulator::Memo {
  struct Entry {
    std::vector<StepFlow> flows;
    StepOutcome outcome;
  };
  std::unordered_map<uint64_t, std::vector<Entry>> steps;
  size_t entries = 0;
  struct CcLite {
    double fraction = 1, added_latency_us = 0, pause_fraction = 0;
  };
  std::map<CongestionInput, CcLite> cc;
};

CollectiveSimulator::CollectiveSimulator(const Topology& topology, const Router& router,
                                         CollectiveOptions options)
    : topology_(topology), router_(router), options_(options), memo_(std::make_unique<Memo>()) {
  if (&router.topology() != &topology) {
    throw std::invalid_argument("CollectiveSimulator: the router belongs to another topology");
  }
  if (!(options_.nvlink_busbw_gbs > 0) || !(options_.nic_busbw_gbs > 0) ||
      !std::isfinite(options_.nvlink_busbw_gbs) || !std::isfinite(options_.nic_busbw_gbs)) {
    throw std::invalid_argument("CollectiveSimulator: nvlink_busbw_gbs and nic_busbw_gbs must be positive");
  }
  capacity_gbps_ = topology.link_capacity_gbps();
  const double nic_gbps = options_.nic_busbw_gbs * kBitsPerByte;
  for (int l = 0; l < topology.num_links(); ++l) {
    if (topology.link(l).kind == LinkKind::kNicTor) {
      capacity_gbps_[static_cast<size_t>(l)] = std::min(capacity_gbps_[static_cast<size_t>(l)], nic_gbps);
    }
  }
}

CollectiveSimulator::~CollectiveSimulator() = default;

void CollectiveSimulator::clear_cache() {
  memo_->steps.clear();
  memo_->entries = 0;
  memo_->cc.clear();
  solver_.clear_cache();
}

size_t CollectiveSimulator::cache_entries() const { return memo_->entries; }

void CollectiveSimulator::subflows(std::span<const StepFlow> flows, std::span<const double> start_s, FlowSet* out,
                                   std::vector<uint32_t>* transfer_of, std::vector<uint8_t>* network) const {
  if (!start_s.empty() && start_s.size() != flows.size()) bad_request("one start time per transfer, or none");
  auto start_of = [&](size_t k) { return start_s.empty() ? 0.0 : start_s[k]; };
  const Topology& t = topology_;
  const int gpus = t.spec().gpus;
  const int qps = router_.config().qps_per_connection;

  // NVLink flows each GPU sends: they share its busbw.
  std::vector<int32_t> nvlink_out(static_cast<size_t>(gpus), 0);
  for (const StepFlow& f : flows) {
    if (f.src_gpu < 0 || f.src_gpu >= gpus || f.dst_gpu < 0 || f.dst_gpu >= gpus) {
      bad_request("GPU " + std::to_string(f.src_gpu < 0 || f.src_gpu >= gpus ? f.src_gpu : f.dst_gpu) +
                  " is outside the fabric's " + std::to_string(gpus) + " GPUs");
    }
    if (f.src_gpu == f.dst_gpu) bad_request("a flow from GPU " + std::to_string(f.src_gpu) + " to itself");
    if (!(f.bytes >= 0) || !std::isfinite(f.bytes)) bad_request("flow bytes must be finite and >= 0");
    if (t.server_of_gpu(f.src_gpu) == t.server_of_gpu(f.dst_gpu)) ++nvlink_out[static_cast<size_t>(f.src_gpu)];
  }

  out->clear();
  out->reserve(flows.size() * static_cast<size_t>(qps), flows.size() * static_cast<size_t>(qps) * 10);
  transfer_of->clear();
  network->clear();
  transfer_of->reserve(flows.size() * static_cast<size_t>(qps));
  network->reserve(flows.size() * static_cast<size_t>(qps));
  std::vector<LinkId> path;
  // Adaptive routing balances this step's flows over the equal-cost links
  // (routing.h); ECMP hashes each on its own.
  LinkLoad load;
  if (router_.config().routing == RoutingMode::kAdaptive) load.assign(static_cast<size_t>(t.num_links()), 0.0);
  LinkLoad* const step_load = load.empty() ? nullptr : &load;
  const double nvlink_gbps = options_.nvlink_busbw_gbs * kBitsPerByte;
  const double nic_gbps = options_.nic_busbw_gbs * kBitsPerByte;
  for (const StepFlow& f : flows) {
    if (t.server_of_gpu(f.src_gpu) == t.server_of_gpu(f.dst_gpu)) {
      path.clear();
      router_.route_gpus(f.src_gpu, f.dst_gpu, kRoceSourcePortMin, &path);
      const size_t k = static_cast<size_t>(&f - flows.data());
      out->add(path, f.bytes, nvlink_gbps / nvlink_out[static_cast<size_t>(f.src_gpu)], start_of(k));
      network->push_back(0);
      transfer_of->push_back(static_cast<uint32_t>(k));
      continue;
    }
    const NodeId a = t.nic_node_of_gpu(f.src_gpu);
    const NodeId b = t.nic_node_of_gpu(f.dst_gpu);
    const uint16_t base = router_.connection_base_port(a, b, static_cast<uint32_t>(f.connection));
    for (int q = 0; q < qps; ++q) {
      path.clear();
      if (!router_.route_gpus(f.src_gpu, f.dst_gpu, Router::qp_source_port(base, q), &path, nullptr, step_load,
                              f.bytes / qps)) {
        throw std::logic_error("collective: no route from GPU " + std::to_string(f.src_gpu) + " to GPU " +
                               std::to_string(f.dst_gpu));
      }
      const size_t k = static_cast<size_t>(&f - flows.data());
      out->add(path, f.bytes / qps, nic_gbps / qps, start_of(k));
      network->push_back(1);
      transfer_of->push_back(static_cast<uint32_t>(k));
    }
  }
}

StepOutcome CollectiveSimulator::solve_step(std::span<const StepFlow> flows, bool* memo_hit) {
  const uint64_t key = hash_flows(flows);
  if (auto it = memo_->steps.find(key); it != memo_->steps.end()) {
    for (const Memo::Entry& e : it->second) {
      if (std::equal(e.flows.begin(), e.flows.end(), flows.begin(), flows.end())) {
        if (memo_hit) *memo_hit = true;
        StepOutcome o = e.outcome;
        o.solver = {};
        return o;
      }
    }
  }
  if (memo_hit) *memo_hit = false;

  const Topology& t = topology_;
  FlowSet fs;
  std::vector<uint8_t> network;       // per sub-flow
  std::vector<uint32_t> transfer_of;  // per sub-flow: index of its StepFlow
  subflows(flows, {}, &fs, &transfer_of, &network);
  const int qps = router_.config().qps_per_connection;
  const double nvlink_gbps = options_.nvlink_busbw_gbs * kBitsPerByte;

  const RateSolution sol = solver_.solve_rates(capacity_gbps_, fs);

  // Sub-flows crossing each link (the N of congestion_effect).
  std::vector<int32_t> crossing(capacity_gbps_.size(), 0);
  for (size_t i = 0; i < fs.size(); ++i) {
    for (LinkId l : fs.path(i)) ++crossing[static_cast<size_t>(l)];
  }

  StepOutcome o;
  o.transfers = flows.size();
  o.transfer_bandwidth_s.assign(flows.size(), 0.0);
  o.subflows = fs.size();
  o.solver = sol.stats;
  o.cc.algorithm = options_.congestion_control;
  double added_sum_us = 0;
  size_t critical = fs.size();
  double critical_rate = 0;
  Memo::CcLite critical_cc;
  bool critical_cc_applied = false;
  int critical_senders = 0;
  for (size_t i = 0; i < fs.size(); ++i) {
    const std::span<const LinkId> p = fs.path(i);
    const double latency_us = t.path_latency_us(p);
    const double bytes = fs.bytes(i);
    const double rate = sol.rate_gbps[i];
    const LinkId b = sol.bottleneck_link[i];
    Memo::CcLite cc;
    bool applied = false;
    int senders = 0;
    if (options_.congestion_effect && b >= 0 && bytes > 0 && crossing[static_cast<size_t>(b)] >= 2 &&
        t.is_fabric_switch(t.link(b).src)) {
      CongestionInput in;
      in.senders_per_bottleneck = crossing[static_cast<size_t>(b)];
      in.flow_bytes = bytes;
      in.link_capacity_gbps = t.link(b).capacity_gbps;
      in.base_rtt_us = std::max(1.0, std::round(2.0 * latency_us));
      in.controller = options_.congestion_control;
      in.pfc = options_.pfc;
      auto it = memo_->cc.find(in);
      if (it == memo_->cc.end()) {
        const CongestionEffect e = congestion_effect(in);
        it = memo_->cc.emplace(in, Memo::CcLite{e.achieved_bandwidth_fraction, e.added_latency_us,
                                                e.pfc_pause_fraction}).first;
      }
      cc = it->second;
      applied = true;
      senders = in.senders_per_bottleneck;
      ++o.cc_limited_subflows;
    }
    if (network[i]) {
      ++o.network_subflows;
      o.network_path_latency_us = std::max(o.network_path_latency_us, latency_us);
      added_sum_us += cc.added_latency_us;
    } else {
      o.nvlink_path_latency_us = std::max(o.nvlink_path_latency_us, latency_us);
    }
    double time_s = 0;
    if (bytes > 0) {
      const double effective_gbps = rate * std::max(cc.fraction, 1e-9);
      time_s = effective_gbps > 0 ? bytes * kBitsPerByte / (effective_gbps * 1e9)
                                  : std::numeric_limits<double>::infinity();
    }
    double& transfer_s = o.transfer_bandwidth_s[transfer_of[i]];
    transfer_s = std::max(transfer_s, time_s);
    if (critical == fs.size() || time_s > o.bandwidth_s) {
      o.bandwidth_s = time_s;
      critical = i;
      critical_rate = rate;
      critical_cc = cc;
      critical_cc_applied = applied;
      critical_senders = senders;
    }
  }
  if (o.network_subflows > 0) o.mean_added_latency_us = added_sum_us / static_cast<double>(o.network_subflows);

  if (critical < fs.size()) {
    Bottleneck& bn = o.bottleneck;
    const LinkId b = sol.bottleneck_link[critical];
    bn.rate_gbps = critical_rate;
    const bool net = network[critical] != 0;
    if (b >= 0) {
      const Link& link = t.link(b);
      bn.kind = to_string(link.kind);
      bn.link = b;
      bn.up = link.up;
      bn.flows = crossing[static_cast<size_t>(b)];
      bn.capacity_gbps = capacity_gbps_[static_cast<size_t>(b)];
      bn.description = bn.kind + " link " + (link.up ? "up" : "down") + " (" + node_name(t, link.src) + " -> " +
                       node_name(t, link.dst) + "), " +
                       fmt::format("{:.0f} Gb/s shared by {} sub-flows, slowest at {:.1f} Gb/s", bn.capacity_gbps,
                              bn.flows, critical_rate);
      if (link.kind == LinkKind::kNicTor) bn.description += " (NIC line rate x NCCL efficiency)";
    } else if (b == kLimitedByRateCap) {
      bn.kind = net ? "nic-cap" : "nvlink-cap";
      bn.flows = 1;
      bn.capacity_gbps = fs.rate_cap_gbps(critical);
      bn.description = net ? fmt::format("per-flow cap: NIC NCCL busbw {:.1f} GB/s over {} QP(s) = {:.1f} Gb/s each",
                                    options_.nic_busbw_gbs, qps, bn.capacity_gbps)
                           : fmt::format("per-flow cap: NVLink NCCL busbw {:.0f} GB/s per GPU over {:.0f} flow(s) = {:.0f} Gb/s",
                                    options_.nvlink_busbw_gbs,
                                    nvlink_gbps / std::max(bn.capacity_gbps, 1e-12), bn.capacity_gbps);
    } else {
      bn.kind = "none";
      bn.description = "no limit (empty path)";
    }
    o.cc.applied = critical_cc_applied;
    o.cc.senders = critical_senders;
    o.cc.achieved_bandwidth_fraction = critical_cc.fraction;
    o.cc.added_latency_us = critical_cc.added_latency_us;
    o.cc.pfc_pause_fraction = critical_cc.pause_fraction;
  }

  if (memo_->entries >= options_.max_step_memo_entries) {
    memo_->steps.clear();
    memo_->entries = 0;
  }
  memo_->steps[key].push_back({std::vector<StepFlow>(flows.begin(), flows.end()), o});
  ++memo_->entries;
  return o;
}

namespace {

struct RingShape {
  int network_hops = 0;  // per traversal: k - 1
  int nvlink_hops = 0;   // per traversal: n - k
};

RingShape ring_shape(const Topology& t, std::span<const std::vector<int>> groups) {
  RingShape r;
  for (const std::vector<int>& g : groups) {
    const int n = static_cast<int>(g.size());
    const int k = static_cast<int>(by_server(t, g).size());
    r.network_hops = std::max(r.network_hops, k - 1);
    r.nvlink_hops = std::max(r.nvlink_hops, n - k);
  }
  return r;
}

}  // namespace

CollectiveResult CollectiveSimulator::run(const CollectiveRequest& request) {
  const Topology& t = topology_;
  if (request.groups.empty()) bad_request("no groups");
  const size_t n = request.groups.front().size();
  if (n < 2) bad_request("a communicator needs at least 2 ranks, got " + std::to_string(n));
  if (!(request.bytes >= 0) || !std::isfinite(request.bytes)) bad_request("bytes must be finite and >= 0");
  const int gpus = t.spec().gpus;
  std::vector<uint8_t> seen(static_cast<size_t>(gpus), 0);
  for (size_t g = 0; g < request.groups.size(); ++g) {
    const std::vector<int>& group = request.groups[g];
    if (group.size() != n) {
      bad_request("groups differ in size (" + std::to_string(n) + " and " + std::to_string(group.size()) + ")");
    }
    for (int gpu : group) {
      if (gpu < 0 || gpu >= gpus) {
        bad_request("GPU " + std::to_string(gpu) + " is outside the fabric's " + std::to_string(gpus) + " GPUs");
      }
      if (seen[static_cast<size_t>(gpu)]++) bad_request("GPU " + std::to_string(gpu) + " appears twice");
    }
  }

  CollectiveResult r;
  r.op = request.op;
  r.algorithm = request.algorithm;
  r.bytes = request.bytes;
  r.ranks = static_cast<int>(n);
  r.groups = static_cast<int>(request.groups.size());
  {
    const auto servers = by_server(t, request.groups.front());
    r.servers_per_group = static_cast<int>(servers.size());
    r.ranks_per_server = static_cast<int>(max_ranks_per_server(servers));
  }
  const double S = request.bytes;
  const double dn = static_cast<double>(n);
  std::vector<StepFlow> flows;

  const NcclSystem& nccl = options_.nccl;
  const NcclProtocol proto = request.protocol;
  {
    std::string why;
    const int nodes = r.servers_per_group;
    const bool nccl_algo = request.algorithm != CollectiveAlgorithm::kHierarchical;
    if ((nccl_algo || proto != NcclProtocol::kSimple) &&
        !nccl_algorithm_enabled(nccl_algo ? request.algorithm : CollectiveAlgorithm::kRing, proto, request.op, nodes,
                                r.ranks_per_server, nccl, &why)) {
      if (request.op == CollectiveOp::kSendRecv && request.algorithm != CollectiveAlgorithm::kRing &&
          proto != NcclProtocol::kLL128) {
        // send/recv ignores the algorithm (as before): any name times the same p2p.
      } else {
        bad_request(std::string(to_string(request.algorithm)) + " with protocol " + to_string(proto) + " for " +
                    to_string(request.op) + ": " + why);
      }
    }
  }
  // The bandwidth time of `proto` for a phase whose Simple bandwidth time is
  // `simple_s` moving `phase_bytes` (nccl-tests size) over `phase_ranks` ranks on
  // `phase_nodes` nodes on `channels` NCCL channels: NCCL's protocol ratio and
  // caps (nccl_tuner.h) applied to the channels' share of the Simple bus
  // bandwidth the flow model found on all of them.
  auto protocol_s = [&](CollectiveAlgorithm algo, CollectiveOp phase_op, double simple_s, double phase_bytes,
                        int phase_ranks, int phase_nodes, int channels) {
    if (!(simple_s > 0)) return simple_s;
    const double factor = busbw_factor(phase_op, phase_ranks);
    const double simple_busbw = phase_bytes * factor / simple_s / 1e9;
    double busbw = nccl_channels_busbw_gbs(algo, proto, phase_op, phase_nodes, simple_busbw, channels, nccl);
    if (algo == CollectiveAlgorithm::kTree) busbw *= nccl_tree_efficiency(proto, phase_bytes);
    return busbw > 0 ? phase_bytes * factor / busbw / 1e9 : simple_s;
  };

  // bandwidth_s_of(simple_s, channels): the phase's bandwidth time on `channels`
  // channels, from its Simple bandwidth time on all of them.
  auto add_phase = [&](std::string name, int steps, const std::vector<StepFlow>& step_flows, int channels,
                       auto latency_us_of, auto bandwidth_s_of) {
    CollectivePhase ph;
    ph.name = std::move(name);
    ph.steps = steps;
    ph.step = solve_step(step_flows, &ph.memo_hit);
    ph.channels = channels;
    ph.bandwidth_s = bandwidth_s_of(steps * ph.step.bandwidth_s, channels);
    ph.all_channels_bandwidth_s = channels > 0 && channels < nccl.channels
                                      ? bandwidth_s_of(steps * ph.step.bandwidth_s, nccl.channels)
                                      : ph.bandwidth_s;
    ph.latency_s = latency_us_of(ph.step) * 1e-6;
    (ph.memo_hit ? r.step_memo_hits : r.step_solves) += 1;
    r.phases.push_back(std::move(ph));
  };
  // A ring phase over `subgroups`, each rank moving `chunk` per step. Latency:
  // NCCL's ring latency for the phase's ranks and nodes, plus per hop the
  // fabric's path latency (and, on network hops, the congestion-control queueing).
  auto ring_phase = [&](std::string name, CollectiveOp phase_op, std::span<const std::vector<int>> subgroups,
                        double chunk, int steps, int traversals) {
    flows.clear();
    ring_step_flows(t, subgroups, chunk, &flows);
    const RingShape shape = ring_shape(t, subgroups);
    const int phase_ranks = static_cast<int>(subgroups.front().size());
    const int phase_nodes = shape.network_hops + 1;
    const double phase_bytes = chunk * phase_ranks;
    // NCCL's nBytes of this (sub)communicator's call: the phase's nccl-tests size.
    const int channels = nccl_collective_channels(CollectiveAlgorithm::kRing, proto, phase_op, phase_ranks,
                                                  phase_bytes, nccl);
    add_phase(
        std::move(name), steps, flows, channels,
        [&](const StepOutcome& s) {
          return nccl_latency_us(CollectiveAlgorithm::kRing, proto, phase_op, phase_ranks, phase_nodes, phase_bytes,
                                 nccl) +
                 nccl_network_post_us(CollectiveAlgorithm::kRing, proto, phase_op, phase_ranks, phase_nodes,
                                      phase_bytes, nccl) +
                 traversals * (shape.network_hops * (s.network_path_latency_us + s.mean_added_latency_us) +
                               shape.nvlink_hops * s.nvlink_path_latency_us);
        },
        [&](double simple_s, int on_channels) {
          return protocol_s(CollectiveAlgorithm::kRing, phase_op, simple_s, phase_bytes, phase_ranks, phase_nodes,
                            on_channels);
        });
  };
  const char* op_name = request.op == CollectiveOp::kAllGather       ? "all-gather"
                        : request.op == CollectiveOp::kReduceScatter ? "reduce-scatter"
                                                                     : "all-reduce";
  const int ring_steps = static_cast<int>(n) - 1;
  const int nodes = r.servers_per_group;
  // NVLS inside one node: the switch reduces; all-reduce busbw is the profile's
  // NVLS figure, all-gather / reduce-scatter move (n-1)/n of it per GPU and
  // NCCL's model gives them busbw = all-reduce busbw x (n-1) / (2n)
  // (tuning.cc: intraBw x 2 for all-reduce, x (ppn-1)/ppn otherwise).
  auto nvls_s = [&](double bytes, int ranks) {
    const double rn = static_cast<double>(ranks);
    const double busbw = request.op == CollectiveOp::kAllReduce ? nccl.nvls_busbw_gbs
                                                                : nccl.nvls_busbw_gbs * (rn - 1.0) / (2.0 * rn);
    return bytes * busbw_factor(request.op, ranks) / busbw / 1e9;
  };

  if (request.op == CollectiveOp::kSendRecv) {
    flows.clear();
    for (const std::vector<int>& g : request.groups) {
      for (size_t i = 0; i < n; ++i) flows.push_back({g[i], g[(i + 1) % n], 0, S});
    }
    const NcclProtocol p2p = proto == NcclProtocol::kLL ? proto : NcclProtocol::kSimple;
    add_phase(
        "sendrecv", 1, flows, 0,
        [&](const StepOutcome& s) {
          const double path = s.network_subflows > 0 ? s.network_path_latency_us + s.mean_added_latency_us
                                                     : s.nvlink_path_latency_us;
          const int hop_nodes = s.network_subflows > 0 ? 2 : 1;
          return nccl_latency_us(CollectiveAlgorithm::kRing, p2p, CollectiveOp::kSendRecv, 2, hop_nodes, S, nccl) +
                 nccl_network_post_us(CollectiveAlgorithm::kRing, p2p, CollectiveOp::kSendRecv, 2, hop_nodes, S, nccl) +
                 path;
        },
        [&](double simple_s, int /*channels: p2p has its own (nccl_p2p_channels)*/) {
          const double t = p2p == NcclProtocol::kLL ? 2.0 * simple_s : simple_s;
          if (r.servers_per_group > 1 || p2p != NcclProtocol::kSimple) return t;
          // One NVLink node: NCCL splits each send over nccl_p2p_channels
          // channels, each at most one NVLink's bandwidth (nccl_tuner.h).
          const double channels_gbs =
              nccl_p2p_channels(S, static_cast<int>(n), nccl) * nccl_p2p_channel_nvlink_gbs(nccl);
          return std::max(t, S / (channels_gbs * 1e9));
        });
    // Reported: the p2p channels the one-node Simple bandwidth is bound by;
    // across nodes (or LL) no channel count is modelled.
    if (r.servers_per_group == 1 && p2p == NcclProtocol::kSimple) {
      r.phases.back().channels = nccl_p2p_channels(S, static_cast<int>(n), nccl);
    }
  } else if (request.algorithm == CollectiveAlgorithm::kRing) {
    const bool ar = request.op == CollectiveOp::kAllReduce;
    ring_phase(std::string("ring ") + op_name, request.op, request.groups, S / dn, ar ? 2 * ring_steps : ring_steps,
               ar ? 2 : 1);
  } else if (request.algorithm == CollectiveAlgorithm::kTree ||
             request.algorithm == CollectiveAlgorithm::kNvlsTree) {
    if (request.op != CollectiveOp::kAllReduce) {
      bad_request(std::string("the tree algorithms are all-reduce only (as in NCCL), not ") + to_string(request.op));
    }
    const bool nvls_tree = request.algorithm == CollectiveAlgorithm::kNvlsTree;
    flows.clear();
    const int depth = tree_step_flows(t, request.groups, S, &flows, !nvls_tree);
    const int chain_hops = r.ranks_per_server - 1;
    add_phase(
        nvls_tree ? "NVLS tree all-reduce (NVSwitch in the node, double binary tree across)"
                  : "double binary tree all-reduce (pipelined)",
        1, flows,
        nvls_tree ? 0 : nccl_collective_channels(request.algorithm, proto, request.op, static_cast<int>(n), S, nccl),
        [&](const StepOutcome& s) {
          return nccl_latency_us(request.algorithm, proto, request.op, static_cast<int>(n), nodes, S, nccl) +
                 nccl_network_post_us(request.algorithm, proto, request.op, static_cast<int>(n), nodes, S, nccl) +
                 2.0 * ((nvls_tree ? 0 : chain_hops) * s.nvlink_path_latency_us +
                        depth * (s.network_path_latency_us + s.mean_added_latency_us)) +
                 (nvls_tree ? s.nvlink_path_latency_us : 0.0);
        },
        [&](double simple_s, int on_channels) {
          if (!nvls_tree) {
            return protocol_s(CollectiveAlgorithm::kTree, request.op, simple_s, S, static_cast<int>(n), nodes,
                              on_channels);
          }
          // The node's NVLS reduction and the network tree run pipelined: the slower one.
          return std::max(simple_s, nvls_s(S, r.ranks_per_server));
        });
  } else if (request.algorithm == CollectiveAlgorithm::kNvls) {
    CollectivePhase ph;
    ph.name = std::string("NVLS ") + op_name + " (NVSwitch multicast / in-switch reduction)";
    ph.steps = 1;
    ph.bandwidth_s = nvls_s(S, static_cast<int>(n));
    ph.channels = 0;  // NCCL's NVLS channels: not modelled (the profile's NVLS bandwidth)
    ph.all_channels_bandwidth_s = ph.bandwidth_s;
    ph.latency_s = nccl_latency_us(request.algorithm, proto, request.op, static_cast<int>(n), 1, S, nccl) * 1e-6;
    ph.step.bandwidth_s = ph.bandwidth_s;
    ph.step.bottleneck.kind = "nvls";
    ph.step.bottleneck.description = "NVSwitch NVLS bandwidth of the GPU profile";
    r.phases.push_back(std::move(ph));
  } else {  // hierarchical
    std::vector<std::vector<int>> intra, inter;
    size_t m = 0;
    for (const std::vector<int>& g : request.groups) {
      const std::vector<std::vector<int>> servers = by_server(t, g);
      m = servers.front().size();
      for (const auto& s : servers) {
        if (s.size() != m) {
          bad_request("hierarchical needs the same number of ranks on every server of a group (" +
                      std::to_string(m) + " and " + std::to_string(s.size()) + ")");
        }
      }
      if (m > 1) intra.insert(intra.end(), servers.begin(), servers.end());
      if (servers.size() > 1) {
        for (size_t j = 0; j < m; ++j) {
          std::vector<int> rail;
          for (const auto& s : servers) rail.push_back(s[j]);
          inter.push_back(std::move(rail));
        }
      }
    }
    const double dm = static_cast<double>(m);
    const int intra_steps = static_cast<int>(m) - 1;
    const int inter_steps = r.servers_per_group - 1;
    auto intra_phase = [&](CollectiveOp phase_op, const char* what) {
      if (!intra.empty()) {
        ring_phase(std::string("intra-node ") + what + " (NVLink)", phase_op, intra, S / dm, intra_steps, 1);
      }
    };
    auto inter_phase = [&](CollectiveOp phase_op, const char* what) {
      if (inter.empty()) return;
      const bool allreduce = phase_op == CollectiveOp::kAllReduce;
      ring_phase(std::string("inter-node ") + what + " (ring per rail)", phase_op, inter, S / dn,
                 allreduce ? 2 * inter_steps : inter_steps, allreduce ? 2 : 1);
    };
    switch (request.op) {
      case CollectiveOp::kAllReduce:
        intra_phase(CollectiveOp::kReduceScatter, "reduce-scatter");
        inter_phase(CollectiveOp::kAllReduce, "all-reduce");
        intra_phase(CollectiveOp::kAllGather, "all-gather");
        break;
      case CollectiveOp::kAllGather:
        inter_phase(CollectiveOp::kAllGather, "all-gather");
        intra_phase(CollectiveOp::kAllGather, "all-gather");
        break;
      case CollectiveOp::kReduceScatter:
        intra_phase(CollectiveOp::kReduceScatter, "reduce-scatter");
        inter_phase(CollectiveOp::kReduceScatter, "reduce-scatter");
        break;
      case CollectiveOp::kSendRecv: break;
    }
  }

  const CollectivePhase* slowest = nullptr;
  double all_channels_bandwidth_s = 0;
  for (const CollectivePhase& ph : r.phases) {
    r.latency_s += ph.latency_s;
    r.bandwidth_s += ph.bandwidth_s;
    all_channels_bandwidth_s += ph.all_channels_bandwidth_s;
    r.steps += ph.steps;
    if (slowest == nullptr || ph.bandwidth_s > slowest->bandwidth_s) slowest = &ph;
  }
  if (slowest != nullptr) {
    r.bottleneck = slowest->step.bottleneck;
    r.cc = slowest->step.cc;
    r.channels = slowest->channels;
  }
  r.protocol = proto;
  r.time_s = r.latency_s + r.bandwidth_s;
  r.all_channels_time_s = r.latency_s + all_channels_bandwidth_s;
  r.algbw_gbs = r.time_s > 0 ? S / r.time_s / 1e9 : 0.0;
  r.busbw_gbs = r.algbw_gbs * busbw_factor(request.op, r.ranks);
  return r;
}

}  // namespace megascale::network
