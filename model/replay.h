// model/replay.h: dependency-driven timing of one iteration of a Schedule.
//
// The replay gives every op of a Schedule (model/schedule.h) a start and end time
// from caller-supplied op durations, honouring exactly the ordering the IR states
// and nothing else: no contention between streams, no network model. It is the
// reference timing of the IR (bubble fraction, overlap of DP and p2p streams)
// that the event-level simulator in sim/ must reproduce on the same inputs.
//
// Semantics. Each (pipeline rank, stream) is an in-order queue. An op starts at
// max(end of the previous op on the same stream of its rank, end of all its
// deps); everything starts at t = 0. A Send ends at start + duration (the
// transfer time); a Recv ends at max(its start, the end of its matching Send)
// and its own duration is ignored. Every other op ends at start + duration.
// The computation is a topological sweep over the graph (stream order, deps,
// send -> recv), O(ops + edges).
//
// Errors: a malformed schedule (dep not earlier on its rank, recv whose match is
// not a matching send) throws std::invalid_argument; a schedule in which no op
// can make progress while ops remain (a cycle through receives) throws
// std::logic_error naming the blocked rank and op.
//
// Thread-safety: free functions without shared state; `duration` is called
// from the calling thread only, once per non-Recv op.
#pragma once

#include <functional>
#include <vector>

#include "model/schedule.h"

namespace megascale::model {

struct OpTiming {
  double start_s = 0;
  double end_s = 0;
};

// Duration in seconds of op `op` of pipeline rank `pp_rank`. For a Send it is the
// transfer time; a Recv's own duration is ignored (see semantics). Must be >= 0.
using DurationFn = std::function<double(int pp_rank, const Op& op)>;

struct ReplayResult {
  double iteration_s = 0;                     // max end over all ops
  std::vector<std::vector<OpTiming>> timing;  // [pp_rank][op index]
  std::vector<double> compute_busy_s;         // per rank: sum of Forward+Backward durations
};

ReplayResult replay(const Schedule& s, const DurationFn& duration);

// Bubble fraction of a replay: (iteration_s - max_r busy_r) / max_r busy_r, where
// busy counts Forward and Backward only. REQUIRES: max_r busy_r > 0 (throws
// std::invalid_argument otherwise).
double bubble_fraction(const ReplayResult& r);

}  // namespace megascale::model
