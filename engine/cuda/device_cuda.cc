// engine/cuda/device_cuda.cc: CudaDevice — memory, cuBLASLt GEMMs, and the
// dispatch of every other kernel to engine/cuda/kernels.h.
#include "engine/cuda/device_cuda.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "engine/cuda/attention_gemms.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/event_timer.h"
#include "engine/cuda/kernels.h"

namespace megascale::engine {
namespace {

cublasLtHandle_t lt_handle(void* p) { return static_cast<cublasLtHandle_t>(p); }
cublasHandle_t blas(void* p) { return static_cast<cublasHandle_t>(p); }

// Largest power of two dividing the address, capped at 256 bytes (cuBLASLt's
// default assumption, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES): the GEMM
// heuristics then pick only algorithms valid for the actual pointers (the
// layers pass sub-arrays aligned to 64 bytes, engine/layers.h BufferLayout).
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

int local_rank_from_env() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK", "SLURM_LOCALID"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

bool is_host_pointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error of an unknown pointer
    return true;
  }
  return attr.type == cudaMemoryTypeUnregistered || attr.type == cudaMemoryTypeHost;
}

}  // namespace

std::string cuda_device_unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA driver or device (") + cudaGetErrorName(err) + ": " +
           cudaGetErrorString(err) + ")";
  }
  if (count == 0) return "no CUDA device is visible (cudaGetDeviceCount returned 0)";
  return "";
}

// One cached cuBLASLt plan per (shape, layout, precision, epilogue, alignments).
struct CudaDevice::GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~GemmPlan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

CudaDevice::CudaDevice(const CudaDeviceOptions& options) : options_(options) {
  attention_path_ = options_.attention != AttentionPath::kAuto ? options_.attention
                    : options_.precision == GemmPrecision::kBf16 ? AttentionPath::kCublas
                                                                 : AttentionPath::kFlash;
  const std::string why = cuda_device_unavailable_reason();
  if (!why.empty()) throw std::runtime_error("CudaDevice: " + why);
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  ordinal_ = options_.ordinal >= 0 ? options_.ordinal : local_rank_from_env() % count;
  if (ordinal_ >= count) {
    throw std::runtime_error("CudaDevice: device " + std::to_string(ordinal_) + " requested, " +
                             std::to_string(count) + " visible");
  }
  CUDA_CHECK(cudaSetDevice(ordinal_));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
  device_name_ = prop.name;
  compute_capability_ = prop.major * 10 + prop.minor;
  if (attention_path_ == AttentionPath::kFlashTc && compute_capability_ < 80) {
    // kernels_attention_tc.cu runs bf16 mma.sync, which needs sm_80 (Ampere) or later.
    throw std::runtime_error("CudaDevice: attention \"flash-tc\" needs compute capability 8.0 or later (bf16 "
                             "mma.sync); " + device_name_ + " has " + std::to_string(prop.major) + "." +
                             std::to_string(prop.minor) + ": use attention \"flash\" or \"cublas\"");
  }
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // Keep freed blocks in the pool (the default threshold 0 hands them back to
  // the driver at every synchronisation, making each allocation a real one).
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, ordinal_));
  uint64_t threshold = std::numeric_limits<uint64_t>::max();
  CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  cublasLtHandle_t h = nullptr;
  CUBLAS_CHECK(cublasLtCreate(&h));
  lt_ = h;
}

CudaDevice::~CudaDevice() {
  // No throwing from a destructor: report nothing, release what we can.
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  plans_.clear();
  if (blas_ != nullptr) (void)cublasDestroy(blas(blas_));
  for (Buffer& b : slots_) {
    if (b.ptr != nullptr) (void)cudaFreeAsync(b.ptr, stream_);
  }
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_handle(lt_));
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

void* CudaDevice::workspace(Slot slot, size_t bytes) {
  Buffer& b = slots_[slot];
  if (b.bytes < bytes) {
    if (b.ptr != nullptr) CUDA_CHECK(cudaFreeAsync(b.ptr, stream_));
    const size_t grown = std::max(bytes, b.bytes + b.bytes / 2);
    CUDA_CHECK(cudaMallocAsync(&b.ptr, grown, stream_));
    b.bytes = grown;
  }
  return b.ptr;
}

// ---- memory -------------------------------------------------------------------------

void* CudaDevice::allocate(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  CUDA_CHECK(cudaMallocAsync(&p, rounded, stream_));
  CUDA_CHECK(cudaMemsetAsync(p, 0, rounded, stream_));
  return p;
}

void CudaDevice::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  // Called from destructors (DeviceBuffer): never throw.
  if (cudaFreeAsync(ptr, stream_) != cudaSuccess) (void)cudaGetLastError();
}

void CudaDevice::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaDevice::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaDevice::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  // cudaMemcpyDefault: unified addressing tells the direction; a host buffer
  // (tests may pass one) also gets the synchronisation of the host copies.
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  if (is_host_pointer(dst) || is_host_pointer(src)) CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaDevice::fill_zero(void* ptr, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
}

void CudaDevice::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::unique_ptr<OpTimer> CudaDevice::make_op_timer() { return std::make_unique<CudaEventTimer>(stream_); }

// ---- GEMM ---------------------------------------------------------------------------
//
// Row-major c (M, N) = op(a) (M, K) op(b) (K, N) is, read column-major,
// c^T (N, M) = op(b)^T (N, K) op(a)^T (K, M): cuBLASLt's A is our b and its B
// our a, with m = N, n = M, k = K. A row-major array read column-major is its
// transpose, so b (K, N) needs no transpose and b stored (N, K) (trans_b) does;
// likewise a. The bias epilogue adds a vector of length m = N to every column
// of the column-major result: every row of c.

void CudaDevice::gemm(float* c, const float* a, const float* b, const float* bias, int M, int N,
                      int K, bool trans_a, bool trans_b, float beta) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    const size_t n = static_cast<size_t>(M) * N;
    if (beta == 0.0f) fill_zero(c, n * sizeof(float)); else cuda::launch_scale(c, beta, n, stream_);
    if (bias != nullptr) cuda::launch_bias_add(c, bias, M, N, stream_);
    return;
  }
  const bool bf16 = options_.precision == GemmPrecision::kBf16;
  const void* lt_a = b;  // cuBLASLt's A
  const void* lt_b = a;  // cuBLASLt's B
  if (bf16) {
    const size_t na = static_cast<size_t>(M) * K, nb = static_cast<size_t>(K) * N;
    void* a16 = workspace(kBf16A, na * 2);
    void* b16 = workspace(kBf16B, nb * 2);
    cuda::launch_to_bf16(a16, a, na, stream_);
    cuda::launch_to_bf16(b16, b, nb, stream_);
    lt_a = b16;
    lt_b = a16;
  }
  const GemmKey key{M, N, K, trans_a, trans_b, bias != nullptr, bf16 ? 1 : 0, alignment_of(lt_a),
                    alignment_of(lt_b), alignment_of(c), bias != nullptr ? alignment_of(bias) : 0u};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto plan = std::make_unique<GemmPlan>();
    const cudaDataType_t in_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    if (bias != nullptr) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
      const cudaDataType_t bias_type = CUDA_R_32F;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                  sizeof bias_type));
    }
    // Layouts (column-major): A is (N x K) or, transposed, stored (K x N); B
    // is (K x M) or stored (M x K); C = D is (N x M).
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, in_type, trans_b ? K : N, trans_b ? N : K, trans_b ? K : N));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, in_type, trans_a ? M : K, trans_a ? K : M, trans_a ? M : K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_32F, N, M, N));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = options_.cublas_workspace_bytes;
    const uint32_t al_a = std::get<7>(key), al_b = std::get<8>(key), al_c = std::get<9>(key);
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                             sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = cublasLtMatmulAlgoGetHeuristic(lt_handle(lt_), plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1,
                                          &result, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st);
    if (found == 0) {
      throw std::runtime_error("cuBLASLt has no algorithm for the GEMM M " + std::to_string(M) + " N " +
                               std::to_string(N) + " K " + std::to_string(K) + (bf16 ? " (bf16)" : " (fp32)") +
                               (bias != nullptr ? " with bias epilogue" : ""));
    }
    plan->algo = result.algo;
    it = plans_.emplace(key, std::move(plan)).first;
  }
  GemmPlan& plan = *it->second;
  if (bias != nullptr) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  const float alpha = 1.0f;
  void* ws = workspace(kCublas, options_.cublas_workspace_bytes);
  CUBLAS_CHECK(cublasLtMatmul(lt_handle(lt_), plan.desc, &alpha, lt_a, plan.a, lt_b, plan.b, &beta, c, plan.c, c,
                              plan.c, &plan.algo, ws, options_.cublas_workspace_bytes, stream_));
}

void CudaDevice::matmul(float* c, const float* a, const float* b, int M, int N, int K, bool trans_a,
                        bool trans_b, float beta) {
  gemm(c, a, b, nullptr, M, N, K, trans_a, trans_b, beta);
}

void CudaDevice::matmul_bias(float* c, const float* a, const float* b, const float* bias, int M, int N,
                             int K, bool trans_a, bool trans_b) {
  gemm(c, a, b, bias, M, N, K, trans_a, trans_b, 0.0f);
}

// ---- the other kernels: engine/cuda/kernels.h ---------------------------------------

void CudaDevice::add(float* out, const float* a, const float* b, size_t n) {
  cuda::launch_add(out, a, b, n, stream_);
}
void CudaDevice::bias_add(float* out, const float* bias, int N, int OC) {
  cuda::launch_bias_add(out, bias, N, OC, stream_);
}
void CudaDevice::bias_backward(float* dbias, const float* dout, int N, int OC) {
  float* ws = static_cast<float*>(workspace(kScratch, cuda::column_sum_workspace_floats(N, OC) * sizeof(float)));
  cuda::launch_bias_backward(dbias, dout, N, OC, ws, stream_);
}
void CudaDevice::bias_residual_add(float* out, const float* residual, const float* y, const float* bias,
                                   const float* bias2, int N, int C) {
  cuda::launch_bias_residual_add(out, residual, y, bias, bias2, N, C, stream_);
}

void CudaDevice::layer_norm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                    const float* bias, int N, int C) {
  cuda::launch_layer_norm_forward(out, mean, rstd, inp, weight, bias, N, C, stream_);
}
void CudaDevice::layer_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* mean, const float* rstd,
                                     int N, int C) {
  float* ws = static_cast<float*>(
      workspace(kScratch, 2 * cuda::column_sum_workspace_floats(N, C) * sizeof(float)));
  cuda::launch_layer_norm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, ws, stream_);
}

void CudaDevice::gelu_forward(float* out, const float* inp, size_t n) {
  cuda::launch_gelu_forward(out, inp, n, stream_);
}
void CudaDevice::gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  cuda::launch_gelu_backward(dinp, inp, dout, n, stream_);
}
void CudaDevice::swiglu_forward(float* out, const float* inp, int N, int F) {
  cuda::launch_swiglu_forward(out, inp, N, F, stream_);
}
void CudaDevice::swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) {
  cuda::launch_swiglu_backward(dinp, inp, dout, N, F, stream_);
}

void CudaDevice::softmax_forward(float* out, const float* inp, int N, int V) {
  cuda::launch_softmax_forward(out, inp, N, V, stream_);
}
void CudaDevice::softmax_backward(float* dinp, const float* out, const float* dout, int N, int V) {
  cuda::launch_softmax_backward(dinp, out, dout, N, V, stream_);
}

void CudaDevice::attention_forward(float* out, float* probs, const float* qkv, int T, int B, int NH, int NKV,
                                   int HD, int window) {
  if (attention_path_ == AttentionPath::kCublas) {
    cublas_attention_forward(out, probs, qkv, T, B, NH, NKV, HD, window);
    return;
  }
  if (attention_path_ == AttentionPath::kFlashTc) {
    cuda::launch_attention_tc_forward(out, probs, qkv, T, B, NH, NKV, HD, window, stream_);
    return;
  }
  cuda::launch_attention_forward(out, probs, qkv, T, B, NH, NKV, HD, window, stream_);
}
void CudaDevice::attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs, int T,
                                    int B, int NH, int NKV, int HD) {
  if (attention_path_ == AttentionPath::kCublas) {
    cublas_attention_backward(dqkv, dout, qkv, probs, T, B, NH, NKV, HD);
    return;
  }
  if (attention_path_ == AttentionPath::kFlashTc) {
    float* ws = static_cast<float*>(
        workspace(kScratch, cuda::attention_tc_backward_workspace_floats(T, B, NH, HD) * sizeof(float)));
    cuda::launch_attention_tc_backward(dqkv, dout, qkv, probs, T, B, NH, NKV, HD, ws, stream_);
    return;
  }
  float* ws = static_cast<float*>(
      workspace(kScratch, cuda::attention_backward_workspace_floats(T, B, NH) * sizeof(float)));
  cuda::launch_attention_backward(dqkv, dout, qkv, probs, T, B, NH, NKV, HD, ws, stream_);
}

// ---- attention: the cuBLAS (explicit scores) path -----------------------------------
//
// The GEMM list of each product is engine/cuda/attention_gemms.h's (math,
// layouts, batching, the fixed order of the dK / dV sums); here its buffers
// are bound to device pointers and each entry is one
// cublasGemmStridedBatchedEx. Per batch element b:
//   forward   kScores into probs, the masked softmax in place (and its bf16
//             copy), kValues;
//   backward  (bf16: P cast), kDV, kDP into the dP workspace, the dS kernel
//             (in place in fp32; into the bf16 rows workspace, no longer
//             needed for P, in bf16), kDQ, kDK.
// Precision: kFp32 runs fp32 operands with CUBLAS_COMPUTE_32F under
// CUBLAS_DEFAULT_MATH (no TF32); kBf16 casts the GEMM inputs to bf16 (qkv
// and dout once per call, P and dS per batch element) and keeps fp32
// accumulation and fp32 outputs. Softmax and dS are fp32 in both.
namespace {

// The device pointers of attention_gemms.h's buffers for one batch element:
// inputs are bf16 (2 bytes) or fp32 (4 bytes) elements, outputs fp32.
struct AttnBinding {
  bool bf16 = false;
  const void* qkv = nullptr;
  const void* dout = nullptr;
  const void* probs_in = nullptr;
  const void* ds_in = nullptr;
  float* out = nullptr;
  float* dqkv = nullptr;
  float* scores = nullptr;
  float* dp = nullptr;

  const void* input(cuda::AttnBuf buf, size_t offset) const {
    const void* base = nullptr;
    switch (buf) {
      case cuda::AttnBuf::kQkv: base = qkv; break;
      case cuda::AttnBuf::kDout: base = dout; break;
      case cuda::AttnBuf::kProbsIn: base = probs_in; break;
      case cuda::AttnBuf::kDSIn: base = ds_in; break;
      default: throw std::logic_error("attention GEMM: an output buffer used as an input");
    }
    if (base == nullptr) throw std::logic_error("attention GEMM: an input buffer not bound");
    return static_cast<const char*>(base) + offset * (bf16 ? 2 : 4);
  }
  float* output(cuda::AttnBuf buf, size_t offset) const {
    float* base = nullptr;
    switch (buf) {
      case cuda::AttnBuf::kOut: base = out; break;
      case cuda::AttnBuf::kDqkv: base = dqkv; break;
      case cuda::AttnBuf::kScores: base = scores; break;
      case cuda::AttnBuf::kDP: base = dp; break;
      default: throw std::logic_error("attention GEMM: an input buffer used as an output");
    }
    if (base == nullptr) throw std::logic_error("attention GEMM: an output buffer not bound");
    return base + offset;
  }
};

void run_attention_gemms(cublasHandle_t h, const std::vector<cuda::AttnGemm>& gemms, const AttnBinding& at) {
  const cudaDataType_t in = at.bf16 ? CUDA_R_16BF : CUDA_R_32F;
  for (const cuda::AttnGemm& g : gemms) {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        h, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha,
        at.input(g.a.buf, g.a.offset), in, g.a.ld, g.a.stride, at.input(g.b.buf, g.b.offset), in, g.b.ld,
        g.b.stride, &g.beta, at.output(g.c.buf, g.c.offset), CUDA_R_32F, g.c.ld, g.c.stride, g.batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

void check_attention_shape(int T, int B, int NH, int NKV, int HD) {
  const long long width = (static_cast<long long>(NH) + 2LL * NKV) * HD;
  if (T < 1 || B < 1 || NH < 1 || NKV < 1 || NH % NKV != 0 || HD < 1 ||
      static_cast<long long>(B) * width > std::numeric_limits<int>::max() ||
      static_cast<long long>(NH) * T > std::numeric_limits<int>::max()) {
    throw std::runtime_error("attention on CUDA (cuBLAS path): unsupported shape T " + std::to_string(T) + ", B " +
                             std::to_string(B) + ", NH " + std::to_string(NH) + ", NKV " + std::to_string(NKV) +
                             ", HD " + std::to_string(HD) + " (NH must be a multiple of NKV)");
  }
}

}  // namespace

void* CudaDevice::blas_handle() {
  if (blas_ == nullptr) {
    cublasHandle_t h = nullptr;
    CUBLAS_CHECK(cublasCreate(&h));
    blas_ = h;  // owned from here: ~CudaDevice destroys it even if a call below throws
    CUBLAS_CHECK(cublasSetStream(h, stream_));
    CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // fp32 stays fp32: no TF32
  }
  // cuBLASLt's workspace serves cuBLAS too: both run on stream_, never at
  // once. Set after cublasSetStream (which resets it), and on every call in
  // case the slot was reallocated.
  void* ws = workspace(kCublas, options_.cublas_workspace_bytes);
  CUBLAS_CHECK(cublasSetWorkspace(blas(blas_), ws, options_.cublas_workspace_bytes));
  return blas_;
}

void CudaDevice::cublas_attention_forward(float* out, float* probs, const float* qkv, int T, int B, int NH,
                                          int NKV, int HD, int window) {
  check_attention_shape(T, B, NH, NKV, HD);
  AttnBinding at;
  at.bf16 = options_.precision == GemmPrecision::kBf16;
  const size_t TT = static_cast<size_t>(T) * T, block = static_cast<size_t>(NH) * TT;
  at.qkv = qkv;
  void* p16 = nullptr;
  if (at.bf16) {
    const size_t n = static_cast<size_t>(T) * B * (NH + 2 * NKV) * HD;
    void* x16 = workspace(kAttnQkv16, n * 2);
    cuda::launch_to_bf16(x16, qkv, n, stream_);
    at.qkv = x16;
    p16 = workspace(kAttnRows16, block * 2);
  }
  at.out = out;
  cublasHandle_t h = blas(blas_handle());
  for (int b = 0; b < B; ++b) {
    at.scores = probs + static_cast<size_t>(b) * block;
    at.probs_in = at.bf16 ? p16 : static_cast<const void*>(at.scores);
    run_attention_gemms(h, cuda::attention_gemms(cuda::AttnProduct::kScores, b, T, B, NH, NKV, HD), at);
    cuda::launch_attention_masked_softmax(at.scores, p16, static_cast<size_t>(NH) * T, T, window, stream_);
    run_attention_gemms(h, cuda::attention_gemms(cuda::AttnProduct::kValues, b, T, B, NH, NKV, HD), at);
  }
}

void CudaDevice::cublas_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                                           int T, int B, int NH, int NKV, int HD) {
  check_attention_shape(T, B, NH, NKV, HD);
  AttnBinding at;
  at.bf16 = options_.precision == GemmPrecision::kBf16;
  const size_t TT = static_cast<size_t>(T) * T, block = static_cast<size_t>(NH) * TT;
  at.qkv = qkv;
  at.dout = dout;
  void* rows16 = nullptr;
  if (at.bf16) {  // cast again: the forward's copy may belong to another layer by now
    const size_t n = static_cast<size_t>(T) * B * (NH + 2 * NKV) * HD, no = static_cast<size_t>(T) * B * NH * HD;
    void* x16 = workspace(kAttnQkv16, n * 2);
    void* o16 = workspace(kAttnOut16, no * 2);
    cuda::launch_to_bf16(x16, qkv, n, stream_);
    cuda::launch_to_bf16(o16, dout, no, stream_);
    at.qkv = x16;
    at.dout = o16;
    rows16 = workspace(kAttnRows16, block * 2);
  }
  at.dqkv = dqkv;
  at.dp = static_cast<float*>(workspace(kAttnRows, block * sizeof(float)));
  at.ds_in = at.bf16 ? rows16 : static_cast<const void*>(at.dp);
  cublasHandle_t h = blas(blas_handle());
  for (int b = 0; b < B; ++b) {
    const float* P = probs + static_cast<size_t>(b) * block;
    at.probs_in = P;
    if (at.bf16) {
      cuda::launch_to_bf16(rows16, P, block, stream_);
      at.probs_in = rows16;
    }
    run_attention_gemms(h, cuda::attention_gemms(cuda::AttnProduct::kDV, b, T, B, NH, NKV, HD), at);
    run_attention_gemms(h, cuda::attention_gemms(cuda::AttnProduct::kDP, b, T, B, NH, NKV, HD), at);
    // dS: in place into dP (fp32), or into rows16 (bf16: P's copy has served kDV).
    cuda::launch_attention_scores_backward(at.dp, P, rows16, static_cast<size_t>(NH) * T, T, stream_);
    run_attention_gemms(h, cuda::attention_gemms(cuda::AttnProduct::kDQ, b, T, B, NH, NKV, HD), at);
    run_attention_gemms(h, cuda::attention_gemms(cuda::AttnProduct::kDK, b, T, B, NH, NKV, HD), at);
  }
}

void CudaDevice::cross_entropy_row_max(float* row_max, const float* logits, int N, int V) {
  cuda::launch_cross_entropy_row_max(row_max, logits, N, V, stream_);
}
void CudaDevice::cross_entropy_partials(float* sum_exp, float* target_logit, const float* logits,
                                        const float* row_max, const int32_t* targets, int vocab_start, int N,
                                        int V) {
  cuda::launch_cross_entropy_partials(sum_exp, target_logit, logits, row_max, targets, vocab_start, N, V, stream_);
}
void CudaDevice::cross_entropy_loss(float* losses, const float* sum_exp, const float* target_logit, int N) {
  cuda::launch_cross_entropy_loss(losses, sum_exp, target_logit, N, stream_);
}
void CudaDevice::cross_entropy_backward(float* dlogits, const float* logits, const float* row_max,
                                        const float* sum_exp, const int32_t* targets, const float* dlosses,
                                        int vocab_start, int N, int V) {
  cuda::launch_cross_entropy_backward(dlogits, logits, row_max, sum_exp, targets, dlosses, vocab_start, N, V,
                                      stream_);
}

void CudaDevice::embedding_forward(float* out, const int32_t* tokens, const float* wte, int vocab_start, int N,
                                   int V, int C) {
  cuda::launch_embedding_forward(out, tokens, wte, vocab_start, N, V, C, stream_);
}
void CudaDevice::embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int vocab_start, int N,
                                    int V, int C) {
  cuda::launch_embedding_backward(dwte, dout, tokens, vocab_start, N, V, C, stream_);
}
void CudaDevice::position_embedding_forward(float* out, const float* wpe, int t0, int T, int B, int C) {
  cuda::launch_position_embedding_forward(out, wpe, t0, T, B, C, stream_);
}
void CudaDevice::position_embedding_backward(float* dwpe, const float* dout, int t0, int T, int B, int C) {
  cuda::launch_position_embedding_backward(dwpe, dout, t0, T, B, C, stream_);
}

// ---- optimizer ------------------------------------------------------------------------

void CudaDevice::scale(float* x, float coef, size_t n) { cuda::launch_scale(x, coef, n, stream_); }

std::vector<int> CudaDevice::upload_pieces(const ShardPiece* pieces, int count, void** table, int* blocks,
                                           int* live) {
  std::vector<cuda::Piece> host;
  std::vector<int> index;
  for (int i = 0; i < count; ++i) {
    if (pieces[i].size == 0) continue;
    host.push_back(cuda::Piece{pieces[i].begin, pieces[i].size, pieces[i].coef});
    index.push_back(i);
  }
  const cuda::PiecePlan plan = cuda::plan_pieces(host.data(), static_cast<int>(host.size()));
  std::vector<char> bytes(plan.table_bytes);
  cuda::make_piece_table(bytes.data(), host.data(), static_cast<int>(host.size()));
  *table = workspace(kPieces, std::max<size_t>(plan.table_bytes, 1));
  if (!bytes.empty()) {
    CUDA_CHECK(cudaMemcpyAsync(*table, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // `bytes` is freed on return
  }
  *blocks = plan.blocks;
  *live = plan.count;
  return index;
}

namespace {
cuda::AdamConsts consts(const Device::AdamConstants& k) {
  return cuda::AdamConsts{k.clip, k.beta1, k.one_minus_beta1, k.beta2, k.one_minus_beta2,
                          k.eps,  k.step_size, k.bc2_sqrt, k.bc1, k.bc2};
}
cuda::PiecePlan plan_of(int blocks, int live) {
  cuda::PiecePlan p;
  p.blocks = blocks;
  p.count = live;
  return p;
}
}  // namespace

void CudaDevice::sum_squares(double* sums_host, const float* x, const ShardPiece* pieces, int count) {
  std::fill(sums_host, sums_host + count, 0.0);
  void* table = nullptr;
  int blocks = 0, live = 0;
  const std::vector<int> index = upload_pieces(pieces, count, &table, &blocks, &live);
  if (live == 0) return;
  double* ws = static_cast<double*>(workspace(kDoubles, (static_cast<size_t>(blocks) + live) * sizeof(double)));
  double* sums = ws + blocks;
  cuda::launch_sum_squares(sums, x, table, plan_of(blocks, live), ws, stream_);
  std::vector<double> got(static_cast<size_t>(live));
  copy_to_host(got.data(), sums, got.size() * sizeof(double));
  for (int k = 0; k < live; ++k) sums_host[index[k]] = got[k];
}

void CudaDevice::adamw_step(float* p, float* m, float* v, const float* grad, const ShardPiece* pieces, int count,
                            const AdamConstants& k) {
  void* table = nullptr;
  int blocks = 0, live = 0;
  upload_pieces(pieces, count, &table, &blocks, &live);
  cuda::launch_adamw(p, m, v, grad, table, plan_of(blocks, live), consts(k), stream_);
}

void CudaDevice::lamb_direction(float* u, float* m, float* v, const float* p, const float* grad,
                                const ShardPiece* pieces, int count, const AdamConstants& k, double* sums_host) {
  std::fill(sums_host, sums_host + 2 * count, 0.0);
  void* table = nullptr;
  int blocks = 0, live = 0;
  const std::vector<int> index = upload_pieces(pieces, count, &table, &blocks, &live);
  if (live == 0) return;
  double* ws =
      static_cast<double*>(workspace(kDoubles, (2 * static_cast<size_t>(blocks) + 2 * live) * sizeof(double)));
  double* sums = ws + 2 * static_cast<size_t>(blocks);
  cuda::launch_lamb_direction(u, m, v, p, grad, table, plan_of(blocks, live), consts(k), sums, ws, stream_);
  std::vector<double> got(2 * static_cast<size_t>(live));
  copy_to_host(got.data(), sums, got.size() * sizeof(double));
  for (int i = 0; i < live; ++i) {
    sums_host[2 * index[i]] = got[2 * i];
    sums_host[2 * index[i] + 1] = got[2 * i + 1];
  }
}

void CudaDevice::lamb_apply(float* p, const float* u, const ShardPiece* pieces, int count) {
  void* table = nullptr;
  int blocks = 0, live = 0;
  upload_pieces(pieces, count, &table, &blocks, &live);
  cuda::launch_lamb_apply(p, u, table, plan_of(blocks, live), stream_);
}

}  // namespace megascale::engine
