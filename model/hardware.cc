// model/hardware.cc: kernel-time models over a profile (the profiles themselves
// are data: calibrate/profiles/*.toml, read by model/profile.h).
#include "model/hardware.h"

#include "model/profile.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <unordered_map>

namespace megascale::model {
namespace {

constexpr double kGB = 1e9;

// NCCL bus bandwidth over one NIC as a fraction of its line rate: 24 GB/s of
// 25 GB/s for 200G HDR, 46-49 of 50 for 400G NDR (REFERENCE.md).
constexpr double kNicProtocolEfficiency = 0.96;

// CTA tile shapes cuBLAS/CUTLASS choose among for bf16 tensor-core GEMMs on
// Ampere/Hopper, with the relative peak each reaches (smaller tiles reuse less
// data per load; CUTLASS profiler sweeps on A100 show 128x128 ~5% and 64x128
// ~15% below the 256x128 tiles on large problems).
struct Tile {
  int m;
  int n;
  double relative_peak;
};
constexpr std::array<Tile, 5> kTiles = {{
    {256, 128, 1.00}, {128, 256, 1.00}, {128, 128, 0.95}, {64, 128, 0.85}, {64, 64, 0.70}}};

// Main-loop prologue/epilogue of a CTA costs about this many K elements of work
// (two pipeline stages of 32), so short-K GEMMs (e.g. attention BMMs with head
// dim 64-128) lose efficiency: factor k / (k + kShortKPenalty).
constexpr double kShortKPenalty = 64.0;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Split-K (cuBLAS heuristics, CUTLASS split-K / stream-K): when a problem has
// too few output tiles to fill the SMs, the K loop is divided among up to
// kMaxSplitK CTAs per tile, each slice at least kMinSliceK long, and the fp32
// partial tiles are reduced through HBM afterwards.
constexpr int kMaxSplitK = 4;
constexpr int64_t kMinSliceK = 256;

// Time of the compute part of `batch` GEMMs (m, n, k): best over tile shapes and
// split-K factors of (quantised compute time + split-K reduction traffic).
double gemm_compute_time_s(const GpuProfile& gpu, int64_t batch, int64_t m, int64_t n,
                           int64_t k) {
  const double flops = 2.0 * batch * m * n * k;
  double best_s = 0;
  for (const Tile& t : kTiles) {
    for (int split = 1; split <= kMaxSplitK; ++split) {
      if (split > 1 && k / split < kMinSliceK) break;
      const int64_t ctas = batch * ceil_div(m, t.m) * ceil_div(n, t.n) * split;
      const int64_t waves = ceil_div(ctas, gpu.sm_count);
      // Useful work over the work the SMs are occupied for: tile + wave quantisation.
      const double occupancy = static_cast<double>(batch) * m * n * split /
                               (static_cast<double>(waves) * gpu.sm_count * t.m * t.n);
      const double slice_k = static_cast<double>(k) / split;
      const double short_k = slice_k / (slice_k + kShortKPenalty);
      const double eff = gpu.max_gemm_efficiency * t.relative_peak * occupancy * short_k;
      double s = flops / (gpu.peak_tflops * 1e12 * eff);
      if (split > 1) {
        // Partial fp32 tiles written by every slice, read back by the reduction.
        const double partial_bytes = 2.0 * 4.0 * batch * m * n * split;
        s += partial_bytes / (gpu.memory_gbs * kGB * gpu.memory_efficiency);
      }
      if (best_s == 0 || s < best_s) best_s = s;
    }
  }
  return best_s;
}

// gemm_compute_time_s remembered per thread: a search evaluates the same few
// GEMM shapes for thousands of layouts. The key is every input the result
// depends on; the table is emptied when it grows past kGemmMemoEntries.
constexpr size_t kGemmMemoEntries = 1 << 14;

struct GemmKey {
  int sm_count;
  double peak, max_efficiency, memory_gbs, memory_efficiency;
  int64_t batch, m, n, k;
  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& g) const {
    uint64_t h = 1469598103934665603ULL;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
    mix(static_cast<uint64_t>(g.sm_count));
    mix(std::bit_cast<uint64_t>(g.peak));
    mix(std::bit_cast<uint64_t>(g.max_efficiency));
    mix(std::bit_cast<uint64_t>(g.memory_gbs));
    mix(std::bit_cast<uint64_t>(g.memory_efficiency));
    mix(static_cast<uint64_t>(g.batch));
    mix(static_cast<uint64_t>(g.m));
    mix(static_cast<uint64_t>(g.n));
    mix(static_cast<uint64_t>(g.k));
    return static_cast<size_t>(h);
  }
};

double gemm_compute_time_memo_s(const GpuProfile& gpu, int64_t batch, int64_t m, int64_t n, int64_t k) {
  thread_local std::unordered_map<GemmKey, double, GemmKeyHash> memo;
  const GemmKey key{gpu.sm_count, gpu.peak_tflops, gpu.max_gemm_efficiency, gpu.memory_gbs, gpu.memory_efficiency,
                    batch, m, n, k};
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  if (memo.size() >= kGemmMemoEntries) memo.clear();
  const double s = gemm_compute_time_s(gpu, batch, m, n, k);
  memo.emplace(key, s);
  return s;
}

}  // namespace

const GpuProfile& gpu_profile(const std::string& name) { return builtin_profile(name); }

std::vector<std::string> gpu_profile_names() { return builtin_profile_names(); }

double nic_busbw_gbs(double nic_gbps) { return nic_gbps / 8.0 * kNicProtocolEfficiency; }

double batched_gemm_time_s(const GpuProfile& gpu, int64_t batch, int64_t m, int64_t n,
                           int64_t k) {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return 0.0;
  // A measured GEMM table (calibrate import of a sweep, calibrate micro)
  // replaces the roofline.
  if (const ProfileTables* t = gpu.measured(); t != nullptr && !t->gemm.empty()) {
    return static_cast<double>(batch) * t->gemm.time_s(m, n, k, "any", gpu.busy_ranks, gpu.cold_fraction);
  }
  const double compute_s = gemm_compute_time_memo_s(gpu, batch, m, n, k);
  const double bytes = 2.0 * batch * (static_cast<double>(m) * k + static_cast<double>(k) * n +
                                      static_cast<double>(m) * n);
  const double memory_s = memory_time_s(gpu, bytes);
  return std::max(std::max(compute_s, memory_s) + gpu.gemm_overhead_us * 1e-6, gpu.kernel_launch_us * 1e-6);
}

double gemm_time_s(const GpuProfile& gpu, int64_t m, int64_t n, int64_t k,
                   double* efficiency) {
  const double t = batched_gemm_time_s(gpu, 1, m, n, k);
  if (efficiency != nullptr) {
    *efficiency = t > 0 ? 2.0 * m * n * k / (t * gpu.peak_tflops * 1e12) : 0.0;
  }
  return t;
}

double fp8_gemm_time_s(const GpuProfile& gpu, int64_t m, int64_t n, int64_t k, double speedup) {
  if (speedup == 1.0) return gemm_time_s(gpu, m, n, k);
  if (m <= 0 || n <= 0 || k <= 0) return 0.0;
  if (const ProfileTables* t = gpu.measured(); t != nullptr && !t->gemm.empty()) {
    return t->gemm.time_s(m, n, k, "any", gpu.busy_ranks, gpu.cold_fraction) / speedup;
  }
  const double compute_s = gemm_compute_time_memo_s(gpu, 1, m, n, k) / speedup;
  const double bytes = static_cast<double>(m) * k + static_cast<double>(k) * n + 2.0 * m * n;
  return std::max(std::max(compute_s, memory_time_s(gpu, bytes)) + gpu.gemm_overhead_us * 1e-6,
                  gpu.kernel_launch_us * 1e-6);
}

double memory_time_s(const GpuProfile& gpu, double bytes) {
  if (bytes <= 0) return 0.0;
  const double s = bytes / (gpu.memory_gbs * kGB * gpu.memory_efficiency);
  return std::max(s, gpu.kernel_launch_us * 1e-6);
}

double flash_attention_time_s(const GpuProfile& gpu, double flops, bool backward, FlashKernel kernel) {
  if (flops <= 0) return 0.0;
  double eff = backward ? gpu.flash_bwd_efficiency : gpu.flash_fwd_efficiency;
  const double fused_eff = backward ? gpu.fused_attention_bwd_efficiency : gpu.fused_attention_fwd_efficiency;
  if (kernel == FlashKernel::kFused && fused_eff > 0) eff = fused_eff;
  if (kernel == FlashKernel::kTriton) eff /= backward ? kTritonFlashBwdSlowdown : kTritonFlashFwdSlowdown;
  return std::max(flops / (gpu.peak_tflops * 1e12 * eff), gpu.kernel_launch_us * 1e-6);
}

}  // namespace megascale::model
