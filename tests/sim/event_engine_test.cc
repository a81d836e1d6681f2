// tests/sim/event_engine_test.cc: the SimGrid execution of the Schedule IR
// against model::replay (the dependency-exact reference) on the same durations.
#include "sim/event_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "model/replay.h"
#include "model/schedule.h"
#include "tests/sim/schedule_options.h"

namespace megascale::sim {
namespace {

using model::Op;
using model::OpKind;

using testing::options;

// Irregular but deterministic durations: every rank a little different, the
// last stage heavier (like the output head), communication `comm_scale` x.
model::DurationFn durations(double comm_scale) {
  return [comm_scale](int rank, const Op& op) -> double {
    const double skew = 1.0 + 0.01 * rank;
    switch (op.kind) {
      case OpKind::kDataLoad: return 0.004;
      case OpKind::kForward: return 0.010 * skew + (op.chunk == 1 ? 0.0013 : 0.0);
      case OpKind::kBackward: return 0.021 * skew + 0.0001 * op.microbatch;
      case OpKind::kSendActivation:
      case OpKind::kSendGradient: return 0.0007 * comm_scale;
      case OpKind::kRecvActivation:
      case OpKind::kRecvGradient: return 0.0;
      case OpKind::kDpAllGather: return 0.003 * comm_scale;
      case OpKind::kDpReduceScatter:
      case OpKind::kDpAllReduce: return 0.006 * comm_scale;
      case OpKind::kOptimizerStep: return 0.002;
    }
    return 0.0;
  };
}

ReplicaDurationFn same_for_all_replicas(const model::DurationFn& f) {
  return [f](int, int rank, const Op& op) { return f(rank, op); };
}

void expect_matches_replay(const model::ScheduleOptions& o, double comm_scale) {
  SCOPED_TRACE("P=" + std::to_string(o.pp) + " V=" + std::to_string(o.vpp) + " M=" +
               std::to_string(o.microbatches) + " overlap=" + std::to_string(o.pp_overlap) +
               " comm=" + std::to_string(comm_scale));
  const model::Schedule s = model::build_schedule(o);
  const model::DurationFn f = durations(comm_scale);
  const model::ReplayResult ref = model::replay(s, f);
  const EventTimeline t = run_events(s, 1, same_for_all_replicas(f));
  // SimGrid's clock keeps running across runs in one process (event_engine.h):
  // times are exact up to the rounding of that offset.
  const double tol = 1e-9 * ref.iteration_s;
  EXPECT_NEAR(t.iteration_s, ref.iteration_s, tol);
  for (int r = 0; r < o.pp; ++r) {
    ASSERT_EQ(t.timing[0][r].size(), ref.timing[r].size());
    for (size_t i = 0; i < ref.timing[r].size(); ++i) {
      ASSERT_NEAR(t.timing[0][r][i].start_s, ref.timing[r][i].start_s, tol) << "rank " << r << " op " << i;
      ASSERT_NEAR(t.timing[0][r][i].end_s, ref.timing[r][i].end_s, tol) << "rank " << r << " op " << i;
    }
  }
}

TEST(EventEngine, ZeroCommunicationReproducesReplayForSeveralShapes) {
  // (P, V, M): plain 1F1B, interleaved, more stages than micro-batches per group.
  const int shapes[][3] = {{1, 1, 4}, {2, 1, 4}, {4, 1, 8}, {4, 2, 8}, {8, 3, 16}, {4, 4, 4}};
  for (const auto& sh : shapes)
    for (bool overlap : {false, true}) expect_matches_replay(options(sh[0], sh[1], sh[2], 4, overlap), 0.0);
}

TEST(EventEngine, WithCommunicationStillReproducesReplay) {
  for (bool overlap : {false, true}) {
    expect_matches_replay(options(4, 2, 8, 4, overlap), 1.0);
    expect_matches_replay(options(8, 1, 8, 1, overlap), 5.0);  // no DP ops
  }
}

bool uses_nic(OpKind k) {
  return k == OpKind::kSendActivation || k == OpKind::kSendGradient || k == OpKind::kDpAllGather ||
         k == OpKind::kDpReduceScatter || k == OpKind::kDpAllReduce;
}

// Length of the union of intervals.
double union_length(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, lo = 0, hi = -1;
  for (const auto& [a, b] : v) {
    if (a > hi) {
      if (hi > lo) total += hi - lo;
      lo = a;
      hi = b;
    } else {
      hi = std::max(hi, b);
    }
  }
  if (hi > lo) total += hi - lo;
  return total;
}

// With NIC sharing a rank's NICs are busy at least for the exclusive-NIC time
// of all its sends and DP collectives (the union of those ops' intervals covers
// their sum: the sending side runs them at full rate between them, and a
// transfer may wait longer for its receiver's side), and ops that overlap are
// stretched. Without sharing, overlapping ops each take their own duration
// (replay semantics) and the union is shorter than the sum.
TEST(EventEngine, SharedNicIsWorkConservingAndStretchesOverlappingTransfers) {
  const model::Schedule s = model::build_schedule(options(4, 2, 8, 4, true));
  const model::DurationFn f = durations(5.0);  // heavy traffic: sends overlap DP collectives
  const EventTimeline shared = run_events(s, 1, same_for_all_replicas(f), EventOptions{true, std::nullopt});
  const EventTimeline alone = run_events(s, 1, same_for_all_replicas(f), EventOptions{false, std::nullopt});
  int stretched = 0;
  bool any_overlap_alone = false;
  for (int r = 0; r < 4; ++r) {
    double work = 0;
    std::vector<std::pair<double, double>> busy_shared, busy_alone;
    for (size_t i = 0; i < s.ranks[r].ops.size(); ++i) {
      const Op& op = s.ranks[r].ops[i];
      if (!uses_nic(op.kind)) continue;
      const double d = f(r, op);
      work += d;
      const model::OpTiming& a = shared.timing[0][r][i];
      busy_shared.emplace_back(a.start_s, a.end_s);
      busy_alone.emplace_back(alone.timing[0][r][i].start_s, alone.timing[0][r][i].end_s);
      EXPECT_GE(a.end_s - a.start_s, d - 1e-9) << "sharing never speeds a transfer up";
      if (a.end_s - a.start_s > d + 1e-6) ++stretched;
    }
    EXPECT_GE(union_length(busy_shared), work - 1e-9 * shared.iteration_s) << "rank " << r;
    if (union_length(busy_alone) < work - 1e-6) any_overlap_alone = true;
  }
  EXPECT_TRUE(any_overlap_alone) << "the case must have overlapping transfers to mean anything";
  EXPECT_GT(stretched, 0);
  EXPECT_GE(shared.iteration_s, alone.iteration_s - 1e-9);
  EXPECT_EQ(shared.stats.hosts, 3 * alone.stats.hosts);  // sending and receiving NIC sides per rank
}

// Receiving-NIC sharing: two ranks sending to the same rank at once share its
// NICs' receiving side (each takes twice its exclusive time); sending to two
// different ranks they do not. A rank's own send and receive do not compete
// (full duplex).
TEST(EventEngine, TransfersIntoOneRankShareItsReceivingSide) {
  auto send = [](int peer) {
    return Op{.kind = OpKind::kSendActivation, .stream = model::Stream::kPpSend, .peer = peer, .deps = {}};
  };
  auto recv = [](int peer, int match) {
    return Op{.kind = OpKind::kRecvActivation, .stream = model::Stream::kPpRecv, .peer = peer, .match = match,
              .deps = {}};
  };
  model::Schedule into_one;
  into_one.options.pp = 3;
  into_one.options.layers = 3;
  into_one.ranks = {model::RankSchedule{0, {send(1)}},
                    model::RankSchedule{1, {recv(0, 0), recv(2, 0)}},
                    model::RankSchedule{2, {send(1)}}};
  const auto one_s = [](int, int, const Op& op) { return model::is_send(op.kind) ? 1.0 : 0.0; };
  const EventTimeline shared = run_events(into_one, 1, one_s, EventOptions{true, std::nullopt});
  EXPECT_NEAR(shared.timing[0][0][0].end_s, 2.0, 1e-9);
  EXPECT_NEAR(shared.timing[0][2][0].end_s, 2.0, 1e-9);
  EXPECT_NEAR(run_events(into_one, 1, one_s, EventOptions{false, std::nullopt}).iteration_s, 1.0, 1e-9);
  // 0 -> 1 while 1 -> 2: different receivers, and rank 1 sends while it receives.
  model::Schedule chain;
  chain.options.pp = 3;
  chain.options.layers = 3;
  chain.ranks = {model::RankSchedule{0, {send(1)}},
                 model::RankSchedule{1, {recv(0, 0), send(2)}},
                 model::RankSchedule{2, {recv(1, 1)}}};
  const EventTimeline c = run_events(chain, 1, one_s, EventOptions{true, std::nullopt});
  EXPECT_NEAR(c.timing[0][0][0].end_s, 1.0, 1e-9);
  EXPECT_NEAR(c.timing[0][1][1].end_s, 1.0, 1e-9);
}

TEST(EventEngine, RepeatedRunsInOneProcessAgree) {
  const model::Schedule s = model::build_schedule(options(4, 2, 8, 2, false));
  const ReplicaDurationFn f = same_for_all_replicas(durations(1.0));
  const EventTimeline a = run_events(s, 1, f);
  const EventTimeline b = run_events(s, 1, f);
  EXPECT_NEAR(a.iteration_s, b.iteration_s, 1e-12 * a.iteration_s);
  EXPECT_GT(a.stats.actors, 0);
  EXPECT_EQ(a.stats.hosts, 4);
}

// The first simulation of a process starts at SimGrid clock 0; its times then
// differ from model::replay only by the rounding of SimGrid advancing
// concurrent sleeps (measured: 1.4e-16 s on this schedule). "threadsafe" death
// tests re-execute this binary for the statement alone, so it runs in a
// process that has not simulated anything yet.
TEST(EventEngineDeathTest, FirstRunOfAProcessMatchesReplayToRounding) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const model::Schedule s = model::build_schedule(options(8, 3, 16, 4, true));
        const model::DurationFn f = durations(1.0);
        const model::ReplayResult ref = model::replay(s, f);
        const EventTimeline t = run_events(s, 1, same_for_all_replicas(f));
        double worst = std::abs(t.iteration_s - ref.iteration_s);
        for (int r = 0; r < 8; ++r)
          for (size_t i = 0; i < ref.timing[r].size(); ++i)
            worst = std::max({worst, std::abs(t.timing[0][r][i].start_s - ref.timing[r][i].start_s),
                              std::abs(t.timing[0][r][i].end_s - ref.timing[r][i].end_s)});
        std::exit(worst <= 1e-14 * ref.iteration_s ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(EventEngine, IdenticalReplicasBehaveLikeOne) {
  const model::Schedule s = model::build_schedule(options(4, 2, 8, 8, true));
  const ReplicaDurationFn f = same_for_all_replicas(durations(1.0));
  const EventTimeline one = run_events(s, 1, f);
  const EventTimeline three = run_events(s, 3, f);
  EXPECT_NEAR(three.iteration_s, one.iteration_s, 1e-12 * one.iteration_s);
  for (int rep = 0; rep < 3; ++rep)
    for (int r = 0; r < 4; ++r)
      for (size_t i = 0; i < one.timing[0][r].size(); ++i)
        ASSERT_NEAR(three.at(rep, r, i).end_s, one.at(0, r, i).end_s, 1e-12);
}

// Receives of pp_overlap's receive streams are resolved inline by the actors
// that need them (no actor of their own): the same ops get the same times as
// with receive actors, with replicas that differ and NICs shared (so that the
// order transfers start in matters), and each such stream saves one actor.
TEST(EventEngine, InlineReceivesGiveTheTimesOfReceiveActors) {
  for (const bool share_nic : {false, true}) {
    SCOPED_TRACE(share_nic ? "shared NICs" : "exclusive NICs");
    const model::Schedule s = model::build_schedule(options(4, 2, 8, 3, true));
    const model::DurationFn base = durations(3.0);  // transfers long enough to overlap
    const ReplicaDurationFn f = [base](int replica, int rank, const Op& op) {
      return base(rank, op) * (1.0 + 0.07 * replica * ((rank + replica) % 3));
    };
    EventOptions with_actors;
    with_actors.share_nic = share_nic;
    with_actors.inline_recv = false;
    EventOptions inline_recv = with_actors;
    inline_recv.inline_recv = true;
    const EventTimeline a = run_events(s, 3, f, with_actors);
    const EventTimeline b = run_events(s, 3, f, inline_recv);
    EXPECT_NEAR(b.iteration_s, a.iteration_s, 1e-12 * a.iteration_s);
    EXPECT_EQ(b.stats.actors, a.stats.actors - 3 * 4) << "one receive actor per rank and replica fewer";
    EXPECT_EQ(b.stats.activities, a.stats.activities);
    int recvs = 0;
    for (int rep = 0; rep < 3; ++rep) {
      for (int r = 0; r < 4; ++r) {
        for (size_t i = 0; i < s.ranks[r].ops.size(); ++i) {
          recvs += model::is_recv(s.ranks[r].ops[i].kind);
          ASSERT_NEAR(b.at(rep, r, i).start_s, a.at(rep, r, i).start_s, 1e-12) << rep << " " << r << " " << i;
          ASSERT_NEAR(b.at(rep, r, i).end_s, a.at(rep, r, i).end_s, 1e-12) << rep << " " << r << " " << i;
          ASSERT_EQ(b.state[rep][r][i], OpState::kEnded);
        }
      }
    }
    EXPECT_GT(recvs, 0);
  }
}

TEST(EventEngine, DataParallelCollectivesWaitForTheSlowestReplica) {
  // Replica 1 computes 30% slower on every rank; the DP ops of both replicas end
  // together, at the slow replica's time, so the step is gated by it.
  model::ScheduleOptions o = options(2, 1, 4, 2, false);
  const model::Schedule s = model::build_schedule(o);
  const model::DurationFn base = durations(1.0);
  const ReplicaDurationFn f = [base](int replica, int rank, const Op& op) {
    const bool compute = op.kind == OpKind::kForward || op.kind == OpKind::kBackward;
    return base(rank, op) * (compute && replica == 1 ? 1.3 : 1.0);
  };
  const EventTimeline t = run_events(s, 2, f);
  const model::ReplayResult slow =
      model::replay(s, [&](int rank, const Op& op) { return f(1, rank, op); });
  EXPECT_NEAR(t.iteration_s, slow.iteration_s, 1e-9 * slow.iteration_s);
  for (int r = 0; r < 2; ++r) {
    const auto& ops = s.ranks[r].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind != OpKind::kDpReduceScatter) continue;
      EXPECT_NEAR(t.at(0, r, i).end_s, t.at(1, r, i).end_s, 1e-12);
      EXPECT_LT(t.at(0, r, i).start_s, t.at(1, r, i).start_s);  // the fast one waited
    }
  }
}

TEST(EventEngine, BadDurationsAndReplicasAreErrors) {
  const model::Schedule s = model::build_schedule(options(2, 1, 2, 1, false));
  EXPECT_THROW(run_events(s, 0, [](int, int, const Op&) { return 1.0; }), std::invalid_argument);
  try {
    run_events(s, 1, [](int, int, const Op& op) { return op.kind == OpKind::kBackward ? -1.0 : 1.0; });
    FAIL() << "negative duration accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("backward"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_events(s, 1, [](int, int, const Op&) { return std::nan(""); }),
               std::invalid_argument);
}

TEST(EventEngine, DeadlockedScheduleIsRejectedBeforeSimGridRuns) {
  // P=2, M=4, blocking p2p: rank 0 runs F0 | F1 R(B0) B0 | F2 ... Matching its
  // first gradient receive to rank 1's last gradient send (micro-batch 3) makes
  // a cycle: that send needs micro-batch 3's activation, which rank 0 sends only
  // after the receive.
  model::Schedule s = model::build_schedule(options(2, 1, 4, 1, false));
  int last_send = -1;
  for (size_t i = 0; i < s.ranks[1].ops.size(); ++i)
    if (s.ranks[1].ops[i].kind == OpKind::kSendGradient) last_send = static_cast<int>(i);
  for (Op& op : s.ranks[0].ops) {
    if (op.kind == OpKind::kRecvGradient) {
      op.match = last_send;
      break;
    }
  }
  EXPECT_THROW(run_events(s, 1, [](int, int, const Op&) { return 1.0; }), std::logic_error);
  // The process can still simulate afterwards.
  const model::Schedule ok = model::build_schedule(options(2, 1, 2, 1, false));
  EXPECT_GT(run_events(ok, 1, [](int, int, const Op&) { return 1.0; }).iteration_s, 0.0);
}

}  // namespace
}  // namespace megascale::sim
