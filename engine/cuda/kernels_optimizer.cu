// engine/cuda/kernels_optimizer.cu: AdamW and LAMB as multi-tensor kernels over
// the pieces of a ZeRO shard (apex's multi_tensor_apply idea: one launch for
// all tensors; each thread block takes a fixed chunk of one piece, found by a
// binary search of its block index in the table), plus per-piece sums of
// squares for the norms.
//
// The per-element arithmetic is CpuDevice's (engine/device_cpu.cc), so fp32
// results match it up to sqrt / division rounding and nvcc's fused
// multiply-adds. The sums are doubles, reduced per block, then per piece over
// its blocks in block order: the same bits on every run.
#include <cstring>

#include "engine/cuda/common.cuh"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace megascale::engine::cuda {
namespace {

constexpr int kPerThread = 8;                          // elements per thread per block
constexpr size_t kPerBlock = size_t{kBlock} * kPerThread;  // 2048 elements per block

struct Entry {        // the device-side table: one per piece
  size_t begin;
  size_t size;
  float coef;
  int first_block;    // blocks of earlier pieces
  int blocks;
};

// The piece of block `blk` (table sorted by first_block; every piece has >= 1 block).
__device__ int find_piece(const Entry* table, int count, int blk) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table[mid].first_block <= blk) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// The [from, to) element range (into the shard) this block covers.
struct Span {
  int piece;
  size_t from, to;
};
__device__ Span block_span(const Entry* table, int count) {
  Span s;
  s.piece = find_piece(table, count, static_cast<int>(blockIdx.x));
  const Entry& e = table[s.piece];
  const size_t local = static_cast<size_t>(static_cast<int>(blockIdx.x) - e.first_block) * kPerBlock;
  s.from = e.begin + local;
  s.to = e.begin + min(e.size, local + kPerBlock);
  return s;
}

__global__ void sum_squares_kernel(double* block_sums, const float* x, const Entry* table, int count) {
  __shared__ double shared[kWarp];
  const Span sp = block_span(table, count);
  double s = 0;
  for (size_t j = sp.from + threadIdx.x; j < sp.to; j += blockDim.x) s += static_cast<double>(x[j]) * x[j];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) block_sums[blockIdx.x] = s;
}

// One block per piece: sums[piece * stride + offset] = sum over its blocks of
// block_sums[block * stride + offset], strided in a fixed order.
__global__ void piece_sums_kernel(double* sums, const double* block_sums, const Entry* table, int stride,
                                  int offset) {
  __shared__ double shared[kWarp];
  const Entry& e = table[blockIdx.x];
  double s = 0;
  for (int k = threadIdx.x; k < e.blocks; k += blockDim.x) {
    s += block_sums[static_cast<size_t>(e.first_block + k) * stride + offset];
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) sums[static_cast<size_t>(blockIdx.x) * stride + offset] = s;
}

__global__ void adamw_kernel(float* p, float* m, float* v, const float* g, const Entry* table, int count,
                             AdamConsts k) {
  const Span sp = block_span(table, count);
  const float decay = table[sp.piece].coef;
  for (size_t j = sp.from + threadIdx.x; j < sp.to; j += blockDim.x) {
    const float gj = g[j] * k.clip;
    const float mj = k.beta1 * m[j] + k.one_minus_beta1 * gj;
    const float vj = k.beta2 * v[j] + k.one_minus_beta2 * gj * gj;
    m[j] = mj;
    v[j] = vj;
    float pj = p[j] * decay;
    pj -= k.step_size * mj / (sqrtf(vj) / k.bc2_sqrt + k.eps);
    p[j] = pj;
  }
}

// block_sums: (blocks, 2) = [||p||^2, ||u||^2] of the block's span.
__global__ void lamb_direction_kernel(float* u, float* m, float* v, const float* p, const float* g,
                                      const Entry* table, int count, AdamConsts k, double* block_sums) {
  __shared__ double shared[kWarp];
  const Span sp = block_span(table, count);
  const float wd = table[sp.piece].coef;
  double p2 = 0, u2 = 0;
  for (size_t j = sp.from + threadIdx.x; j < sp.to; j += blockDim.x) {
    const float gj = g[j] * k.clip;
    const float mj = k.beta1 * m[j] + k.one_minus_beta1 * gj;
    const float vj = k.beta2 * v[j] + k.one_minus_beta2 * gj * gj;
    m[j] = mj;
    v[j] = vj;
    const float uj = (mj / k.bc1) / (sqrtf(vj / k.bc2) + k.eps) + wd * p[j];
    u[j] = uj;
    p2 += static_cast<double>(p[j]) * p[j];
    u2 += static_cast<double>(uj) * uj;
  }
  p2 = block_sum(p2, shared);
  u2 = block_sum(u2, shared);
  if (threadIdx.x == 0) {
    block_sums[2 * static_cast<size_t>(blockIdx.x)] = p2;
    block_sums[2 * static_cast<size_t>(blockIdx.x) + 1] = u2;
  }
}

__global__ void lamb_apply_kernel(float* p, const float* u, const Entry* table, int count) {
  const Span sp = block_span(table, count);
  const float scale = table[sp.piece].coef;
  for (size_t j = sp.from + threadIdx.x; j < sp.to; j += blockDim.x) p[j] -= scale * u[j];
}

const Entry* entries(const void* device_table) { return static_cast<const Entry*>(device_table); }

}  // namespace

PiecePlan plan_pieces(const Piece* host, int count) {
  PiecePlan plan;
  size_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    if (host[i].size > 0) {
      ++plan.count;
      blocks += (host[i].size + kPerBlock - 1) / kPerBlock;
    }
  }
  if (blocks > 0x7fffffffu) throw std::runtime_error("optimizer shard too large for one launch");
  plan.blocks = static_cast<int>(blocks);
  plan.table_bytes = static_cast<size_t>(plan.count) * sizeof(Entry);
  return plan;
}

void make_piece_table(void* host_table, const Piece* host, int count) {
  int first = 0, at = 0;
  for (int i = 0; i < count; ++i) {
    if (host[i].size == 0) continue;
    Entry e;
    e.begin = host[i].begin;
    e.size = host[i].size;
    e.coef = host[i].coef;
    e.first_block = first;
    e.blocks = static_cast<int>((host[i].size + kPerBlock - 1) / kPerBlock);
    first += e.blocks;
    std::memcpy(static_cast<char*>(host_table) + static_cast<size_t>(at++) * sizeof(Entry), &e, sizeof e);
  }
}

void launch_sum_squares(double* sums, const float* x, const void* device_table, const PiecePlan& plan,
                        double* ws_double, cudaStream_t s) {
  if (plan.count == 0) return;
  sum_squares_kernel<<<plan.blocks, kBlock, 0, s>>>(ws_double, x, entries(device_table), plan.count);
  CUDA_CHECK_LAUNCH();
  piece_sums_kernel<<<plan.count, kBlock, 0, s>>>(sums, ws_double, entries(device_table), 1, 0);
  CUDA_CHECK_LAUNCH();
}

void launch_adamw(float* p, float* m, float* v, const float* g, const void* device_table,
                  const PiecePlan& plan, const AdamConsts& k, cudaStream_t s) {
  if (plan.count == 0) return;
  adamw_kernel<<<plan.blocks, kBlock, 0, s>>>(p, m, v, g, entries(device_table), plan.count, k);
  CUDA_CHECK_LAUNCH();
}

void launch_lamb_direction(float* u, float* m, float* v, const float* p, const float* g,
                           const void* device_table, const PiecePlan& plan, const AdamConsts& k,
                           double* sums, double* ws_double, cudaStream_t s) {
  if (plan.count == 0) return;
  lamb_direction_kernel<<<plan.blocks, kBlock, 0, s>>>(u, m, v, p, g, entries(device_table), plan.count, k,
                                                       ws_double);
  CUDA_CHECK_LAUNCH();
  piece_sums_kernel<<<plan.count, kBlock, 0, s>>>(sums, ws_double, entries(device_table), 2, 0);
  CUDA_CHECK_LAUNCH();
  piece_sums_kernel<<<plan.count, kBlock, 0, s>>>(sums, ws_double, entries(device_table), 2, 1);
  CUDA_CHECK_LAUNCH();
}

void launch_lamb_apply(float* p, const float* u, const void* device_table, const PiecePlan& plan,
                       cudaStream_t s) {
  if (plan.count == 0) return;
  lamb_apply_kernel<<<plan.blocks, kBlock, 0, s>>>(p, u, entries(device_table), plan.count);
  CUDA_CHECK_LAUNCH();
}

}  // namespace megascale::engine::cuda
