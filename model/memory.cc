// model/memory.cc: per-GPU HBM model.
#include "model/memory.h"

#include <algorithm>
#include <cstdio>
#include <vector>
#include <fmt/format.h>

#include "model/engine_ops.h"
#include "model/op_cost.h"
#include "model/op_recompute.h"
#include "model/payload.h"
#include "model/pipeline_layout.h"

namespace megascale::model {
namespace {

constexpr double kParamBytes = 2.0;       // bf16 working weights
constexpr double kBf16ActivationBytes = 2.0;  // the saved tensors of recompute = "selective_op"

// FP8 (Transformer Engine): bytes each transformer-layer weight holds through
// the step in FP8. TE's Linear quantizes the weight on the first micro-batch
// and keeps the copy for the rest (is_first_microbatch: the weight workspace),
// the row-wise data (1 B) and, for the backward's dgrad, a column-wise copy
// (1 B) that Float8Quantizer makes only where the GEMM is TN-only (Hopper;
// GpuProfile::fp8_gemm_any_layout). MXFP8 always keeps both, each with one
// E8M0 scale per 32 values (MXFP8Quantizer; model/op_cost.h Fp8Casts).
// With Megatron-Core's --fp8-param-gather ("keep the compute param in fp8 (do
// not use any other intermediate dtype)") these copies are the parameters and
// no BF16 weight is held; without it they sit beside the BF16 weights.
// Bytes per weight: model/op_cost.h fp8_copy_bytes_per_value, the same copies
// the step's weight casts write.
double fp8_weight_copy_bytes_per_param(const Optimizations& o, const GpuProfile& gpu) {
  return fp8_copy_bytes_per_value(o.fp8_recipe == Fp8Recipe::kMxfp8, gpu.fp8_gemm_any_layout());
}

// Fixed per-GPU overhead: CUDA context and cuBLAS workspace (~0.5-1 GB) plus NCCL
// communicator buffers (NCCL_BUFFSIZE 4 MB x channels x peers, ~0.5-1 GB for a
// 3D-parallel job). Assumed, not measured here; `calibrate` can replace it.
constexpr double kFixedOverheadBytes = 1.5e9;

// ZeRO-3 / FSDP: transformer-layer units unsharded at once, the one computing and
// the prefetched next (PyTorch FSDP limit_all_gathers; see memory_per_gpu).
constexpr double kZero3UnsharedUnits = 2.0;

// The loss's logits, bytes per logit element alive at its peak (model/op_cost.cc
// cross_entropy walks the same sources): the unfused and jit-fused losses
// upcast the bf16 logits to an fp32 copy that is kept as the softmax for
// backward (bf16 2 + fp32 4 while both exist; in backward the fp32 gradient,
// written in place, and its bf16 cast); a single-kernel loss keeps the bf16
// logits and writes a bf16 gradient (2 + 2). PyTorch's F.cross_entropy over an
// fp32 copy (torchtitan's loss, which drops the bf16 logits before backward)
// keeps log_softmax's fp32 output; in backward NLL's fp32 gradient and
// log_softmax's fp32 input gradient exist beside it (4 + 4 + 4; the forward's
// bf16 logits, fp32 copy and output are 2 + 4 + 4).
double loss_bytes_per_logit(CrossEntropyImpl impl) {
  switch (impl) {
    case CrossEntropyImpl::kSingleKernel: return 4.0;
    case CrossEntropyImpl::kPytorch: return 12.0;
    case CrossEntropyImpl::kUnfused:
    case CrossEntropyImpl::kJitFused: break;
  }
  return 6.0;
}

// Megatron-LM's distributed-optimizer bucket (megatron_default_dp_bucket_params),
// in the reduce dtype, one in flight.
double bucket_bytes(int dp, const Optimizations& o) {
  return static_cast<double>(megatron_default_dp_bucket_params(dp)) * grad_element_bytes(o);
}

// (micro-batch, chunk) activations pipeline rank r keeps at its peak: its
// warm-up forwards + 1 (model/schedule.h warmup_forwards()).
int inflight_chunks(const ParallelConfig& p, int pp_rank) {
  const int m = p.microbatches();
  if (p.vpp == 1) return std::min(p.pp - pp_rank, m);
  const int warmup = std::min(m * p.vpp, 2 * (p.pp - pp_rank - 1) + (p.vpp - 1) * p.pp);
  return std::min(warmup + 1, m * p.vpp);
}

}  // namespace

double activation_bytes_per_layer(const ModelConfig& m, const ParallelConfig& p,
                                  bool flash_attention, bool fp8) {
  const double sbh = static_cast<double>(m.seq_len) * p.micro_batch * m.hidden;
  const double t = p.tp;
  const double f_over_h = static_cast<double>(m.ffn_hidden) / m.hidden;
  // Korthikanti et al. Table 2, per-term: attention linear parts 11 sbh, MLP
  // 3 sbh + (4 or 6) sbf (fc1 input, activation input(s), fc2 input, mask),
  // LayerNorms 4 sbh; the parallel block saves one LayerNorm input and one
  // dropout (3 sbh).
  const double mlp = 3.0 + (m.mlp == MlpKind::kSwiGlu ? 6.0 : 4.0) * f_over_h;
  double linear = 11.0 + mlp + 4.0;
  if (m.block == BlockKind::kParallel) linear -= 3.0;
  // Parts kept whole on every TP rank without SP: LayerNorm inputs, dropout
  // masks and outputs outside the TP region (10 sbh in the paper).
  double replicated = std::min(10.0, linear);
  double sharded = linear - replicated;
  if (!m.hidden_dropout_on()) {
    // No hidden dropout: no 1-byte mask after the projection and after FC2
    // (1 sbh each in the paper's 11 and 19 sbh; the parallel block has one),
    // both outside the TP region.
    const double masks = m.block == BlockKind::kParallel ? 1.0 : 2.0;
    replicated -= masks;
    linear -= masks;
  }
  if (fp8) {
    // Transformer Engine saves each FP8 GEMM's input for the weight gradient as
    // its FP8 (column-wise) copy, 1 byte a value instead of 2: Linear keeps
    // inputmat_t, LayerNormLinear its quantised ln_out (TE 1.x linear.py /
    // layernorm_linear.py save_for_backward; TE 2.x the same tensors as
    // Float8Tensor with column-wise usage only). Halved: the LayerNorm outputs
    // feeding QKV and FC1 (1 sbh each, replicated without SP; the parallel
    // block has one), the projection input (1 sbh) and the FC2 input (1 sbf).
    const double ln_outputs = m.block == BlockKind::kParallel ? 1.0 : 2.0;
    replicated -= ln_outputs;
    sharded -= 1.0 + f_over_h;
    linear = replicated + sharded;
  }
  // Score matrix (2 as^2 b softmax out, a s^2 b mask, 2 a s^2 b dropout out;
  // without attention dropout only the softmax output).
  const double keys = m.attention_window > 0
                          ? std::min<double>(m.seq_len, m.attention_window + 1)
                          : m.seq_len;
  const double score_bytes = m.attention_dropout_on() ? 5.0 : 2.0;
  const double scores = flash_attention ? 0.0 : score_bytes * m.heads * keys / (m.hidden * t);

  switch (p.recompute) {
    case Recompute::kFull:
      return sbh * 2.0 / (p.sequence_parallel ? t : 1.0);
    case Recompute::kSelective:
      return p.sequence_parallel ? sbh * linear / t : sbh * (replicated + sharded / t);
    case Recompute::kSelectiveOp:
      return sbh * kBf16ActivationBytes * op_recompute_saved_elems_per_token(m, p, flash_attention) / m.hidden;
    case Recompute::kNone:
      break;
  }
  if (p.sequence_parallel) return sbh * (linear / t + scores);
  return sbh * (replicated + sharded / t + scores);
}

namespace {

// Pipeline rank r's memory: its layers (model/pipeline_layout.h), the word
// embedding and positions on rank 0, the tied output copy on the last rank.
MemoryBreakdown rank_memory(const ModelConfig& m, const ParallelConfig& p, const Optimizations& o,
                            const GpuProfile& gpu, const PipelineLayout& layout, int pp_rank) {
  MemoryBreakdown r;
  r.pp_rank = pp_rank;
  r.capacity_bytes = gpu.memory_bytes;
  r.inflight_chunks = inflight_chunks(p, pp_rank);
  // The layers of an average chunk of the rank (its chunks hold the same on
  // even stages; one layer more or fewer on a given first / last stage).
  const double chunk_layers = static_cast<double>(layout.stage_layers(pp_rank)) / p.vpp;
  if (gpu.models_engine()) {
    // The engine (model/engine_ops.h): fp32 everything, no device
    // context; its stash per layer for the schedule's chunks in flight.
    Scenario s;
    s.model = m;
    s.parallel = p;
    s.optimizations = o;
    const EngineMemory e = engine_memory(s, pp_rank);
    r.parameters_bytes = e.parameters;
    r.gradients_bytes = e.gradients;
    r.optimizer_bytes = e.optimizer;
    r.activation_bytes_per_layer = e.stash_per_layer;
    r.activations_bytes = e.stash_per_layer * chunk_layers * r.inflight_chunks;
    r.other_bytes = 0;
    r.total_bytes = r.parameters_bytes + r.gradients_bytes + r.optimizer_bytes + r.activations_bytes;
    return r;
  }
  const double layer_params = static_cast<double>(m.parameters_per_layer()) / p.tp;
  const double vocab_params = static_cast<double>(m.vocab) * m.hidden / p.tp;
  double embed_params = 0;
  if (pp_rank == 0) {
    // Untied on a single stage: the output matrix is a second vocab x hidden.
    // The learned position table (none with RoPE).
    embed_params += vocab_params * (!m.tie_embeddings && p.pp == 1 ? 2 : 1) +
                    (m.position == PositionKind::kLearned ? static_cast<double>(m.seq_len) * m.hidden : 0.0);
  } else if (pp_rank == p.pp - 1) {
    embed_params += vocab_params;  // the output layer's (tied copy or own) matrix
  }
  const double stage_layer_params = layer_params * layout.stage_layers(pp_rank);
  const double params = stage_layer_params + embed_params;
  const double dp = p.dp;
  r.parameters_bytes = params * kParamBytes / (p.zero_stage >= 3 ? dp : 1.0);
  if (o.fp8 && p.zero_stage < 3) {
    // The layers' FP8 weights (their norms' few parameters counted with them;
    // the embedding and output layer stay BF16). ZeRO-3 / FSDP gathers are
    // left as BF16.
    r.fp8_weight_bytes = stage_layer_params * fp8_weight_copy_bytes_per_param(o, gpu);
    r.parameters_bytes += r.fp8_weight_bytes - (o.fp8_param_gather ? stage_layer_params * kParamBytes : 0.0);
  }
  // With bf16 gradients Megatron's optimizer steps on an fp32 copy of its shard
  // (4 B x params / dp): allocated at the step, after the last backward freed
  // every activation, so it raises the peak only past them; not counted.
  r.gradients_bytes = params * grad_memory_element_bytes(o, p.zero_stage) / (p.zero_stage >= 2 ? dp : 1.0);
  r.optimizer_bytes =
      params * optimizer_state_bytes(o).held() / (p.zero_stage >= 1 ? dp : 1.0);  // 12 B in fp32

  r.activation_bytes_per_layer = activation_bytes_per_layer(m, p, o.efficient_operators, o.fp8);
  r.activations_bytes = r.activation_bytes_per_layer * chunk_layers * r.inflight_chunks;

  r.other_bytes = kFixedOverheadBytes;
  if (p.recompute != Recompute::kNone) {
    // The layer whose backward runs first re-creates what the plain forward
    // would have kept (full: the whole layer beside its input; selective: the
    // attention scores; selective_op: the re-run operators' outputs), for one
    // micro-batch, while every in-flight stash is still held: the backward
    // that follows the peak forward. Korthikanti et al.'s totals leave it out.
    ParallelConfig plain = p;
    plain.recompute = Recompute::kNone;
    r.rerun_layer_bytes =
        activation_bytes_per_layer(m, plain, o.efficient_operators, o.fp8) - r.activation_bytes_per_layer;
  }
  if (p.dp > 1 && p.zero_stage >= 1) r.other_bytes += bucket_bytes(p.dp, o);
  if (p.pp == 1) {
    // Rank 0 is also the last stage: one micro-batch's logits while the loss runs.
    r.loss_logits_bytes = loss_bytes_per_logit(o.cross_entropy) * logits_per_rank(m, p);
  }
  // Never live at once: the loss's tensors are freed by the output layer's
  // backward, before the last transformer layer's backward re-runs it.
  r.other_bytes += std::max(r.loss_logits_bytes, r.rerun_layer_bytes);
  if (p.cp > 1) {
    // Context parallelism's key/value buffers while the first backward's
    // attention runs, every stash still held (Transformer Engine's attention
    // with CP, pytorch/attention/dot_product_attention/context_parallel.py): the
    // all-gather form gathers every CP rank's K/V again and writes their
    // full-size gradients before the reduce-scatter (2 x cp blocks; the forward
    // saves its own block only); the ring holds the block in hand and the next
    // one, and in backward their gradients (4 blocks).
    const double block = cp_kv_block_bytes(m, p, gpu.activation_bytes);
    r.cp_kv_bytes = (p.cp_comm == CpComm::kAllGather ? 2.0 * p.cp : 4.0) * block;
    r.other_bytes += r.cp_kv_bytes;
  }
  if (p.zero_stage >= 3) {
    // ZeRO-3 / FSDP gathers one unit (a transformer layer) at a time, never a
    // whole chunk: PyTorch FSDP's limit_all_gathers (default True since PR
    // #104900) keeps two units unsharded, the one computing and the prefetched
    // next (FSDP docstring); in backward the computing unit's unsharded fp32
    // gradient lives until its reduce-scatter. DeepSpeed ZeRO-3 likewise gathers
    // per submodule (stage3_prefetch_bucket_size). The unsharded gradient is
    // in the reduce dtype (FSDP casts it there for the reduce-scatter).
    r.other_bytes += layer_params * (kZero3UnsharedUnits * kParamBytes + grad_element_bytes(o));
  }
  r.total_bytes =
      r.parameters_bytes + r.gradients_bytes + r.optimizer_bytes + r.activations_bytes + r.other_bytes;
  return r;
}

}  // namespace

MemoryBreakdown memory_per_gpu(const ModelConfig& m, const ParallelConfig& p,
                               const Optimizations& o, const GpuProfile& gpu) {
  // Even stages: rank 0 holds the most (as many layers as any, the embedding and
  // positions, the most chunks in flight). Uneven ones: every rank is compared.
  const PipelineLayout layout(m, p);
  MemoryBreakdown best = rank_memory(m, p, o, gpu, layout, 0);
  if (layout.even()) return best;
  for (int r = 1; r < p.pp; ++r) {
    MemoryBreakdown mine = rank_memory(m, p, o, gpu, layout, r);
    if (mine.total_bytes > best.total_bytes) best = mine;
  }
  return best;
}

double unsharded_gradient_extra_bytes(const ModelConfig& m, const ParallelConfig& p, const Optimizations& o,
                                      const GpuProfile& gpu) {
  if (p.zero_stage < 2 || p.dp <= 1 || p.microbatches() <= 1) return 0.0;
  const MemoryBreakdown sharded = memory_per_gpu(m, p, o, gpu);
  ParallelConfig whole = p;
  whole.zero_stage = 1;  // gradients unsharded, nothing else changed
  const PipelineLayout layout(m, whole);
  return rank_memory(m, whole, o, gpu, layout, sharded.pp_rank).gradients_bytes - sharded.gradients_bytes;
}

namespace {
// GB with one decimal; two below 0.1 GB, so that a part counted is never
// printed as 0.0 (CP K/V buffers of a short sequence: tens of MB).
std::string part_gb(double bytes) {
  return bytes < 0.095e9 ? fmt::format("{:.2f}", bytes / 1e9) : fmt::format("{:.1f}", bytes / 1e9);
}
}  // namespace

std::string MemoryBreakdown::other_parts() const {
  std::vector<std::string> parts;
  if (loss_logits_bytes > 0) parts.push_back(fmt::format("loss logits {}", part_gb(loss_logits_bytes)));
  if (rerun_layer_bytes > 0) parts.push_back(fmt::format("re-run layer {}", part_gb(rerun_layer_bytes)));
  std::string inside = parts.size() == 2 ? fmt::format("{} or {}, never at once: the larger counted", parts[0], parts[1])
                       : parts.empty()   ? std::string()
                                         : parts[0];
  if (cp_kv_bytes > 0) {
    const std::string cp = fmt::format("CP K/V buffers {}", part_gb(cp_kv_bytes));
    inside = inside.empty() ? cp : fmt::format("{}; {}", inside, cp);
  }
  return inside.empty() ? std::string() : fmt::format(" ({})", inside);
}

std::string MemoryBreakdown::describe() const {
  const std::string fp8 =
      fp8_weight_bytes > 0 ? fmt::format(" (FP8 weights {})", part_gb(fp8_weight_bytes)) : std::string();
  return fmt::format(
      "needs {:.1f} GB of {:.1f} GB: parameters {:.1f}{}, gradients {:.1f}, optimizer {:.1f}, "
      "activations {:.1f} ({} in-flight chunks x {:.2f} GB/layer), other {:.1f}",
      total_bytes / 1e9, capacity_bytes / 1e9, parameters_bytes / 1e9, fp8, gradients_bytes / 1e9,
      optimizer_bytes / 1e9, activations_bytes / 1e9, inflight_chunks, activation_bytes_per_layer / 1e9,
      other_bytes / 1e9) +
         other_parts() +
         (pp_rank > 0 ? fmt::format(", on pipeline rank {}", pp_rank) : std::string());
}

}  // namespace megascale::model
