// engine/cuda/common.cuh: what the .cu files share — launch geometry and warp /
// block reductions (after llm.c's llmc/cuda_common.h and cuda_utils.cuh:
// warpReduceSum with __shfl_xor_sync, one partial per warp in shared memory).
//
// defines: kBlock, kWarp, grid_for, warp_sum, warp_max, block_sum, block_max.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace megascale::engine::cuda {

constexpr int kWarp = 32;    // threads per warp on every NVIDIA GPU so far
constexpr int kBlock = 256;  // threads per block of the elementwise kernels: 8 warps
constexpr unsigned kFullMask = 0xffffffffu;

// Blocks of `block` threads covering n elements, capped for grid-stride loops
// (2^31 - 1 is the x-dimension limit; 65535 * 8 blocks keep every SM busy).
inline unsigned grid_for(size_t n, int block = kBlock) {
  const size_t blocks = (n + static_cast<size_t>(block) - 1) / static_cast<size_t>(block);
  const size_t cap = 65535u * 8u;
  return static_cast<unsigned>(blocks == 0 ? 1 : (blocks < cap ? blocks : cap));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets
// the result. `shared` holds 32 values. The order is fixed by the launch shape,
// so results are reproducible.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  return warp_sum(total);
}

__device__ inline float block_max(float v, float* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = lane < warps ? shared[lane] : -INFINITY;
  return warp_max(m);
}

}  // namespace megascale::engine::cuda
