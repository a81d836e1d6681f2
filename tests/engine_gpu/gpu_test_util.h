// tests/engine_gpu/gpu_test_util.h: what the GPU tests share — the skip when
// no GPU is usable, random inputs, host <-> device round trips, and the
// tolerance check every comparison with CpuDevice goes through.
//
// Tolerances (stated once, used by every test):
//  - kFp32: rtol 1e-4, atol 1e-5 per element. Both devices compute in fp32;
//    they differ by summation order (cuBLASLt's split-K and tiles vs Eigen's,
//    warp tree reductions vs left-to-right loops) and nvcc's fused
//    multiply-adds: a few ulps per add, ~sqrt(K) * 6e-8 relative for a K-term
//    dot product, far below 1e-4 at the K <= 512 used here.
//  - bf16 GEMMs are compared exactly like fp32 ones against the CPU product of
//    the bf16-rounded inputs (the rounding is the only intended difference),
//    and against the fp32 product with rtol 2e-2: an input rounded to bf16 is
//    off by up to 2^-9 relative (8-bit significand, round to nearest).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/device_factory.h"

#ifndef REQUIRE_CUDA
// Skips the test, visibly (ctest reports it as "Skipped"), without a usable GPU.
#define REQUIRE_CUDA()                                                              \
  do {                                                                              \
    const std::string megascale_no_cuda_ = ::megascale::engine::cuda_unavailable_reason(); \
    if (!megascale_no_cuda_.empty()) GTEST_SKIP() << "no CUDA device: " << megascale_no_cuda_; \
  } while (0)
#endif

namespace megascale::engine::gpu_test {

constexpr double kFp32Rtol = 1e-4;
constexpr double kFp32Atol = 1e-5;
constexpr double kBf16VsFp32Rtol = 2e-2;

inline std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Round to bf16 (nearest even) and back, as __float2bfloat16_rn does.
inline float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf / nan unchanged
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  u &= 0xffff0000u;
  float y;
  std::memcpy(&y, &u, sizeof y);
  return y;
}
inline std::vector<float> round_bf16(std::vector<float> v) {
  for (float& x : v) x = round_bf16(x);
  return v;
}

// A host vector mirrored on a device.
class Mirror {
 public:
  Mirror(Device& device, const std::vector<float>& values)
      : device_(&device), buffer_(device, values.size() * sizeof(float)), n_(values.size()) {
    if (n_ > 0) device.copy_to_device(buffer_.get(), values.data(), n_ * sizeof(float));
  }
  Mirror(Device& device, const std::vector<int32_t>& values)
      : device_(&device), buffer_(device, values.size() * sizeof(int32_t)), n_(values.size()) {
    if (n_ > 0) device.copy_to_device(buffer_.get(), values.data(), n_ * sizeof(int32_t));
  }
  float* f() const { return buffer_.floats(); }
  int32_t* i() const { return buffer_.ints(); }
  std::vector<float> host() const {
    std::vector<float> out(n_);
    if (n_ > 0) device_->copy_to_host(out.data(), buffer_.get(), n_ * sizeof(float));
    return out;
  }

 private:
  Device* device_;
  DeviceBuffer buffer_;
  size_t n_;
};

// Every element within atol + rtol * |want|; names the first offender.
inline ::testing::AssertionResult close(const std::vector<float>& want, const std::vector<float>& got,
                                        double rtol = kFp32Rtol, double atol = kFp32Atol) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << want.size() << " vs " << got.size();
  }
  double worst = 0;
  size_t worst_at = 0, bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(want[i]) - got[i]);
    const double allowed = atol + rtol * std::fabs(static_cast<double>(want[i]));
    if (!(err <= allowed)) {
      if (bad == 0 || err / allowed > worst) {
        worst = err / allowed;
        worst_at = i;
      }
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << want.size() << " elements off; worst at " << worst_at
                                       << ": want " << want[worst_at] << ", got " << got[worst_at] << " (rtol "
                                       << rtol << ", atol " << atol << ")";
}

}  // namespace megascale::engine::gpu_test
