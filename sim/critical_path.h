// sim/critical_path.h: where the time of a simulated iteration goes.
//
// defines: PathSegment, critical_path, PartsFn, PathBreakdown, attribute_path
//
// The critical path is walked back from the op that ends last. At each op the
// walk steps to what held it back:
//   - a Recv that ended after it started waited for its Send: the walk jumps to
//     the Send on the peer rank (the Recv itself adds nothing);
//   - a DP collective shared by several simulated replicas waited for the last
//     replica to arrive: the walk continues on that replica, and the op's
//     segment is from that arrival to its end;
//   - any other op: its whole duration is on the path, and the walk continues
//     with the predecessor (previous op of its stream, or a dep) that ended
//     last - the one it started on.
// The segments then cover [0, iteration] without gaps (a gap would be counted
// as bubble).
//
// Breakdown (the categories of model::TimeBreakdown, summing to the iteration):
//   segments of the path that are not Forward/Backward are exposed time:
//   Send segments pp_exposed, DP collectives dp_exposed, DataLoad data,
//   OptimizerStep optimizer (+ its tied-embedding all-reduce as pp_exposed),
//   gaps bubble. The Forward/Backward time on the path is the busiest rank's
//   busy time (the critical rank: the (replica, pipeline rank) with the most
//   forward+backward time, stragglers included), split into compute,
//   recompute and tp_exposed by its parts, plus the pipeline bubble: the rest,
//   spent computing on other ranks while the critical rank had nothing to do
//   (fill and drain). Should the path hold less compute than the critical
//   rank's busy time (exposed communication on other ranks overlapping its
//   compute), the bubble is 0 and the busy parts are scaled down to the path's
//   compute. By dimension: TP = tp_exposed, PP = pp_exposed + bubble,
//   DP = dp_exposed.
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <vector>

#include "model/estimator.h"  // defines: TimeBreakdown
#include "model/schedule.h"
#include "sim/event_engine.h"
#include "sim/op_costs.h"

namespace megascale::sim {

struct PathSegment {
  int replica = 0, pp_rank = 0, op = -1;  // op = -1: a gap (nothing ran)
  double start_s = 0, end_s = 0;
  double length_s() const { return end_s - start_s; }
};

// Segments from time 0 to the end of the iteration, in time order.
std::vector<PathSegment> critical_path(const model::Schedule& s, const EventTimeline& t);

// The parts (at the speed it ran) of op `op` of (replica, pp_rank).
using PartsFn = std::function<OpParts(int replica, int pp_rank, const model::Op& op)>;

struct PathBreakdown {
  model::TimeBreakdown breakdown;  // sums to the iteration time
  int critical_replica = 0;        // simulated replica index
  int critical_rank = 0;           // pipeline rank
  double busy_s = 0;               // compute + recompute + tp_exposed
};

// `busy[replica][pp_rank]`: the sum of the parts of that rank's Forward and
// Backward ops (at the speed it ran).
PathBreakdown attribute_path(const model::Schedule& s, const std::vector<PathSegment>& path,
                             const PartsFn& parts, const std::vector<std::vector<OpParts>>& busy);

}  // namespace megascale::sim
