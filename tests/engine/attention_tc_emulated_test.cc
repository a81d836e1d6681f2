// tests/engine/attention_tc_emulated_test.cc: the tensor-core flash attention's
// device code (engine/cuda/attention_tc_kernels.cuh, the same source nvcc
// compiles into kernels_attention_tc.cu) run on the CPU, one std::thread per
// CUDA thread, and compared with CpuDevice. It checks, without a GPU, every
// index, mask, tile bound, shared-memory layout, fragment mapping and the
// register hand-over of P between products; what it cannot check is the
// hardware itself (that mma.sync's fragments are the PTX ISA's, which the GPU
// test tests/engine_gpu/attention_flash_tc_gpu_test.cc does on a GPU).
//
// The emulated primitives:
//  - __syncthreads: a std::barrier of the block's threads; warp shuffles and
//    mma: per-warp exchange buffers, used in turn, and a barrier of the
//    warp's lanes.
//  - mma.m16n8k16: each lane deposits its A (4 x 2 bf16) and B (2 x 2 bf16)
//    registers; every lane rebuilds the 16 x 16 A and 16 x 8 B tiles from the
//    PTX ISA's fragment layouts ("Matrix fragments for mma.m16n8k16 with
//    floating point type": g = lane / 4, t = lane % 4; A a0,a1 (g, 2t..2t+1),
//    a2,a3 (g+8, 2t..), a4,a5 (g, 2t+8..), a6,a7 (g+8, 2t+8..); B b0,b1
//    (k 2t..2t+1, n g), b2,b3 (k 2t+8.., n g); C c0,c1 (g, 2t..), c2,c3
//    (g+8, 2t..)) and adds its own four outputs in fp32.
//  - bf16: round to nearest even, as __float2bfloat16_rn.
//  - Shared memory starts filled with 0xff bytes (bf16 NaN), so a read of
//    anything the kernel did not write shows up as NaN in the results.
//
// Tolerance: as the GPU tests' bf16 one (attention_test_util.h): normwise
// error <= 2e-2 and every element within 3e-2 of max |want|, per output part.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/attention_geometry.h"
#include "engine/device_cpu.h"
#include "tests/engine_gpu/attention_test_util.h"
#include "tests/engine_gpu/gpu_test_util.h"

namespace megascale::engine::tc_emulated {
namespace {

// ---- the primitives attention_tc_kernels.cuh is written against ------------------------

constexpr int kWarp = 32;

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local Dim3 threadIdx, blockIdx;
Dim3 blockDim, gridDim;  // set before a launch's threads start, read-only while they run

struct bf16 {
  uint16_t bits;
};
bf16 to_bf16(float x) {  // round to nearest even (gpu_test_util.h's round_bf16), keep the high half
  const float r = gpu_test::round_bf16(x);
  uint32_t u;
  std::memcpy(&u, &r, sizeof u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}
float from_bf16(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
uint32_t pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(to_bf16(lo).bits) | static_cast<uint32_t>(to_bf16(hi).bits) << 16;
}
uint32_t ld32(const bf16* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);  // little-endian: p[0] in the low half, as on the GPU
  return v;
}

// One block's shared state: its barrier, its shared memory, and per warp a
// barrier and the exchange buffers of shuffles and mma.
// Two exchange buffers used in turn (the lane's `phase`): a lane writes one
// only after every lane has passed the barrier that follows their last read
// of it, so each exchange needs one barrier.
struct Warp {
  std::barrier<> sync{kWarp};
  float value[2][kWarp];
  uint32_t a[2][kWarp][4];
  uint32_t b[2][kWarp][2];
};
struct Block {
  Block(unsigned threads, size_t smem_bytes)
      : sync(static_cast<std::ptrdiff_t>(threads)), smem(smem_bytes + 16, 0xff) {
    for (unsigned w = 0; w < threads / kWarp; ++w) warps.push_back(std::make_unique<Warp>());
  }
  std::barrier<> sync;
  std::vector<unsigned char> smem;
  std::vector<std::unique_ptr<Warp>> warps;
  unsigned char* shared() {  // 16-byte aligned
    const auto p = reinterpret_cast<uintptr_t>(smem.data());
    return smem.data() + ((16 - p % 16) % 16);
  }
};
thread_local Block* current = nullptr;
thread_local unsigned phase = 0;  // which exchange buffer this lane's next warp operation uses

Warp& my_warp() { return *current->warps[threadIdx.x / kWarp]; }
unsigned my_lane() { return threadIdx.x % kWarp; }

void sync_block() { current->sync.arrive_and_wait(); }
float shfl_xor(float v, int lane_mask) {
  Warp& w = my_warp();
  const unsigned p = phase++ % 2;
  w.value[p][my_lane()] = v;
  w.sync.arrive_and_wait();
  return w.value[p][my_lane() ^ static_cast<unsigned>(lane_mask)];
}
float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += shfl_xor(v, o);
  return v;
}
float fast_exp(float x) { return std::exp(x); }
int round_to_int(float x) { return static_cast<int>(std::lrint(x)); }
float fmaxf(float a, float b) { return std::fmax(a, b); }
float logf(float x) { return std::log(x); }
int min(int a, int b) { return std::min(a, b); }

// d += a b, the warp's 16 x 16 by 16 x 8 product, from the lanes' fragments.
void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  Warp& w = my_warp();
  const unsigned lane = my_lane(), p = phase++ % 2;
  std::copy(a, a + 4, w.a[p][lane]);
  w.b[p][lane][0] = b0;
  w.b[p][lane][1] = b1;
  w.sync.arrive_and_wait();
  float A[16][16], B[16][8];
  for (unsigned l = 0; l < kWarp; ++l) {
    const unsigned g = l / 4, t = l % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = static_cast<int>(g) + (r % 2 == 1 ? 8 : 0), col = 2 * static_cast<int>(t) + (r >= 2 ? 8 : 0);
      A[row][col] = from_bf16(static_cast<uint16_t>(w.a[p][l][r] & 0xffffu));
      A[row][col + 1] = from_bf16(static_cast<uint16_t>(w.a[p][l][r] >> 16));
    }
    for (int r = 0; r < 2; ++r) {
      const int k = 2 * static_cast<int>(t) + (r == 1 ? 8 : 0);
      B[k][g] = from_bf16(static_cast<uint16_t>(w.b[p][l][r] & 0xffffu));
      B[k + 1][g] = from_bf16(static_cast<uint16_t>(w.b[p][l][r] >> 16));
    }
  }
  const int g = static_cast<int>(lane / 4), t = static_cast<int>(lane % 4);
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[e] += sum;
  }
}

using attention_test::bf16_close;
using attention_test::Case;
using attention_test::describe;
using attention_test::Inputs;
using attention_test::inputs;
using attention_test::on_cpu;
using attention_test::qkv_parts;
using attention_test::Result;
using cuda::AttentionGeometry;
using cuda::first_visible_key;

#define MEGASCALE_TC_KERNEL void
#define MEGASCALE_TC_DEVICE inline
#define MEGASCALE_TC_SHARED(name) unsigned char* name = current->shared()
#define MEGASCALE_TC_UNROLL

#include "engine/cuda/attention_tc_kernels.cuh"

#undef MEGASCALE_TC_KERNEL
#undef MEGASCALE_TC_DEVICE
#undef MEGASCALE_TC_SHARED
#undef MEGASCALE_TC_UNROLL

// Runs `kernel` on a (gx, gy) grid of `threads`-thread blocks, one block at a
// time, each CUDA thread a std::thread.
template <typename Kernel>
void launch(unsigned gx, unsigned gy, unsigned threads, size_t smem_bytes, Kernel kernel) {
  blockDim = {threads, 1, 1};
  gridDim = {gx, gy, 1};
  for (unsigned by = 0; by < gy; ++by) {
    for (unsigned bx = 0; bx < gx; ++bx) {
      Block block(threads, smem_bytes);
      std::vector<std::thread> pool;
      pool.reserve(threads);
      for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          threadIdx = {t, 0, 0};
          blockIdx = {bx, by, 0};
          current = &block;
          kernel();
        });
      }
      for (std::thread& th : pool) th.join();
    }
  }
}

// The host side of kernels_attention_tc.cu, emulated: the same grids, the
// same saved-state layout and the same order of kernels.
unsigned blocks_of(int rows) { return static_cast<unsigned>((rows + kBlockRows - 1) / kBlockRows); }

template <int kHDP>
void forward_for(float* out, float* saved, float* o_copy, const float* qkv, const Geometry& g, int window,
                 const float* window_from) {
  const size_t smem = (size_t(kBlockRows + kKeyTile) * (kHDP + kPad) + size_t(kHDP) * (kKeyTile + kPad)) * 2;
  launch(blocks_of(g.T), unsigned(g.B * g.NH), kThreads, smem,
         [&] { tc_forward_kernel<kHDP>(out, saved, o_copy, qkv, g, window, window_from); });
}
void forward(float* out, float* saved, float* o_copy, const float* qkv, const Geometry& g, int window,
             const float* window_from) {
  switch (padded_head_dim(g.HD)) {
    case 16: forward_for<16>(out, saved, o_copy, qkv, g, window, window_from); break;
    case 32: forward_for<32>(out, saved, o_copy, qkv, g, window, window_from); break;
    case 64: forward_for<64>(out, saved, o_copy, qkv, g, window, window_from); break;
    default: forward_for<128>(out, saved, o_copy, qkv, g, window, window_from); break;
  }
}
template <int kHDP>
void backward_for(float* dqkv, const float* dout, const float* qkv, const float* lse, const float* D,
                  const Geometry& g) {
  const size_t dq_smem = (size_t(2 * kBlockRows + 2 * kKeyTile) * (kHDP + kPad) + size_t(kHDP) * (kKeyTile + kPad)) * 2;
  launch(blocks_of(g.T), unsigned(g.B * g.NH), kThreads, dq_smem,
         [&] { tc_backward_dq_kernel<kHDP>(dqkv, dout, qkv, lse, D, g); });
  const size_t dkv_smem = (size_t(2 * kBlockRows + 2 * kQueryTile) * (kHDP + kPad) +
                           2 * size_t(kHDP) * (kQueryTile + kPad)) * 2 + 2 * kQueryTile * sizeof(float);
  launch(blocks_of(g.T), unsigned(g.B * g.NKV), kThreads, dkv_smem,
         [&] { tc_backward_dkv_kernel<kHDP>(dqkv, dout, qkv, lse, D, g); });
}

void expect_matches_cpu(const Case& c, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  const size_t rows = size_t(c.B) * c.NH * c.T;
  const Inputs in = inputs(c, seed);
  const std::vector<float>&qkv = in.qkv, &dout = in.dout;
  const size_t n_qkv = qkv.size(), n_out = dout.size();
  const Result want = on_cpu(c, in);  // CpuDevice: the reference
  const std::vector<float>&want_out = want.out, &want_dqkv = want.dqkv, &probs = want.probs;
  // The kernels, as launch_attention_tc_forward / _backward run them; outputs
  // start as NaN, so anything not written shows.
  const Geometry g = cuda::attention_geometry(c.T, c.B, c.NH, c.NKV, c.HD);
  const float nan = std::nanf("");
  std::vector<float> out(n_out, nan), saved(rows * c.T, nan), dqkv(n_qkv, nan);
  const size_t o_offset = saved_o_offset(c.T, c.B, c.NH, c.HD);
  forward(out.data(), saved.data(), o_offset > 0 ? saved.data() + o_offset : nullptr, qkv.data(), g, c.window,
          nullptr);
  std::vector<float> D(rows, nan), o_ws;
  const float* o = saved.data() + o_offset;
  if (o_offset == 0) {
    o_ws.assign(n_out, nan);
    forward(o_ws.data(), nullptr, nullptr, qkv.data(), g, 0, c.T > 1 ? saved.data() + rows : nullptr);
    o = o_ws.data();
  }
  launch(1, 1, 256, 0, [&] { tc_backward_d_kernel(D.data(), dout.data(), o, g); });
  switch (padded_head_dim(c.HD)) {
    case 16: backward_for<16>(dqkv.data(), dout.data(), qkv.data(), saved.data(), D.data(), g); break;
    case 32: backward_for<32>(dqkv.data(), dout.data(), qkv.data(), saved.data(), D.data(), g); break;
    case 64: backward_for<64>(dqkv.data(), dout.data(), qkv.data(), saved.data(), D.data(), g); break;
    default: backward_for<128>(dqkv.data(), dout.data(), qkv.data(), saved.data(), D.data(), g); break;
  }
  EXPECT_TRUE(bf16_close(want_out, out)) << "out";
  const auto want_parts = qkv_parts(want_dqkv, c), got_parts = qkv_parts(dqkv, c);
  EXPECT_TRUE(bf16_close(want_parts[0], got_parts[0])) << "dQ";
  EXPECT_TRUE(bf16_close(want_parts[1], got_parts[1])) << "dK";
  EXPECT_TRUE(bf16_close(want_parts[2], got_parts[2])) << "dV";
  // The saved log-sum-exps are those of the CPU's probabilities' rows:
  // lse_i = s_ij - log P_ij for any visible j, here j = i (always visible).
  double worst = 0;
  for (int b = 0; b < c.B; ++b) {
    for (int h = 0; h < c.NH; ++h) {
      for (int i = 0; i < c.T; ++i) {
        const size_t row = (size_t(b) * c.NH + h) * c.T + i;
        double s = 0;
        for (int d = 0; d < c.HD; ++d) {
          s += double(qkv[(size_t(i) * c.B + b) * g.width + size_t(h) * c.HD + d]) *
               qkv[(size_t(i) * c.B + b) * g.width + size_t(c.NH + h / g.group) * c.HD + d];
        }
        const double lse = s * g.scale - std::log(double(probs[row * c.T + i]));
        worst = std::max(worst, std::fabs(lse - saved[row]));
      }
    }
  }
  EXPECT_LT(worst, 0.05) << "log-sum-exp (bf16 scores: a few 1e-3 expected)";
}

// MHA and GQA, full causal and windows (inside a tile, across key tiles),
// T = 1 and 2 (no room for the O copy: the backward recomputes it), several
// query and key tiles, every padded head dimension (HD 8 and 7 -> 16,
// 24 -> 32, 40 -> 64, 96 -> 128), odd sizes. Sized to run in seconds: each
// CUDA thread is an OS thread.
TEST(AttentionTcEmulated, MatchesCpuDevice) {
  const std::vector<Case> cases = {{1, 1, 1, 1, 8, 0},   {2, 2, 2, 1, 24, 0},   {33, 1, 4, 2, 40, 5},
                                   {100, 1, 2, 2, 7, 70}, {67, 1, 2, 1, 96, 0}};
  uint32_t seed = 41;
  for (const Case& c : cases) {
    expect_matches_cpu(c, seed);
    seed += 2;
  }
}

}  // namespace
}  // namespace megascale::engine::tc_emulated
