// Tests of the CPU kernels (engine/device_cpu.h) against naive reference loops
// in double precision. Tolerances: the kernels are fp32 with float accumulation
// over at most a few hundred terms of O(1) values; the relative rounding error
// of such sums is below ~K * 2^-24 ~ 1e-5 for K = 128, so 1e-4 relative to the
// largest reference value (1e-5 for short elementwise formulas) is comfortable
// while any indexing mistake gives O(1) errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/device_cpu.h"
#include "engine/tensor.h"

namespace megascale::engine {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// max |a - b| / max(1e-30, max |b|).
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / std::max(scale, 1e-30);
}

class KernelsTest : public ::testing::Test {
 protected:
  CpuDevice dev;
};

TEST_F(KernelsTest, MatmulAllTransposesAndBeta) {
  const int M = 7, N = 13, K = 19;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (float beta : {0.0f, 1.0f, 0.5f}) {
        const auto a = randn(size_t(M) * K, 1 + ta);
        const auto b = randn(size_t(K) * N, 3 + tb);
        auto c = randn(size_t(M) * N, 5);
        std::vector<double> ref(size_t(M) * N);
        for (int i = 0; i < M; ++i) {
          for (int j = 0; j < N; ++j) {
            double s = beta * double(c[size_t(i) * N + j]);
            for (int k = 0; k < K; ++k) {
              const double av = ta ? a[size_t(k) * M + i] : a[size_t(i) * K + k];
              const double bv = tb ? b[size_t(j) * K + k] : b[size_t(k) * N + j];
              s += av * bv;
            }
            ref[size_t(i) * N + j] = s;
          }
        }
        if (beta == 0.0f) std::fill(c.begin(), c.end(), NAN);  // beta 0 ignores c
        dev.matmul(c.data(), a.data(), b.data(), M, N, K, ta, tb, beta);
        EXPECT_LT(rel_err(c, ref), 1e-5) << "ta=" << ta << " tb=" << tb << " beta=" << beta;
      }
    }
  }
}

TEST_F(KernelsTest, BiasAndAdd) {
  const int N = 5, OC = 6;
  auto out = randn(N * OC, 1);
  const auto bias = randn(OC, 2);
  auto ref_out = out;
  dev.bias_add(out.data(), bias.data(), N, OC);
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) EXPECT_EQ(out[i * OC + o], ref_out[i * OC + o] + bias[o]);
  std::vector<float> db(OC, 1.0f);
  dev.bias_backward(db.data(), out.data(), N, OC);
  for (int o = 0; o < OC; ++o) {
    double s = 1.0;
    for (int i = 0; i < N; ++i) s += out[i * OC + o];
    EXPECT_NEAR(db[o], s, 1e-5);
  }
  std::vector<float> sum(N * OC);
  dev.add(sum.data(), out.data(), ref_out.data(), sum.size());
  for (size_t i = 0; i < sum.size(); ++i) EXPECT_EQ(sum[i], out[i] + ref_out[i]);
}

TEST_F(KernelsTest, LayerNormForwardBackward) {
  const int N = 6, C = 32;
  const auto x = randn(N * C, 1, 2.0f);
  const auto w = randn(C, 2);
  const auto b = randn(C, 3);
  const auto dy = randn(N * C, 4);
  std::vector<float> y(N * C), mean(N), rstd(N);
  dev.layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<float> dx(N * C, 0.5f), dw(C, 0.25f), dbias(C, 0.0f);
  dev.layer_norm_backward(dx.data(), dw.data(), dbias.data(), dy.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  std::vector<double> ry(N * C), rdx(N * C), rdw(C, 0.25), rdb(C, 0.0);
  for (int i = 0; i < N; ++i) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x[i * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[i * C + c] - m) * (x[i * C + c] - m);
    v /= C;
    const double s = 1.0 / std::sqrt(v + 1e-5);
    EXPECT_NEAR(mean[i], m, 1e-6);
    EXPECT_NEAR(rstd[i], s, 1e-5 * s);
    // dx = s * (g - mean(g) - xhat * mean(g * xhat)), g = w * dy.
    double gm = 0, gxm = 0;
    for (int c = 0; c < C; ++c) {
      const double xh = (x[i * C + c] - m) * s;
      const double g = w[c] * dy[i * C + c];
      ry[i * C + c] = xh * w[c] + b[c];
      gm += g;
      gxm += g * xh;
      rdw[c] += xh * dy[i * C + c];
      rdb[c] += dy[i * C + c];
    }
    gm /= C;
    gxm /= C;
    for (int c = 0; c < C; ++c) {
      const double xh = (x[i * C + c] - m) * s;
      rdx[i * C + c] = 0.5 + s * (w[c] * dy[i * C + c] - gm - xh * gxm);
    }
  }
  EXPECT_LT(rel_err(y, ry), 1e-5);
  EXPECT_LT(rel_err(dx, rdx), 1e-5);
  EXPECT_LT(rel_err(dw, rdw), 1e-5);
  EXPECT_LT(rel_err(dbias, rdb), 1e-5);
}

TEST_F(KernelsTest, GeluTanhApproximation) {
  const auto x = randn(200, 1, 3.0f);
  const auto dy = randn(200, 2);
  std::vector<float> y(200), dx(200);
  dev.gelu_forward(y.data(), x.data(), x.size());
  dev.gelu_backward(dx.data(), x.data(), dy.data(), x.size());
  std::vector<double> ry(200), rdx(200);
  const double k = std::sqrt(2.0 / M_PI);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double t = std::tanh(k * (v + 0.044715 * v * v * v));
    ry[i] = 0.5 * v * (1 + t);
    rdx[i] = dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v));
  }
  EXPECT_LT(rel_err(y, ry), 1e-6);
  EXPECT_LT(rel_err(dx, rdx), 1e-5);
}

TEST_F(KernelsTest, SwiGlu) {
  const int N = 4, F = 9;
  const auto x = randn(N * 2 * F, 1, 2.0f);
  const auto dy = randn(N * F, 2);
  std::vector<float> y(N * F), dx(N * 2 * F);
  dev.swiglu_forward(y.data(), x.data(), N, F);
  dev.swiglu_backward(dx.data(), x.data(), dy.data(), N, F);
  std::vector<double> ry(N * F), rdx(N * 2 * F);
  for (int i = 0; i < N; ++i) {
    for (int f = 0; f < F; ++f) {
      const double g = x[i * 2 * F + f], u = x[i * 2 * F + F + f];
      const double sig = 1 / (1 + std::exp(-g));
      ry[i * F + f] = g * sig * u;
      rdx[i * 2 * F + f] = dy[i * F + f] * u * (sig + g * sig * (1 - sig));
      rdx[i * 2 * F + F + f] = dy[i * F + f] * g * sig;
    }
  }
  EXPECT_LT(rel_err(y, ry), 1e-6);
  EXPECT_LT(rel_err(dx, rdx), 1e-6);
}

TEST_F(KernelsTest, Softmax) {
  const int N = 5, V = 17;
  const auto x = randn(N * V, 1, 4.0f);
  const auto dy = randn(N * V, 2);
  std::vector<float> p(N * V), dx(N * V);
  dev.softmax_forward(p.data(), x.data(), N, V);
  dev.softmax_backward(dx.data(), p.data(), dy.data(), N, V);
  std::vector<double> rp(N * V), rdx(N * V);
  for (int i = 0; i < N; ++i) {
    double m = -1e300, s = 0, dot = 0;
    for (int j = 0; j < V; ++j) m = std::max(m, double(x[i * V + j]));
    for (int j = 0; j < V; ++j) s += std::exp(x[i * V + j] - m);
    for (int j = 0; j < V; ++j) rp[i * V + j] = std::exp(x[i * V + j] - m) / s;
    for (int j = 0; j < V; ++j) dot += rp[i * V + j] * dy[i * V + j];
    for (int j = 0; j < V; ++j) rdx[i * V + j] = rp[i * V + j] * (dy[i * V + j] - dot);
  }
  EXPECT_LT(rel_err(p, rp), 1e-5);
  EXPECT_LT(rel_err(dx, rdx), 1e-5);
}

// Brute force: for every (b, h, i) a masked softmax over all j in double, and
// the backward by the chain rule written out.
struct AttentionRef {
  std::vector<double> out, dqkv;
};

AttentionRef attention_reference(const std::vector<float>& qkv, const std::vector<float>& dout,
                                 int T, int B, int NH, int NKV, int HD, int W) {
  const int S = (NH + 2 * NKV) * HD;
  const double scale = 1.0 / std::sqrt(double(HD));
  AttentionRef r;
  r.out.assign(size_t(T) * B * NH * HD, 0.0);
  r.dqkv.assign(qkv.size(), 0.0);
  auto at = [&](int t, int b, int col) { return size_t(t * B + b) * S + col; };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const int kh = h / (NH / NKV);
      const int qc = h * HD, kc = (NH + kh) * HD, vc = (NH + NKV + kh) * HD;
      for (int i = 0; i < T; ++i) {
        std::vector<double> p(T, 0.0);
        std::vector<bool> vis(T);
        double m = -1e300;
        for (int j = 0; j < T; ++j) {
          vis[j] = j <= i && (W == 0 || j >= i - W);
          if (!vis[j]) continue;
          double s = 0;
          for (int d = 0; d < HD; ++d) s += double(qkv[at(i, b, qc + d)]) * qkv[at(j, b, kc + d)];
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        double z = 0;
        for (int j = 0; j < T; ++j) {
          if (vis[j]) z += (p[j] = std::exp(p[j] - m));
        }
        for (int j = 0; j < T; ++j) p[j] = vis[j] ? p[j] / z : 0.0;
        const size_t orow = size_t(i * B + b) * NH * HD + h * HD;
        for (int d = 0; d < HD; ++d) {
          double o = 0;
          for (int j = 0; j < T; ++j) o += p[j] * qkv[at(j, b, vc + d)];
          r.out[orow + d] = o;
        }
        // Backward of row i.
        std::vector<double> dp(T, 0.0);
        double dot = 0;
        for (int j = 0; j < T; ++j) {
          for (int d = 0; d < HD; ++d) {
            dp[j] += double(dout[orow + d]) * qkv[at(j, b, vc + d)];
            r.dqkv[at(j, b, vc + d)] += p[j] * dout[orow + d];
          }
          dot += p[j] * dp[j];
        }
        for (int j = 0; j < T; ++j) {
          const double ds = p[j] * (dp[j] - dot) * scale;
          for (int d = 0; d < HD; ++d) {
            r.dqkv[at(i, b, qc + d)] += ds * qkv[at(j, b, kc + d)];
            r.dqkv[at(j, b, kc + d)] += ds * qkv[at(i, b, qc + d)];
          }
        }
      }
    }
  }
  return r;
}

TEST_F(KernelsTest, AttentionMatchesBruteForceMaskedSoftmax) {
  const int T = 12, B = 2, HD = 4;
  struct Case { int NH, NKV, W; };
  for (const Case c : {Case{4, 4, 0}, Case{4, 4, 1}, Case{4, 4, 3}, Case{4, 2, 5}, Case{4, 1, 0},
                       Case{2, 2, T - 2}}) {
    const int S = (c.NH + 2 * c.NKV) * HD;
    const auto qkv = randn(size_t(T) * B * S, 7, 1.5f);
    const auto dout = randn(size_t(T) * B * c.NH * HD, 8);
    std::vector<float> out(dout.size()), probs(size_t(B) * c.NH * T * T), dqkv(qkv.size());
    dev.attention_forward(out.data(), probs.data(), qkv.data(), T, B, c.NH, c.NKV, HD, c.W);
    dev.attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), T, B, c.NH, c.NKV,
                           HD);
    const AttentionRef ref = attention_reference(qkv, dout, T, B, c.NH, c.NKV, HD, c.W);
    EXPECT_LT(rel_err(out, ref.out), 1e-5) << "NH " << c.NH << " NKV " << c.NKV << " W " << c.W;
    EXPECT_LT(rel_err(dqkv, ref.dqkv), 1e-5) << "NH " << c.NH << " NKV " << c.NKV << " W " << c.W;
    // Masked probabilities are exactly zero; visible rows sum to 1.
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < c.NH; ++h)
        for (int i = 0; i < T; ++i) {
          double s = 0;
          for (int j = 0; j < T; ++j) {
            const float p = probs[((size_t(b) * c.NH + h) * T + i) * T + j];
            const bool vis = j <= i && (c.W == 0 || j >= i - c.W);
            if (!vis) {
              EXPECT_EQ(p, 0.0f);
            }
            s += p;
          }
          EXPECT_NEAR(s, 1.0, 1e-6);
        }
  }
}

TEST_F(KernelsTest, WindowCoveringTheSequenceIsFullCausal) {
  const int T = 10, B = 2, NH = 2, NKV = 2, HD = 8;
  const int S = (NH + 2 * NKV) * HD;
  const auto qkv = randn(size_t(T) * B * S, 3);
  const auto dout = randn(size_t(T) * B * NH * HD, 4);
  std::vector<float> full(dout.size()), pf(size_t(B) * NH * T * T), dfull(qkv.size());
  dev.attention_forward(full.data(), pf.data(), qkv.data(), T, B, NH, NKV, HD, 0);
  dev.attention_backward(dfull.data(), dout.data(), qkv.data(), pf.data(), T, B, NH, NKV, HD);
  for (int W : {T - 1, T, 4 * T}) {
    std::vector<float> out(dout.size()), p(pf.size()), d(qkv.size());
    dev.attention_forward(out.data(), p.data(), qkv.data(), T, B, NH, NKV, HD, W);
    dev.attention_backward(d.data(), dout.data(), qkv.data(), p.data(), T, B, NH, NKV, HD);
    EXPECT_EQ(out, full) << "W " << W;  // bitwise
    EXPECT_EQ(d, dfull) << "W " << W;
  }
  // A window shorter than the sequence does change the result.
  std::vector<float> out(dout.size()), p(pf.size());
  dev.attention_forward(out.data(), p.data(), qkv.data(), T, B, NH, NKV, HD, T - 2);
  EXPECT_NE(out, full);
}

TEST_F(KernelsTest, CrossEntropyFullAndVocabSplit) {
  const int N = 6, V = 20;
  const auto logits = randn(N * V, 1, 3.0f);
  const auto dl = randn(N, 2);
  const std::vector<int32_t> targets = {0, 19, 7, 10, 9, 3};
  // Reference: log-softmax in double.
  std::vector<double> ref_loss(N), ref_dlogits(N * V);
  for (int i = 0; i < N; ++i) {
    double m = -1e300, s = 0;
    for (int j = 0; j < V; ++j) m = std::max(m, double(logits[i * V + j]));
    for (int j = 0; j < V; ++j) s += std::exp(logits[i * V + j] - m);
    ref_loss[i] = std::log(s) + m - logits[i * V + targets[i]];
    for (int j = 0; j < V; ++j) {
      ref_dlogits[i * V + j] =
          (std::exp(logits[i * V + j] - m) / s - (j == targets[i] ? 1.0 : 0.0)) * dl[i];
    }
  }
  // Whole vocabulary on one rank.
  std::vector<float> mx(N), se(N), tl(N), loss(N), dlog(N * V);
  dev.cross_entropy_row_max(mx.data(), logits.data(), N, V);
  dev.cross_entropy_partials(se.data(), tl.data(), logits.data(), mx.data(), targets.data(), 0, N, V);
  dev.cross_entropy_loss(loss.data(), se.data(), tl.data(), N);
  dev.cross_entropy_backward(dlog.data(), logits.data(), mx.data(), se.data(), targets.data(),
                             dl.data(), 0, N, V);
  EXPECT_LT(rel_err(loss, ref_loss), 1e-6);
  EXPECT_LT(rel_err(dlog, ref_dlogits), 1e-6);

  // Two vocabulary halves, combined as vocab_parallel_cross_entropy does.
  const int Vh = V / 2;
  std::vector<float> halves[2], mxh[2], seh[2], tlh[2];
  for (int r = 0; r < 2; ++r) {
    halves[r].resize(N * Vh);
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < Vh; ++j) halves[r][i * Vh + j] = logits[i * V + r * Vh + j];
    mxh[r].resize(N);
    dev.cross_entropy_row_max(mxh[r].data(), halves[r].data(), N, Vh);
  }
  std::vector<float> gmax(N);
  for (int i = 0; i < N; ++i) gmax[i] = std::max(mxh[0][i], mxh[1][i]);
  EXPECT_EQ(gmax, mx);
  std::vector<float> sum_se(N, 0.0f), sum_tl(N, 0.0f);
  for (int r = 0; r < 2; ++r) {
    seh[r].resize(N);
    tlh[r].resize(N);
    dev.cross_entropy_partials(seh[r].data(), tlh[r].data(), halves[r].data(), gmax.data(),
                               targets.data(), r * Vh, N, Vh);
    for (int i = 0; i < N; ++i) {
      sum_se[i] += seh[r][i];
      sum_tl[i] += tlh[r][i];
    }
  }
  std::vector<float> loss2(N);
  dev.cross_entropy_loss(loss2.data(), sum_se.data(), sum_tl.data(), N);
  EXPECT_LT(rel_err(loss2, ref_loss), 1e-6);
  for (int r = 0; r < 2; ++r) {
    std::vector<float> d(N * Vh);
    dev.cross_entropy_backward(d.data(), halves[r].data(), gmax.data(), sum_se.data(),
                               targets.data(), dl.data(), r * Vh, N, Vh);
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < Vh; ++j)
        EXPECT_NEAR(d[i * Vh + j], ref_dlogits[i * V + r * Vh + j], 1e-6);
  }
}

TEST_F(KernelsTest, EmbeddingLookupScatterAndPositions) {
  const int V = 10, C = 3, T = 4, B = 2, N = T * B;
  const auto wte = randn(V * C, 1);
  const auto wpe = randn(T * C, 2);
  const std::vector<int32_t> tokens = {0, 9, 4, 5, 5, 1, 7, 2};  // (T, B)
  // Slice [5, 10) of the vocabulary.
  const int start = 5, Vl = 5;
  std::vector<float> out(N * C, 99.0f);
  dev.embedding_forward(out.data(), tokens.data(), wte.data() + start * C, start, N, Vl, C);
  for (int i = 0; i < N; ++i)
    for (int c = 0; c < C; ++c) {
      const bool mine = tokens[i] >= start;
      EXPECT_EQ(out[i * C + c], mine ? wte[tokens[i] * C + c] : 0.0f);
    }
  const auto dout = randn(N * C, 3);
  std::vector<float> dw(Vl * C, 0.0f);
  dev.embedding_backward(dw.data(), dout.data(), tokens.data(), start, N, Vl, C);
  for (int v = 0; v < Vl; ++v)
    for (int c = 0; c < C; ++c) {
      double s = 0;
      for (int i = 0; i < N; ++i)
        if (tokens[i] == start + v) s += dout[i * C + c];
      EXPECT_NEAR(dw[v * C + c], s, 1e-6);
    }
  // Positions of rows t = 2, 3 (a sequence shard starting at t0 = 2).
  std::vector<float> x(2 * B * C, 0.0f);
  dev.position_embedding_forward(x.data(), wpe.data(), 2, 2, B, C);
  for (int t = 0; t < 2; ++t)
    for (int b = 0; b < B; ++b)
      for (int c = 0; c < C; ++c) EXPECT_EQ(x[(t * B + b) * C + c], wpe[(2 + t) * C + c]);
  std::vector<float> dwpe(T * C, 0.0f);
  dev.position_embedding_backward(dwpe.data(), dout.data(), 2, 2, B, C);
  for (int c = 0; c < C; ++c) {
    EXPECT_EQ(dwpe[0 * C + c], 0.0f);
    EXPECT_NEAR(dwpe[2 * C + c], dout[(0 * B + 0) * C + c] + dout[(0 * B + 1) * C + c], 1e-6);
    EXPECT_NEAR(dwpe[3 * C + c], dout[(1 * B + 0) * C + c] + dout[(1 * B + 1) * C + c], 1e-6);
  }
}

TEST_F(KernelsTest, DeterministicAcrossCalls) {
  const int M = 64, N = 48, K = 96;
  const auto a = randn(M * K, 1), b = randn(K * N, 2);
  std::vector<float> c1(M * N), c2(M * N);
  dev.matmul(c1.data(), a.data(), b.data(), M, N, K, false, true, 0.0f);
  dev.matmul(c2.data(), a.data(), b.data(), M, N, K, false, true, 0.0f);
  EXPECT_EQ(c1, c2);
}

TEST_F(KernelsTest, AllocationIsZeroedAndAligned) {
  void* p = dev.allocate(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(bytes[i], 0);
  dev.deallocate(p);
}

}  // namespace
}  // namespace megascale::engine
