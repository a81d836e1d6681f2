// tests/model/fused_overlap_test.cc: the fused TP collective + GEMM pipeline and
// the SMs an NCCL kernel takes from the GEMM beside it.
#include "model/fused_overlap.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/hardware.h"

namespace megascale::model {
namespace {

// Without SM sharing the pipeline is the classic two-stage flow shop of identical
// pieces: max(G, C) + min(G, C) / n, whichever side the collective is on.
TEST(FusedOverlap, WithoutSharingIsTheFlowShop) {
  for (CommSide side : {CommSide::kBefore, CommSide::kAfter}) {
    for (int n : {2, 4, 8}) {
      for (double comm_s : {0.5, 3.0, 12.0}) {
        const double gemm_s = 4.0;
        const double expect = std::max(gemm_s, comm_s) + std::min(gemm_s, comm_s) / n;
        EXPECT_NEAR(fused_pair_time_s(n, gemm_s / n, gemm_s / n, comm_s, side), expect, 1e-12)
            << "n " << n << " comm " << comm_s;
      }
    }
  }
}

// Pieces of 4 s (5 s beside the collective), two 1 s communication pieces: the
// first compute piece shares 1 s with the second communication piece and so does
// 1/5 of its work in it; the rest runs at full speed. Worked by hand: 9.2 s on
// either side (9.0 s without sharing).
TEST(FusedOverlap, SharedStretchesOnlyWhileTheCollectiveRuns) {
  EXPECT_NEAR(fused_pair_time_s(2, 4.0, 5.0, 2.0, CommSide::kBefore), 9.2, 1e-12);
  EXPECT_NEAR(fused_pair_time_s(2, 4.0, 5.0, 2.0, CommSide::kAfter), 9.2, 1e-12);
  EXPECT_NEAR(fused_pair_time_s(2, 4.0, 4.0, 2.0, CommSide::kBefore), 9.0, 1e-12);
}

// When communication dominates, every piece but the last runs beside it yet the
// pair is still gated by communication: C + one piece at full speed.
TEST(FusedOverlap, CommunicationBoundPairIsUnchanged) {
  EXPECT_NEAR(fused_pair_time_s(4, 1.0, 1.5, 8.0, CommSide::kBefore), 8.0 + 1.0, 1e-12);
  EXPECT_NEAR(fused_pair_time_s(4, 1.0, 1.5, 8.0, CommSide::kAfter), 8.0 + 1.0, 1e-12);
}

TEST(FusedOverlap, SharingNeverHelps) {
  for (CommSide side : {CommSide::kBefore, CommSide::kAfter}) {
    for (double comm_s : {0.3, 1.0, 2.5, 6.0}) {
      const double alone = fused_pair_time_s(4, 1.0, 1.0, comm_s, side);
      EXPECT_GE(fused_pair_time_s(4, 1.0, 1.3, comm_s, side), alone - 1e-12);
    }
  }
}

// An NCCL kernel on HGX A100 holds 24 of the 108 SMs. A GEMM that fills exactly
// one wave of 108 CTAs (256x128 tiles) cannot fit on the 84 left: it needs more
// than the 108/84 of a smaller GPU (tile and wave quantisation), while a GEMM of
// many waves slows by about the SM ratio.
TEST(FusedOverlap, CommSmsCostAWaveToAOneWaveGemm) {
  const GpuProfile& a100 = gpu_profile("A100-SXM4-80GB");
  EXPECT_EQ(a100.nccl_nvlink_ctas, 24);
  const GpuProfile shared = without_comm_sms(a100, a100.nccl_nvlink_ctas);
  EXPECT_EQ(shared.sm_count, 84);
  EXPECT_NEAR(shared.peak_tflops, 312.0 * 84 / 108, 1e-9);
  EXPECT_EQ(shared.memory_gbs, a100.memory_gbs);
  EXPECT_EQ(without_comm_sms(a100, 500).sm_count, 1);

  const double one_wave = gemm_time_s(shared, 256 * 9, 128 * 12, 8192) /
                          gemm_time_s(a100, 256 * 9, 128 * 12, 8192);
  EXPECT_GT(one_wave, 108.0 / 84.0 + 0.05);
  const double many_waves = gemm_time_s(shared, 16384, 16384, 8192) /
                            gemm_time_s(a100, 16384, 16384, 8192);
  EXPECT_GE(many_waves, 1.0);
  EXPECT_LT(many_waves, 108.0 / 84.0 + 0.05);
}

}  // namespace
}  // namespace megascale::model
