// engine/device_cpu.cc: CPU kernels — Eigen GEMMs, loops after llm.c's
// train_gpt2.c (layernorm, gelu, attention, crossentropy, encoder).
#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE  // one rank = one thread; deterministic results
#endif
#include "engine/device_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <Eigen/Dense>

namespace megascale::engine {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;
using Stride = Eigen::OuterStride<>;
using StridedMap = Eigen::Map<RowMat, 0, Stride>;
using ConstStridedMap = Eigen::Map<const RowMat, 0, Stride>;

constexpr float kLayerNormEps = 1e-5f;
constexpr size_t kAlignment = 64;

// First key visible to query i: i - W with a window, 0 without.
inline int first_key(int i, int window) { return window > 0 ? std::max(0, i - window) : 0; }

}  // namespace

CpuDevice& cpu_device() {
  static CpuDevice device;
  return device;
}

// ---- memory -----------------------------------------------------------------

void* CpuDevice::allocate(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  ENGINE_CHECK(p != nullptr, "out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  return p;
}

void CpuDevice::deallocate(void* ptr) { std::free(ptr); }

void CpuDevice::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuDevice::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void CpuDevice::copy(void* dst, const void* src, size_t bytes) {
  if (bytes && dst != src) std::memmove(dst, src, bytes);
}
void CpuDevice::fill_zero(void* ptr, size_t bytes) {
  if (bytes) std::memset(ptr, 0, bytes);
}

// ---- GEMM -------------------------------------------------------------------

void CpuDevice::matmul(float* c, const float* a, const float* b, int M, int N, int K,
                       bool trans_a, bool trans_b, float beta) {
  MatMap C(c, M, N);
  if (K == 0) {
    if (beta == 0.0f) C.setZero(); else C *= beta;
    return;
  }
  ConstMatMap A(a, trans_a ? K : M, trans_a ? M : K);
  ConstMatMap Bm(b, trans_b ? N : K, trans_b ? K : N);
  if (beta == 0.0f) {
    if (!trans_a && !trans_b) C.noalias() = A * Bm;
    else if (!trans_a && trans_b) C.noalias() = A * Bm.transpose();
    else if (trans_a && !trans_b) C.noalias() = A.transpose() * Bm;
    else C.noalias() = A.transpose() * Bm.transpose();
    return;
  }
  if (beta != 1.0f) C *= beta;
  if (!trans_a && !trans_b) C.noalias() += A * Bm;
  else if (!trans_a && trans_b) C.noalias() += A * Bm.transpose();
  else if (trans_a && !trans_b) C.noalias() += A.transpose() * Bm;
  else C.noalias() += A.transpose() * Bm.transpose();
}

// ---- elementwise ------------------------------------------------------------

void CpuDevice::add(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void CpuDevice::bias_add(float* out, const float* bias, int N, int OC) {
  for (int i = 0; i < N; ++i) {
    float* row = out + static_cast<size_t>(i) * OC;
    for (int o = 0; o < OC; ++o) row[o] += bias[o];
  }
}

void CpuDevice::bias_backward(float* dbias, const float* dout, int N, int OC) {
  for (int i = 0; i < N; ++i) {
    const float* row = dout + static_cast<size_t>(i) * OC;
    for (int o = 0; o < OC; ++o) dbias[o] += row[o];
  }
}

// ---- LayerNorm (llm.c layernorm_forward / layernorm_backward) ---------------

void CpuDevice::layer_norm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int N, int C) {
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * C;
    float m = 0.0f;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    float v = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float d = x[c] - m;
      v += d * d;
    }
    v /= C;
    const float s = 1.0f / std::sqrt(v + kLayerNormEps);
    float* y = out + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[i] = m;
    rstd[i] = s;
  }
}

void CpuDevice::layer_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* mean,
                                    const float* rstd, int N, int C) {
  for (int i = 0; i < N; ++i) {
    const float* dy = dout + static_cast<size_t>(i) * C;
    const float* x = inp + static_cast<size_t>(i) * C;
    float* dx = dinp + static_cast<size_t>(i) * C;
    const float m = mean[i];
    const float s = rstd[i];
    float dnorm_mean = 0.0f;
    float dnorm_norm_mean = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float norm = (x[c] - m) * s;
      const float dnorm = weight[c] * dy[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    for (int c = 0; c < C; ++c) {
      const float norm = (x[c] - m) * s;
      const float dnorm = weight[c] * dy[c];
      dbias[c] += dy[c];
      dweight[c] += norm * dy[c];
      dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

// ---- activations ------------------------------------------------------------

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCube = 0.044715f;
}  // namespace

// 0.5 * (1 + tanh(u)) == sigmoid(2u): one exp instead of a tanh (about 3x
// faster with glibc), the same function to within float rounding.
void CpuDevice::gelu_forward(float* out, const float* inp, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCube * x * x * x);
    out[i] = x / (1.0f + std::exp(-2.0f * u));
  }
}

void CpuDevice::gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kGeluScale * (x + kGeluCube * x * x * x);
    const float s = 1.0f / (1.0f + std::exp(-2.0f * u));  // 0.5 * (1 + tanh(u))
    const float sech2 = 4.0f * s * (1.0f - s);           // 1 - tanh(u)^2
    const float grad = s + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
    dinp[i] = grad * dout[i];
  }
}

void CpuDevice::swiglu_forward(float* out, const float* inp, int N, int F) {
  for (int i = 0; i < N; ++i) {
    const float* gate = inp + static_cast<size_t>(i) * 2 * F;
    const float* up = gate + F;
    float* y = out + static_cast<size_t>(i) * F;
    for (int f = 0; f < F; ++f) {
      const float g = gate[f];
      const float sig = 1.0f / (1.0f + std::exp(-g));
      y[f] = g * sig * up[f];
    }
  }
}

void CpuDevice::swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) {
  for (int i = 0; i < N; ++i) {
    const float* gate = inp + static_cast<size_t>(i) * 2 * F;
    const float* up = gate + F;
    const float* dy = dout + static_cast<size_t>(i) * F;
    float* dgate = dinp + static_cast<size_t>(i) * 2 * F;
    float* dup = dgate + F;
    for (int f = 0; f < F; ++f) {
      const float g = gate[f];
      const float sig = 1.0f / (1.0f + std::exp(-g));
      const float silu = g * sig;
      dgate[f] = dy[f] * up[f] * sig * (1.0f + g * (1.0f - sig));
      dup[f] = dy[f] * silu;
    }
  }
}

// ---- softmax ----------------------------------------------------------------

void CpuDevice::softmax_forward(float* out, const float* inp, int N, int V) {
  for (int i = 0; i < N; ++i) {
    const float* x = inp + static_cast<size_t>(i) * V;
    float* y = out + static_cast<size_t>(i) * V;
    float m = -INFINITY;
    for (int j = 0; j < V; ++j) m = std::max(m, x[j]);
    float sum = 0.0f;
    for (int j = 0; j < V; ++j) {
      y[j] = std::exp(x[j] - m);
      sum += y[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < V; ++j) y[j] *= inv;
  }
}

void CpuDevice::softmax_backward(float* dinp, const float* out, const float* dout, int N, int V) {
  for (int i = 0; i < N; ++i) {
    const float* p = out + static_cast<size_t>(i) * V;
    const float* dy = dout + static_cast<size_t>(i) * V;
    float* dx = dinp + static_cast<size_t>(i) * V;
    float dot = 0.0f;
    for (int j = 0; j < V; ++j) dot += p[j] * dy[j];
    for (int j = 0; j < V; ++j) dx[j] = p[j] * (dy[j] - dot);
  }
}

// ---- attention ----------------------------------------------------------------

void CpuDevice::attention_forward(float* out, float* probs, const float* qkv, int T, int B,
                                  int NH, int NKV, int HD, int window) {
  const int qkv_width = (NH + 2 * NKV) * HD;
  const Stride qkv_stride(static_cast<Eigen::Index>(B) * qkv_width);
  const Stride out_stride(static_cast<Eigen::Index>(B) * NH * HD);
  const int group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  for (int b = 0; b < B; ++b) {
    const float* row0 = qkv + static_cast<size_t>(b) * qkv_width;
    for (int h = 0; h < NH; ++h) {
      const int kvh = h / group;
      ConstStridedMap Q(row0 + h * HD, T, HD, qkv_stride);              // (T, HD)
      ConstStridedMap K(row0 + (NH + kvh) * HD, T, HD, qkv_stride);     // (T, HD)
      ConstStridedMap Vv(row0 + (NH + NKV + kvh) * HD, T, HD, qkv_stride);
      MatMap P(probs + (static_cast<size_t>(b) * NH + h) * T * T, T, T);  // (T, T)
      P.noalias() = Q * K.transpose();
      for (int i = 0; i < T; ++i) {
        float* p = P.data() + static_cast<size_t>(i) * T;
        const int lo = first_key(i, window);
        float m = -INFINITY;
        for (int j = lo; j <= i; ++j) m = std::max(m, p[j] * scale);
        float sum = 0.0f;
        for (int j = lo; j <= i; ++j) {
          p[j] = std::exp(p[j] * scale - m);
          sum += p[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < lo; ++j) p[j] = 0.0f;
        for (int j = lo; j <= i; ++j) p[j] *= inv;
        for (int j = i + 1; j < T; ++j) p[j] = 0.0f;
      }
      StridedMap O(out + static_cast<size_t>(b) * NH * HD + h * HD, T, HD, out_stride);
      O.noalias() = P * Vv;
    }
  }
}

void CpuDevice::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                   const float* probs, int T, int B, int NH, int NKV, int HD) {
  const int qkv_width = (NH + 2 * NKV) * HD;
  const Stride qkv_stride(static_cast<Eigen::Index>(B) * qkv_width);
  const Stride out_stride(static_cast<Eigen::Index>(B) * NH * HD);
  const int group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  fill_zero(dqkv, static_cast<size_t>(T) * B * qkv_width * sizeof(float));
  RowMat dP(T, T);  // (T, T) scratch
  for (int b = 0; b < B; ++b) {
    const float* row0 = qkv + static_cast<size_t>(b) * qkv_width;
    float* drow0 = dqkv + static_cast<size_t>(b) * qkv_width;
    for (int h = 0; h < NH; ++h) {
      const int kvh = h / group;
      ConstStridedMap Q(row0 + h * HD, T, HD, qkv_stride);
      ConstStridedMap K(row0 + (NH + kvh) * HD, T, HD, qkv_stride);
      ConstStridedMap Vv(row0 + (NH + NKV + kvh) * HD, T, HD, qkv_stride);
      StridedMap dQ(drow0 + h * HD, T, HD, qkv_stride);
      StridedMap dK(drow0 + (NH + kvh) * HD, T, HD, qkv_stride);
      StridedMap dV(drow0 + (NH + NKV + kvh) * HD, T, HD, qkv_stride);
      ConstMatMap P(probs + (static_cast<size_t>(b) * NH + h) * T * T, T, T);
      ConstStridedMap dO(dout + static_cast<size_t>(b) * NH * HD + h * HD, T, HD, out_stride);
      dV.noalias() += P.transpose() * dO;
      dP.noalias() = dO * Vv.transpose();
      // dS = P * (dP - rowsum(P * dP)), already 0 where masked (P == 0); the
      // 1/sqrt(HD) of the scores goes into the two GEMMs below.
      for (int i = 0; i < T; ++i) {
        const float* p = P.data() + static_cast<size_t>(i) * T;
        float* d = dP.data() + static_cast<size_t>(i) * T;
        float dot = 0.0f;
        for (int j = 0; j <= i; ++j) dot += p[j] * d[j];
        for (int j = 0; j <= i; ++j) d[j] = p[j] * (d[j] - dot) * scale;
        for (int j = i + 1; j < T; ++j) d[j] = 0.0f;
      }
      dQ.noalias() += dP * K;
      dK.noalias() += dP.transpose() * Q;
    }
  }
}

// ---- cross-entropy ------------------------------------------------------------

void CpuDevice::cross_entropy_row_max(float* row_max, const float* logits, int N, int V) {
  for (int i = 0; i < N; ++i) {
    const float* l = logits + static_cast<size_t>(i) * V;
    float m = -INFINITY;
    for (int j = 0; j < V; ++j) m = std::max(m, l[j]);
    row_max[i] = m;
  }
}

void CpuDevice::cross_entropy_partials(float* sum_exp, float* target_logit, const float* logits,
                                       const float* row_max, const int32_t* targets,
                                       int vocab_start, int N, int V) {
  for (int i = 0; i < N; ++i) {
    const float* l = logits + static_cast<size_t>(i) * V;
    const float m = row_max[i];
    float s = 0.0f;
    for (int j = 0; j < V; ++j) s += std::exp(l[j] - m);
    sum_exp[i] = s;
    const int t = targets[i] - vocab_start;
    target_logit[i] = (t >= 0 && t < V) ? l[t] - m : 0.0f;
  }
}

void CpuDevice::cross_entropy_loss(float* losses, const float* sum_exp, const float* target_logit,
                                   int N) {
  for (int i = 0; i < N; ++i) losses[i] = std::log(sum_exp[i]) - target_logit[i];
}

void CpuDevice::cross_entropy_backward(float* dlogits, const float* logits, const float* row_max,
                                       const float* sum_exp, const int32_t* targets,
                                       const float* dlosses, int vocab_start, int N, int V) {
  for (int i = 0; i < N; ++i) {
    const float* l = logits + static_cast<size_t>(i) * V;
    float* dl = dlogits + static_cast<size_t>(i) * V;
    const float m = row_max[i];
    const float inv = 1.0f / sum_exp[i];
    const float dy = dlosses[i];
    for (int j = 0; j < V; ++j) dl[j] = std::exp(l[j] - m) * inv * dy;
    const int t = targets[i] - vocab_start;
    if (t >= 0 && t < V) dl[t] -= dy;
  }
}

// ---- embeddings -----------------------------------------------------------------

void CpuDevice::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                  int vocab_start, int N, int V, int C) {
  for (int i = 0; i < N; ++i) {
    float* y = out + static_cast<size_t>(i) * C;
    const int t = tokens[i] - vocab_start;
    if (t >= 0 && t < V) {
      std::memcpy(y, wte + static_cast<size_t>(t) * C, sizeof(float) * C);
    } else {
      std::memset(y, 0, sizeof(float) * C);
    }
  }
}

void CpuDevice::embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                                   int vocab_start, int N, int V, int C) {
  for (int i = 0; i < N; ++i) {
    const int t = tokens[i] - vocab_start;
    if (t < 0 || t >= V) continue;
    float* dw = dwte + static_cast<size_t>(t) * C;
    const float* dy = dout + static_cast<size_t>(i) * C;
    for (int c = 0; c < C; ++c) dw[c] += dy[c];
  }
}

void CpuDevice::position_embedding_forward(float* out, const float* wpe, int t0, int T, int B,
                                           int C) {
  for (int t = 0; t < T; ++t) {
    const float* p = wpe + static_cast<size_t>(t0 + t) * C;
    for (int b = 0; b < B; ++b) {
      float* y = out + (static_cast<size_t>(t) * B + b) * C;
      for (int c = 0; c < C; ++c) y[c] += p[c];
    }
  }
}

void CpuDevice::position_embedding_backward(float* dwpe, const float* dout, int t0, int T, int B,
                                            int C) {
  for (int t = 0; t < T; ++t) {
    float* dp = dwpe + static_cast<size_t>(t0 + t) * C;
    for (int b = 0; b < B; ++b) {
      const float* dy = dout + (static_cast<size_t>(t) * B + b) * C;
      for (int c = 0; c < C; ++c) dp[c] += dy[c];
    }
  }
}

// ---- optimizer (engine/optimizer.h's arithmetic, in its order) ---------------------

void CpuDevice::scale(float* x, float coef, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] *= coef;
}

void CpuDevice::sum_squares(double* sums_host, const float* x, const ShardPiece* pieces,
                            int count) {
  for (int k = 0; k < count; ++k) {
    const float* g = x + pieces[k].begin;
    double s = 0;
    for (size_t j = 0; j < pieces[k].size; ++j) s += static_cast<double>(g[j]) * g[j];
    sums_host[k] = s;
  }
}

// The constants are copied to locals: read through `k` they could alias the
// arrays written in the loop, and the compiler would reload them every element.
void CpuDevice::adamw_step(float* p, float* m, float* v, const float* grad,
                           const ShardPiece* pieces, int count, const AdamConstants& constants) {
  const AdamConstants k = constants;
  for (int i = 0; i < count; ++i) {
    const size_t at = pieces[i].begin;
    float* pp = p + at;
    float* mm = m + at;
    float* vv = v + at;
    const float* g = grad + at;
    const float decay = pieces[i].coef;
    for (size_t j = 0; j < pieces[i].size; ++j) {
      const float gj = g[j] * k.clip;
      mm[j] = k.beta1 * mm[j] + k.one_minus_beta1 * gj;
      vv[j] = k.beta2 * vv[j] + k.one_minus_beta2 * gj * gj;
      pp[j] *= decay;
      pp[j] -= k.step_size * mm[j] / (std::sqrt(vv[j]) / k.bc2_sqrt + k.eps);
    }
  }
}

void CpuDevice::lamb_direction(float* u, float* m, float* v, const float* p, const float* grad,
                               const ShardPiece* pieces, int count, const AdamConstants& constants,
                               double* sums_host) {
  const AdamConstants k = constants;
  for (int i = 0; i < count; ++i) {
    const size_t at = pieces[i].begin;
    const float* pp = p + at;
    float* mm = m + at;
    float* vv = v + at;
    float* uu = u + at;
    const float* g = grad + at;
    const float wd = pieces[i].coef;
    double p2 = 0, u2 = 0;
    for (size_t j = 0; j < pieces[i].size; ++j) {
      const float gj = g[j] * k.clip;
      mm[j] = k.beta1 * mm[j] + k.one_minus_beta1 * gj;
      vv[j] = k.beta2 * vv[j] + k.one_minus_beta2 * gj * gj;
      uu[j] = (mm[j] / k.bc1) / (std::sqrt(vv[j] / k.bc2) + k.eps) + wd * pp[j];
      p2 += static_cast<double>(pp[j]) * pp[j];
      u2 += static_cast<double>(uu[j]) * uu[j];
    }
    sums_host[2 * i] = p2;
    sums_host[2 * i + 1] = u2;
  }
}

void CpuDevice::lamb_apply(float* p, const float* u, const ShardPiece* pieces, int count) {
  for (int i = 0; i < count; ++i) {
    float* pp = p + pieces[i].begin;
    const float* uu = u + pieces[i].begin;
    const float scale = pieces[i].coef;
    for (size_t j = 0; j < pieces[i].size; ++j) pp[j] -= scale * uu[j];
  }
}

}  // namespace megascale::engine
