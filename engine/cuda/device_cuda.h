// engine/cuda/device_cuda.h: the CUDA implementation of Device — cuBLASLt
// GEMMs and the engine's own kernels (engine/cuda/kernels.h), all enqueued on
// one stream of one GPU.
//
// defines: GemmPrecision, CudaDeviceOptions, CudaDevice,
// cuda_device_unavailable_reason.
//
// Precision (Megatron-LM's mixed precision, Micikevicius et al. 2018):
//  - kFp32: every GEMM in fp32 (CUBLAS_COMPUTE_32F: no TF32), for the
//    comparisons with CpuDevice (tests/engine_gpu/).
//  - kBf16: GEMM inputs rounded to bf16 (a cast kernel into a workspace),
//    products accumulated in fp32 and written in fp32. Master weights,
//    activations, gradients (accumulated with beta = 1 in fp32) and the
//    optimizer state stay fp32; everything but the GEMM inputs is as in kFp32.
//    (Megatron also keeps activations in bf16; here they stay fp32, which costs
//    memory traffic but no accuracy.)
// Epilogues: matmul_bias uses cuBLASLt's CUBLASLT_EPILOGUE_BIAS (bias fused in
// the GEMM). GeLU stays a separate kernel: the layer stashes the
// pre-activation anyway, and cuBLASLt's GELU_AUX epilogue needs its own aux
// layout; a later change can fuse it.
//
// Memory is stream-ordered (cudaMallocAsync / cudaFreeAsync on the device's
// stream, from the device's default pool with its release threshold raised so
// freed blocks are reused, not returned to the driver at every sync). Copies
// with the host synchronise the stream (the host may read or free its buffer
// on return); device-to-device copies and kernels do not.
//
// Every call checks its CUDA / cuBLAS status and throws std::runtime_error
// naming the call and the library's error string (engine/cuda/cuda_check.h).
//
// Thread-safety: one CudaDevice per rank thread (it owns a stream, cuBLASLt
// plans and workspaces). Several CudaDevices may share one GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/device.h"

namespace megascale::engine {

enum class GemmPrecision { kFp32, kBf16 };

// Which attention implementation attention_forward / attention_backward run.
//  - kFlash: kernels_attention.cu, flash style on fp32 CUDA cores (no tensor
//    cores); saves only each row's log-sum-exp (and the window) in `probs`.
//  - kCublas: explicit scores. Per batch element, cuBLAS strided-batched GEMMs
//    (cublasGemmStridedBatchedEx, in the device's GEMM precision: bf16 inputs
//    on tensor cores with fp32 accumulation and output in kBf16, plain fp32
//    without TF32 in kFp32) compute S = scale Q K^T into `probs`, a row kernel
//    (kernels_attention_scores.cu) makes it the masked softmax P in place, and
//    O = P V; the backward runs dV = P^T dO, dP = dO V^T, the dS row kernel,
//    dQ = scale dS K, dK = scale dS^T Q from the saved P. `probs` holds P
//    itself, (B, NH, T, T) as on CpuDevice. Extra device memory: a workspace
//    of NH * T^2 floats (dP) plus, in bf16, NH * T^2 bf16 (P or dS) and the
//    bf16 copies of qkv and dout; the full T x T products are computed (the
//    causal half is masked afterwards, twice the useful GEMM FLOPs).
//  - kFlashTc: kernels_attention_tc.cu, flash style on bf16 tensor cores
//    (mma.sync, sm_80+; FlashAttention-2's tiling): inputs rounded to bf16 as
//    they are loaded, fp32 softmax and accumulation, scores never stored, the
//    causal / window mask skips whole tiles. `probs` holds each row's
//    log-sum-exp, the window and (when T > HD + 4) a copy of O for the
//    backward's D = rowsum(dO * O). Any precision (the device factory and the
//    scenario ask for bf16, the precision it computes in). The constructor
//    refuses it on a GPU below compute capability 8.0 (no bf16 mma.sync).
//  - kAuto (default): kCublas when precision is kBf16 (tensor cores), kFlash
//    when kFp32 (the path the fp32 comparisons with CpuDevice were written for).
//    kFlashTc is not the default until it has been measured on a GPU.
// The layer stash gives `probs` B * NH * T^2 floats per layer on every path
// (engine/transformer_layer.cc), so the saved state costs no more with kCublas.
enum class AttentionPath { kAuto, kFlash, kCublas, kFlashTc };

struct CudaDeviceOptions {
  int ordinal = -1;  // -1: the MPI local rank (OMPI_COMM_WORLD_LOCAL_RANK / LOCAL_RANK) modulo the GPU count
  GemmPrecision precision = GemmPrecision::kFp32;
  size_t cublas_workspace_bytes = size_t{32} << 20;  // 32 MiB: NVIDIA's cuBLAS docs advise >= 32 MiB on Hopper
  AttentionPath attention = AttentionPath::kAuto;
};

// "" when a CUDA device can be opened; otherwise the reason, with the CUDA
// error string (e.g. "cudaErrorNoDevice: no CUDA-capable device is detected").
std::string cuda_device_unavailable_reason();

class CudaDevice final : public Device {
 public:
  // Throws std::runtime_error when the device cannot be opened.
  explicit CudaDevice(const CudaDeviceOptions& options = {});
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const char* name() const override { return "cuda"; }
  int ordinal() const { return ordinal_; }
  GemmPrecision precision() const { return options_.precision; }
  // The attention path in use (kAuto resolved: never kAuto). It also says
  // what attention_forward leaves in `probs` for attention_backward.
  AttentionPath attention_path() const { return attention_path_; }
  cudaStream_t stream() const { return stream_; }
  // "NVIDIA H200" etc. (cudaDeviceProp::name) and the compute capability, e.g. 90.
  const std::string& device_name() const { return device_name_; }
  int compute_capability() const { return compute_capability_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* ptr, size_t bytes) override;
  void synchronize() override;
  // CUDA events on this device's stream (engine/cuda/event_timer.h).
  std::unique_ptr<OpTimer> make_op_timer() override;
  bool fuses_bias() const override { return true; }  // cuBLASLt's bias epilogue; one residual kernel

  void matmul(float* c, const float* a, const float* b, int M, int N, int K, bool trans_a,
              bool trans_b, float beta) override;
  void matmul_bias(float* c, const float* a, const float* b, const float* bias, int M, int N,
                   int K, bool trans_a, bool trans_b) override;

  void add(float* out, const float* a, const float* b, size_t n) override;
  void bias_add(float* out, const float* bias, int N, int OC) override;
  void bias_backward(float* dbias, const float* dout, int N, int OC) override;
  void bias_residual_add(float* out, const float* residual, const float* y, const float* bias,
                         const float* bias2, int N, int C) override;

  void layer_norm_forward(float* out, float* mean, float* rstd, const float* inp,
                          const float* weight, const float* bias, int N, int C) override;
  void layer_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                           const float* inp, const float* weight, const float* mean,
                           const float* rstd, int N, int C) override;

  void gelu_forward(float* out, const float* inp, size_t n) override;
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override;
  void swiglu_forward(float* out, const float* inp, int N, int F) override;
  void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) override;

  void softmax_forward(float* out, const float* inp, int N, int V) override;
  void softmax_backward(float* dinp, const float* out, const float* dout, int N, int V) override;

  void attention_forward(float* out, float* probs, const float* qkv, int T, int B, int NH,
                         int NKV, int HD, int window) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                          int T, int B, int NH, int NKV, int HD) override;

  void cross_entropy_row_max(float* row_max, const float* logits, int N, int V) override;
  void cross_entropy_partials(float* sum_exp, float* target_logit, const float* logits,
                              const float* row_max, const int32_t* targets, int vocab_start,
                              int N, int V) override;
  void cross_entropy_loss(float* losses, const float* sum_exp, const float* target_logit,
                          int N) override;
  void cross_entropy_backward(float* dlogits, const float* logits, const float* row_max,
                              const float* sum_exp, const int32_t* targets, const float* dlosses,
                              int vocab_start, int N, int V) override;

  void embedding_forward(float* out, const int32_t* tokens, const float* wte, int vocab_start,
                         int N, int V, int C) override;
  void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int vocab_start,
                          int N, int V, int C) override;
  void position_embedding_forward(float* out, const float* wpe, int t0, int T, int B,
                                  int C) override;
  void position_embedding_backward(float* dwpe, const float* dout, int t0, int T, int B,
                                   int C) override;

  void scale(float* x, float coef, size_t n) override;
  void sum_squares(double* sums_host, const float* x, const ShardPiece* pieces,
                   int count) override;
  void adamw_step(float* p, float* m, float* v, const float* grad, const ShardPiece* pieces,
                  int count, const AdamConstants& k) override;
  void lamb_direction(float* u, float* m, float* v, const float* p, const float* grad,
                      const ShardPiece* pieces, int count, const AdamConstants& k,
                      double* sums_host) override;
  void lamb_apply(float* p, const float* u, const ShardPiece* pieces, int count) override;

 private:
  // Workspaces, each grown on demand (stream-ordered, never shrunk).
  enum Slot { kScratch, kBf16A, kBf16B, kCublas, kPieces, kDoubles, kAttnQkv16, kAttnOut16, kAttnRows16,
              kAttnRows, kSlots };
  void* workspace(Slot slot, size_t bytes);
  void gemm(float* c, const float* a, const float* b, const float* bias, int M, int N, int K,
            bool trans_a, bool trans_b, float beta);
  // The cuBLAS attention path (device_cuda.cc, "attention").
  void cublas_attention_forward(float* out, float* probs, const float* qkv, int T, int B, int NH, int NKV,
                                int HD, int window);
  void cublas_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs, int T,
                                 int B, int NH, int NKV, int HD);
  void* blas_handle();  // cublasHandle_t, created on first use, on stream_
  // Uploads the non-empty pieces' table; returns their original indices.
  std::vector<int> upload_pieces(const ShardPiece* pieces, int count, void** table,
                                 int* blocks, int* live);

  struct GemmPlan;
  using GemmKey = std::tuple<int, int, int, bool, bool, bool, int, uint32_t, uint32_t, uint32_t, uint32_t>;

  CudaDeviceOptions options_;
  int ordinal_ = 0;
  std::string device_name_;
  int compute_capability_ = 0;
  cudaStream_t stream_ = nullptr;
  void* lt_ = nullptr;  // cublasLtHandle_t
  void* blas_ = nullptr;  // cublasHandle_t (the attention's strided-batched GEMMs)
  AttentionPath attention_path_ = AttentionPath::kFlash;
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  Buffer slots_[kSlots];
  std::map<GemmKey, std::unique_ptr<GemmPlan>> plans_;
};

}  // namespace megascale::engine
