// Diagnosis: the wait-for chain of a hang, and error keywords in logs.
#include <gtest/gtest.h>

#include "robust/detector.h"
#include "robust/diagnosis.h"

namespace megascale::robust {
namespace {

RankStatus rank_in(int rank, const std::string& group, int64_t seq, const std::string& state,
                   std::map<std::string, int64_t> seqs) {
  RankStatus s;
  s.rank = rank;
  s.node = rank;
  s.present = true;
  s.coll_op = "all_reduce";
  s.coll_group = group;
  s.coll_seq = seq;
  s.coll_state = state;
  s.seq_by_group = std::move(seqs);
  return s;
}

TEST(Diagnosis, GroupMembersFromTheName) {
  EXPECT_EQ(group_members("c3[0,2,5]"), (std::vector<int>{0, 2, 5}));
  EXPECT_TRUE(group_members("nonsense").empty());
}

TEST(Diagnosis, TheRankBehindInSequenceIsTheCulprit) {
  // Ranks 0, 1, 3 posted all_reduce #7 of the world; rank 2 entered only #6
  // (stuck before its collective: a traffic stop).
  const std::string g = "c0[0,1,2,3]";
  std::vector<RankStatus> st = {rank_in(0, g, 7, "posted", {{g, 7}}), rank_in(1, g, 7, "posted", {{g, 7}}),
                                rank_in(2, g, 6, "idle", {{g, 6}}), rank_in(3, g, 7, "posted", {{g, 7}})};
  st[2].coll_op.clear();
  const HangDiagnosis d = diagnose_hang(st);
  EXPECT_EQ(d.culprits, std::vector<int>{2});
  EXPECT_EQ(d.edges.size(), 3u);
  ASSERT_FALSE(d.lines.empty());
  EXPECT_EQ(d.lines.back(), "the wait chains end at rank 2 (node 2)");
  EXPECT_NE(d.lines[0].find("waits for rank 2"), std::string::npos) << d.lines[0];
  EXPECT_NE(d.lines[0].find("entered only #6"), std::string::npos) << d.lines[0];
}

TEST(Diagnosis, TheRankThatEnteredAndNeverPostedIsTheCulprit) {
  // A hang inside the collective: rank 1 announced #4 and never posted its data.
  const std::string g = "c1[0,1]";
  const std::vector<RankStatus> st = {rank_in(0, g, 4, "posted", {{g, 4}}), rank_in(1, g, 4, "entered", {{g, 4}})};
  const HangDiagnosis d = diagnose_hang(st);
  EXPECT_EQ(d.culprits, std::vector<int>{1});
  EXPECT_NE(d.lines[1].find("entered and never posted"), std::string::npos) << d.lines[1];
}

TEST(Diagnosis, ChainsThroughPointToPointAndGroupsEndAtOneRank) {
  // Rank 0 waits in a DP all-reduce for rank 2; rank 2 waits on a receive from
  // rank 3 (its pipeline peer); rank 3 is stuck before its collective on the
  // TP group. The chain 0 -> 2 -> 3 ends at 3.
  const std::string dp = "c2[0,2]", tp = "c3[2,3]";
  RankStatus r0 = rank_in(0, dp, 5, "posted", {{dp, 5}});
  RankStatus r2 = rank_in(2, tp, 0, "posted", {{dp, 4}, {tp, 9}});
  r2.coll_op = "wait_recv";
  r2.coll_peer = 3;
  RankStatus r3 = rank_in(3, tp, 9, "idle", {{tp, 9}});
  r3.coll_op.clear();
  const HangDiagnosis d = diagnose_hang({r0, r2, r3});
  EXPECT_EQ(d.culprits, std::vector<int>{3});
}

TEST(Diagnosis, NoWaitingRankNamesNobody) {
  RankStatus a;
  a.rank = 0;
  a.coll_state = "idle";
  const HangDiagnosis d = diagnose_hang({a});
  EXPECT_TRUE(d.culprits.empty());
  EXPECT_NE(d.lines.back().find("names nobody"), std::string::npos);
}

TEST(Diagnosis, LogKeywords) {
  const auto sig = scan_log_line(
      "mpirun noticed that process rank 1 with PID 4242 on node host exited on signal 9 (Killed).", -1);
  ASSERT_TRUE(sig);
  EXPECT_EQ(sig->kind, "signal");
  EXPECT_EQ(sig->rank, 1);
  const auto crc = scan_log_line(
      "megascale train: rank 1: /tmp/c/step_00000006/shard_00001.msck (rank 1): checksum mismatch: stored 0x1, "
      "contents give 0x2 (corrupt shard)",
      1);
  ASSERT_TRUE(crc);
  EXPECT_EQ(crc->kind, "checksum_mismatch");
  EXPECT_EQ(crc->rank, 1);
  EXPECT_EQ(crc->step, 6);
  // A peer's echo of another rank's refusal names nobody new.
  EXPECT_FALSE(scan_log_line("megascale train: rank 0: /tmp/c/step_00000006: refused: the shard(s) of rank(s) 1 "
                             "failed their checks (see those ranks' errors)",
                             0));
  const auto eng = scan_log_line("megascale train: rank 3: data loader failed", 3);
  ASSERT_TRUE(eng);
  EXPECT_EQ(eng->kind, "engine_error");
  EXPECT_EQ(eng->rank, 3);
  const auto crash = scan_log_line("Segmentation fault (core dumped)", 2);
  ASSERT_TRUE(crash);
  EXPECT_EQ(crash->rank, 2);
  EXPECT_FALSE(scan_log_line("step 3 loss 4.1", 0));
}

// The text the driver compares across attempts: the rank number left out
// (another rank may report it next time), the kind kept; no text for lines a
// faulty node causes (a signal, a crash, an MPI error).
TEST(Diagnosis, EngineErrorTextLeavesOutTheRankAndKeepsTheKind) {
  const auto a = engine_error_text("megascale train: rank 0: /d/x.msds: cannot open: No such file or directory");
  const auto b = engine_error_text("[run 3.6 s] detected (log_error): engine_error: megascale train: rank 3: "
                                   "/d/x.msds: cannot open: No such file or directory");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, "engine_error|/d/x.msds: cannot open: No such file or directory");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, engine_error_text("megascale train: rank 0: /d/y.msds: cannot open: No such file or directory"));
  const auto ck = engine_error_text("megascale train: rank 1: /c (rank 0): lock: world rank 0 could not make or lock "
                                    "the checkpoint_dir: see its error");
  ASSERT_TRUE(ck);
  EXPECT_EQ(ck->rfind("checkpoint_error|", 0), 0u);
  EXPECT_FALSE(engine_error_text("Segmentation fault (core dumped)"));
  EXPECT_FALSE(engine_error_text("process rank 1 with PID 77 on node vm exited on signal 9 (Killed)"));
  EXPECT_FALSE(engine_error_text("step 3 loss 4.1"));
}

// The engine's divergence line (rank 0 speaks for every rank, engine/trainer.h
// TrainingDiverged): a finding that names no rank, with its step, and an error
// text of its own kind, which the driver stops on at once.
TEST(Diagnosis, DivergedTrainingNamesNoRank) {
  const std::string line =
      "megascale train: step 2: the loss is NaN (learning_rate 1e+09): the training diverged; stopped before "
      "checkpointing this state";
  const auto f = scan_log_line(line, 0);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, "diverged");
  EXPECT_EQ(f->rank, -1);
  EXPECT_EQ(f->step, 2);
  const auto after_update = scan_log_line(
      "megascale train: step 7: the parameters or optimizer state are not finite after the update: the training "
      "diverged; this state was not checkpointed",
      -1);
  ASSERT_TRUE(after_update);
  EXPECT_EQ(after_update->kind, "diverged");
  EXPECT_EQ(after_update->step, 7);
  EXPECT_EQ(engine_error_text("[run 1.9 s] detected (log_error): diverged: " + line),
            "diverged|step 2: the loss is NaN (learning_rate 1e+09): the training diverged; stopped before "
            "checkpointing this state");
  // A rank's own error that mentions a step is not a divergence.
  const auto other = scan_log_line("megascale train: rank 1: step 3: tokens id 117 outside the vocabulary", 1);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->kind, "engine_error");
}

TEST(Detector, SlowRankNeedsConsecutiveSteps) {
  SlowDetector d(1.5, 3, 3);  // times well above the 2 ms noise floor
  // Rank 2 slow at steps 1, 2 (noise resets at 3), then 4, 5, 6.
  d.add(0, {{1, 1.0}, {2, 1.0}, {3, 1.0}, {4, 1.0}, {5, 1.0}});
  d.add(1, {{1, 1.1}, {2, 1.0}, {3, 1.0}, {4, 1.0}, {5, 1.0}});
  d.add(2, {{1, 2.0}, {2, 2.0}, {3, 1.2}, {4, 2.0}, {5, 2.0}});
  EXPECT_FALSE(d.slow_rank());
  d.add(0, {{6, 1.0}});
  d.add(1, {{6, 1.0}});
  EXPECT_FALSE(d.slow_rank()) << "step 6 is not reported by every rank yet";
  d.add(2, {{6, 2.0}});
  const auto slow = d.slow_rank();
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->first, 2);
  EXPECT_NE(slow->second.find("step 6"), std::string::npos) << slow->second;
  SlowDetector two(1.5, 1, 2);
  two.add(0, {{1, 1.0}});
  two.add(1, {{1, 1.4}});
  EXPECT_FALSE(two.slow_rank());
}

TEST(Detector, UniformSlowdownAgainstTheJobsOwnBaseline) {
  // Two ranks: step 1 is warm-up (5x, ignored), steps 2-4 the baseline
  // (~10 ms), then from step 5 every rank does 4x the work alike.
  SlowDetector d(2.5, 3, 2);
  d.add(0, {{1, 0.050}, {2, 0.010}, {3, 0.011}, {4, 0.010}});
  d.add(1, {{1, 0.052}, {2, 0.010}, {3, 0.010}, {4, 0.012}});
  ASSERT_TRUE(d.baseline_s());
  EXPECT_NEAR(*d.baseline_s(), 0.0105, 1e-9);  // median of the step medians 0.010, 0.0105, 0.011
  d.add(0, {{5, 0.041}, {6, 0.040}, {7, 0.043}, {8, 0.040}, {9, 0.044}});
  d.add(1, {{5, 0.040}, {6, 0.042}, {7, 0.041}, {8, 0.041}, {9, 0.040}});
  EXPECT_FALSE(d.uniform_slowdown()) << "five slow steps, twice three needed (a host pause lasts a few steps)";
  EXPECT_FALSE(d.slow_rank()) << "no rank stands out from the other";
  d.add(0, {{10, 0.043}});
  d.add(1, {{10, 0.041}});
  const auto u = d.uniform_slowdown();
  ASSERT_TRUE(u);
  EXPECT_NE(u->find("step 10"), std::string::npos) << *u;
  EXPECT_NE(u->find("for 6 steps in a row"), std::string::npos) << *u;
  EXPECT_NE(u->find("every rank"), std::string::npos) << *u;
  EXPECT_FALSE(d.slow_rank());

  // One slow rank is the per-rank detector's, not a uniform slowdown: the
  // fastest rank stays at the baseline (a job median would have moved 2.5x).
  SlowDetector one(2.5, 3, 2);
  one.add(0, {{1, 0.05}, {2, 0.010}, {3, 0.010}, {4, 0.010}, {5, 0.010}, {6, 0.010}, {7, 0.010}});
  one.add(1, {{1, 0.05}, {2, 0.010}, {3, 0.010}, {4, 0.010}, {5, 0.050}, {6, 0.050}, {7, 0.050}});
  EXPECT_FALSE(one.uniform_slowdown());
  ASSERT_TRUE(one.slow_rank());
  EXPECT_EQ(one.slow_rank()->first, 1);

  // A pause of the whole host as long as the per-rank detector's run (every
  // rank 4x for 3 steps, then back) is not a slowdown of the job.
  SlowDetector pause(2.5, 3, 2);
  pause.add(0, {{1, 0.05}, {2, 0.010}, {3, 0.010}, {4, 0.010}, {5, 0.040}, {6, 0.040}, {7, 0.040}, {8, 0.010}});
  pause.add(1, {{1, 0.05}, {2, 0.010}, {3, 0.010}, {4, 0.010}, {5, 0.041}, {6, 0.042}, {7, 0.040}, {8, 0.011}});
  EXPECT_FALSE(pause.uniform_slowdown());

  // Noise below the factor, and a slowdown under the 2 ms floor, are not flagged.
  SlowDetector noise(2.5, 3, 2);
  noise.add(0, {{1, 0.05}, {2, 0.010}, {3, 0.010}, {4, 0.010}, {5, 0.020}, {6, 0.024}, {7, 0.022}, {8, 0.021}});
  noise.add(1, {{1, 0.05}, {2, 0.010}, {3, 0.010}, {4, 0.010}, {5, 0.022}, {6, 0.020}, {7, 0.024}, {8, 0.020}});
  EXPECT_FALSE(noise.uniform_slowdown());
  SlowDetector tiny(2.5, 3, 1);
  tiny.add(0, {{1, 0.01}, {2, 0.0002}, {3, 0.0002}, {4, 0.0002}, {5, 0.001}, {6, 0.001}, {7, 0.001}});
  EXPECT_FALSE(tiny.uniform_slowdown()) << "5x of 0.2 ms is below the noise floor";

  // A slowdown from the start is the baseline: nothing to compare with.
  SlowDetector early(2.5, 3, 2);
  EXPECT_FALSE(early.baseline_s());
  early.add(0, {{1, 0.05}, {2, 0.040}, {3, 0.040}, {4, 0.040}, {5, 0.040}, {6, 0.040}, {7, 0.040}});
  early.add(1, {{1, 0.05}, {2, 0.040}, {3, 0.040}, {4, 0.040}, {5, 0.040}, {6, 0.040}, {7, 0.040}});
  EXPECT_FALSE(early.uniform_slowdown());
}

TEST(Detector, StallNeedsNoStepAndNoTraffic) {
  StallDetector s(2.0);
  EXPECT_FALSE(s.stalled(100));
  s.observe(100, 5, 1000);
  s.observe(101.5, 5, 2000);  // traffic moved
  EXPECT_FALSE(s.stalled(103));
  s.observe(103, 5, 2000);
  EXPECT_FALSE(s.stalled(103.4));
  const auto idle = s.stalled(103.6);
  ASSERT_TRUE(idle);
  EXPECT_NEAR(*idle, 2.1, 1e-9);
  s.observe(104, 6, 2000);  // a step finished
  EXPECT_FALSE(s.stalled(105));
}

TEST(Detector, ParsesAHeartbeat) {
  const RankStatus s = parse_rank_status(
      1, {{"pid", "42"}, {"node", "3"}, {"attempt", "2"}, {"phase", "training"}, {"step", "7"},
          {"coll_group", "c0[0,1]"}, {"coll_seq", "12"}, {"coll_state", "posted"}, {"seq:c0[0,1]", "12"},
          {"seq:c1[1]", "3"}, {"compute_hist", "6:0.100000,7:0.200000"}, {"bytes_sent", "4096"}});
  EXPECT_TRUE(s.present);
  EXPECT_EQ(s.pid, 42);
  EXPECT_EQ(s.node, 3);
  EXPECT_EQ(s.step, 7);
  EXPECT_EQ(s.seq_by_group.at("c1[1]"), 3);
  ASSERT_EQ(s.compute_hist.size(), 2u);
  EXPECT_EQ(s.compute_hist[1].first, 7);
  EXPECT_DOUBLE_EQ(s.compute_hist[1].second, 0.2);
  EXPECT_EQ(s.bytes_sent, 4096u);
  EXPECT_FALSE(parse_rank_status(0, {}).present);
}

// A rank whose process ended is no fault when it finished: "done", or its last
// heartbeat already counts every step (the final one lost), or a resumed
// attempt that loaded the final checkpoint. Mid-run, or no heartbeat, it is.
TEST(Detector, AFinishedRankIsNotAFault) {
  EXPECT_TRUE(finished_training(parse_rank_status(1, {{"phase", "done"}, {"step", "7"}}), 24));
  EXPECT_TRUE(finished_training(parse_rank_status(1, {{"phase", "training"}, {"step", "24"}}), 24));
  EXPECT_TRUE(finished_training(parse_rank_status(1, {{"phase", "training"}, {"step", "24"}, {"start_step", "24"}}), 24));
  EXPECT_FALSE(finished_training(parse_rank_status(1, {{"phase", "training"}, {"step", "23"}}), 24));
  EXPECT_FALSE(finished_training(parse_rank_status(1, {{"phase", "init"}}), 24));
  EXPECT_FALSE(finished_training(parse_rank_status(1, {}), 24));
}

// The report that failed a CI fault matrix: attempt 1's killed rank 1 (pid
// 500, node 1) was reported just after the relaunch cleared node 1's hash;
// attempt 2 put rank 1 on node 2 (pid 700) and node 1's next report (no rank
// of its own) only added attempt = 2. That stale field is no fault; this
// attempt's rank 1 gone on node 2 is.
TEST(Detector, GoneRanksIgnoreAFieldOfAnEarlierAttempt) {
  const auto status = [](int rank, int pid, const std::string& step) {
    return parse_rank_status(rank, {{"pid", std::to_string(pid)}, {"attempt", "2"}, {"phase", "training"}, {"step", step}});
  };
  const std::vector<RankStatus> st = {status(0, 600, "8"), status(1, 700, "8")};
  const std::vector<int> host = {0, 2};  // rank 1 moved from node 1 to the spare, node 2
  const std::map<std::string, std::string> stale = {
      {"attempt", "2"}, {"alive:1", "0"}, {"pid:1", "500"}, {"gone_at:1", "1.5"}};
  EXPECT_TRUE(gone_ranks(stale, 1, 2, host, st, 24).empty());
  // The same stale field on the node that hosts the rank again: another pid.
  EXPECT_TRUE(gone_ranks(stale, 1, 2, {0, 1}, st, 24).empty());
  // A report of an earlier attempt, or before the rank's heartbeat of this one.
  EXPECT_TRUE(gone_ranks({{"attempt", "1"}, {"alive:1", "0"}, {"pid:1", "700"}}, 2, 2, host, st, 24).empty());
  EXPECT_TRUE(gone_ranks({{"attempt", "2"}, {"alive:1", "0"}, {"pid:1", "700"}}, 2, 2, host,
                         {st[0], parse_rank_status(1, {})}, 24)
                  .empty());
  // This attempt's rank 1 gone on node 2: found; alive, or finished: not.
  EXPECT_EQ(gone_ranks({{"attempt", "2"}, {"alive:1", "0"}, {"pid:1", "700"}}, 2, 2, host, st, 24),
            std::vector<int>{1});
  EXPECT_TRUE(gone_ranks({{"attempt", "2"}, {"alive:1", "1"}, {"pid:1", "700"}}, 2, 2, host, st, 24).empty());
  EXPECT_TRUE(gone_ranks({{"attempt", "2"}, {"alive:1", "0"}, {"pid:1", "700"}}, 2, 2, host,
                         {st[0], status(1, 700, "24")}, 24)
                  .empty());
}

TEST(Diagnosis, StorageWaitIsParsed) {
  EXPECT_DOUBLE_EQ(parse_rank_status(1, {{"storage_wait_since_s", "1700000000.5"}}).storage_wait_since_s,
                   1700000000.5);
  EXPECT_EQ(parse_rank_status(1, {{"pid", "9"}}).storage_wait_since_s, 0.0);
}

TEST(Diagnosis, ADetectionIsMatchedToTheFaultItCanBelongTo) {
  // A slow fault fired first, a hang of rank 0 after it: the stall is the
  // hang's, the slow detection the slow fault's, whatever fired earlier.
  std::vector<FiredFault> fired = {{"slow", 1, 9, 100.0, false}, {"hang", 0, 15, 101.0, false}};
  EXPECT_EQ(match_detection(fired, Detection{"stall", 104.0, -1, ""}), 1);
  EXPECT_EQ(match_detection(fired, Detection{"slow", 104.0, 1, ""}), 0);
  // Of two faults of the same kind class, the one of the named rank, else the earliest.
  fired = {{"kill", 0, 5, 100.0, false}, {"kill", 1, 6, 100.2, false}};
  EXPECT_EQ(match_detection(fired, Detection{"process_gone", 101.0, 1, ""}), 1);
  EXPECT_EQ(match_detection(fired, Detection{"job_exited", 101.0, -1, ""}), 0);
  // Matched faults and faults fired after the detection (beyond 0.5 s of clock
  // slack) are not candidates: nothing left is a false positive.
  fired[0].matched = true;
  fired[1].at_s = 102.0;
  EXPECT_EQ(match_detection(fired, Detection{"process_gone", 101.0, 0, ""}), -1);
  EXPECT_EQ(match_detection({}, Detection{"stall", 1.0, -1, ""}), -1);
}

}  // namespace
}  // namespace megascale::robust
