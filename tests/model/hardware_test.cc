// tests/model/hardware_test.cc: GPU profiles and kernel-time models.
#include "model/hardware.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace megascale::model {
namespace {

TEST(Hardware, ProfilesCarrySpecSheetFigures) {
  const GpuProfile& a40 = gpu_profile("A100-SXM4-40GB");
  EXPECT_EQ(a40.peak_tflops, 312.0);
  EXPECT_EQ(a40.memory_bytes, 40960.0 * 1048576);  // nvidia-smi's total, MiB
  EXPECT_EQ(a40.memory_gbs, 1555.0);
  const GpuProfile& a80 = gpu_profile("A100-SXM4-80GB");
  EXPECT_EQ(a80.memory_gbs, 2039.0);
  EXPECT_EQ(a80.nvlink_gbs, 600.0);
  EXPECT_EQ(a80.sm_count, 108);
  const GpuProfile& h100 = gpu_profile("H100-SXM5-80GB");
  EXPECT_EQ(h100.peak_tflops, 989.0);
  EXPECT_EQ(h100.memory_gbs, 3350.0);
  EXPECT_EQ(h100.nvlink_gbs, 900.0);
  const GpuProfile& h200 = gpu_profile("H200-SXM-141GB");
  EXPECT_EQ(h200.memory_bytes, 143771.0 * 1048576);
  EXPECT_EQ(h200.memory_gbs, 4800.0);
  const GpuProfile& b200 = gpu_profile("B200-SXM-180GB");
  EXPECT_EQ(b200.peak_tflops, 2250.0);
  EXPECT_EQ(b200.memory_gbs, 8000.0);
  EXPECT_EQ(b200.nvlink_gbs, 1800.0);
  const GpuProfile& gb200 = gpu_profile("GB200-NVL72-186GB");
  EXPECT_EQ(gb200.peak_tflops, 2500.0);
  EXPECT_EQ(gb200.memory_gbs, 8000.0);
  EXPECT_EQ(gb200.memory_bytes, 186.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(gpu_profile_names().size(), 7u);  // and "cpu"
  // PCIe x16 per direction: Gen4 on A100 (64 GB/s bidirectional), Gen5 on Hopper.
  EXPECT_NEAR(a80.pcie_gbps / 8 * 2, 64.0, 1.5);
  EXPECT_NEAR(h200.pcie_gbps / 8 * 2, 128.0, 3.0);
  EXPECT_NEAR(b200.pcie_gbps / 8 * 2, 128.0, 3.0);
}

TEST(Hardware, UnknownProfileNamesTheKnownOnes) {
  try {
    gpu_profile("V100");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("V100"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("H200-SXM-141GB"), std::string::npos);
  }
}

TEST(Hardware, LargeGemmReachesTheMeasuredEfficiencyAndNoMore) {
  const GpuProfile& gpu = gpu_profile("A100-SXM4-80GB");
  double eff = 0;
  gemm_time_s(gpu, 8192, 8192, 8192, &eff);
  EXPECT_LE(eff, gpu.max_gemm_efficiency + 1e-12);
  EXPECT_GT(eff, 0.75);
}

TEST(Hardware, WaveQuantisationCostsAPartialWave) {
  const GpuProfile& gpu = gpu_profile("A100-SXM4-80GB");
  // 108 tiles of 256x128 fill the 108 SMs exactly; one more column of tiles
  // (108 -> 109 tiles wide) leaves most SMs idle in a second wave.
  double full = 0, spill = 0;
  gemm_time_s(gpu, 256, 128 * 108, 1024, &full);
  gemm_time_s(gpu, 256, 128 * 108 + 128, 1024, &spill);
  EXPECT_GT(full, spill + 0.05);
}

TEST(Hardware, ShortKIsLessEfficient) {
  const GpuProfile& gpu = gpu_profile("A100-SXM4-80GB");
  double short_k = 0, long_k = 0;
  gemm_time_s(gpu, 8192, 8192, 64, &short_k);
  gemm_time_s(gpu, 8192, 8192, 8192, &long_k);
  EXPECT_LT(short_k, 0.6 * long_k);
}

TEST(Hardware, GemvIsBandwidthBound) {
  const GpuProfile& gpu = gpu_profile("A100-SXM4-80GB");
  const double t = gemm_time_s(gpu, 1, 16384, 16384);
  const double weights_s = 2.0 * 16384 * 16384 / (gpu.memory_gbs * 1e9 * gpu.memory_efficiency);
  EXPECT_NEAR(t, weights_s, 0.01 * weights_s);
}

// FP8 operands speed up the compute term only: a large GEMM gains the whole
// FP8 rate, a weight-streaming GEMV gains what halving its operand bytes gives,
// and a tiny GEMM keeps its launch floor.
TEST(Hardware, Fp8GemmSpeedsUpComputeNotLaunchOrBandwidth) {
  GpuProfile gpu = gpu_profile("H100-SXM5-80GB");
  const double overhead_s = gpu.gemm_overhead_us * 1e-6;
  ASSERT_GT(overhead_s, 0.0);
  // The per-call overhead is added once, in either precision, not sped up.
  EXPECT_NEAR(fp8_gemm_time_s(gpu, 8192, 8192, 8192, 1.76) - overhead_s,
              (gemm_time_s(gpu, 8192, 8192, 8192) - overhead_s) / 1.76, 1e-12);
  gpu.gemm_overhead_us = 0;
  const double x = gpu.fp8_gemm_speedup();
  ASSERT_GT(x, 1.5);
  EXPECT_DOUBLE_EQ(fp8_gemm_time_s(gpu, 8192, 8192, 8192, 1.0), gemm_time_s(gpu, 8192, 8192, 8192));
  EXPECT_NEAR(fp8_gemm_time_s(gpu, 8192, 8192, 8192, x) * x, gemm_time_s(gpu, 8192, 8192, 8192), 1e-12);
  const double gemv_bf16 = gemm_time_s(gpu, 1, 16384, 16384);
  EXPECT_NEAR(fp8_gemm_time_s(gpu, 1, 16384, 16384, x), gemv_bf16 / 2, 0.01 * gemv_bf16);
  EXPECT_DOUBLE_EQ(fp8_gemm_time_s(gpu, 8, 8, 8, x), gpu.kernel_launch_us * 1e-6);
  EXPECT_EQ(fp8_gemm_time_s(gpu, 0, 8, 8, x), 0.0);
}

// A profile's gemm_overhead_us (fitted on a measured GEMM table) adds to every
// call's roofline time; it matters to small GEMMs, not to large ones.
TEST(Hardware, GemmOverheadAddsToEveryCall) {
  GpuProfile with = gpu_profile("H100-SXM5-80GB");
  GpuProfile without = with;
  without.gemm_overhead_us = 0;
  ASSERT_GT(with.gemm_overhead_us, 0.0);
  for (int64_t m : {512, 2048, 8192}) {
    EXPECT_NEAR(gemm_time_s(with, m, 2048, 2048) - gemm_time_s(without, m, 2048, 2048), with.gemm_overhead_us * 1e-6,
                1e-12) << m;
  }
  EXPECT_GT(gemm_time_s(with, 512, 512, 512) / gemm_time_s(without, 512, 512, 512), 1.5);
  EXPECT_LT(gemm_time_s(with, 8192, 8192, 8192) / gemm_time_s(without, 8192, 8192, 8192), 1.01);
  EXPECT_EQ(gpu_profile("A100-SXM4-80GB").gemm_overhead_us, 0.0);  // no measured table to fit
}

TEST(Hardware, MemoryTimeIsBytesOverAchievableBandwidthWithALaunchFloor) {
  const GpuProfile& gpu = gpu_profile("A100-SXM4-80GB");
  EXPECT_NEAR(memory_time_s(gpu, 1e9), 1e9 / (2039e9 * gpu.memory_efficiency), 1e-12);
  EXPECT_DOUBLE_EQ(memory_time_s(gpu, 10.0), gpu.kernel_launch_us * 1e-6);
  EXPECT_EQ(memory_time_s(gpu, 0.0), 0.0);
}

TEST(Hardware, NicBusBandwidthMatchesNcclTests) {
  // REFERENCE.md: ~24 GB/s per 200G HDR NIC, 46-49 GB/s per 400G NDR NIC.
  EXPECT_NEAR(nic_busbw_gbs(200), 24.0, 0.5);
  EXPECT_GE(nic_busbw_gbs(400), 46.0);
  EXPECT_LE(nic_busbw_gbs(400), 49.0);
}

TEST(Hardware, FlashAttentionUsesThePublishedFraction) {
  const GpuProfile& gpu = gpu_profile("A100-SXM4-80GB");
  const double flops = 1e13;
  EXPECT_NEAR(flash_attention_time_s(gpu, flops, false), flops / (312e12 * gpu.flash_fwd_efficiency), 1e-12);
  EXPECT_GT(flash_attention_time_s(gpu, flops, true), flash_attention_time_s(gpu, flops, false));
}

// FlashAttention's Triton port (llm-foundry's attn_impl "triton") against
// FlashAttention-2: 1.4x the forward and 2x the backward time (FlashAttention-2
// paper section 4.1); A100 has no fused kernel, so kFused keeps FlashAttention-2.
TEST(Hardware, FlashAttentionKernelsKeepTheirPublishedRatios) {
  for (const char* name : {"A100-SXM4-80GB", "H100-SXM5-80GB"}) {
    const GpuProfile& gpu = gpu_profile(name);
    const double flops = 1e13;
    for (const bool bwd : {false, true}) {
      const double fa2 = flash_attention_time_s(gpu, flops, bwd, FlashKernel::kFlash2);
      EXPECT_NEAR(flash_attention_time_s(gpu, flops, bwd, FlashKernel::kTriton) / fa2, bwd ? 2.0 : 1.4, 1e-12) << name;
    }
  }
  const GpuProfile& a100 = gpu_profile("A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(flash_attention_time_s(a100, 1e13, false, FlashKernel::kFused),
                   flash_attention_time_s(a100, 1e13, false, FlashKernel::kFlash2));
  const GpuProfile& h100 = gpu_profile("H100-SXM5-80GB");
  EXPECT_LT(flash_attention_time_s(h100, 1e13, false, FlashKernel::kFused),
            flash_attention_time_s(h100, 1e13, false, FlashKernel::kFlash2));
  // A tiny call is the launch floor whatever the kernel.
  EXPECT_DOUBLE_EQ(flash_attention_time_s(a100, 1.0, true, FlashKernel::kTriton), a100.kernel_launch_us * 1e-6);
}

}  // namespace
}  // namespace megascale::model
