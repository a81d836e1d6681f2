// engine/cuda/attention_tc_kernels.cuh: the device code of the tensor-core
// flash attention (kernels_attention_tc.cu has the design notes, the host side
// and the CUDA primitives), written against a small set of primitives so that
// the same source also runs, thread by thread, on the CPU emulator of
// tests/engine/attention_tc_emulated_test.cc: that test checks every index,
// mask, fragment and tile bound of these kernels against CpuDevice on a machine
// without a GPU.
//
// The includer defines, before including this file inside its namespace:
//   bf16, to_bf16(float); pack_bf16(lo, hi) -> uint32_t (two bf16, lo in the
//   low half); ld32(const bf16*) -> uint32_t; mma(d[4], a[4], b0, b1): d += a b
//   for mma.m16n8k16 with the PTX ISA's fragment layouts; shfl_xor(v, lane_mask);
//   warp_sum(v); sync_block(); fast_exp(x); round_to_int(x); kWarp;
//   AttentionGeometry and first_visible_key (engine/cuda/attention_geometry.h);
//   threadIdx / blockIdx / blockDim / gridDim; min (int), fmaxf, logf,
//   INFINITY; and the macros MEGASCALE_TC_KERNEL (a kernel's return type and
//   qualifiers), MEGASCALE_TC_DEVICE (a device function's), MEGASCALE_TC_SHARED(name)
//   (the block's dynamic shared memory as `unsigned char* name`-like storage,
//   16-byte aligned) and MEGASCALE_TC_UNROLL.
// No include guard: meant to be included once per translation unit.

constexpr int kWarps = 4;                 // warps per block
constexpr int kThreads = kWarps * kWarp;  // 128
constexpr int kRowsPerWarp = 16;          // the m of m16n8k16
constexpr int kBlockRows = kWarps * kRowsPerWarp;  // 64 queries (forward, dQ) or keys (dK dV) per block
constexpr int kKeyTile = 64;              // keys per shared tile (forward, dQ)
constexpr int kQueryTile = 32;            // queries per shared tile (dK dV)
constexpr int kPad = 8;                   // bf16 of padding per shared row (16 bytes)

using Geometry = AttentionGeometry;  // attention_geometry.h

// The head dimension padded to the kernels' tile: 16, 32, 64 or 128 (host side).
inline int padded_head_dim(int HD) { return HD <= 16 ? 16 : HD <= 32 ? 32 : HD <= 64 ? 64 : 128; }

// Where the forward's copy of O starts in the saved state of B * NH * T * T
// floats (after the log-sum-exps and the window, 16-byte aligned), or 0 when
// it does not fit (host side).
inline size_t saved_o_offset(int T, int B, int NH, int HD) {
  const size_t rows = static_cast<size_t>(B) * NH * T;
  const size_t offset = (rows + 1 + 3) / 4 * 4;
  const size_t capacity = rows * static_cast<size_t>(T);
  return offset + rows * static_cast<size_t>(HD) <= capacity ? offset : 0;
}

MEGASCALE_TC_DEVICE bool visible(int i, int j, int T, int window) {
  return i < T && j <= i && j >= first_visible_key(i, window);  // j <= i < T implies j < T
}

// A fragment of rows [r0, r0 + 16), k columns [k0, k0 + 16) of a row-major
// shared tile with `ld` bf16 per row.
MEGASCALE_TC_DEVICE void load_a(uint32_t (&a)[4], const bf16* x, int ld, int r0, int k0) {
  const int g = (threadIdx.x % kWarp) / 4, t = threadIdx.x % 4;
  a[0] = ld32(x + (r0 + g) * ld + k0 + 2 * t);
  a[1] = ld32(x + (r0 + g + 8) * ld + k0 + 2 * t);
  a[2] = ld32(x + (r0 + g) * ld + k0 + 8 + 2 * t);
  a[3] = ld32(x + (r0 + g + 8) * ld + k0 + 8 + 2 * t);
}
// B fragment (k0..k0+15, n0..n0+7) of a tile stored [n][k] with `ld` bf16 per row.
MEGASCALE_TC_DEVICE void load_b(uint32_t& b0, uint32_t& b1, const bf16* y, int ld, int n0, int k0) {
  const int g = (threadIdx.x % kWarp) / 4, t = threadIdx.x % 4;
  b0 = ld32(y + (n0 + g) * ld + k0 + 2 * t);
  b1 = ld32(y + (n0 + g) * ld + k0 + 8 + 2 * t);
}
// The A fragment (k columns 16 kk .. 16 kk + 15) made of accumulator tiles
// lo = c[2 kk] and hi = c[2 kk + 1] (the caller passes the two tiles).
MEGASCALE_TC_DEVICE void a_from_acc(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack_bf16(lo[0], lo[1]);
  a[1] = pack_bf16(lo[2], lo[3]);
  a[2] = pack_bf16(hi[0], hi[1]);
  a[3] = pack_bf16(hi[2], hi[3]);
}

// c1 = X1 Y1^T and c2 = X2 Y2^T for this warp's 16 rows [r0, r0 + 16) of X1
// and X2 and the kN rows of Y1 and Y2 (all row-major shared tiles of kHDP
// columns, `ld` bf16 per row): the two score-shaped products of the backward
// (S and dP, or S^T and dP^T), sharing the loop over the head dimension.
template <int kHDP, int kN>
MEGASCALE_TC_DEVICE void two_products_nt(float (&c1)[kN / 8][4], float (&c2)[kN / 8][4], const bf16* x1,
                                         const bf16* y1, const bf16* x2, const bf16* y2, int ld, int r0) {
MEGASCALE_TC_UNROLL
  for (int n = 0; n < kN / 8; ++n) {
    c1[n][0] = c1[n][1] = c1[n][2] = c1[n][3] = 0.0f;
    c2[n][0] = c2[n][1] = c2[n][2] = c2[n][3] = 0.0f;
  }
MEGASCALE_TC_UNROLL
  for (int kk = 0; kk < kHDP / 16; ++kk) {
    uint32_t a1[4], a2[4];
    load_a(a1, x1, ld, r0, kk * 16);
    load_a(a2, x2, ld, r0, kk * 16);
MEGASCALE_TC_UNROLL
    for (int n = 0; n < kN / 8; ++n) {
      uint32_t b0, b1;
      load_b(b0, b1, y1, ld, n * 8, kk * 16);
      mma(c1[n], a1, b0, b1);
      load_b(b0, b1, y2, ld, n * 8, kk * 16);
      mma(c2[n], a2, b0, b1);
    }
  }
}

// Calls store(r, d, v) for each value v of this lane's part of a 16 x kHDP
// accumulator (rows r = 0: g, 1: g + 8 of the warp's 16; dims d < HD): the
// write-back of O, dQ, dK and dV.
template <int kHDP, typename Store>
MEGASCALE_TC_DEVICE void for_each_output(const float (&acc)[kHDP / 8][4], int HD, Store store) {
  const int tq = threadIdx.x % 4;
MEGASCALE_TC_UNROLL
  for (int r = 0; r < 2; ++r) {
MEGASCALE_TC_UNROLL
    for (int n = 0; n < kHDP / 8; ++n) {
MEGASCALE_TC_UNROLL
      for (int c = 0; c < 2; ++c) {
        const int d = n * 8 + 2 * tq + c;
        if (d < HD) store(r, d, acc[n][2 * r + c]);
      }
    }
  }
}

// Under the causal mask a query block's work grows with its index: blocks are
// taken last-first, so that the longest start first and the short ones fill
// the tail (the dK / dV blocks, whose work shrinks with the index, keep the order).
MEGASCALE_TC_DEVICE int heavy_first_block() { return static_cast<int>(gridDim.x - 1 - blockIdx.x); }

// Rows [t0, t0 + rows) of a per-token vector (src at offset(t)) into a shared
// tile, rounded to bf16: row-major (rows, kHDP + kPad) when kTransposed is
// false, else (kHDP, rows + kPad). Rows past T and dims past HD are zero.
template <int kHDP, bool kTransposed, typename Offset>
MEGASCALE_TC_DEVICE void load_tile(bf16* tile, const float* src, int t0, int rows, int T, int HD, Offset offset) {
  for (int idx = threadIdx.x; idx < rows * kHDP; idx += blockDim.x) {
    const int r = idx / kHDP, d = idx % kHDP;
    const int t = t0 + r;
    const float v = (t < T && d < HD) ? src[offset(t) + d] : 0.0f;
    if (kTransposed) {
      tile[d * (rows + kPad) + r] = to_bf16(v);
    } else {
      tile[r * (kHDP + kPad) + d] = to_bf16(v);
    }
  }
}

// ---- forward ------------------------------------------------------------------------

// out (T, B, NH * HD); saved: lse (B, NH, T), then the window; o_copy (or
// nullptr): a second copy of out. window_from (or nullptr): read the window
// from there (the backward's recomputation) instead of `window`.
template <int kHDP>
MEGASCALE_TC_KERNEL tc_forward_kernel(float* out, float* saved, float* o_copy,
                                                              const float* qkv, Geometry g, int window,
                                                              const float* window_from) {
  MEGASCALE_TC_SHARED(smem_raw);
  constexpr int kLd = kHDP + kPad, kLdT = kKeyTile + kPad;
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // (64, kLd)
  bf16* k_s = q_s + kBlockRows * kLd;            // (kKeyTile, kLd)
  bf16* vt_s = k_s + kKeyTile * kLd;             // (kHDP, kLdT): V transposed
  if (window_from != nullptr) window = g.T > 1 ? round_to_int(*window_from) : 0;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gq = lane / 4, tq = lane % 4;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH, kvh = h / g.group;
  const int i0 = heavy_first_block() * kBlockRows;
  const int w0 = i0 + warp * kRowsPerWarp;  // this warp's first query
  const int rows[2] = {w0 + gq, w0 + gq + 8};
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && g.T > 1 && saved != nullptr) {
    saved[static_cast<size_t>(g.B) * g.NH * g.T] = static_cast<float>(window);
  }
  load_tile<kHDP, false>(q_s, qkv, i0, kBlockRows, g.T, g.HD, [&](int t) { return g.q_at(t, b, h); });

  float o[kHDP / 8][4];
MEGASCALE_TC_UNROLL
  for (int n = 0; n < kHDP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // l: this lane's part of the row sum

  const int j_begin = first_visible_key(i0, window);
  const int j_end = min(g.T - 1, i0 + kBlockRows - 1);  // last key any row of the block sees
  const int w_last = min(g.T - 1, w0 + kRowsPerWarp - 1);
  for (int j0 = j_begin; j0 <= j_end; j0 += kKeyTile) {
    sync_block();
    load_tile<kHDP, false>(k_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.k_at(t, b, kvh); });
    load_tile<kHDP, true>(vt_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.v_at(t, b, kvh); });
    sync_block();
    // Warp-uniform skip: no query of this warp sees a key of the tile.
    if (w0 >= g.T || j0 > w_last || j0 + kKeyTile - 1 < first_visible_key(w0, window)) continue;

    float s[kKeyTile / 8][4];
MEGASCALE_TC_UNROLL
    for (int n = 0; n < kKeyTile / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
MEGASCALE_TC_UNROLL
    for (int kk = 0; kk < kHDP / 16; ++kk) {
      uint32_t a[4];
      load_a(a, q_s, kLd, warp * kRowsPerWarp, kk * 16);
MEGASCALE_TC_UNROLL
      for (int n = 0; n < kKeyTile / 8; ++n) {
        uint32_t b0, b1;
        load_b(b0, b1, k_s, kLd, n * 8, kk * 16);
        mma(s[n], a, b0, b1);
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
MEGASCALE_TC_UNROLL
    for (int n = 0; n < kKeyTile / 8; ++n) {
MEGASCALE_TC_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int i = rows[e / 2], j = j0 + n * 8 + 2 * tq + (e & 1);
        s[n][e] = visible(i, j, g.T, window) ? s[n][e] * g.scale : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[n][e]);
      }
    }
    float corr[2], m_use[2];
MEGASCALE_TC_UNROLL
    for (int r = 0; r < 2; ++r) {  // the four lanes of a row: xor 1, 2
      tile_max[r] = fmaxf(tile_max[r], shfl_xor(tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], shfl_xor(tile_max[r], 2));
      const float m_new = fmaxf(m[r], tile_max[r]);
      m_use[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet: p = 0, no NaN
      corr[r] = fast_exp(m[r] - m_use[r]);             // 0 while m = -inf
      m[r] = m_new;
      l[r] *= corr[r];
    }
MEGASCALE_TC_UNROLL
    for (int n = 0; n < kKeyTile / 8; ++n) {
MEGASCALE_TC_UNROLL
      for (int e = 0; e < 4; ++e) {
        s[n][e] = fast_exp(s[n][e] - m_use[e / 2]);  // exp(-inf) = 0 where masked
        l[e / 2] += s[n][e];
      }
    }
MEGASCALE_TC_UNROLL
    for (int n = 0; n < kHDP / 8; ++n) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }
MEGASCALE_TC_UNROLL
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      uint32_t a[4];
      a_from_acc(a, s[2 * kk], s[2 * kk + 1]);
MEGASCALE_TC_UNROLL
      for (int n = 0; n < kHDP / 8; ++n) {
        uint32_t b0, b1;
        load_b(b0, b1, vt_s, kLdT, n * 8, kk * 16);
        mma(o[n], a, b0, b1);
      }
    }
  }
MEGASCALE_TC_UNROLL
  for (int r = 0; r < 2; ++r) {
    l[r] += shfl_xor(l[r], 1);
    l[r] += shfl_xor(l[r], 2);
  }
  // Every row i < T sees key i, so l > 0 there.
  const float inv[2] = {1.0f / l[0], 1.0f / l[1]};
  for_each_output<kHDP>(o, g.HD, [&](int r, int d, float v) {
    if (rows[r] >= g.T) return;
    out[g.o_at(rows[r], b, h) + d] = v * inv[r];
    if (o_copy != nullptr) o_copy[g.o_at(rows[r], b, h) + d] = v * inv[r];
  });
MEGASCALE_TC_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (rows[r] < g.T && tq == 0 && saved != nullptr) saved[g.row_at(b, h, rows[r])] = m[r] + logf(l[r]);
  }
}

// ---- backward: D_i = dO_i . O_i, one warp per (b, h, i) -------------------------------

MEGASCALE_TC_KERNEL tc_backward_d_kernel(float* D, const float* dout, const float* o, Geometry g) {
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
MEGASCALE_TC_KERNEL tc_backward_dq_kernel(float* dqkv, const float* dout, const float* qkv,
                                                                  const float* lse, const float* D, Geometry g) {
  MEGASCALE_TC_SHARED(smem_raw);
  constexpr int kLd = kHDP + kPad, kLdT = kKeyTile + kPad;
  bf16* q_s = reinterpret_cast<bf16*>(smem_raw);  // (64, kLd)
  bf16* do_s = q_s + kBlockRows * kLd;           // (64, kLd)
  bf16* k_s = do_s + kBlockRows * kLd;           // (kKeyTile, kLd)
  bf16* v_s = k_s + kKeyTile * kLd;              // (kKeyTile, kLd)
  bf16* kt_s = v_s + kKeyTile * kLd;             // (kHDP, kLdT): K transposed
  const int window = g.T > 1 ? round_to_int(lse[static_cast<size_t>(g.B) * g.NH * g.T]) : 0;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gq = lane / 4, tq = lane % 4;
  const int bh = blockIdx.y, b = bh / g.NH, h = bh % g.NH, kvh = h / g.group;
  const int i0 = heavy_first_block() * kBlockRows;
  const int w0 = i0 + warp * kRowsPerWarp;
  const int rows[2] = {w0 + gq, w0 + gq + 8};
  float row_lse[2], row_D[2];
MEGASCALE_TC_UNROLL
  for (int r = 0; r < 2; ++r) {
    row_lse[r] = rows[r] < g.T ? lse[g.row_at(b, h, rows[r])] : 0.0f;
    row_D[r] = rows[r] < g.T ? D[g.row_at(b, h, rows[r])] : 0.0f;
  }
  load_tile<kHDP, false>(q_s, qkv, i0, kBlockRows, g.T, g.HD, [&](int t) { return g.q_at(t, b, h); });
  load_tile<kHDP, false>(do_s, dout, i0, kBlockRows, g.T, g.HD, [&](int t) { return g.o_at(t, b, h); });

  float dq[kHDP / 8][4];
MEGASCALE_TC_UNROLL
  for (int n = 0; n < kHDP / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  const int j_begin = first_visible_key(i0, window);
  const int j_end = min(g.T - 1, i0 + kBlockRows - 1);
  const int w_last = min(g.T - 1, w0 + kRowsPerWarp - 1);
  for (int j0 = j_begin; j0 <= j_end; j0 += kKeyTile) {
    sync_block();
    load_tile<kHDP, false>(k_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.k_at(t, b, kvh); });
    load_tile<kHDP, false>(v_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.v_at(t, b, kvh); });
    load_tile<kHDP, true>(kt_s, qkv, j0, kKeyTile, g.T, g.HD, [&](int t) { return g.k_at(t, b, kvh); });
    sync_block();
    if (w0 >= g.T || j0 > w_last || j0 + kKeyTile - 1 < first_visible_key(w0, window)) continue;

    float s[kKeyTile / 8][4], dp[kKeyTile / 8][4];  // S = Q K^T, dP = dO V^T
    two_products_nt<kHDP, kKeyTile>(s, dp, q_s, k_s, do_s, v_s, kLd, warp * kRowsPerWarp);
MEGASCALE_TC_UNROLL
    for (int n = 0; n < kKeyTile / 8; ++n) {
MEGASCALE_TC_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, i = rows[r], j = j0 + n * 8 + 2 * tq + (e & 1);
        const float p = visible(i, j, g.T, window) ? fast_exp(s[n][e] * g.scale - row_lse[r]) : 0.0f;
        s[n][e] = p * (dp[n][e] - row_D[r]);  // dS
      }
    }
MEGASCALE_TC_UNROLL
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      uint32_t a[4];
      a_from_acc(a, s[2 * kk], s[2 * kk + 1]);
MEGASCALE_TC_UNROLL
      for (int n = 0; n < kHDP / 8; ++n) {
        uint32_t b0, b1;
        load_b(b0, b1, kt_s, kLdT, n * 8, kk * 16);  // dQ += dS K
        mma(dq[n], a, b0, b1);
      }
    }
  }
  for_each_output<kHDP>(dq, g.HD, [&](int r, int d, float v) {
    if (rows[r] < g.T) dqkv[g.q_at(rows[r], b, h) + d] = v * g.scale;
  });
}

// ---- backward: dK, dV, per key block of a KV head over the group's query heads --------

template <int kHDP>
MEGASCALE_TC_KERNEL tc_backward_dkv_kernel(float* dqkv, const float* dout, const float* qkv,
                                                                   const float* lse, const float* D, Geometry g) {
  MEGASCALE_TC_SHARED(smem_raw);
  constexpr int kLd = kHDP + kPad, kLdT = kQueryTile + kPad;
  bf16* k_s = reinterpret_cast<bf16*>(smem_raw);  // (64, kLd) this block's keys
  bf16* v_s = k_s + kBlockRows * kLd;            // (64, kLd)
  bf16* q_s = v_s + kBlockRows * kLd;            // (kQueryTile, kLd)
  bf16* do_s = q_s + kQueryTile * kLd;           // (kQueryTile, kLd)
  bf16* qt_s = do_s + kQueryTile * kLd;          // (kHDP, kLdT): Q transposed
  bf16* dot_s = qt_s + kHDP * kLdT;              // (kHDP, kLdT): dO transposed
  float* lse_s = reinterpret_cast<float*>(dot_s + kHDP * kLdT);  // (kQueryTile)
  float* D_s = lse_s + kQueryTile;                               // (kQueryTile)
  const int window = g.T > 1 ? round_to_int(lse[static_cast<size_t>(g.B) * g.NH * g.T]) : 0;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, gq = lane / 4, tq = lane % 4;
  const int bg = blockIdx.y, b = bg / g.NKV, kvh = bg % g.NKV;
  const int j0b = blockIdx.x * kBlockRows;
  const int w0 = j0b + warp * kRowsPerWarp;  // this warp's first key
  const int keys[2] = {w0 + gq, w0 + gq + 8};
  load_tile<kHDP, false>(k_s, qkv, j0b, kBlockRows, g.T, g.HD, [&](int t) { return g.k_at(t, b, kvh); });
  load_tile<kHDP, false>(v_s, qkv, j0b, kBlockRows, g.T, g.HD, [&](int t) { return g.v_at(t, b, kvh); });

  float dk[kHDP / 8][4], dv[kHDP / 8][4];
MEGASCALE_TC_UNROLL
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
      sync_block();
      load_tile<kHDP, false>(q_s, qkv, i0, kQueryTile, g.T, g.HD, [&](int t) { return g.q_at(t, b, h); });
      load_tile<kHDP, false>(do_s, dout, i0, kQueryTile, g.T, g.HD, [&](int t) { return g.o_at(t, b, h); });
      load_tile<kHDP, true>(qt_s, qkv, i0, kQueryTile, g.T, g.HD, [&](int t) { return g.q_at(t, b, h); });
      load_tile<kHDP, true>(dot_s, dout, i0, kQueryTile, g.T, g.HD, [&](int t) { return g.o_at(t, b, h); });
      for (int r = threadIdx.x; r < kQueryTile; r += blockDim.x) {
        const int t = i0 + r;
        lse_s[r] = t < g.T ? lse[g.row_at(b, h, t)] : 0.0f;
        D_s[r] = t < g.T ? D[g.row_at(b, h, t)] : 0.0f;
      }
      sync_block();
      // Warp-uniform skip: every query of the tile is before this warp's first
      // key, or past its last key's window.
      const int i_last = min(g.T - 1, i0 + kQueryTile - 1);
      if (w0 >= g.T || i_last < w0 || (window > 0 && i0 - window > w_last)) continue;

      float st[kQueryTile / 8][4], dpt[kQueryTile / 8][4];  // S^T = K Q^T, dP^T = V dO^T: rows keys
      two_products_nt<kHDP, kQueryTile>(st, dpt, k_s, q_s, v_s, do_s, kLd, warp * kRowsPerWarp);
MEGASCALE_TC_UNROLL
      for (int n = 0; n < kQueryTile / 8; ++n) {
MEGASCALE_TC_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int j = keys[e / 2], col = n * 8 + 2 * tq + (e & 1), i = i0 + col;
          const float p = (j < g.T && visible(i, j, g.T, window)) ? fast_exp(st[n][e] * g.scale - lse_s[col]) : 0.0f;
          st[n][e] = p;                              // P^T
          dpt[n][e] = p * (dpt[n][e] - D_s[col]);    // dS^T
        }
      }
MEGASCALE_TC_UNROLL
      for (int kk = 0; kk < kQueryTile / 16; ++kk) {
        uint32_t ap[4], ads[4];
        a_from_acc(ap, st[2 * kk], st[2 * kk + 1]);
        a_from_acc(ads, dpt[2 * kk], dpt[2 * kk + 1]);
MEGASCALE_TC_UNROLL
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
  for_each_output<kHDP>(dk, g.HD, [&](int r, int d, float v) {
    if (keys[r] < g.T) dqkv[g.k_at(keys[r], b, kvh) + d] = v * g.scale;
  });
  for_each_output<kHDP>(dv, g.HD, [&](int r, int d, float v) {
    if (keys[r] < g.T) dqkv[g.v_at(keys[r], b, kvh) + d] = v;
  });
}

