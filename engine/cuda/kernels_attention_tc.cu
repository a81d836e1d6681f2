// engine/cuda/kernels_attention_tc.cu: causal / sliding-window attention with
// GQA, flash style on tensor cores (CudaDevice's AttentionPath::kFlashTc):
// FlashAttention-2's tiling (Dao 2023, arXiv 2307.08691: queries split over
// the warps of a block, an online softmax kept in registers, scores never
// written to memory) with bf16 operands and fp32 accumulation.
//
// Every product is PTX's mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// (sm_80 and later). Its fragment layouts are the PTX ISA's ("Matrix fragments
// for mma.m16n8k16 with floating point type"): with g = lane / 4 and
// t = lane % 4,
//   A (16 x 16, row):  a[0] = (row g,   k 2t, 2t+1), a[1] = (row g+8, k 2t, 2t+1),
//                      a[2] = (row g,   k 2t+8, 2t+9), a[3] = (row g+8, k 2t+8, 2t+9)
//   B (16 x 8, col):   b[0] = (k 2t, 2t+1, col g),   b[1] = (k 2t+8, 2t+9, col g)
//   C, D (16 x 8 f32): c[0], c[1] = (row g, col 2t, 2t+1), c[2], c[3] = (row g+8, ...)
// each a[] / b[] register holding two bf16, the lower k in the low half. Two
// neighbouring C tiles (columns n0..n0+15) therefore are, rounded to bf16,
// exactly the A fragment of the next product (P V, dS K, P^T dO, dS^T Q): the
// probabilities go from one product to the next without leaving registers.
// B operands are read from shared tiles stored [n][k] (n rows of k), so each
// b[] register is one 32-bit load; the tiles a product reads as (k, n) are
// stored transposed when they are loaded. Rows are padded by 8 bf16 (16 bytes)
// so that the 32 lanes' loads hit 32 different banks.
//
// Inputs are the engine's fp32 activations, rounded to bf16 as they are loaded
// into shared memory (the cuBLAS path rounds its GEMM inputs the same way);
// softmax, log-sum-exp, D and every accumulation are fp32.
//
// Saved state (the Device's `probs`, B * NH * T * T floats): the log-sum-exp of
// each query row (B, NH, T), the window (one float, when T > 1, as
// kernels_attention.cu), and, where the buffer has room (T * T >= T + 4 + T * HD
// per head, i.e. every T > HD + 4), a copy of the output O (T, B, NH * HD) from
// which the backward takes D_i = dO_i . O_i (FlashAttention-2, algorithm 2,
// line 4 -- the Device interface does not hand the backward the output).
// Without room the backward recomputes O with the forward kernel first.
//
// Backward: three kernels, no atomics, so it is deterministic: D per row; dQ per
// query block over its key tiles; dK, dV per key block over the group's query
// heads and their query tiles (FlashAttention-2, algorithm 2, with the dQ
// accumulation moved into its own pass as kernels_attention.cu does).
//
// Masks: key j is visible to query i iff lo(i) <= j <= i, lo(i) = max(0, i - W)
// for a window W > 0 and 0 otherwise (engine/device.h). Whole tiles a warp
// cannot see are skipped, so the causal mask halves the work.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "engine/cuda/common.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace megascale::engine::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;                 // warps per block
constexpr int kThreads = kWarps * kWarp;  // 128
constexpr int kRowsPerWarp = 16;          // the m of m16n8k16
constexpr int kBlockRows = kWarps * kRowsPerWarp;  // 64 queries (forward, dQ) or keys (dK dV) per block
constexpr int kKeyTile = 64;              // keys per shared tile (forward, dQ)
constexpr int kQueryTile = 32;            // queries per shared tile (dK dV)
constexpr int kPad = 8;                   // bf16 of padding per shared row (16 bytes)

struct Geometry {
  int T, B, NH, NKV, HD, group, width;  // width: floats per (t, b) row of qkv
  float scale;
  __device__ size_t qkv_row(int t, int b) const {
    return (static_cast<size_t>(t) * B + b) * static_cast<size_t>(width);
  }
  __device__ size_t q_at(int t, int b, int h) const { return qkv_row(t, b) + static_cast<size_t>(h) * HD; }
  __device__ size_t k_at(int t, int b, int g) const { return qkv_row(t, b) + static_cast<size_t>(NH + g) * HD; }
  __device__ size_t v_at(int t, int b, int g) const {
    return qkv_row(t, b) + static_cast<size_t>(NH + NKV + g) * HD;
  }
  __device__ size_t o_at(int t, int b, int h) const {
    return (static_cast<size_t>(t) * B + b) * static_cast<size_t>(NH) * HD + static_cast<size_t>(h) * HD;
  }
  __device__ size_t row_at(int b, int h, int t) const {  // (B, NH, T) arrays: lse, D
    return (static_cast<size_t>(b) * NH + h) * T + t;
  }
};

__device__ __forceinline__ int first_key(int i, int window) { return window > 0 ? max(0, i - window) : 0; }
__device__ __forceinline__ bool visible(int i, int j, int T, int window) {
  return i < T && j <= i && j >= first_key(i, window);  // j <= i < T implies j < T
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t ld32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// d += a b on one 16 x 8 tile.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // the host refuses to launch below sm_80 (check_arch)
#endif
}

// A fragment of rows [r0, r0 + 16), k columns [k0, k0 + 16) of a row-major
// shared tile with `ld` bf16 per row.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* x, int ld, int r0, int k0) {
  const int g = (threadIdx.x % kWarp) / 4, t = threadIdx.x % 4;
  a[0] = ld32(x + (r0 + g) * ld + k0 + 2 * t);
  a[1] = ld32(x + (r0 + g + 8) * ld + k0 + 2 * t);
  a[2] = ld32(x + (r0 + g) * ld + k0 + 8 + 2 * t);
  a[3] = ld32(x + (r0 + g + 8) * ld + k0 + 8 + 2 * t);
}
// B fragment (k0..k0+15, n0..n0+7) of a tile stored [n][k] with `ld` bf16 per row.
__device__ __forceinline__ void load_b(uint32_t& b0, uint32_t& b1, const bf16* y, int ld, int n0, int k0) {
  const int g = (threadIdx.x % kWarp) / 4, t = threadIdx.x % 4;
  b0 = ld32(y + (n0 + g) * ld + k0 + 2 * t);
  b1 = ld32(y + (n0 + g) * ld + k0 + 8 + 2 * t);
}
// The A fragment (k columns 16 kk .. 16 kk + 15) made of accumulator tiles 2 kk and 2 kk + 1.
template <int kTiles>
__device__ __forceinline__ void a_from_acc(uint32_t (&a)[4], const float (&c)[kTiles][4], int kk) {
  a[0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// Rows [t0, t0 + rows) of a per-token vector (src at offset(t)) into a shared
// tile, rounded to bf16: row-major (rows, kHDP + kPad) when kTransposed is
// false, else (kHDP, rows + kPad). Rows past T and dims past HD are zero.
template <int kHDP, bool kTransposed, typename Offset>
__device__ void load_tile(bf16* tile, const float* src, int t0, int rows, int T, int HD, Offset offset) {
  for (int idx = threadIdx.x; idx < rows * kHDP; idx += blockDim.x) {
    const int r = idx / kHDP, d = idx % kHDP;
    const int t = t0 + r;
    const float v = (t < T && d < HD) ? src[offset(t) + d] : 0.0f;
    if (kTransposed) {
      tile[d * (rows + kPad) + r] = __float2bfloat16_rn(v);
    } else {
      tile[r * (kHDP + kPad) + d] = __float2bfloat16_rn(v);
    }
  }
}

// ---- forward ------------------------------------------------------------------------

// out (T, B, NH * HD); saved: lse (B, NH, T), then the window; o_copy (or
// nullptr): a second copy of out. window_from (or nullptr): read the window
// from there (the backward's recomputation) instead of `window`.
template <int kHDP>
__global__ void __launch_bounds__(kThreads) tc_forward_kernel(float* out, float* saved, float* o_copy,
                                                              const float* qkv, Geometry g, int window,
                                                              const float* window_from) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kLd = kHDP + kPad, kLdT = kKeyTile + kPad;
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // (64, kLd)
  bf16* k_s = q_s + kBlockRows * kLd;            // (kKeyTile, kLd)
  bf16* vt_s = k_s + kKeyTile * kLd;             // (kHDP, kLdT): V transposed
  if (window_from != nullptr) window = g.T > 1 ? __float2int_rn(*window_from) : 0;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gq = lane / 4, tq = lane % 4;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH, kvh = h / g.group;
  const int i0 = blockIdx.x * kBlockRows;
  const int w0 = i0 + warp * kRowsPerWarp;  // this warp's first query
  const int rows[2] = {w0 + gq, w0 + gq + 8};
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && g.T > 1 && saved != nullptr) {
    saved[static_cast<size_t>(g.B) * g.NH * g.T] = static_cast<float>(window);
  }
  load_tile<kHDP, false>(q_s, qkv, i0, kBlockRows, g.T, g.HD, [&](int t) { return g.q_at(t, b, h); });

  float o[kHDP / 8][4];
#pragma unroll
  for (int n = 0; n < kHDP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's part of the row sum

  const int j_begin = first_key(i0, window);
  const int j_end = min(g.T - 1, i0 + kBlockRows - 1);  // last key any row of the block sees
  const int w_last = min(g.T - 1, w0 + kRowsPerWarp - 1);
  for (int j0 = j_begin; j0 <= j_end; j0 += kKeyTile) {
    __syncthreads();
    load_tile<kHDP, false>(k_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.k_at(t, b, kvh); });
    load_tile<kHDP, true>(vt_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.v_at(t, b, kvh); });
    __syncthreads();
    // Warp-uniform skip: no query of this warp sees a key of the tile.
    if (w0 >= g.T || j0 > w_last || j0 + kKeyTile - 1 < first_key(w0, window)) continue;

    float s[kKeyTile / 8][4];
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kHDP / 16; ++kk) {
      uint32_t a[4];
      load_a(a, q_s, kLd, warp * kRowsPerWarp, kk * 16);
#pragma unroll
      for (int n = 0; n < kKeyTile / 8; ++n) {
        uint32_t b0, b1;
        load_b(b0, b1, k_s, kLd, n * 8, kk * 16);
        mma(s[n], a, b0, b1);
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = rows[e / 2], j = j0 + n * 8 + 2 * tq + (e & 1);
        s[n][e] = visible(i, j, g.T, window) ? s[n][e] * g.scale : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[n][e]);
      }
    }
    float corr[2], m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // the four lanes of a row: xor 1, 2
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], 2));
      const float m_new = fmaxf(m[r], tile_max[r]);
      m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet: p = 0, no NaN
      corr[r] = __expf(m[r] - m_use[r]);             // 0 while m = -inf
      m[r] = m_new;
      l[r] *= corr[r];
    }
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = __expf(s[n][e] - m_use[e / 2]);  // exp(-inf) = 0 where masked
        l[e / 2] += s[n][e];
      }
    }
#pragma unroll
    for (int n = 0; n < kHDP / 8; ++n) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }
#pragma unroll
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      uint32_t a[4];
      a_from_acc(a, s, kk);
#pragma unroll
      for (int n = 0; n < kHDP / 8; ++n) {
        uint32_t b0, b1;
        load_b(b0, b1, vt_s, kLdT, n * 8, kk * 16);
        mma(o[n], a, b0, b1);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = rows[r];
    if (i >= g.T) continue;  // every row i < T sees key i: l > 0
    const float inv = 1.0f / l[r];
#pragma unroll
    for (int n = 0; n < kHDP / 8; ++n) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int d = n * 8 + 2 * tq + c;
        if (d >= g.HD) continue;
        const float v = o[n][2 * r + c] * inv;
        out[g.o_at(i, b, h) + d] = v;
        if (o_copy != nullptr) o_copy[g.o_at(i, b, h) + d] = v;
      }
    }
    if (tq == 0 && saved != nullptr) saved[g.row_at(b, h, i)] = m[r] + logf(l[r]);
  }
}

// ---- backward: D_i = dO_i . O_i, one warp per (b, h, i) -------------------------------

__global__ void tc_backward_d_kernel(float* D, const float* dout, const float* o, Geometry g) {
  const size_t rows = static_cast<size_t>(g.B) * g.NH * g.T;
  const int lane = threadIdx.x % kWarp;
  for (size_t row = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; row < rows;
       row += static_cast<size_t>(gridDim.x) * blockDim.x / kWarp) {
    const int t = static_cast<int>(row % g.T);
    const int h = static_cast<int>((row / g.T) % g.NH), b = static_cast<int>(row / (static_cast<size_t>(g.T) * g.NH));
    const size_t at = g.o_at(t, b, h);
    float sum = 0.0f;
    for (int d = lane; d < g.HD; d += kWarp) sum += dout[at + d] * o[at + d];
    sum = warp_sum(sum);
    if (lane == 0) D[row] = sum;
  }
}

// ---- backward: dQ, per query block over its key tiles ----------------------------------

template <int kHDP>
__global__ void __launch_bounds__(kThreads) tc_backward_dq_kernel(float* dqkv, const float* dout, const float* qkv,
                                                                  const float* lse, const float* D, Geometry g) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kLd = kHDP + kPad, kLdT = kKeyTile + kPad;
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // (64, kLd)
  bf16* do_s = q_s + kBlockRows * kLd;           // (64, kLd)
  bf16* k_s = do_s + kBlockRows * kLd;           // (kKeyTile, kLd)
  bf16* v_s = k_s + kKeyTile * kLd;              // (kKeyTile, kLd)
  bf16* kt_s = v_s + kKeyTile * kLd;             // (kHDP, kLdT): K transposed
  const int window = g.T > 1 ? __float2int_rn(lse[static_cast<size_t>(g.B) * g.NH * g.T]) : 0;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gq = lane / 4, tq = lane % 4;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH, kvh = h / g.group;
  const int i0 = blockIdx.x * kBlockRows;
  const int w0 = i0 + warp * kRowsPerWarp;
  const int rows[2] = {w0 + gq, w0 + gq + 8};
  float row_lse[2], row_D[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_lse[r] = rows[r] < g.T ? lse[g.row_at(b, h, rows[r])] : 0.0f;
    row_D[r] = rows[r] < g.T ? D[g.row_at(b, h, rows[r])] : 0.0f;
  }
  load_tile<kHDP, false>(q_s, qkv, i0, kBlockRows, g.T, g.HD, [&](int t) { return g.q_at(t, b, h); });
  load_tile<kHDP, false>(do_s, dout, i0, kBlockRows, g.T, g.HD, [&](int t) { return g.o_at(t, b, h); });

  float dq[kHDP / 8][4];
#pragma unroll
  for (int n = 0; n < kHDP / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  const int j_begin = first_key(i0, window);
  const int j_end = min(g.T - 1, i0 + kBlockRows - 1);
  const int w_last = min(g.T - 1, w0 + kRowsPerWarp - 1);
  for (int j0 = j_begin; j0 <= j_end; j0 += kKeyTile) {
    __syncthreads();
    load_tile<kHDP, false>(k_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.k_at(t, b, kvh); });
    load_tile<kHDP, false>(v_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.v_at(t, b, kvh); });
    load_tile<kHDP, true>(kt_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.k_at(t, b, kvh); });
    __syncthreads();
    if (w0 >= g.T || j0 > w_last || j0 + kKeyTile - 1 < first_key(w0, window)) continue;

    float s[kKeyTile / 8][4], dp[kKeyTile / 8][4];
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kHDP / 16; ++kk) {
      uint32_t aq[4], ado[4];
      load_a(aq, q_s, kLd, warp * kRowsPerWarp, kk * 16);
      load_a(ado, do_s, kLd, warp * kRowsPerWarp, kk * 16);
#pragma unroll
      for (int n = 0; n < kKeyTile / 8; ++n) {
        uint32_t b0, b1;
        load_b(b0, b1, k_s, kLd, n * 8, kk * 16);  // S = Q K^T
        mma(s[n], aq, b0, b1);
        load_b(b0, b1, v_s, kLd, n * 8, kk * 16);  // dP = dO V^T
        mma(dp[n], ado, b0, b1);
      }
    }
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, i = rows[r], j = j0 + n * 8 + 2 * tq + (e & 1);
        const float p = visible(i, j, g.T, window) ? __expf(s[n][e] * g.scale - row_lse[r]) : 0.0f;
        s[n][e] = p * (dp[n][e] - row_D[r]);  // dS
      }
    }
#pragma unroll
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      uint32_t a[4];
      a_from_acc(a, s, kk);
#pragma unroll
      for (int n = 0; n < kHDP / 8; ++n) {
        uint32_t b0, b1;
        load_b(b0, b1, kt_s, kLdT, n * 8, kk * 16);  // dQ += dS K
        mma(dq[n], a, b0, b1);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = rows[r];
    if (i >= g.T) continue;
#pragma unroll
    for (int n = 0; n < kHDP / 8; ++n) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int d = n * 8 + 2 * tq + c;
        if (d < g.HD) dqkv[g.q_at(i, b, h) + d] = dq[n][2 * r + c] * g.scale;
      }
    }
  }
}

// ---- backward: dK, dV, per key block of a KV head over the group's query heads --------

template <int kHDP>
__global__ void __launch_bounds__(kThreads) tc_backward_dkv_kernel(float* dqkv, const float* dout, const float* qkv,
                                                                   const float* lse, const float* D, Geometry g) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int kLd = kHDP + kPad, kLdT = kQueryTile + kPad;
  bf16* k_s = reinterpret_cast<bf16*>(smem_raw);  // (64, kLd) this block's keys
  bf16* v_s = k_s + kBlockRows * kLd;            // (64, kLd)
  bf16* q_s = v_s + kBlockRows * kLd;            // (kQueryTile, kLd)
  bf16* do_s = q_s + kQueryTile * kLd;           // (kQueryTile, kLd)
  bf16* qt_s = do_s + kQueryTile * kLd;          // (kHDP, kLdT): Q transposed
  bf16* dot_s = qt_s + kHDP * kLdT;              // (kHDP, kLdT): dO transposed
  float* lse_s = reinterpret_cast<float*>(dot_s + kHDP * kLdT);  // (kQueryTile)
  float* D_s = lse_s + kQueryTile;                               // (kQueryTile)
  const int window = g.T > 1 ? __float2int_rn(lse[static_cast<size_t>(g.B) * g.NH * g.T]) : 0;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gq = lane / 4, tq = lane % 4;
  const int bg = blockIdx.y, b = bg / g.NKV, kvh = bg % g.NKV;
  const int j0b = blockIdx.x * kBlockRows;
  const int w0 = j0b + warp * kRowsPerWarp;  // this warp's first key
  const int keys[2] = {w0 + gq, w0 + gq + 8};
  load_tile<kHDP, false>(k_s, qkv, j0b, kBlockRows, g.T, g.HD, [&](int t) { return g.k_at(t, b, kvh); });
  load_tile<kHDP, false>(v_s, qkv, j0b, kBlockRows, g.T, g.HD, [&](int t) { return g.v_at(t, b, kvh); });

  float dk[kHDP / 8][4], dv[kHDP / 8][4];
#pragma unroll
  for (int n = 0; n < kHDP / 8; ++n) {
    dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = 0.0f;
    dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.0f;
  }
  // Queries that see any key of the block: [j0b, i_end].
  const int j_last = min(g.T - 1, j0b + kBlockRows - 1);
  const int i_end = window > 0 ? min(g.T - 1, j_last + window) : g.T - 1;
  const int w_last = min(g.T - 1, w0 + kRowsPerWarp - 1);  // this warp's last key
  for (int hh = 0; hh < g.group; ++hh) {
    const int h = kvh * g.group + hh;
    for (int i0 = j0b; i0 <= i_end; i0 += kQueryTile) {
      __syncthreads();
      load_tile<kHDP, false>(q_s, qkv, i0, kQueryTile, g.T, g.HD, [&](int t) { return g.q_at(t, b, h); });
      load_tile<kHDP, false>(do_s, dout, i0, kQueryTile, g.T, g.HD, [&](int t) { return g.o_at(t, b, h); });
      load_tile<kHDP, true>(qt_s, qkv, i0, kQueryTile, g.T, g.HD, [&](int t) { return g.q_at(t, b, h); });
      load_tile<kHDP, true>(dot_s, dout, i0, kQueryTile, g.T, g.HD, [&](int t) { return g.o_at(t, b, h); });
      for (int r = threadIdx.x; r < kQueryTile; r += blockDim.x) {
        const int t = i0 + r;
        lse_s[r] = t < g.T ? lse[g.row_at(b, h, t)] : 0.0f;
        D_s[r] = t < g.T ? D[g.row_at(b, h, t)] : 0.0f;
      }
      __syncthreads();
      // Warp-uniform skip: every query of the tile is before this warp's first
      // key, or past its last key's window.
      const int i_last = min(g.T - 1, i0 + kQueryTile - 1);
      if (w0 >= g.T || i_last < w0 || (window > 0 && i0 - window > w_last)) continue;

      float st[kQueryTile / 8][4], dpt[kQueryTile / 8][4];  // S^T, dP^T: rows keys, columns queries
#pragma unroll
      for (int n = 0; n < kQueryTile / 8; ++n) {
        st[n][0] = st[n][1] = st[n][2] = st[n][3] = 0.0f;
        dpt[n][0] = dpt[n][1] = dpt[n][2] = dpt[n][3] = 0.0f;
      }
#pragma unroll
      for (int kk = 0; kk < kHDP / 16; ++kk) {
        uint32_t ak[4], av[4];
        load_a(ak, k_s, kLd, warp * kRowsPerWarp, kk * 16);
        load_a(av, v_s, kLd, warp * kRowsPerWarp, kk * 16);
#pragma unroll
        for (int n = 0; n < kQueryTile / 8; ++n) {
          uint32_t b0, b1;
          load_b(b0, b1, q_s, kLd, n * 8, kk * 16);  // S^T = K Q^T
          mma(st[n], ak, b0, b1);
          load_b(b0, b1, do_s, kLd, n * 8, kk * 16);  // dP^T = V dO^T
          mma(dpt[n], av, b0, b1);
        }
      }
#pragma unroll
      for (int n = 0; n < kQueryTile / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = keys[e / 2], col = n * 8 + 2 * tq + (e & 1), i = i0 + col;
          const float p = (j < g.T && visible(i, j, g.T, window)) ? __expf(st[n][e] * g.scale - lse_s[col]) : 0.0f;
          st[n][e] = p;                              // P^T
          dpt[n][e] = p * (dpt[n][e] - D_s[col]);    // dS^T
        }
      }
#pragma unroll
      for (int kk = 0; kk < kQueryTile / 16; ++kk) {
        uint32_t ap[4], ads[4];
        a_from_acc(ap, st, kk);
        a_from_acc(ads, dpt, kk);
#pragma unroll
        for (int n = 0; n < kHDP / 8; ++n) {
          uint32_t b0, b1;
          load_b(b0, b1, dot_s, kLdT, n * 8, kk * 16);  // dV += P^T dO
          mma(dv[n], ap, b0, b1);
          load_b(b0, b1, qt_s, kLdT, n * 8, kk * 16);  // dK += dS^T Q
          mma(dk[n], ads, b0, b1);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = keys[r];
    if (j >= g.T) continue;
#pragma unroll
    for (int n = 0; n < kHDP / 8; ++n) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int d = n * 8 + 2 * tq + c;
        if (d >= g.HD) continue;
        dqkv[g.k_at(j, b, kvh) + d] = dk[n][2 * r + c] * g.scale;
        dqkv[g.v_at(j, b, kvh) + d] = dv[n][2 * r + c];
      }
    }
  }
}

// ---- host side -----------------------------------------------------------------------

Geometry geometry(int T, int B, int NH, int NKV, int HD) {
  Geometry g;
  g.T = T;
  g.B = B;
  g.NH = NH;
  g.NKV = NKV;
  g.HD = HD;
  g.group = NH / NKV;
  g.width = (NH + 2 * NKV) * HD;
  g.scale = 1.0f / std::sqrt(static_cast<float>(HD));
  return g;
}

void check_shape(int T, int B, int NH, int NKV, int HD) {
  if (T < 1 || B < 1 || NH < 1 || NKV < 1 || NH % NKV != 0 || HD < 1 || HD > kMaxAttentionHeadDim) {
    throw std::runtime_error("attention on CUDA (tensor-core flash path): unsupported shape T " + std::to_string(T) +
                             ", B " + std::to_string(B) + ", NH " + std::to_string(NH) + ", NKV " +
                             std::to_string(NKV) + ", HD " + std::to_string(HD) + " (HD must be 1.." +
                             std::to_string(kMaxAttentionHeadDim) + ", NH a multiple of NKV)");
  }
}

// mma.sync with bf16 operands needs sm_80 (Ampere) or later.
void check_arch() {
  int dev = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major < 8) {
    throw std::runtime_error("attention on CUDA (tensor-core flash path): needs compute capability 8.0 or later "
                             "(bf16 mma.sync), this GPU has " + std::to_string(major) + ".x; use attention = \"flash\" "
                             "or \"cublas\"");
  }
}

// The head dimension padded to the kernels' tile: 16, 32, 64 or 128.
int padded_head_dim(int HD) { return HD <= 16 ? 16 : HD <= 32 ? 32 : HD <= 64 ? 64 : 128; }

unsigned blocks_of(int rows) { return static_cast<unsigned>((rows + kBlockRows - 1) / kBlockRows); }

template <int kHDP>
size_t forward_smem_bytes() {
  return (static_cast<size_t>(kBlockRows + kKeyTile) * (kHDP + kPad) + static_cast<size_t>(kHDP) * (kKeyTile + kPad)) *
         sizeof(bf16);
}
template <int kHDP>
size_t dq_smem_bytes() {
  return (static_cast<size_t>(2 * kBlockRows + 2 * kKeyTile) * (kHDP + kPad) +
          static_cast<size_t>(kHDP) * (kKeyTile + kPad)) *
         sizeof(bf16);
}
template <int kHDP>
size_t dkv_smem_bytes() {
  return (static_cast<size_t>(2 * kBlockRows + 2 * kQueryTile) * (kHDP + kPad) +
          2 * static_cast<size_t>(kHDP) * (kQueryTile + kPad)) *
             sizeof(bf16) +
         2 * kQueryTile * sizeof(float);
}

// Allows `bytes` of dynamic shared memory (above the 48 KiB default needs the opt-in).
template <typename Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <int kHDP>
void forward_for(float* out, float* saved, float* o_copy, const float* qkv, const Geometry& g, int window,
                 const float* window_from, cudaStream_t s) {
  const size_t smem = forward_smem_bytes<kHDP>();
  allow_smem(tc_forward_kernel<kHDP>, smem);
  tc_forward_kernel<kHDP><<<dim3(blocks_of(g.T), static_cast<unsigned>(g.B * g.NH)), kThreads, smem, s>>>(
      out, saved, o_copy, qkv, g, window, window_from);
  CUDA_CHECK_LAUNCH();
}

void forward_dispatch(float* out, float* saved, float* o_copy, const float* qkv, const Geometry& g, int window,
                      const float* window_from, cudaStream_t s) {
  switch (padded_head_dim(g.HD)) {
    case 16: forward_for<16>(out, saved, o_copy, qkv, g, window, window_from, s); break;
    case 32: forward_for<32>(out, saved, o_copy, qkv, g, window, window_from, s); break;
    case 64: forward_for<64>(out, saved, o_copy, qkv, g, window, window_from, s); break;
    default: forward_for<128>(out, saved, o_copy, qkv, g, window, window_from, s); break;
  }
}

template <int kHDP>
void backward_for(float* dqkv, const float* dout, const float* qkv, const float* lse, const float* D,
                  const Geometry& g, cudaStream_t s) {
  const size_t dq_smem = dq_smem_bytes<kHDP>();
  allow_smem(tc_backward_dq_kernel<kHDP>, dq_smem);
  tc_backward_dq_kernel<kHDP><<<dim3(blocks_of(g.T), static_cast<unsigned>(g.B * g.NH)), kThreads, dq_smem, s>>>(
      dqkv, dout, qkv, lse, D, g);
  CUDA_CHECK_LAUNCH();
  const size_t dkv_smem = dkv_smem_bytes<kHDP>();
  allow_smem(tc_backward_dkv_kernel<kHDP>, dkv_smem);
  tc_backward_dkv_kernel<kHDP><<<dim3(blocks_of(g.T), static_cast<unsigned>(g.B * g.NKV)), kThreads, dkv_smem, s>>>(
      dqkv, dout, qkv, lse, D, g);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t attention_tc_saved_o_offset(int T, int B, int NH, int HD) {
  const size_t rows = static_cast<size_t>(B) * NH * T;
  const size_t offset = (rows + 1 + 3) / 4 * 4;  // after lse and the window, 16-byte aligned
  const size_t capacity = rows * static_cast<size_t>(T);
  return offset + rows * static_cast<size_t>(HD) <= capacity ? offset : 0;
}

void launch_attention_tc_forward(float* out, float* saved, const float* qkv, int T, int B, int NH, int NKV, int HD,
                                 int window, cudaStream_t s) {
  check_shape(T, B, NH, NKV, HD);
  check_arch();
  const Geometry g = geometry(T, B, NH, NKV, HD);
  const size_t o_offset = attention_tc_saved_o_offset(T, B, NH, HD);
  forward_dispatch(out, saved, o_offset > 0 ? saved + o_offset : nullptr, qkv, g, window, nullptr, s);
}

size_t attention_tc_backward_workspace_floats(int T, int B, int NH, int HD) {
  const size_t rows = static_cast<size_t>(B) * NH * T;
  // D, plus O when the saved state has no room for it.
  return rows + (attention_tc_saved_o_offset(T, B, NH, HD) > 0 ? 0 : rows * static_cast<size_t>(HD));
}

void launch_attention_tc_backward(float* dqkv, const float* dout, const float* qkv, const float* saved, int T, int B,
                                  int NH, int NKV, int HD, float* ws, cudaStream_t s) {
  check_shape(T, B, NH, NKV, HD);
  check_arch();
  const Geometry g = geometry(T, B, NH, NKV, HD);
  const size_t rows = static_cast<size_t>(B) * NH * T;
  float* D = ws;
  const size_t o_offset = attention_tc_saved_o_offset(T, B, NH, HD);
  const float* o = saved + o_offset;
  if (o_offset == 0) {  // no room in the saved state: recompute O (same kernel, same bits)
    float* o_ws = ws + rows;
    forward_dispatch(o_ws, nullptr, nullptr, qkv, g, 0, T > 1 ? saved + rows : nullptr, s);
    o = o_ws;
  }
  tc_backward_d_kernel<<<grid_for(rows * kWarp), kBlock, 0, s>>>(D, dout, o, g);
  CUDA_CHECK_LAUNCH();
  switch (padded_head_dim(HD)) {
    case 16: backward_for<16>(dqkv, dout, qkv, saved, D, g, s); break;
    case 32: backward_for<32>(dqkv, dout, qkv, saved, D, g, s); break;
    case 64: backward_for<64>(dqkv, dout, qkv, saved, D, g, s); break;
    default: backward_for<128>(dqkv, dout, qkv, saved, D, g, s); break;
  }
}

}  // namespace megascale::engine::cuda
