// tests/model/engine_ops_test.cc: the CPU engine's operators as kernel calls
// (model/engine_ops.h) and the job-level settings a cpu profile gets.
#include "model/engine_ops.h"

#include <gtest/gtest.h>

#include "model/job_schedule.h"
#include "model/profile.h"
#include "model/scenario.h"

namespace megascale::model {
namespace {

Scenario job(int tp, bool sp, BlockKind block, MlpKind mlp, int gpus_per_node = 2) {
  Scenario s;
  s.model.layers = 4;
  s.model.hidden = 256;
  s.model.heads = 8;
  s.model.kv_heads = 2;
  s.model.seq_len = 128;
  s.model.vocab = 512;
  s.model.ffn_hidden = 768;
  s.model.block = block;
  s.model.mlp = mlp;
  s.parallel.tp = tp;
  s.parallel.sequence_parallel = sp;
  s.parallel.micro_batch = 2;
  s.parallel.global_batch = 4;
  s.hardware.gpu = "cpu";
  s.hardware.gpus_per_node = gpus_per_node;
  s.cluster.gpus = tp;
  return s;
}

const GpuProfile& cpu() { return builtin_profile("cpu"); }

TEST(EngineOps, EveryOperatorHasItsCallsInBothPasses) {
  for (BlockKind block : {BlockKind::kSequential, BlockKind::kParallel}) {
    for (MlpKind mlp : {MlpKind::kGelu, MlpKind::kSwiGlu}) {
      const Scenario s = job(2, true, block, mlp);
      std::vector<OperatorCost> ops = job_layer_operators(s, cpu());
      for (auto&& extra : {job_embedding_operators(s, cpu()), job_output_operators(s, cpu())}) {
        ops.insert(ops.end(), extra.begin(), extra.end());
      }
      for (const OperatorCost& op : ops) {
        EXPECT_FALSE(op.fwd_calls.empty()) << op.name;
        EXPECT_FALSE(op.bwd_calls.empty()) << op.name;
        EXPECT_GT(forward_time_s(op, cpu()), 0.0) << op.name;
      }
      // The engine's attention is one kernel: no unfused score / softmax ops.
      EXPECT_GE(find_operator(ops, "flash_attention"), 0);
      EXPECT_LT(find_operator(ops, "softmax"), 0);
    }
  }
}

TEST(EngineOps, LinearLayersAreTheEnginesGemmsPerTpRank) {
  const Scenario s = job(2, true, BlockKind::kSequential, MlpKind::kGelu);
  const std::vector<OperatorCost> ops = job_layer_operators(s, cpu());
  const OperatorCost& qkv = ops[find_operator(ops, "qkv")];
  // N = 2 x 128 tokens; (heads + 2 kv heads) / tp x head dim 32 = (4 + 2) x 32 outputs; K = 256.
  // Under SP the engine runs the token-parallel products per sequence shard
  // (engine/layers.cc): tp = 2 blocks of N / 2 = 128 rows, each with its bias.
  ASSERT_EQ(qkv.fwd_calls.size(), 4u);  // (GEMM + bias) per block
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(qkv.fwd_calls[2 * b].name, "nt");
    EXPECT_EQ(qkv.fwd_calls[2 * b].m, 128);
    EXPECT_EQ(qkv.fwd_calls[2 * b].n, 192);
    EXPECT_EQ(qkv.fwd_calls[2 * b].k, 256);
    EXPECT_EQ(qkv.fwd_calls[2 * b + 1].name, "bias_add");
    EXPECT_EQ(qkv.fwd_calls[2 * b + 1].count, 128.0 * 192);
  }
  // Backward: bias gradient, weight gradient (tn: OC x K over all N), input
  // gradient (nn) per block.
  ASSERT_EQ(qkv.bwd_calls.size(), 4u);
  EXPECT_EQ(qkv.bwd_calls[1].name, "tn");
  EXPECT_EQ(qkv.bwd_calls[1].m, 192);
  EXPECT_EQ(qkv.bwd_calls[1].k, 256);
  EXPECT_EQ(qkv.bwd_calls[1].n, 256);
  for (int b = 2; b < 4; ++b) {
    EXPECT_EQ(qkv.bwd_calls[b].name, "nn");
    EXPECT_EQ(qkv.bwd_calls[b].m, 128);
  }
  // Without SP one call each over all N rows.
  const Scenario nosp = job(2, false, BlockKind::kSequential, MlpKind::kGelu);
  const std::vector<OperatorCost> nops = job_layer_operators(nosp, cpu());
  const OperatorCost& nqkv = nops[find_operator(nops, "qkv")];
  ASSERT_EQ(nqkv.fwd_calls.size(), 2u);
  EXPECT_EQ(nqkv.fwd_calls[0].m, 256);
  ASSERT_EQ(nqkv.bwd_calls.size(), 3u);
  EXPECT_EQ(nqkv.bwd_calls[2].name, "nn");
  EXPECT_EQ(nqkv.bwd_calls[2].m, 256);
  // The parallel block's fused GEMM is two GEMMs in the engine; SwiGLU's fc1 has no bias.
  const Scenario p = job(1, false, BlockKind::kParallel, MlpKind::kSwiGlu);
  const std::vector<OperatorCost> pops = job_layer_operators(p, cpu());
  const OperatorCost& fused = pops[find_operator(pops, "qkv_fc1")];
  int gemms = 0;
  for (const KernelCall& c : fused.fwd_calls) gemms += c.kind == CallKind::kGemm;
  EXPECT_EQ(gemms, 2);
  EXPECT_EQ(fused.fwd_calls.size(), 3u);  // qkv GEMM + bias, fc1 GEMM (no bias)
}

TEST(EngineOps, CpuBytesAndUntiedOutputLayer) {
  // TP 2 with SP: each rank sends its fp32 sequence shard, 2 x 128 / 2 tokens x 256 x 4 B.
  Scenario s = job(2, true, BlockKind::kSequential, MlpKind::kGelu);
  EXPECT_EQ(p2p_message_bytes(s), 2 * 64 * 256 * 4);
  // PP 2, TP 1: the whole fp32 activation (no scatter-gather).
  s.parallel.pp = 2;
  s.parallel.tp = 1;
  s.cluster.gpus = 2;
  s.parallel.sequence_parallel = false;
  EXPECT_EQ(p2p_message_bytes(s), 2 * 128 * 256 * 4);
  const double params_first = engine_chunk_params(s, 0, 0), params_last = engine_chunk_params(s, 1, 0);
  EXPECT_GT(params_first, 0);
  // First: token (512 x 256) + position (128 x 256) embeddings; last: final LN + output layer.
  EXPECT_NEAR(params_first - params_last, 128.0 * 256 - 2 * 256, 1e-6);
}

TEST(EngineOps, BusyRanksTimeShareAndColdFraction) {
  Scenario s = job(2, true, BlockKind::kSequential, MlpKind::kGelu);
  EXPECT_EQ(busy_ranks(s, cpu()), std::min(2, cpu().cores));
  EXPECT_EQ(time_share(s, cpu()), 1.0);
  // Four ranks on one machine of two cores share them.
  s.parallel.tp = 4;
  s.cluster.gpus = 4;
  s.hardware.gpus_per_node = 4;
  if (cpu().cores == 2) {
    EXPECT_DOUBLE_EQ(time_share(s, cpu()), 2.0);
  }
  // A working set far above the cache reads cold; a tiny one warm.
  Scenario big = job(1, false, BlockKind::kSequential, MlpKind::kGelu);
  big.model.hidden = 2048;
  big.model.heads = 16;
  big.model.kv_heads = 16;
  big.model.ffn_hidden = 8192;
  big.model.seq_len = 1024;
  Scenario tiny = job(1, false, BlockKind::kSequential, MlpKind::kGelu);
  tiny.model.hidden = 32;
  tiny.model.heads = 2;
  tiny.model.kv_heads = 2;
  tiny.model.ffn_hidden = 128;
  tiny.model.seq_len = 16;
  tiny.model.vocab = 64;
  GpuProfile with_cache = cpu();
  with_cache.cache_bytes = 32 << 20;
  EXPECT_GT(cold_fraction(big, with_cache), 0.9);
  EXPECT_EQ(cold_fraction(tiny, with_cache), 0.0);
  with_cache.cache_bytes = 0;  // unknown: cold
  EXPECT_EQ(cold_fraction(tiny, with_cache), 1.0);
}

}  // namespace
}  // namespace megascale::model
