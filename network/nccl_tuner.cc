// network/nccl_tuner.cc: see nccl_tuner.h. Every constant below is NCCL 2.30.7's
// src/graph/tuning.cc (NVIDIA/nccl commit 5067397c), named as there, except the
// send/recv channel rules (enqueue.cc addP2pToPlan, graph/paths.cc, init.cc
// P2P_NVL_CHUNKSIZE, graph/topo.h SMxx_NVLINK_BW: the same in 2.29.2 and 2.30.7)
// and the collective channel rule (enqueue.cc topoGetAlgoInfo, device.h
// NCCL_*_MAX_NTHREADS, comm.h NCCL_*_THREAD_THRESHOLD: the same from 2.19.3 to
// 2.30.7).
#include "network/nccl_tuner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <string>

#include "network/collectives.h"

namespace megascale::network {
namespace {

enum Gen { kVolta = 0, kAmpere = 1, kHopper = 2, kBlackwell = 3 };

int generation(const NcclSystem& s) {
  return s.compute_capability >= 100 ? kBlackwell
         : s.compute_capability >= 90 ? kHopper
         : s.compute_capability >= 80 ? kAmpere
                                      : kVolta;
}

// tuning.cc baseLatencies [algorithm][LL, LL128, Simple], us.
constexpr double kBaseTree[3] = {6.8, 14.0, 8.4};
constexpr double kBaseRing[3] = {6.6, 14.0, 8.4};
// hwLatencies [NVLINK | NET][algorithm][protocol], us.
constexpr double kNvlinkTree[3] = {0.6, 1.25, 4.0};
constexpr double kNvlinkRing[3] = {0.6, 1.9, 3.4};
constexpr double kNvlinkNvls = 25.0;       // NVLS, Simple (NVLS and NVLS tree)
constexpr double kNetTree[3] = {5.0, 8.5, 14.0};
constexpr double kNetRing[3] = {2.7, 4.0, 14.0};
constexpr double kNetNvlsTree = 20.9;      // NVLS tree, Simple
// llMaxBws [row][N1, N2, N4+]: row = GPU generation in one node, CPU vendor across nodes.
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4},     // Volta-N1 / Intel-N2 / Intel-N4
                                   {87.7, 22.5, 19.0},     // Ampere-N1 / AMD-N2 / AMD-N4
                                   {141.0, 45.0, 35.0},    // Hopper-N1
                                   {282.0, 90.0, 70.0}};   // Blackwell-N1
// Per-channel caps [generation][N1, N2, N4+], GB/s.
constexpr double kPerChRingLl128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}};
constexpr double kPerChTreeLl128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
// treeCorrectionFactor [protocol][log2(bytes / 64)], 64 B .. 256 MiB.
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

int node_index(int nodes) { return nodes <= 2 ? std::max(nodes, 1) - 1 : 2; }

int log2i(int64_t v) {
  int r = 0;
  while (v > 1) {
    v >>= 1;
    ++r;
  }
  return r;
}

}  // namespace

const char* to_string(NcclProtocol protocol) {
  switch (protocol) {
    case NcclProtocol::kLL: return "LL";
    case NcclProtocol::kLL128: return "LL128";
    case NcclProtocol::kSimple: return "Simple";
  }
  return "?";
}

std::optional<NcclProtocol> parse_nccl_protocol(std::string_view name) {
  std::string s;
  for (char c : name) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (s == "ll") return NcclProtocol::kLL;
  if (s == "ll128") return NcclProtocol::kLL128;
  if (s == "simple") return NcclProtocol::kSimple;
  return std::nullopt;
}

std::optional<NcclProtocol> protocol_choice(std::string_view name) {
  if (name == "auto") return std::nullopt;
  if (const auto p = parse_nccl_protocol(name)) return p;
  throw std::invalid_argument("must be auto, LL, LL128 or Simple, got '" + std::string(name) + "'");
}

NcclSystem nccl_system_for(int compute_capability, bool amd_cpu, int channels, double nvls_busbw_gbs) {
  NcclSystem s;
  s.compute_capability = compute_capability;
  s.amd_cpu = amd_cpu;
  s.channels = std::max(1, channels);
  s.nvls_busbw_gbs = compute_capability >= 90 ? std::max(0.0, nvls_busbw_gbs) : 0.0;
  return s;
}

bool nccl_algorithm_enabled(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int nodes,
                            int ranks_per_node, const NcclSystem& system, std::string* why) {
  auto no = [&](const char* reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (op == CollectiveOp::kSendRecv) {
    if (algorithm != CollectiveAlgorithm::kRing) return no("send/recv is point-to-point (no algorithm)");
    if (protocol == NcclProtocol::kLL128) return no("NCCL's p2p runs LL or Simple");
    return true;
  }
  switch (algorithm) {
    case CollectiveAlgorithm::kRing: break;
    case CollectiveAlgorithm::kTree:
      if (op != CollectiveOp::kAllReduce) return no("tree is all-reduce only");
      break;
    case CollectiveAlgorithm::kNvls:
      if (system.nvls_busbw_gbs <= 0) return no("no NVLink SHARP (needs Hopper NVSwitch)");
      if (protocol != NcclProtocol::kSimple) return no("NVLS runs Simple only");
      if (nodes > 1) return no("NVLS across nodes needs CollNet (not on this fabric); NVLS tree instead");
      if (ranks_per_node < 2) return no("NVLS needs 2+ GPUs of the node");
      break;
    case CollectiveAlgorithm::kNvlsTree:
      if (system.nvls_busbw_gbs <= 0) return no("no NVLink SHARP (needs Hopper NVSwitch)");
      if (protocol != NcclProtocol::kSimple) return no("NVLS tree runs Simple only");
      if (op != CollectiveOp::kAllReduce) return no("NVLS tree is all-reduce only");
      if (nodes < 2) return no("NVLS tree is disabled in one node");
      if (ranks_per_node < 2) return no("NVLS needs 2+ GPUs per node");
      break;
    case CollectiveAlgorithm::kHierarchical: return no("not an NCCL algorithm (three NCCL calls)");
  }
  if (protocol == NcclProtocol::kLL128 && system.compute_capability < 70) return no("LL128 needs sm70+");
  return true;
}

double nccl_latency_us(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int ranks, int nodes,
                       double bytes, const NcclSystem& system) {
  const int p = static_cast<int>(protocol);
  nodes = std::max(1, nodes);
  const int ppn = std::max(1, ranks / nodes);
  const bool simple = protocol == NcclProtocol::kSimple;
  // getNetOverhead: 1 us Intel, 2 us AMD; x3 for Simple.
  const double net_overhead = nodes > 1 ? (system.amd_cpu ? 2.0 : 1.0) * (simple ? 3.0 : 1.0) : 0.0;
  // One GPU per node exposes the network latency fully: NCCL uses the tree's.
  const double inter_ring = ppn == 1 ? kNetTree[p] : kNetRing[p];
  if (op == CollectiveOp::kSendRecv) {
    const double hop = nodes > 1 ? inter_ring : kNvlinkRing[p];
    return kBaseRing[p] + hop;
  }
  switch (algorithm) {
    case CollectiveAlgorithm::kRing:
    case CollectiveAlgorithm::kHierarchical: {
      const bool ar = op == CollectiveOp::kAllReduce;
      const int nsteps = ar ? 2 * (ranks - 1) : ranks - 1;
      const int inter_steps = nodes == 1 ? 0 : (ar ? 2 * (nodes - 1) : nodes - 1);
      const double intra = std::max(kNvlinkRing[p], net_overhead);
      double lat = kBaseRing[p] + (nsteps - inter_steps) * intra + inter_steps * inter_ring;
      // ncclTopoGetAlgoTime: "plateau effect of ring" (multi-node Simple all-reduce
      // once each channel's chunk per rank reaches 64 B), x1.4 on sm80+.
      if (simple && nodes > 1 && ar && bytes / (static_cast<double>(system.channels) * ranks) >= 64) {
        lat *= system.compute_capability < 80 ? 1.9 : 1.4;
      }
      return lat;
    }
    case CollectiveAlgorithm::kTree: {
      return kBaseTree[p] + 2.0 * ((ppn - 1) * kNvlinkTree[p] + log2i(nodes) * kNetTree[p]);
    }
    case CollectiveAlgorithm::kNvls: return kNvlinkNvls;
    case CollectiveAlgorithm::kNvlsTree:
      return kNvlinkNvls + 2.0 * log2i(nodes) * (ppn == 1 ? kNetTree[p] : kNetNvlsTree);
  }
  return kBaseRing[p];
}

double nccl_network_post_us(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int ranks,
                             int nodes, double bytes, const NcclSystem& system) {
  if (nodes < 2) return 0.0;
  // getNetOverhead: 1 us Intel, 2 us AMD; x3 for Simple (as for rings).
  const double post_us = (system.amd_cpu ? 2.0 : 1.0) * (protocol == NcclProtocol::kSimple ? 3.0 : 1.0);
  if (op == CollectiveOp::kSendRecv) return 2.0 * post_us;  // one network hop
  switch (algorithm) {
    case CollectiveAlgorithm::kTree:
    case CollectiveAlgorithm::kNvlsTree: return 2.0 * log2i(nodes) * 2.0 * post_us;  // up and down
    case CollectiveAlgorithm::kRing:
    case CollectiveAlgorithm::kHierarchical: {
      // The time: a send and a receive post on each network step only; NCCL's
      // estimate charges max(NVLink latency, post) to every NVLink step instead
      // (nccl_latency_us), which the time takes back.
      const int p = static_cast<int>(protocol);
      const bool ar = op == CollectiveOp::kAllReduce;
      const int nsteps = ar ? 2 * (ranks - 1) : ranks - 1;
      const int inter_steps = ar ? 2 * (nodes - 1) : nodes - 1;
      const double per_step_surplus = std::max(0.0, post_us - kNvlinkRing[p]);
      double surplus = (nsteps - inter_steps) * per_step_surplus;
      if (protocol == NcclProtocol::kSimple && ar && bytes / (static_cast<double>(system.channels) * ranks) >= 64) {
        surplus *= system.compute_capability < 80 ? 1.9 : 1.4;  // NCCL's plateau factor multiplies it too
      }
      return inter_steps * 2.0 * post_us - surplus;
    }
    default: return 0.0;  // NVLS: one node
  }
}

double nccl_protocol_busbw_gbs(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int nodes,
                               double simple_busbw_gbs, const NcclSystem& system) {
  const int gen = generation(system);
  const int n = node_index(nodes);
  // llMaxBw: one node -> the GPU generation's row; several -> the CPU's
  // (row 0 Intel, row 1 AMD).
  const double ll_max = kLlMaxBw[nodes == 1 ? gen : (system.amd_cpu ? 1 : 0)][n];
  const double ch = static_cast<double>(system.channels);
  double bw = simple_busbw_gbs;
  if (op == CollectiveOp::kSendRecv) {
    // p2p LL: half the line (4 B of flag per 4 B of data), no other cap.
    return protocol == NcclProtocol::kLL ? bw * 0.5 : bw;
  }
  switch (algorithm) {
    case CollectiveAlgorithm::kRing:
    case CollectiveAlgorithm::kHierarchical:
      if (protocol == NcclProtocol::kLL) bw = std::min(ll_max, bw * 0.5);
      if (protocol == NcclProtocol::kLL128) bw = std::min(bw * 0.92, ch * kPerChRingLl128[gen][n]);
      return bw;
    case CollectiveAlgorithm::kTree:
      // The 0.92 and the per-channel cap apply to every tree all-reduce; caps are
      // NCCL's tree busBw (2 x algbw), compared here with nccl-tests' busbw
      // (2(n-1)/n x algbw): within n/(n-1).
      bw = std::min(bw * 0.92, ch * kPerChTree[gen][n]);
      if (protocol == NcclProtocol::kLL) bw = std::min(bw / 3.8, ll_max);
      if (protocol == NcclProtocol::kLL128) {
        bw = std::min(bw * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), ch * kPerChTreeLl128[gen][n]);
      }
      return bw;
    case CollectiveAlgorithm::kNvls:
    case CollectiveAlgorithm::kNvlsTree: return bw;
  }
  return bw;
}

int nccl_collective_channels(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int ranks,
                             double bytes, const NcclSystem& system) {
  const int channels = std::max(1, system.channels);
  if (op == CollectiveOp::kSendRecv) return channels;
  if (algorithm != CollectiveAlgorithm::kRing && algorithm != CollectiveAlgorithm::kTree &&
      algorithm != CollectiveAlgorithm::kHierarchical) {
    return channels;  // NVLS, NVLS tree: nvlsChannels at every size
  }
  // Threads per channel (device.h NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS,
  // NCCL_SIMPLE_MAX_NTHREADS) x bytes per thread (comm.h NCCL_LL_THREAD_THRESHOLD,
  // NCCL_LL128_THREAD_THRESHOLD, NCCL_SIMPLE_THREAD_THRESHOLD).
  constexpr double kLlPerChannelBytes = 512.0 * 8;
  constexpr double kLl128PerChannelBytes = 640.0 * 8;
  constexpr double kSimplePerChannelBytes = 512.0 * 64;
  double per_channel = protocol == NcclProtocol::kLL      ? kLlPerChannelBytes
                       : protocol == NcclProtocol::kLL128 ? kLl128PerChannelBytes
                                                          : kSimplePerChannelBytes;
  // tuning.cc: threadThresholds[RING][LL] *= nRanks.
  if (protocol == NcclProtocol::kLL && algorithm != CollectiveAlgorithm::kTree) per_channel *= std::max(1, ranks);
  if (!(bytes > 0)) return 1;
  return static_cast<int>(std::clamp(std::floor(bytes / per_channel), 1.0, static_cast<double>(channels)));
}

// One channel's share is an even share, as in NCCL 2.30.7 (commit 5067397c): the
// bus bandwidth is graph nChannels x bwIntra (src/graph/tuning.cc:324), where
// bwIntra is what the topology search debited from every link per graph
// channel (src/graph/search.cc followPath:81-123), so graph nChannels x bwIntra
// <= the GPU's NVLink total (getTotalBw:30), never a per-channel speed above
// it; ncclTopoDupChannels (search.cc:1036-1049) halves bwIntra as it doubles the
// graph's channels, and ncclTopoPostset doubles them again at run time
// (src/graph/connect.cc:460, comm->nChannels = 2 x graph nChannels, two run-time
// channels per graph channel). On an 8-GPU NVSwitch node that is 12 x 20 GB/s
// -> 24 channels on A100 (12 x SM80_NVLINK_BW 20 = 240 GB/s) and 12 x 30 GB/s ->
// 24 channels on H100 (18 x SM90_NVLINK_BW 20.6 = 370.8 GB/s): bwIntra / 2 per
// run-time channel = the busBw / comm->nChannels used here. NCCL itself never
// rates a reduced channel count: topoGetAlgoInfo (src/enqueue.cc:2092-2096)
// drops channels after choosing on all of them, and its LL cap llMaxBw
// (tuning.cc:327) bounds the total, not a channel (no per-channel ring LL cap
// exists; LL moves 8 B of data per 16 B line, src/include/device.h:75
// ncclLLFifoLine, hence the 0.5).
double nccl_channels_busbw_gbs(CollectiveAlgorithm algorithm, NcclProtocol protocol, CollectiveOp op, int nodes,
                               double simple_busbw_gbs, int channels, const NcclSystem& system) {
  if (channels >= system.channels) {
    return nccl_protocol_busbw_gbs(algorithm, protocol, op, nodes, simple_busbw_gbs, system);
  }
  NcclSystem used = system;
  used.channels = std::max(1, channels);
  const double share = static_cast<double>(used.channels) / static_cast<double>(std::max(1, system.channels));
  return nccl_protocol_busbw_gbs(algorithm, protocol, op, nodes, simple_busbw_gbs * share, used);
}

double nccl_tree_graph_busbw_gbs(double ring_graph_busbw_gbs, int nodes, double nvlink_busbw_gbs) {
  if (nodes != 2) return ring_graph_busbw_gbs;
  return std::max(ring_graph_busbw_gbs, std::min(2.0 * ring_graph_busbw_gbs, nvlink_busbw_gbs));
}

double nccl_tree_efficiency(NcclProtocol protocol, double bytes) {
  const int64_t chunks = static_cast<int64_t>(bytes) >> 6;
  if (chunks < 1) return 1.0;
  const int log_size = log2i(chunks);
  if (log_size >= 23) return 1.0;
  return kTreeCorrection[static_cast<int>(protocol)][log_size];
}

int nccl_p2p_channels(double bytes, int ranks, const NcclSystem& system) {
  auto pow2_up = [](int v) {
    int p = 1;
    while (p < v) p *= 2;
    return p;
  };
  constexpr int kMaxChannels = 64;                    // device.h MAXCHANNELS (2.29)
  constexpr double kMinPartBytes = (1 << 19) / 8.0;   // P2P_NVL_CHUNKSIZE / 8, one node
  constexpr double kMaxPartBytes = (1 << 19) * 32.0;  // P2P_NVL_CHUNKSIZE x 32
  const int p2p_channels = pow2_up(std::clamp(system.channels, 1, kMaxChannels));
  // paths.cc ncclTopoGetNchannels: 2 x (path bw / one NVLink's bw) = 2 x the
  // GPU's NVLinks to the NVSwitches: 12 on A100 (NVLink3), 18 on H100 / B200.
  const int nvlinks = system.compute_capability >= 90 ? 18 : 12;
  const int per_peer = std::min(p2p_channels, pow2_up(2 * nvlinks));
  int channels_min = per_peer;
  while (channels_min * std::max(1, ranks) > p2p_channels && channels_min > 1) channels_min /= 2;
  if (!(bytes > 0)) return 1;
  int channels = static_cast<int>(std::min<double>(channels_min, std::ceil(bytes / kMinPartBytes)));
  double part = std::max(kMinPartBytes, std::ceil(bytes / channels));
  while (part > kMaxPartBytes && channels <= per_peer / 2) {
    channels *= 2;
    part = std::ceil(bytes / channels);
  }
  return channels;
}

NcclProtocol nccl_p2p_protocol(double bytes, int ranks, int nodes, const NcclSystem& system) {
  constexpr double kLlThresholdBytes = 16384;  // enqueue.cc P2P_LL_THRESHOLD
  const int channels = nodes > 1 ? static_cast<int>(std::clamp(std::ceil(bytes / 65536.0), 1.0, 2.0))
                                 : nccl_p2p_channels(bytes, ranks, system);
  return bytes <= channels * kLlThresholdBytes ? NcclProtocol::kLL : NcclProtocol::kSimple;
}

double nccl_p2p_channel_nvlink_gbs(const NcclSystem& system) {
  const int cc = system.compute_capability;
  return cc >= 100 ? 40.1 : cc >= 90 ? 20.6 : cc == 86 ? 12.0 : cc >= 70 ? 20.0 : 18.0;  // topo.h SMxx_NVLINK_BW
}

}  // namespace megascale::network
