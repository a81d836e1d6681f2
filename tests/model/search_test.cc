// tests/model/search_test.cc: exhaustive parallelism search.
#include "model/search.h"

#include <gtest/gtest.h>

#include "model/scenario.h"

namespace megascale::model {
namespace {

Scenario small_job() {
  Scenario s = default_scenario("megascale");
  s.model.layers = 24;
  s.model.hidden = 2048;
  s.model.heads = 16;
  s.model.kv_heads = 16;
  s.model.ffn_hidden = 4 * 2048;
  s.parallel = ParallelConfig{};
  s.parallel.tp = 2;
  s.parallel.pp = 2;
  s.parallel.dp = 4;
  s.parallel.global_batch = 64;
  s.cluster.gpus = 16;
  return s;
}

TEST(Search, EnumeratesEveryLayoutOnce) {
  const Scenario s = small_job();
  const auto layouts = enumerate_layouts(s, 16);
  // Brute force over the same axes.
  int64_t expected = 0;
  for (int tp : {1, 2, 4, 8}) {
    if (16 % tp || 16 % tp) continue;
    for (int pp = 1; pp <= 16 / tp; ++pp) {
      if ((16 / tp) % pp || 24 % pp) continue;
      const int dp = 16 / (tp * pp);
      if (64 % dp) continue;
      for (int mb = 1; mb <= 64 / dp; ++mb) {
        if ((64 / dp) % mb) continue;
        const int m = 64 / (dp * mb);
        for (int v = 1; v <= 24 / pp; ++v) {
          if ((24 / pp) % v) continue;
          if (v > 1 && (pp == 1 || m % pp)) continue;
          expected += (tp > 1 ? 2 : 1) * 4 * 3;
        }
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(layouts.size()), expected);
}

TEST(Search, RanksByMfuAndKeepsOnlyLayoutsThatFit) {
  const Scenario s = small_job();
  SearchOptions o;
  o.top_k = 5;
  int64_t last_done = -1, last_total = -1;
  o.progress = [&](int64_t done, int64_t total) {
    last_done = done;
    last_total = total;
  };
  o.progress_every = 10;
  const SearchResult r = search(s, o);
  ASSERT_EQ(r.top.size(), 5u);
  EXPECT_EQ(last_done, r.enumerated);
  EXPECT_EQ(last_total, r.enumerated);
  EXPECT_LE(r.fit, r.valid);
  EXPECT_LE(r.valid, r.enumerated);
  for (size_t i = 1; i < r.top.size(); ++i) EXPECT_GE(r.top[i - 1].estimate.mfu, r.top[i].estimate.mfu);
  for (const Candidate& c : r.top) {
    EXPECT_TRUE(c.estimate.memory.fits());
    EXPECT_FALSE(check_layout(s.model, c.parallel, 16).has_value());
  }
  EXPECT_NE(explain(r.top[1], r.top[0]).find("behind #1"), std::string::npos);
}

TEST(Search, BeatsOrMatchesThePapersLayout) {
  Scenario s = default_scenario("megascale");
  s.parallel.dp = 4;
  s.parallel.global_batch = 256;
  s.cluster.gpus = 256;
  const Estimate paper = estimate(s);
  SearchOptions o;
  o.top_k = 1;
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.top.empty());
  EXPECT_GE(r.top[0].estimate.mfu, paper.mfu - 1e-12);
}

TEST(Search, NothingFitsGivesAnEmptyResult) {
  Scenario s = default_scenario("megatron");
  s.model.layers = 8;  // a few giant layers on 8 small GPUs
  s.model.hidden = 65536;
  s.model.heads = 512;
  s.model.kv_heads = 512;
  s.model.ffn_hidden = 4 * 65536;
  s.hardware.gpu = "A100-SXM4-40GB";
  s.cluster.gpus = 8;
  s.parallel.global_batch = 8;
  SearchOptions o;
  const SearchResult r = search(s, o);
  EXPECT_GT(r.valid, 0);
  EXPECT_EQ(r.fit, 0);
  EXPECT_TRUE(r.top.empty());
}

}  // namespace
}  // namespace megascale::model
