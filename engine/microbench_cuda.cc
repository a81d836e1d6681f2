// engine/microbench_cuda.cc: see microbench_cuda.h. MEGASCALE_HAVE_CUDA is
// defined for this file when the CUDA backend is built (engine/CMakeLists.txt).
#include "engine/microbench_cuda.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/device_factory.h"

#ifdef MEGASCALE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/device_cuda.h"
#endif

namespace megascale::engine {

#ifdef MEGASCALE_HAVE_CUDA
namespace {

// Median seconds of `repeats` calls of fn, each bracketed by CUDA events.
double time_calls(CudaDevice& dev, int repeats, const std::function<void()>& fn) {
  for (int i = 0; i < 2; ++i) fn();  // warm-up: cuBLASLt plans, pool growth
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(repeats));
  for (cudaEvent_t& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < repeats; ++i) {
    CUDA_CHECK(cudaEventRecord(ev[2 * i], dev.stream()));
    fn();
    CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], dev.stream()));
  }
  CUDA_CHECK(cudaEventSynchronize(ev.back()));
  std::vector<double> s(static_cast<size_t>(repeats));
  for (int i = 0; i < repeats; ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    s[i] = 1e-3 * ms;
  }
  for (cudaEvent_t e : ev) (void)cudaEventDestroy(e);
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

std::string dims(const char* layout, long m, long n, long k) {
  return fmt::format("{} {}x{}x{}", layout, m, n, k);
}

}  // namespace

CudaMicroResult run_cuda_microbenchmarks(bool quick, int repeats) {
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) throw std::invalid_argument(why);
  CudaMicroResult r;
  CudaDeviceOptions f32, b16;
  b16.precision = GemmPrecision::kBf16;
  CudaDevice fp32(f32), bf16(b16);
  r.device = fp32.device_name();
  r.compute_capability = fp32.compute_capability();
  auto buffer = [](Device& d, size_t floats) { return DeviceBuffer(d, floats * sizeof(float)); };
  auto add = [&r](const char* op, const std::string& shape, double seconds, double flops, double bytes) {
    CudaMicroPoint p;
    p.op = op;
    p.shape = shape;
    p.seconds = seconds;
    p.flops = flops;
    p.bytes = bytes;
    r.points.push_back(std::move(p));
  };

  // GEMMs: squares, then the 1B model's linear layers (tokens x out x in, "nt").
  struct G { const char* layout; long m, n, k; };
  std::vector<G> gemms = {{"nn", 4096, 4096, 4096}, {"nt", 8192, 6144, 2048}, {"nt", 8192, 2048, 2048},
                          {"nt", 8192, 8192, 2048}, {"nt", 8192, 2048, 8192}, {"nt", 8192, 50304, 2048},
                          {"tn", 2048, 8192, 8192}};
  if (!quick) gemms.push_back({"nn", 8192, 8192, 8192});
  for (CudaDevice* dev : {&bf16, &fp32}) {
    for (const G& g : gemms) {
      const bool ta = g.layout[0] == 't', tb = g.layout[1] == 't';
      DeviceBuffer a = buffer(*dev, size_t(g.m) * g.k), b = buffer(*dev, size_t(g.k) * g.n);
      DeviceBuffer c = buffer(*dev, size_t(g.m) * g.n);
      const double s = time_calls(*dev, repeats, [&] {
        dev->matmul(c.floats(), a.floats(), b.floats(), int(g.m), int(g.n), int(g.k), ta, tb, 0.0f);
      });
      add(dev == &bf16 ? "gemm_bf16" : "gemm_fp32", dims(g.layout, g.m, g.n, g.k), s, 2.0 * g.m * g.n * g.k, 0);
      CudaMicroPoint& p = r.points.back();
      p.m = g.m;
      p.n = g.n;
      p.k = g.k;
      p.layout = g.layout;
    }
  }
  // Attention at the 1B model's shape (causal: half the T x T products): the
  // flash path on the fp32 device, then the cuBLAS path on the bf16 device.
  {
    const int T = 2048, B = quick ? 1 : 4, NH = 16, HD = 128;
    const size_t qkv_n = size_t(T) * B * 3 * NH * HD, out_n = size_t(T) * B * NH * HD;
    DeviceBuffer qkv = buffer(fp32, qkv_n), out = buffer(fp32, out_n), dqkv = buffer(fp32, qkv_n);
    DeviceBuffer saved = buffer(fp32, size_t(B) * NH * T + 1);
    // fmt, not std::string's operator+: GCC 12 -O3 warns -Wrestrict (a false
    // positive) inside the inlined operator+ chain here.
    const std::string shape = fmt::format("T{} B{} NH16 HD128 causal", T, B);
    const double fwd_flops = 4.0 * B * NH * double(T) * T * HD / 2;
    double s = time_calls(fp32, repeats, [&] {
      fp32.attention_forward(out.floats(), saved.floats(), qkv.floats(), T, B, NH, NH, HD, 0);
    });
    add("attention_fwd", shape, s, fwd_flops, 0);
    s = time_calls(fp32, repeats, [&] {
      fp32.attention_backward(dqkv.floats(), out.floats(), qkv.floats(), saved.floats(), T, B, NH, NH, HD);
    });
    add("attention_bwd", shape, s, 2.5 * fwd_flops, 0);  // FlashAttention-2's 2.5x convention
    // The same shape on the bf16 device's cuBLAS path (explicit scores on
    // tensor cores; probs holds P: B * NH * T^2 floats). FLOPs are counted as
    // for the flash points (causal half, 2.5x backward), so the fractions
    // compare the useful work; the GEMMs compute the full T x T products.
    if (bf16.attention_path() == AttentionPath::kCublas) {
      DeviceBuffer qkv16 = buffer(bf16, qkv_n), out16 = buffer(bf16, out_n), dqkv16 = buffer(bf16, qkv_n);
      DeviceBuffer probs16 = buffer(bf16, size_t(B) * NH * T * T);
      s = time_calls(bf16, repeats, [&] {
        bf16.attention_forward(out16.floats(), probs16.floats(), qkv16.floats(), T, B, NH, NH, HD, 0);
      });
      add("attention_fwd_cublas", fmt::format("{} bf16", shape), s, fwd_flops, 0);
      s = time_calls(bf16, repeats, [&] {
        bf16.attention_backward(dqkv16.floats(), out16.floats(), qkv16.floats(), probs16.floats(), T, B, NH, NH,
                                HD);
      });
      add("attention_bwd_cublas", fmt::format("{} bf16", shape), s, 2.5 * fwd_flops, 0);
    }
  }
  // Memory-bound kernels at the 1B model's sizes.
  {
    const int N = 8192, C = 2048, F = 8192, V = quick ? 8192 : 50304;
    DeviceBuffer x = buffer(fp32, size_t(N) * C), y = buffer(fp32, size_t(N) * C), w = buffer(fp32, C),
                 bb = buffer(fp32, C), mean = buffer(fp32, N), rstd = buffer(fp32, N);
    double s = time_calls(fp32, repeats, [&] {
      fp32.layer_norm_forward(y.floats(), mean.floats(), rstd.floats(), x.floats(), w.floats(), bb.floats(), N, C);
    });
    add("layer_norm_fwd", "N8192 C2048", s, 0, 8.0 * N * C);
    s = time_calls(fp32, repeats, [&] {
      fp32.layer_norm_backward(x.floats(), w.floats(), bb.floats(), y.floats(), y.floats(), w.floats(),
                               mean.floats(), rstd.floats(), N, C);
    });
    add("layer_norm_bwd", "N8192 C2048", s, 0, 16.0 * N * C);
    DeviceBuffer h = buffer(fp32, size_t(N) * F), a = buffer(fp32, size_t(N) * F);
    s = time_calls(fp32, repeats, [&] { fp32.gelu_forward(a.floats(), h.floats(), size_t(N) * F); });
    add("gelu_fwd", "n 8192x8192", s, 0, 8.0 * N * F);
    s = time_calls(fp32, repeats, [&] { fp32.gelu_backward(a.floats(), h.floats(), a.floats(), size_t(N) * F); });
    add("gelu_bwd", "n 8192x8192", s, 0, 12.0 * N * F);
    DeviceBuffer logits = buffer(fp32, size_t(N) * V), dlogits = buffer(fp32, size_t(N) * V);
    DeviceBuffer mx = buffer(fp32, N), se = buffer(fp32, N), tl = buffer(fp32, N), dl = buffer(fp32, N);
    DeviceBuffer targets(fp32, size_t(N) * sizeof(int32_t));
    s = time_calls(fp32, repeats, [&] {
      fp32.cross_entropy_row_max(mx.floats(), logits.floats(), N, V);
      fp32.cross_entropy_partials(se.floats(), tl.floats(), logits.floats(), mx.floats(), targets.ints(), 0, N, V);
    });
    add("cross_entropy_fwd", "N8192 V" + std::to_string(V), s, 0, 8.0 * N * V);
    s = time_calls(fp32, repeats, [&] {
      fp32.cross_entropy_backward(dlogits.floats(), logits.floats(), mx.floats(), se.floats(), targets.ints(),
                                  dl.floats(), 0, N, V);
    });
    add("cross_entropy_bwd", "N8192 V" + std::to_string(V), s, 0, 8.0 * N * V);
  }
  {
    const size_t n = quick ? (size_t{1} << 24) : (size_t{1} << 27);  // 134M parameters per call
    DeviceBuffer p = buffer(fp32, n), m = buffer(fp32, n), v = buffer(fp32, n), g = buffer(fp32, n);
    const std::vector<Device::ShardPiece> pieces = {{0, n / 2, 0.999f}, {n / 2, n - n / 2, 1.0f}};
    Device::AdamConstants k;
    const double s = time_calls(fp32, repeats, [&] {
      fp32.adamw_step(p.floats(), m.floats(), v.floats(), g.floats(), pieces.data(), 2, k);
    });
    add("adamw", "n " + std::to_string(n), s, 0, 28.0 * double(n));
  }
  // Last, so that a fault in the newest kernel cannot take the points above
  // with it: attention at the same shape on the tensor-core flash path (bf16
  // mma.sync, kernels_attention_tc.cu). Its saved state gets the layer
  // stash's B * NH * T^2 floats, so the forward keeps its copy of O as in
  // training. A failure is reported on stderr and leaves the two points out.
  try {
    const int T = 2048, B = quick ? 1 : 4, NH = 16, HD = 128;
    const size_t qkv_n = size_t(T) * B * 3 * NH * HD, out_n = size_t(T) * B * NH * HD;
    const std::string shape = fmt::format("T{} B{} NH16 HD128 causal bf16", T, B);
    const double fwd_flops = 4.0 * B * NH * double(T) * T * HD / 2;
    CudaDeviceOptions tc_options = b16;
    tc_options.attention = AttentionPath::kFlashTc;
    CudaDevice tc(tc_options);
    DeviceBuffer qkv = buffer(tc, qkv_n), out = buffer(tc, out_n), dqkv = buffer(tc, qkv_n);
    DeviceBuffer saved = buffer(tc, size_t(B) * NH * T * T);
    double s = time_calls(tc, repeats, [&] {
      tc.attention_forward(out.floats(), saved.floats(), qkv.floats(), T, B, NH, NH, HD, 0);
    });
    add("attention_fwd_flash_tc", shape, s, fwd_flops, 0);
    s = time_calls(tc, repeats, [&] {
      tc.attention_backward(dqkv.floats(), out.floats(), qkv.floats(), saved.floats(), T, B, NH, NH, HD);
    });
    add("attention_bwd_flash_tc", shape, s, 2.5 * fwd_flops, 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megascale-micro: attention_fwd_flash_tc / attention_bwd_flash_tc not measured: %s\n",
                 e.what());
  }
  return r;
}

#else

CudaMicroResult run_cuda_microbenchmarks(bool, int) { throw std::invalid_argument(cuda_unavailable_reason()); }

#endif

std::string write_cuda_micro_report(const CudaMicroResult& r, const std::string& host, const std::string& date,
                                    double peak_tflops) {
  std::string t = "# megascale calibrate micro --device cuda: CudaDevice kernels timed with CUDA events\n"
                  "# (engine/microbench_cuda.h): median of the repeats after two warm-up calls.\n";
  t += fmt::format("[device]\nname = \"{}\"\ncompute_capability = {}\nhost = \"{}\"\ndate = \"{}\"\npeak_tflops = {:.1f}\n",
                   r.device, r.compute_capability, host, date, peak_tflops);
  for (const CudaMicroPoint& p : r.points) {
    const double tflops = p.flops > 0 && p.seconds > 0 ? p.flops / p.seconds / 1e12 : 0;
    const double gbs = p.bytes > 0 && p.seconds > 0 ? p.bytes / p.seconds / 1e9 : 0;
    t += fmt::format(
        "\n[[point]]\nop = \"{}\"\nshape = \"{}\"\nseconds = {:.9g}\nflops = {:.6g}\nbytes = {:.6g}\n"
        "achieved_tflops = {:.3f}\nachieved_gbs = {:.1f}\n",
        p.op, p.shape, p.seconds, p.flops, p.bytes, tflops, gbs);
    if (tflops > 0 && peak_tflops > 0) t += fmt::format("fraction_of_peak = {:.4f}\n", tflops / peak_tflops);
  }
  return t;
}

std::string write_cuda_gemm_sweep_csv(const CudaMicroResult& r, const std::string& host,
                                      const std::string& date) {
  std::string t = fmt::format(
      "# megascale calibrate micro --device cuda: CudaDevice::matmul timed with CUDA events\n"
      "# (engine/microbench_cuda.h), median of the repeats; device {} (sm_{}), host {}, {}.\n"
      "# bf16 rows include the casts of the fp32 operands to bf16 (what the engine pays).\n"
      "m,n,k,dtype,layout,seconds\n",
      r.device, r.compute_capability, host, date);
  for (const CudaMicroPoint& p : r.points) {
    if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.seconds <= 0) continue;
    const char* dtype = p.op == "gemm_bf16" ? "bf16" : p.op == "gemm_fp32" ? "fp32" : nullptr;
    if (dtype == nullptr) continue;
    t += fmt::format("{},{},{},{},{},{:.9g}\n", p.m, p.n, p.k, dtype, p.layout, p.seconds);
  }
  return t;
}

}  // namespace megascale::engine
