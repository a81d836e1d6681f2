// model/op_cost.h: FLOPs, bytes and kernel shapes of every operator of a GPT
// layer (and of the embedding / output head) on one tensor-parallel rank, for one
// micro-batch.
//
// Operators follow Megatron-LM's GPT (megatron/core/transformer): LayerNorm, QKV
// (column-parallel, GQA-aware), core attention (unfused: scores BMM, fused
// scale-mask-softmax, dropout, context BMM; or FlashAttention-2 when
// efficient_operators is on), output projection (row-parallel), bias-dropout-add,
// MLP (GeLU: fc1 + gelu + fc2; SwiGLU: fc1 producing gate and up, silu*mul, fc2).
// The parallel block (MegaScale section 3.1, GPT-J style) shares one LayerNorm and
// fuses QKV with fc1 and proj with fc2 into single GEMMs.
// Head operators: embedding lookup, final LayerNorm, logits GEMM, vocab-parallel
// cross-entropy.
//
// Causal mask and sliding window (key j visible to query i iff i-W <= j <= i):
// FlashAttention-2 skips fully masked blocks, so it executes
// s * mean_keys_per_query() key positions per head; the unfused path computes the
// full s x s score matrix, or a band of W+128 keys when a window is set (a
// block-banded kernel, as MegaScale's sliding-window implementation must be to gain
// speed before FlashAttention-2 is introduced in their Table 3).
//
// Units: FLOPs are floating point operations executed on this GPU (multiply-add
// = 2); bytes are HBM bytes read + written; activations are bf16 (2 bytes).
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/hardware.h"

namespace megascale::model {

enum class OpClass {
  kGemm,            // one GEMM (m x k) * (k x n); backward: dgrad + wgrad GEMMs
  kBatchedGemm,     // `batch` GEMMs of one shape (attention BMMs); backward: 2 per
  kFlashAttention,  // FlashAttention-2 forward / backward kernels
  kMemory,          // bandwidth-bound elementwise / normalisation / softmax
};

// One kernel as a measured profile times it (model/profile_tables.h): a GEMM
// (name = layout "nt" | "nn" | "tn", m x n x k), an attention call (`count`
// sequences x query heads of (seq, head_dim, window)), or a named kernel over
// `count` elements (name = "layer_norm", "gelu", ... : model/profile.h
// kCpuKernels). model/engine_ops.h attaches them for the CPU engine.
enum class CallKind { kGemm, kAttention, kKernel };
struct KernelCall {
  CallKind kind = CallKind::kKernel;
  std::string name;
  int64_t m = 0, n = 0, k = 0;
  int seq = 0, head_dim = 0, window = 0;
  double count = 0;
  bool backward = false;
};

struct OperatorCost {
  std::string name;
  OpClass cls = OpClass::kMemory;
  int64_t batch = 1, m = 0, n = 0, k = 0;  // GEMM shapes (forward)
  double fwd_flops = 0;
  double bwd_flops = 0;
  double fwd_bytes = 0;                     // memory ops (GEMM bytes come from shape)
  double bwd_bytes = 0;
  int fwd_kernels = 1;                      // kernels launched (memory ops)
  int bwd_kernels = 1;
  bool attention_core = false;              // re-run by selective recomputation
  // The kernel a kFlashAttention op runs on (model/hardware.h FlashKernel; set
  // from Optimizations::fused_attention and attention_kernel).
  FlashKernel flash_kernel = FlashKernel::kFlash2;
  // FP8 (Optimizations::fp8): the GEMM's time is its BF16 time divided by this
  // (the profile's fp8_gemm_speedup); 1 for BF16.
  double gemm_speedup = 1.0;
  // When set (a cpu profile's engine, model/engine_ops.h), the op's time is
  // these calls' measured times plus the profile's op_gap_us.
  std::vector<KernelCall> fwd_calls, bwd_calls;
  // Seconds added to the op's forward / backward time whatever its class (the
  // profile's element_overhead_ns, model/engine_ops.h).
  double fwd_extra_s = 0, bwd_extra_s = 0;
};

// The name of ring attention's per-step merge (op_cost.cc cp_attention_merge),
// an attention_core op that overlaps no K/V exchange (estimator.cc cp_exposed_s).
inline constexpr const char* kCpAttentionMergeOp = "cp_attention_merge";

// All operators of one transformer layer in execution order. `eager`
// (Optimizations::eager_elementwise): PyTorch eager kernels for RMSNorm, the
// SwiGLU product and RoPE (op_cost.cc eager_rms_norm, eager_swiglu, rope).
std::vector<OperatorCost> layer_operators(const ModelConfig& m, const ParallelConfig& p,
                                          bool efficient_operators, bool eager = false);

// Transformer Engine's FP8 recipe on one layer's operators: every linear GEMM
// runs `gemm_speedup` times faster than in BF16 (GpuProfile::fp8_gemm_speedup),
// and one memory op holds TE's casts: the GEMM inputs not produced by a fused
// LayerNorm (forward, E4M3) and the GEMM output gradients (backward, E5M2) cast
// to FP8 with their transposes (Hopper's FP8 GEMM is TN only), 4 bytes per
// element moved, and the LayerNorm-fed inputs transposed for the weight
// gradient, 2 bytes. With `any_layout` (GpuProfile::fp8_gemm_any_layout,
// Blackwell) no transpose is made: 3 bytes per cast, nothing for the
// LayerNorm-fed inputs. Attention and the norms stay BF16.
//
// Current scaling (Fp8Casts::current_scaling; Transformer Engine 2.x
// Float8CurrentScalingQuantizer, pytorch/csrc/extensions/cast.cpp and
// normalization.cpp): every cast first reads its BF16 tensor for the amax
// (nvte_compute_amax) and computes the scale (nvte_compute_scale_from_amax), 2
// bytes per element and two kernels more; a LayerNorm-fed input can no longer
// be written in FP8 by the norm (the norm writes BF16 with its amax, 1 byte
// more, TE 2.8+'s FUSED_NORM_AMAX_FP8, then scale and cast, 3 bytes, two
// kernels; TE 2.2-2.7 read the amax apart, 2 bytes and a kernel more), on the norm's
// rows (Fp8Casts::norm_rows_share: 1 / TP under sequence parallelism, which
// gathers after the cast). Under sequence parallelism the column-parallel
// inputs and the row-parallel output gradients all-reduce their amax over TP
// (layernorm_linear.py / linear.py with_amax_reduction), each
// Fp8Casts::amax_allreduce_s on the GEMM's stream (the C++ quantizer waits
// for it). The step's weight casts read each weight once more.
//
// MXFP8 (Fp8Casts::block_scaled; Transformer Engine 2.x MXFP8Quantizer,
// common/util/cast_kernels.cuh): each 1 x 32 block of values shares one E8M0
// scale along the GEMM's reduction dimension, so the wgrad's operands need
// their own column-wise copy whatever layouts the GEMM takes: every cast
// writes both copies and their scales in one kernel, 2 + 1 + 1 + 2/32 bytes an
// element, its amax per block inside it (no amax pass, no amax all-reduce).
// The norm cannot write MXFP8 itself (normalization.cpp: Impl::UNFUSED unless
// NVTE_NORM_FWD_USE_CUDNN): it writes BF16 (1 byte more than FP8), which the
// quantizer then casts, on the norm's rows (norm_rows_share).
struct Fp8Casts {
  double gemm_speedup = 0;         // GpuProfile::fp8_gemm_speedup
  bool any_layout = false;         // GpuProfile::fp8_gemm_any_layout
  bool current_scaling = false;    // Fp8Recipe::kCurrent
  bool block_scaled = false;       // Fp8Recipe::kMxfp8
  double norm_rows_share = 1.0;    // the norm's rows of a LayerNorm-fed GEMM's (1 / tp under SP)
  double amax_allreduce_s = 0;     // one amax all-reduce over TP (0: none, no SP)
};
void apply_fp8(std::vector<OperatorCost>* ops, const Fp8Casts& casts);

// Bytes one FP8 cast writes per value, and so what an FP8 copy of a tensor
// holds: the row-wise FP8 data (1 B), the column-wise copy where the GEMM is
// TN-only (1 B; none with `any_layout`), MXFP8 both copies, each with one E8M0
// scale byte per 32 values (`block_scaled`). Used by the activation casts
// (apply_fp8), the step's weight casts (model/estimator.cc) and the weights'
// FP8 copies in memory (model/memory.cc).
double fp8_copy_bytes_per_value(bool block_scaled, bool any_layout);

// Operators outside the layers: the first stage's embedding and the last stage's
// final LayerNorm, logits GEMM and loss.
std::vector<OperatorCost> embedding_operators(const ModelConfig& m, const ParallelConfig& p);
// Logits one TP rank computes for one micro-batch: tokens x vocab / TP (the whole
// sequence, sequence parallel or not; the loss runs over them).
double logits_per_rank(const ModelConfig& m, const ParallelConfig& p);

// The loss is `cross_entropy_impl`'s (model/config.h CrossEntropyImpl; bytes per
// logit element in op_cost.cc cross_entropy).
std::vector<OperatorCost> output_operators(const ModelConfig& m, const ParallelConfig& p,
                                           CrossEntropyImpl cross_entropy_impl, bool eager = false);

// Seconds of a list of calls on `gpu` from its measured tables (busy_ranks for
// the concurrency), each class times the profile's in-situ scale. A kernel the
// profile lacks throws std::invalid_argument.
double calls_time_s(const std::vector<KernelCall>& calls, const GpuProfile& gpu);

// The same calls' table times by class, before any in-situ scale (what the
// in-situ fit of engine/microbench.h regresses measured op times on).
struct CallClassTimes {
  double gemm_s = 0, attention_s = 0, kernel_s = 0;
};
CallClassTimes call_class_times(const std::vector<KernelCall>& calls, const GpuProfile& gpu);

// The host gap a profile puts between two compute ops: its in-situ fit for the
// busy ranks when measured, else op_gap_us.
double op_gap_s(const GpuProfile& gpu);

// Time of one operator on `gpu`, seconds.
double forward_time_s(const OperatorCost& op, const GpuProfile& gpu);
double backward_time_s(const OperatorCost& op, const GpuProfile& gpu);

// Sum over a list.
double forward_time_s(const std::vector<OperatorCost>& ops, const GpuProfile& gpu);
double backward_time_s(const std::vector<OperatorCost>& ops, const GpuProfile& gpu);

// Index of the operator with this name, or -1.
int find_operator(const std::vector<OperatorCost>& ops, const std::string& name);

// Model FLOPs of one iteration as counted for MFU: the standard GPT count
// (Narayanan et al. 2021; REFERENCE.md "Model FLOPs per iteration"),
//   3 passes x [ per layer: 2 x tokens x (GEMM weights) + 2 x 2 x tokens x s x h
//   (scores and context over the full s x s square, no causal halving) ]
//   + 3 x 2 x tokens x h x V (logits),
// which for a 4h GeLU MHA model is exactly 72 B s L h^2 (1 + s/(6h) + V/(12 L h)).
// Recomputation is not counted; the parallel block counts the same as the
// sequential one (both execute the same model), so it raises MFU by saving
// time, as in MegaScale's Table 3. Sliding-window attention counts the keys
// its window leaves (the s in s/(6h) scaled by mean keys per query over the
// full-causal mean): a window does less work, and MegaScale's own published
// MFUs sit 0.2-1.0 points below the full-attention count of their iteration
// times (results/validation.md); counting full attention gave MFU 212% for a
// 32,768-token sequence with a 128-token window (issue 13).
double model_flops_per_iteration(const ModelConfig& m, int64_t global_batch);

}  // namespace megascale::model
