// network/collective_tuner.h: NCCL's automatic choice of algorithm and protocol
// for one collective, on the fabric model (what `megascale net collective` runs
// by default, and what NCCL_ALGO / NCCL_PROTO, here --algo / --proto, restrict).
//
// defines: TunerCandidate, TunedCollective, tune_collective
//
// Every (algorithm, protocol) pair that NCCL would enable for the op, the node
// count and the machine (nccl_algorithm_enabled) is timed by the
// CollectiveSimulator (flows on the fabric for the bandwidth, NCCL's latency and
// protocol ratios from nccl_tuner.h). The choice is NCCL's: by its own estimate
// (ncclTopoGetAlgoTime: latency + bytes / bandwidth), in which every algorithm
// starts from the same per-channel graph bandwidth (here: the ring's Simple bus
// bandwidth on the fabric) and converts it by its ratio - the ring by
// n / steps, the tree by 0.5 (x 0.92, caps, size corrections), NVLS by the
// profile's NVLS bandwidth; the trees' network posts (nccl_network_post_us),
// which NCCL's estimate leaves out, are left out of the ranking and kept in
// the time; so is the channel reduction of a small ring or tree collective
// (nccl_collective_channels): NCCL estimates every pair on all its channels,
// then runs the chosen one on fewer, and the time is on those. The time
// reported is the fabric model's for the chosen pair, so
// where the fabric favours the tree more or less than NCCL's estimate does,
// NCCL's choice (and its cost) is what is predicted.
// Send/recv has no estimate in NCCL: its protocol follows the size
// (nccl_p2p_protocol: LL up to nChannels x 16 KiB), unless `protocol` is given.
//
// Thread-safety: as CollectiveSimulator (not thread-safe).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "network/collectives.h"  // defines: CollectiveSimulator, CollectiveRequest, CollectiveResult
#include "network/nccl_tuner.h"   // defines: NcclProtocol

namespace megascale::network {

struct TunerCandidate {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  bool enabled = false;
  std::string why_not;  // when not enabled
  double time_s = 0;      // when enabled: the fabric model's time
  double latency_s = 0;
  double busbw_gbs = 0;
  int channels = 0;       // when enabled: the channels NCCL runs it on at this size
  double estimate_s = 0;  // NCCL's own estimate, which ranks the candidates (all channels)
};

struct TunedCollective {
  // The chosen pair's full result; its step_solves / step_memo_hits count every
  // simulator run of the tuning (the graph bandwidth and each candidate).
  CollectiveResult best;
  std::vector<TunerCandidate> candidates;  // every pair considered, in NCCL's order
};

// Times `request` (its algorithm and protocol fields are ignored) with every
// enabled pair whose algorithm is `algorithm` (or any NCCL algorithm: ring, tree,
// NVLS, NVLS tree) and whose protocol is `protocol` (or any), and returns the
// one NCCL's estimate ranks first. Throws std::invalid_argument (naming the reasons) when the
// restriction leaves no enabled pair, or as CollectiveSimulator::run does.
TunedCollective tune_collective(CollectiveSimulator& simulator, const CollectiveRequest& request,
                                std::optional<CollectiveAlgorithm> algorithm = std::nullopt,
                                std::optional<NcclProtocol> protocol = std::nullopt);

}  // namespace megascale::network
