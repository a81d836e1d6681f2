// network/nccl_tuner.h: NCCL's per-protocol cost model and its choice of
// algorithm and protocol for one collective (what NCCL_ALGO / NCCL_PROTO
// override).
//
// defines: NcclProtocol, NcclSystem, nccl_system_for, to_string,
//          parse_nccl_protocol, nccl_algorithm_enabled, nccl_latency_us,
//          nccl_protocol_busbw_gbs, nccl_tree_graph_busbw_gbs,
//          nccl_tree_efficiency, nccl_p2p_channels,
//          nccl_network_post_us, nccl_p2p_protocol,
//          nccl_p2p_channel_nvlink_gbs, nccl_collective_channels,
//          nccl_channels_busbw_gbs
//
// Source: NVIDIA/nccl src/graph/tuning.cc as of NCCL 2.30.7 (commit 5067397c,
// read with `fetch github:NVIDIA/nccl`): ncclTopoTuneModel (per algorithm x
// protocol latency and bus bandwidth) and ncclTopoGetAlgoTime
// (time = latency + bytes / bandwidth, tree correction factors, the ring
// "plateau"). REFERENCE.md "NCCL's own tuner" names the same constants.
//
// How megascale uses it (network/collectives.h, kRing/kTree/kNvls/kNvlsTree):
//   - bandwidth: the flow model gives the Simple-protocol bandwidth of the
//     algorithm on the actual fabric (NVLink caps, NICs, ECMP, congestion);
//     nccl_protocol_busbw_gbs turns it into LL / LL128 the way NCCL scales its
//     own bus bandwidth (LL: half the Simple rate, capped; LL128: 92%, capped
//     per channel) and applies NCCL's tree efficiency (0.92) and size
//     corrections;
//   - latency: nccl_latency_us is NCCL's own latency for the algorithm and
//     protocol (base + per-hop NVLink / network latency x hops, the CPU's
//     network post overhead, the multi-node ring plateau); the fabric's path
//     latencies and congestion-control queueing are added per hop by the caller,
//     and so are the network posts (nccl_network_post_us): trees' (NCCL's
//     estimate has none) and rings' on their network steps only (NCCL's charges
//     every step), which the time has and NCCL's ranking does not;
//   - channels in use: NCCL estimates (and so chooses) every pair on all its
//     channels, then runs a small ring or tree collective on fewer
//     (nccl_collective_channels: enqueue.cc topoGetAlgoInfo); the time takes
//     the bandwidth of the channels it runs (nccl_channels_busbw_gbs), the
//     ranking keeps NCCL's all-channel estimate;
//   - send/recv in one node: NCCL's p2p channel count for the size
//     (nccl_p2p_channels) x one NVLink's bandwidth bounds the bandwidth;
//   - choice: the tuner (net collective --algo auto --proto auto) runs every
//     enabled (algorithm, protocol) pair and keeps the fastest, as NCCL does
//     with its own estimates. CollNet (SHARP-capable switches) and PAT (one GPU
//     per node) are not modelled: the MegaScale fabric is Ethernet without
//     in-network reduction, and training jobs put 8 GPUs in a node.
//
// Units: microseconds (_us), GB/s (_gbs, 1e9 B/s, nccl-tests' busbw), bytes.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace megascale::network {

enum class CollectiveOp : uint8_t;
enum class CollectiveAlgorithm : uint8_t;

enum class NcclProtocol : uint8_t { kLL, kLL128, kSimple };
inline constexpr int kNcclProtocols = 3;

const char* to_string(NcclProtocol protocol);  // "LL", "LL128", "Simple"
// Case-insensitive: "ll", "ll128", "simple".
std::optional<NcclProtocol> parse_nccl_protocol(std::string_view name);
// An NCCL_PROTO-like choice: "auto" -> nullopt (the tuner's), else the protocol;
// std::invalid_argument listing the words for anything else.
std::optional<NcclProtocol> protocol_choice(std::string_view name);

// What NCCL's tuner knows about the machine.
struct NcclSystem {
  // 80 Ampere, 90 Hopper, 100 Blackwell: selects tuning.cc's per-generation
  // rows (LL caps, per-channel LL128 / tree caps, NVLS efficiency).
  int compute_capability = 80;
  // Multi-node LL cap and network post overhead depend on the host CPU
  // (tuning.cc llMaxBws rows, getNetOverhead: 1 us Intel, 2 us AMD).
  bool amd_cpu = false;
  int channels = 24;            // collective channels (NCCL INFO "N coll channels")
  // NVLS (NVLink SHARP: the NVSwitch reduces) all-reduce bus bandwidth inside
  // one node; 0 when the node has no NVLS (Ampere, or no NVSwitch).
  double nvls_busbw_gbs = 0;
};

// The NCCL system of a GPU profile: compute capability and host CPU are
// recorded per profile (model/hardware.h); NVLS only where the profile gives
// an NVLS bandwidth.
NcclSystem nccl_system_for(int compute_capability, bool amd_cpu, int channels, double nvls_busbw_gbs);

// Whether NCCL would consider `algorithm` with `protocol` for `op` on `nodes`
// nodes of `ranks_per_node` ranks (tuning.cc's enable rules: tree is all-reduce
// only; NVLS needs Hopper+, an NVLS bandwidth and Simple, runs in one node,
// NVLS tree across nodes for all-reduce only; LL128 needs sm70+;
// hierarchical is not an NCCL algorithm and is never chosen automatically).
// `why` (optional) receives the reason when it is not.
bool nccl_algorithm_enabled(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int nodes,
                            int ranks_per_node, const NcclSystem& system, std::string* why = nullptr);

// NCCL's latency of one collective of `ranks` ranks over `nodes` nodes, us
// (tuning.cc ncclTopoTuneModel + ncclTopoGetAlgoTime's ring plateau), without
// the fabric's own path latency. `bytes` is nccl-tests' size (it selects the
// plateau). Send/recv: base + one hop.
double nccl_latency_us(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int ranks, int nodes,
                       double bytes, const NcclSystem& system);

// The network-post time on the critical path, us, as the simulated time
// charges it beyond NCCL's own latency (nccl_latency_us; what NCCL's estimate,
// and so its choice, leaves as it is). Each network hop is one send posted by
// the sending node's proxy thread and one receive by the receiving node's, each
// costing getNetOverhead (tuning.cc: 1 us on Intel hosts, 2 us on AMD, x3 for
// Simple). Tree and NVLS tree: 2 log2(nodes) hops x 2 posts, which NCCL's
// estimate leaves out; send/recv across nodes: 1 hop x 2 posts. Rings: 2 posts
// on each of the 2 (nodes - 1) network steps of an all-reduce (nodes - 1 for
// the others), less what NCCL's estimate charges every NVLink step as
// max(intraLat, netOverhead) (negative when that is more; a run with the ring
// forced, deepops k8s, measured 38.6 us at 8 B where NCCL's estimate gives ~70
// and posts on network steps only ~38). One node: 0.
double nccl_network_post_us(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int ranks,
                            int nodes, double bytes, const NcclSystem& system);

// The bus bandwidth (nccl-tests' busbw) of `protocol` for an algorithm whose
// Simple-protocol bus bandwidth on this fabric is `simple_busbw_gbs` (NCCL:
// ring LL = min(Simple / 2, llMaxBw); ring LL128 = min(0.92 Simple, channels x
// per-channel cap); tree LL = Simple / 3.8 capped; tree LL128 = 120/128 (7/9 in
// one node) x Simple, capped; NVLS: Simple only).
double nccl_protocol_busbw_gbs(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int nodes,
                               double simple_busbw_gbs, const NcclSystem& system);

// The channels NCCL runs a ring or tree collective of `bytes` on (nccl-tests'
// size = NCCL's nBytes: the whole buffer, an all-gather's output and a
// reduce-scatter's input), once its tuner has chosen the pair on all
// `system.channels` (NVIDIA/nccl src/enqueue.cc topoGetAlgoInfo "Ring/Tree
// channel tuning", the same rule in 2.19.3, 2.20.5, 2.28.9, 2.29.7 and
// 2.30.7): it drops channels while nBytes < channels x threads x
// threadThreshold, down to 1, so each channel keeps at least threads x
// threadThreshold bytes: floor(bytes / that), between 1 and system.channels.
// threads x threadThreshold (graph/tuning.cc maxThreads and threadThresholds,
// src/include/device.h NCCL_*_MAX_NTHREADS, comm.h NCCL_*_THREAD_THRESHOLD):
// LL 512 x 8 B (a ring's x ranks: tuning.cc multiplies the ring LL threshold
// by nRanks), LL128 640 x 8 B, Simple 512 x 64 B. So 16 ranks on 24 channels
// run a ring LL all-reduce of 64 KiB on 1 channel, 128 KiB on 2, and all 24
// from 1.5 MiB; a tree LL one of 8 KiB on 2 and all from 96 KiB; Simple
// reaches all channels at 24 x 32 KiB. Not reduced (returns system.channels):
// NVLS and NVLS tree (NCCL runs its NVLS channels at every size) and send/recv
// (nccl_p2p_channels). Not modelled: NCCL also halves the threads of the last
// channel below its threshold (down to 64; the bandwidth here scales with
// channels only), and a ring Simple runs 256 threads where the ring graph's
// total bandwidth is at most PCI_BW (12 GB/s: no NVLink), which halves its
// threshold.
int nccl_collective_channels(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int ranks,
                             double bytes, const NcclSystem& system);

// nccl_protocol_busbw_gbs on `channels` of the system's channels: NCCL's bus
// bandwidth is channels x the graph's per-channel bandwidth, its caps apply to
// the channels in use (LL's llMaxBw to the total, LL128's and the tree's
// per-channel caps x channels). The fabric's Simple bus bandwidth
// (`simple_busbw_gbs`, on all channels) is shared evenly: channels /
// system.channels of it. `channels` >= system.channels: nccl_protocol_busbw_gbs.
double nccl_channels_busbw_gbs(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int nodes,
                               double simple_busbw_gbs, int channels, const NcclSystem& system);

// The graph bus bandwidth NCCL's tuner starts a tree's estimate from, GB/s,
// given the ring's (`ring_graph_busbw_gbs`: on this fabric, the ring's Simple
// bus bandwidth) and the GPU's NVLink bus bandwidth. On two nodes NCCL
// estimates every algorithm from its graph's intra-node speed (tuning.cc:
// `bw = nNodes <= 2 ? graphs[a]->bwIntra : graphs[a]->bwInter`), and its
// search raises a tree's intra-node speed up to twice its network speed while
// the NVLink paths carry it (graph/search.cc ncclTopoCompute: "increase
// bwIntra for trees (2 nodes or collnet)", while bwIntra < 2 x bwInter) - a
// two-node tree sends each byte over the network once each way, a ring
// 2(n-1)/n times. So: two nodes -> min(2 x ring, NVLink); otherwise the ring's.
// Same in NCCL 2.19.3 and 2.30.7.
double nccl_tree_graph_busbw_gbs(double ring_graph_busbw_gbs, int nodes, double nvlink_busbw_gbs);

// NCCL's correction of the tree all-reduce bandwidth at this size
// (treeCorrectionFactor, tuning.cc: "trees are not perfectly sticking to the
// model for medium sizes"), 0.4 .. 1.
double nccl_tree_efficiency(NcclProtocol protocol, double bytes);

// Send/recv inside one NVLink node (NCCL 2.29, enqueue.cc addP2pToPlan and
// graph/paths.cc ncclTopoComputeP2pChannels): a send of `bytes` to one peer, in
// a communicator of `ranks` ranks, runs on nChannels channels: it starts at
// min(nChannelsMin, bytes / 64 KiB) (minPartSize = P2P_NVL_CHUNKSIZE 512 KiB / 8)
// and doubles while a channel's part exceeds 16 MiB (maxPartSize = 32 x 512 KiB),
// up to the channels per peer. p2pnChannels = pow2Up(collective channels);
// per peer: pow2Up(2 x NVLinks to the peer: 12 on A100, 18 on H100) capped at
// p2pnChannels; nChannelsMin halves the
// per-peer count until nChannelsMin x ranks <= p2pnChannels. So 8 H100s
// (32 channels) send 32 MiB and 64 MiB on 4 channels, 128 MiB on 8, 256 MiB on
// 16, 512 MiB and more on 32.
int nccl_p2p_channels(double bytes, int ranks, const NcclSystem& system);

// NCCL's protocol for that send/recv (enqueue.cc addP2pToPlan): LL while the
// payload is at most nChannels x P2P_LL_THRESHOLD (16 KiB), Simple above; no
// estimate is involved. One node: nccl_p2p_channels; across nodes NCCL splits
// into 64 KiB parts (P2P_NET_CHUNKSIZE 128 KiB / 2) over at most 2 channels at
// first (nChannelsMin with 16+ ranks), which this takes.
NcclProtocol nccl_p2p_protocol(double bytes, int ranks, int nodes, const NcclSystem& system);

// The most one send/recv channel moves over NVLink, GB/s: NCCL's bandwidth of
// one NVLink (graph/topo.h ncclTopoNVLinkBw: SM80 20.0, SM90 20.6, SM100 40.1).
// A p2p channel is one CTA moving one peer's part; taking one NVLink's worth as
// its ceiling is this model's assumption (NCCL states no per-channel p2p
// bandwidth). It agrees with nccl-tests sendrecv on 8 H100 below 256 MiB
// (results/nccl-tests.md: 32 and 64 MiB at 79-82 GB/s on 4 channels, 128 MiB
// at 163 GB/s on 8: 20-20.5 GB/s a channel).
double nccl_p2p_channel_nvlink_gbs(const NcclSystem& system);

}  // namespace megascale::network
