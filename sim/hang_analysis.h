// sim/hang_analysis.h: what a step interrupted by a host failure looks like, rank
// by rank, and where the wait chains lead (MegaScale NSDI'24 section 4: a failed
// or hung rank stalls its pipeline neighbours through p2p and every replica
// through the data-parallel collectives; the job hangs until detection).
//
// defines: RankWait, HangReport, analyse_hang
//
// Input: the schedule and the timeline of sim/event_engine.h run with a
// HostFailure. For every simulated (replica, pipeline rank) it finds the first op
// of each stream that did not end and why:
//   - the failed host's ops: dead (the host is down: no heartbeat);
//   - a receive that started: waits for its send on the peer rank;
//   - a DP collective that started: waits for the replicas that never reached it;
//   - an op that never started: waits for whatever its first unfinished
//     dependency on the same rank waits for;
//   - a rank that finished its ops waits at the end of the step for every rank
//     that did not (Megatron-LM's optimizer step all-reduces the global gradient
//     norm over all GPUs; the Schedule IR has no op for it, sim/README.md).
// A rank waits for the other ranks its streams wait for. Following these edges
// from every blocked rank gives the ranks the chains end at: the localisation a
// wait-for graph of the real job (p2p and collective progress, heartbeats) gives.
// After a single host failure they end at that host.
//
// Thread-safety: pure function.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/schedule.h"
#include "sim/event_engine.h"

namespace megascale::sim {

struct RankWait {
  int replica = 0;  // simulated replica index
  int rank = 0;     // pipeline rank
  enum class State { kFinished, kDead, kBlocked } state = State::kFinished;
  double last_progress_s = 0;  // latest end of its ops that ended
  int blocked_op = -1;         // kBlocked / kDead: the op it is stuck at (first stream with one)
  std::string blocked_on;      // e.g. "recv activation mb 12 chunk 3 from pp rank 2"
  // Ranks (replica, pp rank) it waits for: its streams' (kBlocked), or every rank
  // that did not finish (kFinished in a hung step). Empty otherwise.
  std::vector<std::pair<int, int>> waits_for;
};

struct HangReport {
  bool hung = false;        // the step did not finish
  double failed_at_s = -1;  // when the host went down (-1: it did not, before the end)
  std::vector<RankWait> ranks;               // every simulated (replica, rank), replica-major
  std::vector<std::pair<int, int>> roots;    // where the wait chains end (sorted)
  int blocked = 0;                           // ranks in kBlocked
  int waiting_at_step_end = 0;               // finished ranks of a hung step
  double last_progress_s = 0;                // the latest any surviving rank moved
};

// REQUIRES: `t` from run_events on `s` (same shape); `failure` the one injected.
HangReport analyse_hang(const model::Schedule& s, const EventTimeline& t, const HostFailure& failure);

}  // namespace megascale::sim
