// calibrate/gemm_sweep.h: reader for users' GEMM sweep tables (`megascale
// calibrate import`): one measured GEMM per CSV row, the shape and its time,
// as cuBLAS / cuBLASLt benchmark scripts commonly write them.
//
// Format (RFC 4180 CSV: commas, optional double quotes, "" inside quotes):
//  - a header row is required; column names are case-insensitive and trimmed;
//  - required: m, n, k (positive integers), dtype;
//  - the time, exactly one of: seconds (or time_s), ms, time_us, or tflops
//    (TFLOP/s with FLOPs = 2*m*n*k, so seconds = 2mnk / (tflops * 1e12)); a
//    time column and tflops together are allowed and must agree within 2%;
//  - optional: layout (nn, nt, tn, tt: op(A) op(B), n = not transposed);
//    other columns (batch, gpu, notes...) are ignored;
//  - blank lines and lines starting with '#' (provenance notes) are skipped.
// dtype spellings are normalised: fp32 (f32, float, float32), tf32, fp16 (f16,
// half, float16), bf16 (bfloat16), fp8_e4m3 (e4m3, f8e4m3), fp8_e5m2 (e5m2,
// f8e5m2), fp64 (f64, double), int8; anything else is an error.
//
// Duplicates: rows with the same (m, n, k, dtype, layout) are allowed, even
// with contradicting times (re-runs, clock drift); they are merged into one row
// whose seconds is the mean of their times, `samples` counts them and `line`
// is the first one's.
//
// Errors: ImportError "FILE:LINE: column 'x': reason" (a missing column names
// line 1, the header), or "FILE:LINE: reason" for a row with the wrong number
// of fields and for an empty file.
//
// defines: GemmSweepRow, parse_gemm_sweep, read_gemm_sweep_file, gemm_flops
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/nccl_tests.h"  // ImportError

namespace megascale::calibrate {

struct GemmSweepRow {
  int64_t m = 0, n = 0, k = 0;
  std::string dtype;    // normalised (see the header)
  std::string layout;   // "nn", "nt", "tn", "tt"; "" when the file has no layout column
  double seconds = 0;   // mean over duplicates
  int samples = 1;      // rows merged into this one
  int line = 0;         // first source line
};

// 2 * m * n * k.
double gemm_flops(int64_t m, int64_t n, int64_t k);

// Rows in first-appearance order. Throws ImportError (see the header).
std::vector<GemmSweepRow> parse_gemm_sweep(std::string_view csv, const std::string& source);

std::vector<GemmSweepRow> read_gemm_sweep_file(const std::string& path);

}  // namespace megascale::calibrate
