// tests/model/search_test.cc: exhaustive parallelism search.
#include "model/search.h"

#include <gtest/gtest.h>

#include <set>

#include "model/memory.h"
#include "model/profile.h"
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

// The selective form searched is the scenario's framework's: a torchtitan job
// (recompute = "selective_op") is offered its op-level policy, not Megatron's.
TEST(Search, TheSelectiveFormFollowsTheScenariosFramework) {
  Scenario s = small_job();
  for (Recompute own : {Recompute::kNone, Recompute::kSelectiveOp}) {
    s.parallel.recompute = own;
    std::set<Recompute> modes;
    for (const ParallelConfig& p : enumerate_layouts(s, 16)) modes.insert(p.recompute);
    const Recompute selective = own == Recompute::kSelectiveOp ? Recompute::kSelectiveOp : Recompute::kSelective;
    EXPECT_EQ(modes, (std::set<Recompute>{Recompute::kNone, selective, Recompute::kFull})) << to_string(own);
  }
  EXPECT_EQ(parse_layout_constraints("recompute=selective_op").recompute, Recompute::kSelectiveOp);
}

TEST(Search, EnumeratesEveryLayoutOnce) {
  const Scenario s = small_job();
  const auto layouts = enumerate_layouts(s, 16);
  // Brute force over the same axes; context parallelism where the 2048-token
  // sequence splits into 2 x cp chunks (all of 1..16 here).
  int64_t expected = 0;
  for (int cp : {1, 2, 4, 8, 16}) {
    for (int tp : {1, 2, 4, 8}) {
      if ((16 / cp) % tp) continue;
      for (int pp = 1; pp <= 16 / (cp * tp); ++pp) {
        if ((16 / (cp * tp)) % pp || 24 % pp) continue;
        const int dp = 16 / (cp * tp * pp);
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
  }
  EXPECT_EQ(static_cast<int64_t>(layouts.size()), expected);
  int64_t with_cp = 0;
  for (const ParallelConfig& p : layouts) {
    if (p.cp == 1) continue;
    ++with_cp;
    // Folded as the parser folds a scenario: the gradient group is cp x dp,
    // and every GPU and sample is still counted once.
    EXPECT_EQ(p.dp % p.cp, 0);
    EXPECT_EQ(p.tp * p.pp * p.dp, 16);
    EXPECT_EQ(p.global_batch, 64 * p.cp);
    EXPECT_EQ(p.microbatches() * p.micro_batch * p.replicas(), 64);
  }
  EXPECT_GT(with_cp, 0);
}

// A layout with context parallelism found by the search is timed as the same
// layout written in a scenario file: one model per cp, folded the parser's way.
TEST(Search, ContextParallelLayoutsAreTimedAsTheirScenario) {
  const Scenario s = small_job();
  SearchOptions o;
  o.top_k = 1 << 20;
  o.fixed.cp = 2;
  o.fixed.tp = 2;
  o.fixed.pp = 2;
  o.fixed.vpp = 1;
  o.fixed.micro_batch = 1;
  o.fixed.zero_stage = 1;
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.top.empty());
  const Candidate* found = nullptr;
  for (const Candidate& c : r.top) {
    EXPECT_EQ(c.parallel.cp, 2);
    EXPECT_EQ(c.parallel.replicas(), 2);  // 16 GPUs / (tp 2 x cp 2 x pp 2)
    if (c.parallel.sequence_parallel && c.parallel.recompute == Recompute::kNone) found = &c;
  }
  ASSERT_NE(found, nullptr);
  const Scenario laid = with_layout(s, found->parallel);
  EXPECT_EQ(laid.model.seq_len, s.model.seq_len / 2);
  EXPECT_EQ(laid.model.span(), s.model.seq_len);
  const Scenario written = parse_scenario(R"([model]
name = "small"
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 64000
[parallel]
tp = 2
cp = 2
pp = 2
dp = 2
micro_batch = 1
global_batch = 64
sequence_parallel = true
zero_stage = 1
[hardware]
gpu = "A100-SXM4-80GB"
[cluster]
gpus = 16
[optimizations]
preset = "megascale"
)",
                                          "cp.toml");
  // The job's other settings are the search's (default_scenario's); the fold
  // (sequence, span, dp, batch) is the parser's.
  Scenario as_written = s;
  as_written.model.seq_len = written.model.seq_len;
  as_written.model.attention_span = written.model.attention_span;
  as_written.parallel = written.parallel;
  EXPECT_EQ(as_written.parallel.dp, found->parallel.dp);
  EXPECT_EQ(as_written.parallel.global_batch, found->parallel.global_batch);
  EXPECT_EQ(as_written.model.seq_len, laid.model.seq_len);
  EXPECT_EQ(as_written.model.span(), laid.model.span());
  EXPECT_DOUBLE_EQ(estimate(as_written).iteration_time_s, found->estimate.iteration_time_s);
  // A scenario read with cp = 2 searches the job it describes, not its layout.
  EXPECT_EQ(enumerate_layouts(written, 16).size(), enumerate_layouts(s, 16).size());
}

// No CP where the sequence does not split into 2 x cp chunks, nor for the
// engine (which has none).
TEST(Search, ContextParallelismOnlyWhereItCanRun) {
  Scenario s = small_job();
  s.model.seq_len = 2 * 3 * 5;  // 2 x cp chunks for cp = 1, 3, 5, 15 only
  for (const ParallelConfig& p : enumerate_layouts(s, 16)) EXPECT_EQ(p.cp, 1);
  Scenario engine = small_job();
  engine.hardware.gpu = "cpu";
  for (const ParallelConfig& p : enumerate_layouts(engine, 16)) EXPECT_EQ(p.cp, 1);
}

// Splits check_layout refuses for every profile are not enumerated: tp must
// divide ffn_hidden (5,460 = 4 x 1,365: no tp 8), and under sequence
// parallelism the tokens each CP rank holds (2,044 tokens: cp 1 or 2 from the
// 2 x cp chunks; cp 2 leaves 1,022, which tp 4 does not divide). So every
// layout enumerated is valid, and the search counts them all.
TEST(Search, EnumeratesOnlyTensorSplitsTheModelAllows) {
  Scenario s = small_job();
  s.model.ffn_hidden = 5460;
  s.model.seq_len = 2044;
  const std::vector<ParallelConfig> layouts = enumerate_layouts(s, 16);
  bool sp_tp4_cp1 = false;
  bool tp4_cp2 = false;
  for (const ParallelConfig& p : layouts) {
    EXPECT_NE(p.tp, 8);
    EXPECT_FALSE(p.sequence_parallel && p.tp == 4 && p.cp == 2);
    sp_tp4_cp1 |= p.sequence_parallel && p.tp == 4 && p.cp == 1;
    tp4_cp2 |= !p.sequence_parallel && p.tp == 4 && p.cp == 2;
    EXPECT_EQ(check_layout(with_layout(s, p).model, p, 16), std::nullopt)
        << "tp " << p.tp << " cp " << p.cp << " sp " << p.sequence_parallel;
  }
  EXPECT_TRUE(sp_tp4_cp1);
  EXPECT_TRUE(tp4_cp2);
  SearchOptions options;
  options.gpus = 16;
  const SearchResult r = search(s, options);
  EXPECT_EQ(r.valid, r.enumerated);
  EXPECT_EQ(r.enumerated, static_cast<int64_t>(layouts.size()));
}

// 6-GPU servers: a TP group sits whole in one (check_placement), so tp 4 and 8,
// which divide the 24 GPUs and the heads, are not offered; tp 2 is. So does a
// CP group within a server (2052 tokens: cp 2 and 3 split them): tp 2 x cp 2
// is not offered, tp 2 x cp 3 is.
TEST(Search, OffersOnlyTensorGroupsThatFitWholeInAServer) {
  Scenario s = small_job();
  s.model.seq_len = 2052;
  s.hardware.gpus_per_node = 6;
  s.hardware.nics_per_node = 6;
  bool tp2 = false, tp2_cp3 = false;
  for (const ParallelConfig& p : enumerate_layouts(s, 24)) {
    EXPECT_EQ(6 % p.tp, 0) << "tp " << p.tp;
    if (p.tp * p.cp < 6) {
      EXPECT_EQ(6 % (p.tp * p.cp), 0) << "tp " << p.tp << " cp " << p.cp;
    }
    tp2 |= p.tp == 2;
    tp2_cp3 |= p.tp == 2 && p.cp == 3;
  }
  EXPECT_TRUE(tp2);
  EXPECT_TRUE(tp2_cp3);
}

// 26 layers: pp 4 does not divide them, so the search offers Meta's trimmed
// split, 6 + 7 + 7 + 6, with the chunk counts the middle stages' 7 layers allow;
// every layout it offers is valid and its estimate runs.
TEST(Search, OffersTrimmedEndStagesWherePpDoesNotDivideTheLayers) {
  Scenario s = small_job();
  s.model.layers = 26;
  int trimmed = 0;
  for (const ParallelConfig& p : enumerate_layouts(s, 16)) {
    if (p.first_stage_layers == 0 && p.last_stage_layers == 0) {
      EXPECT_EQ(26 % p.pp, 0);
      continue;
    }
    ++trimmed;
    EXPECT_NE(26 % p.pp, 0);
    if (p.pp == 4) {
      EXPECT_EQ(p.first_stage_layers, 6);
      EXPECT_EQ(p.last_stage_layers, 6);
      EXPECT_TRUE(p.vpp == 1 || p.vpp == 7) << p.vpp;
    }
  }
  EXPECT_GT(trimmed, 0);
  // Ranked: this small model's 50,257-word head weighs several of its
  // 2,048-wide layers, so the heads-balanced split made from the trimmed one
  // (model/head_balance.h) beats it; the trimmed split reads as such.
  SearchOptions o;
  o.fixed = parse_layout_constraints("pp=4");
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.top.empty());
  const ParallelConfig& best = r.top[0].parallel;
  EXPECT_FALSE(check_layout(s.model, best, 16).has_value()) << layout_text(best);
  ParallelConfig split = best;
  split.pipeline_chunk_layers = nullptr;
  split.pipeline_layout.clear();
  split.first_stage_layers = 6;
  split.last_stage_layers = 6;
  EXPECT_NE(layout_text(split).find("PP 4 (6+...+6)"), std::string::npos) << layout_text(split);
  EXPECT_LE(r.top[0].estimate.iteration_time_s, estimate(with_layout(s, split)).iteration_time_s);
}

// --fix that no enumerated layout meets is said plainly: the dimension whose
// value never occurs (with the values that do), or a product that cannot be
// the GPU count; a dimension given twice is an error, not the last one winning.
TEST(Search, ExplainsFixedDimensionsNoLayoutMeets) {
  const Scenario s = small_job();  // 16 heads, 24 layers, 16 GPUs
  EXPECT_EQ(unmet_constraints_reason(s, 16, parse_layout_constraints("tp=3")),
            "tp=3: the layouts enumerated for " + s.model.name + " on 16 GPUs have tp 1, 2, 4, 8");
  EXPECT_EQ(unmet_constraints_reason(s, 16, parse_layout_constraints("tp=8,pp=4,dp=4")),
            "tp x pp x dp = 128, which does not divide the 16 GPUs");
  EXPECT_EQ(unmet_constraints_reason(s, 16, parse_layout_constraints("tp=2,pp=2,dp=4")), std::nullopt);
  SearchOptions o;
  o.fixed = parse_layout_constraints("tp=3");
  EXPECT_EQ(search(s, o).valid, 0);
  try {
    parse_layout_constraints("tp=8,pp=2,tp=4");
    ADD_FAILURE() << "tp given twice was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "tp is given twice");
  }
}

// --fix keeps sequence parallelism and recomputation too (the scenario keys'
// values): every ranked layout has them; a value the enumeration never offers
// (sequence parallelism at tp 1) is named; a bad value is refused.
TEST(Search, FixesSequenceParallelismAndRecomputation) {
  const Scenario s = small_job();
  SearchOptions o;
  o.fixed = parse_layout_constraints("recompute=selective,sequence_parallel=true");
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.top.empty());
  for (const Candidate& c : r.top) {
    EXPECT_EQ(c.parallel.recompute, Recompute::kSelective) << layout_text(c.parallel);
    EXPECT_TRUE(c.parallel.sequence_parallel) << layout_text(c.parallel);
  }
  o.fixed = parse_layout_constraints("sequence_parallel=false,recompute=full");
  for (const Candidate& c : search(s, o).top) {
    EXPECT_EQ(c.parallel.recompute, Recompute::kFull);
    EXPECT_FALSE(c.parallel.sequence_parallel);
  }
  EXPECT_EQ(unmet_constraints_reason(s, 16, parse_layout_constraints("tp=1,sequence_parallel=true")),
            "each fixed value occurs in some enumerated layout, but no layout has them all");
  Scenario tiny = s;
  tiny.model.heads = 1;
  tiny.model.kv_heads = 1;
  EXPECT_EQ(unmet_constraints_reason(tiny, 16, parse_layout_constraints("sequence_parallel=true")),
            "sequence_parallel=true: the layouts enumerated for " + s.model.name +
                " on 16 GPUs have sequence_parallel false");
  for (const char* bad : {"recompute=some", "sequence_parallel=1", "recompute"}) {
    EXPECT_THROW(parse_layout_constraints(bad), std::invalid_argument) << bad;
  }
  try {
    parse_layout_constraints("recompute=some");
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "recompute=some: expected none, selective, full or selective_op");
  }
}

// Llama 3 70B on 64 H100 at PP 8 x VPP 5 (the Megatron-Bridge job): the output
// head weighs about a layer, and the search, offered its ranked layouts with
// the heads balanced (model/head_balance.h), ranks the recipe's hand-made
// layout above the even split, faster by the closed form.
TEST(Search, RanksTheHeadBalancedSplitWhereItIsFaster) {
  const Scenario s =
      load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/bridge-llama3-70b-64-fp8.toml");
  SearchOptions o;
  o.fixed = parse_layout_constraints("tp=4,pp=8,vpp=5,dp=2,zero_stage=1");
  o.top_k = 20;
  o.keep_points = true;
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.top.empty());
  const ParallelConfig& best = r.top[0].parallel;
  ASSERT_NE(best.pipeline_chunk_layers, nullptr) << layout_text(best);
  EXPECT_EQ(best.pipeline_layout, "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL");
  EXPECT_EQ(stage_split_text(best), "10x3+11+10x3+9");
  EXPECT_GE(r.head_balanced, 1);
  EXPECT_FALSE(check_layout(s.model, best, 64).has_value());
  // Its even sibling is ranked too, behind it.
  const Candidate* even = nullptr;
  for (const Candidate& c : r.top) {
    if (c.parallel.pipeline_chunk_layers == nullptr && c.parallel.micro_batch == best.micro_batch &&
        c.parallel.sequence_parallel == best.sequence_parallel && c.parallel.recompute == best.recompute &&
        c.parallel.cp == best.cp && even == nullptr) {
      even = &c;
    }
  }
  ASSERT_NE(even, nullptr);
  EXPECT_LT(r.top[0].estimate.iteration_time_s, even->estimate.iteration_time_s);
  // The CSV names the split in Megatron-Core's spelling, quoted for its commas.
  const std::string csv = search_csv(r, {});
  EXPECT_NE(csv.find(",pipeline_layout\n"), std::string::npos);
  EXPECT_NE(csv.find(",\"Et*2|(t*2|)*34,t*3|(t*2|)*3,tL\"\n"), std::string::npos);
}

// GPT-3 175B's head (51,200 words on hidden 12,288) weighs a third of a layer:
// no split moves a layer for it, and the search offers none.
TEST(Search, SmallHeadsOfferNoBalancedSplit) {
  Scenario s = default_scenario("megascale");
  s.parallel.dp = 4;
  s.parallel.global_batch = 256;
  s.cluster.gpus = 256;
  SearchOptions o;
  o.fixed = parse_layout_constraints("tp=8,pp=8");
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.top.empty());
  EXPECT_EQ(r.head_balanced, 0);
  for (const Candidate& c : r.top) EXPECT_EQ(c.parallel.pipeline_chunk_layers, nullptr) << layout_text(c.parallel);
}

// What `simulate` offers: the Bridge job's even split gets the recipe's layout,
// faster by the closed form, with the head weighing more than a layer; the
// recipe's own layout and GPT-3 175B's even split get nothing; a headroom the
// split cannot keep refuses it.
TEST(Search, HeadBalancedCandidateOnlyWhereFasterAndItFits) {
  Scenario s = load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/bridge-llama3-70b-64-fp8.toml");
  const Estimate own = estimate(s);
  const HeadWeights w = head_weights(s.parallel, own);
  EXPECT_GT(w.output_layers, 1.0);
  EXPECT_LT(w.embedding_layers, 0.2);
  const std::optional<Candidate> b = head_balanced_candidate(s, own);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->parallel.pipeline_layout, "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL");
  EXPECT_LT(b->estimate.iteration_time_s, own.iteration_time_s);
  EXPECT_FALSE(head_balanced_candidate(s, own, 0.9).has_value());
  Scenario recipe = with_layout(s, b->parallel);
  EXPECT_FALSE(head_balanced_candidate(recipe, estimate(recipe)).has_value());
  const Scenario gpt3 = default_scenario("megascale");
  EXPECT_FALSE(head_balanced_candidate(gpt3, estimate(gpt3)).has_value());
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
    EXPECT_FALSE(check_layout(with_layout(s, c.parallel).model, c.parallel, 16).has_value());
  }
  EXPECT_NE(explain(r.top[1], r.top[0]).find("behind #1"), std::string::npos);
}

// Llama 3.1 70B on 64 H100s: the ranking's best rows are ZeRO 3 over 64
// micro-batches per replica whose gradients fit only sharded; the result also
// keeps the best layout that fits with whole gradients - the best of the
// ZeRO-1 ranking at least, and with an MFU no higher than #1's.
TEST(Search, KeepsTheBestLayoutThatFitsWithWholeGradients) {
  const Scenario s =
      load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/dgxc-llama31-70b-64-bf16.toml");
  SearchOptions o;
  o.top_k = 3;
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.top.empty());
  ASSERT_TRUE(r.best_whole_gradients.has_value());
  const Candidate& w = *r.best_whole_gradients;
  const GpuProfile& gpu = hardware_profile(s);
  auto whole_gradients_fit = [&](const Candidate& c) {
    const ModelConfig m = with_layout(s, c.parallel).model;
    return memory_per_gpu(m, c.parallel, s.optimizations, gpu).total_bytes +
               unsharded_gradient_extra_bytes(m, c.parallel, s.optimizations, gpu) <=
           r.memory_capacity_bytes;
  };
  EXPECT_TRUE(whole_gradients_fit(w));
  EXPECT_LE(w.estimate.mfu, r.top[0].estimate.mfu);
  // The ranking's #1 needs sharded gradients here (the case the field is for).
  EXPECT_FALSE(whole_gradients_fit(r.top[0]));
  // Every ZeRO-1 layout has whole gradients: none beats the kept one.
  o.fixed.zero_stage = 1;
  const SearchResult z1 = search(s, o);
  ASSERT_FALSE(z1.top.empty());
  EXPECT_GE(w.estimate.mfu, z1.top[0].estimate.mfu);
  ASSERT_TRUE(z1.best_whole_gradients.has_value());
  EXPECT_DOUBLE_EQ(z1.best_whole_gradients->estimate.mfu, z1.top[0].estimate.mfu);
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
