// sim/event_engine.h: one iteration of a Schedule IR executed on SimGrid S4U.
//
// defines: ReplicaDurationFn, EventRunStats, EventTimeline, run_events
//
// What it models
// --------------
// Every (data-parallel replica, pipeline rank) becomes one SimGrid host; every
// stream of that rank that has ops (compute, tp_comm, pp_send, pp_recv, dp_comm;
// model/schedule.h) becomes one S4U actor that executes the stream's ops in list
// order. An op starts when the previous op of its stream and all its `deps` have
// ended; then
//   - Forward / Backward / DataLoad / OptimizerStep / Send: the actor sleeps for
//     the op's duration (this_actor::sleep_for, a SimGrid activity). A Send is
//     eager, as in model/replay.h: it ends after its transfer time whether or not
//     the receiver has posted its receive;
//   - Recv: ends when its matching Send (on the peer rank of the same replica)
//     has ended, or at its own start if that is later; its duration is ignored;
//   - DP collectives (kDpAllGather, kDpReduceScatter, kDpAllReduce) are
//     synchronous across the simulated replicas: op i of rank r ends at
//     max over replicas of its start + the duration (of the replica that arrived
//     last). With one replica this is start + duration.
// With one replica these are exactly model::replay()'s semantics, so the two
// agree on the same durations, to rounding (tests/sim/event_engine_test.cc); the
// replicas are how stragglers break data-parallel symmetry (sim/job_sim.h).
//
// NIC sharing (EventOptions::share_nic): the durations of Sends and DP
// collectives are each op's time with the NICs to itself (network/ already
// shares the fabric among all groups doing the same collective). With
// share_nic, every (replica, rank) also gets two hosts of speed kNicWorkPerS,
// "<name>.nic-tx" and "<name>.nic-rx", the sending and receiving sides of its
// NICs (full duplex), and such an op executes duration x kNicWorkPerS units of
// work on two of them at once instead of sleeping: a Send on its rank's sending
// side and its peer's receiving side, a DP collective (a ring: it sends and
// receives) on both sides of its own rank; it ends when both are done. SimGrid's
// max-min sharing then slows ops that overlap in time on the same side (a p2p
// send under a DP reduce-scatter, two sends of an interleaved schedule, two
// transfers into one rank) in proportion, as NCCL kernels sharing one NIC do.
// A DP collective loads the NICs of the replica that arrives last (the one
// whose timing gates it). A send to a failed host never completes (its stream
// hangs, sim/hang_analysis.h names the peer). Off, the semantics are exactly
// replay()'s.
//
// Receives: a kPpRecv stream (pp_overlap) holds only receives, which take no
// time of their own. Its receives are resolved by the actors that depend on
// them (a compute stream waiting for its input) with the times the stream's
// own actor would have given them: such a stream gets no actor, which saves
// one suspension per receive. Measured on the 175B / 12,288-GPU scenario with
// all 192 replicas: see sim/README.md. A failure run keeps the actors (the hang
// analysis reads which receive a stream is blocked in).
//
// Waiting: an actor that needs an op that has not ended registers itself on
// that op and suspends itself (s4u::this_actor::suspend); the actor that ends
// the op resumes the registered waiters. SimGrid schedules actors one at a
// time, so the bookkeeping needs no locks.
//
// SimGrid engine lifetime (measured on SimGrid 3.32, Debian libsimgrid-dev)
// --------------------------------------------------------------------------
// Only one s4u::Engine may exist at a time, but an Engine can be deleted and a
// new one created in the same process (100 create / run / delete cycles: no
// error, ~70 KB of memory kept per cycle). The simulated clock is a static of
// SimGrid's kernel and is NOT reset by a new Engine, and a sealed root zone
// accepts no new hosts. So every run_events() call creates a fresh Engine with
// exactly the hosts it needs, runs it, deletes it, and reports times relative
// to the clock at its start. The first run of a process starts at clock 0 and
// matches model::replay() to rounding (measured: at most 1.4e-16 s on a
// 2,296-op schedule; SimGrid advances concurrent sleeps by subtracting the
// elapsed time from their remaining durations); later runs also carry the
// rounding of the clock offset (measured: < 2e-12 s after 500 s of simulated
// time). A deadlock left in SimGrid would not crash it (the engine reports it
// and returns), but run_events() checks the schedule first with
// model::replay() and never starts SimGrid on a schedule that cannot complete.
//
// Errors: a malformed schedule or a cycle through receives throws as
// model::replay() does (std::invalid_argument / std::logic_error); a negative
// or non-finite duration throws std::invalid_argument naming the op; replicas
// < 1 or a failure outside the simulated hosts or at a negative / non-finite
// time throws std::invalid_argument.
//
// Thread-safety: SimGrid allows one engine per process at a time, so calls are
// serialised by a process-wide mutex (concurrent callers wait). `duration` is
// called from the calling thread, before the simulation starts, once per op of
// every replica.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "model/replay.h"    // defines: OpTiming
#include "model/schedule.h"  // defines: Schedule, Op

namespace megascale::sim {

// Duration in seconds of `op` on pipeline rank `pp_rank` of simulated replica
// `replica` (0-based). For a Recv it is ignored. Must be >= 0 and finite.
using ReplicaDurationFn = std::function<double(int replica, int pp_rank, const model::Op& op)>;

struct EventRunStats {
  int hosts = 0;             // SimGrid hosts (replicas x pipeline ranks)
  int actors = 0;            // S4U actors (one per non-empty stream of a rank)
  int64_t ops = 0;           // ops executed, all replicas
  int64_t activities = 0;    // sleeps started (ops with a positive duration)
  double engine_wall_s = 0;  // wall time of create platform + Engine::run + teardown
};

// How far an op got (a run with a host failure leaves some ops unfinished).
enum class OpState : uint8_t { kNotStarted, kStarted, kEnded };

struct EventTimeline {
  int replicas = 0;
  double iteration_s = 0;  // max end over all ops that ended, all replicas
  // [replica][pp_rank][op index]: seconds since the start of the run (an op not
  // ended has end 0; not started, start 0 too: see `state`).
  std::vector<std::vector<std::vector<model::OpTiming>>> timing;
  std::vector<std::vector<std::vector<OpState>>> state;  // same shape
  bool complete = true;     // every op ended (false only after a host failure)
  double failed_at_s = -1;  // when the failed host went down (-1: no failure, or after the end)
  EventRunStats stats;

  const model::OpTiming& at(int replica, int pp_rank, int op) const {
    return timing[replica][pp_rank][op];
  }
};

// A host failure injected into the run: the host of (replica, pp_rank) (and its
// NIC host) is turned off at `at_s` seconds after the start (SimGrid
// Host::turn_off: its actors die, their activities are cancelled). Ops of other
// ranks that need it wait forever; SimGrid ends the run when nothing can move
// (its deadlock report is sent to /dev/null) and the timeline says which ops
// ended, which were running and which never started.
struct HostFailure {
  int replica = 0;  // simulated replica index (0-based, < replicas)
  int rank = 0;     // pipeline rank
  double at_s = 0;  // >= 0
};

struct EventOptions {
  bool share_nic = false;  // see "NIC sharing" above
  std::optional<HostFailure> failure;
  // Receives of kPpRecv streams resolved by the actors that need them rather
  // than by actors of their own (same times; see "Receives" above). Off only
  // to compare the two ways; a run with `failure` always uses actors.
  bool inline_recv = true;
};

// Units of NIC work per second of exclusive NIC time (any positive scale works;
// 1e9 keeps SimGrid's work-amount precision, 1e-5 units, at 1e-14 s).
inline constexpr double kNicWorkPerS = 1e9;

// Executes one iteration of `schedule` for `replicas` data-parallel replicas.
EventTimeline run_events(const model::Schedule& schedule, int replicas,
                         const ReplicaDurationFn& duration, const EventOptions& options = {});

}  // namespace megascale::sim
