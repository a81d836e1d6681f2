// tests/engine_gpu/attention_flash_tc_gpu_test.cc: CudaDevice's tensor-core
// flash attention (AttentionPath::kFlashTc, engine/cuda/kernels_attention_tc.cu)
// against CpuDevice, forward (out) and backward (dQ, dK, dV each on its own),
// on MHA and GQA, the full causal mask and sliding windows, odd and prime
// sizes, head dimensions padded to every tile (16, 32, 64, 128), sequences of
// one tile and of many, with and without room for the saved copy of O (the
// backward recomputes it when T <= HD + 4). Without a GPU every test is
// skipped with the reason.
//
// Tolerance: the bf16 one of attention_test_util.h (the operands are rounded
// to bf16 as on the cuBLAS path; softmax and accumulation are fp32).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/cuda/device_cuda.h"
#include "engine/device_cpu.h"
#include "tests/engine_gpu/attention_test_util.h"
#include "tests/engine_gpu/gpu_test_util.h"

namespace megascale::engine {
namespace {

using attention_test::bf16_close;
using attention_test::Case;
using attention_test::describe;
using attention_test::Inputs;
using attention_test::inputs;
using attention_test::kCases;
using attention_test::on_cpu;
using attention_test::on_gpu;
using attention_test::qkv_parts;
using attention_test::Result;

// Beyond attention_test_util's cases: several key and query tiles (64 keys,
// 32 queries per shared tile), a window that spans tiles, HD 96 padded to 128.
const std::vector<Case> kLongCases = {
    {300, 1, 4, 2, 128, 0}, {200, 2, 4, 4, 64, 70}, {513, 1, 2, 1, 96, 0}, {130, 1, 8, 2, 32, 129},
    {257, 2, 3, 1, 16, 64}};

class FlashTcAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA();
    CudaDeviceOptions o;
    o.precision = GemmPrecision::kBf16;
    o.attention = AttentionPath::kFlashTc;
    gpu_ = std::make_unique<CudaDevice>(o);
  }
  void expect_matches_cpu(const Case& c, uint32_t seed) {
    SCOPED_TRACE(describe(c));
    const Inputs in = inputs(c, seed);
    const Result want = on_cpu(c, in);
    const Result got = on_gpu(*gpu_, c, in);
    EXPECT_TRUE(bf16_close(want.out, got.out)) << "out";
    const auto want_parts = qkv_parts(want.dqkv, c), got_parts = qkv_parts(got.dqkv, c);
    EXPECT_TRUE(bf16_close(want_parts[0], got_parts[0])) << "dQ";
    EXPECT_TRUE(bf16_close(want_parts[1], got_parts[1])) << "dK";
    EXPECT_TRUE(bf16_close(want_parts[2], got_parts[2])) << "dV";
  }

  std::unique_ptr<CudaDevice> gpu_;
};

TEST_F(FlashTcAttention, PathChoiceFollowsTheOptions) {
  EXPECT_EQ(gpu_->attention_path(), AttentionPath::kFlashTc);
  CudaDeviceOptions b16;
  b16.precision = GemmPrecision::kBf16;  // kAuto stays the cuBLAS path until flash-tc is measured
  EXPECT_EQ(CudaDevice(b16).attention_path(), AttentionPath::kCublas);
}

TEST_F(FlashTcAttention, Bf16WithinBf16ToleranceOfCpu) {
  uint32_t seed = 1100;
  for (const Case& c : kCases) {
    expect_matches_cpu(c, seed);
    seed += 2;
  }
}

TEST_F(FlashTcAttention, ManyTilesAndWindowsAcrossTiles) {
  uint32_t seed = 1300;
  for (const Case& c : kLongCases) {
    expect_matches_cpu(c, seed);
    seed += 2;
  }
}

// The two bf16 tensor-core paths agree with each other more closely than
// either agrees with fp32 (both round the same inputs to bf16).
TEST_F(FlashTcAttention, AgreesWithTheCublasPath) {
  CudaDeviceOptions b16;
  b16.precision = GemmPrecision::kBf16;
  b16.attention = AttentionPath::kCublas;
  CudaDevice cublas(b16);
  const Case c{192, 2, 4, 2, 64, 0};
  const Inputs in = inputs(c, 1500);
  const Result a = on_gpu(*gpu_, c, in);
  const Result b = on_gpu(cublas, c, in);
  EXPECT_TRUE(bf16_close(b.out, a.out)) << "out";
  EXPECT_TRUE(bf16_close(b.dqkv, a.dqkv)) << "dqkv";
}

}  // namespace
}  // namespace megascale::engine
