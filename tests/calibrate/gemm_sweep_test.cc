// tests/calibrate/gemm_sweep_test.cc: the GEMM sweep CSV reader on the H100
// fixture (tests/calibrate/fixtures/gemm_sweep.csv, from OpenXLA's measured
// matmul table) and on small tables written here for the error paths.
#include "calibrate/gemm_sweep.h"

#include <gtest/gtest.h>

#include "base/text_file.h"

#include <string>

namespace megascale::calibrate {
namespace {

std::string fixture_path() {
  return std::string(MEGASCALE_SOURCE_DIR) + "/tests/calibrate/fixtures/gemm_sweep.csv";
}

template <class F>
std::string import_error(F&& f) {
  try {
    f();
  } catch (const ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ImportError thrown";
  return "";
}

TEST(GemmSweep, FixtureH100XlaTable) {
  std::vector<GemmSweepRow> rows = read_gemm_sweep_file(fixture_path());
  ASSERT_EQ(rows.size(), 56u);  // 28 shapes x {bf16, f32}
  const GemmSweepRow& r = rows.front();
  EXPECT_EQ(r.m, 1024);
  EXPECT_EQ(r.n, 2048);
  EXPECT_EQ(r.k, 256);
  EXPECT_EQ(r.dtype, "bf16");
  EXPECT_EQ(r.layout, "");
  EXPECT_EQ(r.line, 13);  // after 11 comment lines and the header
  EXPECT_NEAR(r.seconds, gemm_flops(1024, 2048, 256) / 139.519467775467e12, 1e-18);
  EXPECT_EQ(rows[1].dtype, "fp32");  // "f32" normalised
  // 4096^3 bf16 at 783 TFLOP/s: 175 us.
  bool found = false;
  for (const auto& x : rows)
    if (x.m == 4096 && x.n == 4096 && x.k == 4096 && x.dtype == "bf16") {
      found = true;
      EXPECT_NEAR(x.seconds * 1e6, 175.45, 0.01);
    }
  EXPECT_TRUE(found);
  // 512x256x256 and 256x512x256 are different shapes, not duplicates.
  for (const auto& x : rows) EXPECT_EQ(x.samples, 1);
}

TEST(GemmSweep, TimeColumnsAndLayout) {
  auto rows = parse_gemm_sweep("M,N,K,dtype,layout,time_us\n8192,8192,8192,BF16,NT,1600\n", "a.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].layout, "nt");
  EXPECT_DOUBLE_EQ(rows[0].seconds, 1600e-6);
  rows = parse_gemm_sweep("m,n,k,dtype,ms\n4096,4096,4096,half,0.25\n", "b.csv");
  EXPECT_EQ(rows[0].dtype, "fp16");
  EXPECT_DOUBLE_EQ(rows[0].seconds, 0.25e-3);
  rows = parse_gemm_sweep("m,n,k,dtype,seconds,tflops\n1000,1000,1000,fp32,0.001,2.0\n", "c.csv");
  EXPECT_DOUBLE_EQ(rows[0].seconds, 0.001);
  // Quoted fields, CRLF, blank and comment lines.
  rows = parse_gemm_sweep("# sweep\r\n\"m\",\"n\",\"k\",\"dtype\",\"time_s\",\"gpu\"\r\n\r\n"
                          "16,32,64,\"bfloat16\",2e-6,\"H100, SXM\"\r\n",
                          "d.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].k, 64);
  EXPECT_EQ(rows[0].line, 4);
}

TEST(GemmSweep, DuplicatesAreAveraged) {
  auto rows = parse_gemm_sweep(
      "m,n,k,dtype,seconds\n"
      "1024,1024,1024,bf16,0.001\n"
      "2048,1024,1024,bf16,0.003\n"
      "1024,1024,1024,bfloat16,0.002\n"
      "1024,1024,1024,bf16,0.006\n",
      "dup.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].samples, 3);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_DOUBLE_EQ(rows[0].seconds, 0.003);
}

TEST(GemmSweep, Errors) {
  EXPECT_EQ(import_error([] { parse_gemm_sweep("", "e.csv"); }), "e.csv:1: empty GEMM sweep (no header row)");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("# only a comment\n", "e.csv"); }),
            "e.csv:1: empty GEMM sweep (no header row)");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds\n", "h.csv"); }),
            "h.csv:1: no data rows under the header");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,dtype,seconds\n1,2,bf16,1\n", "x.csv"); }),
            "x.csv:1: column 'k': missing from the header row");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype\n1,2,3,bf16\n", "x.csv"); }),
            "x.csv:1: column 'seconds': missing: give seconds, time_s, ms, time_us or tflops");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds,ms\n1,2,3,bf16,1,1\n", "x.csv"); }),
            "x.csv:1: column 'ms': a second time column (already 'seconds'); keep one");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds\n1,2,3,bf16,1\n1,0,3,bf16,1\n", "x.csv"); }),
            "x.csv:3: column 'n': must be a positive integer, got '0'");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds\n1,2,-3,bf16,1\n", "x.csv"); }),
            "x.csv:2: column 'k': must be a positive integer, got '-3'");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds\n1,2,3.5,bf16,1\n", "x.csv"); }),
            "x.csv:2: column 'k': must be a positive integer, got '3.5'");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds\n1,2,3,bf16,fast\n", "x.csv"); }),
            "x.csv:2: column 'seconds': 'fast' is not a number");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,tflops\n1,2,3,bf16,0\n", "x.csv"); }),
            "x.csv:2: column 'tflops': must be positive, got '0'");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds\n1,x2,3,bf16,1\n", "x.csv"); }),
            "x.csv:2: column 'n': 'x2' is not a number");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds\n1,2,3,bf16\n", "x.csv"); }),
            "x.csv:2: expected 5 fields (as the header on line 1), got 4");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,seconds\n1,2,3,fp4x,1\n", "x.csv"); }),
            "x.csv:2: column 'dtype': unknown type 'fp4x'");
  EXPECT_EQ(import_error([] { parse_gemm_sweep("m,n,k,dtype,layout,seconds\n1,2,3,bf16,nx,1\n", "x.csv"); }),
            "x.csv:2: column 'layout': 'nx' is not one of nn, nt, tn, tt");
  std::string msg = import_error(
      [] { parse_gemm_sweep("m,n,k,dtype,seconds,tflops\n1000,1000,1000,fp32,0.001,3.0\n", "x.csv"); });
  EXPECT_EQ(msg.rfind("x.csv:2: column 'tflops': '3.0' disagrees with seconds '0.001'", 0), 0u) << msg;
  try {
    read_gemm_sweep_file("/nonexistent/sweep.csv");
    ADD_FAILURE() << "a missing file was read";
  } catch (const base::InputFileError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/sweep.csv: cannot read (No such file or directory)");
  }
}

}  // namespace
}  // namespace megascale::calibrate
