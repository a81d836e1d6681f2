// tests/engine_gpu/kernels_gpu_test.cc: every kernel of CudaDevice against
// CpuDevice, forward and backward, on random inputs and shapes that include
// odd sizes (1, primes, non-multiples of 32, 64 and 128). Tolerances:
// gpu_test_util.h. Without a GPU every test is skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <tuple>
#include <vector>

#include "engine/cuda/device_cuda.h"
#include "engine/device_cpu.h"
#include "tests/engine_gpu/gpu_test_util.h"

namespace megascale::engine {
namespace {

using gpu_test::close;
using gpu_test::Mirror;
using gpu_test::random_values;

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA();
    gpu_ = std::make_unique<CudaDevice>();
    CudaDeviceOptions bf16;
    bf16.precision = GemmPrecision::kBf16;
    gpu16_ = std::make_unique<CudaDevice>(bf16);
  }
  CpuDevice cpu_;
  std::unique_ptr<CudaDevice> gpu_, gpu16_;
};

// (M, N, K): ones, primes, odd and aligned sizes.
const std::vector<std::tuple<int, int, int>> kGemmShapes = {
    {1, 1, 1}, {1, 7, 3}, {37, 53, 29}, {64, 96, 128}, {127, 65, 33}, {257, 129, 65}, {16, 512, 384}};

TEST_F(CudaKernels, MatmulFp32AllTransposesAndBetas) {
  uint32_t seed = 1;
  for (auto [M, N, K] : kGemmShapes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (float beta : {0.0f, 1.0f, 0.5f}) {
          SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) + " ta " +
                       std::to_string(ta) + " tb " + std::to_string(tb) + " beta " + std::to_string(beta));
          const auto a = random_values(size_t(M) * K, seed++), b = random_values(size_t(K) * N, seed++);
          const auto c0 = random_values(size_t(M) * N, seed++);
          std::vector<float> c = c0;
          cpu_.matmul(c.data(), a.data(), b.data(), M, N, K, ta, tb, beta);
          Mirror ga(*gpu_, a), gb(*gpu_, b), gc(*gpu_, c0);
          gpu_->matmul(gc.f(), ga.f(), gb.f(), M, N, K, ta, tb, beta);
          EXPECT_TRUE(close(c, gc.host()));
        }
      }
    }
  }
}

TEST_F(CudaKernels, MatmulBf16IsTheProductOfRoundedInputs) {
  uint32_t seed = 100;
  for (auto [M, N, K] : kGemmShapes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        for (float beta : {0.0f, 1.0f}) {
          SCOPED_TRACE("M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K));
          const auto a = random_values(size_t(M) * K, seed++), b = random_values(size_t(K) * N, seed++);
          const auto c0 = random_values(size_t(M) * N, seed++);
          std::vector<float> rounded = c0, exact = c0;
          const auto a16 = gpu_test::round_bf16(a), b16 = gpu_test::round_bf16(b);
          cpu_.matmul(rounded.data(), a16.data(), b16.data(), M, N, K, ta, tb, beta);
          cpu_.matmul(exact.data(), a.data(), b.data(), M, N, K, ta, tb, beta);
          Mirror ga(*gpu16_, a), gb(*gpu16_, b), gc(*gpu16_, c0);
          gpu16_->matmul(gc.f(), ga.f(), gb.f(), M, N, K, ta, tb, beta);
          const auto got = gc.host();
          EXPECT_TRUE(close(rounded, got));
          // Against fp32: relative to the size of the terms (sqrt(K) for random signs).
          EXPECT_TRUE(close(exact, got, gpu_test::kBf16VsFp32Rtol, 2e-2 * std::sqrt(double(K))));
        }
      }
    }
  }
}

TEST_F(CudaKernels, MatmulBiasEpilogue) {
  uint32_t seed = 200;
  for (auto [M, N, K] : kGemmShapes) {
    for (CudaDevice* dev : {gpu_.get(), gpu16_.get()}) {
      const bool bf16 = dev == gpu16_.get();
      const auto a = random_values(size_t(M) * K, seed++), w = random_values(size_t(N) * K, seed++);
      const auto bias = random_values(size_t(N), seed++);
      const auto ar = bf16 ? gpu_test::round_bf16(a) : a, wr = bf16 ? gpu_test::round_bf16(w) : w;
      std::vector<float> c(size_t(M) * N);
      cpu_.matmul_bias(c.data(), ar.data(), wr.data(), bias.data(), M, N, K, false, true);
      Mirror ga(*dev, a), gw(*dev, w), gbias(*dev, bias), gc(*dev, std::vector<float>(size_t(M) * N, 7.0f));
      dev->matmul_bias(gc.f(), ga.f(), gw.f(), gbias.f(), M, N, K, false, true);
      EXPECT_TRUE(close(c, gc.host())) << (bf16 ? "bf16" : "fp32") << " M " << M << " N " << N << " K " << K;
    }
  }
}

TEST_F(CudaKernels, MatmulEmptyInnerDimension) {
  const auto c0 = random_values(12, 3);
  for (float beta : {0.0f, 0.5f}) {
    std::vector<float> c = c0;
    cpu_.matmul(c.data(), nullptr, nullptr, 3, 4, 0, false, false, beta);
    Mirror gc(*gpu_, c0);
    gpu_->matmul(gc.f(), nullptr, nullptr, 3, 4, 0, false, false, beta);
    EXPECT_TRUE(close(c, gc.host()));
  }
}

TEST_F(CudaKernels, AddBiasBiasBackwardResidual) {
  for (auto [N, C] : std::vector<std::pair<int, int>>{{1, 1}, {7, 13}, {129, 64}, {300, 257}}) {
    const auto a = random_values(size_t(N) * C, 1), b = random_values(size_t(N) * C, 2);
    const auto bias = random_values(C, 3), bias2 = random_values(C, 4);
    const auto db0 = random_values(C, 5);
    std::vector<float> out(a.size()), biased = a, db = db0, res(a.size()), res2(a.size());
    cpu_.add(out.data(), a.data(), b.data(), a.size());
    cpu_.bias_add(biased.data(), bias.data(), N, C);
    cpu_.bias_backward(db.data(), a.data(), N, C);
    cpu_.bias_residual_add(res.data(), a.data(), b.data(), bias.data(), nullptr, N, C);
    cpu_.bias_residual_add(res2.data(), a.data(), b.data(), bias.data(), bias2.data(), N, C);
    Mirror ga(*gpu_, a), gb(*gpu_, b), gbias(*gpu_, bias), gbias2(*gpu_, bias2), gdb(*gpu_, db0);
    Mirror gout(*gpu_, std::vector<float>(a.size())), gbiased(*gpu_, a);
    Mirror gres(*gpu_, std::vector<float>(a.size())), gres2(*gpu_, std::vector<float>(a.size()));
    gpu_->add(gout.f(), ga.f(), gb.f(), a.size());
    gpu_->bias_add(gbiased.f(), gbias.f(), N, C);
    gpu_->bias_backward(gdb.f(), ga.f(), N, C);
    gpu_->bias_residual_add(gres.f(), ga.f(), gb.f(), gbias.f(), nullptr, N, C);
    gpu_->bias_residual_add(gres2.f(), ga.f(), gb.f(), gbias.f(), gbias2.f(), N, C);
    EXPECT_TRUE(close(out, gout.host()));
    EXPECT_TRUE(close(biased, gbiased.host()));
    EXPECT_TRUE(close(db, gdb.host()));
    EXPECT_TRUE(close(res, gres.host()));
    EXPECT_TRUE(close(res2, gres2.host()));
    // In place (out aliases the residual), as the layers call it.
    Mirror inplace(*gpu_, a);
    gpu_->bias_residual_add(inplace.f(), inplace.f(), gb.f(), gbias.f(), nullptr, N, C);
    EXPECT_TRUE(close(res, inplace.host()));
  }
}

TEST_F(CudaKernels, LayerNormForwardBackward) {
  for (auto [N, C] : std::vector<std::pair<int, int>>{{1, 1}, {5, 31}, {64, 128}, {33, 1000}, {300, 96}}) {
    SCOPED_TRACE("N " + std::to_string(N) + " C " + std::to_string(C));
    const auto x = random_values(size_t(N) * C, 11, -2, 3), w = random_values(C, 12), b = random_values(C, 13);
    std::vector<float> y(x.size()), mean(N), rstd(N);
    cpu_.layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    Mirror gx(*gpu_, x), gw(*gpu_, w), gb(*gpu_, b), gy(*gpu_, std::vector<float>(x.size()));
    Mirror gmean(*gpu_, std::vector<float>(N)), grstd(*gpu_, std::vector<float>(N));
    gpu_->layer_norm_forward(gy.f(), gmean.f(), grstd.f(), gx.f(), gw.f(), gb.f(), N, C);
    EXPECT_TRUE(close(y, gy.host(), 1e-4, 1e-4));
    EXPECT_TRUE(close(mean, gmean.host(), 1e-4, 1e-5));
    EXPECT_TRUE(close(rstd, grstd.host(), 1e-4, 1e-5));
    // Backward accumulates (+=) into all three outputs.
    const auto dy = random_values(x.size(), 14), dx0 = random_values(x.size(), 15);
    const auto dw0 = random_values(C, 16), db0 = random_values(C, 17);
    std::vector<float> dx = dx0, dw = dw0, db = db0;
    cpu_.layer_norm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(),
                             rstd.data(), N, C);
    Mirror gdy(*gpu_, dy), gdx(*gpu_, dx0), gdw(*gpu_, dw0), gdb(*gpu_, db0);
    gpu_->layer_norm_backward(gdx.f(), gdw.f(), gdb.f(), gdy.f(), gx.f(), gw.f(), gmean.f(), grstd.f(), N, C);
    EXPECT_TRUE(close(dx, gdx.host(), 1e-4, 1e-4));
    EXPECT_TRUE(close(dw, gdw.host(), 1e-4, 1e-4));
    EXPECT_TRUE(close(db, gdb.host(), 1e-4, 1e-4));
  }
}

TEST_F(CudaKernels, GeluAndSwigluForwardBackward) {
  for (int N : {1, 3, 97}) {
    for (int F : {1, 17, 256}) {
      const size_t n = size_t(N) * F;
      const auto x = random_values(n, 21, -4, 4), dy = random_values(n, 22);
      std::vector<float> y(n), dx(n);
      cpu_.gelu_forward(y.data(), x.data(), n);
      cpu_.gelu_backward(dx.data(), x.data(), dy.data(), n);
      Mirror gx(*gpu_, x), gdy(*gpu_, dy), gy(*gpu_, std::vector<float>(n)), gdx(*gpu_, std::vector<float>(n));
      gpu_->gelu_forward(gy.f(), gx.f(), n);
      gpu_->gelu_backward(gdx.f(), gx.f(), gdy.f(), n);
      EXPECT_TRUE(close(y, gy.host()));
      EXPECT_TRUE(close(dx, gdx.host()));

      const auto in = random_values(2 * n, 23, -4, 4);
      std::vector<float> sy(n), sdx(2 * n);
      cpu_.swiglu_forward(sy.data(), in.data(), N, F);
      cpu_.swiglu_backward(sdx.data(), in.data(), dy.data(), N, F);
      Mirror gin(*gpu_, in), gsy(*gpu_, std::vector<float>(n)), gsdx(*gpu_, std::vector<float>(2 * n));
      gpu_->swiglu_forward(gsy.f(), gin.f(), N, F);
      gpu_->swiglu_backward(gsdx.f(), gin.f(), gdy.f(), N, F);
      EXPECT_TRUE(close(sy, gsy.host()));
      EXPECT_TRUE(close(sdx, gsdx.host()));
    }
  }
}

TEST_F(CudaKernels, SoftmaxForwardBackward) {
  for (auto [N, V] : std::vector<std::pair<int, int>>{{1, 1}, {3, 7}, {40, 1000}, {5, 50257}}) {
    const auto x = random_values(size_t(N) * V, 31, -8, 8), dy = random_values(size_t(N) * V, 32);
    std::vector<float> y(x.size()), dx(x.size());
    cpu_.softmax_forward(y.data(), x.data(), N, V);
    cpu_.softmax_backward(dx.data(), y.data(), dy.data(), N, V);
    Mirror gx(*gpu_, x), gdy(*gpu_, dy), gy(*gpu_, std::vector<float>(x.size()));
    Mirror gdx(*gpu_, std::vector<float>(x.size()));
    gpu_->softmax_forward(gy.f(), gx.f(), N, V);
    gpu_->softmax_backward(gdx.f(), gy.f(), gdy.f(), N, V);
    EXPECT_TRUE(close(y, gy.host(), 1e-4, 1e-7));
    EXPECT_TRUE(close(dx, gdx.host(), 1e-4, 1e-6));
  }
}

struct AttentionCase {
  int T, B, NH, NKV, HD, window;
};

TEST_F(CudaKernels, FlashAttentionMatchesCpuForwardAndBackward) {
  const std::vector<AttentionCase> cases = {
      {1, 1, 1, 1, 8, 0},    {2, 1, 1, 1, 4, 0},     {17, 2, 4, 2, 16, 0},  {33, 1, 4, 1, 24, 5},
      {64, 2, 2, 2, 64, 0},  {70, 1, 8, 4, 128, 16}, {40, 3, 6, 3, 20, 39}, {129, 1, 2, 1, 32, 1},
      {100, 2, 4, 4, 1, 7},  {45, 1, 3, 3, 127, 0}};
  uint32_t seed = 40;
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE("T " + std::to_string(c.T) + " B " + std::to_string(c.B) + " NH " + std::to_string(c.NH) +
                 " NKV " + std::to_string(c.NKV) + " HD " + std::to_string(c.HD) + " W " +
                 std::to_string(c.window));
    const size_t width = size_t(c.NH + 2 * c.NKV) * c.HD;
    const size_t n_qkv = size_t(c.T) * c.B * width, n_out = size_t(c.T) * c.B * c.NH * c.HD;
    const size_t n_probs = size_t(c.B) * c.NH * c.T * c.T;
    const auto qkv = random_values(n_qkv, seed++, -2, 2), dout = random_values(n_out, seed++);
    std::vector<float> out(n_out), probs(n_probs), dqkv(n_qkv);
    cpu_.attention_forward(out.data(), probs.data(), qkv.data(), c.T, c.B, c.NH, c.NKV, c.HD, c.window);
    cpu_.attention_backward(dqkv.data(), dout.data(), qkv.data(), probs.data(), c.T, c.B, c.NH, c.NKV, c.HD);
    Mirror gqkv(*gpu_, qkv), gdout(*gpu_, dout), gout(*gpu_, std::vector<float>(n_out));
    Mirror gprobs(*gpu_, std::vector<float>(n_probs)), gdqkv(*gpu_, std::vector<float>(n_qkv, 9.0f));
    gpu_->attention_forward(gout.f(), gprobs.f(), gqkv.f(), c.T, c.B, c.NH, c.NKV, c.HD, c.window);
    gpu_->attention_backward(gdqkv.f(), gdout.f(), gqkv.f(), gprobs.f(), c.T, c.B, c.NH, c.NKV, c.HD);
    EXPECT_TRUE(close(out, gout.host(), 1e-4, 1e-5));
    EXPECT_TRUE(close(dqkv, gdqkv.host(), 1e-3, 1e-5));  // two-level sums over T keys and the group
    // Deterministic: a second backward gives the same bits.
    Mirror again(*gpu_, std::vector<float>(n_qkv));
    gpu_->attention_backward(again.f(), gdout.f(), gqkv.f(), gprobs.f(), c.T, c.B, c.NH, c.NKV, c.HD);
    EXPECT_EQ(gdqkv.host(), again.host());
  }
}

TEST_F(CudaKernels, AttentionRefusesHeadDimAbove128) {
  Mirror q(*gpu_, std::vector<float>(3 * 256)), o(*gpu_, std::vector<float>(256)), p(*gpu_, std::vector<float>(1));
  EXPECT_THROW(gpu_->attention_forward(o.f(), p.f(), q.f(), 1, 1, 1, 1, 256, 0), std::runtime_error);
}

TEST_F(CudaKernels, VocabParallelCrossEntropy) {
  for (auto [N, V, vocab_start] : std::vector<std::tuple<int, int, int>>{{1, 1, 0}, {9, 37, 0}, {64, 1000, 500},
                                                                         {7, 50257, 0}, {33, 129, 129}}) {
    const auto logits = random_values(size_t(N) * V, 51, -6, 6), dl = random_values(N, 52, 0.1f, 1.0f);
    std::vector<int32_t> targets(N);
    for (int i = 0; i < N; ++i) targets[i] = (i * 7919) % (2 * V + vocab_start);  // some outside the slice
    std::vector<float> mx(N), se(N), tl(N), loss(N), dlogits(logits.size());
    cpu_.cross_entropy_row_max(mx.data(), logits.data(), N, V);
    cpu_.cross_entropy_partials(se.data(), tl.data(), logits.data(), mx.data(), targets.data(), vocab_start, N, V);
    cpu_.cross_entropy_loss(loss.data(), se.data(), tl.data(), N);
    cpu_.cross_entropy_backward(dlogits.data(), logits.data(), mx.data(), se.data(), targets.data(), dl.data(),
                                vocab_start, N, V);
    Mirror gl(*gpu_, logits), gt(*gpu_, targets), gdl(*gpu_, dl);
    Mirror gmx(*gpu_, std::vector<float>(N)), gse(*gpu_, std::vector<float>(N)), gtl(*gpu_, std::vector<float>(N));
    Mirror gloss(*gpu_, std::vector<float>(N)), gdlogits(*gpu_, std::vector<float>(logits.size()));
    gpu_->cross_entropy_row_max(gmx.f(), gl.f(), N, V);
    gpu_->cross_entropy_partials(gse.f(), gtl.f(), gl.f(), gmx.f(), gt.i(), vocab_start, N, V);
    gpu_->cross_entropy_loss(gloss.f(), gse.f(), gtl.f(), N);
    gpu_->cross_entropy_backward(gdlogits.f(), gl.f(), gmx.f(), gse.f(), gt.i(), gdl.f(), vocab_start, N, V);
    EXPECT_EQ(mx, gmx.host());  // a max is exact
    EXPECT_TRUE(close(se, gse.host()));
    EXPECT_EQ(tl, gtl.host());
    EXPECT_TRUE(close(loss, gloss.host(), 1e-5, 1e-5));
    EXPECT_TRUE(close(dlogits, gdlogits.host(), 1e-4, 1e-7));
  }
}

TEST_F(CudaKernels, EmbeddingsForwardBackward) {
  for (auto [N, V, C, vocab_start] : std::vector<std::tuple<int, int, int, int>>{
           {1, 1, 1, 0}, {17, 11, 13, 0}, {64, 50, 96, 50}, {300, 7, 33, 3}}) {
    std::vector<int32_t> tokens(N);
    for (int i = 0; i < N; ++i) tokens[i] = (i * 31 + 5) % (vocab_start + V + 4);  // repeats, some outside
    const auto wte = random_values(size_t(V) * C, 61), dout = random_values(size_t(N) * C, 62);
    const auto dwte0 = random_values(size_t(V) * C, 63);
    std::vector<float> out(size_t(N) * C), dwte = dwte0;
    cpu_.embedding_forward(out.data(), tokens.data(), wte.data(), vocab_start, N, V, C);
    cpu_.embedding_backward(dwte.data(), dout.data(), tokens.data(), vocab_start, N, V, C);
    Mirror gtok(*gpu_, tokens), gwte(*gpu_, wte), gdout(*gpu_, dout), gdwte(*gpu_, dwte0);
    Mirror gout(*gpu_, std::vector<float>(size_t(N) * C, 3.0f));
    gpu_->embedding_forward(gout.f(), gtok.i(), gwte.f(), vocab_start, N, V, C);
    gpu_->embedding_backward(gdwte.f(), gdout.f(), gtok.i(), vocab_start, N, V, C);
    EXPECT_EQ(out, gout.host());
    EXPECT_TRUE(close(dwte, gdwte.host(), 1e-5, 1e-5));  // atomics: order of the adds varies
  }
  for (auto [T, B, C, t0] : std::vector<std::tuple<int, int, int, int>>{{1, 1, 1, 0}, {9, 3, 17, 4}, {64, 2, 128, 0}}) {
    const auto wpe = random_values(size_t(t0 + T) * C, 64), x0 = random_values(size_t(T) * B * C, 65);
    const auto dwpe0 = random_values(wpe.size(), 66);
    std::vector<float> x = x0, dwpe = dwpe0;
    cpu_.position_embedding_forward(x.data(), wpe.data(), t0, T, B, C);
    cpu_.position_embedding_backward(dwpe.data(), x0.data(), t0, T, B, C);
    Mirror gwpe(*gpu_, wpe), gx(*gpu_, x0), gx0(*gpu_, x0), gdwpe(*gpu_, dwpe0);
    gpu_->position_embedding_forward(gx.f(), gwpe.f(), t0, T, B, C);
    gpu_->position_embedding_backward(gdwpe.f(), gx0.f(), t0, T, B, C);
    EXPECT_EQ(x, gx.host());
    EXPECT_TRUE(close(dwpe, gdwpe.host()));
  }
}

TEST_F(CudaKernels, MemoryIsZeroedAlignedAndCopies) {
  DeviceBuffer buf(*gpu_, 1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.get()) % 64, 0u);
  std::vector<float> host(250, 1.0f);
  gpu_->copy_to_host(host.data(), buf.get(), 1000);
  EXPECT_EQ(host, std::vector<float>(250, 0.0f));
  const auto v = random_values(250, 70);
  gpu_->copy_to_device(buf.get(), v.data(), 1000);
  DeviceBuffer other(*gpu_, 1000);
  gpu_->copy(other.get(), buf.get(), 1000);
  gpu_->copy_to_host(host.data(), other.get(), 1000);
  EXPECT_EQ(host, v);
  gpu_->fill_zero(other.get(), 1000);
  gpu_->copy_to_host(host.data(), other.get(), 1000);
  EXPECT_EQ(host, std::vector<float>(250, 0.0f));
  std::vector<float> back(250);
  gpu_->copy(back.data(), buf.get(), 1000);  // to a host buffer: synchronised
  EXPECT_EQ(back, v);
}

}  // namespace
}  // namespace megascale::engine
