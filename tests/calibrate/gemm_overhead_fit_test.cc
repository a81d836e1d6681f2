// tests/calibrate/gemm_overhead_fit_test.cc: the per-call GEMM overhead fit
// (calibrate/gemm_overhead_fit.h) and the H100 and B200 profile values it produced.
#include "calibrate/gemm_overhead_fit.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/hardware.h"

namespace megascale::calibrate {
namespace {

std::string fixture(const char* name) {
  return std::string(MEGASCALE_SOURCE_DIR) + "/tests/calibrate/fixtures/" + name;
}

// Times made by the roofline plus a known overhead give that overhead back,
// with no error left.
TEST(GemmOverheadFit, RecoversAKnownOverhead) {
  model::GpuProfile gpu = model::gpu_profile("H100-SXM5-80GB");
  gpu.kernel_launch_us = 0;
  gpu.gemm_overhead_us = 3.0;
  std::vector<GemmSweepRow> rows;
  for (int64_t m : {256, 1024, 4096}) {
    for (int64_t k : {512, 2048}) {
      GemmSweepRow r;
      r.m = m;
      r.n = 2048;
      r.k = k;
      r.dtype = "bf16";
      r.seconds = model::gemm_time_s(gpu, r.m, r.n, r.k);
      rows.push_back(r);
    }
  }
  const GemmOverheadFit f = fit_gemm_overhead(rows, gpu);
  EXPECT_NEAR(f.overhead_us, 3.0, 1e-9);
  EXPECT_NEAR(f.fitted_max_error, 0.0, 1e-9);
  EXPECT_NEAR(f.loo_max_error, 0.0, 1e-9);
  EXPECT_EQ(f.points, 6);
  EXPECT_THROW(fit_gemm_overhead({}, gpu), std::invalid_argument);
}

// A shipped profile's gemm_overhead_us is this fit on OpenXLA's measured GEMM
// table of its GPU, and the fit explains that table far better than the bare
// roofline does (printed: the figures the profile's provenance quotes).
void expect_profile_carries_the_fit(const char* profile, const char* table) {
  const std::vector<GemmSweepRow> rows = read_gemm_sweep_file(fixture(table));
  ASSERT_EQ(rows.size(), 125u);
  const model::GpuProfile& gpu = model::gpu_profile(profile);
  const GemmOverheadFit f = fit_gemm_overhead(rows, gpu);
  std::printf("%s gemm_overhead_us fit on %d shapes of %s: %.2f us; |time error| median / max: roofline %.1f%% / "
              "%.1f%%, fitted %.1f%% / %.1f%%, leave-one-out %.1f%% / %.1f%%\n",
              profile, f.points, table, f.overhead_us, 100 * f.roofline_median_error, 100 * f.roofline_max_error,
              100 * f.fitted_median_error, 100 * f.fitted_max_error, 100 * f.loo_median_error, 100 * f.loo_max_error);
  EXPECT_NEAR(gpu.gemm_overhead_us, f.overhead_us, 0.01) << profile;
  EXPECT_LT(f.fitted_median_error, 0.5 * f.roofline_median_error) << profile;
  EXPECT_LT(f.loo_median_error, 0.08) << profile;
}

TEST(GemmOverheadFit, H100ProfileCarriesTheFitOnOpenXlasTable) {
  expect_profile_carries_the_fit("H100-SXM5-80GB", "xla_sm90_gemm_bf16.csv");
}

TEST(GemmOverheadFit, B200ProfileCarriesTheFitOnOpenXlasTable) {
  expect_profile_carries_the_fit("B200-SXM-180GB", "xla_sm100_gemm_bf16.csv");
}

}  // namespace
}  // namespace megascale::calibrate
