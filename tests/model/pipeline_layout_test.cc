// Tests for model/pipeline_layout.h: Megatron-Core's even and uneven splits.
#include "model/pipeline_layout.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megascale::model {
namespace {

TEST(PipelineLayout, EvenSplitIsMegatronsInterleavedAssignment) {
  const PipelineLayout l(16, 4, 2);
  EXPECT_TRUE(l.even());
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(l.stage_layers(r), 4);
    EXPECT_EQ(l.max_chunk_layers(), 2);
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(l.chunk_layers(r, c), 2);
      EXPECT_EQ(l.first_layer(r, c), c * 8 + r * 2);  // c*L/V + r*L/(P*V)
    }
  }
  EXPECT_EQ(l.busiest_stage(), 0);
}

// Llama 3 405B (arXiv 2407.21783 section 3.3.2): 126 layers on 16 stages, one
// layer fewer on the first and the last: 7 + 14 x 8 + 7.
TEST(PipelineLayout, Llama3TrimmedFirstAndLastStage) {
  const PipelineLayout l(126, 16, 1, 7, 7);
  EXPECT_FALSE(l.even());
  EXPECT_EQ(l.stage_layers(0), 7);
  EXPECT_EQ(l.stage_layers(1), 8);
  EXPECT_EQ(l.stage_layers(14), 8);
  EXPECT_EQ(l.stage_layers(15), 7);
  EXPECT_EQ(l.first_layer(1, 0), 7);
  EXPECT_EQ(l.first_layer(15, 0), 119);
  EXPECT_EQ(l.busiest_stage(), 1);
  EXPECT_EQ(l.max_stage_layers(), 8);
}

// Meta's own split (section 3.3.2): 8 chunks per stage, one layer each; the
// first stage's first chunk holds only the embedding, the last stage's last
// chunk only the head.
TEST(PipelineLayout, Llama3ChunksNearTheEmbeddingAndHeadGiveUpTheLayer) {
  const PipelineLayout l(126, 16, 8, 7, 7);
  EXPECT_EQ(l.chunk_layers(0, 0), 0);
  for (int c = 1; c < 8; ++c) EXPECT_EQ(l.chunk_layers(0, c), 1);
  for (int c = 0; c < 7; ++c) EXPECT_EQ(l.chunk_layers(15, c), 1);
  EXPECT_EQ(l.chunk_layers(15, 7), 0);
  EXPECT_EQ(l.chunk_layers(7, 3), 1);
  EXPECT_EQ(l.max_chunk_layers(), 1);
  // Model order: rank 1's chunk 0 holds layer 0; chunk 7 of rank 14 the last.
  EXPECT_EQ(l.first_layer(1, 0), 0);
  EXPECT_EQ(l.first_layer(0, 1), 15);
  EXPECT_EQ(l.first_layer(14, 7), 125);
  // Five layers over two chunks: 2 + 3 on the first stage, 3 + 2 on the last.
  const PipelineLayout five(16, 3, 2, 5, 5);
  EXPECT_EQ(five.chunk_layers(0, 0), 2);
  EXPECT_EQ(five.chunk_layers(0, 1), 3);
  EXPECT_EQ(five.chunk_layers(2, 0), 3);
  EXPECT_EQ(five.chunk_layers(2, 1), 2);
  EXPECT_EQ(five.chunk_layers(1, 0), 3);
}

// Chunk-major model order with uneven stages: each row of chunks holds L/V
// layers, so chunk c starts at c*L/V plus the earlier ranks' share of it.
TEST(PipelineLayout, InterleavedUnevenLayersAreContiguous) {
  const PipelineLayout l(20, 4, 2, 2, 6);  // 2 + 6 + 6 + 6, halved per chunk
  int next = 0;
  for (int c = 0; c < 2; ++c) {
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(l.first_layer(r, c), next) << "rank " << r << " chunk " << c;
      next += l.chunk_layers(r, c);
    }
  }
  EXPECT_EQ(next, 20);
  EXPECT_EQ(l.chunk_layers(0, 1), 1);
  EXPECT_EQ(l.chunk_layers(3, 0), 3);
}

// Only the last stage given: the first takes an even share of the rest.
TEST(PipelineLayout, OnlyTheLastStageGiven) {
  const PipelineLayout l(10, 4, 1, 0, 1);
  EXPECT_EQ(l.stage_layers(0), 3);
  EXPECT_EQ(l.stage_layers(3), 1);
  EXPECT_EQ(l.first_layer(3, 0), 9);
}

// The balanced split search offers where pp does not divide the layers.
TEST(PipelineLayout, TrimmedEndStages) {
  const std::optional<EndStages> llama = trimmed_end_stages(126, 16);
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->first, 7);
  EXPECT_EQ(llama->last, 7);
  EXPECT_EQ(llama->middle, 8);
  const std::optional<EndStages> bridge = trimmed_end_stages(126, 8);  // Megatron-Bridge's 405B
  ASSERT_TRUE(bridge);
  EXPECT_EQ(bridge->first, 15);
  EXPECT_EQ(bridge->last, 15);
  // An odd rest: the last stage (it holds the head) takes the smaller part.
  const std::optional<EndStages> odd = trimmed_end_stages(125, 16);
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->first, 7);
  EXPECT_EQ(odd->last, 6);
  EXPECT_FALSE(pipeline_layout_error(125, 16, 8, odd->first, odd->last));
  EXPECT_FALSE(trimmed_end_stages(96, 8));   // pp divides: the even split
  EXPECT_FALSE(trimmed_end_stages(24, 16));  // the middle stages alone exceed the model
  EXPECT_FALSE(trimmed_end_stages(10, 1));
}

TEST(PipelineLayout, ErrorsNameTheKeyAndTheRule) {
  std::string key;
  ASSERT_TRUE(pipeline_layout_error(126, 16, 1, 0, 0, &key));
  EXPECT_EQ(key, "parallel.pp");
  ASSERT_TRUE(pipeline_layout_error(96, 8, 5, 0, 0, &key));
  EXPECT_EQ(key, "parallel.vpp");
  // 126 - 7 - 6 = 113 over 14 stages does not divide.
  const std::optional<std::string> rest = pipeline_layout_error(126, 16, 1, 7, 6, &key);
  ASSERT_TRUE(rest);
  EXPECT_EQ(key, "parallel.first_stage_layers");
  EXPECT_NE(rest->find("not divisible by the 14 other stages"), std::string::npos) << *rest;
  // The other stages must divide by vpp: 126 - 6 - 8 = 112 over 14 stages is
  // 8 each, not divisible by 3 chunks.
  const std::optional<std::string> chunks = pipeline_layout_error(126, 16, 3, 6, 8, &key);
  ASSERT_TRUE(chunks);
  EXPECT_EQ(key, "parallel.vpp");
  EXPECT_NE(chunks->find("not divisible by vpp (3)"), std::string::npos) << *chunks;
  // One stage has no first and last.
  ASSERT_TRUE(pipeline_layout_error(8, 1, 1, 8, 0, &key));
  EXPECT_EQ(key, "parallel.first_stage_layers");
  // Nothing left for the middle stage.
  ASSERT_TRUE(pipeline_layout_error(8, 3, 1, 4, 4, &key));
  EXPECT_EQ(key, "parallel.first_stage_layers");
  // Two stages, both given, must add up.
  EXPECT_FALSE(pipeline_layout_error(8, 2, 1, 3, 5));
  EXPECT_TRUE(pipeline_layout_error(8, 2, 1, 3, 4));
  EXPECT_THROW(PipelineLayout(8, 2, 1, 3, 4), std::invalid_argument);
}

ChunkLayers chunks(std::vector<int> v) { return std::make_shared<const std::vector<int>>(std::move(v)); }

// A free-form layout (Megatron-Core's pipeline_model_parallel_layout) that spells
// out a first / last split gives the same chunks and model order as that split.
TEST(PipelineLayout, FreeFormLayoutMatchesTheSameFirstLastSplit) {
  // 16 layers on 3 stages x 2 chunks, 5 + 6 + 5 (the five-layer case above):
  // virtual stages in model order r0c0 r1c0 r2c0 r0c1 r1c1 r2c1.
  const PipelineLayout given(16, 3, 2, 5, 5);
  const PipelineLayout custom(16, 3, 2, chunks({2, 3, 3, 3, 3, 2}));
  EXPECT_FALSE(custom.even());
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(custom.stage_layers(r), given.stage_layers(r));
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(custom.chunk_layers(r, c), given.chunk_layers(r, c)) << r << "," << c;
      EXPECT_EQ(custom.first_layer(r, c), given.first_layer(r, c)) << r << "," << c;
    }
  }
  EXPECT_EQ(custom.busiest_stage(), given.busiest_stage());
  EXPECT_EQ(custom.max_chunk_layers(), given.max_chunk_layers());
}

// Megatron-Bridge's Llama 3 70B layout: rank 3 holds 11 layers (its last chunk
// 3), rank 7 holds 9 (its last chunk 1, with the loss).
// "Et||tt|tL" on PP 2 x VPP 2 (virtual stages 1, 0, 2, 1): rank 0 holds stages 0
// and 2 (3 layers), rank 1 stages 1 and 3 (1 layer).
TEST(PipelineLayout, RankLayersSumEachRanksVirtualStages) {
  EXPECT_EQ(rank_layers({1, 0, 2, 1}, 2), (std::vector<int>{3, 1}));
  EXPECT_EQ(rank_layers({2, 2, 2, 2, 2, 3, 2, 1}, 4), (std::vector<int>{4, 5, 4, 3}));  // rank 1: 2 + 3, rank 3: 2 + 1
  EXPECT_EQ(rank_layers({5, 6}, 1), (std::vector<int>{11}));
}

TEST(PipelineLayout, FreeFormLayoutBusiestStage) {
  std::vector<int> v(40, 2);
  v[35] = 3;
  v[39] = 1;
  const PipelineLayout l(80, 8, 5, chunks(v));
  EXPECT_EQ(l.stage_layers(3), 11);
  EXPECT_EQ(l.stage_layers(7), 9);
  EXPECT_EQ(l.stage_layers(0), 10);
  EXPECT_EQ(l.busiest_stage(), 3);
  EXPECT_EQ(l.max_chunk_layers(), 3);
  EXPECT_EQ(l.first_layer(3, 4), 70);  // after 35 virtual stages of 2
  EXPECT_EQ(l.first_layer(7, 4), 79);
}

TEST(PipelineLayout, FreeFormLayoutErrorsNameTheKey) {
  std::string key;
  // 6 virtual stages are not pp 3 x vpp 1; they would be pp 3 x vpp 2.
  ASSERT_TRUE(pipeline_layout_error(16, 3, 1, 0, 0, &key, chunks({2, 3, 3, 3, 3, 2})));
  EXPECT_EQ(key, "parallel.vpp");
  ASSERT_TRUE(pipeline_layout_error(16, 4, 1, 0, 0, &key, chunks({2, 3, 3, 3, 3, 2})));
  EXPECT_EQ(key, "parallel.pipeline_layout");
  // Rank 1 holds nothing.
  const std::optional<std::string> idle = pipeline_layout_error(4, 2, 2, 0, 0, &key, chunks({2, 0, 2, 0}));
  ASSERT_TRUE(idle);
  EXPECT_EQ(key, "parallel.pipeline_layout");
  EXPECT_NE(idle->find("pipeline rank 1 holds no transformer layer"), std::string::npos) << *idle;
  // Layers must add up; first / last are excluded.
  ASSERT_TRUE(pipeline_layout_error(5, 2, 2, 0, 0, &key, chunks({1, 1, 1, 1})));
  EXPECT_EQ(key, "parallel.pipeline_layout");
  ASSERT_TRUE(pipeline_layout_error(4, 2, 2, 2, 0, &key, chunks({1, 1, 1, 1})));
  EXPECT_EQ(key, "parallel.pipeline_layout");
  EXPECT_THROW(PipelineLayout(5, 2, 2, chunks({1, 1, 1, 1})), std::invalid_argument);
  // An empty chunk on a rank that holds layers elsewhere is Megatron-Core's too.
  EXPECT_FALSE(pipeline_layout_error(4, 2, 2, 0, 0, &key, chunks({0, 2, 2, 0})));
}

}  // namespace
}  // namespace megascale::model
