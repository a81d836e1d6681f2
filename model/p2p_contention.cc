// model/p2p_contention.cc: see p2p_contention.h.
#include "model/p2p_contention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <unordered_map>
#include <stdexcept>
#include <vector>

#include "model/fabric_tiers.h"

namespace megascale::model {
namespace {

// The Poisson(mu) CDF walked upwards one count at a time, in log space for the
// terms so that a large mean (many sub-flows) does not underflow e^-mu.
struct PoissonWalk {
  double log_mu = 0;
  double mu = 0;
  long long k = -1;
  double log_term = 0;  // log P(X = k)
  double cdf = 0;       // P(X <= k)
  void advance() {
    ++k;
    log_term = k == 0 ? -mu : log_term + log_mu - std::log(static_cast<double>(k));
    cdf = std::min(1.0, cdf + std::exp(log_term));
  }
};

}  // namespace

double expected_ecmp_slowdown(std::span<const HashedTier> tiers, int subflows) {
  if (subflows < 1) throw std::invalid_argument("expected_ecmp_slowdown: subflows must be >= 1");
  struct Walk {
    PoissonWalk poisson;
    double links = 0;
    double capacity = 0;  // in sub-flows
    double at_most = 0;   // in sub-flows
    double cdf() const { return static_cast<double>(poisson.k) >= at_most ? 1.0 : poisson.cdf; }
  };
  std::vector<Walk> walks;
  walks.reserve(tiers.size());
  for (const HashedTier& t : tiers) {
    if (!(t.transfers_per_link >= 0) || !(t.links >= 0) || !(t.capacity > 0) || !std::isfinite(t.transfers_per_link) ||
        !std::isfinite(t.links) || !std::isfinite(t.capacity) || !(t.at_most >= 0)) {
      throw std::invalid_argument("expected_ecmp_slowdown: a tier's figures must be finite, >= 0 (capacity > 0)");
    }
    if (t.links == 0 || t.transfers_per_link == 0) continue;
    Walk w;
    w.poisson.mu = subflows * t.transfers_per_link;
    w.poisson.log_mu = std::log(w.poisson.mu);
    w.links = t.links;
    w.capacity = subflows * t.capacity;
    w.at_most = subflows * t.at_most;
    if (w.at_most <= w.capacity) continue;  // never more than it carries at full rate
    // Start at the largest load that still runs at full rate.
    const long long full = static_cast<long long>(std::floor(w.capacity + 1e-9));
    while (w.poisson.k < full) w.poisson.advance();
    walks.push_back(w);
  }
  // P(max ratio <= x) is a step function of x that moves only where some
  // tier's load / capacity crosses a whole load: walk those steps upwards from
  // x = 1, adding (next step - x) x P(max ratio > x).
  double expected = 1.0;
  double x = 1.0;
  for (int step = 0; step < 100000; ++step) {
    double log_below = 0;  // log P(max ratio <= x)
    for (const Walk& w : walks) log_below += w.links * std::log(std::max(w.cdf(), 1e-300));
    const double above = -std::expm1(log_below);
    if (above < 1e-9) break;
    Walk* next = nullptr;
    double next_x = 0;
    for (Walk& w : walks) {
      const double candidate = static_cast<double>(w.poisson.k + 1) / w.capacity;
      if (next == nullptr || candidate < next_x) {
        next = &w;
        next_x = candidate;
      }
    }
    expected += (next_x - x) * above;
    x = next_x;
    for (Walk& w : walks) {
      if (static_cast<double>(w.poisson.k + 1) / w.capacity <= x + 1e-12) w.poisson.advance();
    }
  }
  return expected;
}

namespace {

// How many of a boundary's transfers leave each bin (a set of ToRs, or a pod)
// of `bin_gpus` consecutive GPUs: the senders are `blocks` runs of `run` GPUs,
// run k starting at first + k * block_stride, each sending `shift` GPUs away.
// Returns (transfers leaving a bin, how many bins leave that many); bins that
// send nothing out are left out. The runs' pattern over the bins repeats every
// lcm(block_stride, bin_gpus) GPUs: one period is walked and scaled.
std::map<int64_t, double> leaving_per_bin(int64_t first, int64_t run, int64_t block_stride, int64_t blocks,
                                          int64_t shift, int64_t bin_gpus) {
  std::map<int64_t, int64_t> by_bin;  // bin -> transfers leaving it
  const int64_t period_blocks =
      blocks <= 1 ? 1 : std::min<int64_t>(blocks, std::lcm(block_stride, bin_gpus) / block_stride);
  const int64_t walked = std::min<int64_t>(period_blocks, 4096);
  for (int64_t k = 0; k < walked; ++k) {
    const int64_t lo = first + k * block_stride, hi = lo + run;
    for (int64_t z = lo / bin_gpus; z * bin_gpus < hi; ++z) {
      const int64_t a = std::max(lo, z * bin_gpus), b = std::min(hi, (z + 1) * bin_gpus);
      // Senders g in [a, b) whose receiver g + shift lies in another bin.
      int64_t leaving = 0;
      if (shift >= bin_gpus || -shift >= bin_gpus) {
        leaving = b - a;
      } else if (shift > 0) {
        leaving = std::max<int64_t>(0, b - std::max(a, (z + 1) * bin_gpus - shift));
      } else if (shift < 0) {
        leaving = std::max<int64_t>(0, std::min(b, z * bin_gpus - shift) - a);
      }
      if (leaving > 0) by_bin[z] += leaving;
    }
  }
  std::map<int64_t, double> histogram;
  const double scale = static_cast<double>(blocks) / static_cast<double>(walked);
  for (const auto& [bin, leaving] : by_bin) histogram[leaving] += scale;
  return histogram;
}

// The two answers of this file for one scenario.
struct PipelineSlowdowns {
  double p2p = 1.0;        // pp_p2p_slowdown
  double embedding = 1.0;  // embedding_sync_slowdown
};

PipelineSlowdowns compute_slowdowns(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const HardwareConfig& hw = s.hardware;
  if (p.pp <= 1 || hw.gpus_per_node < 1 || hw.nics_per_node < 1 || !(hw.nic_gbps > 0)) return {};
  const FabricTiersOrFault planned = fabric_tiers(s.network, hw, s.cluster.gpus);
  if (!planned.tiers) return {};
  const FabricTiers& f = *planned.tiers;
  if (f.tors <= f.tors_per_group) return {};  // one set of ToRs: no transfer goes up
  const int64_t gpn = hw.gpus_per_node;
  // The senders of stage boundary b (model/config.h gpu_of): Megatron's order
  // puts TP and the folded CP x DP ranks below PP, so stage b is one run of
  // tp x dp GPUs; the other order runs tp x cp GPUs per stage inside each
  // replica's block of tp x cp x pp.
  const bool megatron_order = p.rank_order == RankOrder::kTpCpDpPp;
  const int64_t run = megatron_order ? static_cast<int64_t>(p.tp) * p.dp : static_cast<int64_t>(p.tp) * std::max(1, p.cp);
  const int64_t block_stride = run * p.pp;
  const int64_t blocks = megatron_order ? 1 : std::max(1, p.replicas());
  // A transfer's uncontended rate: the GPU's share of its server's NICs.
  const double transfer_gbps = hw.nic_gbps * std::min(1.0, static_cast<double>(hw.nics_per_node) / gpn);
  const double capacity = f.port_gbps / transfer_gbps;
  const int64_t group_gpus = f.servers_per_group * gpn;
  const int64_t pod_gpus = f.servers_per_pod * gpn;
  const bool pods = f.tiers == 3 && f.pods > 1;
  const double pod_links = static_cast<double>(f.tor_uplinks) * f.agg_uplinks;
  const int subflows = std::max(1, s.network.qps_per_connection);
  const bool adaptive = s.network.routing == "adaptive";

  // The slowest transfer of every stage-`first_stage` GPU sending `shift`
  // GPUs away at once (the way back loads the same links the other way round).
  std::vector<HashedTier> tiers;
  auto slowest = [&](int64_t first_stage, int64_t shift) {
    const int64_t first = first_stage * run;
    tiers.clear();
    // Up at the sending set of ToRs, one ToR per rail, and down into the
    // receiving one: each rail's share of the leaving transfers on its ToR's uplinks.
    for (const auto& [leaving, bins] : leaving_per_bin(first, run, block_stride, blocks, shift, group_gpus)) {
      const double per_tor = static_cast<double>(leaving) / f.tors_per_group;
      tiers.push_back({per_tor / f.tor_uplinks, 2.0 * bins * f.tors_per_group * f.tor_uplinks, capacity,
                       std::ceil(per_tor)});
    }
    if (pods) {
      // Across pods: ToR uplink j reaches aggregation switch j of the pod, whose
      // agg_uplinks go to the core: the pod's leaving transfers over
      // tor_uplinks x agg_uplinks links.
      for (const auto& [leaving, bins] : leaving_per_bin(first, run, block_stride, blocks, shift, pod_gpus)) {
        tiers.push_back({static_cast<double>(leaving) / pod_links, 2.0 * bins * pod_links, capacity,
                         static_cast<double>(leaving)});
      }
    }
    if (!adaptive) return expected_ecmp_slowdown(tiers, subflows);
    double worst = 1.0;
    for (const HashedTier& t : tiers) worst = std::max(worst, t.transfers_per_link / t.capacity);
    return worst;
  };

  // p2p: averaged over the boundaries a chunk's transfers cross, 0..P-2
  // forward, and P-1 -> 0 when the schedule is interleaved.
  PipelineSlowdowns out;
  const int boundaries = p.pp - 1 + (p.vpp > 1 ? 1 : 0);
  double sum = 0;
  for (int b = 0; b < boundaries; ++b) sum += b == p.pp - 1 ? slowest(b, -(p.pp - 1) * run) : slowest(b, run);
  out.p2p = sum / boundaries;
  // The tied embedding's gradient: the first stage and the last, every (TP,
  // DP) pair at once.
  out.embedding = slowest(0, (p.pp - 1) * run);
  return out;
}

// What the answer depends on, for the cache below: a search times hundreds of
// thousands of layouts of one cluster, of which a few hundred differ here.
struct SlowdownKey {
  int tp, dp, cp, pp, replicas;
  bool interleaved, megatron_order;
  int gpus, gpus_per_node, nics_per_node;
  double nic_gbps;
  int switch_radix, tiers, qps;
  double switch_port_gbps;
  bool split_ports, rail_optimized, adaptive;
  // network.oversubscription: at most tiers - 1 <= 2 ratios (model/config.h).
  std::array<double, 2> oversubscription;
  size_t ratios;
  bool operator==(const SlowdownKey&) const = default;
};

SlowdownKey slowdown_key(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const NetworkConfig& n = s.network;
  return SlowdownKey{p.tp, p.dp, p.cp, p.pp, p.replicas(), p.vpp > 1, p.rank_order == RankOrder::kTpCpDpPp,
                     s.cluster.gpus, s.hardware.gpus_per_node, s.hardware.nics_per_node, s.hardware.nic_gbps,
                     n.switch_radix, n.tiers, n.qps_per_connection, n.switch_port_gbps, n.split_ports,
                     n.rail_optimized, n.routing == "adaptive",
                     {n.oversubscription.empty() ? 0.0 : n.oversubscription[0],
                      n.oversubscription.size() > 1 ? n.oversubscription[1] : 0.0},
                     n.oversubscription.size()};
}

struct SlowdownKeyHash {
  size_t operator()(const SlowdownKey& k) const {
    size_t h = 0;
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    for (int v : {k.tp, k.dp, k.cp, k.pp, k.replicas, k.gpus, k.gpus_per_node, k.nics_per_node, k.switch_radix,
                  k.tiers, k.qps}) {
      mix(std::hash<int>{}(v));
    }
    mix(std::hash<double>{}(k.nic_gbps));
    mix(k.interleaved + 2 * k.megatron_order + 4 * k.split_ports + 8 * k.rail_optimized + 16 * k.adaptive);
    return h;
  }
};

}  // namespace

namespace {

PipelineSlowdowns slowdowns(const Scenario& s) {
  if (s.parallel.pp <= 1) return {};
  if (s.network.oversubscription.size() > 2) return compute_slowdowns(s);  // not a key the cache holds
  thread_local std::unordered_map<SlowdownKey, PipelineSlowdowns, SlowdownKeyHash> cache;
  SlowdownKey key = slowdown_key(s);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  const PipelineSlowdowns answer = compute_slowdowns(s);
  if (cache.size() >= 65536) cache.clear();  // bounded: a few MB at most
  cache.emplace(std::move(key), answer);
  return answer;
}

}  // namespace

double pp_p2p_slowdown(const Scenario& s) { return slowdowns(s).p2p; }

double embedding_sync_slowdown(const Scenario& s) { return slowdowns(s).embedding; }

}  // namespace megascale::model
