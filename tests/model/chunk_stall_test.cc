// Tests for model/chunk_stall.h: the lockstep stall of unequal model chunks.
#include "model/chunk_stall.h"

#include <gtest/gtest.h>

#include <vector>

namespace megascale::model {
namespace {

// Forward 1 s, backward 2 s per layer; `layers[c]` on chunk c of every rank.
auto same_on_every_rank(const std::vector<int>& layers) {
  return [layers](int, int c) { return ChunkPassCost{1.0 * layers[c], 2.0 * layers[c]}; };
}

TEST(ChunkStall, EqualChunksDoNotStall) {
  EXPECT_EQ(chunk_stall_s(8, 6, 192, same_on_every_rank({2, 2, 2, 2, 2, 2})), 0.0);
  // Stages of different sizes whose chunks are equal: each rank's steps all
  // cost the same, the busiest rank's are the slowest.
  EXPECT_EQ(chunk_stall_s(4, 2, 16, [](int r, int) { return ChunkPassCost{1.0 + r, 2.0 + 2.0 * r}; }), 0.0);
  // No interleaving, no stall.
  EXPECT_EQ(chunk_stall_s(8, 1, 192, same_on_every_rank({5})), 0.0);
}

// PP 8 x VPP 6, 192 micro-batches, every rank's chunks 1, 3, 2, 2, 2, 2 layers:
// 1,098 steady steps, each rank's own 6,600-6,606 s, lockstep 7,106 s (worked
// out apart from this code, by a short script over Megatron-LM's item order and
// warm-ups as model/schedule.h states them).
TEST(ChunkStall, UnequalChunksStallTheLockstep) {
  EXPECT_DOUBLE_EQ(chunk_stall_s(8, 6, 192, same_on_every_rank({1, 3, 2, 2, 2, 2})), 500.0);
  // Too few micro-batches for a steady state: nothing to stall.
  EXPECT_EQ(chunk_stall_s(8, 6, 8, same_on_every_rank({1, 3, 2, 2, 2, 2})), 0.0);
}

}  // namespace
}  // namespace megascale::model
