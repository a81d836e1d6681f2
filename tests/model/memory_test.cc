// tests/model/memory_test.cc: per-GPU HBM model.
#include "model/memory.h"
#include "model/profile.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "model/scenario.h"

namespace megascale::model {
namespace {

Scenario base() {
  Scenario s = default_scenario("megatron");  // 175B, 4h GeLU, MHA
  return s;
}

TEST(Memory, ActivationsFollowKorthikantiTable2) {
  Scenario s = base();
  const double sbh = 2048.0 * 1 * 12288, t = 8, a = 128, sq = 2048, h = 12288;
  s.parallel.sequence_parallel = false;
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, false),
              sbh * (10 + 24 / t + 5 * a * sq / (h * t)), 1.0);
  s.parallel.sequence_parallel = true;
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, false),
              sbh * (34 / t + 5 * a * sq / (h * t)), 1.0);
  s.parallel.recompute = Recompute::kSelective;
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, false), sbh * 34 / t, 1.0);
  s.parallel.recompute = Recompute::kFull;
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, false), sbh * 2 / t, 1.0);
}

TEST(Memory, FlashAttentionDropsTheScoreMatrix) {
  Scenario s = base();
  const double sbh = 2048.0 * 12288;
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, true), sbh * 34 / 8, 1.0);
}

TEST(Memory, Fp8KeepsTheLinearGemmInputsInOneByte) {
  // Transformer Engine's FP8 recipe saves the QKV / FC1 inputs (LayerNorm
  // outputs, 2 sbh each in bf16), the projection input (2 sbh) and the FC2
  // input (2 sbf = 8 sbh at f = 4h) in 1 byte instead of 2: 7 of the 34 sbh.
  Scenario s = base();
  s.parallel.sequence_parallel = true;
  const double sbh = 2048.0 * 12288;
  const double t = s.parallel.tp;
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, true, false), sbh * 34 / t, 1.0);
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, true, true), sbh * 27 / t, 1.0);
  // Without SP the LayerNorm outputs are replicated, the rest sharded.
  s.parallel.sequence_parallel = false;
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, true, false) -
                  activation_bytes_per_layer(s.model, s.parallel, true, true),
              sbh * (2.0 + 5.0 / t), 1.0);
  // Full recompute keeps only the layer input (bf16): FP8 changes nothing.
  s.parallel.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(s.model, s.parallel, true, true),
                   activation_bytes_per_layer(s.model, s.parallel, true, false));
}

// Transformer Engine keeps each layer weight's FP8 copy through the step: 1 B
// row-wise, plus a 1 B column-wise copy where the FP8 GEMM is TN-only (Hopper),
// MXFP8 both with their scales (2 x (1 + 1/32) B). Beside the BF16 weights, or,
// with Megatron-Core's --fp8-param-gather, instead of them.
TEST(Memory, Fp8WeightCopiesSitBesideOrReplaceTheBf16Weights) {
  Scenario s = base();
  s.hardware.gpu = "H100-SXM5-80GB";
  const MemoryBreakdown bf16 = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  EXPECT_EQ(bf16.fp8_weight_bytes, 0.0);
  s.optimizations.fp8 = true;
  const MemoryBreakdown beside = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  // The fullest rank's layers: all its parameters but the embedding's.
  const double layer_params = static_cast<double>(s.model.parameters_per_layer()) / s.parallel.tp *
                              s.model.layers / s.parallel.pp;
  EXPECT_NEAR(beside.fp8_weight_bytes, 2.0 * layer_params, 1.0);
  EXPECT_NEAR(beside.parameters_bytes, bf16.parameters_bytes + 2.0 * layer_params, 1.0);
  EXPECT_NE(beside.describe().find("parameters " + fmt::format("{:.1f}", beside.parameters_bytes / 1e9) +
                                   " (FP8 weights"),
            std::string::npos)
      << beside.describe();
  s.optimizations.fp8_param_gather = true;  // Hopper: 1 + 1 B replace 2 B
  EXPECT_NEAR(memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s)).parameters_bytes,
              bf16.parameters_bytes, 1.0);
  s.hardware.gpu = "B200-SXM-180GB";  // any layout: no column-wise copy
  EXPECT_NEAR(memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s)).parameters_bytes,
              bf16.parameters_bytes - layer_params, 1.0);
  s.optimizations.fp8_recipe = Fp8Recipe::kMxfp8;
  const MemoryBreakdown mx = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  EXPECT_NEAR(mx.fp8_weight_bytes, 2.0 * (1 + 1.0 / 32) * layer_params, 1.0);
  EXPECT_NEAR(mx.parameters_bytes, bf16.parameters_bytes + layer_params / 16, 1.0);
  // ZeRO-3 gathers stay BF16 here.
  s.parallel.zero_stage = 3;
  EXPECT_EQ(memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s)).fp8_weight_bytes, 0.0);
}

TEST(Memory, Bf16OptimizerStateHalvesTheOptimizerBytes) {
  // Apex DistributedFusedAdam with dtype = bf16 holds the master shard and both
  // moments in bf16: 6 B a parameter of the shard instead of 12.
  Scenario s = base();
  s.hardware.gpu = "H100-SXM5-80GB";
  s.parallel.zero_stage = 1;
  const MemoryBreakdown fp32 = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  s.optimizations.optimizer_state_dtype = OptimizerStateDtype::kBf16;
  const MemoryBreakdown bf16 = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  EXPECT_GT(fp32.optimizer_bytes, 0.0);
  EXPECT_NEAR(bf16.optimizer_bytes, fp32.optimizer_bytes / 2, 1.0);
  // 12 B of fp32 state a parameter (BF16 weights 2 B), sharded over DP.
  EXPECT_NEAR(fp32.optimizer_bytes, fp32.parameters_bytes / 2 * 12 / s.parallel.dp, 1.0);
  // Nothing else moves.
  EXPECT_EQ(bf16.parameters_bytes, fp32.parameters_bytes);
  EXPECT_EQ(bf16.gradients_bytes, fp32.gradients_bytes);
  EXPECT_EQ(bf16.activations_bytes, fp32.activations_bytes);
  EXPECT_NEAR(fp32.total_bytes - bf16.total_bytes, fp32.optimizer_bytes / 2, 1.0);
}

TEST(Memory, PrecisionAwareOptimizerHoldsEachStateInItsDtype) {
  // Megatron-Core's precision-aware optimizer: bf16 moments and TE's 16-bit
  // param remainders hold 2 + 2 + 2 = 6 B a parameter of the shard; fp16
  // master weights and fp8 moments 2 + 1 + 1.
  Scenario s = base();
  s.hardware.gpu = "H100-SXM5-80GB";
  s.parallel.zero_stage = 1;
  const MemoryBreakdown fp32 = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  s.optimizations.exp_avg_dtype = MomentDtype::kBf16;
  const MemoryBreakdown one = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  EXPECT_NEAR(one.optimizer_bytes, fp32.optimizer_bytes * 10 / 12, 1.0);
  s.optimizations.exp_avg_sq_dtype = MomentDtype::kBf16;
  s.optimizations.main_params_dtype = MainParamsDtype::kFp32Remainders;
  const MemoryBreakdown all = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  EXPECT_NEAR(all.optimizer_bytes, fp32.optimizer_bytes / 2, 1.0);
  s.optimizations.exp_avg_dtype = s.optimizations.exp_avg_sq_dtype = MomentDtype::kFp8;
  s.optimizations.main_params_dtype = MainParamsDtype::kFp16;
  const MemoryBreakdown least = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  EXPECT_NEAR(least.optimizer_bytes, fp32.optimizer_bytes * 4 / 12, 1.0);
  EXPECT_EQ(least.parameters_bytes, fp32.parameters_bytes);
  EXPECT_EQ(least.gradients_bytes, fp32.gradients_bytes);
}

TEST(Memory, NoDropoutKeepsNoMasks) {
  // Korthikanti et al. Table 2 counts a 1-byte hidden-dropout mask after the
  // projection and after FC2 (1 sbh each of the 34) and, without fused
  // attention, a s^2 b mask plus the 2 a s^2 b dropout output. At p = 0
  // PyTorch's dropout returns its input: none of them is kept.
  Scenario s = base();
  s.parallel.sequence_parallel = true;
  const double sbh = 2048.0 * 12288;
  const double t = s.parallel.tp;
  const double with = activation_bytes_per_layer(s.model, s.parallel, true, false);
  s.model.hidden_dropout = 0.0;
  EXPECT_NEAR(activation_bytes_per_layer(s.model, s.parallel, true, false), with - 2 * sbh / t, 1.0);
  // Without SP the masks are replicated on every TP rank: 2 sbh whole.
  s.parallel.sequence_parallel = false;
  const double replicated_with = [&] {
    Scenario d = s;
    d.model.hidden_dropout.reset();
    return activation_bytes_per_layer(d.model, d.parallel, true, false);
  }();
  EXPECT_NEAR(replicated_with - activation_bytes_per_layer(s.model, s.parallel, true, false), 2 * sbh, 1.0);
  // The parallel block has one mask.
  s.model.block = BlockKind::kParallel;
  Scenario d = s;
  d.model.hidden_dropout = 0.1;
  EXPECT_NEAR(activation_bytes_per_layer(d.model, d.parallel, true, false) -
                  activation_bytes_per_layer(s.model, s.parallel, true, false),
              sbh, 1.0);
  // Attention dropout: the unfused score matrix keeps 2 of its 5 as^2 b.
  s = base();
  s.parallel.sequence_parallel = true;
  const double as2b = static_cast<double>(s.model.heads) * 2048.0 * 2048.0 / t;
  const double unfused = activation_bytes_per_layer(s.model, s.parallel, false, false);
  s.model.attention_dropout = 0.0;
  EXPECT_NEAR(unfused - activation_bytes_per_layer(s.model, s.parallel, false, false), 3 * as2b, 1.0);
  // Fused attention keeps no score matrix either way.
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(s.model, s.parallel, true, false), with);
}

TEST(Memory, ZeroStagesShardStateOverDataParallelRanks) {
  Scenario s = base();
  const GpuProfile& gpu = hardware_profile(s);
  s.parallel.zero_stage = 0;
  const MemoryBreakdown z0 = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  s.parallel.zero_stage = 1;
  const MemoryBreakdown z1 = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  s.parallel.zero_stage = 2;
  const MemoryBreakdown z2 = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  s.parallel.zero_stage = 3;
  const MemoryBreakdown z3 = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  const double dp = s.parallel.dp;
  EXPECT_NEAR(z1.optimizer_bytes, z0.optimizer_bytes / dp, 1.0);
  EXPECT_EQ(z1.gradients_bytes, z0.gradients_bytes);
  EXPECT_NEAR(z2.gradients_bytes, z0.gradients_bytes / dp, 1.0);
  EXPECT_EQ(z2.parameters_bytes, z0.parameters_bytes);
  EXPECT_NEAR(z3.parameters_bytes, z0.parameters_bytes / dp, 1.0);
  // bf16 params 2 B, fp32 grads 4 B, Adam state 12 B per parameter.
  EXPECT_NEAR(z0.gradients_bytes, 2 * z0.parameters_bytes, 1.0);
  EXPECT_NEAR(z0.optimizer_bytes, 6 * z0.parameters_bytes, 1.0);
}

// ZeRO 2/3 count 1/dp of the gradients while both fidelities reduce-scatter
// them once per step: with several micro-batches per replica the whole
// gradients are what that reading leaves out; with one micro-batch (or stage
// 0/1, or one replica) nothing is left out.
TEST(Memory, ShardedGradientsOverSeveralMicrobatchesNameWhatWholeOnesAdd) {
  Scenario s = base();  // 175B, DP > 1, many micro-batches per replica
  const GpuProfile& gpu = hardware_profile(s);
  ASSERT_GT(s.parallel.dp, 1);
  ASSERT_GT(s.parallel.microbatches(), 1);
  s.parallel.zero_stage = 1;
  const MemoryBreakdown z1 = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  EXPECT_EQ(unsharded_gradient_extra_bytes(s.model, s.parallel, s.optimizations, gpu), 0.0);
  for (int stage : {2, 3}) {
    s.parallel.zero_stage = stage;
    const MemoryBreakdown z = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
    const double extra = unsharded_gradient_extra_bytes(s.model, s.parallel, s.optimizations, gpu);
    EXPECT_NEAR(extra, z1.gradients_bytes - z.gradients_bytes, 1.0) << stage;
    EXPECT_NEAR(extra, z1.gradients_bytes * (1.0 - 1.0 / s.parallel.dp), 1.0) << stage;
  }
  // One micro-batch per replica: each chunk's gradients are reduced as its
  // only backward ends, so the shard is all that stays.
  s.parallel.zero_stage = 2;
  s.parallel.global_batch = s.parallel.dp * s.parallel.micro_batch;
  ASSERT_EQ(s.parallel.microbatches(), 1);
  EXPECT_EQ(unsharded_gradient_extra_bytes(s.model, s.parallel, s.optimizations, gpu), 0.0);
  // One replica: nothing is sharded.
  s = base();
  s.parallel.zero_stage = 2;
  s.parallel.global_batch /= s.parallel.dp;
  s.parallel.dp = 1;
  ASSERT_GT(s.parallel.microbatches(), 1);
  EXPECT_EQ(unsharded_gradient_extra_bytes(s.model, s.parallel, s.optimizations, gpu), 0.0);
}

// With one pipeline stage, rank 0 also runs the loss: one micro-batch's logits
// (tokens x vocab / TP) at 6 bytes each for Megatron's fp32-upcasting losses, 4
// for a single-kernel loss; with more stages rank 0 holds no logits.
TEST(Memory, OneStageHoldsTheLossLogits) {
  Scenario s = base();
  const GpuProfile& gpu = hardware_profile(s);
  const MemoryBreakdown staged = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  s.optimizations.cross_entropy = CrossEntropyImpl::kSingleKernel;
  EXPECT_DOUBLE_EQ(memory_per_gpu(s.model, s.parallel, s.optimizations, gpu).other_bytes, staged.other_bytes);
  s.parallel.pp = 1;
  s.parallel.vpp = 1;
  const double logits = static_cast<double>(s.parallel.micro_batch) * s.model.seq_len * s.model.vocab / s.parallel.tp;
  const MemoryBreakdown single = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  s.optimizations.cross_entropy = CrossEntropyImpl::kUnfused;
  const MemoryBreakdown unfused = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  EXPECT_NEAR(unfused.other_bytes - staged.other_bytes, 6 * logits, 1.0);
  EXPECT_NEAR(unfused.loss_logits_bytes, 6 * logits, 1.0);
  // With recompute the re-run layer comes after the loss's tensors are freed:
  // other holds the larger of the two, and names both.
  s.parallel.recompute = Recompute::kSelective;
  const MemoryBreakdown rerun = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  ASSERT_GT(rerun.rerun_layer_bytes, 0.0);
  EXPECT_NEAR(rerun.other_bytes - staged.other_bytes, std::max(6 * logits, rerun.rerun_layer_bytes), 1.0);
  EXPECT_NE(rerun.describe().find("never at once"), std::string::npos) << rerun.describe();
  s.parallel.recompute = Recompute::kNone;
  EXPECT_DOUBLE_EQ(staged.loss_logits_bytes, 0.0);
  EXPECT_NE(unfused.describe().find("(loss logits "), std::string::npos) << unfused.describe();
  EXPECT_NEAR(single.other_bytes - staged.other_bytes, 4 * logits, 1.0);
  // PyTorch's F.cross_entropy keeps log_softmax's fp32 output beside the
  // backward's two fp32 gradients: 12.
  s.optimizations.cross_entropy = CrossEntropyImpl::kPytorch;
  EXPECT_NEAR(memory_per_gpu(s.model, s.parallel, s.optimizations, gpu).other_bytes - staged.other_bytes, 12 * logits,
              1.0);
}

// Context parallelism's K/V buffers beside the stash while the first
// backward's attention runs: the all-gather form (Llama 3's CP) holds every CP
// rank's K/V again and their full-size gradients (2 x cp blocks), the ring the
// block in hand and the next, with their gradients (4 blocks).
TEST(Memory, ContextParallelismHoldsItsKeyValueBuffers) {
  Scenario s = load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/llama3-405b-16384-cp16.toml");
  ASSERT_EQ(s.parallel.cp, 16);
  ASSERT_EQ(s.parallel.cp_comm, CpComm::kAllGather);
  const GpuProfile& gpu = hardware_profile(s);
  // One CP rank's block: K and V over its 131,072 / 16 tokens, one of the 8 KV
  // heads per TP 8 rank, head dimension 128, bf16.
  const double block = 2.0 * s.parallel.micro_batch * (131072 / 16) * 1 * 128 * 2;
  const MemoryBreakdown gathered = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  EXPECT_DOUBLE_EQ(gathered.cp_kv_bytes, 2 * 16 * block);
  EXPECT_NE(gathered.describe().find("CP K/V buffers "), std::string::npos) << gathered.describe();
  s.parallel.cp_comm = CpComm::kP2p;
  const MemoryBreakdown ring = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  EXPECT_DOUBLE_EQ(ring.cp_kv_bytes, 4 * block);
  // 16.8 MB: printed with two decimals, not as "0.0".
  EXPECT_NE(ring.describe().find("CP K/V buffers 0.02"), std::string::npos) << ring.describe();
  EXPECT_NEAR(gathered.other_bytes - ring.other_bytes, (2 * 16 - 4) * block, 1.0);
  EXPECT_DOUBLE_EQ(gathered.activations_bytes, ring.activations_bytes);  // the forward saves its own block only
  // No CP, no buffers.
  EXPECT_DOUBLE_EQ(memory_per_gpu(base().model, base().parallel, base().optimizations, hardware_profile(base())).cp_kv_bytes,
                   0.0);
}

// Under recompute the first backward after the peak forward re-creates one
// layer's plain activations while every stash is held: full recompute adds the
// whole layer beside its input, selective the attention scores (nothing with
// FlashAttention, which saves no scores), none nothing.
TEST(Memory, RecomputeHoldsTheReRunLayerOnTopOfTheStash) {
  Scenario s = base();  // SP, TP 8, no FlashAttention
  const GpuProfile& gpu = hardware_profile(s);
  const double sbh = 2048.0 * 12288, t = 8, a = 128, sq = 2048, h = 12288;
  s.parallel.recompute = Recompute::kNone;
  const MemoryBreakdown none = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  s.parallel.recompute = Recompute::kSelective;
  const MemoryBreakdown selective = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  EXPECT_NEAR(selective.other_bytes - none.other_bytes, sbh * 5 * a * sq / (h * t), 1.0);
  s.parallel.recompute = Recompute::kFull;
  const MemoryBreakdown full = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  EXPECT_NEAR(full.other_bytes - none.other_bytes, sbh * (34 / t + 5 * a * sq / (h * t)) - sbh * 2 / t, 1.0);
  EXPECT_DOUBLE_EQ(full.rerun_layer_bytes, full.other_bytes - none.other_bytes);
  EXPECT_DOUBLE_EQ(none.rerun_layer_bytes, 0.0);
  EXPECT_NE(full.describe().find(fmt::format("(re-run layer {:.1f})", full.rerun_layer_bytes / 1e9)), std::string::npos)
      << full.describe();
  EXPECT_EQ(none.describe().find("re-run"), std::string::npos) << none.describe();
  // The peak counts the stash of every in-flight chunk plus that one layer.
  EXPECT_NEAR(full.activations_bytes, full.inflight_chunks * (s.model.layers / (8.0 * 6)) * sbh * 2 / t, 1.0);
  s.optimizations.efficient_operators = true;
  s.parallel.recompute = Recompute::kSelective;
  const MemoryBreakdown flash_selective = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  s.parallel.recompute = Recompute::kNone;
  EXPECT_DOUBLE_EQ(flash_selective.other_bytes, memory_per_gpu(s.model, s.parallel, s.optimizations, gpu).other_bytes);
}

TEST(Memory, ZeroThreeGathersOneLayerAtATimeNotTheWholeChunk) {
  // FSDP / ZeRO-3 with PP 1: the whole model is one chunk, but only the layer
  // computing and the prefetched next are unsharded (plus one layer's fp32
  // gradient), so the transient grows with the layer, not the layer count.
  Scenario s = base();
  const GpuProfile& gpu = hardware_profile(s);
  s.parallel.pp = 1;
  s.parallel.vpp = 1;
  s.parallel.zero_stage = 1;
  const MemoryBreakdown z1 = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  s.parallel.zero_stage = 3;
  const MemoryBreakdown z3 = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  const double layer = static_cast<double>(s.model.parameters_per_layer()) / s.parallel.tp;
  EXPECT_NEAR(z3.other_bytes - z1.other_bytes, layer * (2 * 2.0 + 4.0), 1.0);
  s.model.layers *= 2;
  const MemoryBreakdown deeper = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  EXPECT_DOUBLE_EQ(deeper.other_bytes, z3.other_bytes);
}

TEST(Memory, InFlightMicrobatchesOfOneFOneBAndInterleaved) {
  Scenario s = base();
  const GpuProfile& gpu = hardware_profile(s);
  s.parallel.vpp = 1;
  EXPECT_EQ(memory_per_gpu(s.model, s.parallel, s.optimizations, gpu).inflight_chunks, 8);
  s.parallel.vpp = 6;  // warm-up 2*(P-1) + (V-1)*P = 54, plus the one in flight
  EXPECT_EQ(memory_per_gpu(s.model, s.parallel, s.optimizations, gpu).inflight_chunks, 55);
  s.parallel.global_batch = 192 * 8;  // M = 8: every chunk of every micro-batch
  EXPECT_EQ(memory_per_gpu(s.model, s.parallel, s.optimizations, gpu).inflight_chunks, 48);
}

// Uneven stages: every rank is compared. Two stages of 2 and 94 layers (1F1B):
// rank 0 keeps 2 micro-batches of 2 layers in flight, rank 1 one of 94 and 94
// layers' parameters; rank 1 is reported, and says so.
TEST(Memory, UnevenStagesReportTheFullestRank) {
  Scenario s = base();
  s.parallel.pp = 2;
  s.parallel.vpp = 1;
  s.parallel.first_stage_layers = 2;
  const GpuProfile& gpu = hardware_profile(s);
  const MemoryBreakdown m = memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  EXPECT_EQ(m.pp_rank, 1);
  EXPECT_EQ(m.inflight_chunks, 1);
  EXPECT_DOUBLE_EQ(m.activations_bytes, 94 * m.activation_bytes_per_layer);
  EXPECT_NE(m.describe().find("on pipeline rank 1"), std::string::npos) << m.describe();
  // The even split of the same job: rank 0, 48 layers.
  Scenario even = s;
  even.parallel.first_stage_layers = 0;
  const MemoryBreakdown e = memory_per_gpu(even.model, even.parallel, even.optimizations, gpu);
  EXPECT_EQ(e.pp_rank, 0);
  EXPECT_GT(m.parameters_bytes, e.parameters_bytes * 1.8);
  EXPECT_EQ(e.describe().find("pipeline rank"), std::string::npos);
}

TEST(Memory, A175BModelOnOneGpuDoesNotFitAndSaysWhy) {
  Scenario s = base();
  s.parallel.tp = 1;
  s.parallel.pp = 1;
  s.parallel.vpp = 1;
  s.parallel.dp = 1;
  s.parallel.global_batch = 1;
  const MemoryBreakdown m = memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s));
  EXPECT_FALSE(m.fits());
  EXPECT_GT(m.total_bytes, 175e9 * 18);
  const std::string d = m.describe();
  EXPECT_NE(d.find("needs"), std::string::npos);
  EXPECT_NE(d.find("of 85.9 GB"), std::string::npos);  // 81920 MiB
}

TEST(Memory, ThePapersLayoutFitsOnA100_80GB) {
  const Scenario s = base();
  EXPECT_TRUE(memory_per_gpu(s.model, s.parallel, s.optimizations, hardware_profile(s)).fits());
}

}  // namespace
}  // namespace megascale::model
