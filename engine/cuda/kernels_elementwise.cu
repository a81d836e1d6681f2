// engine/cuda/kernels_elementwise.cu: one thread per element (grid-stride) —
// add, scale, bias, bias-residual-add, GeLU, SwiGLU, embeddings, bf16 casts.
// The arithmetic is CpuDevice's (engine/device_cpu.cc), expression for
// expression, so fp32 results differ from the CPU only by the device's
// exp/tanh rounding and nvcc's fused multiply-adds.
#include <cuda_bf16.h>

#include "engine/cuda/common.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace megascale::engine::cuda {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi), GPT-2's tanh GeLU
constexpr float kGeluCube = 0.044715f;             // GPT-2's tanh GeLU (Hendrycks & Gimpel 2016)

#define GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void add_kernel(float* out, const float* a, const float* b, size_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* x, float coef, size_t n) {
  GRID_STRIDE(i, n) x[i] *= coef;
}

__global__ void bias_add_kernel(float* out, const float* bias, size_t n, int OC) {
  GRID_STRIDE(i, n) out[i] += bias[i % OC];
}

__global__ void bias_residual_add_kernel(float* out, const float* residual, const float* y,
                                         const float* bias, const float* bias2, size_t n, int C) {
  GRID_STRIDE(i, n) {
    float v = residual[i] + y[i];
    if (bias != nullptr) v += bias[i % C];
    if (bias2 != nullptr) v += bias2[i % C];
    out[i] = v;
  }
}

// 0.5 x (1 + tanh(u)) == x sigmoid(2u), as CpuDevice computes it.
__global__ void gelu_forward_kernel(float* out, const float* inp, size_t n) {
  GRID_STRIDE(i, n) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCube * x * x * x);
    out[i] = x / (1.0f + expf(-2.0f * u));
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
  GRID_STRIDE(i, n) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCube * x * x * x);
    const float s = 1.0f / (1.0f + expf(-2.0f * u));
    const float sech2 = 4.0f * s * (1.0f - s);
    const float grad = s + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
    dinp[i] = grad * dout[i];
  }
}

__global__ void swiglu_forward_kernel(float* out, const float* inp, int N, int F) {
  const size_t n = static_cast<size_t>(N) * F;
  GRID_STRIDE(i, n) {
    const size_t row = i / F, f = i % F;
    const float g = inp[row * 2 * F + f];
    const float up = inp[row * 2 * F + F + f];
    const float sig = 1.0f / (1.0f + expf(-g));
    out[i] = g * sig * up;
  }
}

__global__ void swiglu_backward_kernel(float* dinp, const float* inp, const float* dout, int N,
                                       int F) {
  const size_t n = static_cast<size_t>(N) * F;
  GRID_STRIDE(i, n) {
    const size_t row = i / F, f = i % F;
    const float g = inp[row * 2 * F + f];
    const float up = inp[row * 2 * F + F + f];
    const float sig = 1.0f / (1.0f + expf(-g));
    const float dy = dout[i];
    dinp[row * 2 * F + f] = dy * up * sig * (1.0f + g * (1.0f - sig));
    dinp[row * 2 * F + F + f] = dy * (g * sig);
  }
}

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* wte,
                                         int vocab_start, int N, int V, int C) {
  const size_t n = static_cast<size_t>(N) * C;
  GRID_STRIDE(i, n) {
    const size_t row = i / C, c = i % C;
    const int t = tokens[row] - vocab_start;
    out[i] = (t >= 0 && t < V) ? wte[static_cast<size_t>(t) * C + c] : 0.0f;
  }
}

// Float atomics: the order of the adds to a row hit by repeated tokens varies
// from run to run (the one non-deterministic kernel; kernels.h).
__global__ void embedding_backward_kernel(float* dwte, const float* dout, const int32_t* tokens,
                                          int vocab_start, int N, int V, int C) {
  const size_t n = static_cast<size_t>(N) * C;
  GRID_STRIDE(i, n) {
    const size_t row = i / C, c = i % C;
    const int t = tokens[row] - vocab_start;
    if (t >= 0 && t < V) atomicAdd(dwte + static_cast<size_t>(t) * C + c, dout[i]);
  }
}

__global__ void position_embedding_forward_kernel(float* out, const float* wpe, int t0, int T,
                                                  int B, int C) {
  const size_t n = static_cast<size_t>(T) * B * C;
  GRID_STRIDE(i, n) {
    const size_t t = i / (static_cast<size_t>(B) * C), c = i % C;
    out[i] += wpe[(t0 + t) * C + c];
  }
}

// One thread per (t, c), summing over b in order: deterministic.
__global__ void position_embedding_backward_kernel(float* dwpe, const float* dout, int t0, int T,
                                                   int B, int C) {
  const size_t n = static_cast<size_t>(T) * C;
  GRID_STRIDE(i, n) {
    const size_t t = i / C, c = i % C;
    float s = 0.0f;
    for (int b = 0; b < B; ++b) s += dout[(t * B + b) * C + c];
    dwpe[(t0 + t) * C + c] += s;
  }
}

__global__ void to_bf16_kernel(__nv_bfloat16* dst, const float* src, size_t n) {
  GRID_STRIDE(i, n) dst[i] = __float2bfloat16_rn(src[i]);
}

#undef GRID_STRIDE

}  // namespace

void launch_add(float* out, const float* a, const float* b, size_t n, cudaStream_t s) {
  if (n == 0) return;
  add_kernel<<<grid_for(n), kBlock, 0, s>>>(out, a, b, n);
  CUDA_CHECK_LAUNCH();
}

void launch_scale(float* x, float coef, size_t n, cudaStream_t s) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kBlock, 0, s>>>(x, coef, n);
  CUDA_CHECK_LAUNCH();
}

void launch_bias_add(float* out, const float* bias, int N, int OC, cudaStream_t s) {
  const size_t n = static_cast<size_t>(N) * OC;
  if (n == 0) return;
  bias_add_kernel<<<grid_for(n), kBlock, 0, s>>>(out, bias, n, OC);
  CUDA_CHECK_LAUNCH();
}

void launch_bias_residual_add(float* out, const float* residual, const float* y,
                              const float* bias, const float* bias2, int N, int C, cudaStream_t s) {
  const size_t n = static_cast<size_t>(N) * C;
  if (n == 0) return;
  bias_residual_add_kernel<<<grid_for(n), kBlock, 0, s>>>(out, residual, y, bias, bias2, n, C);
  CUDA_CHECK_LAUNCH();
}

void launch_gelu_forward(float* out, const float* inp, size_t n, cudaStream_t s) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n), kBlock, 0, s>>>(out, inp, n);
  CUDA_CHECK_LAUNCH();
}

void launch_gelu_backward(float* dinp, const float* inp, const float* dout, size_t n,
                          cudaStream_t s) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n), kBlock, 0, s>>>(dinp, inp, dout, n);
  CUDA_CHECK_LAUNCH();
}

void launch_swiglu_forward(float* out, const float* inp, int N, int F, cudaStream_t s) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n == 0) return;
  swiglu_forward_kernel<<<grid_for(n), kBlock, 0, s>>>(out, inp, N, F);
  CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F,
                            cudaStream_t s) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n == 0) return;
  swiglu_backward_kernel<<<grid_for(n), kBlock, 0, s>>>(dinp, inp, dout, N, F);
  CUDA_CHECK_LAUNCH();
}

void launch_embedding_forward(float* out, const int32_t* tokens, const float* wte, int vocab_start,
                              int N, int V, int C, cudaStream_t s) {
  const size_t n = static_cast<size_t>(N) * C;
  if (n == 0) return;
  embedding_forward_kernel<<<grid_for(n), kBlock, 0, s>>>(out, tokens, wte, vocab_start, N, V, C);
  CUDA_CHECK_LAUNCH();
}

void launch_embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                               int vocab_start, int N, int V, int C, cudaStream_t s) {
  const size_t n = static_cast<size_t>(N) * C;
  if (n == 0) return;
  embedding_backward_kernel<<<grid_for(n), kBlock, 0, s>>>(dwte, dout, tokens, vocab_start, N, V, C);
  CUDA_CHECK_LAUNCH();
}

void launch_position_embedding_forward(float* out, const float* wpe, int t0, int T, int B, int C,
                                       cudaStream_t s) {
  const size_t n = static_cast<size_t>(T) * B * C;
  if (n == 0) return;
  position_embedding_forward_kernel<<<grid_for(n), kBlock, 0, s>>>(out, wpe, t0, T, B, C);
  CUDA_CHECK_LAUNCH();
}

void launch_position_embedding_backward(float* dwpe, const float* dout, int t0, int T, int B,
                                        int C, cudaStream_t s) {
  const size_t n = static_cast<size_t>(T) * C;
  if (n == 0) return;
  position_embedding_backward_kernel<<<grid_for(n), kBlock, 0, s>>>(dwpe, dout, t0, T, B, C);
  CUDA_CHECK_LAUNCH();
}

void launch_to_bf16(void* dst, const float* src, size_t n, cudaStream_t s) {
  if (n == 0) return;
  to_bf16_kernel<<<grid_for(n), kBlock, 0, s>>>(static_cast<__nv_bfloat16*>(dst), src, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace megascale::engine::cuda
