// tests/engine/attention_gemms_test.cc: the GEMM lists of CudaDevice's cuBLAS
// attention path (engine/cuda/attention_gemms.h), run on the CPU through a
// plain column-major strided-batched GEMM with cublasGemmStridedBatchedEx's
// semantics (beta 0 ignores C), plus the two row kernels written out as
// kernels_attention_scores.cu computes them, against CpuDevice. This checks
// every offset, stride, leading dimension, transpose and beta of the path on
// machines without a GPU (the GPU tests, tests/engine_gpu/
// attention_cublas_gpu_test.cc, check cuBLAS and the kernels themselves).
// The emulator also refuses any element read or written outside its buffer,
// any C element written twice by one strided-batched call (cuBLAS requires
// disjoint outputs), and the outputs start as NaN, so an element the GEMMs
// never write fails the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/attention_gemms.h"
#include "engine/device_cpu.h"

namespace megascale::engine {
namespace {

using cuda::AttnBuf;
using cuda::AttnGemm;
using cuda::AttnProduct;

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Span {
  float* ptr = nullptr;
  size_t size = 0;
};

// The host arrays bound to the symbolic buffers for one batch element.
struct Binding {
  Span qkv, out, dout, dqkv, scores, probs_in, dp, ds_in;
  Span at(AttnBuf buf) const {
    switch (buf) {
      case AttnBuf::kQkv: return qkv;
      case AttnBuf::kOut: return out;
      case AttnBuf::kDout: return dout;
      case AttnBuf::kDqkv: return dqkv;
      case AttnBuf::kScores: return scores;
      case AttnBuf::kProbsIn: return probs_in;
      case AttnBuf::kDP: return dp;
      case AttnBuf::kDSIn: return ds_in;
    }
    return {};
  }
};

bool is_input(AttnBuf b) {
  return b == AttnBuf::kQkv || b == AttnBuf::kDout || b == AttnBuf::kProbsIn || b == AttnBuf::kDSIn;
}

// Column-major C (m, n) = alpha op(A) op(B) + beta C per batch, double sums.
void run(const std::vector<AttnGemm>& gemms, const Binding& bind) {
  for (const AttnGemm& g : gemms) {
    ASSERT_TRUE(is_input(g.a.buf) && is_input(g.b.buf) && !is_input(g.c.buf));
    const Span A = bind.at(g.a.buf), B = bind.at(g.b.buf), C = bind.at(g.c.buf);
    ASSERT_NE(A.ptr, nullptr);
    ASSERT_NE(B.ptr, nullptr);
    ASSERT_NE(C.ptr, nullptr);
    // cuBLAS's argument rules.
    ASSERT_GE(g.a.ld, std::max(1, g.trans_a ? g.k : g.m));
    ASSERT_GE(g.b.ld, std::max(1, g.trans_b ? g.n : g.k));
    ASSERT_GE(g.c.ld, std::max(1, g.m));
    std::vector<char> written(C.size, 0);
    auto in = [](const Span& s, size_t idx) {
      if (idx >= s.size) throw std::out_of_range("read at " + std::to_string(idx) + " of " + std::to_string(s.size));
      return static_cast<double>(s.ptr[idx]);
    };
    for (int batch = 0; batch < g.batch; ++batch) {
      const size_t a0 = g.a.offset + static_cast<size_t>(batch) * g.a.stride;
      const size_t b0 = g.b.offset + static_cast<size_t>(batch) * g.b.stride;
      const size_t c0 = g.c.offset + static_cast<size_t>(batch) * g.c.stride;
      for (int j = 0; j < g.n; ++j) {
        for (int i = 0; i < g.m; ++i) {
          double acc = 0;
          for (int p = 0; p < g.k; ++p) {
            const size_t ai = g.trans_a ? a0 + p + static_cast<size_t>(i) * g.a.ld
                                        : a0 + i + static_cast<size_t>(p) * g.a.ld;
            const size_t bi = g.trans_b ? b0 + j + static_cast<size_t>(p) * g.b.ld
                                        : b0 + p + static_cast<size_t>(j) * g.b.ld;
            acc += in(A, ai) * in(B, bi);
          }
          const size_t ci = c0 + i + static_cast<size_t>(j) * g.c.ld;
          ASSERT_LT(ci, C.size) << "write out of bounds";
          ASSERT_EQ(written[ci], 0) << "two batches of one call write element " << ci;
          written[ci] = 1;
          const double old = g.beta == 0.0f ? 0.0 : static_cast<double>(g.beta) * C.ptr[ci];
          C.ptr[ci] = static_cast<float>(static_cast<double>(g.alpha) * acc + old);
        }
      }
    }
  }
}

// kernels_attention_scores.cu's masked softmax, in place on rows of T.
void masked_softmax(float* x, size_t rows, int T, int window) {
  for (size_t row = 0; row < rows; ++row) {
    float* r = x + row * T;
    const int i = static_cast<int>(row % T);
    const int lo = window > 0 ? std::max(0, i - window) : 0;
    float m = -INFINITY;
    for (int j = lo; j <= i; ++j) m = std::max(m, r[j]);
    float sum = 0;
    for (int j = lo; j <= i; ++j) sum += std::exp(r[j] - m);
    const float inv = 1.0f / sum;
    for (int j = 0; j < T; ++j) r[j] = (j >= lo && j <= i) ? std::exp(r[j] - m) * inv : 0.0f;
  }
}

// kernels_attention_scores.cu's dS, in place into d.
void scores_backward(float* d, const float* p, size_t rows, int T) {
  for (size_t row = 0; row < rows; ++row) {
    const int i = static_cast<int>(row % T);
    const size_t off = row * T;
    float dot = 0;
    for (int j = 0; j <= i; ++j) dot += p[off + j] * d[off + j];
    for (int j = 0; j < T; ++j) {
      const float pj = p[off + j];
      d[off + j] = (j <= i && pj != 0.0f) ? pj * (d[off + j] - dot) : 0.0f;
    }
  }
}

::testing::AssertionResult close(const std::vector<float>& want, const std::vector<float>& got, double rtol,
                                 double atol) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(want[i]) - got[i]);
    if (!(err <= atol + rtol * std::fabs(static_cast<double>(want[i])))) {
      return ::testing::AssertionFailure() << "element " << i << " of " << want.size() << ": want " << want[i]
                                           << ", got " << got[i];
    }
  }
  return ::testing::AssertionSuccess();
}

struct Case {
  int T, B, NH, NKV, HD, window;
};

TEST(AttentionGemms, CublasPathGemmListsMatchCpuDevice) {
  const std::vector<Case> cases = {{1, 1, 1, 1, 8, 0},  {2, 1, 1, 1, 4, 0},   {17, 2, 4, 2, 16, 0},
                                   {33, 1, 4, 1, 24, 5}, {13, 3, 6, 3, 5, 12}, {29, 2, 8, 1, 7, 3},
                                   {20, 2, 4, 4, 1, 7},  {9, 2, 6, 2, 3, 0}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE("T " + std::to_string(c.T) + " B " + std::to_string(c.B) + " NH " + std::to_string(c.NH) +
                 " NKV " + std::to_string(c.NKV) + " HD " + std::to_string(c.HD) + " W " + std::to_string(c.window));
    const size_t n_qkv = size_t(c.T) * c.B * (c.NH + 2 * c.NKV) * c.HD, n_out = size_t(c.T) * c.B * c.NH * c.HD;
    const size_t TT = size_t(c.T) * c.T, block = size_t(c.NH) * TT;
    std::vector<float> qkv = random_values(n_qkv, seed++), dout = random_values(n_out, seed++);

    CpuDevice cpu;
    std::vector<float> want_out(n_out), want_probs(size_t(c.B) * block), want_dqkv(n_qkv);
    cpu.attention_forward(want_out.data(), want_probs.data(), qkv.data(), c.T, c.B, c.NH, c.NKV, c.HD, c.window);
    cpu.attention_backward(want_dqkv.data(), dout.data(), qkv.data(), want_probs.data(), c.T, c.B, c.NH, c.NKV,
                           c.HD);

    const float nan = std::nanf("");
    std::vector<float> out(n_out, nan), probs(size_t(c.B) * block, nan), dqkv(n_qkv, nan), dp(block, nan);
    Binding bind;
    bind.qkv = {qkv.data(), qkv.size()};
    bind.out = {out.data(), out.size()};
    bind.dout = {dout.data(), dout.size()};
    bind.dqkv = {dqkv.data(), dqkv.size()};
    bind.dp = {dp.data(), dp.size()};
    bind.ds_in = bind.dp;  // fp32: dS in place in dP
    for (int b = 0; b < c.B; ++b) {  // CudaDevice::cublas_attention_forward
      bind.scores = bind.probs_in = {probs.data() + b * block, block};
      run(cuda::attention_gemms(AttnProduct::kScores, b, c.T, c.B, c.NH, c.NKV, c.HD), bind);
      masked_softmax(bind.scores.ptr, size_t(c.NH) * c.T, c.T, c.window);
      run(cuda::attention_gemms(AttnProduct::kValues, b, c.T, c.B, c.NH, c.NKV, c.HD), bind);
    }
    for (int b = 0; b < c.B; ++b) {  // CudaDevice::cublas_attention_backward
      bind.scores = {};
      bind.probs_in = {probs.data() + b * block, block};
      run(cuda::attention_gemms(AttnProduct::kDV, b, c.T, c.B, c.NH, c.NKV, c.HD), bind);
      run(cuda::attention_gemms(AttnProduct::kDP, b, c.T, c.B, c.NH, c.NKV, c.HD), bind);
      scores_backward(dp.data(), bind.probs_in.ptr, size_t(c.NH) * c.T, c.T);
      run(cuda::attention_gemms(AttnProduct::kDQ, b, c.T, c.B, c.NH, c.NKV, c.HD), bind);
      run(cuda::attention_gemms(AttnProduct::kDK, b, c.T, c.B, c.NH, c.NKV, c.HD), bind);
    }
    EXPECT_TRUE(close(want_out, out, 1e-5, 1e-6)) << "out";
    EXPECT_TRUE(close(want_probs, probs, 1e-5, 1e-7)) << "probs";
    EXPECT_TRUE(close(want_dqkv, dqkv, 1e-4, 1e-6)) << "dqkv";
  }
}

// dK and dV are sums over the group's query heads in a fixed order: the
// first GEMM of the list writes (beta 0), the others add (beta 1); dQ, O, S
// and dP never read their old contents.
TEST(AttentionGemms, GroupSumsWriteFirstThenAddInOrder) {
  for (AttnProduct p : {AttnProduct::kScores, AttnProduct::kValues, AttnProduct::kDV, AttnProduct::kDP,
                        AttnProduct::kDQ, AttnProduct::kDK}) {
    const auto gemms = cuda::attention_gemms(p, 1, 5, 2, 8, 2, 4);
    ASSERT_EQ(gemms.size(), 4u);  // group 4
    for (size_t r = 0; r < gemms.size(); ++r) {
      const bool sums = p == AttnProduct::kDV || p == AttnProduct::kDK;
      EXPECT_EQ(gemms[r].beta, sums && r > 0 ? 1.0f : 0.0f) << static_cast<int>(p) << " r " << r;
      EXPECT_EQ(gemms[r].batch, 2);
    }
  }
}

}  // namespace
}  // namespace megascale::engine
