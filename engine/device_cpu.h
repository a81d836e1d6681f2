// engine/device_cpu.h: the CPU implementation of Device.
//
// defines: CpuDevice, cpu_device().
//
// GEMMs are Eigen 3.4 products on Eigen::Map views of the raw row-major buffers
// (Debian libeigen3-dev); everything else is plain loops in the order of llm.c's
// train_gpt2.c reference kernels. Eigen's own threading is off
// (EIGEN_DONT_PARALLELIZE): one rank = one thread, and every result is a
// deterministic function of the inputs and shapes (same bits on every run).
//
// Attention computes the whole (T, T) score matrix of each (batch, head) with one
// GEMM and masks it (causal, sliding window) before the softmax; masked
// probabilities are exactly 0, so the backward GEMMs see zeros there. This is
// the unfused path of model/op_cost.h ("attn_scores", "softmax",
// "attn_context") executed as one call.
//
// Thread-safety: stateless; one CpuDevice may be shared by any number of threads.
#pragma once

#include "engine/device.h"

namespace megascale::engine {

class CpuDevice final : public Device {
 public:
  const char* name() const override { return "cpu"; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* ptr, size_t bytes) override;
  void synchronize() override {}

  void matmul(float* c, const float* a, const float* b, int M, int N, int K, bool trans_a,
              bool trans_b, float beta) override;

  void add(float* out, const float* a, const float* b, size_t n) override;
  void bias_add(float* out, const float* bias, int N, int OC) override;
  void bias_backward(float* dbias, const float* dout, int N, int OC) override;

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
};

// A process-wide CpuDevice (stateless, so sharing it is safe).
CpuDevice& cpu_device();

}  // namespace megascale::engine
