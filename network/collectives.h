// network/collectives.h: NCCL-like collectives as flows over the fabric.
//
// defines: CollectiveOp, CollectiveAlgorithm, CollectiveOptions, CollectiveRequest,
//          StepFlow, StepOutcome, CollectiveResult, CollectiveSimulator,
//          busbw_factor, parse_collective_op/algorithm, strided_groups,
//          scatter_servers, ring_step_flows, tree_step_flows, btree_parent,
//          dtree_parent
//
// What it models
// --------------
// A collective is a sequence of steps; a step is a set of concurrent transfers
// (StepFlow: source GPU, destination GPU, bytes, connection number). Every
// communicator that runs at the same time (e.g. 64 data-parallel groups of 192
// ranks, or one all-gather over all 12,288 GPUs) contributes its flows to the
// same step, so they contend on the fabric. A step is turned into flows and
// solved like this:
//   1. Paths. A transfer inside one server goes over NVLink (GPU -> NVSwitch ->
//      GPU). Across servers it is a connection of Q = EcmpConfig::
//      qps_per_connection queue pairs (routing.h): Q sub-flows of bytes / Q, each
//      routed GPU -> PCIe -> NIC -> fabric -> NIC -> PCIe -> GPU by the Router's
//      ECMP hash of its own 5-tuple, so hash collisions show up as links carrying
//      more flows than others; under adaptive routing (EcmpConfig::routing,
//      InfiniBand AR) the step's sub-flows are routed in turn, each on the
//      equal-cost path with the least-loaded bottleneck.
//   2. Rates. Max-min fair rates with per-flow caps (flow_solver.h):
//        NVLink: the GPU's achievable NCCL bus bandwidth (nvlink_busbw_gbs, e.g.
//                ~230 GB/s on 8 x A100, REFERENCE.md "Hardware"), shared equally
//                by the NVLink flows one GPU sends in the step (a per-GPU cap);
//        network: the NIC's NCCL bus bandwidth (nic_busbw_gbs = line rate x 0.96,
//                ~24 GB/s per 200G NIC, REFERENCE.md) split over its Q QPs. The
//                NIC-ToR links themselves are also limited to nic_busbw_gbs, so
//                several connections on one NIC share the same 0.96 x line rate.
//   3. Congestion control. For every sub-flow whose bottleneck (from the solver)
//      is a switch egress link (ToR, aggregation, core -> next hop) crossed by
//      N >= 2 sub-flows, congestion_effect({N, sub-flow bytes, link capacity,
//      base RTT = 2 x the sub-flow's fabric path latency rounded to 1 us,
//      controller, PFC}) (congestion.h, memoised) gives the achieved bandwidth
//      fraction, which divides its rate, and the queueing delay it adds. NIC
//      uplinks (the NIC's own scheduler), PCIe and NVLink are not switch queues
//      and get no congestion-control effect.
//   4. Time. The step's bandwidth time is that of its slowest sub-flow (bytes /
//      (rate x fraction)): NCCL's steps are synchronous, every rank waits for its
//      neighbour. The critical sub-flow's bottleneck is reported.
// Identical steps are solved once: every step of a ring has the same pattern
// (each rank sends bytes/n to its successor), so a ring collective costs one
// solve times its step count; a simulator also memoises step patterns across
// collectives (an all-reduce's reduce-scatter and all-gather halves, the
// intra-node phases of a hierarchical collective, the same collective again),
// and its FlowSolver memoises identical components inside a step (the NVLink
// rings of 1,536 servers are one solve).
//
// Time of a collective = latency + sum over phases of steps x step bandwidth
// time, for the request's NCCL protocol (network/nccl_tuner.h): latency is
// NCCL's own for the algorithm and protocol (tuning.cc: base + per-hop NVLink /
// network latency, the host's network post overhead, the multi-node ring
// plateau) plus, per hop one chunk traverses, the topology's path latency
// (switch and cable, topology.h) and, on network hops, the mean
// congestion-control queueing delay of the step's network sub-flows; the flows
// give the Simple protocol's bandwidth time, which LL and LL128 scale by NCCL's
// ratios and caps (and the tree by its 0.92 efficiency and size corrections),
// on the channels NCCL runs at this size (nccl_collective_channels: a small
// ring or tree collective runs on fewer channels, each with its share of the
// bandwidth; all_channels_time_s keeps the all-channel time NCCL estimates).
// network/collective_tuner.h picks the fastest (algorithm, protocol) as NCCL does.
//
// Algorithms (n ranks on k servers, m ranks per server, S = request bytes):
//   kRing: NCCL's ring with one channel per rank of a server and PXN-style rail
//     alignment (NCCL on rail-optimised fabrics): channel c leaves every server
//     from the rank with local index c and enters the next server at its rank of
//     local index c (same rail, so the hop stays in one rail's ToR when the
//     servers share a ToR set); inside a server each channel's chain visits the
//     local ranks in order and the last forwards over NVLink to the exit GPU.
//     Aggregated over the channels, one step is: local rank j -> j+1 (mod m)
//     over NVLink with S/n bytes, and for each channel c < C = min over servers
//     of m, local rank c of server i -> local rank c of server i+1 (mod k) over
//     the network with S/(n C) bytes, connection c. One server: the plain NVLink
//     ring. One rank per server: the plain ring over the network. Steps: n-1
//     (all-gather, reduce-scatter), 2(n-1) (all-reduce); hops per traversal as
//     NCCL counts them: (k-1) network + (n-k) NVLink, twice for all-reduce.
//   kTree (all-reduce only, as in NCCL): NCCL's double binary tree over the
//     servers (src/graph/trees.cc, ncclGetDtree: a binary tree on the bit pattern
//     of the server index, the second tree mirrored for even k, shifted for odd),
//     each tree carrying S/2, with a chain through the local ranks of each
//     server. Fluid simplification: NCCL pipelines the reduction up and the
//     broadcast down the trees in small chunks, so every tree edge carries its
//     data in both directions at once for the whole operation: one step in which
//     each edge (child, parent) of tree t has, per channel c < C, a flow of
//     S/(2C) each way between the ranks of local index c; each chain edge inside
//     a server has a flow of S each way. Bandwidth time = the slowest such flow;
//     latency = NCCL's tree form (base + 2 x ((m-1) NVLink + log2(k) network
//     hops)) plus the fabric latency of the actual depth of the trees.
//   kNvls (Hopper NVSwitch, one node): the switch reduces (NVLink SHARP); time =
//     25 us + S / the profile's NVLS bandwidth (no flows).
//   kNvlsTree (Hopper, all-reduce across nodes): the tree's network flows
//     without the NVLink chains, pipelined with the node's NVLS reduction (the
//     slower of the two).
//   kHierarchical: NVLink inside the server, rails across, as three sequential
//     phases, each its own NCCL call (base latency each). All-reduce: intra-node
//     ring reduce-scatter of S over the m local ranks; inter-node ring all-reduce
//     of S/m over the k servers, one ring per local index (rail), all rails at
//     once; intra-node ring all-gather of S. All-gather: inter-node all-gather of
//     S/m per rail, then intra-node all-gather of S. Reduce-scatter: intra-node
//     reduce-scatter of S, then inter-node reduce-scatter of S/m per rail.
//     REQUIRES every server to hold the same number of ranks.
//   kSendRecv (any algorithm): nccl-tests sendrecv: rank i sends S bytes to rank
//     i+1 (mod n) while receiving from i-1; one step; latency = base + one hop.
//
// nccl-tests conventions (REFERENCE.md; nccl-tests doc/PERFORMANCE.md): S is the
// test's "size" (all-gather: the gathered output; reduce-scatter: the input;
// all-reduce: the buffer; sendrecv: each rank's message); algbw = S / time;
// busbw = algbw x 2(n-1)/n (all-reduce), x (n-1)/n (all-gather, reduce-scatter),
// x 1 (sendrecv). GB/s = 1e9 bytes/s.
//
// Units: bytes, seconds (_s), microseconds (_us), Gb/s (_gbps, 1e9 bit/s) for
// rates inside the fabric, GB/s (_gbs, 1e9 bytes/s) for bus bandwidths.
// Thread-safety: a CollectiveSimulator keeps a FlowSolver and memo tables and is
// not thread-safe; use one per thread (congestion_effect's own memo is shared and
// thread-safe). It holds references to the Topology and Router, which must
// outlive it. The free functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "network/congestion.h"   // defines: CcAlgorithm, CongestionInput
#include "network/flow_solver.h"  // defines: FlowSolver, SolveStats
#include "network/nccl_tuner.h"   // defines: NcclProtocol, NcclSystem
#include "network/routing.h"      // defines: Router, EcmpConfig
#include "network/topology.h"     // defines: Topology, LinkKind

namespace megascale::network {

enum class CollectiveOp : uint8_t { kAllGather, kReduceScatter, kAllReduce, kSendRecv };
enum class CollectiveAlgorithm : uint8_t { kRing, kTree, kHierarchical, kNvls, kNvlsTree };

const char* to_string(CollectiveOp op);               // "allgather", "reducescatter", ...
// "ring", "tree", "hierarchical", "nvls", "nvls-tree"
const char* to_string(CollectiveAlgorithm algorithm);
// Also accepts "all-gather", "all_gather", "reduce-scatter", "all-reduce", "send-recv".
std::optional<CollectiveOp> parse_collective_op(std::string_view name);
std::optional<CollectiveAlgorithm> parse_collective_algorithm(std::string_view name);
// An NCCL_ALGO-like choice: "auto" -> nullopt (the tuner's), else the algorithm;
// std::invalid_argument listing the words for anything else.
std::optional<CollectiveAlgorithm> algorithm_choice(std::string_view name);

// nccl-tests' busbw / algbw: 2(n-1)/n all-reduce, (n-1)/n all-gather and
// reduce-scatter, 1 sendrecv. REQUIRES ranks >= 1.
double busbw_factor(CollectiveOp op, int ranks);

// NCCL's Simple-protocol ring constants, microseconds (src/graph/tuning.cc;
// REFERENCE.md), for callers that time their own point-to-point transfers
// (sim/comm_costs.h). CollectiveSimulator::run takes every latency from
// nccl_latency_us (network/nccl_tuner.h), per algorithm and protocol.
struct NcclLatency {
  double base_us = 8.4;          // Ring / Simple base latency
  double nvlink_hop_us = 3.4;    // per hop over NVLink, Simple
  double network_hop_us = 14.0;  // per hop over the network, Simple
};

struct CollectiveOptions {
  // Defaults: A100 SXM4 with 200G NICs (REFERENCE.md: ~230 GB/s NCCL busbw on
  // 8 x A100 NVLink; 200 Gb/s / 8 x 0.96 = 24 GB/s per NIC). The CLI fills these
  // from model/hardware.h's GPU profile.
  double nvlink_busbw_gbs = 230.0;  // per GPU, shared by the NVLink flows it sends
  double nic_busbw_gbs = 24.0;      // per NIC connection, split over its QPs
  NcclLatency latency;
  // NCCL's view of the machine (generation, host CPU, channels, NVLS): the
  // per-protocol latencies and bandwidth ratios of nccl_tuner.h. Defaults: A100.
  NcclSystem nccl = nccl_system_for(80, true, 24, 0.0);
  CcAlgorithm congestion_control = CcAlgorithm::kHybrid;
  bool pfc = true;
  bool congestion_effect = true;  // false: rates are the solver's alone
  std::size_t max_step_memo_entries = 64;  // step-pattern memo (keys hold the flows), emptied when full
};

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  double bytes = 0;  // nccl-tests "size" (see the header comment)
  // Concurrent communicators: the GPU of each rank, in rank order. All the same
  // size (>= 2); no GPU in two groups.
  std::vector<std::vector<int>> groups;
};

// One transfer of a step: a connection from src_gpu to dst_gpu. `connection`
// numbers the connections between the same two NICs (NCCL channel), so that
// different channels hash to different source ports and paths.
struct StepFlow {
  int32_t src_gpu = 0;
  int32_t dst_gpu = 0;
  int32_t connection = 0;
  double bytes = 0;
  bool operator==(const StepFlow&) const = default;
};

// Where the slowest flow of a step is held back.
struct Bottleneck {
  // "nvlink", "pcie", "nic-tor", "tor-agg", "agg-core" (a link, topology.h), or
  // "nvlink-cap" / "nic-cap" (the flow runs at its per-flow cap), or "none".
  std::string kind = "none";
  std::string description;  // one line for people
  LinkId link = -1;         // the link, or -1
  bool up = false;          // direction of the link (towards the higher tier)
  int flows = 0;            // sub-flows crossing that link (1 for a cap)
  double capacity_gbps = 0; // the link's capacity (topology's), or the cap
  double rate_gbps = 0;     // the slowest sub-flow's max-min rate (before CC)
};

// The congestion-control effect on the slowest sub-flow of a step.
struct CcEffectUsed {
  CcAlgorithm algorithm = CcAlgorithm::kHybrid;
  bool applied = false;       // its bottleneck is a switch queue shared by >= 2 sub-flows
  int senders = 0;            // sub-flows sharing that bottleneck
  double achieved_bandwidth_fraction = 1.0;
  double added_latency_us = 0;
  double pfc_pause_fraction = 0;
};

// One solved step pattern.
struct StepOutcome {
  double bandwidth_s = 0;             // slowest sub-flow: bytes / (rate x CC fraction)
  // Per StepFlow, in the order given: its slowest sub-flow's bandwidth time (for
  // callers whose transfers do not wait for each other, e.g. pipeline sends).
  std::vector<double> transfer_bandwidth_s;
  double network_path_latency_us = 0; // max fabric path latency over network sub-flows
  double nvlink_path_latency_us = 0;  // max path latency over NVLink flows
  double mean_added_latency_us = 0;   // CC queueing delay, mean over network sub-flows
  std::size_t transfers = 0;          // StepFlows
  std::size_t subflows = 0;           // flows handed to the solver (QPs counted)
  std::size_t network_subflows = 0;
  std::size_t cc_limited_subflows = 0;  // sub-flows slowed by congestion control
  Bottleneck bottleneck;
  CcEffectUsed cc;
  SolveStats solver;                  // of the solve (zero on a memo hit)
};

// A phase: `steps` identical steps of one pattern.
struct CollectivePhase {
  std::string name;     // e.g. "ring all-gather", "inter-node all-reduce (per rail)"
  int steps = 0;
  double latency_s = 0;
  double bandwidth_s = 0;  // steps x step.bandwidth_s, on `channels` (protocol applied)
  // NCCL channels the phase runs on: a ring or tree phase's
  // nccl_collective_channels (fewer than the system's for a small one); a
  // one-node Simple send/recv's nccl_p2p_channels; 0 where no channel count
  // is modelled (NVLS and NVLS tree: the profile's NVLS bandwidth; send/recv
  // across nodes or with LL).
  int channels = 0;
  // The bandwidth time had the phase run on all the system's channels: what
  // NCCL's own estimate (and so its choice) assumes.
  double all_channels_bandwidth_s = 0;
  bool memo_hit = false;   // the step pattern was already solved
  StepOutcome step;
};

struct CollectiveResult {
  CollectiveOp op = CollectiveOp::kAllReduce;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  double bytes = 0;
  int ranks = 0;            // per communicator
  int groups = 0;           // concurrent communicators
  int servers_per_group = 0;
  int ranks_per_server = 0; // most ranks of one communicator on one server
  double time_s = 0;
  double latency_s = 0;
  double bandwidth_s = 0;
  int channels = 0;         // of the phase with the most bandwidth time (0: not modelled)
  double all_channels_time_s = 0;  // latency + every phase on all channels (NCCL's estimate's view)
  double algbw_gbs = 0;     // bytes / time_s / 1e9
  double busbw_gbs = 0;     // algbw x busbw_factor
  int steps = 0;            // all phases
  std::vector<CollectivePhase> phases;
  Bottleneck bottleneck;    // of the phase with the most bandwidth time
  CcEffectUsed cc;          // of that phase
  std::size_t step_solves = 0;     // step patterns solved in this call
  std::size_t step_memo_hits = 0;  // step patterns answered from the memo
};

class CollectiveSimulator {
 public:
  // Keeps references to `topology` and `router` (router.topology() must be
  // `topology`). Throws std::invalid_argument for non-positive bandwidths.
  CollectiveSimulator(const Topology& topology, const Router& router,
                      CollectiveOptions options = {});
  ~CollectiveSimulator();
  CollectiveSimulator(const CollectiveSimulator&) = delete;
  CollectiveSimulator& operator=(const CollectiveSimulator&) = delete;

  const Topology& topology() const { return topology_; }
  const Router& router() const { return router_; }
  const CollectiveOptions& options() const { return options_; }

  // Times one collective (all its groups at once). Throws std::invalid_argument
  // for an empty or inconsistent request (groups of different sizes or fewer
  // than 2 ranks, GPUs out of range or repeated, bytes < 0 or not finite, tree
  // for anything but all-reduce, hierarchical with uneven ranks per server),
  // naming the problem.
  CollectiveResult run(const CollectiveRequest& request);

  // Solves one step (memoised by its exact list of StepFlows). Exposed for
  // benchmarks and for callers that build their own patterns.
  StepOutcome solve_step(std::span<const StepFlow> flows, bool* memo_hit = nullptr);

  // The sub-flows solve_step hands the solver for `flows` (paths through the
  // Router's ECMP per QP, NIC and NVLink caps), flow k starting at start_s[k]
  // (all at 0 when empty): for callers that solve them another way, e.g.
  // over time or with SimGrid (sim/network_crosscheck.h). transfer_of[j] is
  // the index in `flows` of sub-flow j; network[j] is 1 for a fabric sub-flow,
  // 0 for NVLink. Throws std::invalid_argument as solve_step does.
  void subflows(std::span<const StepFlow> flows, std::span<const double> start_s, FlowSet* out,
                std::vector<uint32_t>* transfer_of, std::vector<uint8_t>* network) const;
  // Link capacities the solver uses (NIC-ToR links limited to the NIC busbw).
  const std::vector<double>& link_capacity_gbps() const { return capacity_gbps_; }

  void clear_cache();
  std::size_t cache_entries() const;

 private:
  struct Memo;
  const Topology& topology_;
  const Router& router_;
  CollectiveOptions options_;
  std::vector<double> capacity_gbps_;  // topology's, NIC-ToR links limited to nic busbw
  FlowSolver solver_;
  std::unique_ptr<Memo> memo_;
};

// ---- building blocks (used by run(); public for tests and benchmarks) -------

// `groups` communicators of `ranks` ranks laid out as Megatron-LM lays out
// data-parallel groups (REFERENCE.md: rank = tp + dp*TP + ...): `ranks_per_server`
// consecutive ranks of a group on each server it uses, the servers of group g
// starting at server (g / slots) * (ranks / ranks_per_server), and on them local
// GPUs [(g % slots) * ranks_per_server, +ranks_per_server), slots =
// gpus_per_server / ranks_per_server. E.g. 64 groups of 192 ranks with 1 rank
// per server on 8-GPU servers: group g is rail g % 8 of servers
// 192 (g / 8) .. 192 (g / 8) + 191 - all 12,288 GPUs. Returns the GPU of each
// rank. REQUIRES ranks_per_server divides gpus_per_server and ranks (else
// std::invalid_argument).
std::vector<std::vector<int>> strided_groups(int gpus_per_server, int groups, int ranks,
                                             int ranks_per_server);
// GPUs that strided_groups(...) needs: servers used x gpus_per_server.
int64_t strided_groups_gpus(int gpus_per_server, int groups, int ranks, int ranks_per_server);
// Scattered placement: renames the servers of every GPU in `groups` by one random
// permutation of 0..servers-1 (Fisher-Yates driven by splitmix64(seed), the same
// on every platform), keeping each GPU's local index. Rings then cross ToR sets
// and pods (through the aggregation and core tiers) instead of staying ToR-local.
// REQUIRES every GPU < servers * gpus_per_server (else std::invalid_argument).
void scatter_servers(std::vector<std::vector<int>>* groups, int gpus_per_server, int servers, uint64_t seed);

// One ring step of every group (see kRing above), each rank moving
// `chunk_bytes` (= S / n); appended to *out. Connection numbers are the channel.
void ring_step_flows(const Topology& topology, std::span<const std::vector<int>> groups,
                     double chunk_bytes, std::vector<StepFlow>* out);
// The pipelined double-binary-tree all-reduce of S = `bytes` (see kTree).
// Returns the deeper tree's depth (network hops root to deepest leaf).
// `chain` false leaves out the NVLink chains inside the servers (NVLS tree:
// the NVSwitch reduces inside the node).
int tree_step_flows(const Topology& topology, std::span<const std::vector<int>> groups,
                    double bytes, std::vector<StepFlow>* out, bool chain = true);
// NCCL's ncclGetBtree parent of `rank` in a binary tree of `ranks` (-1 for the
// root, rank 0), and the parent in tree 1 of the double binary tree
// (ncclGetDtree: mirrored for an even count, shifted by one for an odd one).
int btree_parent(int rank, int ranks);
int dtree_parent(int tree, int rank, int ranks);

}  // namespace megascale::network
