// Tests of the Schedule IR builder (model/schedule.h): Megatron-LM's 1F1B and
// interleaved 1F1B orders (reference listing in shared/REFERENCE.md), p2p
// send/recv pairing, and placement of data-parallel ops and the optimizer step.

#include "model/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

namespace megascale::model {
namespace {

ScheduleOptions pipeline(int pp, int microbatches, int vpp) {
  ScheduleOptions o;
  o.pp = pp;
  o.microbatches = microbatches;
  o.vpp = vpp;
  o.layers = 2 * pp * vpp;
  o.activation_bytes = 1024;
  o.dp_bytes_per_chunk = 4096;
  return o;
}

ScheduleOptions with_dp(ScheduleOptions o, int zero_stage, bool dp_overlap) {
  o.dp = 4;
  o.zero_stage = zero_stage;
  o.dp_overlap = dp_overlap;
  return o;
}

bool is_compute(OpKind k) { return k == OpKind::kForward || k == OpKind::kBackward; }

// Index of the op of `kind` with this micro-batch and chunk, or -1.
int find_op(const RankSchedule& rank, OpKind kind, int microbatch, int chunk) {
  for (int i = 0; i < static_cast<int>(rank.ops.size()); ++i) {
    const Op& op = rank.ops[i];
    if (op.kind == kind && op.microbatch == microbatch && op.chunk == chunk) return i;
  }
  return -1;
}

std::vector<int> indices_of(const RankSchedule& rank, OpKind kind) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(rank.ops.size()); ++i)
    if (rank.ops[i].kind == kind) out.push_back(i);
  return out;
}

int last_index_of(const RankSchedule& rank, OpKind kind, int chunk) {
  int last = -1;
  for (int i = 0; i < static_cast<int>(rank.ops.size()); ++i)
    if (rank.ops[i].kind == kind && rank.ops[i].chunk == chunk) last = i;
  return last;
}

bool depends_on(const Op& op, int index) {
  return std::find(op.deps.begin(), op.deps.end(), index) != op.deps.end();
}

TEST(Schedule, InterleavedOrderMatchesMegatronReference) {
  const Schedule s = build_schedule(pipeline(4, 8, 2));
  EXPECT_EQ(compute_order(s.ranks[0]),
            "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 F6.0 B0.1 F7.0 B1.1 F4.1 B2.1 "
            "F5.1 B3.1 F6.1 B0.0 F7.1 B1.0 B2.0 B3.0 B4.1 B5.1 B6.1 B7.1 B4.0 B5.0 B6.0 B7.0");
}

TEST(Schedule, OneFOneBOrder) {
  const Schedule s = build_schedule(pipeline(4, 8, 1));
  EXPECT_EQ(compute_order(s.ranks[0]),
            "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 B4.0 B5.0 B6.0 B7.0");
  EXPECT_EQ(compute_order(s.ranks[3]),
            "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 F4.0 B4.0 F5.0 B5.0 F6.0 B6.0 F7.0 B7.0");
}

TEST(Schedule, WarmupAndItemsFollowMegatronTable) {
  const ScheduleOptions interleaved = pipeline(4, 8, 2);
  EXPECT_EQ(warmup_forwards(0, interleaved), 10);  // 2*(4-0-1) + (2-1)*4
  EXPECT_EQ(warmup_forwards(3, interleaved), 4);   // (2-1)*4
  EXPECT_EQ(warmup_forwards(0, pipeline(4, 4, 2)), 8);  // capped at M*V
  EXPECT_EQ(warmup_forwards(0, pipeline(4, 8, 1)), 3);
  EXPECT_EQ(warmup_forwards(0, pipeline(4, 2, 1)), 2);  // capped at M

  const MicroChunk f = forward_item(13, interleaved);  // group 1, chunk 1, slot 1
  EXPECT_EQ(f.microbatch, 5);
  EXPECT_EQ(f.chunk, 1);
  const MicroChunk b = backward_item(13, interleaved);
  EXPECT_EQ(b.microbatch, 5);
  EXPECT_EQ(b.chunk, 0);
}

TEST(Schedule, EveryRankRunsEachMicroChunkOnceInEachDirection) {
  for (const auto& [pp, microbatches, vpp] :
       std::vector<std::tuple<int, int, int>>{{1, 3, 1}, {4, 8, 1}, {4, 8, 2}, {4, 16, 4},
                                              {8, 16, 2}, {2, 4, 2}, {8, 64, 6}}) {
    const Schedule s = build_schedule(pipeline(pp, microbatches, vpp));
    ASSERT_EQ(static_cast<int>(s.ranks.size()), pp);
    for (const RankSchedule& rank : s.ranks) {
      std::set<std::pair<int, int>> forwards, backwards;
      for (const Op& op : rank.ops) {
        if (op.kind == OpKind::kForward) {
          EXPECT_TRUE(forwards.insert({op.microbatch, op.chunk}).second);
        }
        if (op.kind == OpKind::kBackward) {
          EXPECT_TRUE(backwards.insert({op.microbatch, op.chunk}).second);
        }
      }
      EXPECT_EQ(static_cast<int>(forwards.size()), microbatches * vpp);
      EXPECT_EQ(backwards, forwards);
    }
  }
}

// (rank, chunk) of the stage a receive on (rank, chunk) gets its data from.
std::pair<int, int> source_stage(const ScheduleOptions& o, int rank, int chunk, OpKind recv) {
  if (recv == OpKind::kRecvActivation)
    return rank > 0 ? std::pair{rank - 1, chunk} : std::pair{o.pp - 1, chunk - 1};
  return rank < o.pp - 1 ? std::pair{rank + 1, chunk} : std::pair{0, chunk + 1};
}

TEST(Schedule, EveryReceiveMatchesExactlyOneSend) {
  for (const bool pp_overlap : {false, true}) {
    ScheduleOptions o = with_dp(pipeline(4, 8, 2), 3, true);
    o.pp_overlap = pp_overlap;
    const Schedule s = build_schedule(o);
    std::set<std::pair<int, int>> sends_matched;  // (rank, index)
    for (const RankSchedule& rank : s.ranks) {
      for (const Op& op : rank.ops) {
        if (op.kind != OpKind::kRecvActivation && op.kind != OpKind::kRecvGradient) continue;
        const auto [source_rank, source_chunk] = source_stage(o, rank.pp_rank, op.chunk, op.kind);
        ASSERT_EQ(op.peer, source_rank);
        ASSERT_GE(op.match, 0);
        ASSERT_LT(op.match, static_cast<int>(s.ranks[op.peer].ops.size()));
        const Op& send = s.ranks[op.peer].ops[op.match];
        EXPECT_EQ(send.kind, op.kind == OpKind::kRecvActivation ? OpKind::kSendActivation
                                                                 : OpKind::kSendGradient);
        EXPECT_EQ(send.microbatch, op.microbatch);
        EXPECT_EQ(send.chunk, source_chunk);
        EXPECT_EQ(send.peer, rank.pp_rank);
        EXPECT_EQ(send.bytes, o.activation_bytes);
        EXPECT_TRUE(sends_matched.insert({op.peer, op.match}).second) << "send matched twice";
      }
    }
    int sends = 0;
    for (const RankSchedule& rank : s.ranks)
      for (const Op& op : rank.ops)
        sends += op.kind == OpKind::kSendActivation || op.kind == OpKind::kSendGradient;
    EXPECT_EQ(sends, static_cast<int>(sends_matched.size()));
    // Each (mb, virtual-stage boundary) crosses once per direction.
    EXPECT_EQ(sends, 2 * o.microbatches * (o.pp * o.vpp - 1));
  }
}

TEST(Schedule, DependenciesAreEarlierAndConsumersFollowTheirReceive) {
  ScheduleOptions o = with_dp(pipeline(4, 8, 2), 3, true);
  const Schedule s = build_schedule(o);
  for (const RankSchedule& rank : s.ranks) {
    for (int i = 0; i < static_cast<int>(rank.ops.size()); ++i) {
      const Op& op = rank.ops[i];
      for (int dep : op.deps) {
        EXPECT_GE(dep, 0);
        EXPECT_LT(dep, i);
      }
      if (op.kind == OpKind::kRecvActivation || op.kind == OpKind::kRecvGradient) {
        ASSERT_LT(i + 1, static_cast<int>(rank.ops.size()));
        EXPECT_TRUE(is_compute(rank.ops[i + 1].kind));
        EXPECT_TRUE(depends_on(rank.ops[i + 1], i));
      }
      if (op.kind == OpKind::kBackward) {
        EXPECT_TRUE(depends_on(op, find_op(rank, OpKind::kForward, op.microbatch, op.chunk)));
      }
      if (op.kind == OpKind::kSendActivation || op.kind == OpKind::kSendGradient) {
        EXPECT_TRUE(is_compute(rank.ops[i - 1].kind));
        EXPECT_EQ(op.deps, std::vector<int>{i - 1});
      }
    }
  }
}

TEST(Schedule, FirstAndLastVirtualStagesHaveNoOuterReceive) {
  const Schedule s = build_schedule(pipeline(4, 8, 2));
  for (const Op& op : s.ranks[0].ops)
    EXPECT_FALSE(op.kind == OpKind::kRecvActivation && op.chunk == 0);
  for (const Op& op : s.ranks[3].ops)
    EXPECT_FALSE(op.kind == OpKind::kRecvGradient && op.chunk == 1);
  // Rank 0 chunk 1 receives activations from rank 3 chunk 0.
  const int recv = find_op(s.ranks[0], OpKind::kRecvActivation, 2, 1);
  ASSERT_GE(recv, 0);
  EXPECT_EQ(s.ranks[0].ops[recv].peer, 3);
}

TEST(Schedule, FirstLayerFollowsInterleavedAssignment) {
  ScheduleOptions o = pipeline(4, 8, 2);
  o.layers = 16;
  const Schedule s = build_schedule(o);
  EXPECT_EQ(s.chunk_layers(0, 0), 2);
  EXPECT_EQ(s.first_layer(0, 0), 0);
  EXPECT_EQ(s.first_layer(3, 0), 6);
  EXPECT_EQ(s.first_layer(0, 1), 8);
  EXPECT_EQ(s.first_layer(1, 1), 10);
  EXPECT_EQ(s.first_layer(3, 1), 14);
  EXPECT_TRUE(s.layer_forward.empty());
  EXPECT_TRUE(s.layer_backward.empty());
}

// Megatron-Core's uneven split: the first stage 2 layers, the last 4, the two
// others share the remaining 8; each stage halves its layers over its 2 chunks.
// Model order is chunk-major: r0c0 [0], r1c0 [1,2], r2c0 [3,4], r3c0 [5,6],
// r0c1 [7], r1c1 [8,9], r2c1 [10,11], r3c1 [12,13].
TEST(Schedule, UnevenFirstAndLastStages) {
  ScheduleOptions o = pipeline(4, 8, 2);
  o.layers = 14;
  o.first_stage_layers = 2;
  o.last_stage_layers = 4;
  const Schedule s = build_schedule(o);
  EXPECT_EQ(s.chunk_layers(0, 0), 1);
  EXPECT_EQ(s.chunk_layers(1, 1), 2);
  EXPECT_EQ(s.chunk_layers(3, 1), 2);
  EXPECT_EQ(s.first_layer(1, 0), 1);
  EXPECT_EQ(s.first_layer(3, 0), 5);
  EXPECT_EQ(s.first_layer(0, 1), 7);
  EXPECT_EQ(s.first_layer(3, 1), 12);
  int total = 0;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 2; ++c) total += s.chunk_layers(r, c);
  }
  EXPECT_EQ(total, 14);
  // The same op lists as an even split: only the layers differ.
  ScheduleOptions even = o;
  even.layers = 16;
  even.first_stage_layers = even.last_stage_layers = 0;
  const Schedule e = build_schedule(even);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(s.ranks[r].ops.size(), e.ranks[r].ops.size());
  // The other stages' 5 layers cannot be halved over 2 chunks.
  o.first_stage_layers = 2;
  o.last_stage_layers = 2;
  EXPECT_THROW(build_schedule(o), std::invalid_argument);
}

TEST(Schedule, DataLoadOpensEachListUnlessDataPipeline) {
  ScheduleOptions o = pipeline(2, 4, 1);
  for (const RankSchedule& rank : build_schedule(o).ranks) {
    EXPECT_EQ(rank.ops.front().kind, OpKind::kDataLoad);
    EXPECT_EQ(rank.ops.front().stream, Stream::kCompute);
  }
  o.data_pipeline = true;
  for (const RankSchedule& rank : build_schedule(o).ranks)
    EXPECT_TRUE(indices_of(rank, OpKind::kDataLoad).empty());
}

TEST(Schedule, RejectsInvalidOptions) {
  EXPECT_THROW(build_schedule(pipeline(4, 6, 2)), std::invalid_argument);  // M % P != 0
  ScheduleOptions o = pipeline(1, 4, 2);
  EXPECT_THROW(build_schedule(o), std::invalid_argument);  // interleaving with one stage
  o = pipeline(4, 8, 2);
  o.layers = 12;
  EXPECT_THROW(build_schedule(o), std::invalid_argument);  // L % (P*V) != 0
  o = with_dp(pipeline(4, 8, 1), 4, false);
  EXPECT_THROW(build_schedule(o), std::invalid_argument);  // ZeRO stage 4
  o = pipeline(4, 0, 1);
  EXPECT_THROW(build_schedule(o), std::invalid_argument);
}

TEST(Schedule, P2pStreamsFollowPpOverlap) {
  ScheduleOptions o = pipeline(4, 8, 2);
  for (const RankSchedule& rank : build_schedule(o).ranks) {
    for (const Op& op : rank.ops) {
      EXPECT_EQ(op.stream, Stream::kCompute) << to_string(op.kind);
      if (op.kind == OpKind::kRecvActivation || op.kind == OpKind::kRecvGradient) {
        EXPECT_TRUE(op.deps.empty());
      }
    }
  }
  o.pp_overlap = true;
  for (const RankSchedule& rank : build_schedule(o).ranks) {
    int last_compute_stream_op = -1;
    for (int i = 0; i < static_cast<int>(rank.ops.size()); ++i) {
      const Op& op = rank.ops[i];
      switch (op.kind) {
        case OpKind::kSendActivation:
        case OpKind::kSendGradient:
          EXPECT_EQ(op.stream, Stream::kPpSend);
          break;
        case OpKind::kRecvActivation:
        case OpKind::kRecvGradient:
          EXPECT_EQ(op.stream, Stream::kPpRecv);
          // Posted as soon as the previous compute-stream op ends.
          EXPECT_EQ(op.deps, std::vector<int>{last_compute_stream_op});
          break;
        default:
          EXPECT_EQ(op.stream, Stream::kCompute);
      }
      if (op.stream == Stream::kCompute) last_compute_stream_op = i;
    }
  }
}

TEST(Schedule, NoDpOpsWhenDpIsOne) {
  ScheduleOptions o = pipeline(4, 8, 2);
  o.zero_stage = 3;
  const Schedule s = build_schedule(o);
  for (const RankSchedule& rank : s.ranks) {
    for (const Op& op : rank.ops) EXPECT_NE(op.stream, Stream::kDpComm);
    const Op& step = rank.ops.back();
    EXPECT_EQ(step.kind, OpKind::kOptimizerStep);
    EXPECT_EQ(step.deps, std::vector<int>{indices_of(rank, OpKind::kBackward).back()});
  }
}

TEST(Schedule, ExposedDpOpsFollowTheFinalBackward) {
  const ScheduleOptions o = with_dp(pipeline(4, 8, 2), 1, false);
  for (const RankSchedule& rank : build_schedule(o).ranks) {
    const int final_backward = indices_of(rank, OpKind::kBackward).back();
    const std::vector<int> rs = indices_of(rank, OpKind::kDpReduceScatter);
    const std::vector<int> ag = indices_of(rank, OpKind::kDpAllGather);
    const std::vector<int> step = indices_of(rank, OpKind::kOptimizerStep);
    ASSERT_EQ(rs.size(), 2u);
    ASSERT_EQ(ag.size(), 2u);
    ASSERT_EQ(step.size(), 1u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_GT(rs[i], final_backward);
      EXPECT_EQ(rank.ops[rs[i]].chunk, 1 - i);  // chunk order V-1..0
      EXPECT_EQ(rank.ops[rs[i]].deps, std::vector<int>{final_backward});
      EXPECT_EQ(rank.ops[rs[i]].stream, Stream::kDpComm);
      EXPECT_EQ(rank.ops[rs[i]].bytes, o.dp_bytes_per_chunk);
      EXPECT_EQ(rank.ops[ag[i]].chunk, i);
      EXPECT_EQ(rank.ops[ag[i]].deps, step);
      EXPECT_EQ(rank.ops[ag[i]].stream, Stream::kDpComm);
    }
    EXPECT_EQ(rank.ops[step[0]].deps, rs);
    EXPECT_EQ(rank.ops[step[0]].stream, Stream::kCompute);
  }
}

TEST(Schedule, OverlappedDpOpsReduceEarlyAndPrefetchGathers) {
  const ScheduleOptions o = with_dp(pipeline(4, 8, 2), 2, true);
  for (const RankSchedule& rank : build_schedule(o).ranks) {
    const std::vector<int> ag = indices_of(rank, OpKind::kDpAllGather);
    const std::vector<int> rs = indices_of(rank, OpKind::kDpReduceScatter);
    ASSERT_EQ(ag, (std::vector<int>{1, 2}));  // right after DataLoad, chunk order
    ASSERT_EQ(rs.size(), 2u);
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(rank.ops[ag[c]].chunk, c);
      EXPECT_TRUE(rank.ops[ag[c]].deps.empty());
      // Micro-batch 0 runs first on every chunk (Megatron's table).
      EXPECT_TRUE(depends_on(rank.ops[find_op(rank, OpKind::kForward, 0, c)], ag[c]));
      EXPECT_FALSE(depends_on(rank.ops[find_op(rank, OpKind::kForward, 1, c)], ag[c]));
    }
    // RS of chunk c right after the chunk's last backward (and its gradient send).
    for (const int i : rs) {
      const int c = rank.ops[i].chunk;
      const int last_backward = last_index_of(rank, OpKind::kBackward, c);
      EXPECT_EQ(rank.ops[i].deps, std::vector<int>{last_backward});
      const bool sends = !(rank.pp_rank == 0 && c == 0);
      EXPECT_EQ(i, last_backward + (sends ? 2 : 1));
    }
    EXPECT_EQ(rank.ops[rs[0]].chunk, 1);  // chunk V-1 finishes its backwards first
    EXPECT_EQ(rank.ops.back().kind, OpKind::kOptimizerStep);
    EXPECT_EQ(rank.ops.back().deps, rs);
  }
}

// Megatron-Core's --overlap-grad-reduce without --overlap-param-gather: the
// reduce-scatters stay right after each chunk's last backward, the all-gathers
// follow the optimizer step (DistributedOptimizer.step_with_ready_grads), and
// nothing waits for a gather before the first forward.
TEST(Schedule, GradientOverlapWithoutGatherOverlapGathersAfterTheStep) {
  ScheduleOptions o = with_dp(pipeline(4, 8, 2), 1, true);
  o.dp_buckets = 3;
  o.dp_overlap_param_gather = false;
  for (const RankSchedule& rank : build_schedule(o).ranks) {
    const std::vector<int> ag = indices_of(rank, OpKind::kDpAllGather);
    const std::vector<int> rs = indices_of(rank, OpKind::kDpReduceScatter);
    const std::vector<int> step = indices_of(rank, OpKind::kOptimizerStep);
    ASSERT_EQ(step.size(), 1u);
    ASSERT_EQ(rs.size(), 6u);  // still bucketed, overlapped with the last backwards
    EXPECT_LT(rs.back(), step[0]);
    EXPECT_EQ(rank.ops[step[0]].deps, rs);
    ASSERT_EQ(ag.size(), 2u);  // one whole gather per chunk, after the step
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(rank.ops[ag[c]].chunk, c);
      EXPECT_EQ(rank.ops[ag[c]].deps, step);
      EXPECT_EQ(rank.ops[ag[c]].bytes, o.dp_bytes_per_chunk);
    }
    // The first forward of each chunk is one piece and waits for no gather.
    for (const Op& op : rank.ops) {
      if (op.kind != OpKind::kForward) continue;
      EXPECT_DOUBLE_EQ(op.fraction, 1.0);
      for (int d : op.deps) EXPECT_NE(rank.ops[d].kind, OpKind::kDpAllGather);
    }
  }
}

// Megatron-Core's DP buckets (dp_buckets = B): the chunk's last backward runs as
// B pieces, each followed by its bucket's reduce-scatter (1/B of the payload);
// the chunk's first forward runs as B pieces, piece k waiting for gather k.
TEST(Schedule, BucketsSplitTheLastBackwardAndTheFirstForward) {
  ScheduleOptions o = with_dp(pipeline(4, 8, 2), 2, true);
  o.dp_buckets = 3;
  for (const RankSchedule& rank : build_schedule(o).ranks) {
    const std::vector<int> ag = indices_of(rank, OpKind::kDpAllGather);
    const std::vector<int> rs = indices_of(rank, OpKind::kDpReduceScatter);
    ASSERT_EQ(ag.size(), 6u);  // 2 chunks x 3 buckets, prefetched in need order
    ASSERT_EQ(rs.size(), 6u);
    for (int i : ag) {
      EXPECT_DOUBLE_EQ(rank.ops[i].fraction, 1.0 / 3);
      EXPECT_EQ(rank.ops[i].bytes, 4096 / 3);
    }
    for (int c = 0; c < 2; ++c) {
      double forward_work = 0, backward_work = 0;
      int forward_pieces = 0, backward_pieces = 0;
      for (size_t i = 0; i < rank.ops.size(); ++i) {
        const Op& op = rank.ops[i];
        if (op.chunk != c) continue;
        if (op.kind == OpKind::kForward) {
          forward_work += op.fraction;
          ++forward_pieces;
          // Piece k of micro-batch 0 waits for bucket k of this chunk.
          if (op.microbatch == 0) {
            EXPECT_TRUE(depends_on(op, ag[c * 3 + (forward_pieces - 1)])) << i;
          }
        }
        if (op.kind == OpKind::kBackward) {
          backward_work += op.fraction;
          ++backward_pieces;
        }
      }
      // Every micro-batch's work is still done once: 8 forwards, 8 backwards.
      EXPECT_NEAR(forward_work, 8.0, 1e-12);
      EXPECT_NEAR(backward_work, 8.0, 1e-12);
      EXPECT_EQ(forward_pieces, 8 + 2);  // the first forward in 3 pieces
      EXPECT_EQ(backward_pieces, 8 + 2);
    }
    // Each bucket's reduce-scatter depends on a backward piece of its chunk.
    for (int i : rs) {
      ASSERT_EQ(rank.ops[i].deps.size(), 1u);
      const Op& piece = rank.ops[rank.ops[i].deps[0]];
      EXPECT_EQ(piece.kind, OpKind::kBackward);
      EXPECT_EQ(piece.chunk, rank.ops[i].chunk);
      EXPECT_DOUBLE_EQ(piece.fraction, 1.0 / 3);
    }
    EXPECT_EQ(rank.ops.back().deps, rs);
  }
  // Without dp_overlap the buckets change nothing.
  ScheduleOptions plain = with_dp(pipeline(4, 8, 2), 2, false);
  ScheduleOptions bucketed = plain;
  bucketed.dp_buckets = 3;
  EXPECT_EQ(build_schedule(plain).ranks[1].ops.size(), build_schedule(bucketed).ranks[1].ops.size());
}

TEST(Schedule, ZeroStage0AllReducesEachChunk) {
  for (const bool dp_overlap : {false, true}) {
    const ScheduleOptions o = with_dp(pipeline(4, 8, 2), 0, dp_overlap);
    for (const RankSchedule& rank : build_schedule(o).ranks) {
      EXPECT_EQ(indices_of(rank, OpKind::kDpAllReduce).size(), 2u);
      EXPECT_TRUE(indices_of(rank, OpKind::kDpReduceScatter).empty());
      EXPECT_TRUE(indices_of(rank, OpKind::kDpAllGather).empty());
      EXPECT_EQ(rank.ops.back().deps, indices_of(rank, OpKind::kDpAllReduce));
    }
  }
}

TEST(Schedule, ZeroStage3GathersBeforeEveryUse) {
  for (const bool dp_overlap : {false, true}) {
    const ScheduleOptions o = with_dp(pipeline(4, 8, 2), 3, dp_overlap);
    for (const RankSchedule& rank : build_schedule(o).ranks) {
      const std::vector<int> ag = indices_of(rank, OpKind::kDpAllGather);
      EXPECT_EQ(static_cast<int>(ag.size()), 2 * o.microbatches * o.vpp);
      for (const int i : ag) EXPECT_TRUE(rank.ops[i].deps.empty());
      for (int i = 0; i < static_cast<int>(rank.ops.size()); ++i) {
        const Op& op = rank.ops[i];
        if (!is_compute(op.kind)) continue;
        const bool gathered = std::any_of(op.deps.begin(), op.deps.end(), [&](int d) {
          return rank.ops[d].kind == OpKind::kDpAllGather && rank.ops[d].chunk == op.chunk;
        });
        EXPECT_TRUE(gathered) << "op " << i;
      }
      EXPECT_EQ(indices_of(rank, OpKind::kDpReduceScatter).size(), 2u);
    }
  }
}

TEST(Schedule, ToStringNamesEveryKind) {
  EXPECT_STREQ(to_string(OpKind::kRecvGradient), "recv_gradient");
  EXPECT_STREQ(to_string(OpKind::kDpReduceScatter), "dp_reducescatter");
  EXPECT_STREQ(to_string(Stream::kPpRecv), "pp_recv");
  EXPECT_STREQ(to_string(LayerStepKind::kCompute), "compute");
  EXPECT_STREQ(to_string(LayerStepKind::kTpAllGather), "tp_allgather");
  EXPECT_STREQ(to_string(LayerStepKind::kTpReduceScatter), "tp_reducescatter");
  EXPECT_STREQ(to_string(LayerStepKind::kTpAllReduce), "tp_allreduce");
}

}  // namespace
}  // namespace megascale::model
