// tests/engine_gpu/attention_test_util.h: what the attention GPU tests share
// (attention_cublas_gpu_test.cc, attention_flash_tc_gpu_test.cc): the cases,
// the bf16 tolerance check against the fp32 CPU result, and one forward +
// backward on CpuDevice or on a GPU device. CUDA-free: the CPU emulation of
// the tensor-core kernels (tests/engine/attention_tc_emulated_test.cc) uses it
// too.
//
// bf16 tolerance: against the fp32 CPU result, the normwise error
// ||got - want|| / ||want|| <= kBf16Normwise = 2e-2 and every element within
// 3e-2 * max |want|. Rationale: a bf16 input is off by <= 2^-9 relative
// (~1e-3 rms); the chain qkv -> S -> P (rounded) -> O and dO -> dP -> dS
// (rounded) -> dQ / dK rounds each operand once, so a few 1e-3 normwise is
// expected, while any wrong index, stride or transpose gives errors of order 1.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/device_cpu.h"
#include "tests/engine_gpu/gpu_test_util.h"

namespace megascale::engine::attention_test {

using gpu_test::Mirror;
using gpu_test::random_values;

inline constexpr double kBf16Normwise = 2e-2;
inline constexpr double kBf16MaxRelative = 3e-2;

struct Case {
  int T, B, NH, NKV, HD, window;
};

inline std::string describe(const Case& c) {
  return "T " + std::to_string(c.T) + " B " + std::to_string(c.B) + " NH " + std::to_string(c.NH) + " NKV " +
         std::to_string(c.NKV) + " HD " + std::to_string(c.HD) + " W " + std::to_string(c.window);
}

// MHA and GQA (group 2, 3, 4, 8), full causal (W 0, W >= T - 1) and windows,
// T = 1, primes and non-multiples of 8 / 32, HD odd and up to 128.
inline const std::vector<Case> kCases = {
    {1, 1, 1, 1, 8, 0},    {2, 1, 1, 1, 4, 0},     {17, 2, 4, 2, 16, 0},   {33, 1, 4, 1, 24, 5},
    {64, 2, 2, 2, 64, 0},  {70, 1, 8, 4, 128, 16}, {40, 3, 6, 3, 20, 39},  {129, 1, 2, 1, 32, 1},
    {100, 2, 4, 4, 1, 7},  {45, 1, 3, 3, 127, 0},  {257, 2, 8, 1, 64, 100}, {31, 2, 16, 2, 40, 0}};

// ||got - want|| / ||want|| and the worst |got - want| / max |want|.
inline ::testing::AssertionResult bf16_close(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  double err2 = 0, ref2 = 0, max_ref = 0, max_err = 0;
  size_t worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(e <= max_err)) {  // NaN lands here too
      max_err = std::isnan(e) ? INFINITY : e;
      worst = i;
    }
    err2 += e * e;
    ref2 += static_cast<double>(want[i]) * want[i];
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
  }
  const double normwise = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  const double elementwise = max_ref > 0 ? max_err / max_ref : max_err;
  if (normwise <= kBf16Normwise && elementwise <= kBf16MaxRelative) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "normwise error " << normwise << " (limit " << kBf16Normwise
                                       << "), worst element " << worst << ": want " << want[worst] << ", got "
                                       << got[worst] << " (" << elementwise << " of max |want| " << max_ref
                                       << ", limit " << kBf16MaxRelative << ")";
}

// Every masked probability (j > i, or j < i - W for a window) exactly 0.
inline ::testing::AssertionResult masked_are_zero(const std::vector<float>& probs, const Case& c) {
  const size_t T = static_cast<size_t>(c.T);
  for (size_t row = 0; row < probs.size() / T; ++row) {
    const int i = static_cast<int>(row % T);
    const int lo = c.window > 0 ? std::max(0, i - c.window) : 0;
    for (int j = 0; j < c.T; ++j) {
      if ((j < lo || j > i) && probs[row * T + j] != 0.0f) {
        return ::testing::AssertionFailure() << "row " << row << " (query " << i << ") key " << j << ": "
                                             << probs[row * T + j] << " where masked";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// The Q, K and V parts of a (T, B, (NH + 2 NKV) HD) gradient, each compared
// on its own (so that a small part is not hidden behind a large one).
inline std::vector<std::vector<float>> qkv_parts(const std::vector<float>& x, const Case& c) {
  const size_t width = size_t(c.NH + 2 * c.NKV) * c.HD, nq = size_t(c.NH) * c.HD, nk = size_t(c.NKV) * c.HD;
  std::vector<std::vector<float>> parts(3);
  for (size_t row = 0; row < x.size() / width; ++row) {
    const float* r = x.data() + row * width;
    parts[0].insert(parts[0].end(), r, r + nq);
    parts[1].insert(parts[1].end(), r + nq, r + nq + nk);
    parts[2].insert(parts[2].end(), r + nq + nk, r + width);
  }
  return parts;
}

struct Result {
  std::vector<float> out, probs, dqkv;
};
struct Inputs {
  std::vector<float> qkv, dout;
};
inline Inputs inputs(const Case& c, uint32_t seed) {
  const size_t n_qkv = size_t(c.T) * c.B * (c.NH + 2 * c.NKV) * c.HD, n_out = size_t(c.T) * c.B * c.NH * c.HD;
  return {random_values(n_qkv, seed), random_values(n_out, seed + 1)};
}
inline Result on_cpu(const Case& c, const Inputs& in) {
  CpuDevice cpu;
  Result r;
  r.out.resize(in.dout.size());
  r.probs.resize(size_t(c.B) * c.NH * c.T * c.T);
  r.dqkv.resize(in.qkv.size());
  cpu.attention_forward(r.out.data(), r.probs.data(), in.qkv.data(), c.T, c.B, c.NH, c.NKV, c.HD, c.window);
  cpu.attention_backward(r.dqkv.data(), in.dout.data(), in.qkv.data(), r.probs.data(), c.T, c.B, c.NH, c.NKV,
                          c.HD);
  return r;
}
// Runs forward and backward on `dev` (outputs pre-filled with NaN: both must
// overwrite everything), then a second backward that must give the same bits.
inline Result on_gpu(Device& dev, const Case& c, const Inputs& in) {
  const float nan = std::nanf("");
  Mirror qkv(dev, in.qkv), dout(dev, in.dout), out(dev, std::vector<float>(in.dout.size(), nan));
  Mirror probs(dev, std::vector<float>(size_t(c.B) * c.NH * c.T * c.T, nan));
  Mirror dqkv(dev, std::vector<float>(in.qkv.size(), nan)), again(dev, std::vector<float>(in.qkv.size(), nan));
  dev.attention_forward(out.f(), probs.f(), qkv.f(), c.T, c.B, c.NH, c.NKV, c.HD, c.window);
  dev.attention_backward(dqkv.f(), dout.f(), qkv.f(), probs.f(), c.T, c.B, c.NH, c.NKV, c.HD);
  dev.attention_backward(again.f(), dout.f(), qkv.f(), probs.f(), c.T, c.B, c.NH, c.NKV, c.HD);
  Result r{out.host(), probs.host(), dqkv.host()};
  EXPECT_EQ(r.dqkv, again.host()) << "the backward is not deterministic";
  return r;
}


}  // namespace megascale::engine::attention_test
