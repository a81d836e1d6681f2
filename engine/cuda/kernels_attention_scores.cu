// engine/cuda/kernels_attention_scores.cu: the two row kernels of the
// explicit-scores attention (CudaDevice's cuBLAS path, device_cuda.cc): the
// GEMMs S = scale Q K^T, O = P V and their backward run in cuBLAS on tensor
// cores; these kernels turn the scores into probabilities and dP into dS.
//
// Layout: `rows` consecutive rows of T floats; row r belongs to query
// i = r % T (the rows of one batch element are (NH, T, T), head after head).
// One block of kSoftmaxThreads threads per row, reductions in a fixed order
// (common.cuh's block_max / block_sum): the same bits on every run.
//
// The arithmetic is CpuDevice's (engine/device_cpu.cc attention_forward /
// attention_backward): the forward takes the max over the visible keys
// lo(i) <= j <= i (lo(i) = max(0, i - W) for a window W > 0, else 0), then
// exp(s - max) / sum, and writes exactly 0 for every masked key; the backward
// forms D_i = sum_{j <= i} P_ij dP_ij and dS_ij = P_ij (dP_ij - D_i), exactly 0
// where P_ij == 0 (every masked key: the backward needs no window argument).
#include <cuda_bf16.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/cuda/common.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace megascale::engine::cuda {
namespace {

constexpr int kSoftmaxThreads = 256;

// In place: x (rows, T) scaled scores -> probabilities; p16 (may be null) gets
// the same values rounded to bf16 (the input of the P V GEMM in bf16 mode).
__global__ void attention_masked_softmax_kernel(float* x, __nv_bfloat16* p16, int T, int window) {
  __shared__ float red[kWarp];
  const size_t row = blockIdx.x;
  const int i = static_cast<int>(row % static_cast<size_t>(T));
  const int lo = window > 0 ? max(0, i - window) : 0;
  float* r = x + row * static_cast<size_t>(T);
  float m = -INFINITY;
  for (int j = lo + static_cast<int>(threadIdx.x); j <= i; j += blockDim.x) m = fmaxf(m, r[j]);
  m = block_max(m, red);
  float sum = 0.0f;
  for (int j = lo + static_cast<int>(threadIdx.x); j <= i; j += blockDim.x) sum += expf(r[j] - m);
  sum = block_sum(sum, red);
  const float inv = 1.0f / sum;
  __nv_bfloat16* r16 = p16 != nullptr ? p16 + row * static_cast<size_t>(T) : nullptr;
  for (int j = static_cast<int>(threadIdx.x); j < T; j += blockDim.x) {
    const float p = (j >= lo && j <= i) ? expf(r[j] - m) * inv : 0.0f;
    r[j] = p;
    if (r16 != nullptr) r16[j] = __float2bfloat16_rn(p);
  }
}

// d (rows, T): dP in, dS out (in place) when ds16 is null; otherwise dS goes,
// rounded to bf16, to ds16 only and d is left as dP.
__global__ void attention_scores_backward_kernel(float* d, const float* p, __nv_bfloat16* ds16, int T) {
  __shared__ float red[kWarp];
  const size_t row = blockIdx.x;
  const int i = static_cast<int>(row % static_cast<size_t>(T));
  const size_t off = row * static_cast<size_t>(T);
  float dot = 0.0f;
  for (int j = static_cast<int>(threadIdx.x); j <= i; j += blockDim.x) dot += p[off + j] * d[off + j];
  dot = block_sum(dot, red);
  for (int j = static_cast<int>(threadIdx.x); j < T; j += blockDim.x) {
    const float pj = p[off + j];
    const float ds = (j <= i && pj != 0.0f) ? pj * (d[off + j] - dot) : 0.0f;
    if (ds16 != nullptr) {
      ds16[off + j] = __float2bfloat16_rn(ds);
    } else {
      d[off + j] = ds;
    }
  }
}

void check_rows(size_t rows, int T) {
  if (T < 1 || rows > 0x7fffffffu) {
    throw std::runtime_error("attention scores kernels: unsupported rows " + std::to_string(rows) + ", T " +
                             std::to_string(T));
  }
}

}  // namespace

void launch_attention_masked_softmax(float* scores, void* p16, size_t rows, int T, int window, cudaStream_t s) {
  if (rows == 0) return;
  check_rows(rows, T);
  attention_masked_softmax_kernel<<<static_cast<unsigned>(rows), kSoftmaxThreads, 0, s>>>(
      scores, static_cast<__nv_bfloat16*>(p16), T, window);
  CUDA_CHECK_LAUNCH();
}

void launch_attention_scores_backward(float* dp, const float* probs, void* ds16, size_t rows, int T,
                                      cudaStream_t s) {
  if (rows == 0) return;
  check_rows(rows, T);
  attention_scores_backward_kernel<<<static_cast<unsigned>(rows), kSoftmaxThreads, 0, s>>>(
      dp, probs, static_cast<__nv_bfloat16*>(ds16), T);
  CUDA_CHECK_LAUNCH();
}

}  // namespace megascale::engine::cuda
