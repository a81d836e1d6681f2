// tests/model/op_cost_test.cc: FLOPs and shapes of the layer operators.
#include "model/op_cost.h"

#include <gtest/gtest.h>

#include "model/scenario.h"

namespace megascale::model {
namespace {

Scenario gpt175(int tp) {
  Scenario s = default_scenario("megatron");
  s.parallel.tp = tp;
  return s;
}

double gemm_fwd_flops(const std::vector<OperatorCost>& ops) {
  double f = 0;
  for (const OperatorCost& op : ops) {
    if (op.cls == OpClass::kGemm) f += op.fwd_flops;
  }
  return f;
}

TEST(OpCost, MfuFlopsFormulaIsMegatronsFor175B) {
  const ModelConfig m = default_scenario("megatron").model;
  const double B = 6144, s = m.seq_len, L = m.layers, h = m.hidden, V = m.vocab;
  const double expected = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  EXPECT_NEAR(model_flops_per_iteration(m, 6144), expected, 1e-9 * expected);
}

// MFU FLOPs: the block kind does not change them (same model); a sliding
// window counts only the keys it leaves, so the attention term shrinks, and a
// tiny window on a long sequence cannot push MFU past what the work allows
// (issue 13: MFU 212% at 32,768 tokens with a 128-token window).
TEST(OpCost, MfuFlopsIgnoreBlockKindAndCountTheWindow) {
  ModelConfig m = default_scenario("megatron").model;
  const double full = model_flops_per_iteration(m, 8);
  ModelConfig parallel = m;
  parallel.block = BlockKind::kParallel;
  EXPECT_EQ(model_flops_per_iteration(parallel, 8), full);
  // The attention term alone: 3 x 2 x 2 x tokens x s x h x layers.
  const double tokens = 8.0 * m.seq_len;
  const double attention_full = 3.0 * 4.0 * tokens * m.seq_len * m.hidden * m.layers;
  ModelConfig windowed = m;
  windowed.attention_window = 256;
  const double expected =
      full - attention_full * (1.0 - windowed.mean_keys_per_query() / m.mean_keys_per_query());
  EXPECT_NEAR(model_flops_per_iteration(windowed, 8), expected, 1e-9 * full);
  EXPECT_LT(model_flops_per_iteration(windowed, 8), full);
  // A window as long as the sequence is full attention.
  windowed.attention_window = m.seq_len;
  EXPECT_NEAR(model_flops_per_iteration(windowed, 8), full, 1e-9 * full);
}

TEST(OpCost, LayerGemmFlopsAre24bsh2AndSplitOverTp) {
  const Scenario s1 = gpt175(1);
  const double b = 1, sq = s1.model.seq_len, h = s1.model.hidden;
  const double one = gemm_fwd_flops(layer_operators(s1.model, s1.parallel, false));
  EXPECT_NEAR(one, 24 * b * sq * h * h, 1e-9 * one);
  const Scenario s8 = gpt175(8);
  EXPECT_NEAR(gemm_fwd_flops(layer_operators(s8.model, s8.parallel, false)) * 8, one, 1e-9 * one);
}

TEST(OpCost, BackwardGemmsDoTwiceTheForwardWork) {
  const Scenario s = gpt175(8);
  for (const OperatorCost& op : layer_operators(s.model, s.parallel, false)) {
    if (op.cls == OpClass::kGemm) {
      EXPECT_EQ(op.bwd_flops, 2 * op.fwd_flops) << op.name;
    }
  }
}

TEST(OpCost, UnfusedAttentionComputesTheWholeSquare) {
  const Scenario s = gpt175(8);
  const auto ops = layer_operators(s.model, s.parallel, false);
  const OperatorCost& scores = ops[find_operator(ops, "attn_scores")];
  const double heads = 128 / 8, sq = 2048, d = 96;
  EXPECT_EQ(scores.fwd_flops, 2 * heads * sq * sq * d);
  EXPECT_EQ(scores.batch, 16);
  EXPECT_EQ(scores.k, 96);
}

TEST(OpCost, DropoutZeroRunsNoMaskTraffic) {
  // Fused bias-dropout-add: 3 bf16 reads/writes + a 1-byte mask per element
  // forward, 2 bf16 + the mask backward; without dropout the mask goes.
  Scenario s = gpt175(8);
  const double elems = 2048.0 * 12288 / 8;  // SP: a TP rank holds 1/8 of the tokens
  const auto with = layer_operators(s.model, s.parallel, true);
  const OperatorCost& bda = with[find_operator(with, "bias_dropout_add1")];
  EXPECT_DOUBLE_EQ(bda.fwd_bytes, 7 * elems);
  EXPECT_DOUBLE_EQ(bda.bwd_bytes, 5 * elems);
  s.model.hidden_dropout = 0.0;
  const auto without = layer_operators(s.model, s.parallel, true);
  EXPECT_DOUBLE_EQ(without[find_operator(without, "bias_dropout_add1")].fwd_bytes, 6 * elems);
  EXPECT_DOUBLE_EQ(without[find_operator(without, "bias_dropout_add2")].bwd_bytes, 4 * elems);
  // Unfused: no dropout kernel (bias add, residual add forward; one backward).
  const auto unfused = layer_operators(s.model, s.parallel, false);
  const OperatorCost& plain = unfused[find_operator(unfused, "bias_dropout_add2")];
  EXPECT_EQ(plain.fwd_kernels, 2);
  EXPECT_DOUBLE_EQ(plain.fwd_bytes, 10 * elems);
  // Attention dropout 0: no dropout pass over the unfused score matrix.
  EXPECT_GE(find_operator(unfused, "attn_dropout"), 0);
  s.model.attention_dropout = 0.0;
  const auto no_attn = layer_operators(s.model, s.parallel, false);
  EXPECT_EQ(find_operator(no_attn, "attn_dropout"), -1);
  EXPECT_EQ(no_attn.size() + 1, unfused.size());
}

TEST(OpCost, FlashAttentionSkipsMaskedBlocksAndTheWindow) {
  Scenario s = gpt175(8);
  auto full = layer_operators(s.model, s.parallel, true);
  const double full_flops = full[find_operator(full, "flash_attention")].fwd_flops;
  EXPECT_NEAR(full_flops, 4.0 * 16 * 2048 * (2049.0 / 2) * 96, 1.0);
  s.model.attention_window = 512;
  auto win = layer_operators(s.model, s.parallel, true);
  const double win_flops = win[find_operator(win, "flash_attention")].fwd_flops;
  EXPECT_NEAR(win_flops / full_flops, s.model.mean_keys_per_query() / (2049.0 / 2), 1e-12);
  EXPECT_LT(win_flops, 0.5 * full_flops);
}

TEST(OpCost, ParallelBlockFusesGemmsWithoutChangingTheirWork) {
  Scenario s = gpt175(8);
  const double seq = gemm_fwd_flops(layer_operators(s.model, s.parallel, false));
  s.model.block = BlockKind::kParallel;
  const auto ops = layer_operators(s.model, s.parallel, false);
  EXPECT_NEAR(gemm_fwd_flops(ops), seq, 1e-9 * seq);
  EXPECT_GE(find_operator(ops, "qkv_fc1"), 0);
  EXPECT_GE(find_operator(ops, "proj_fc2"), 0);
  EXPECT_EQ(find_operator(ops, "ln2"), -1);
}

TEST(OpCost, SwigluAndGqaShapes) {
  Scenario s = gpt175(8);
  s.model.mlp = MlpKind::kSwiGlu;
  s.model.kv_heads = 8;
  const auto ops = layer_operators(s.model, s.parallel, false);
  EXPECT_EQ(ops[find_operator(ops, "fc1")].n, 2 * 4 * 12288 / 8);
  EXPECT_EQ(ops[find_operator(ops, "qkv")].n, (12288 + 2 * 8 * 96) / 8);
  EXPECT_GE(find_operator(ops, "swiglu"), 0);
}

TEST(OpCost, EfficientOperatorsMakeTheLayerFaster) {
  const Scenario s = gpt175(8);
  const GpuProfile& gpu = gpu_profile("A100-SXM4-80GB");
  const double slow = forward_time_s(layer_operators(s.model, s.parallel, false), gpu) +
                      backward_time_s(layer_operators(s.model, s.parallel, false), gpu);
  const double fast = forward_time_s(layer_operators(s.model, s.parallel, true), gpu) +
                      backward_time_s(layer_operators(s.model, s.parallel, true), gpu);
  EXPECT_LT(fast, slow);
}

// The loss moves the bytes per logit element its implementation's source does
// (op_cost.cc cross_entropy): Megatron's unfused passes 38 + 14, Megatron-Core's
// jit-fused 26 + 14, a single kernel 2 + 4, over tokens x V/t elements.
TEST(OpCost, CrossEntropyBytesFollowTheImplementation) {
  const Scenario s = gpt175(8);
  const double elems = static_cast<double>(s.parallel.micro_batch) * s.model.seq_len * s.model.vocab / 8;
  struct Case {
    CrossEntropyImpl impl;
    double fwd, bwd;
  };
  double previous_s = 1e30;
  const GpuProfile& gpu = gpu_profile("A100-SXM4-80GB");
  for (const Case& c : {Case{CrossEntropyImpl::kUnfused, 38, 14}, Case{CrossEntropyImpl::kJitFused, 26, 14},
                        Case{CrossEntropyImpl::kSingleKernel, 2, 4}}) {
    const std::vector<OperatorCost> ops = output_operators(s.model, s.parallel, c.impl);
    ASSERT_EQ(ops.back().name, "cross_entropy");
    EXPECT_DOUBLE_EQ(ops.back().fwd_bytes / elems, c.fwd) << to_string(c.impl);
    EXPECT_DOUBLE_EQ(ops.back().bwd_bytes / elems, c.bwd) << to_string(c.impl);
    const double t = forward_time_s(ops.back(), gpu) + backward_time_s(ops.back(), gpu);
    EXPECT_LT(t, previous_s) << to_string(c.impl);
    previous_s = t;
  }
  // PyTorch's F.cross_entropy over an fp32 copy (torchtitan): 22 + 26.
  const OperatorCost torch = output_operators(s.model, s.parallel, CrossEntropyImpl::kPytorch).back();
  EXPECT_DOUBLE_EQ(torch.fwd_bytes / elems, 22);
  EXPECT_DOUBLE_EQ(torch.bwd_bytes / elems, 26);
}

// RoPE (model.position = "rope") rotates this rank's q and k in every layer,
// after the QKV GEMM: fused 4 bytes an element each way; eager PyTorch
// (optimizations.eager_elementwise, torchtitan's complex multiply) 20.
// Eager also runs RMSNorm as its composite ops (36 + 78 bytes an element
// against the fused 4 + 6) and SwiGLU's SiLU and product apart (10 + 18
// against 6 + 10); LayerNorm and GeLU stay one native kernel.
TEST(OpCost, RopeAndEagerElementwiseMoveTheBytesOfTheirKernels) {
  Scenario s = gpt175(8);
  s.model.mlp = MlpKind::kSwiGlu;
  s.model.kv_heads = 8;
  const double tokens = static_cast<double>(s.parallel.micro_batch) * s.model.seq_len;
  const double h = s.model.hidden, f = s.model.ffn_hidden;
  const double qk = tokens * (h + 8 * s.model.head_dim()) / 8;
  EXPECT_EQ(find_operator(layer_operators(s.model, s.parallel, true), "rope"), -1);  // learned positions
  s.model.position = PositionKind::kRope;
  const std::vector<OperatorCost> fused = layer_operators(s.model, s.parallel, true);
  const int rope = find_operator(fused, "rope");
  ASSERT_EQ(rope, find_operator(fused, "qkv") + 1);
  EXPECT_DOUBLE_EQ(fused[rope].fwd_bytes, 4 * qk);
  EXPECT_DOUBLE_EQ(fused[rope].bwd_bytes, 4 * qk);
  std::vector<OperatorCost> eager = layer_operators(s.model, s.parallel, true, /*eager=*/true);
  EXPECT_DOUBLE_EQ(eager[rope].fwd_bytes, 20 * qk);
  const int ln = find_operator(eager, "ln1"), act = find_operator(eager, "swiglu");
  EXPECT_DOUBLE_EQ(eager[ln].fwd_bytes, fused[ln].fwd_bytes);  // LayerNorm: one kernel either way
  EXPECT_DOUBLE_EQ(eager[act].fwd_bytes, 10 * tokens * f / 8);
  EXPECT_DOUBLE_EQ(eager[act].bwd_bytes, 18 * tokens * f / 8);
  s.model.norm = NormKind::kRmsNorm;
  const double norm_elems = tokens * h / 8;  // sequence parallel: this rank's shard of the tokens
  ASSERT_TRUE(s.parallel.sequence_parallel);
  EXPECT_DOUBLE_EQ(layer_operators(s.model, s.parallel, true)[ln].fwd_bytes, 4 * norm_elems);
  eager = layer_operators(s.model, s.parallel, true, /*eager=*/true);
  EXPECT_DOUBLE_EQ(eager[ln].fwd_bytes, 36 * norm_elems);
  EXPECT_DOUBLE_EQ(eager[ln].bwd_bytes, 78 * norm_elems);
  EXPECT_DOUBLE_EQ(output_operators(s.model, s.parallel, CrossEntropyImpl::kUnfused, true)[0].fwd_bytes,
                   36 * norm_elems);
  // Slower on a GPU than the fused kernels, the GEMMs unchanged.
  const GpuProfile& gpu = gpu_profile("H100-SXM5-80GB");
  const std::vector<OperatorCost> fast = layer_operators(s.model, s.parallel, true);
  EXPECT_GT(forward_time_s(eager, gpu) + backward_time_s(eager, gpu),
            forward_time_s(fast, gpu) + backward_time_s(fast, gpu));
  EXPECT_DOUBLE_EQ(gemm_fwd_flops(eager), gemm_fwd_flops(fast));
}

TEST(OpCost, SequenceParallelShardsTheNormsAcrossTp) {
  Scenario s = gpt175(8);
  s.parallel.sequence_parallel = false;
  const auto plain = layer_operators(s.model, s.parallel, false);
  s.parallel.sequence_parallel = true;
  const auto sp = layer_operators(s.model, s.parallel, false);
  const int ln = find_operator(sp, "ln1");
  EXPECT_DOUBLE_EQ(plain[ln].fwd_bytes, 8 * sp[ln].fwd_bytes);
}

}  // namespace
}  // namespace megascale::model
