// The CUDA microbenchmark's GEMM points as a GEMM sweep CSV: what
// `megascale calibrate import --gemm-csv` reads back (scripts/gpu-check.sh,
// "predict"). Runs without a GPU: the result is built by hand.
#include <gtest/gtest.h>

#include "calibrate/gemm_sweep.h"
#include "engine/microbench_cuda.h"

namespace megascale::engine {
namespace {

CudaMicroPoint gemm(const char* op, const char* layout, int64_t m, int64_t n, int64_t k, double s) {
  CudaMicroPoint p;
  p.op = op;
  p.shape = "as timed";
  p.seconds = s;
  p.flops = 2.0 * m * n * k;
  p.m = m;
  p.n = n;
  p.k = k;
  p.layout = layout;
  return p;
}

TEST(CudaGemmSweepCsv, GemmPointsReadBackThroughCalibrateImportsReader) {
  CudaMicroResult r;
  r.device = "NVIDIA H200";
  r.compute_capability = 90;
  r.points.push_back(gemm("gemm_bf16", "nt", 8192, 6144, 2048, 2.75e-4));
  r.points.push_back(gemm("gemm_fp32", "tn", 2048, 8192, 8192, 5.5e-3));
  CudaMicroPoint attention;  // not a GEMM: left out
  attention.op = "attention_fwd";
  attention.seconds = 1e-3;
  attention.flops = 1e12;
  r.points.push_back(attention);
  CudaMicroPoint untimed = gemm("gemm_bf16", "nn", 64, 64, 64, 0);  // no time: left out
  r.points.push_back(untimed);

  const std::string csv = write_cuda_gemm_sweep_csv(r, "gpu-host", "2026-12-02");
  EXPECT_NE(csv.find("NVIDIA H200"), std::string::npos);
  const std::vector<calibrate::GemmSweepRow> rows = calibrate::parse_gemm_sweep(csv, "micro.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].m, 8192);
  EXPECT_EQ(rows[0].n, 6144);
  EXPECT_EQ(rows[0].k, 2048);
  EXPECT_EQ(rows[0].dtype, "bf16");
  EXPECT_EQ(rows[0].layout, "nt");
  EXPECT_DOUBLE_EQ(rows[0].seconds, 2.75e-4);
  EXPECT_EQ(rows[1].dtype, "fp32");
  EXPECT_EQ(rows[1].layout, "tn");
  EXPECT_DOUBLE_EQ(rows[1].seconds, 5.5e-3);
}

}  // namespace
}  // namespace megascale::engine
