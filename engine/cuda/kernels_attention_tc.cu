// engine/cuda/kernels_attention_tc.cu: causal / sliding-window attention with
// GQA, flash style on tensor cores (CudaDevice's AttentionPath::kFlashTc):
// FlashAttention-2's tiling (Dao 2023, arXiv 2307.08691: queries split over
// the warps of a block, an online softmax kept in registers, scores never
// written to memory) with bf16 operands and fp32 accumulation.
//
// The device code is attention_tc_kernels.cuh, written against the primitives
// defined below (tests/engine/attention_tc_emulated_test.cc runs the same
// source on the CPU); this file is the CUDA side and the host launchers.
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

#include "engine/cuda/attention_geometry.h"
#include "engine/cuda/common.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace megascale::engine::cuda {
namespace {

// ---- the primitives attention_tc_kernels.cuh is written against -----------------------

using bf16 = __nv_bfloat16;

#define MEGASCALE_TC_KERNEL __global__ void __launch_bounds__(kThreads)
#define MEGASCALE_TC_DEVICE __device__ __forceinline__
#define MEGASCALE_TC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#define MEGASCALE_TC_UNROLL _Pragma("unroll")

__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16_rn(x); }
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t ld32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) { return __shfl_xor_sync(kFullMask, v, lane_mask); }
__device__ __forceinline__ void sync_block() { __syncthreads(); }
__device__ __forceinline__ float fast_exp(float x) { return __expf(x); }
__device__ __forceinline__ int round_to_int(float x) { return __float2int_rn(x); }

// d += a b on one 16 x 8 tile.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // CudaDevice refuses AttentionPath::kFlashTc below sm_80 (device_cuda.cc)
#endif
}

#include "engine/cuda/attention_tc_kernels.cuh"

// ---- host side -----------------------------------------------------------------------

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

// Allows `bytes` of dynamic shared memory (above the 48 KiB default needs the
// opt-in), once per kernel: the first launch sets it, the later ones skip it.
// (One process drives one GPU in the engine, so one setting per kernel holds.)
// The kernel is a template argument, so each kernel has its own flag (the dQ
// and dK/dV kernels share one signature).
template <auto kKernel>
void allow_smem(size_t bytes) {
  static const bool set = [&] {
    CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    return true;
  }();
  (void)set;
}

template <int kHDP>
void forward_for(float* out, float* saved, float* o_copy, const float* qkv, const Geometry& g, int window,
                 const float* window_from, cudaStream_t s) {
  const size_t smem = forward_smem_bytes<kHDP>();
  allow_smem<tc_forward_kernel<kHDP>>(smem);
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
  allow_smem<tc_backward_dq_kernel<kHDP>>(dq_smem);
  tc_backward_dq_kernel<kHDP><<<dim3(blocks_of(g.T), static_cast<unsigned>(g.B * g.NH)), kThreads, dq_smem, s>>>(
      dqkv, dout, qkv, lse, D, g);
  CUDA_CHECK_LAUNCH();
  const size_t dkv_smem = dkv_smem_bytes<kHDP>();
  allow_smem<tc_backward_dkv_kernel<kHDP>>(dkv_smem);
  tc_backward_dkv_kernel<kHDP><<<dim3(blocks_of(g.T), static_cast<unsigned>(g.B * g.NKV)), kThreads, dkv_smem, s>>>(
      dqkv, dout, qkv, lse, D, g);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t attention_tc_saved_o_offset(int T, int B, int NH, int HD) { return saved_o_offset(T, B, NH, HD); }

void launch_attention_tc_forward(float* out, float* saved, const float* qkv, int T, int B, int NH, int NKV, int HD,
                                 int window, cudaStream_t s) {
  check_attention_shape("tensor-core flash path", T, B, NH, NKV, HD);
  const Geometry g = attention_geometry(T, B, NH, NKV, HD);
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
  check_attention_shape("tensor-core flash path", T, B, NH, NKV, HD);
  const Geometry g = attention_geometry(T, B, NH, NKV, HD);
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
