// engine/device.h: the compute interface of the training engine — device memory
// and every kernel the GPT model needs, forward and backward, in fp32.
//
// The model layers (engine/transformer_layer.h, embedding.h, output_head.h) are
// written once above this interface (DESIGN.md, "Engine notes"). Backends:
// CpuDevice (engine/device_cpu.h: Eigen GEMMs, plain loops, single-threaded and
// deterministic) now; a CUDA device (cuBLASLt + own kernels) later implements the
// same methods on device pointers.
//
// Conventions (llm.c, karpathy/llm.c train_gpt2.c):
//  - Every pointer is device memory obtained from allocate() (on the CPU device:
//    host memory). Tensors are dense, row-major fp32; shapes are given in the
//    comment of each kernel with the names of the math:
//      N tokens (rows), C channels (hidden), OC output channels, T sequence,
//      B micro-batch, NH query heads, NKV key/value heads, HD head dim, V vocab.
//  - Activations inside the model are laid out (T, B, C) (Megatron-LM's "sbh"),
//    so a sequence-parallel shard of T/tp positions is one contiguous block.
//  - Forward kernels overwrite their outputs. Backward kernels OVERWRITE the
//    input gradient unless the comment says "+=" (LayerNorm and the embeddings
//    accumulate, as in llm.c); parameter gradients are always accumulated (+=),
//    so micro-batches add up until the gradients are zeroed.
//  - Token ids are int32 device arrays.
//
// Host code never dereferences a device pointer: it moves data with
// copy_to_host / copy_to_device (CudaDevice memory is plain cudaMalloc memory).
//
// Thread-safety: CpuDevice is stateless and may serve several rank threads at
// once; CudaDevice owns a stream and workspaces and serves one rank thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/op_timer.h"

// Throws std::runtime_error("file:line: message") when `cond` is false. The
// engine reports misuse (shape mismatch, unknown micro-batch, ...) this way.
#ifndef ENGINE_CHECK
#define ENGINE_CHECK(cond, msg)                                                            \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) +    \
                               ": check failed: " #cond ": " + std::string(msg));          \
    }                                                                                      \
  } while (0)
#endif

namespace megascale::engine {

class Device {
 public:
  virtual ~Device() = default;

  virtual const char* name() const = 0;

  // ---- memory -------------------------------------------------------------
  // Returns `bytes` of device memory (aligned to 64 bytes), zero-filled.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // device to device
  virtual void fill_zero(void* ptr, size_t bytes) = 0;
  // Waits for every kernel issued so far (no-op on the CPU).
  virtual void synchronize() = 0;
  // Markers in this device's queue order for the trace (engine/op_timer.h);
  // nullptr when the host clock times ops correctly (the CPU: ops are synchronous).
  virtual std::unique_ptr<OpTimer> make_op_timer() { return nullptr; }
  // True when matmul_bias runs the bias inside the GEMM and bias_residual_add
  // is one kernel (their defaults below are separate calls): what the
  // simulator's call lists must know (model/hardware.h fused_bias).
  virtual bool fuses_bias() const { return false; }

  // ---- GEMM ---------------------------------------------------------------
  // c (M, N) = op(a) (M, K) @ op(b) (K, N) + beta * c, where op(a) = a^T when
  // trans_a (a stored (K, M)) and op(b) = b^T when trans_b (b stored (N, K)).
  // beta == 0 ignores the old contents of c (NaNs included).
  virtual void matmul(float* c, const float* a, const float* b, int M, int N, int K,
                      bool trans_a, bool trans_b, float beta) = 0;

  // ---- elementwise / bias ---------------------------------------------------
  // out (n) = a + b (out may alias a or b).
  virtual void add(float* out, const float* a, const float* b, size_t n) = 0;
  // out (N, OC) += bias (OC) broadcast over rows.
  virtual void bias_add(float* out, const float* bias, int N, int OC) = 0;
  // dbias (OC) += sum over rows of dout (N, OC).
  virtual void bias_backward(float* dbias, const float* dout, int N, int OC) = 0;

  // ---- LayerNorm (eps 1e-5, as GPT-2 / Megatron) ----------------------------
  // out (N, C) = (inp - mean) * rstd * weight + bias; mean, rstd (N) saved.
  virtual void layer_norm_forward(float* out, float* mean, float* rstd, const float* inp,
                                  const float* weight, const float* bias, int N, int C) = 0;
  // dinp (N, C) +=, dweight (C) +=, dbias (C) += from dout (N, C).
  virtual void layer_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                   const float* inp, const float* weight, const float* mean,
                                   const float* rstd, int N, int C) = 0;

  // ---- activations ----------------------------------------------------------
  // GeLU, tanh approximation (GPT-2, Megatron-LM bias_gelu):
  //   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  virtual void gelu_forward(float* out, const float* inp, size_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) = 0;
  // SwiGLU (Shazeer 2020): inp (N, 2F) = [gate (N, F) | up (N, F)] per row,
  // out (N, F) = silu(gate) * up, silu(g) = g * sigmoid(g).
  virtual void swiglu_forward(float* out, const float* inp, int N, int F) = 0;
  // dinp (N, 2F) from dout (N, F).
  virtual void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) = 0;

  // ---- softmax --------------------------------------------------------------
  // Row-wise softmax: out (N, V) = exp(inp - max) / sum (max-subtracted).
  virtual void softmax_forward(float* out, const float* inp, int N, int V) = 0;
  // dinp (N, V) = out * (dout - sum_j dout_j out_j), from the saved out (N, V).
  virtual void softmax_backward(float* dinp, const float* out, const float* dout, int N,
                                int V) = 0;

  // ---- causal attention with optional sliding window ------------------------
  // qkv (T, B, (NH + 2*NKV) * HD): per token [q heads | k heads | v heads];
  // query head h reads key/value head h / (NH / NKV) (GQA; NKV == NH is MHA).
  // Key j is visible to query i iff i - W <= j <= i, W = `window`; window == 0
  // (or >= T - 1) is the full causal mask. Scale 1 / sqrt(HD).
  // out (T, B, NH * HD); probs (B, NH, T, T) is the state saved for backward:
  // CpuDevice stores the probabilities (masked = 0); CudaDevice stores them
  // too on its cuBLAS path (explicit scores on tensor cores, the default in
  // bf16), while its flash-style kernel (the default in fp32) stores only each
  // row's log-sum-exp in the first B * NH * T floats (then the window) and
  // recomputes the probabilities in backward (CudaDeviceOptions::attention,
  // engine/cuda/device_cuda.h). Only attention_backward of the same device
  // reads it.
  virtual void attention_forward(float* out, float* probs, const float* qkv, int T, int B,
                                 int NH, int NKV, int HD, int window) = 0;
  // dqkv (T, B, (NH + 2*NKV) * HD) overwritten, from dout (T, B, NH * HD).
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* probs, int T, int B, int NH, int NKV,
                                  int HD) = 0;

  // ---- cross-entropy, split so the vocabulary may be sharded ----------------
  // Megatron-LM's vocab_parallel_cross_entropy: a rank holds logits of the
  // vocabulary slice [vocab_start, vocab_start + V). With the global row max m
  // (max over ranks of cross_entropy_row_max), S = sum_j exp(l_j - m) and
  // z = l_target - m (0 on ranks not holding the target) are summed over
  // ranks; the loss is log(S) - z.
  // row_max (N) = max_j logits (N, V).
  virtual void cross_entropy_row_max(float* row_max, const float* logits, int N, int V) = 0;
  // sum_exp (N), target_logit (N) from logits (N, V), row_max (N), targets (N).
  virtual void cross_entropy_partials(float* sum_exp, float* target_logit, const float* logits,
                                      const float* row_max, const int32_t* targets,
                                      int vocab_start, int N, int V) = 0;
  // losses (N) = log(sum_exp) - target_logit.
  virtual void cross_entropy_loss(float* losses, const float* sum_exp,
                                  const float* target_logit, int N) = 0;
  // dlogits (N, V) = (exp(l - row_max) / sum_exp - [j == target]) * dlosses (N).
  virtual void cross_entropy_backward(float* dlogits, const float* logits,
                                      const float* row_max, const float* sum_exp,
                                      const int32_t* targets, const float* dlosses,
                                      int vocab_start, int N, int V) = 0;

  // ---- embeddings -------------------------------------------------------------
  // out (N, C) = wte[tokens[i] - vocab_start] for tokens inside the slice
  // [vocab_start, vocab_start + V) of the (V, C) table shard, 0 elsewhere
  // (Megatron-LM's VocabParallelEmbedding before its reduction).
  virtual void embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                 int vocab_start, int N, int V, int C) = 0;
  // dwte (V, C) += scatter of dout (N, C) rows at the tokens inside the slice.
  virtual void embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                                  int vocab_start, int N, int V, int C) = 0;
  // out (T, B, C) += wpe[t0 + t] for every b (learned positions; wpe (>= t0+T, C)).
  virtual void position_embedding_forward(float* out, const float* wpe, int t0, int T, int B,
                                          int C) = 0;
  // dwpe[t0 + t] (C) += sum over b of dout (T, B, C).
  virtual void position_embedding_backward(float* dwpe, const float* dout, int t0, int T, int B,
                                           int C) = 0;

  // ---- fused epilogues ----------------------------------------------------------
  // The defaults compose the kernels above (so CpuDevice's results are those of
  // the separate calls, bit for bit); a GPU backend fuses them (cuBLASLt's bias
  // epilogue, one elementwise pass).
  // c (M, N) = op(a) @ op(b) + bias (N) broadcast over rows (matmul with beta 0).
  virtual void matmul_bias(float* c, const float* a, const float* b, const float* bias, int M,
                           int N, int K, bool trans_a, bool trans_b) {
    matmul(c, a, b, M, N, K, trans_a, trans_b, 0.0f);
    bias_add(c, bias, M, N);
  }
  // Megatron-LM's bias-dropout-add with dropout off: out (N, C) = (residual + y)
  // + bias (C), then + bias2 (C); either bias may be null. out may alias residual or y.
  virtual void bias_residual_add(float* out, const float* residual, const float* y,
                                 const float* bias, const float* bias2, int N, int C) {
    add(out, residual, y, static_cast<size_t>(N) * C);
    if (bias != nullptr) bias_add(out, bias, N, C);
    if (bias2 != nullptr) bias_add(out, bias2, N, C);
  }

  // ---- optimizer: multi-tensor kernels over a ZeRO shard (engine/optimizer.h) ----
  // A shard holds pieces of several tensors; one call updates all of them (one
  // launch on a GPU, as apex's multi_tensor_apply). Piece k covers elements
  // [begin, begin + size) of the shard arrays and carries its tensor's
  // coefficient `coef` (AdamW: 1 - lr * wd; LAMB direction: wd; LAMB apply:
  // lr * trust). `pieces` is host memory; count may be 0.
  struct ShardPiece {
    size_t begin = 0;
    size_t size = 0;
    float coef = 0;
  };
  // The per-element constants of one step, each rounded once to fp32 from double.
  struct AdamConstants {
    float clip = 1;        // factor on the gradient
    float beta1 = 0.9f, one_minus_beta1 = 0.1f;
    float beta2 = 0.999f, one_minus_beta2 = 0.001f;
    float eps = 1e-8f;
    float step_size = 0;   // AdamW: lr / (1 - beta1^t)
    float bc2_sqrt = 1;    // AdamW: sqrt(1 - beta2^t)
    float bc1 = 1, bc2 = 1;  // LAMB: 1 - beta^t
  };
  // x (n) *= coef.
  virtual void scale(float* x, float coef, size_t n) = 0;
  // sums_host[k] = sum of x[j]^2 (in double) over piece k. Blocks until done.
  virtual void sum_squares(double* sums_host, const float* x, const ShardPiece* pieces,
                           int count) = 0;
  // AdamW per element of every piece (coef = 1 - lr * wd):
  //   g = grad * clip;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
  //   p *= coef;  p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
  virtual void adamw_step(float* p, float* m, float* v, const float* grad,
                          const ShardPiece* pieces, int count, const AdamConstants& k) = 0;
  // LAMB direction (coef = wd): moments as AdamW, then
  //   u = (m / bc1) / (sqrt(v / bc2) + eps) + coef * p,
  // and sums_host[2k] = ||p||^2, sums_host[2k + 1] = ||u||^2 of piece k (double).
  // Blocks until the sums are on the host.
  virtual void lamb_direction(float* u, float* m, float* v, const float* p, const float* grad,
                              const ShardPiece* pieces, int count, const AdamConstants& k,
                              double* sums_host) = 0;
  // p -= coef * u per piece (coef = lr * trust ratio of the piece's tensor).
  virtual void lamb_apply(float* p, const float* u, const ShardPiece* pieces, int count) = 0;
};

// Owns one device allocation; moves, never copies.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device& device, size_t bytes)
      : device_(&device), ptr_(bytes ? device.allocate(bytes) : nullptr), bytes_(bytes) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : device_(o.device_), ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reset() {
    if (ptr_ != nullptr) device_->deallocate(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return ptr_; }
  float* floats() const { return static_cast<float*>(ptr_); }
  int32_t* ints() const { return static_cast<int32_t*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  Device* device_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace megascale::engine
