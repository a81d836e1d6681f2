// tests/sim/critical_path_test.cc: the critical path of a simulated timeline and
// its breakdown.
#include "sim/critical_path.h"

#include <gtest/gtest.h>

#include "model/schedule.h"
#include "sim/event_engine.h"

namespace megascale::sim {
namespace {

using model::Op;
using model::OpKind;

model::ScheduleOptions options(int pp, int vpp, int m, bool overlap) {
  model::ScheduleOptions o;
  o.pp = pp;
  o.vpp = vpp;
  o.microbatches = m;
  o.layers = pp * vpp;
  o.dp = 4;
  o.pp_overlap = overlap;
  o.dp_overlap = overlap;
  o.data_pipeline = true;
  return o;
}

// F = 1, B = 2 everywhere; sends `p2p`, DP collectives `dp`, optimizer 0.
OpParts parts_of(const Op& op, double p2p, double dp) {
  OpParts p;
  switch (op.kind) {
    case OpKind::kForward: p.compute = 1; break;
    case OpKind::kBackward: p.compute = 1.5, p.tp = 0.5; break;
    case OpKind::kSendActivation:
    case OpKind::kSendGradient: p.pp = p2p; break;
    case OpKind::kDpAllGather:
    case OpKind::kDpReduceScatter:
    case OpKind::kDpAllReduce: p.dp = dp; break;
    default: break;
  }
  return p;
}

PathBreakdown analyse(const model::Schedule& s, double p2p, double dp, double* iteration,
                      std::vector<PathSegment>* path) {
  const EventTimeline t =
      run_events(s, 1, [&](int, int, const Op& op) { return parts_of(op, p2p, dp).total(); });
  *iteration = t.iteration_s;
  *path = critical_path(s, t);
  const int M = s.options.microbatches, V = s.options.vpp;
  OpParts busy;
  busy.compute = M * V * 2.5;
  busy.tp = M * V * 0.5;
  std::vector<std::vector<OpParts>> all(1, std::vector<OpParts>(s.ranks.size(), busy));
  return attribute_path(
      s, *path, [&](int, int, const Op& op) { return parts_of(op, p2p, dp); }, all);
}

TEST(CriticalPath, ZeroCommunicationBubbleIsInterleavedTheory) {
  const int shapes[][3] = {{4, 1, 8}, {4, 2, 8}, {8, 3, 16}};
  for (const auto& sh : shapes) {
    const int P = sh[0], V = sh[1], M = sh[2];
    const model::Schedule s = model::build_schedule(options(P, V, M, false));
    double iteration = 0;
    std::vector<PathSegment> path;
    const PathBreakdown b = analyse(s, 0.0, 0.0, &iteration, &path);
    // REFERENCE.md: with zero communication the bubble fraction is (P-1)/(V*M).
    EXPECT_NEAR(iteration, (M * V + P - 1) * 3.0, 1e-9);
    EXPECT_NEAR(b.breakdown.compute_s + b.breakdown.tp_exposed_s, M * V * 3.0, 1e-9);
    EXPECT_NEAR(b.breakdown.tp_exposed_s, M * V * 0.5, 1e-9);
    EXPECT_NEAR(b.breakdown.bubble_s / b.busy_s, (P - 1.0) / (V * M), 1e-9);
    // The path covers [0, iteration] without gaps.
    ASSERT_FALSE(path.empty());
    EXPECT_EQ(path.front().start_s, 0.0);
    EXPECT_NEAR(path.back().end_s, iteration, 1e-12);
    for (size_t i = 1; i < path.size(); ++i) EXPECT_NEAR(path[i].start_s, path[i - 1].end_s, 1e-9);
  }
}

TEST(CriticalPath, ExposedCommunicationIsCountedWhereItIs) {
  // Blocking p2p (on the compute stream) and DP after the last backward: both
  // show up on the path; the breakdown still adds up to the iteration.
  const model::Schedule s = model::build_schedule(options(4, 2, 8, false));
  double iteration = 0;
  std::vector<PathSegment> path;
  const PathBreakdown b = analyse(s, 0.1, 0.7, &iteration, &path);
  const model::TimeBreakdown& t = b.breakdown;
  EXPECT_GT(t.pp_exposed_s, 0.1);
  // ZeRO-1 without overlap: two reduce-scatters (V = 2) after the last
  // backward, the optimizer step, then two parameter all-gathers.
  EXPECT_NEAR(t.dp_exposed_s, 4 * 0.7, 1e-9);
  EXPECT_NEAR(t.total(), iteration, 1e-9);
  // Overlapped: asynchronous p2p and per-chunk reduce-scatter hide most of it.
  const model::Schedule o = model::build_schedule(options(4, 2, 8, true));
  double iteration_o = 0;
  const PathBreakdown bo = analyse(o, 0.1, 0.7, &iteration_o, &path);
  EXPECT_LT(bo.breakdown.pp_exposed_s, t.pp_exposed_s);
  EXPECT_LT(iteration_o, iteration);
}

}  // namespace
}  // namespace megascale::sim
