// tests/calibrate/attention_sweep_test.cc: the Triton attention kernel's
// ratios (model/hardware.h kTritonFlash*Slowdown, from the FlashAttention-2
// paper) against published runs they were not taken from: llm-foundry's MPT 1B
// at 32,768 tokens on 8 GPUs, where attention is most of the work.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/estimator.h"
#include "model/scenario.h"

namespace megascale::calibrate {
namespace {

// mosaicml/llm-foundry scripts/train/benchmarking/README.md @ 5e85bd62d4ec,
// rows "1b | 32768 | 8 | a100_80gb | ... | 6275 T/s/GPU" and
// "1b | 32768 | 8 | h100_80gb | ... | 12025 T/s/GPU" (micro-batch 1, FSDP
// FULL_SHARD, no activation checkpointing, attn_impl triton).
struct SweepPoint {
  const char* gpu;
  double tokens_per_s_per_gpu;
};
constexpr SweepPoint kLongSequence[] = {{"A100-SXM4-80GB", 6275}, {"H100-SXM5-80GB", 12025}};

double predicted_tokens_per_s_per_gpu(const std::string& gpu, const std::string& kernel) {
  const model::Scenario s = model::load_scenario(
      std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/mosaic-mpt-1b-512.toml",
      {"hardware.gpu=\"" + gpu + "\"", "cluster.gpus=8", "parallel.dp=8", "parallel.zero_stage=3",
       "model.seq_len=32768", "parallel.micro_batch=1", "parallel.global_batch=32",
       // Composer's DataLoader prefetches in worker processes.
       "optimizations.data_pipeline=true", "optimizations.attention_kernel=\"" + kernel + "\""});
  return model::estimate(s).tokens_per_s / 8;
}

// With the Triton port's ratios the attention-bound point is within 10% on
// both GPUs (today -0.9% and +4.6%, analytical); FlashAttention-2's rates
// would be 56% and 71% too fast.
TEST(AttentionSweep, TritonRatiosMatchMptAtLongSequences) {
  for (const SweepPoint& p : kLongSequence) {
    const double triton = predicted_tokens_per_s_per_gpu(p.gpu, "flash-triton") / p.tokens_per_s_per_gpu - 1;
    const double flash2 = predicted_tokens_per_s_per_gpu(p.gpu, "flash2") / p.tokens_per_s_per_gpu - 1;
    EXPECT_LT(std::abs(triton), 0.10) << p.gpu;
    EXPECT_GT(flash2, 0.40) << p.gpu;
  }
}

}  // namespace
}  // namespace megascale::calibrate
