// network/collective_tuner.cc: see collective_tuner.h.
#include "network/collective_tuner.h"

#include <algorithm>
#include <stdexcept>

#include "network/topology.h"

namespace megascale::network {

TunedCollective tune_collective(CollectiveSimulator& simulator, const CollectiveRequest& request,
                                std::optional<CollectiveAlgorithm> algorithm, std::optional<NcclProtocol> protocol) {
  if (request.groups.empty() || request.groups.front().size() < 2) {
    throw std::invalid_argument("tune_collective: a communicator needs at least 2 ranks");
  }
  // Nodes and ranks per node of the first communicator (all are laid out alike).
  const Topology& t = simulator.topology();
  std::vector<int> server_of;
  for (int gpu : request.groups.front()) server_of.push_back(t.server_of_gpu(gpu));
  std::vector<int> servers = server_of;
  std::sort(servers.begin(), servers.end());
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
  const int nodes = static_cast<int>(servers.size());
  const int ranks_per_node = static_cast<int>(request.groups.front().size()) / nodes;

  if (request.op == CollectiveOp::kSendRecv && algorithm && *algorithm != CollectiveAlgorithm::kRing) {
    throw std::invalid_argument(std::string("sendrecv is point-to-point: NCCL runs it with no collective algorithm ("
                                            "NCCL_ALGO does not apply; --algo auto or ring), not ") +
                                to_string(*algorithm));
  }
  static constexpr CollectiveAlgorithm kAlgorithms[] = {CollectiveAlgorithm::kTree, CollectiveAlgorithm::kRing,
                                                        CollectiveAlgorithm::kNvls, CollectiveAlgorithm::kNvlsTree};
  static constexpr NcclProtocol kProtocols[] = {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple};
  TunedCollective out;
  bool have = false;
  std::string reasons;
  // NCCL's graph bandwidth: the ring's Simple bus bandwidth on this fabric
  // (bandwidth part only), the common start of every algorithm's estimate.
  double graph_busbw_gbs = 0;
  std::size_t solves = 0, memo_hits = 0;  // over every run of this call
  if (request.op != CollectiveOp::kSendRecv) {
    CollectiveRequest ring = request;
    ring.algorithm = CollectiveAlgorithm::kRing;
    ring.protocol = NcclProtocol::kSimple;
    const CollectiveResult r = simulator.run(ring);
    solves += r.step_solves;
    memo_hits += r.step_memo_hits;
    // On all channels, as NCCL's graph bandwidth is (not the few a small ring runs).
    double bandwidth_s = 0;
    for (const CollectivePhase& ph : r.phases) bandwidth_s += ph.all_channels_bandwidth_s;
    if (bandwidth_s > 0) graph_busbw_gbs = request.bytes * busbw_factor(request.op, r.ranks) / bandwidth_s / 1e9;
  }
  double best_estimate = 0;
  for (CollectiveAlgorithm a : kAlgorithms) {
    if (algorithm && *algorithm != a) continue;
    if (request.op == CollectiveOp::kSendRecv && a != CollectiveAlgorithm::kRing) continue;
    for (NcclProtocol p : kProtocols) {
      if (protocol && *protocol != p) continue;
      TunerCandidate c;
      c.algorithm = a;
      c.protocol = p;
      c.enabled = nccl_algorithm_enabled(a, p, request.op, nodes, ranks_per_node, simulator.options().nccl,
                                         &c.why_not);
      if (c.enabled && request.op == CollectiveOp::kSendRecv && !protocol &&
          p != nccl_p2p_protocol(request.bytes, static_cast<int>(request.groups.front().size()), nodes,
                                 simulator.options().nccl)) {
        // NCCL picks the p2p protocol by size, not by estimate.
        c.enabled = false;
        c.why_not = "NCCL's p2p runs LL up to nChannels x 16 KiB (P2P_LL_THRESHOLD), Simple above";
      }
      if (c.enabled) {
        CollectiveRequest r = request;
        r.algorithm = a;
        r.protocol = p;
        CollectiveResult res = simulator.run(r);
        solves += res.step_solves;
        memo_hits += res.step_memo_hits;
        c.time_s = res.time_s;
        c.latency_s = res.latency_s;
        c.busbw_gbs = res.busbw_gbs;
        c.channels = res.channels;
        // Ring, NVLS, send/recv: NCCL's estimate has the fabric's form, on all
        // channels (NCCL estimates before it reduces a small collective's).
        c.estimate_s = res.all_channels_time_s;
        // NCCL's estimate: the time less the network posts as the time charges
        // them (nccl_network_post_us: trees' left out, rings' on every step).
        const double posts_s = nccl_network_post_us(a, p, request.op, static_cast<int>(request.groups.front().size()),
                                                    nodes, request.bytes, simulator.options().nccl) *
                               1e-6;
        c.estimate_s -= posts_s;
        if (a == CollectiveAlgorithm::kTree && graph_busbw_gbs > 0) {
          // NCCL: tree busBw = 0.92 x graph busBw (capped, per protocol), algbw = busBw / 2.
          const double busbw = nccl_protocol_busbw_gbs(a, p, request.op, nodes,
                                                       nccl_tree_graph_busbw_gbs(graph_busbw_gbs, nodes,
                                                                                 simulator.options().nvlink_busbw_gbs),
                                                       simulator.options().nccl) *
                               nccl_tree_efficiency(p, request.bytes);
          c.estimate_s = res.latency_s - posts_s + request.bytes / (0.5 * busbw * 1e9);
        }
        if (!have || c.estimate_s < best_estimate) {
          out.best = std::move(res);
          best_estimate = c.estimate_s;
          have = true;
        }
      } else {
        reasons += std::string(reasons.empty() ? "" : "; ") + to_string(a) + "/" + to_string(p) + ": " + c.why_not;
      }
      out.candidates.push_back(std::move(c));
    }
  }
  out.best.step_solves = solves;  // the tuning's work, not just the chosen pair's
  out.best.step_memo_hits = memo_hits;
  if (!have) {
    throw std::invalid_argument(std::string("no NCCL algorithm/protocol runs ") + to_string(request.op) +
                                " here with that restriction (" + (reasons.empty() ? "none left" : reasons) + ")");
  }
  return out;
}

}  // namespace megascale::network
