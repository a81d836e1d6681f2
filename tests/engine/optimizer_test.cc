// tests/engine/optimizer_test.cc: AdamW and LAMB against hand computations;
// ZeRO-sharded (2 and 4 shards) and TP-split runs equal the unsharded optimizer.
#include "engine/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>

#include "engine/comm.h"
#include "engine/comm_threads.h"
#include "engine/device_cpu.h"
#include "engine/model_chunk.h"

namespace megascale::engine {
namespace {

using model::OptimizerKind;

TEST(Shards, PaddedContiguousRanges) {
  EXPECT_EQ(padded_size(10, 4), 12u);
  EXPECT_EQ(padded_size(12, 4), 12u);
  EXPECT_EQ(shard_range(10, 4, 0).begin, 0u);
  EXPECT_EQ(shard_range(10, 4, 3).begin, 9u);
  EXPECT_EQ(shard_range(10, 4, 3).end, 12u);
  EXPECT_THROW(shard_range(10, 4, 4), std::invalid_argument);
}

TEST(AdamW, MatchesHandComputedSteps) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.weight_decay = 0.01;
  ShardedOptimizer opt(o, {{"w", 0, 1, true, false}, {"b", 1, 1, false, false}}, {0, 2});
  float p[2] = {1.0f, 1.0f};
  const double lr = 0.1;
  // Step 1, g = 0.5: m = 0.05, v = 0.00025, m_hat = 0.5, v_hat = 0.25;
  // w: 1*(1 - 0.1*0.01) - 0.1 * 0.5/(0.5 + 1e-8) = 0.999 - 0.1 = 0.899; b: no decay.
  float g1[2] = {0.5f, 0.5f};
  StepStats st = opt.step(p, g1, lr);
  EXPECT_NEAR(st.grad_norm, std::sqrt(0.5), 1e-7);
  EXPECT_EQ(st.clip_coef, 1.0);
  EXPECT_NEAR(p[0], 0.899, 1e-6);
  EXPECT_NEAR(p[1], 0.9, 1e-6);
  // Step 2, g = -0.25: m = 0.02, v = 0.00031225, bc1 = 0.19, bc2 = 0.001999.
  float g2[2] = {-0.25f, -0.25f};
  opt.step(p, g2, lr);
  const double m = 0.02, v = 0.00031225, bc1 = 0.19, bc2 = 1 - 0.999 * 0.999;
  const double upd = lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + 1e-8);
  EXPECT_NEAR(p[0], 0.899 * (1 - 0.1 * 0.01) - upd, 1e-6);
  EXPECT_NEAR(p[1], 0.9 - upd, 1e-6);
  EXPECT_EQ(opt.step_count(), 2);
  EXPECT_NEAR(opt.exp_avg()[0], 0.02, 1e-7);
  EXPECT_NEAR(opt.exp_avg_sq()[0], 0.00031225, 0.00031225 * 1e-6);
}

TEST(AdamW, ClipsByGlobalNormAndSkipsNonFinite) {
  OptimizerOptions o;
  o.max_grad_norm = 1.0;
  ShardedOptimizer opt(o, {{"w", 0, 2}}, {0, 2});
  float p[2] = {0, 0};
  float g[2] = {3, 4};  // norm 5 -> clip 1/(5 + 1e-6)
  const StepStats st = opt.step(p, g, 0.1f);
  EXPECT_DOUBLE_EQ(st.grad_norm, 5.0);
  EXPECT_NEAR(st.clip_coef, 0.2, 1e-7);
  EXPECT_NEAR(opt.exp_avg()[0], 0.1 * 3 * 0.2, 1e-7);
  float bad[2] = {NAN, 1};
  float before[2] = {p[0], p[1]};
  const StepStats s2 = opt.step(p, bad, 0.1f);
  EXPECT_TRUE(s2.skipped);
  EXPECT_EQ(p[0], before[0]);
  EXPECT_EQ(opt.step_count(), 1);
}

TEST(Lamb, TrustRatioOnHandExample) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kLamb;
  o.lamb_max = 10.0;
  // Tensor a: p = (3, 4), ||p|| = 5, g = (1, -1): first step u = g/(|g| + eps) =
  // (1, -1), ||u|| = sqrt(2), trust = 5/sqrt(2); p -= lr*trust*u.
  // Tensor b: p = (30, 40), ||p|| = 50 clamped to 10: trust = 10/sqrt(2).
  // Tensor c: p = 0 -> trust 1.
  ShardedOptimizer opt(o, {{"a", 0, 2}, {"b", 2, 2}, {"c", 4, 2}}, {0, 6});
  float p[6] = {3, 4, 30, 40, 0, 0};
  float g[6] = {1, -1, 1, -1, 1, -1};
  opt.step(p, g, 0.01f);
  const double ta = 5 / std::sqrt(2.0), tb = 10 / std::sqrt(2.0);
  EXPECT_NEAR(opt.last_trust_ratios()[0], ta, 1e-5);
  EXPECT_NEAR(opt.last_trust_ratios()[1], tb, 1e-5);
  EXPECT_EQ(opt.last_trust_ratios()[2], 1.0);
  EXPECT_NEAR(p[0], 3 - 0.01 * ta, 1e-5);
  EXPECT_NEAR(p[1], 4 + 0.01 * ta, 1e-5);
  EXPECT_NEAR(p[2], 30 - 0.01 * tb, 1e-5);
  EXPECT_NEAR(p[4], -0.01, 1e-6);
}

TEST(Lamb, WeightDecayEntersTheUpdateAndItsNorm) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kLamb;
  o.weight_decay = 0.5;
  ShardedOptimizer opt(o, {{"a", 0, 2}}, {0, 2});
  float p[2] = {3, 4};
  float g[2] = {1, 1};
  opt.step(p, g, 0.1f);
  // u = (1 + 1.5, 1 + 2) = (2.5, 3); ||u|| = sqrt(15.25); trust = 5/||u||.
  const double un = std::sqrt(2.5 * 2.5 + 9.0), t = 5 / un;
  EXPECT_NEAR(opt.last_trust_ratios()[0], t, 1e-5);
  EXPECT_NEAR(p[0], 3 - 0.1 * t * 2.5, 1e-5);
  EXPECT_NEAR(p[1], 4 - 0.1 * t * 3.0, 1e-5);
}

TEST(Optimizer, RejectsOverlappingSegments) {
  EXPECT_THROW(ShardedOptimizer({}, {{"a", 0, 5}, {"b", 4, 2}}, {0, 6}), std::invalid_argument);
}

// A model of 103 elements in tensors whose boundaries fall inside shards.
std::vector<TensorSegment> test_segments() {
  return {{"embed", 0, 10, true, false}, {"qkv", 10, 37, true, false}, {"ln", 47, 1, false, false},
          {"fc", 48, 25, true, false},  {"bias", 73, 30, false, false}};
}
constexpr size_t kTotal = 103;

std::vector<float> random_vector(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

OptimizerOptions options_for(OptimizerKind kind) {
  OptimizerOptions o;
  o.kind = kind;
  o.weight_decay = 0.1;
  o.max_grad_norm = 0.5;  // active: the random gradients have norm ~10
  return o;
}

constexpr int kSteps = 4;

// Unsharded reference: kSteps steps, gradient of step s = random_vector(seed s).
std::vector<float> reference(OptimizerKind kind, std::vector<double>* norms) {
  std::vector<float> p = random_vector(kTotal, 1, 1.0f);
  ShardedOptimizer opt(options_for(kind), test_segments(), {0, kTotal});
  for (int s = 0; s < kSteps; ++s) {
    const auto g = random_vector(kTotal, 100 + s, 1.0f);
    norms->push_back(opt.step(p.data(), g.data(), 0.01f).grad_norm);
  }
  return p;
}

void check_sharded_equals_unsharded(OptimizerKind kind, int shards) {
  std::vector<double> ref_norms;
  const std::vector<float> ref = reference(kind, &ref_norms);
  std::vector<float> gathered(padded_size(kTotal, shards));
  std::mutex mu;
  std::vector<std::vector<double>> norms(shards);
  run_on_threads(shards, [&](Comm& world) {
    const ShardRange r = shard_range(kTotal, shards, world.rank());
    std::vector<float> full = random_vector(kTotal, 1, 1.0f);
    full.resize(gathered.size(), 0.0f);
    std::vector<float> p(full.begin() + r.begin, full.begin() + r.end);
    ShardedOptimizer opt(options_for(kind), test_segments(), r, OptimizerComms{&world, nullptr, {}});
    for (int s = 0; s < kSteps; ++s) {
      auto g = random_vector(kTotal, 100 + s, 1.0f);
      g.resize(gathered.size(), 0.0f);
      norms[world.rank()].push_back(opt.step(p.data(), g.data() + r.begin, 0.01f).grad_norm);
    }
    std::vector<float> all(gathered.size());
    world.all_gather(p.data(), r.size(), all.data());
    if (world.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      gathered = all;
    }
  });
  for (size_t i = 0; i < kTotal; ++i) EXPECT_NEAR(gathered[i], ref[i], 1e-6) << "element " << i;
  for (int r = 0; r < shards; ++r) {
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(norms[r][s], ref_norms[s], 1e-5 * ref_norms[s]);
      EXPECT_EQ(norms[r][s], norms[0][s]) << "ranks must agree bitwise";
    }
  }
}

TEST(ShardedOptimizer, AdamWTwoShardsEqualsUnsharded) {
  check_sharded_equals_unsharded(OptimizerKind::kAdam, 2);
}
TEST(ShardedOptimizer, AdamWFourShardsEqualsUnsharded) {
  check_sharded_equals_unsharded(OptimizerKind::kAdam, 4);
}
TEST(ShardedOptimizer, LambTwoShardsEqualsUnsharded) {
  check_sharded_equals_unsharded(OptimizerKind::kLamb, 2);
}
TEST(ShardedOptimizer, LambFourShardsEqualsUnsharded) {
  check_sharded_equals_unsharded(OptimizerKind::kLamb, 4);
}

// TP = 2: tensor "w" (40 elements) is split in halves across the TP ranks,
// "ln" (6) is replicated. Norms (per-tensor for LAMB, global for clipping) must
// be those of the full model, counting "ln" once.
TEST(ShardedOptimizer, TensorParallelSplitEqualsSingleProcess) {
  for (OptimizerKind kind : {OptimizerKind::kAdam, OptimizerKind::kLamb}) {
    const std::vector<float> w0 = random_vector(40, 7, 1.0f), ln0 = random_vector(6, 8, 1.0f);
    std::vector<float> ref = w0;
    ref.insert(ref.end(), ln0.begin(), ln0.end());
    ShardedOptimizer single(options_for(kind), {{"w", 0, 40, true}, {"ln", 40, 6, false}}, {0, 46});
    std::vector<std::vector<float>> grads;
    for (int s = 0; s < kSteps; ++s) {
      auto gw = random_vector(40, 200 + s, 1.0f), gl = random_vector(6, 300 + s, 1.0f);
      gw.insert(gw.end(), gl.begin(), gl.end());
      grads.push_back(gw);
      single.step(ref.data(), gw.data(), 0.01f);
    }
    std::vector<std::vector<float>> result(2);
    run_on_threads(2, [&](Comm& tp) {
      const int t = tp.rank();
      std::vector<float> p(w0.begin() + 20 * t, w0.begin() + 20 * (t + 1));
      p.insert(p.end(), ln0.begin(), ln0.end());
      ShardedOptimizer opt(options_for(kind),
                           {{"w", 0, 20, true, /*tp_split=*/true}, {"ln", 20, 6, false, false}},
                           {0, 26}, OptimizerComms{nullptr, &tp, {}});
      for (int s = 0; s < kSteps; ++s) {
        std::vector<float> g(grads[s].begin() + 20 * t, grads[s].begin() + 20 * (t + 1));
        g.insert(g.end(), grads[s].begin() + 40, grads[s].end());
        opt.step(p.data(), g.data(), 0.01f);
      }
      result[t] = p;
    });
    for (int t = 0; t < 2; ++t) {
      for (int i = 0; i < 20; ++i) EXPECT_NEAR(result[t][i], ref[20 * t + i], 1e-6);
      for (int i = 0; i < 6; ++i) EXPECT_NEAR(result[t][20 + i], ref[40 + i], 1e-6);
    }
  }
}

// A further model group (e.g. PP: each stage holds different tensors) enters the
// global norm only.
TEST(ShardedOptimizer, ModelGroupsEnterTheGlobalNorm) {
  std::vector<double> norm(2);
  run_on_threads(2, [&](Comm& pp) {
    ShardedOptimizer opt({}, {{"x", 0, 1}}, {0, 1}, OptimizerComms{nullptr, nullptr, {&pp}});
    const float g = pp.rank() == 0 ? 3.0f : 4.0f;
    norm[pp.rank()] = opt.global_grad_norm(&g);
  });
  EXPECT_DOUBLE_EQ(norm[0], 5.0);
  EXPECT_DOUBLE_EQ(norm[1], 5.0);
}

TEST(ShardedOptimizer, DuplicatesCountOnceInTheGlobalNorm) {
  // Stage 0 and stage 1 both hold the tied embedding "e" (gradient already
  // summed, identical); stage 1 marks its copy duplicate.
  std::vector<double> norm(2);
  run_on_threads(2, [&](Comm& pp) {
    const bool last = pp.rank() == 1;
    ShardedOptimizer opt({}, {{"e", 0, 1, true, false, last}, {"x", 1, 1}}, {0, 2},
                         OptimizerComms{nullptr, nullptr, {&pp}});
    const float g[2] = {3.0f, last ? 0.0f : 4.0f};
    norm[pp.rank()] = opt.global_grad_norm(g);
  });
  EXPECT_DOUBLE_EQ(norm[0], 5.0);
  EXPECT_DOUBLE_EQ(norm[1], 5.0);
}

TEST(ShardedOptimizer, SegmentsFromModelChunkTensors) {
  model::ModelConfig m;
  m.layers = 1;
  m.hidden = 8;
  m.heads = 2;
  m.kv_heads = 2;
  m.seq_len = 4;
  m.vocab = 16;
  m.ffn_hidden = 32;
  ModelChunk chunk(ChunkConfig::whole_model(m, 1), cpu_device(), nullptr);
  const std::vector<TensorSegment> seg = segments_from(chunk.tensors());
  ASSERT_EQ(seg.size(), chunk.tensors().size());
  size_t covered = 0;
  for (size_t i = 0; i < seg.size(); ++i) {
    EXPECT_EQ(seg[i].name, chunk.tensors()[i].spec.name);
    EXPECT_EQ(seg[i].offset, chunk.tensors()[i].offset);
    covered += seg[i].size;
  }
  EXPECT_EQ(covered, chunk.num_params());
  // Builds an optimizer over the chunk's buffer (no overlaps).
  ShardedOptimizer opt({}, seg, {0, chunk.num_params()});
  EXPECT_EQ(opt.segments().size(), seg.size());
}

}  // namespace
}  // namespace megascale::engine
