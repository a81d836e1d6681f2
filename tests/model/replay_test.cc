// Tests of the dependency-driven replay (model/replay.h): hand-timed small
// pipelines, the interleaved-1F1B bubble fraction (P-1)/(V*M) with free
// communication (REFERENCE.md, "Megatron-LM behaviour"), the effect of DP and
// p2p overlap, and deadlock / malformed-schedule detection.

#include "model/replay.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "model/schedule.h"

namespace megascale::model {
namespace {

ScheduleOptions pipeline(int pp, int microbatches, int vpp) {
  ScheduleOptions o;
  o.pp = pp;
  o.microbatches = microbatches;
  o.vpp = vpp;
  o.layers = pp * vpp;
  return o;
}

// Per-kind durations in seconds; everything not named takes 0.
struct Durations {
  double forward_s = 0;
  double backward_s = 0;
  double send_s = 0;
  double data_load_s = 0;
  double dp_s = 0;
  double optimizer_s = 0;

  DurationFn fn() const {
    return [d = *this](int, const Op& op) {
      switch (op.kind) {
        case OpKind::kForward: return d.forward_s;
        case OpKind::kBackward: return d.backward_s;
        case OpKind::kSendActivation:
        case OpKind::kSendGradient: return d.send_s;
        case OpKind::kDataLoad: return d.data_load_s;
        case OpKind::kDpAllGather:
        case OpKind::kDpReduceScatter:
        case OpKind::kDpAllReduce: return d.dp_s;
        case OpKind::kOptimizerStep: return d.optimizer_s;
        default: return 0.0;
      }
    };
  }
};

int index_of(const RankSchedule& rank, OpKind kind, int microbatch, int chunk) {
  for (int i = 0; i < static_cast<int>(rank.ops.size()); ++i) {
    const Op& op = rank.ops[i];
    if (op.kind == kind && op.microbatch == microbatch && op.chunk == chunk) return i;
  }
  return -1;
}

TEST(Replay, TwoStagesOneMicrobatchByHand) {
  ScheduleOptions o = pipeline(2, 1, 1);
  o.data_pipeline = true;
  const Schedule s = build_schedule(o);
  const Durations d{.forward_s = 1.0, .backward_s = 2.0, .send_s = 0.5, .optimizer_s = 0.25};
  const ReplayResult r = replay(s, d.fn());
  // Rank 1: RecvAct [0,1.5] F [1.5,2.5] B [2.5,4.5] SendGrad [4.5,5] Step [5,5.25].
  // Rank 0: F [0,1] SendAct [1,1.5] RecvGrad [1.5,5] B [5,7] Step [7,7.25].
  const int rank0_backward = index_of(s.ranks[0], OpKind::kBackward, 0, 0);
  const int rank1_forward = index_of(s.ranks[1], OpKind::kForward, 0, 0);
  EXPECT_DOUBLE_EQ(r.timing[1][rank1_forward].start_s, 1.5);
  EXPECT_DOUBLE_EQ(r.timing[0][rank0_backward - 1].start_s, 1.5);  // the blocking recv
  EXPECT_DOUBLE_EQ(r.timing[0][rank0_backward - 1].end_s, 5.0);
  EXPECT_DOUBLE_EQ(r.timing[0][rank0_backward].start_s, 5.0);
  EXPECT_DOUBLE_EQ(r.timing[1].back().end_s, 5.25);
  EXPECT_DOUBLE_EQ(r.iteration_s, 7.25);
  EXPECT_EQ(r.compute_busy_s, (std::vector<double>{3.0, 3.0}));
  EXPECT_DOUBLE_EQ(bubble_fraction(r), (7.25 - 3.0) / 3.0);
}

// With free communication the bubble is (P-1)*(tf+tb) per chunk against an
// ideal M*V*(tf+tb): fraction (P-1)/(V*M), (P-1)/M for plain 1F1B.
TEST(Replay, BubbleFractionMatchesTheory) {
  for (const auto& [pp, microbatches, vpp] :
       std::vector<std::tuple<int, int, int>>{{4, 8, 1}, {4, 8, 2}, {4, 16, 4}, {8, 16, 2},
                                              {8, 64, 6}, {2, 4, 2}, {8, 16, 1}, {2, 4, 1}}) {
    for (const double backward_s : {2.0, 1.0}) {
      for (const bool pp_overlap : {false, true}) {
        ScheduleOptions o = pipeline(pp, microbatches, vpp);
        o.pp_overlap = pp_overlap;
        const Durations d{.forward_s = 1.0, .backward_s = backward_s};
        const ReplayResult r = replay(build_schedule(o), d.fn());
        const double expected = static_cast<double>(pp - 1) / (vpp * microbatches);
        EXPECT_NEAR(bubble_fraction(r), expected, 1e-9)
            << "P=" << pp << " M=" << microbatches << " V=" << vpp << " tb=" << backward_s
            << " pp_overlap=" << pp_overlap;
      }
    }
  }
}

TEST(Replay, DpOverlapHidesGradientReduction) {
  const Durations d{.forward_s = 1.0,
                    .backward_s = 2.0,
                    .data_load_s = 2.0,
                    .dp_s = 1.5,
                    .optimizer_s = 0.5};
  ScheduleOptions o = pipeline(4, 8, 2);
  o.dp = 8;
  o.zero_stage = 1;
  const Schedule exposed_schedule = build_schedule(o);
  const ReplayResult exposed = replay(exposed_schedule, d.fn());
  o.dp_overlap = true;
  const Schedule overlapped_schedule = build_schedule(o);
  const ReplayResult overlapped = replay(overlapped_schedule, d.fn());

  for (int rank = 0; rank < o.pp; ++rank) {
    auto final_backward_end_s = [&](const Schedule& s, const ReplayResult& r) {
      double end_s = 0;
      for (size_t i = 0; i < s.ranks[rank].ops.size(); ++i)
        if (s.ranks[rank].ops[i].kind == OpKind::kBackward) end_s = r.timing[rank][i].end_s;
      return end_s;
    };
    auto reduce_end_s = [&](const Schedule& s, const ReplayResult& r, int chunk) {
      return r.timing[rank][index_of(s.ranks[rank], OpKind::kDpReduceScatter, -1, chunk)].end_s;
    };
    EXPECT_LT(reduce_end_s(overlapped_schedule, overlapped, o.vpp - 1),
              final_backward_end_s(overlapped_schedule, overlapped))
        << "rank " << rank;
    EXPECT_GT(reduce_end_s(exposed_schedule, exposed, o.vpp - 1),
              final_backward_end_s(exposed_schedule, exposed))
        << "rank " << rank;
  }
  EXPECT_LT(overlapped.iteration_s, exposed.iteration_s);
  // Exposed: last backward, then RS x V, the step and AG x V one after another.
  const double compute_end_s = 2.0 + 8 * 2 * 3.0 + 3 * 3.0;  // data, busy, bubble
  EXPECT_DOUBLE_EQ(exposed.iteration_s, compute_end_s + 2 * 1.5 + 0.5 + 2 * 1.5);
}

TEST(Replay, PpOverlapHidesSendTime) {
  const Durations d{.forward_s = 1.0, .backward_s = 2.0, .send_s = 0.3};
  for (const auto& [pp, microbatches, vpp] :
       std::vector<std::tuple<int, int, int>>{{4, 8, 1}, {4, 8, 2}, {8, 16, 2}, {8, 64, 6}}) {
    ScheduleOptions o = pipeline(pp, microbatches, vpp);
    const double blocking_s = replay(build_schedule(o), d.fn()).iteration_s;
    o.pp_overlap = true;
    const double overlapped_s = replay(build_schedule(o), d.fn()).iteration_s;
    EXPECT_LT(overlapped_s, blocking_s) << "P=" << pp << " M=" << microbatches << " V=" << vpp;
  }
}

// Two ranks that each wait for the other's send before sending.
Schedule crossed_receives() {
  Schedule s;
  s.options = pipeline(2, 1, 1);
  for (int rank = 0; rank < 2; ++rank) {
    const int peer = 1 - rank;
    s.ranks.push_back(RankSchedule{
        rank,
        {Op{.kind = OpKind::kRecvActivation, .microbatch = 0, .chunk = 0, .peer = peer,
            .match = 1, .deps = {}},
         Op{.kind = OpKind::kSendActivation, .microbatch = 0, .chunk = 0, .peer = peer,
            .deps = {}}}});
  }
  return s;
}

TEST(Replay, DetectsDeadlock) {
  try {
    replay(crossed_receives(), Durations{}.fn());
    FAIL() << "expected a deadlock";
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("deadlock"), std::string::npos) << what;
    EXPECT_NE(what.find("pp rank 0 op 0 (recv_activation"), std::string::npos) << what;
    EXPECT_NE(what.find("pp rank 1 op 1 (send_activation"), std::string::npos) << what;
  }
}

TEST(Replay, RejectsMalformedSchedules) {
  Schedule wrong_match = crossed_receives();
  wrong_match.ranks[0].ops[0].match = 0;  // a Recv, not a Send
  EXPECT_THROW(replay(wrong_match, Durations{}.fn()), std::invalid_argument);

  Schedule forward_dep = crossed_receives();
  forward_dep.ranks[1].ops[0].deps = {1};  // not an earlier op
  EXPECT_THROW(replay(forward_dep, Durations{}.fn()), std::invalid_argument);

  const Schedule s = build_schedule(pipeline(2, 2, 1));
  EXPECT_THROW(replay(s, [](int, const Op&) { return -1.0; }), std::invalid_argument);
}

TEST(Replay, BubbleFractionNeedsComputeTime) {
  const ReplayResult r = replay(build_schedule(pipeline(2, 2, 1)), Durations{}.fn());
  EXPECT_THROW(bubble_fraction(r), std::invalid_argument);
}

TEST(Replay, LargestPaperScheduleCompletes) {
  // MegaScale 175B: P = 8, V = 6; M = 192 micro-batches per replica.
  ScheduleOptions o = pipeline(8, 192, 6);
  o.dp = 8;
  o.zero_stage = 1;
  o.dp_overlap = true;
  o.pp_overlap = true;
  const Durations d{.forward_s = 1.0, .backward_s = 2.0, .send_s = 0.1, .dp_s = 5.0};
  const ReplayResult r = replay(build_schedule(o), d.fn());
  EXPECT_EQ(r.timing.size(), 8u);
  EXPECT_GT(r.iteration_s, 192 * 6 * 3.0);
}

}  // namespace
}  // namespace megascale::model
