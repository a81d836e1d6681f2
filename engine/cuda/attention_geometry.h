// engine/cuda/attention_geometry.h: where the attention kernels find their
// operands (the flash kernel of kernels_attention.cu and the tensor-core one of
// attention_tc_kernels.cuh), the causal / window mask's first key, and the
// shape check their launchers share. Host and device (under nvcc), and plain
// C++ elsewhere (the CPU emulator of the tensor-core kernels includes it).
//
// defines: kMaxAttentionHeadDim, AttentionGeometry, attention_geometry, first_visible_key,
// check_attention_shape.
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#if defined(__CUDACC__)
#define MEGASCALE_ATTENTION_HD __host__ __device__ __forceinline__
#else
#define MEGASCALE_ATTENTION_HD inline
#endif

namespace megascale::engine::cuda {

// The flash-style kernels keep per-lane (fp32 path) or per-warp (tensor-core
// path) register tiles of HD: HD <= 128 (GPT-2 / GPT-3 / Llama heads are 64 or 128).
inline constexpr int kMaxAttentionHeadDim = 128;

// qkv (T, B, (NH + 2 NKV) HD) per token [q heads | k heads | v heads]; out and
// dout (T, B, NH HD); per-row state (lse, D) (B, NH, T). Query head h reads
// KV head h / group.
struct AttentionGeometry {
  int T, B, NH, NKV, HD, group, width;  // width: floats per (t, b) row of qkv
  float scale;                           // 1 / sqrt(HD)
  MEGASCALE_ATTENTION_HD size_t qkv_row(int t, int b) const {
    return (static_cast<size_t>(t) * B + b) * static_cast<size_t>(width);
  }
  MEGASCALE_ATTENTION_HD size_t q_at(int t, int b, int h) const {
    return qkv_row(t, b) + static_cast<size_t>(h) * HD;
  }
  MEGASCALE_ATTENTION_HD size_t k_at(int t, int b, int g) const {
    return qkv_row(t, b) + static_cast<size_t>(NH + g) * HD;
  }
  MEGASCALE_ATTENTION_HD size_t v_at(int t, int b, int g) const {
    return qkv_row(t, b) + static_cast<size_t>(NH + NKV + g) * HD;
  }
  MEGASCALE_ATTENTION_HD size_t o_at(int t, int b, int h) const {
    return (static_cast<size_t>(t) * B + b) * static_cast<size_t>(NH) * HD + static_cast<size_t>(h) * HD;
  }
  MEGASCALE_ATTENTION_HD size_t row_at(int b, int h, int t) const {
    return (static_cast<size_t>(b) * NH + h) * T + t;
  }
};

inline AttentionGeometry attention_geometry(int T, int B, int NH, int NKV, int HD) {
  return AttentionGeometry{T, B, NH, NKV, HD, NH / NKV, (NH + 2 * NKV) * HD,
                           1.0f / std::sqrt(static_cast<float>(HD))};
}

// Key j is visible to query i iff first_visible_key(i, W) <= j <= i: a window
// W > 0 keeps the W keys before i, W = 0 is the full causal mask (engine/device.h).
MEGASCALE_ATTENTION_HD int first_visible_key(int i, int window) {
  return window > 0 && i - window > 0 ? i - window : 0;
}

// Throws std::runtime_error naming `path` and the shape unless T, B, NH,
// NKV >= 1, NH a multiple of NKV and 1 <= HD <= kMaxAttentionHeadDim.
inline void check_attention_shape(const char* path, int T, int B, int NH, int NKV, int HD) {
  if (T < 1 || B < 1 || NH < 1 || NKV < 1 || NH % NKV != 0 || HD < 1 || HD > kMaxAttentionHeadDim) {
    throw std::runtime_error(std::string("attention on CUDA (") + path + "): unsupported shape T " +
                             std::to_string(T) + ", B " + std::to_string(B) + ", NH " + std::to_string(NH) +
                             ", NKV " + std::to_string(NKV) + ", HD " + std::to_string(HD) + " (HD must be 1.." +
                             std::to_string(kMaxAttentionHeadDim) + ", NH a multiple of NKV)");
  }
}

}  // namespace megascale::engine::cuda
