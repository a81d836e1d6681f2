// tests/engine_gpu/attention_cublas_gpu_test.cc: CudaDevice's cuBLAS attention
// path (AttentionPath::kCublas, engine/cuda/device_cuda.h) against CpuDevice,
// forward (out and the saved probabilities) and backward (dqkv), on MHA and
// GQA, the full causal mask and sliding windows, odd and prime sizes.
// Without a GPU every test is skipped with the reason.
//
// Tolerances:
//  - fp32 (CUBLAS_COMPUTE_32F, no TF32): out and probs as every fp32 kernel
//    (gpu_test_util.h: rtol 1e-4, atol 1e-5); dqkv rtol 1e-3, atol 1e-5 as the
//    flash kernel's test (two-level sums over T keys and the group's heads).
//  - bf16 (GEMM inputs rounded to bf16, fp32 accumulation, fp32 softmax / dS):
//    against the fp32 CPU result, the normwise error ||got - want|| / ||want||
//    <= kBf16Normwise = 2e-2 and every element within 3e-2 * max |want|, for
//    out and for each of dQ, dK, dV separately.
//    Rationale: a bf16 input is off by <= 2^-9 relative (~1e-3 rms); the
//    chain qkv -> S -> P (rounded) -> O and dO -> dP -> dS (rounded) -> dQ / dK
//    rounds each operand once, so a few 1e-3 normwise is expected, while any
//    wrong index, stride or transpose gives errors of order 1. The probs are
//    computed in fp32 from bf16-input scores: rtol 3e-2, atol 1e-4.
//  - Masked probabilities are exactly 0 in both modes, as on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/device_cuda.h"
#include "engine/device_cpu.h"
#include "tests/engine_gpu/attention_test_util.h"
#include "tests/engine_gpu/gpu_test_util.h"

namespace megascale::engine {
namespace {

using gpu_test::close;
using attention_test::bf16_close;
using attention_test::Case;
using attention_test::describe;
using attention_test::Inputs;
using attention_test::inputs;
using attention_test::kCases;
using attention_test::masked_are_zero;
using attention_test::on_cpu;
using attention_test::on_gpu;
using attention_test::qkv_parts;
using attention_test::Result;

class CublasAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA();
    CudaDeviceOptions f32;
    f32.attention = AttentionPath::kCublas;
    gpu_ = std::make_unique<CudaDevice>(f32);
    CudaDeviceOptions b16;
    b16.precision = GemmPrecision::kBf16;  // kAuto: the cuBLAS path
    gpu16_ = std::make_unique<CudaDevice>(b16);
  }

  std::unique_ptr<CudaDevice> gpu_, gpu16_;
};

TEST_F(CublasAttention, PathChoiceFollowsTheOptions) {
  EXPECT_EQ(gpu_->attention_path(), AttentionPath::kCublas);
  EXPECT_EQ(gpu16_->attention_path(), AttentionPath::kCublas);
  EXPECT_EQ(CudaDevice().attention_path(), AttentionPath::kFlash);  // fp32, kAuto
  CudaDeviceOptions flash16;
  flash16.precision = GemmPrecision::kBf16;
  flash16.attention = AttentionPath::kFlash;
  EXPECT_EQ(CudaDevice(flash16).attention_path(), AttentionPath::kFlash);
}

TEST_F(CublasAttention, Fp32MatchesCpuForwardAndBackward) {
  uint32_t seed = 500;
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const Inputs in = inputs(c, seed);
    seed += 2;
    const Result want = on_cpu(c, in);
    const Result got = on_gpu(*gpu_, c, in);
    EXPECT_TRUE(close(want.out, got.out, 1e-4, 1e-5));
    EXPECT_TRUE(close(want.probs, got.probs, 1e-4, 1e-6));  // P itself is the saved state
    EXPECT_TRUE(masked_are_zero(got.probs, c));
    EXPECT_TRUE(close(want.dqkv, got.dqkv, 1e-3, 1e-5));
  }
}

TEST_F(CublasAttention, Bf16WithinBf16ToleranceOfCpu) {
  uint32_t seed = 700;
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const Inputs in = inputs(c, seed);
    seed += 2;
    const Result want = on_cpu(c, in);
    const Result got = on_gpu(*gpu16_, c, in);
    EXPECT_TRUE(bf16_close(want.out, got.out)) << "out";
    EXPECT_TRUE(close(want.probs, got.probs, 3e-2, 1e-4)) << "probs";
    EXPECT_TRUE(masked_are_zero(got.probs, c));
    const auto want_parts = qkv_parts(want.dqkv, c), got_parts = qkv_parts(got.dqkv, c);
    EXPECT_TRUE(bf16_close(want_parts[0], got_parts[0])) << "dQ";
    EXPECT_TRUE(bf16_close(want_parts[1], got_parts[1])) << "dK";
    EXPECT_TRUE(bf16_close(want_parts[2], got_parts[2])) << "dV";
  }
}

// The two paths of one fp32 device family agree with each other (each is
// compared with the CPU above; this catches a mix-up of the saved state: the
// flash path's log-sum-exps given to the cuBLAS backward or the reverse would
// fail here and in the CPU comparisons).
TEST_F(CublasAttention, Fp32FlashAndCublasPathsAgree) {
  CudaDevice flash;  // fp32, kAuto: flash
  ASSERT_EQ(flash.attention_path(), AttentionPath::kFlash);
  const Case c{96, 2, 4, 2, 64, 0};
  const Inputs in = inputs(c, 900);
  const Result a = on_gpu(flash, c, in);
  const Result b = on_gpu(*gpu_, c, in);
  EXPECT_TRUE(close(a.out, b.out, 1e-4, 1e-5));
  EXPECT_TRUE(close(a.dqkv, b.dqkv, 1e-3, 1e-5));
}

// Any head dimension: the cuBLAS path has no 128 limit (the flash kernel's
// register tiles do).
TEST_F(CublasAttention, HeadDimAbove128) {
  const Case c{19, 1, 2, 1, 160, 0};
  const Inputs in = inputs(c, 950);
  const Result want = on_cpu(c, in);
  const Result got = on_gpu(*gpu_, c, in);
  EXPECT_TRUE(close(want.out, got.out, 1e-4, 1e-5));
  EXPECT_TRUE(close(want.dqkv, got.dqkv, 1e-3, 1e-5));
}

}  // namespace
}  // namespace megascale::engine
