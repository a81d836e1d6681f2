// Tests for model/head_balance.h: splits that balance the embedding's and the
// output head's ranks.
#include "model/head_balance.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <vector>

#include "model/megatron_layout.h"

namespace megascale::model {
namespace {

std::vector<int> rank_sums(const std::vector<int>& chunks, int pp) {
  std::vector<int> out(static_cast<size_t>(pp), 0);
  for (size_t v = 0; v < chunks.size(); ++v) out[v % out.size()] += chunks[v];
  return out;
}

// Megatron-Bridge's Llama 3 70B H100 recipe (PP 8 x VPP 5): the head weighs a
// little over a layer, the embedding little: rank 7 keeps 9 layers, a middle rank
// takes the tenth, and the string is the recipe's own.
TEST(HeadBalance, ReproducesMegatronBridgesLlama3_70bLayout) {
  const std::vector<int> chunks = head_balanced_chunk_layers(80, 8, 5, 0.05, 1.2);
  EXPECT_EQ(rank_sums(chunks, 8), (std::vector<int>{10, 10, 10, 11, 10, 10, 10, 9}));
  EXPECT_EQ(format_megatron_layout(chunks), "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL");
}

// Meta's Llama 3 405B (PP 16 x VPP 8, 126 layers): 7 + 14 x 8 + 7, the first
// rank's first chunk holding only the embedding, the last rank's last chunk only
// the head (arXiv 2407.21783 section 3.3.2).
TEST(HeadBalance, ReproducesMetasLlama3_405bLayout) {
  const std::vector<int> chunks = head_balanced_chunk_layers(126, 16, 8, 0.02, 0.6);
  std::vector<int> sums(16, 8);
  sums.front() = 7;
  sums.back() = 7;
  EXPECT_EQ(rank_sums(chunks, 16), sums);
  EXPECT_EQ(chunks.front(), 0);  // rank 0, chunk 0: the embedding alone
  EXPECT_EQ(chunks.back(), 0);   // rank 15, chunk 7: the head alone
  EXPECT_EQ(format_megatron_layout(chunks), "E|(t|)*126,L");
}

// A head well under a layer cannot pay for moving one: the even split.
TEST(HeadBalance, SmallHeadsKeepTheEvenSplit) {
  EXPECT_EQ(head_balanced_chunk_layers(96, 8, 6, 0.01, 0.34), std::vector<int>(48, 2));
  EXPECT_EQ(head_balanced_chunk_layers(96, 8, 1, 0.0, 0.0), std::vector<int>(8, 12));
}

// A head of 3.5 layers on 4 ranks of 16 layers: 5 + 5 + 5 + 1 (largest load 5;
// 4 x 4 would leave the last rank at 7.5, 5 + 5 + 4 + 2 at 5.5).
TEST(HeadBalance, HeavyHeadLeavesItsRankOneLayer) {
  const std::vector<int> chunks = head_balanced_chunk_layers(16, 4, 1, 0.0, 3.5);
  EXPECT_EQ(chunks, (std::vector<int>{5, 5, 5, 1}));
}

// The layers always add up and every rank keeps one, whatever the heads weigh.
TEST(HeadBalance, EveryRankKeepsALayerAndNoneIsLost) {
  for (double head : {0.0, 0.7, 2.0, 40.0}) {
    for (int vpp : {1, 2, 3}) {
      const std::vector<int> chunks = head_balanced_chunk_layers(30, 6, vpp, head / 2, head);
      ASSERT_EQ(chunks.size(), static_cast<size_t>(6 * vpp));
      EXPECT_EQ(std::accumulate(chunks.begin(), chunks.end(), 0), 30);
      for (int n : rank_sums(chunks, 6)) EXPECT_GE(n, 1) << "head " << head << " vpp " << vpp;
    }
  }
}

TEST(HeadBalance, NoSplitWithoutAPipelineOrWithTooFewLayers) {
  EXPECT_TRUE(head_balanced_chunk_layers(32, 1, 1, 0.0, 1.0).empty());
  EXPECT_TRUE(head_balanced_chunk_layers(3, 4, 1, 0.0, 1.0).empty());
  EXPECT_THROW(head_balanced_chunk_layers(32, 4, 1, -1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(head_balanced_chunk_layers(32, 4, 0, 0.0, 0.0), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::model
