// model/op_cost.cc: per-operator FLOPs / bytes / shapes of a GPT layer on one TP rank.
#include "model/op_cost.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace megascale::model {
namespace {

constexpr double kBf16Bytes = 2.0;
constexpr double kFp32Bytes = 4.0;
constexpr double kMaskBytes = 1.0;  // dropout mask, one byte per element (Megatron uint8)

// Backward of FlashAttention-2 executes 5 matmuls against the forward's 2
// (recomputing QK^T), i.e. 2.5x the forward FLOPs (Dao 2023, section 3.1.2).
constexpr double kFlashBackwardFlopsRatio = 2.5;

// Band of keys an unfused block-banded sliding-window kernel computes beyond W:
// one 128-wide block (the tile size of the banded BMM).
constexpr int kBandBlockKeys = 128;

struct Dims {
  double b, s, h, a, kv, d, f, t, v;
  double tokens;     // b*s: rows of every GEMM (the full sequence after AG)
  double sp_tokens;  // tokens held by this rank outside the TP region (b*s/t with SP)
};

Dims dims(const ModelConfig& m, const ParallelConfig& p) {
  Dims x{};
  x.b = p.micro_batch;
  x.s = m.seq_len;
  x.h = m.hidden;
  x.a = m.heads;
  x.kv = m.kv_heads;
  x.d = m.head_dim();
  x.f = m.ffn_hidden;
  x.t = p.tp;
  x.v = m.vocab;
  x.tokens = x.b * x.s;
  x.sp_tokens = p.sequence_parallel ? x.tokens / x.t : x.tokens;
  return x;
}

OperatorCost gemm(const std::string& name, double m, double n, double k) {
  OperatorCost op;
  op.name = name;
  op.cls = OpClass::kGemm;
  op.m = static_cast<int64_t>(m);
  op.n = static_cast<int64_t>(n);
  op.k = static_cast<int64_t>(k);
  op.fwd_flops = 2.0 * m * n * k;
  op.bwd_flops = 2.0 * op.fwd_flops;  // dgrad + wgrad
  op.fwd_kernels = 1;
  op.bwd_kernels = 2;
  return op;
}

OperatorCost memory(const std::string& name, double fwd_bytes, double bwd_bytes,
                    int fwd_kernels, int bwd_kernels) {
  OperatorCost op;
  op.name = name;
  op.cls = OpClass::kMemory;
  op.fwd_bytes = fwd_bytes;
  op.bwd_bytes = bwd_bytes;
  op.fwd_kernels = fwd_kernels;
  op.bwd_kernels = bwd_kernels;
  return op;
}

// LayerNorm over `tokens` x h: read x, write y (bf16); backward reads x, dy and
// writes dx, plus the gamma/beta reduction. Apex/Megatron FusedLayerNorm: one kernel.
OperatorCost layer_norm(const std::string& name, double tokens, double h) {
  const double elems = tokens * h;
  return memory(name, 2 * kBf16Bytes * elems, 3 * kBf16Bytes * elems, 1, 2);
}

// RMSNorm as PyTorch eager runs torchtitan's (torchtitan/models/norms.py
// RMSNorm: (x.float() * rsqrt(mean(x.float()^2) + eps)).type_as(x) * weight),
// bytes per element from the kernels' reads and writes: forward the fp32 copy
// (read 2, write 4), pow (4 + 4), mean (4), the product with the per-token
// rsqrt (4 + 4), the cast back (4 + 2) and the weight product (2 + 2) = 36 in
// 6 full-size kernels (eps and rsqrt act on one value per token); backward
// autograd's mirror: weight product and its reduction (2 + 2 + 2, + 2 + 2),
// cast (2 + 4), rsqrt product (4 + 4) and the per-token reduction of g x x
// (4 + 4 + 4 + 4), the mean's expansion (4 + 4), pow (4 + 4 + 4), the sum of
// the two paths into x (4 + 4 + 4) and the cast to bf16 (4 + 2) = 78 in 11.
// Apex / Transformer Engine fused RMSNorm is one kernel, as layer_norm().
OperatorCost eager_rms_norm(const std::string& name, double tokens, double h) {
  const double elems = tokens * h;
  return memory(name, 36 * elems, 78 * elems, 6, 11);
}

// Rotary embeddings on this rank's q and k (`elems` of both). Fused (Transformer
// Engine / Apex fused_apply_rotary_pos_emb, one kernel per tensor): read and
// write bf16, the same backward. Eager (torchtitan/models/llama3/model.py
// apply_rotary_emb: view_as_complex(x.float()) * freqs_cis, view_as_real,
// type_as): the fp32 copy (2 + 4), the complex product (4 + 4) and the cast
// back (4 + 2) = 20 bytes an element in 3 kernels per tensor, backward the
// same three in reverse.
OperatorCost rope(double elems, bool eager) {
  if (eager) return memory("rope", 20 * elems, 20 * elems, 6, 6);
  return memory("rope", 2 * kBf16Bytes * elems, 2 * kBf16Bytes * elems, 2, 2);
}

OperatorCost norm(const ModelConfig& m, const std::string& name, double tokens, double h, bool eager) {
  return eager && m.norm == NormKind::kRmsNorm ? eager_rms_norm(name, tokens, h) : layer_norm(name, tokens, h);
}

// Bias + dropout + residual add on `tokens` x h. Fused (one kernel): read x and
// residual, write out and the mask. Unfused: bias add, dropout, add as three
// kernels each reading and writing the whole tensor.
OperatorCost bias_dropout_add(const std::string& name, double tokens, double h, bool fused, bool dropout) {
  const double elems = tokens * h;
  // Without dropout there is no mask to write or read, and the unfused path
  // runs no dropout kernel (PyTorch's dropout returns its input at p = 0).
  const double mask = dropout ? kMaskBytes : 0.0;
  if (fused) {
    return memory(name, (3 * kBf16Bytes + mask) * elems, (2 * kBf16Bytes + mask) * elems, 1, 1);
  }
  if (!dropout) return memory(name, (2 * kBf16Bytes + 3 * kBf16Bytes) * elems, 2 * kBf16Bytes * elems, 2, 1);
  const double fwd = (2 * kBf16Bytes + (2 * kBf16Bytes + kMaskBytes) + 3 * kBf16Bytes) * elems;
  const double bwd = (2 * kBf16Bytes + kMaskBytes) * elems * 2;
  return memory(name, fwd, bwd, 3, 2);
}

// Activation of the MLP on `elems` inner elements (per rank). Eager SwiGLU
// (torchtitan FeedForward: silu(w1 x) * w3 x): SiLU (read 2, write 2) then the
// product (2 + 2 + 2) = 10 bytes an element in 2 kernels; backward the
// product's two gradients (2 + 2 + 2 each) and SiLU's (2 + 2 + 2) = 18 in 3.
// Eager GeLU is PyTorch's one native kernel, as the fused one.
OperatorCost activation(MlpKind mlp, double elems, bool fused, bool eager = false) {
  if (mlp == MlpKind::kSwiGlu && eager) return memory("swiglu", 10 * elems, 18 * elems, 2, 3);
  if (mlp == MlpKind::kSwiGlu) {
    // silu(gate) * up: read 2, write 1; backward reads 3, writes 2.
    return memory("swiglu", 3 * kBf16Bytes * elems, 5 * kBf16Bytes * elems, fused ? 1 : 3,
                  fused ? 1 : 3);
  }
  // bias + GeLU: fused one pass (read, write); unfused a bias kernel then GeLU.
  const int passes = fused ? 1 : 2;
  return memory("gelu", passes * 2 * kBf16Bytes * elems, passes * 3 * kBf16Bytes * elems,
                passes, passes);
}

// Ring attention's merge of its per-step partial results (context
// parallelism, the P2P form; Transformer Engine 2.x
// pytorch/attention/dot_product_attention/context_parallel.py,
// AttnFuncWithCPAndKVP2P). Forward: each of the cp steps writes a partial
// output and its log-sum-exp; after the ring, flash_attn_fwd_out_correction_init
// rescales the first (read 2, write 2 bytes an output element) and
// flash_attn_fwd_out_correction adds each later one, rescaled (read the output
// and the step's, write the output: 6 bytes), with cp - 1 log-sum-exp merges
// (fp32, two reads and a write a token and head). Backward: each step's dq
// is copied (4 bytes) or added (6) into dq, and its dk, dv into the K/V
// gradient travelling the ring. Costed for the CP rank that merges the most,
// cp - 1, whose partial outputs are all full-size (with the causal load
// balance, steps past a rank's own index cover half its queries: ranks below
// cp - 1 merge less, but the ring exchange keeps the group in step): dq 4 +
// 6 (cp - 1) bytes; dk and dv each a half-size copy (2), cp - 2 half-size adds
// (3) and a full-size add (6): 3 cp + 2 bytes an element. TE 1.x zeroes the
// output and adds all cp steps (6 cp + 2 bytes): within 4 bytes of this.
OperatorCost cp_attention_merge(const Dims& x, int cp) {
  const double heads = x.a / x.t;
  const double out_elems = x.tokens * heads * x.d;
  // At least one KV head a TP rank (Megatron replicates them where TP exceeds
  // them), as the ring's K/V block counts it (payload.h cp_kv_block_bytes).
  const double kv_elems = x.tokens * std::max(1.0, x.kv / x.t) * x.d;
  const double lse_elems = x.tokens * heads;
  const double fwd = (4 + 6.0 * (cp - 1)) * out_elems + 3 * kFp32Bytes * lse_elems * (cp - 1);
  const double bwd = (4 + 6.0 * (cp - 1)) * out_elems + 2 * (3.0 * cp + 2) * kv_elems;
  OperatorCost op = memory(std::string(kCpAttentionMergeOp), fwd, bwd, 2 * cp - 1, 3 * cp);
  op.attention_core = true;  // re-run with the attention it merges
  return op;
}

void append_attention_kernels(const ModelConfig& m, const Dims& x, bool efficient,
                              std::vector<OperatorCost>* ops) {
  const double heads = x.a / x.t;
  if (efficient) {
    OperatorCost fa;
    fa.name = "flash_attention";
    fa.cls = OpClass::kFlashAttention;
    fa.fwd_flops = 4.0 * x.b * heads * x.s * m.mean_keys_per_query() * x.d;
    fa.bwd_flops = kFlashBackwardFlopsRatio * fa.fwd_flops;
    // q, k, v, o read/written once; the score matrix never touches HBM.
    fa.fwd_bytes = 4 * kBf16Bytes * x.tokens * heads * x.d;
    fa.bwd_bytes = 2 * fa.fwd_bytes;
    fa.attention_core = true;
    ops->push_back(fa);
    return;
  }
  const double keys = m.attention_window > 0
                          ? std::min<double>(m.span(), m.attention_window + kBandBlockKeys)
                          : m.span();
  const double score_elems = x.b * heads * x.s * keys;

  OperatorCost scores;
  scores.name = "attn_scores";
  scores.cls = OpClass::kBatchedGemm;
  scores.batch = static_cast<int64_t>(x.b * heads);
  scores.m = static_cast<int64_t>(x.s);
  scores.n = static_cast<int64_t>(keys);
  scores.k = static_cast<int64_t>(x.d);
  scores.fwd_flops = 2.0 * score_elems * x.d;
  scores.bwd_flops = 2.0 * scores.fwd_flops;
  scores.attention_core = true;
  ops->push_back(scores);

  // Megatron's FusedScaleMaskSoftmax: read scores, write probabilities; backward
  // reads probabilities and their gradient, writes the score gradient.
  OperatorCost softmax =
      memory("softmax", 2 * kBf16Bytes * score_elems, 3 * kBf16Bytes * score_elems, 1, 1);
  softmax.attention_core = true;
  ops->push_back(softmax);

  if (m.attention_dropout_on()) {
    OperatorCost dropout = memory("attn_dropout", (2 * kBf16Bytes + kMaskBytes) * score_elems,
                                  (2 * kBf16Bytes + kMaskBytes) * score_elems, 1, 1);
    dropout.attention_core = true;
    ops->push_back(dropout);
  }

  OperatorCost context;
  context.name = "attn_context";
  context.cls = OpClass::kBatchedGemm;
  context.batch = scores.batch;
  context.m = static_cast<int64_t>(x.s);
  context.n = static_cast<int64_t>(x.d);
  context.k = static_cast<int64_t>(keys);
  context.fwd_flops = 2.0 * score_elems * x.d;
  context.bwd_flops = 2.0 * context.fwd_flops;
  context.attention_core = true;
  ops->push_back(context);
}

// The layer's core attention; under ring context parallelism, its merge after it.
void append_attention_core(const ModelConfig& m, const Dims& x, const ParallelConfig& p, bool efficient,
                           std::vector<OperatorCost>* ops) {
  append_attention_kernels(m, x, efficient, ops);
  if (p.cp > 1 && p.cp_comm == CpComm::kP2p) ops->push_back(cp_attention_merge(x, p.cp));
}

double gemm_weight_elems_per_layer(const ModelConfig& m) {
  const double h = m.hidden;
  const double kv_dim = static_cast<double>(m.kv_heads) * m.head_dim();
  const double mlp_in = m.mlp == MlpKind::kSwiGlu ? 2.0 * m.ffn_hidden : m.ffn_hidden;
  return h * (h + 2 * kv_dim) + h * h + h * mlp_in + static_cast<double>(m.ffn_hidden) * h;
}

}  // namespace

std::vector<OperatorCost> layer_operators(const ModelConfig& m, const ParallelConfig& p,
                                          bool efficient_operators, bool eager) {
  const Dims x = dims(m, p);
  const double qkv_out = (x.h + 2 * x.kv * x.d) / x.t;
  const double fc1_out = (m.mlp == MlpKind::kSwiGlu ? 2 * x.f : x.f) / x.t;
  const bool fused = efficient_operators;
  // RoPE rotates this rank's queries and keys: (h + kv heads x d) / t a token.
  auto add_rope = [&](std::vector<OperatorCost>* ops) {
    if (m.position == PositionKind::kRope) ops->push_back(rope(x.tokens * (x.h + x.kv * x.d) / x.t, eager));
  };
  std::vector<OperatorCost> ops;
  if (m.block == BlockKind::kParallel) {
    ops.push_back(norm(m, "ln", x.sp_tokens, x.h, eager));
    ops.push_back(gemm("qkv_fc1", x.tokens, qkv_out + fc1_out, x.h));
    add_rope(&ops);
    append_attention_core(m, x, p, efficient_operators, &ops);
    ops.push_back(activation(m.mlp, x.tokens * x.f / x.t, fused, eager));
    ops.push_back(gemm("proj_fc2", x.tokens, x.h, (x.h + x.f) / x.t));
    ops.push_back(bias_dropout_add("bias_dropout_add", x.sp_tokens, x.h, fused, m.hidden_dropout_on()));
    return ops;
  }
  ops.push_back(norm(m, "ln1", x.sp_tokens, x.h, eager));
  ops.push_back(gemm("qkv", x.tokens, qkv_out, x.h));
  add_rope(&ops);
  append_attention_core(m, x, p, efficient_operators, &ops);
  ops.push_back(gemm("proj", x.tokens, x.h, x.h / x.t));
  ops.push_back(bias_dropout_add("bias_dropout_add1", x.sp_tokens, x.h, fused, m.hidden_dropout_on()));
  ops.push_back(norm(m, "ln2", x.sp_tokens, x.h, eager));
  ops.push_back(gemm("fc1", x.tokens, fc1_out, x.h));
  ops.push_back(activation(m.mlp, x.tokens * x.f / x.t, fused, eager));
  ops.push_back(gemm("fc2", x.tokens, x.h, x.f / x.t));
  ops.push_back(bias_dropout_add("bias_dropout_add2", x.sp_tokens, x.h, fused, m.hidden_dropout_on()));
  return ops;
}

double fp8_copy_bytes_per_value(bool block_scaled, bool any_layout) {
  constexpr double kFp8Bytes = 1.0;
  constexpr double kMxScaleBytesPerValue = 1.0 / 32.0;  // one E8M0 byte per 32 values, per copy
  if (block_scaled) return 2 * (kFp8Bytes + kMxScaleBytesPerValue);
  return any_layout ? kFp8Bytes : 2 * kFp8Bytes;
}

void apply_fp8(std::vector<OperatorCost>* ops, const Fp8Casts& casts) {
  const bool any_layout = casts.any_layout;
  // Hopper's FP8 GEMMs take both operands K-major (TN only), so the weight
  // gradient needs each FP8 operand transposed as well. Transformer Engine
  // (pytorch/module/linear.py, layernorm_linear.py; v1.x fp8_cast_transpose_fused,
  // fp8_cast_transpose_bgrad_fused and fp8_transpose, v2.x quantizers with
  // row- and column-wise usage) writes both copies:
  //  - a fused cast-transpose reads the BF16 tensor and writes the FP8 copy
  //    and its transpose: 2 + 1 + 1 bytes per element;
  //  - after a LayerNorm that already wrote FP8, the transpose alone reads and
  //    writes one byte each: 1 + 1.
  // Where the FP8 GEMM takes any layout (Blackwell), TE makes no transposes
  // (Float8Quantizer: create_transpose = columnwise_usage &&
  // !nvte_is_non_tn_fp8_gemm_supported()): a cast reads 2 and writes 1 byte,
  // and the LayerNorm-fed inputs need nothing more.
  // MXFP8 (op_cost.h Fp8Casts::block_scaled): both copies and their scales,
  // and no transposes of a norm's output (the norm writes BF16, cast below).
  const double cast_bytes_per_element = kBf16Bytes + fp8_copy_bytes_per_value(casts.block_scaled, any_layout);
  const double transpose_bytes_per_element = any_layout || casts.block_scaled ? 0.0 : 1.0 + 1.0;
  double fwd_bytes = 0, bwd_bytes = 0;
  int fwd_kernels = 0, bwd_kernels = 0;
  // Current scaling's amax pass: one read of the BF16 tensor. After a norm:
  // the norm writes BF16 instead of FP8 (1 byte more) with its amax (TE 2.8+
  // FUSED_NORM_AMAX_FP8; 2.2-2.7 read it again, 2 bytes and a kernel more),
  // then the scale and the cast (2 + 1 bytes).
  constexpr double kAmaxReadBytesPerElement = kBf16Bytes;
  constexpr double kNormAmaxCastBytesPerElement = (kBf16Bytes - 1.0) + kBf16Bytes + 1.0;
  double fwd_extra_s = 0, bwd_extra_s = 0;
  for (OperatorCost& op : *ops) {
    if (op.cls != OpClass::kGemm) continue;
    op.gemm_speedup = casts.gemm_speedup;
    // Forward: the GEMM's input (m x k). TE's LayerNormLinear writes the
    // normalised input in FP8 itself; its transpose is made for the wgrad.
    const bool after_layer_norm = op.name == "qkv" || op.name == "fc1" || op.name == "qkv_fc1";
    const double input_elements = static_cast<double>(op.m) * op.k;
    if (after_layer_norm) {
      if (transpose_bytes_per_element > 0) {
        bwd_bytes += transpose_bytes_per_element * input_elements;
        ++bwd_kernels;
      }
    } else {
      fwd_bytes += cast_bytes_per_element * input_elements;
      ++fwd_kernels;
    }
    // Backward: the output gradient (m x n) to E5M2 and its transpose, before
    // dgrad and wgrad.
    bwd_bytes += cast_bytes_per_element * static_cast<double>(op.m) * op.n;
    ++bwd_kernels;
    if (casts.block_scaled && after_layer_norm) {
      // The norm's BF16 output (1 byte more than FP8), then the MXFP8 cast.
      fwd_bytes += ((kBf16Bytes - 1.0) + cast_bytes_per_element) * input_elements * casts.norm_rows_share;
      ++fwd_kernels;
    }
    if (!casts.current_scaling) continue;
    // Column-parallel GEMMs (the LayerNorm-fed ones) take a gathered input;
    // row-parallel ones (proj, fc2) give a gathered output gradient.
    if (after_layer_norm) {
      fwd_bytes += kNormAmaxCastBytesPerElement * input_elements * casts.norm_rows_share;
      fwd_kernels += 2;
      fwd_extra_s += casts.amax_allreduce_s;
    } else {
      fwd_bytes += kAmaxReadBytesPerElement * input_elements;
      fwd_kernels += 2;
      bwd_extra_s += casts.amax_allreduce_s;
    }
    bwd_bytes += kAmaxReadBytesPerElement * static_cast<double>(op.m) * op.n;
    bwd_kernels += 2;
  }
  OperatorCost cast = memory("fp8_cast", fwd_bytes, bwd_bytes, fwd_kernels, bwd_kernels);
  cast.fwd_extra_s = fwd_extra_s;
  cast.bwd_extra_s = bwd_extra_s;
  ops->push_back(cast);
}

std::vector<OperatorCost> embedding_operators(const ModelConfig& m, const ParallelConfig& p) {
  const Dims x = dims(m, p);
  // Vocab-parallel lookup: read the rows, write the (sequence-sharded after the
  // reduce) output; backward scatters the gradient into the table shard.
  return {memory("embedding", 2 * kBf16Bytes * x.tokens * x.h,
                 2 * kFp32Bytes * x.tokens * x.h, 2, 2)};
}

// The vocabulary-parallel loss over `elems` logits of this rank (tokens x V/t),
// bytes per logit element read + written, from each implementation's source:
// - unfused (Megatron-LM / Megatron-Core megatron/core/tensor_parallel/
//   cross_entropy.py): forward .float() (read bf16, write fp32: 6), max (4),
//   in-place subtract (8), in-place exp (8), sum (4), in-place divide by the sum
//   (8) = 38 in 6 kernels; backward the in-place multiply by the output gradient
//   (8) and autograd's cast of the fp32 gradient back to bf16 (6) = 14 in 2
//   kernels (the per-token target scatter is negligible).
// - jit-fused (megatron/core/fusions/fused_cross_entropy.py,
//   --cross-entropy-loss-fusion): the upcast fused with the max (6), subtract
//   fused with exp (8), sum (4), divide (8) = 26 in 4 kernels; backward as above,
//   14 in 2.
// - single-kernel (flash-attn's xentropy, Transformer Engine's fused
//   cross-entropy): the forward reads the bf16 logits once (2), the backward
//   reads them again and writes the bf16 gradient (4), one kernel each.
// - pytorch (F.cross_entropy(logits.float(), labels), torchtitan's loss): the
//   upcast (6), log_softmax reading the row for its max, for its sum of
//   exponentials and for the output it writes (4 + 4 + 4 + 4), NLL's gather
//   (negligible) = 22 in 3 kernels; backward NLL's zero-filled gradient (4)
//   and its scatter, log_softmax's backward reading the gradient for its sum
//   and again with the output to write the input gradient (4 + 4 + 4 + 4), the
//   cast back to bf16 (6) = 26 in 4 kernels.
OperatorCost cross_entropy(double elems, CrossEntropyImpl impl) {
  switch (impl) {
    case CrossEntropyImpl::kUnfused: return memory("cross_entropy", 38 * elems, 14 * elems, 6, 2);
    case CrossEntropyImpl::kJitFused: return memory("cross_entropy", 26 * elems, 14 * elems, 4, 2);
    case CrossEntropyImpl::kSingleKernel:
      return memory("cross_entropy", kBf16Bytes * elems, 2 * kBf16Bytes * elems, 1, 1);
    case CrossEntropyImpl::kPytorch: return memory("cross_entropy", 22 * elems, 26 * elems, 3, 4);
  }
  throw std::logic_error("cross_entropy: unknown implementation");
}

double logits_per_rank(const ModelConfig& m, const ParallelConfig& p) {
  const Dims x = dims(m, p);
  return x.tokens * x.v / x.t;
}

std::vector<OperatorCost> output_operators(const ModelConfig& m, const ParallelConfig& p,
                                           CrossEntropyImpl cross_entropy_impl, bool eager) {
  const Dims x = dims(m, p);
  std::vector<OperatorCost> ops;
  ops.push_back(norm(m, "final_ln", x.sp_tokens, x.h, eager));
  ops.push_back(gemm("logits", x.tokens, x.v / x.t, x.h));
  ops.push_back(cross_entropy(logits_per_rank(m, p), cross_entropy_impl));
  return ops;
}

namespace {

// The in-situ scale of a call class (model/profile_tables.h InsituTable), 1 when
// the profile has none.
double insitu_scale(const ProfileTables* t, const char* cls, int ranks) {
  if (t == nullptr) return 1.0;
  return t->insitu.value(cls, ranks).value_or(1.0);
}

}  // namespace

CallClassTimes call_class_times(const std::vector<KernelCall>& calls, const GpuProfile& gpu) {
  const ProfileTables* t = gpu.measured();
  CallClassTimes out;
  for (const KernelCall& c : calls) {
    switch (c.kind) {
      case CallKind::kGemm:
        out.gemm_s += t != nullptr && !t->gemm.empty()
                          ? t->gemm.time_s(c.m, c.n, c.k, c.name, gpu.busy_ranks, gpu.cold_fraction)
                          : gemm_time_s(gpu, c.m, c.n, c.k);
        break;
      case CallKind::kAttention:
        if (t == nullptr || t->attention.empty()) {
          throw std::invalid_argument("profile " + gpu.name + " has no measured attention table");
        }
        out.attention_s +=
            c.count * t->attention.time_s(c.seq, c.head_dim, c.window, c.backward, gpu.busy_ranks, gpu.cold_fraction);
        break;
      case CallKind::kKernel: {
        const std::optional<double> s =
            t != nullptr ? t->kernels.time_s(c.name, c.backward, c.count, gpu.busy_ranks) : std::nullopt;
        if (!s) {
          throw std::invalid_argument("profile " + gpu.name + " has no measured kernel '" + c.name + "' (" +
                                      (c.backward ? "bwd" : "fwd") + ")");
        }
        out.kernel_s += *s;
        break;
      }
    }
  }
  return out;
}

double calls_time_s(const std::vector<KernelCall>& calls, const GpuProfile& gpu) {
  const ProfileTables* t = gpu.measured();
  const CallClassTimes c = call_class_times(calls, gpu);
  return gpu.time_share * (insitu_scale(t, "gemm", gpu.busy_ranks) * c.gemm_s +
                            insitu_scale(t, "attention", gpu.busy_ranks) * c.attention_s +
                            insitu_scale(t, "kernel", gpu.busy_ranks) * c.kernel_s);
}

double op_gap_s(const GpuProfile& gpu) {
  const ProfileTables* t = gpu.measured();
  const std::optional<double> gap = t != nullptr ? t->insitu.value("gap_us", gpu.busy_ranks) : std::nullopt;
  return gpu.time_share * gap.value_or(gpu.op_gap_us) * 1e-6;
}

// The in-situ scale of an analytical op's class (a profile fitted on
// published runs, calibrate/fit.h; 1 without an in-situ table).
double class_scale(const OperatorCost& op, const GpuProfile& gpu) {
  const ProfileTables* t = gpu.measured();
  if (t == nullptr || t->insitu.empty()) return 1.0;
  switch (op.cls) {
    case OpClass::kGemm:
    case OpClass::kBatchedGemm:
      return insitu_scale(t, "gemm", gpu.busy_ranks);
    case OpClass::kFlashAttention:
      return insitu_scale(t, "attention", gpu.busy_ranks);
    case OpClass::kMemory:
      return insitu_scale(t, "kernel", gpu.busy_ranks);
  }
  return 1.0;
}

double forward_time_s(const OperatorCost& op, const GpuProfile& gpu) {
  if (!op.fwd_calls.empty()) return calls_time_s(op.fwd_calls, gpu) + op_gap_s(gpu);
  double t = 0;
  switch (op.cls) {
    case OpClass::kGemm:
      t = fp8_gemm_time_s(gpu, op.m, op.n, op.k, op.gemm_speedup);
      break;
    case OpClass::kBatchedGemm:
      t = batched_gemm_time_s(gpu, op.batch, op.m, op.n, op.k);
      break;
    case OpClass::kFlashAttention:
      t = flash_attention_time_s(gpu, op.fwd_flops, /*backward=*/false, op.flash_kernel);
      break;
    case OpClass::kMemory:
      t = std::max(memory_time_s(gpu, op.fwd_bytes), op.fwd_kernels * gpu.kernel_launch_us * 1e-6);
      break;
  }
  return class_scale(op, gpu) * t + op.fwd_extra_s;
}

double backward_time_s(const OperatorCost& op, const GpuProfile& gpu) {
  if (!op.bwd_calls.empty()) return calls_time_s(op.bwd_calls, gpu) + op_gap_s(gpu);
  double t = 0;
  switch (op.cls) {
    case OpClass::kGemm:
      // dgrad: (m x n) * (n x k); wgrad: (k x m) * (m x n).
      t = fp8_gemm_time_s(gpu, op.m, op.k, op.n, op.gemm_speedup) + fp8_gemm_time_s(gpu, op.k, op.n, op.m, op.gemm_speedup);
      break;
    case OpClass::kBatchedGemm:
      t = batched_gemm_time_s(gpu, op.batch, op.m, op.k, op.n) + batched_gemm_time_s(gpu, op.batch, op.k, op.n, op.m);
      break;
    case OpClass::kFlashAttention:
      t = flash_attention_time_s(gpu, op.bwd_flops, /*backward=*/true, op.flash_kernel);
      break;
    case OpClass::kMemory:
      t = std::max(memory_time_s(gpu, op.bwd_bytes), op.bwd_kernels * gpu.kernel_launch_us * 1e-6);
      break;
  }
  return class_scale(op, gpu) * t + op.bwd_extra_s;
}

double forward_time_s(const std::vector<OperatorCost>& ops, const GpuProfile& gpu) {
  double total = 0;
  for (const OperatorCost& op : ops) total += forward_time_s(op, gpu);
  return total;
}

double backward_time_s(const std::vector<OperatorCost>& ops, const GpuProfile& gpu) {
  double total = 0;
  for (const OperatorCost& op : ops) total += backward_time_s(op, gpu);
  return total;
}

int find_operator(const std::vector<OperatorCost>& ops, const std::string& name) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

double model_flops_per_iteration(const ModelConfig& m, int64_t global_batch) {
  const double tokens = static_cast<double>(global_batch) * m.seq_len;
  // Keys per query as the formula counts them: the full square (span) for full
  // causal attention, scaled by the keys a sliding window actually leaves.
  const double full_keys = (m.span() + 1.0) / 2.0;
  const double counted_keys = m.span() * m.mean_keys_per_query() / full_keys;
  const double per_layer_fwd = 2.0 * tokens * gemm_weight_elems_per_layer(m) +
                               2.0 * 2.0 * tokens * counted_keys * m.hidden;
  const double logits_fwd = 2.0 * tokens * m.hidden * m.vocab;
  constexpr double kPasses = 3.0;  // forward + backward (2x forward)
  return kPasses * (m.layers * per_layer_fwd + logits_fwd);
}

}  // namespace megascale::model
