// engine/layers.h: what every model layer of the engine shares — the per-call
// context (device, TP group, micro-batch, op hook), the per-rank dimensions
// (ModelDims: how TP splits the model, sequence parallelism), the per-op timing
// hook, and the TP/SP collectives that open and close a tensor-parallel region
// (Megatron-LM's megatron/core/tensor_parallel/mappings.py).
//
// defines: OpEvent, OpObserver, OpScope, LayerContext, ModelDims, with_defaults,
// BufferLayout, tp_all_gather, tp_reduce_scatter, tp_all_reduce, gemm_flops.
//
// Tensor parallelism (Shoeybi et al. 2019) with sequence parallelism
// (Korthikanti et al. 2022). Activations are (T, B, C); outside a TP region
// (LayerNorm, residual adds) each rank holds its sequence shard of Tl = T/tp
// positions, (Tl, B, C), when sequence parallelism is on, and the whole
// (T, B, C) otherwise. A column-parallel GEMM opens a region: with SP its input
// is all-gathered along the sequence (backward: reduce-scatter of its input
// gradient); without SP the input is used as is (backward: all-reduce). A
// row-parallel GEMM closes it: its partial outputs are reduce-scattered (SP) or
// all-reduced (no SP); backward: all-gather (SP) or nothing.
//
// Timing hook. Every operator and every TP collective issued by a layer is
// reported to an optional OpObserver as begin/end pairs named with the
// vocabulary of model/op_cost.h and model/layer_program.h ("ln1", "qkv",
// "flash_attention", "ag_qkv", "rs_proj", "ar_dfc1", ...), so the engine's
// tracer (engine/trace.h) records the same pieces the simulator times. Inside
// a layer the sequence of names is exactly model::layer_forward_program /
// layer_backward_program's with efficient_operators = true flattened (the CPU
// attention core is one fused call, "flash_attention"); compute ops keep their
// name in backward (OpEvent::backward tells), collectives are renamed there as
// in layer_program ("ag_dproj", "rs_dqkv", ...). Outside the layers, not in
// model/'s programs: "embedding" (lookup, then positions: two events),
// "rs_embedding" / "ar_embedding", "ag_dembedding"; "final_ln", "ag_logits",
// "logits", "cross_entropy", "ag_cross_entropy" (row maxima),
// "ar_cross_entropy" (exp-sums), "rs_dlogits" / "ar_dlogits". With no observer
// set the cost is one pointer test per op.
//
// Thread-safety: a LayerContext belongs to one rank's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "engine/comm.h"
#include "engine/device.h"
#include "model/config.h"
#include "model/layer_program.h"

namespace megascale::engine {

// One operator or collective of one layer's forward or backward.
struct OpEvent {
  const char* name = "";  // model/op_cost.h / layer_program.h name (static storage)
  // kCompute for kernels; kTpAllGather / kTpReduceScatter / kTpAllReduce for
  // the TP collectives.
  model::LayerStepKind kind = model::LayerStepKind::kCompute;
  bool backward = false;
  int microbatch = -1;
  int chunk = -1;   // virtual pipeline stage (ChunkConfig::chunk_id)
  int layer = -1;   // global layer index; -1 the embedding, ModelConfig::layers the head
  // Collectives: bytes of the full (unsharded, fp32) tensor gathered or reduced,
  // as model::LayerStep::bytes. Compute: fp32 bytes read + written (estimate).
  int64_t bytes = 0;
  double flops = 0;  // compute: floating point operations (multiply-add = 2)
};

// Receives begin/end of every op. Called on the rank's own thread, in program
// order; begin and end of one op get the same event.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void op_begin(const OpEvent& event) = 0;
  virtual void op_end(const OpEvent& event) = 0;
};

// Reports `event` to `observer` for its own lifetime; nothing when observer is null.
class OpScope {
 public:
  OpScope(OpObserver* observer, const OpEvent& event) : observer_(observer), event_(event) {
    if (observer_ != nullptr) observer_->op_begin(event_);
  }
  ~OpScope() {
    if (observer_ != nullptr) observer_->op_end(event_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpObserver* observer_;
  OpEvent event_;
};

// What one layer call needs besides its weights and buffers.
struct LayerContext {
  Device* device = nullptr;
  Comm* tp = nullptr;          // the TP group; nullptr means tp == 1
  OpObserver* observer = nullptr;
  int microbatch = -1;
  int chunk = -1;
  // MegaScale's TP overlap ([optimizations] tp_overlap): the SP all-gathers and
  // reduce-scatters of a layer are fused with their GEMMs (tp_gather_gemm,
  // tp_gemm_reduce_scatter). Only meaningful with sequence parallelism and
  // tp > 1; the layers ignore it otherwise.
  bool tp_overlap = false;

  int tp_size() const { return tp == nullptr ? 1 : tp->size(); }
  int tp_rank() const { return tp == nullptr ? 0 : tp->rank(); }

  // Event of this context for `name` (compute by default).
  OpEvent event(const char* name, int layer, bool backward, double flops = 0, int64_t bytes = 0,
                model::LayerStepKind kind = model::LayerStepKind::kCompute) const {
    OpEvent e;
    e.name = name;
    e.kind = kind;
    e.backward = backward;
    e.microbatch = microbatch;
    e.chunk = chunk;
    e.layer = layer;
    e.bytes = bytes;
    e.flops = flops;
    return e;
  }
};

// The dimensions of one rank's share of the model for one micro-batch (names of
// llm.c; "l" = local to this TP rank).
struct ModelDims {
  int B = 0, T = 0, C = 0, V = 0, NH = 0, NKV = 0, HD = 0, F = 0;  // full model
  int tp = 1;
  bool sp = false;                  // sequence parallel (never with tp == 1)
  int window = 0;                   // attention window, 0 = full causal
  bool gelu = true;                 // MLP kind
  bool parallel_block = false;      // block kind
  int Tl = 0;                       // sequence positions held outside TP regions
  int Vl = 0, NHl = 0, NKVl = 0, Fl = 0;  // per-rank vocab, heads, ffn
  int Fo = 0;                       // fc1 output width per rank: Fl (GeLU) or 2*Fl (SwiGLU)
  int Sq = 0;                       // qkv width per rank: (NHl + 2*NKVl) * HD
  int Al = 0;                       // attention output width per rank: NHl * HD

  int N() const { return T * B; }    // tokens inside a TP region (full sequence)
  int Nl() const { return Tl * B; }  // tokens outside (the sequence shard under SP)

  // Validates the split (heads, kv heads, ffn, vocab and, with SP, the sequence
  // divisible by tp; hidden divisible by heads; heads divisible by kv heads) and
  // throws std::runtime_error naming the first violation.
  static ModelDims make(const model::ModelConfig& m, int micro_batch, int tp, bool sp);
};

// `m` with the defaults of model/scenario.cc filled in: kv_heads 0 -> heads,
// ffn_hidden 0 -> 4 * hidden.
model::ModelConfig with_defaults(const model::ModelConfig& m);

// Carves named arrays out of one allocation: take() returns float offsets, each
// rounded up to 16 floats (64 bytes) so every array stays aligned.
struct BufferLayout {
  size_t floats = 0;
  size_t take(size_t n) {
    const size_t at = floats;
    floats += (n + 15) / 16 * 16;
    return at;
  }
};

// SP: full (tp * shard_floats) = all-gather of shard (shard_floats) along the
// sequence. REQUIRES: ctx.tp_size() > 1.
void tp_all_gather(const LayerContext& ctx, const char* name, int layer, bool backward,
                   const float* shard, float* full, size_t shard_floats);
// SP: shard (shard_floats) = block tp_rank of the rank-ordered sum of full
// (tp * shard_floats). REQUIRES: ctx.tp_size() > 1.
void tp_reduce_scatter(const LayerContext& ctx, const char* name, int layer, bool backward,
                       const float* full, float* shard, size_t shard_floats);
// No SP: data (n) <- rank-ordered sum over the TP group. No-op when tp == 1.
void tp_all_reduce(const LayerContext& ctx, const char* name, int layer, bool backward,
                   float* data, size_t n);

// A GEMM split along its rows (tokens): `rows(row0, n)` computes the output
// rows [row0, row0 + n) from the input rows [row0, row0 + n) only.
using RowBlockFn = std::function<void(int row0, int n)>;

// One GEMM op of a TP region as the fused collectives see it: a part computed
// by row blocks (`rows`, the token-parallel product: forward GEMMs, input
// gradients) and parts that need every row (`before` / `after`: weight and bias
// gradients), each optional but `rows`. `flops` is the whole op's, `row_flops`
// the row-blocked part's (both over all N rows).
struct BlockedGemm {
  const char* name = "";
  double flops = 0;
  double row_flops = 0;
  std::function<void()> before;
  RowBlockFn rows;
  std::function<void()> after;
};

// SP all-gather feeding a column-parallel GEMM (forward: ag_qkv + qkv, ag_fc1
// + fc1, ag_qkv_fc1 + qkv_fc1; backward: ag_dproj + proj, ag_dfc2 + fc2,
// ag_dproj_fc2 + proj_fc2). `full` (tp * shard_floats) receives the gathered
// input; `shard` may point at full's own block. The GEMM runs row block by row
// block, block b being rows [b * block_rows, (b + 1) * block_rows) = rank b's
// sequence shard.
//  - ctx.tp_overlap off: tp_all_gather, then one `gemm.name` event: before,
//    rows of blocks 0..tp-1 in order, after.
//  - on (MegaScale NSDI'24 section 3.2): the shards travel around the TP ring
//    in tp - 1 steps of Comm::isendrecv (send to rank + 1, receive from
//    rank - 1, posted together); during step s the GEMM runs on the
//    block that arrived in step s - 1 (step 0: this rank's own). Events: one
//    `ag_name` per step (posting the transfer, then waiting it: the exposed
//    communication) and one `gemm.name` per block (row_flops / tp each), plus
//    `before` / `after` as their own events.
// Every output row block is computed by the same call on the same data either
// way, so both give bit-identical results on any device. REQUIRES: ctx.tp_size() > 1.
void tp_gather_gemm(const LayerContext& ctx, const char* ag_name, int layer, bool backward,
                    const float* shard, float* full, size_t shard_floats, int block_rows,
                    const BlockedGemm& gemm);

// Row-parallel GEMM whose partial output `full` (tp * shard_floats, row block b
// destined to TP rank b) is reduce-scattered into `shard` (rs_proj, rs_fc2,
// rs_proj_fc2; backward rs_dqkv, rs_dfc1, rs_dqkv_fc1).
//  - ctx.tp_overlap off: one `gemm.name` event (before, rows of blocks
//    0..tp-1, after), then tp_reduce_scatter.
//  - on: the blocks are computed in ring order rank+1, ..., rank-1, this
//    rank's own block last; right after block rank+k is computed, one
//    Comm::isendrecv sends it to its owner and receives rank-k's partial for
//    this rank's block into `recv` (tp * shard_floats scratch, block j from
//    rank j); at the end shard = ((x_0 + x_1) + x_2) + ... in rank order, as
//    Comm::reduce_scatter_sum promises (bit-identical on the CPU backends).
//    Events: `gemm.name` per block, `rs_name` for each exchange (the first
//    carries the bytes) and for the final wait + sum.
// REQUIRES: ctx.tp_size() > 1; `recv` non-null when ctx.tp_overlap.
void tp_gemm_reduce_scatter(const LayerContext& ctx, const char* rs_name, int layer, bool backward,
                            float* full, float* shard, float* recv, size_t shard_floats,
                            int block_rows, const BlockedGemm& gemm);

// 2 * M * N * K.
inline double gemm_flops(int64_t M, int64_t N, int64_t K) {
  return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
}

}  // namespace megascale::engine
