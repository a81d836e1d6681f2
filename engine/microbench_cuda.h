// engine/microbench_cuda.h: the CUDA device's kernels timed with CUDA events
// (`megascale calibrate micro --device cuda`, run by megascale-micro).
//
// defines: CudaMicroPoint, CudaMicroResult, run_cuda_microbenchmarks,
// write_cuda_micro_report, write_cuda_gemm_sweep_csv.
//
// Each point is one CudaDevice call at one shape: two warm-up calls, then
// `repeats` calls, each between two CUDA events on the device's stream; the
// median is kept (no host synchronisation between the timed calls). Points:
// GEMMs in bf16 and fp32 at square shapes and at the ~1B GPT's shapes
// (scenarios/gpu/gpt-1b-h200.toml: tokens 8192 = micro-batch 4 x 2048),
// attention forward and backward (the flash path in fp32: attention_fwd /
// attention_bwd; the cuBLAS path in bf16: attention_fwd_cublas /
// attention_bwd_cublas; the tensor-core flash path: attention_fwd_flash_tc /
// attention_bwd_flash_tc, CudaDeviceOptions::attention), LayerNorm, GeLU, cross-entropy and AdamW at
// that model's sizes. A point reports FLOPs (GEMMs, attention) or bytes moved
// (the memory-bound kernels), so achieved TFLOP/s or GB/s follow.
//
// Available in every build: without the CUDA backend or a GPU,
// run_cuda_microbenchmarks throws std::invalid_argument with
// cuda_unavailable_reason() (engine/device_factory.h).
//
// Thread-safety: uses one CudaDevice of its own; call from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megascale::engine {

struct CudaMicroPoint {
  std::string op;      // "gemm_bf16", "gemm_fp32", "attention_fwd", "attention_fwd_cublas", "layer_norm_bwd", ...
  std::string shape;   // e.g. "nt 8192x6144x2048" or "T2048 B4 NH16 HD128"
  double seconds = 0;  // median of the repeats
  double flops = 0;    // per call (0 for memory-bound kernels)
  double bytes = 0;    // per call, DRAM bytes read + written (estimate; 0 for GEMMs)
  // GEMM points only: C (m x n) = op(A) (m x k) op(B) (k x n), layout "nn",
  // "nt", "tn" or "tt" (op(A) op(B); n = not transposed); 0 / "" otherwise.
  int64_t m = 0, n = 0, k = 0;
  std::string layout;
};

struct CudaMicroResult {
  std::string device;       // cudaDeviceProp::name
  int compute_capability = 0;
  std::vector<CudaMicroPoint> points;
};

// REQUIRES: a usable GPU (else std::invalid_argument naming why).
CudaMicroResult run_cuda_microbenchmarks(bool quick, int repeats = 5);

// TOML: [device] name, compute_capability, date, host; one [[point]] per
// point with op, shape, seconds, flops, bytes, achieved_tflops, achieved_gbs
// and, for the bf16 GEMMs and attention, fraction_of_peak against `peak_tflops`.
std::string write_cuda_micro_report(const CudaMicroResult& r, const std::string& host, const std::string& date,
                                    double peak_tflops);

// The GEMM points as a GEMM sweep CSV in calibrate/gemm_sweep.h's format
// (header m,n,k,dtype,layout,seconds; '#' provenance lines naming the device,
// host and date), so that `megascale calibrate import --gemm-csv` can put the
// measured GEMM efficiencies into a profile (scripts/gpu-check.sh, "predict").
// The times are the CudaDevice's own calls: in bf16 they include the casts of
// the fp32 operands to bf16, which the engine pays on every GEMM.
std::string write_cuda_gemm_sweep_csv(const CudaMicroResult& r, const std::string& host,
                                      const std::string& date);

}  // namespace megascale::engine
