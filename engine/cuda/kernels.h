// engine/cuda/kernels.h: launchers of the CUDA backend's own kernels
// (everything of engine/device.h that is not a GEMM), each enqueued on
// `stream` and returning at once. CudaDevice (device_cuda.h) calls them; the
// GPU tests compare each with CpuDevice.
//
// defines: the launch_* functions (kMaxAttentionHeadDim: attention_geometry.h).
//
// Shapes and semantics are exactly those of engine/device.h (activations
// (T, B, C), "+=" where it says so); pointers are device memory. `ws` is a
// device workspace of at least the floats the launcher's comment names
// (CudaDevice::workspace). Files: kernels_elementwise.cu (add, bias, GeLU,
// SwiGLU, embeddings, bf16 casts), kernels_norm.cu (LayerNorm, softmax,
// cross-entropy, column sums), kernels_attention.cu (flash attention),
// kernels_attention_tc.cu (flash attention on bf16 tensor cores),
// kernels_attention_scores.cu (the row kernels of the cuBLAS attention path),
// kernels_optimizer.cu (multi-tensor AdamW / LAMB, sums of squares).
//
// Determinism: every kernel but embedding_backward gives the same bits on
// every run (reductions in a fixed order, no atomics); embedding_backward adds
// rows with float atomics, whose order varies when a token repeats.
//
// Thread-safety: free functions; the stream orders the work.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/cuda/attention_geometry.h"  // defines: kMaxAttentionHeadDim

namespace megascale::engine::cuda {

// ---- elementwise (kernels_elementwise.cu) -----------------------------------
void launch_add(float* out, const float* a, const float* b, size_t n, cudaStream_t s);
void launch_scale(float* x, float coef, size_t n, cudaStream_t s);
void launch_bias_add(float* out, const float* bias, int N, int OC, cudaStream_t s);
// out = (residual + y) + bias + bias2 (biases may be null).
void launch_bias_residual_add(float* out, const float* residual, const float* y,
                              const float* bias, const float* bias2, int N, int C, cudaStream_t s);
void launch_gelu_forward(float* out, const float* inp, size_t n, cudaStream_t s);
void launch_gelu_backward(float* dinp, const float* inp, const float* dout, size_t n,
                          cudaStream_t s);
void launch_swiglu_forward(float* out, const float* inp, int N, int F, cudaStream_t s);
void launch_swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F,
                            cudaStream_t s);
void launch_embedding_forward(float* out, const int32_t* tokens, const float* wte, int vocab_start,
                              int N, int V, int C, cudaStream_t s);
void launch_embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                               int vocab_start, int N, int V, int C, cudaStream_t s);
void launch_position_embedding_forward(float* out, const float* wpe, int t0, int T, int B, int C,
                                       cudaStream_t s);
void launch_position_embedding_backward(float* dwpe, const float* dout, int t0, int T, int B,
                                        int C, cudaStream_t s);
// dst (rows, cols) bf16 = src fp32, rounded to nearest even; dst is __nv_bfloat16*.
void launch_to_bf16(void* dst, const float* src, size_t n, cudaStream_t s);

// ---- reductions over rows (kernels_norm.cu) ----------------------------------
// Column sums in a fixed order: dst (C) += sum over rows of x (N, C).
// ws: column_sum_workspace_floats(N, C) floats.
size_t column_sum_workspace_floats(int N, int C);
void launch_bias_backward(float* dbias, const float* dout, int N, int OC, float* ws,
                          cudaStream_t s);
void launch_layer_norm_forward(float* out, float* mean, float* rstd, const float* inp,
                               const float* weight, const float* bias, int N, int C,
                               cudaStream_t s);
// ws: 2 * column_sum_workspace_floats(N, C) floats.
void launch_layer_norm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                const float* inp, const float* weight, const float* mean,
                                const float* rstd, int N, int C, float* ws, cudaStream_t s);
void launch_softmax_forward(float* out, const float* inp, int N, int V, cudaStream_t s);
void launch_softmax_backward(float* dinp, const float* out, const float* dout, int N, int V,
                             cudaStream_t s);
void launch_cross_entropy_row_max(float* row_max, const float* logits, int N, int V,
                                  cudaStream_t s);
void launch_cross_entropy_partials(float* sum_exp, float* target_logit, const float* logits,
                                   const float* row_max, const int32_t* targets, int vocab_start,
                                   int N, int V, cudaStream_t s);
void launch_cross_entropy_loss(float* losses, const float* sum_exp, const float* target_logit,
                               int N, cudaStream_t s);
void launch_cross_entropy_backward(float* dlogits, const float* logits, const float* row_max,
                                   const float* sum_exp, const int32_t* targets,
                                   const float* dlosses, int vocab_start, int N, int V,
                                   cudaStream_t s);

// ---- attention (kernels_attention.cu) -----------------------------------------
// saved (the Device's `probs`, B * NH * T * T floats): the log-sum-exp of each
// query row's scaled, masked scores (B, NH, T), then, when T > 1, the window
// as one float (exact below 2^24), which the backward reads back: the
// Device interface gives the backward no window argument.
void launch_attention_forward(float* out, float* saved, const float* qkv, int T, int B, int NH,
                              int NKV, int HD, int window, cudaStream_t s);
// ws: attention_backward_workspace_floats(T, B, NH) floats (each row's
// D_i = sum_j P_ij dP_ij).
size_t attention_backward_workspace_floats(int T, int B, int NH);
void launch_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* saved,
                               int T, int B, int NH, int NKV, int HD, float* ws, cudaStream_t s);

// ---- attention on tensor cores (kernels_attention_tc.cu) -------------------------
// Flash style in bf16 mma.sync (sm_80+). saved: as launch_attention_forward's,
// then, from attention_tc_saved_o_offset (when it is not 0: the buffer of
// B * NH * T * T floats has room), a copy of out for the backward's D.
size_t attention_tc_saved_o_offset(int T, int B, int NH, int HD);
void launch_attention_tc_forward(float* out, float* saved, const float* qkv, int T, int B, int NH, int NKV, int HD,
                                 int window, cudaStream_t s);
// ws: attention_tc_backward_workspace_floats(T, B, NH, HD) floats (D, and O
// recomputed when the saved state had no room for it).
size_t attention_tc_backward_workspace_floats(int T, int B, int NH, int HD);
void launch_attention_tc_backward(float* dqkv, const float* dout, const float* qkv, const float* saved, int T, int B,
                                  int NH, int NKV, int HD, float* ws, cudaStream_t s);

// ---- explicit-scores attention (kernels_attention_scores.cu) -------------------
// The row kernels of CudaDevice's cuBLAS attention path (its GEMMs are
// cuBLAS calls in device_cuda.cc). `rows` rows of T floats, row r being query
// i = r % T (one batch element's (NH, T, T) scores, head after head).
// In place: scores (rows, T), already scaled by 1 / sqrt(HD), become the
// masked softmax (keys max(0, i - W) <= j <= i visible, W = window, 0: full
// causal; every masked entry exactly 0). p16 (__nv_bfloat16*, rows x T) may be
// null; otherwise it receives the probabilities rounded to bf16.
void launch_attention_masked_softmax(float* scores, void* p16, size_t rows, int T, int window,
                                     cudaStream_t s);
// dp (rows, T) holds dP = dO V^T; probs (rows, T) the saved P. Computes
// dS = P * (dP - rowsum(P * dP)) (0 wherever P == 0 or j > i): in place into
// dp when ds16 is null, else only into ds16 (bf16, rows x T), dp unchanged.
void launch_attention_scores_backward(float* dp, const float* probs, void* ds16, size_t rows, int T,
                                      cudaStream_t s);

// ---- optimizer (kernels_optimizer.cu) -------------------------------------------
// One piece of a ZeRO shard, as engine/device.h's Device::ShardPiece.
struct Piece {
  size_t begin;
  size_t size;
  float coef;
};
struct AdamConsts {
  float clip, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, step_size, bc2_sqrt, bc1, bc2;
};
// The pieces' table as the kernels read it (device memory), built by
// plan_pieces: for `count` pieces, `blocks` = total thread blocks, and the
// workspace floats the launches below need. `host` is the caller's table.
struct PiecePlan {
  int count = 0;
  int blocks = 0;
  size_t table_bytes = 0;   // bytes to upload (make_piece_table)
};
PiecePlan plan_pieces(const Piece* host, int count);
// Writes the device-side table (plan.table_bytes) into `host_table` (pinned or
// pageable host memory the caller then copies to `device_table`).
void make_piece_table(void* host_table, const Piece* host, int count);
// sums (double, count) = sum of x^2 per piece. ws_double: plan.blocks doubles.
void launch_sum_squares(double* sums, const float* x, const void* device_table,
                        const PiecePlan& plan, double* ws_double, cudaStream_t s);
void launch_adamw(float* p, float* m, float* v, const float* g, const void* device_table,
                  const PiecePlan& plan, const AdamConsts& k, cudaStream_t s);
// sums (double, 2 * count): [||p||^2, ||u||^2] per piece. ws_double: 2 * plan.blocks.
void launch_lamb_direction(float* u, float* m, float* v, const float* p, const float* g,
                           const void* device_table, const PiecePlan& plan, const AdamConsts& k,
                           double* sums, double* ws_double, cudaStream_t s);
void launch_lamb_apply(float* p, const float* u, const void* device_table, const PiecePlan& plan,
                       cudaStream_t s);

}  // namespace megascale::engine::cuda
