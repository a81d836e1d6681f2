// engine/cuda/kernels_norm.cu: kernels that reduce along a row (LayerNorm,
// softmax, cross-entropy: a warp or a block per row, llm.c's layernorm_forward
// kernel shape) or down the columns (bias and LayerNorm parameter gradients:
// fixed chunks of rows, then the chunks summed in order, so the bits do not
// depend on scheduling; no atomics).
#include "engine/cuda/common.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace megascale::engine::cuda {
namespace {

constexpr float kLayerNormEps = 1e-5f;  // GPT-2 / Megatron-LM, as CpuDevice
constexpr int kRowsPerChunk = 128;      // column sums: rows one thread adds before the chunk sum

int row_chunks(int N) { return (N + kRowsPerChunk - 1) / kRowsPerChunk; }

// ws[chunk][c] = sum of x over the chunk's rows (x (N, C)).
__global__ void column_partials_kernel(float* ws, const float* x, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (c >= C) return;
  const int r0 = chunk * kRowsPerChunk;
  const int r1 = min(N, r0 + kRowsPerChunk);
  float s = 0.0f;
  for (int r = r0; r < r1; ++r) s += x[static_cast<size_t>(r) * C + c];
  ws[static_cast<size_t>(chunk) * C + c] = s;
}

// dst[c] += sum over chunks of ws[chunk][c], chunks in order.
__global__ void column_finish_kernel(float* dst, const float* ws, int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s = 0.0f;
  for (int k = 0; k < chunks; ++k) s += ws[static_cast<size_t>(k) * C + c];
  dst[c] += s;
}

// One warp per row: mean, variance (two passes over the row, as CpuDevice),
// then the normalised output.
__global__ void layer_norm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                          const float* weight, const float* bias, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* x = inp + static_cast<size_t>(row) * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += kWarp) s += x[c];
  const float m = warp_sum(s) / C;
  float v = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float d = x[c] - m;
    v += d * d;
  }
  const float r = rsqrtf(warp_sum(v) / C + kLayerNormEps);
  float* y = out + static_cast<size_t>(row) * C;
  for (int c = lane; c < C; c += kWarp) y[c] = (x[c] - m) * r * weight[c] + bias[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// dinp += per row (llm.c's layernorm_backward); the parameter gradients are
// column sums done separately.
__global__ void layer_norm_backward_dx_kernel(float* dinp, const float* dout, const float* inp,
                                              const float* weight, const float* mean,
                                              const float* rstd, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* dy = dout + static_cast<size_t>(row) * C;
  const float* x = inp + static_cast<size_t>(row) * C;
  float* dx = dinp + static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float norm = (x[c] - m) * r;
    const float dnorm = weight[c] * dy[c];
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * norm;
  }
  dnorm_mean = warp_sum(dnorm_mean) / C;
  dnorm_norm_mean = warp_sum(dnorm_norm_mean) / C;
  for (int c = lane; c < C; c += kWarp) {
    const float norm = (x[c] - m) * r;
    const float dnorm = weight[c] * dy[c];
    dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
  }
}

// ws_w[chunk][c] = sum over the chunk's rows of norm * dy; ws_b likewise of dy.
__global__ void layer_norm_param_partials_kernel(float* ws_w, float* ws_b, const float* dout,
                                                 const float* inp, const float* mean,
                                                 const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (c >= C) return;
  const int r0 = chunk * kRowsPerChunk;
  const int r1 = min(N, r0 + kRowsPerChunk);
  float sw = 0.0f, sb = 0.0f;
  for (int r = r0; r < r1; ++r) {
    const size_t i = static_cast<size_t>(r) * C + c;
    const float dy = dout[i];
    sw += (inp[i] - mean[r]) * rstd[r] * dy;
    sb += dy;
  }
  ws_w[static_cast<size_t>(chunk) * C + c] = sw;
  ws_b[static_cast<size_t>(chunk) * C + c] = sb;
}

// One block per row for the wide rows of softmax and cross-entropy (V up to a
// vocabulary).
__global__ void softmax_forward_kernel(float* out, const float* inp, int V) {
  __shared__ float shared[kWarp];
  const size_t row = blockIdx.x;
  const float* x = inp + row * V;
  float* y = out + row * V;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_max(m, shared);
  float s = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(x[j] - m);
  s = block_sum(s, shared);
  const float inv = 1.0f / s;
  for (int j = threadIdx.x; j < V; j += blockDim.x) y[j] = expf(x[j] - m) * inv;
}

__global__ void softmax_backward_kernel(float* dinp, const float* out, const float* dout, int V) {
  __shared__ float shared[kWarp];
  const size_t row = blockIdx.x;
  const float* p = out + row * V;
  const float* dy = dout + row * V;
  float* dx = dinp + row * V;
  float dot = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) dot += p[j] * dy[j];
  dot = block_sum(dot, shared);
  for (int j = threadIdx.x; j < V; j += blockDim.x) dx[j] = p[j] * (dy[j] - dot);
}

__global__ void row_max_kernel(float* row_max, const float* logits, int V) {
  __shared__ float shared[kWarp];
  const size_t row = blockIdx.x;
  const float* l = logits + row * V;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, l[j]);
  m = block_max(m, shared);
  if (threadIdx.x == 0) row_max[row] = m;
}

__global__ void cross_entropy_partials_kernel(float* sum_exp, float* target_logit,
                                              const float* logits, const float* row_max,
                                              const int32_t* targets, int vocab_start, int V) {
  __shared__ float shared[kWarp];
  const size_t row = blockIdx.x;
  const float* l = logits + row * V;
  const float m = row_max[row];
  float s = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) s += expf(l[j] - m);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) {
    sum_exp[row] = s;
    const int t = targets[row] - vocab_start;
    target_logit[row] = (t >= 0 && t < V) ? l[t] - m : 0.0f;
  }
}

__global__ void cross_entropy_loss_kernel(float* losses, const float* sum_exp,
                                          const float* target_logit, int N) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) losses[i] = logf(sum_exp[i]) - target_logit[i];
}

__global__ void cross_entropy_backward_kernel(float* dlogits, const float* logits,
                                              const float* row_max, const float* sum_exp,
                                              const int32_t* targets, const float* dlosses,
                                              int vocab_start, int V) {
  const size_t row = blockIdx.x;
  const float* l = logits + row * V;
  float* dl = dlogits + row * V;
  const float m = row_max[row];
  const float inv = 1.0f / sum_exp[row];
  const float dy = dlosses[row];
  const int t = targets[row] - vocab_start;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    float g = expf(l[j] - m) * inv * dy;
    if (j == t) g -= dy;
    dl[j] = g;
  }
}

dim3 column_grid(int N, int C) {
  return dim3(static_cast<unsigned>((C + kBlock - 1) / kBlock), static_cast<unsigned>(row_chunks(N)));
}

}  // namespace

size_t column_sum_workspace_floats(int N, int C) {
  return static_cast<size_t>(row_chunks(N > 0 ? N : 1)) * static_cast<size_t>(C > 0 ? C : 1);
}

void launch_bias_backward(float* dbias, const float* dout, int N, int OC, float* ws,
                          cudaStream_t s) {
  if (N <= 0 || OC <= 0) return;
  column_partials_kernel<<<column_grid(N, OC), kBlock, 0, s>>>(ws, dout, N, OC);
  CUDA_CHECK_LAUNCH();
  column_finish_kernel<<<(OC + kBlock - 1) / kBlock, kBlock, 0, s>>>(dbias, ws, row_chunks(N), OC);
  CUDA_CHECK_LAUNCH();
}

void launch_layer_norm_forward(float* out, float* mean, float* rstd, const float* inp,
                               const float* weight, const float* bias, int N, int C,
                               cudaStream_t s) {
  if (N <= 0) return;
  const int rows_per_block = kBlock / kWarp;
  layer_norm_forward_kernel<<<(N + rows_per_block - 1) / rows_per_block, kBlock, 0, s>>>(
      out, mean, rstd, inp, weight, bias, N, C);
  CUDA_CHECK_LAUNCH();
}

void launch_layer_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                const float* inp, const float* weight, const float* mean,
                                const float* rstd, int N, int C, float* ws, cudaStream_t s) {
  if (N <= 0 || C <= 0) return;
  const int rows_per_block = kBlock / kWarp;
  layer_norm_backward_dx_kernel<<<(N + rows_per_block - 1) / rows_per_block, kBlock, 0, s>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);
  CUDA_CHECK_LAUNCH();
  float* ws_w = ws;
  float* ws_b = ws + column_sum_workspace_floats(N, C);
  layer_norm_param_partials_kernel<<<column_grid(N, C), kBlock, 0, s>>>(ws_w, ws_b, dout, inp, mean,
                                                                         rstd, N, C);
  CUDA_CHECK_LAUNCH();
  const unsigned g = static_cast<unsigned>((C + kBlock - 1) / kBlock);
  column_finish_kernel<<<g, kBlock, 0, s>>>(dweight, ws_w, row_chunks(N), C);
  CUDA_CHECK_LAUNCH();
  column_finish_kernel<<<g, kBlock, 0, s>>>(dbias, ws_b, row_chunks(N), C);
  CUDA_CHECK_LAUNCH();
}

void launch_softmax_forward(float* out, const float* inp, int N, int V, cudaStream_t s) {
  if (N <= 0) return;
  softmax_forward_kernel<<<N, kBlock, 0, s>>>(out, inp, V);
  CUDA_CHECK_LAUNCH();
}

void launch_softmax_backward(float* dinp, const float* out, const float* dout, int N, int V,
                             cudaStream_t s) {
  if (N <= 0) return;
  softmax_backward_kernel<<<N, kBlock, 0, s>>>(dinp, out, dout, V);
  CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_row_max(float* row_max, const float* logits, int N, int V,
                                  cudaStream_t s) {
  if (N <= 0) return;
  row_max_kernel<<<N, kBlock, 0, s>>>(row_max, logits, V);
  CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_partials(float* sum_exp, float* target_logit, const float* logits,
                                   const float* row_max, const int32_t* targets, int vocab_start,
                                   int N, int V, cudaStream_t s) {
  if (N <= 0) return;
  cross_entropy_partials_kernel<<<N, kBlock, 0, s>>>(sum_exp, target_logit, logits, row_max,
                                                      targets, vocab_start, V);
  CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_loss(float* losses, const float* sum_exp, const float* target_logit,
                               int N, cudaStream_t s) {
  if (N <= 0) return;
  cross_entropy_loss_kernel<<<(N + kBlock - 1) / kBlock, kBlock, 0, s>>>(losses, sum_exp,
                                                                          target_logit, N);
  CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_backward(float* dlogits, const float* logits, const float* row_max,
                                   const float* sum_exp, const int32_t* targets,
                                   const float* dlosses, int vocab_start, int N, int V,
                                   cudaStream_t s) {
  if (N <= 0) return;
  cross_entropy_backward_kernel<<<N, kBlock, 0, s>>>(dlogits, logits, row_max, sum_exp, targets,
                                                      dlosses, vocab_start, V);
  CUDA_CHECK_LAUNCH();
}

}  // namespace megascale::engine::cuda
