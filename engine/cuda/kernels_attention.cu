// engine/cuda/kernels_attention.cu: causal / sliding-window attention with GQA,
// flash style (Dao et al. 2022, FlashAttention; Dao 2023, FlashAttention-2):
// scores are computed tile by tile in shared memory with an online softmax,
// never stored; the forward saves only each query row's log-sum-exp, and the
// backward recomputes the probabilities from it.
//
// Mapping (fp32 CUDA cores; written to be checked against CpuDevice before it
// is fast): one warp per query row (forward, D and dQ) or per key row (dK, dV),
// kRows warps per block sharing one 32-key (or 32-query) tile in shared memory.
// In a tile, lane j owns key j of the tile for the score dot product, and lane
// l owns output dims l, l + 32, l + 64, l + 96 for the accumulations
// (HD <= kMaxAttentionHeadDim = 128). Shared tiles are padded to HD + 1 floats
// per row so that the 32 lanes reading 32 different rows hit 32 banks.
//
// Backward (FlashAttention-2, algorithm 2, split into three passes so that no
// two blocks ever write the same element: deterministic, no atomics):
//   1. per query row i: D_i = sum_j P_ij dP_ij   (dP_ij = dO_i . V_j)
//   2. per query row i: dQ_i = scale * sum_j P_ij (dP_ij - D_i) K_j
//   3. per key row j of KV head g: dV_j = sum_{h in g, i} P_ij dO_i,
//      dK_j = scale * sum_{h in g, i} P_ij (dP_ij - D_i) Q_i
// (the usual D_i = dO_i . O_i needs the forward output, which
// Device::attention_backward is not given; pass 1 recomputes it instead).
//
// Masks: key j is visible to query i iff lo(i) <= j <= i, lo(i) = max(0, i - W)
// for a window W > 0 and 0 otherwise (engine/device.h).
#include <cmath>

#include "engine/cuda/attention_geometry.h"
#include "engine/cuda/common.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace megascale::engine::cuda {
namespace {

constexpr int kRows = 8;                            // warps (rows) per block
constexpr int kTile = kWarp;                        // keys (or queries) per shared tile
constexpr int kDimsPerLane = kMaxAttentionHeadDim / kWarp;  // 4 accumulators per lane

using Geometry = AttentionGeometry;  // attention_geometry.h

// The window the forward stored after the log-sum-exps (kernels.h); with
// T == 1 there is one key, and no room and no need for it.
__device__ __forceinline__ int saved_window(const float* saved, const Geometry& g) {
  return g.T > 1 ? __float2int_rn(saved[static_cast<size_t>(g.B) * g.NH * g.T]) : 0;
}

// Loads rows [t0, t0 + kTile) of a per-token vector (qkv / dout at `offset(t)`)
// into tile (kTile, HD + 1); rows past T are zero.
template <typename Offset>
__device__ void load_tile(float* tile, const float* src, int t0, int T, int HD, Offset offset) {
  for (int idx = threadIdx.x; idx < kTile * HD; idx += blockDim.x) {
    const int r = idx / HD, d = idx % HD;
    const int t = t0 + r;
    tile[r * (HD + 1) + d] = t < T ? src[offset(t) + d] : 0.0f;
  }
}

// ---- forward -----------------------------------------------------------------------

__global__ void attention_forward_kernel(float* out, float* saved, const float* qkv, Geometry g,
                                         int window) {
  extern __shared__ float smem[];
  const int HD = g.HD;
  float* q_s = smem;                          // (kRows, HD)
  float* k_s = q_s + kRows * HD;              // (kTile, HD + 1)
  float* v_s = k_s + kTile * (HD + 1);        // (kTile, HD + 1)
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH, kvh = h / g.group;
  const int i0 = blockIdx.x * kRows;
  const int i = i0 + warp;
  const bool valid = i < g.T;
  const int lo = first_visible_key(i, window);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && g.T > 1) {
    saved[static_cast<size_t>(g.B) * g.NH * g.T] = static_cast<float>(window);
  }
  if (valid) {
    for (int d = lane; d < HD; d += kWarp) q_s[warp * HD + d] = qkv[g.q_at(i, b, h) + d];
  }
  float o[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  float m = -INFINITY, l = 0.0f;
  const int j_begin = first_visible_key(i0, window);
  const int j_end = min(g.T - 1, i0 + kRows - 1);  // last key any row of the block sees
  for (int j0 = j_begin; j0 <= j_end; j0 += kTile) {
    __syncthreads();
    load_tile(k_s, qkv, j0, g.T, HD, [&](int t) { return g.k_at(t, b, kvh); });
    load_tile(v_s, qkv, j0, g.T, HD, [&](int t) { return g.v_at(t, b, kvh); });
    __syncthreads();
    if (!valid) continue;
    const int j = j0 + lane;
    const bool visible = j >= lo && j <= i;
    float s = -INFINITY;
    if (visible) {
      float dot = 0.0f;
      for (int d = 0; d < HD; ++d) dot += q_s[warp * HD + d] * k_s[lane * (HD + 1) + d];
      s = dot * g.scale;
    }
    const float tile_max = warp_max(s);
    if (tile_max == -INFINITY) continue;  // warp-uniform: no visible key in this tile
    const float m_new = fmaxf(m, tile_max);
    const float p = visible ? expf(s - m_new) : 0.0f;
    const float corr = expf(m - m_new);  // 0 on the first visible tile (m = -inf)
    l = l * corr + warp_sum(p);
#pragma unroll
    for (int k = 0; k < kDimsPerLane; ++k) o[k] *= corr;
    for (int jj = 0; jj < kTile; ++jj) {
      const float pj = __shfl_sync(kFullMask, p, jj);
#pragma unroll
      for (int k = 0; k < kDimsPerLane; ++k) {
        const int d = lane + k * kWarp;
        if (d < HD) o[k] += pj * v_s[jj * (HD + 1) + d];
      }
    }
    m = m_new;
  }
  if (!valid) return;
  const float inv = 1.0f / l;
#pragma unroll
  for (int k = 0; k < kDimsPerLane; ++k) {
    const int d = lane + k * kWarp;
    if (d < HD) out[g.o_at(i, b, h) + d] = o[k] * inv;
  }
  if (lane == 0) saved[g.row_at(b, h, i)] = m + logf(l);
}

// ---- backward, passes 1 and 2: per query row -----------------------------------------

// kPass 1 writes D (ws); kPass 2 writes dQ into dqkv.
template <int kPass>
__global__ void attention_backward_query_kernel(float* dqkv, float* Dws, const float* dout,
                                                const float* qkv, const float* lse, Geometry g) {
  extern __shared__ float smem[];
  const int window = saved_window(lse, g);
  const int HD = g.HD;
  float* q_s = smem;                      // (kRows, HD)
  float* do_s = q_s + kRows * HD;         // (kRows, HD)
  float* k_s = do_s + kRows * HD;         // (kTile, HD + 1)
  float* v_s = k_s + kTile * (HD + 1);    // (kTile, HD + 1)
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH, kvh = h / g.group;
  const int i0 = blockIdx.x * kRows;
  const int i = i0 + warp;
  const bool valid = i < g.T;
  const int lo = first_visible_key(i, window);
  float row_lse = 0.0f, row_D = 0.0f;
  if (valid) {
    for (int d = lane; d < HD; d += kWarp) {
      q_s[warp * HD + d] = qkv[g.q_at(i, b, h) + d];
      do_s[warp * HD + d] = dout[g.o_at(i, b, h) + d];
    }
    row_lse = lse[g.row_at(b, h, i)];
    if (kPass == 2) row_D = Dws[g.row_at(b, h, i)];
  }
  float acc[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  float D_part = 0.0f;
  const int j_begin = first_visible_key(i0, window);
  const int j_end = min(g.T - 1, i0 + kRows - 1);
  for (int j0 = j_begin; j0 <= j_end; j0 += kTile) {
    __syncthreads();
    load_tile(k_s, qkv, j0, g.T, HD, [&](int t) { return g.k_at(t, b, kvh); });
    load_tile(v_s, qkv, j0, g.T, HD, [&](int t) { return g.v_at(t, b, kvh); });
    __syncthreads();
    if (!valid) continue;
    const int j = j0 + lane;
    const bool visible = j >= lo && j <= i;
    float p = 0.0f, dp = 0.0f;
    if (visible) {
      float s = 0.0f, t = 0.0f;
      for (int d = 0; d < HD; ++d) {
        s += q_s[warp * HD + d] * k_s[lane * (HD + 1) + d];
        t += do_s[warp * HD + d] * v_s[lane * (HD + 1) + d];
      }
      p = expf(s * g.scale - row_lse);
      dp = t;
    }
    if (kPass == 1) {
      D_part += p * dp;
    } else {
      const float ds = p * (dp - row_D);
      for (int jj = 0; jj < kTile; ++jj) {
        const float dsj = __shfl_sync(kFullMask, ds, jj);
#pragma unroll
        for (int k = 0; k < kDimsPerLane; ++k) {
          const int d = lane + k * kWarp;
          if (d < HD) acc[k] += dsj * k_s[jj * (HD + 1) + d];
        }
      }
    }
  }
  if (!valid) return;
  if (kPass == 1) {
    const float D = warp_sum(D_part);
    if (lane == 0) Dws[g.row_at(b, h, i)] = D;
  } else {
#pragma unroll
    for (int k = 0; k < kDimsPerLane; ++k) {
      const int d = lane + k * kWarp;
      if (d < HD) dqkv[g.q_at(i, b, h) + d] = acc[k] * g.scale;
    }
  }
}

// ---- backward, pass 3: per key row of a KV head, over the group's query heads ---------

__global__ void attention_backward_key_kernel(float* dqkv, const float* Dws, const float* dout,
                                              const float* qkv, const float* lse, Geometry g) {
  extern __shared__ float smem[];
  const int window = saved_window(lse, g);
  const int HD = g.HD;
  float* q_s = smem;                        // (kTile, HD + 1) queries of the tile
  float* do_s = q_s + kTile * (HD + 1);     // (kTile, HD + 1)
  float* k_s = do_s + kTile * (HD + 1);     // (kRows, HD) this block's keys
  float* v_s = k_s + kRows * HD;            // (kRows, HD)
  float* lse_s = v_s + kRows * HD;          // (kTile)
  float* D_s = lse_s + kTile;               // (kTile)
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int bg = blockIdx.y, b = bg / g.NKV, kvh = bg % g.NKV;
  const int j0b = blockIdx.x * kRows;
  const int j = j0b + warp;
  const bool valid = j < g.T;
  if (valid) {
    for (int d = lane; d < HD; d += kWarp) {
      k_s[warp * HD + d] = qkv[g.k_at(j, b, kvh) + d];
      v_s[warp * HD + d] = qkv[g.v_at(j, b, kvh) + d];
    }
  }
  float dk[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  float dv[kDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  // Queries that see any key of the block: [j0b, last], last = j_last + W or T - 1.
  const int j_last = min(g.T - 1, j0b + kRows - 1);
  const int i_end = window > 0 ? min(g.T - 1, j_last + window) : g.T - 1;
  for (int hh = 0; hh < g.group; ++hh) {
    const int h = kvh * g.group + hh;
    for (int i0 = j0b; i0 <= i_end; i0 += kTile) {
      __syncthreads();
      load_tile(q_s, qkv, i0, g.T, HD, [&](int t) { return g.q_at(t, b, h); });
      load_tile(do_s, dout, i0, g.T, HD, [&](int t) { return g.o_at(t, b, h); });
      for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
        const int t = i0 + r;
        lse_s[r] = t < g.T ? lse[g.row_at(b, h, t)] : 0.0f;
        D_s[r] = t < g.T ? Dws[g.row_at(b, h, t)] : 0.0f;
      }
      __syncthreads();
      if (!valid) continue;
      const int i = i0 + lane;
      const bool visible = i < g.T && i >= j && first_visible_key(i, window) <= j;
      float p = 0.0f, ds = 0.0f;
      if (visible) {
        float s = 0.0f, t = 0.0f;
        for (int d = 0; d < HD; ++d) {
          s += q_s[lane * (HD + 1) + d] * k_s[warp * HD + d];
          t += do_s[lane * (HD + 1) + d] * v_s[warp * HD + d];
        }
        p = expf(s * g.scale - lse_s[lane]);
        ds = p * (t - D_s[lane]);
      }
      for (int ii = 0; ii < kTile; ++ii) {
        const float pi = __shfl_sync(kFullMask, p, ii);
        const float dsi = __shfl_sync(kFullMask, ds, ii);
#pragma unroll
        for (int k = 0; k < kDimsPerLane; ++k) {
          const int d = lane + k * kWarp;
          if (d < HD) {
            dv[k] += pi * do_s[ii * (HD + 1) + d];
            dk[k] += dsi * q_s[ii * (HD + 1) + d];
          }
        }
      }
    }
  }
  if (!valid) return;
#pragma unroll
  for (int k = 0; k < kDimsPerLane; ++k) {
    const int d = lane + k * kWarp;
    if (d < HD) {
      dqkv[g.k_at(j, b, kvh) + d] = dk[k] * g.scale;
      dqkv[g.v_at(j, b, kvh) + d] = dv[k];
    }
  }
}

unsigned row_blocks(int T) { return static_cast<unsigned>((T + kRows - 1) / kRows); }

}  // namespace

void launch_attention_forward(float* out, float* saved, const float* qkv, int T, int B, int NH,
                              int NKV, int HD, int window, cudaStream_t s) {
  check_attention_shape("flash path", T, B, NH, NKV, HD);
  const Geometry g = attention_geometry(T, B, NH, NKV, HD);
  const size_t smem = (static_cast<size_t>(kRows) * HD + 2 * kTile * (HD + 1)) * sizeof(float);
  attention_forward_kernel<<<dim3(row_blocks(T), static_cast<unsigned>(B * NH)), kRows * kWarp, smem, s>>>(
      out, saved, qkv, g, window);
  CUDA_CHECK_LAUNCH();
}

size_t attention_backward_workspace_floats(int T, int B, int NH) {
  return static_cast<size_t>(T) * B * NH;
}

void launch_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                               int T, int B, int NH, int NKV, int HD, float* ws, cudaStream_t s) {
  check_attention_shape("flash path", T, B, NH, NKV, HD);
  const Geometry g = attention_geometry(T, B, NH, NKV, HD);
  const size_t q_smem = (2 * static_cast<size_t>(kRows) * HD + 2 * kTile * (HD + 1)) * sizeof(float);
  const dim3 q_grid(row_blocks(T), static_cast<unsigned>(B * NH));
  attention_backward_query_kernel<1><<<q_grid, kRows * kWarp, q_smem, s>>>(dqkv, ws, dout, qkv, saved, g);
  CUDA_CHECK_LAUNCH();
  attention_backward_query_kernel<2><<<q_grid, kRows * kWarp, q_smem, s>>>(dqkv, ws, dout, qkv, saved, g);
  CUDA_CHECK_LAUNCH();
  const size_t k_smem =
      (2 * static_cast<size_t>(kTile) * (HD + 1) + 2 * kRows * HD + 2 * kTile) * sizeof(float);
  attention_backward_key_kernel<<<dim3(row_blocks(T), static_cast<unsigned>(B * NKV)), kRows * kWarp, k_smem,
                                  s>>>(dqkv, ws, dout, qkv, saved, g);
  CUDA_CHECK_LAUNCH();
}

}  // namespace megascale::engine::cuda
