// model/engine_ops.cc: see engine_ops.h. Every list below mirrors the engine's
// code inside one trace event; the file and function are named beside it.
#include "model/engine_ops.h"

#include <algorithm>
#include <stdexcept>

#include "model/collective_cost.h"
#include "model/estimator.h"
#include "model/payload.h"
#include "model/pipeline_layout.h"
#include "model/profile.h"

namespace megascale::model {
namespace {

// The engine's per-rank dimensions (engine/layers.h ModelDims).
struct EngineDims {
  int64_t N = 0;   // tokens of a micro-batch inside a TP region (B x T)
  int64_t Nl = 0;  // tokens held outside (the sequence shard under SP)
  int64_t C = 0, HD = 0, NHl = 0, Sq = 0, Al = 0, Fl = 0, Fo = 0, Vl = 0;
  int T = 0, window = 0;
  // Row blocks of a TP linear's token-parallel products (forward out = in w^T,
  // backward din = dout w): under SP the engine runs them per sequence shard,
  // one call per TP rank's block (engine/layers.cc tp_gather_gemm /
  // tp_gemm_reduce_scatter, with or without tp_overlap); otherwise one call.
  int row_blocks = 1;
  bool gelu = true;
};

EngineDims dims(const ModelConfig& m, const ParallelConfig& p) {
  EngineDims d;
  const int tp = p.tp;
  const bool sp = p.sequence_parallel && tp > 1;  // the engine never shards with tp 1
  d.T = m.seq_len;
  d.N = static_cast<int64_t>(p.micro_batch) * m.seq_len;
  d.Nl = sp ? d.N / tp : d.N;
  d.row_blocks = sp ? tp : 1;
  d.C = m.hidden;
  d.HD = m.head_dim();
  d.NHl = m.heads / tp;
  const int64_t kvl = m.kv_heads / tp;
  d.Sq = (d.NHl + 2 * kvl) * d.HD;
  d.Al = d.NHl * d.HD;
  d.Fl = m.ffn_hidden / tp;
  d.gelu = m.mlp == MlpKind::kGelu;
  d.Fo = d.gelu ? d.Fl : 2 * d.Fl;
  d.Vl = m.vocab / tp;
  d.window = m.attention_window;
  return d;
}

KernelCall gemm(const char* layout, int64_t m, int64_t n, int64_t k) {
  KernelCall c;
  c.kind = CallKind::kGemm;
  c.name = layout;
  c.m = m;
  c.n = n;
  c.k = k;
  return c;
}

KernelCall kernel(const char* name, double elements, bool backward = false) {
  KernelCall c;
  c.kind = CallKind::kKernel;
  c.name = name;
  c.count = elements;
  c.backward = backward;
  return c;
}

// engine/transformer_layer.cc linear_forward / linear_backward: out (N, OC) =
// inp (N, K) w^T (+ bias); backward: bias_grad, dw += dout^T inp, dinp = dout w.
// The token-parallel products (and the forward's bias) run as `blocks` calls of
// N / blocks rows each (EngineDims::row_blocks); the weight gradient is one call.
void linear(OperatorCost* op, int64_t N, int64_t OC, int64_t K, bool bias, int blocks = 1) {
  const int64_t rows = N / blocks;
  for (int b = 0; b < blocks; ++b) {
    op->fwd_calls.push_back(gemm("nt", rows, OC, K));
    if (bias) op->fwd_calls.push_back(kernel("bias_add", static_cast<double>(rows) * OC));
  }
  if (bias) op->bwd_calls.push_back(kernel("bias_grad", static_cast<double>(N) * OC));
  op->bwd_calls.push_back(gemm("tn", OC, K, N));
  for (int b = 0; b < blocks; ++b) op->bwd_calls.push_back(gemm("nn", rows, K, OC));
}

void attach_layer(OperatorCost* op, const EngineDims& d, int micro_batch, bool parallel_block) {
  const double shard = static_cast<double>(d.Nl) * d.C;
  const std::string& n = op->name;
  if (n == "ln" || n == "ln1" || n == "ln2") {
    op->fwd_calls = {kernel("layer_norm", shard)};
    op->bwd_calls = {kernel("layer_norm", shard, true)};
  } else if (n == "qkv") {
    linear(op, d.N, d.Sq, d.C, true, d.row_blocks);
  } else if (n == "qkv_fc1") {
    linear(op, d.N, d.Sq, d.C, true, d.row_blocks);
    linear(op, d.N, d.Fo, d.C, d.gelu, d.row_blocks);
  } else if (n == "flash_attention") {
    KernelCall a;
    a.kind = CallKind::kAttention;
    a.seq = d.T;
    a.head_dim = static_cast<int>(d.HD);
    a.window = d.window;
    a.count = static_cast<double>(micro_batch) * d.NHl;
    op->fwd_calls = {a};
    a.backward = true;
    op->bwd_calls = {a};
  } else if (n == "proj") {
    linear(op, d.N, d.C, d.Al, false, d.row_blocks);
  } else if (n == "proj_fc2") {
    linear(op, d.N, d.C, d.Al, false, d.row_blocks);
    linear(op, d.N, d.C, d.Fl, false, d.row_blocks);
  } else if (n == "fc1") {
    linear(op, d.N, d.Fo, d.C, d.gelu, d.row_blocks);
  } else if (n == "fc2") {
    linear(op, d.N, d.C, d.Fl, false, d.row_blocks);
  } else if (n == "gelu" || n == "swiglu") {
    const double elems = static_cast<double>(d.N) * d.Fl;
    op->fwd_calls = {kernel(n.c_str(), elems)};
    op->bwd_calls = {kernel(n.c_str(), elems, true)};
  } else if (n == "bias_dropout_add1") {
    // dev.add(x2, x, y) then the projection's bias; backward its bias gradient.
    op->fwd_calls = {kernel("add", shard), kernel("bias_add", shard)};
    op->bwd_calls = {kernel("bias_grad", shard)};
  } else if (n == "bias_dropout_add2" || n == "bias_dropout_add") {
    // The residual add, the projection's bias (parallel block) and fc2's bias
    // (GeLU only). Backward of the layer starts here with the residual copy
    // dx = dout (TransformerLayer::backward) before the bias gradients.
    op->fwd_calls = {kernel("add", shard)};
    op->bwd_calls = {kernel("copy", shard)};
    if (parallel_block) {
      op->fwd_calls.push_back(kernel("bias_add", shard));
      op->bwd_calls.push_back(kernel("bias_grad", shard));
    }
    if (d.gelu) {
      op->fwd_calls.push_back(kernel("bias_add", shard));
      op->bwd_calls.push_back(kernel("bias_grad", shard));
    }
  } else {
    throw std::logic_error("engine_ops: no engine calls for layer operator '" + n + "'");
  }
}

}  // namespace

int busy_ranks(const Scenario& s, const GpuProfile& gpu) {
  const int per_machine = std::min(s.cluster.gpus, s.hardware.gpus_per_node);
  return std::max(1, gpu.cores > 0 ? std::min(per_machine, gpu.cores) : per_machine);
}

double time_share(const Scenario& s, const GpuProfile& gpu) {
  const int per_machine = std::min(s.cluster.gpus, s.hardware.gpus_per_node);
  return gpu.cores > 0 && per_machine > gpu.cores ? static_cast<double>(per_machine) / gpu.cores : 1.0;
}

EngineMemory engine_memory(const Scenario& s, int pp_rank) {
  const ParallelConfig& p = s.parallel;
  const EngineDims d = dims(s.model, p);
  constexpr double kF32 = 4;
  EngineMemory m;
  for (int c = 0; c < p.vpp; ++c) {
    const double params = engine_chunk_params(s, pp_rank, c);
    const double shard = p.zero_stage >= 1 && p.dp > 1 ? params / p.dp : params;
    m.parameters += kF32 * params;
    m.gradients += kF32 * params;
    m.optimizer += kF32 * (s.optimizations.optimizer == OptimizerKind::kLamb ? 3 : 2) * shard;
  }
  // A layer's stash per micro-batch (engine/transformer_layer.cc).
  double layer = d.Nl * d.C + 2.0 * d.Nl + d.N * d.C + d.N * d.Sq + static_cast<double>(p.micro_batch) * d.NHl * d.T * d.T +
                 d.N * d.Al + d.N * d.Fo + d.N * d.Fl;
  if (s.model.block == BlockKind::kSequential) layer += d.Nl * d.C + d.N * d.C + 2.0 * d.Nl;
  m.stash_per_layer = kF32 * layer;
  return m;
}

double engine_working_set_bytes(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const EngineDims d = dims(s.model, p);
  const EngineMemory m = engine_memory(s);
  // The stashes of the micro-batches in flight: one at a time without
  // pipelining, up to P per chunk under 1F1B; and the head's logits.
  const double layers = PipelineLayout(s.model, p).max_stage_layers();
  const double in_flight = p.pp == 1 ? 1.0 : std::min<double>(p.microbatches(), p.pp);
  return m.parameters + m.gradients + m.optimizer + m.stash_per_layer * layers * in_flight + 4.0 * d.N * d.Vl;
}

double cold_fraction(const Scenario& s, const GpuProfile& gpu) {
  if (!(gpu.cache_bytes > 0)) return 1.0;
  const double share = gpu.cache_bytes / std::max(1, busy_ranks(s, gpu));
  const double w = engine_working_set_bytes(s);
  return w > 0 ? std::clamp(1.0 - share / w, 0.0, 1.0) : 0.0;
}

const GpuProfile& job_profile(const Scenario& s, GpuProfile* storage) {
  const GpuProfile& base = hardware_profile(s);
  if (!base.is_cpu()) return base;
  *storage = base;
  storage->busy_ranks = busy_ranks(s, base);
  storage->time_share = time_share(s, base);
  storage->cold_fraction = cold_fraction(s, base);
  return *storage;
}

namespace {

// Each micro-batch's gradient accumulation over `params` parameters per GPU
// (Optimizations::grad_accumulation, model/payload.h): one memory-bound op in
// the backward, none when the weight-gradient GEMMs accumulate (fused).
void append_grad_accumulation(std::vector<OperatorCost>* ops, const Optimizations& o, double params) {
  const double bytes = grad_accumulation_bytes_per_param(o) * params;
  if (!(bytes > 0)) return;
  OperatorCost acc;
  acc.name = "grad_accumulation";
  acc.cls = OpClass::kMemory;
  acc.fwd_kernels = 0;
  acc.bwd_bytes = bytes;
  ops->push_back(acc);
}

}  // namespace

std::vector<OperatorCost> job_layer_operators(const Scenario& s, const GpuProfile& gpu) {
  if (!gpu.models_engine()) {
    std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, s.optimizations.efficient_operators,
                                                    s.optimizations.eager_elementwise);
    if (s.optimizations.efficient_operators) {
      const FlashKernel kernel = s.optimizations.fused_attention ? FlashKernel::kFused
                                 : s.optimizations.attention_kernel == AttentionKernel::kFlashTriton
                                     ? FlashKernel::kTriton
                                     : FlashKernel::kFlash2;
      for (OperatorCost& op : ops) {
        if (op.cls == OpClass::kFlashAttention) op.flash_kernel = kernel;
      }
    }
    if (gpu.element_overhead_ns > 0) {
      // What the kernel model leaves out per activation element (fitted,
      // model/hardware.h): one op at the layer's end, no bytes, no kernel.
      const double elements = static_cast<double>(s.parallel.micro_batch) * s.model.seq_len * s.model.hidden /
                              s.parallel.tp;
      OperatorCost extra;
      extra.name = "element_overhead";
      extra.cls = OpClass::kMemory;
      extra.fwd_kernels = extra.bwd_kernels = 0;
      extra.fwd_extra_s = elements * gpu.element_overhead_ns * 1e-9 / 3.0;
      extra.bwd_extra_s = 2.0 * extra.fwd_extra_s;
      ops.push_back(extra);
    }
    // After the layer's own ops: FP8's casts append theirs.
    if (s.optimizations.fp8 && gpu.fp8_gemm_speedup() > 0) {
      Fp8Casts casts;
      casts.gemm_speedup = gpu.fp8_gemm_speedup();
      casts.any_layout = gpu.fp8_gemm_any_layout();
      const bool sp = s.parallel.sequence_parallel && s.parallel.tp > 1;
      if (s.optimizations.fp8_recipe == Fp8Recipe::kCurrent) {
        casts.current_scaling = true;
        if (sp) {
          casts.norm_rows_share = 1.0 / s.parallel.tp;
          casts.amax_allreduce_s = small_allreduce_time_s(s.parallel.tp, parallel_links(s, gpu).tp);
        }
      } else if (s.optimizations.fp8_recipe == Fp8Recipe::kMxfp8) {
        casts.block_scaled = true;
        if (sp) casts.norm_rows_share = 1.0 / s.parallel.tp;  // cast before the gather
      }
      apply_fp8(&ops, casts);
    }
    append_grad_accumulation(&ops, s.optimizations,
                             static_cast<double>(s.model.parameters_per_layer()) / s.parallel.tp);
    return ops;
  }
  // The engine's attention is one kernel whatever efficient_operators says.
  std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, /*efficient_operators=*/true);
  const EngineDims d = dims(s.model, s.parallel);
  for (OperatorCost& op : ops) {
    attach_layer(&op, d, s.parallel.micro_batch, s.model.block == BlockKind::kParallel);
    // A device that fuses the biases (GpuProfile::fused_bias: the CUDA
    // device's matmul_bias epilogue and one-kernel bias_residual_add) runs
    // no forward bias_add of its own; the bias gradients stay.
    if (gpu.fused_bias > 0) {
      std::erase_if(op.fwd_calls, [](const KernelCall& c) { return c.kind == CallKind::kKernel && c.name == "bias_add"; });
    }
  }
  return ops;
}

std::vector<OperatorCost> job_embedding_operators(const Scenario& s, const GpuProfile& gpu) {
  std::vector<OperatorCost> ops = embedding_operators(s.model, s.parallel);
  if (!gpu.models_engine()) {
    // The word embedding (vocab x hidden / TP) and a learned position table.
    const double params = static_cast<double>(s.model.vocab) * s.model.hidden / s.parallel.tp +
                          (s.model.position == PositionKind::kLearned
                               ? static_cast<double>(s.model.seq_len) * s.model.hidden
                               : 0.0);
    append_grad_accumulation(&ops, s.optimizations, params);
    return ops;
  }
  // engine/embedding.cc: token lookup over the full (T, B) then learned
  // positions over the local shard; backward in the opposite order.
  const EngineDims d = dims(s.model, s.parallel);
  for (OperatorCost& op : ops) {
    op.fwd_calls = {kernel("embedding", static_cast<double>(d.N) * d.C),
                    kernel("position_embedding", static_cast<double>(d.Nl) * d.C)};
    op.bwd_calls = {kernel("position_embedding", static_cast<double>(d.Nl) * d.C, true),
                    kernel("embedding", static_cast<double>(d.N) * d.C, true)};
  }
  return ops;
}

std::vector<OperatorCost> job_output_operators(const Scenario& s, const GpuProfile& gpu) {
  std::vector<OperatorCost> ops = output_operators(s.model, s.parallel, s.optimizations.cross_entropy,
                                                   s.optimizations.eager_elementwise && !gpu.models_engine());
  if (!gpu.models_engine()) {
    // The output matrix, unless it is the embedding's own on the only stage.
    if (!s.model.tie_embeddings || s.parallel.pp > 1) {
      append_grad_accumulation(&ops, s.optimizations, static_cast<double>(s.model.vocab) * s.model.hidden / s.parallel.tp);
    }
    return ops;
  }
  const EngineDims d = dims(s.model, s.parallel);
  const double shard = static_cast<double>(d.Nl) * d.C;
  for (OperatorCost& op : ops) {
    if (op.name == "final_ln") {
      // engine/output_head.cc: backward zeroes dx before LayerNorm accumulates into it.
      op.fwd_calls = {kernel("layer_norm", shard)};
      op.bwd_calls = {kernel("fill_zero", shard), kernel("layer_norm", shard, true)};
    } else if (op.name == "logits") {
      linear(&op, d.N, d.Vl, d.C, false);
    } else if (op.name == "cross_entropy") {
      const double elems = static_cast<double>(d.N) * d.Vl;
      op.fwd_calls = {kernel("cross_entropy", elems)};
      op.bwd_calls = {kernel("cross_entropy", elems, true)};
    } else {
      throw std::logic_error("engine_ops: no engine calls for head operator '" + op.name + "'");
    }
  }
  return ops;
}

std::vector<KernelCall> engine_step_calls(const Scenario& s, const std::vector<double>& chunk_buffer_params,
                                          const std::vector<double>& shard_params) {
  std::vector<KernelCall> calls;
  double buffers = 0;
  for (double b : chunk_buffer_params) buffers += b;
  calls.push_back(kernel("fill_zero", buffers));  // PipelineExecutor::step: zero_grad per chunk
  const char* update = s.optimizations.optimizer == OptimizerKind::kLamb ? "lamb" : "adamw";
  for (double shard : shard_params) {
    calls.push_back(kernel("clip_grad", shard));  // clip_and_step: norm, then the scale
    calls.push_back(kernel(update, shard));       // ShardedOptimizer::step
  }
  return calls;
}

double engine_chunk_params(const Scenario& s, int pp_rank, int chunk) {
  const EngineDims d = dims(s.model, s.parallel);
  const ParallelConfig& p = s.parallel;
  // engine/param_init.cc, per TP rank: LayerNorms and row-parallel biases are
  // replicated, the rest split.
  double layer = 2.0 * d.C + d.C * d.Sq + d.Sq + d.Al * d.C + d.C + d.C * d.Fo + d.Fl * d.C;
  if (s.model.block == BlockKind::kSequential) layer += 2.0 * d.C;
  if (d.gelu) layer += d.Fl + d.C;
  double params = static_cast<double>(PipelineLayout(s.model, p).chunk_layers(pp_rank, chunk)) * layer;
  if (pp_rank == 0 && chunk == 0) params += static_cast<double>(d.Vl) * d.C + static_cast<double>(d.T) * d.C;
  if (pp_rank == p.pp - 1 && chunk == p.vpp - 1) params += 2.0 * d.C + static_cast<double>(d.Vl) * d.C;
  return params;
}

std::vector<KernelCall> engine_rank_step_calls(const Scenario& s, int pp_rank) {
  const ParallelConfig& p = s.parallel;
  std::vector<double> buffers, shards;
  for (int c = 0; c < p.vpp; ++c) {
    const double params = engine_chunk_params(s, pp_rank, c);
    buffers.push_back(params);
    shards.push_back(p.zero_stage >= 1 && p.dp > 1 ? params / p.dp : params);
  }
  return engine_step_calls(s, buffers, shards);
}

double engine_rank_step_s(const Scenario& s, const GpuProfile& gpu, int pp_rank) {
  const ParallelConfig& p = s.parallel;
  const ParallelLinks links = parallel_links(s, gpu);
  double t = calls_time_s(engine_rank_step_calls(s, pp_rank), gpu);
  // engine/optimizer.cc: the global norm is reduced over every group larger
  // than one, once by the executor's clipping and once inside step(), per chunk.
  double norm_s = 0;
  if (p.dp > 1) norm_s += small_allreduce_time_s(p.dp, links.dp);
  if (p.tp > 1) norm_s += small_allreduce_time_s(p.tp, links.tp);
  if (p.pp > 1) norm_s += small_allreduce_time_s(p.pp, links.pp);
  t += 2.0 * p.vpp * norm_s;
  // Sequence parallelism: LayerNorm and row-parallel bias gradients summed
  // over TP before the reduction (ModelChunk::sync_sequence_parallel_grads).
  if (p.sequence_parallel && p.tp > 1) {
    const double per_layer = (s.model.block == BlockKind::kSequential ? 6.0 : 3.0) * s.model.hidden +
                             (s.model.mlp == MlpKind::kGelu ? s.model.hidden : 0.0);
    const PipelineLayout layout(s.model, p);
    for (int c = 0; c < p.vpp; ++c) {
      const double floats = per_layer * layout.chunk_layers(pp_rank, c);
      t += collective_time_s(CollectiveKind::kAllReduce, p.tp, floats * 4.0, links.tp);
    }
  }
  // The step's loss: all-reduced over DP, broadcast from the last stage.
  if (p.dp > 1) t += small_allreduce_time_s(p.dp, links.dp);
  if (p.pp > 1) t += small_allreduce_time_s(p.pp, links.pp);
  return t + gpu.step_overhead_s;  // the host's per-step work (0 unless fitted)
}

}  // namespace megascale::model
