// engine/transformer_layer.h: one GPT transformer layer on one tensor-parallel
// rank, forward and backward by hand (fp32), Megatron-LM style TP + SP.
//
// defines: LayerWeights, TransformerLayer.
//
// Sequential block (GPT-2 / Megatron-LM, pre-LN):
//   x2 = x + proj(attn(LN1(x))) ;  out = x2 + fc2(act(fc1(LN2(x2))))
// Parallel block (MegaScale NSDI'24 section 3.1, GPT-J / PaLM): one LayerNorm
// shared by both branches, whose GEMMs are fused (qkv with fc1, proj with fc2):
//   out = x + proj(attn(LN(x))) + fc2(act(fc1(LN(x))))
// act is GeLU (tanh approximation; fc1 F wide, with biases) or SwiGLU (fc1
// 2F wide = [gate | up], no MLP biases). Attention: causal with optional sliding
// window, GQA (kv heads split across TP ranks like the query heads). Dropout p=0.
//
// Tensor parallelism (engine/layers.h): qkv and fc1 are column-parallel (this
// rank's NHl query heads, NKVl kv heads, Fl ffn columns), proj and fc2 are
// row-parallel; their partial outputs are reduce-scattered along the sequence
// (SP) or all-reduced (no SP). Per layer and direction:
//   sequential + SP: 2 all-gathers + 2 reduce-scatters; parallel + SP: 1 + 1;
//   without SP: 2 (sequential) or 1 (parallel) all-reduces. Backward under SP
//   also re-gathers each column-parallel GEMM's input (2 or 1 more all-gathers;
//   regather_input).
// With LayerContext::tp_overlap (SP only) each all-gather is fused with the
// column-parallel GEMM it feeds and each reduce-scatter with the row-parallel
// GEMM that feeds it (engine/layers.h, tp_gather_gemm / tp_gemm_reduce_scatter).
// Under SP every GEMM's token-parallel product runs by TP row block either way,
// so the fused and unfused layers give the same bits.
// The order of kernels and collectives is model::layer_forward_program /
// layer_backward_program's; each is reported to ctx.observer with its name there
// (the attention core as "flash_attention": one fused call here).
//
// Buffers (one rank, one micro-batch; N = T*B, Nl = Tl*B tokens):
//  - the stash (saved for backward; the caller owns it per micro-batch): the
//    layer input x (Tl, B, C) — written by the caller/previous layer before
//    forward — LayerNorm statistics, the gathered LayerNorm outputs (T, B, C),
//    qkv (T, B, Sq), attention probabilities (B, NHl, T, T), the attention output,
//    x2 (sequential), the fc1 output and the activation;
//  - the scratch (temporaries of one call, shareable by all layers of a chunk;
//    under SP it includes the fused reduce-scatter's receive buffer, (T, B, C)).
//
// Thread-safety: const methods on immutable dims; one call at a time per buffers.
#pragma once

#include <cstddef>

#include "engine/layers.h"
#include "model/config.h"

namespace megascale::engine {

// Pointers to one layer's tensors (parameters or their gradients), local shards
// as in engine/param_init.h. ln2_* are null in the parallel block (ln1_* is the
// shared LayerNorm); fc1_b / fc2_b are null with SwiGLU.
struct LayerWeights {
  float* ln1_w = nullptr;   // (C)
  float* ln1_b = nullptr;   // (C)
  float* qkv_w = nullptr;   // (Sq, C)
  float* qkv_b = nullptr;   // (Sq)
  float* proj_w = nullptr;  // (C, Al)
  float* proj_b = nullptr;  // (C)
  float* ln2_w = nullptr;   // (C)
  float* ln2_b = nullptr;   // (C)
  float* fc1_w = nullptr;   // (Fo, C)
  float* fc1_b = nullptr;   // (Fo)
  float* fc2_w = nullptr;   // (C, Fl)
  float* fc2_b = nullptr;   // (C)
};

class TransformerLayer {
 public:
  // Saved activations of one micro-batch.
  struct Stash {
    float* x = nullptr;        // (Tl, B, C) layer input
    float* mean1 = nullptr;    // (Nl)
    float* rstd1 = nullptr;    // (Nl)
    float* ln1 = nullptr;      // (T, B, C) LN1(x), gathered along the sequence
    float* qkv = nullptr;      // (T, B, Sq)
    float* probs = nullptr;    // (B, NHl, T, T)
    float* att = nullptr;      // (T, B, Al)
    float* x2 = nullptr;       // (Tl, B, C) sequential block: x + attention branch
    float* mean2 = nullptr;    // (Nl)
    float* rstd2 = nullptr;    // (Nl)
    float* ln2 = nullptr;      // (T, B, C) sequential block
    float* h = nullptr;        // (T, B, Fo) fc1 output
    float* a = nullptr;        // (T, B, Fl) activation
  };

  // REQUIRES: dims from ModelDims::make; 0 <= layer < model layers.
  TransformerLayer(const ModelDims& dims, int layer);

  int layer() const { return layer_; }
  const ModelDims& dims() const { return d_; }
  size_t stash_floats() const { return stash_floats_; }
  size_t scratch_floats() const { return scratch_floats_; }
  // The stash arrays inside `base` (stash_floats() floats).
  Stash stash_at(float* base) const;

  // out (Tl, B, C) from stash.x. `scratch`: scratch_floats() floats. out must not
  // alias stash.x.
  void forward(const LayerContext& ctx, const LayerWeights& w, const Stash& stash, float* scratch,
               float* out) const;
  // dx (Tl, B, C) = d loss / d x from dout (Tl, B, C); parameter gradients
  // accumulate into `g`. dx may alias dout.
  void backward(const LayerContext& ctx, const LayerWeights& w, const LayerWeights& g,
                const Stash& stash, float* scratch, const float* dout, float* dx) const;

 private:
  struct Scratch {
    float* full;    // (T, B, C) row-parallel partials / gathered gradients
    float* shard;   // (Tl, B, C) SP shards
    float* datt;    // (T, B, Al)
    float* da;      // (T, B, Fl)
    float* dh;      // (T, B, Fo)
    float* dqkv;    // (T, B, Sq)
    float* recv;    // (T, B, C) SP: partials received by the fused reduce-scatter
  };
  Scratch scratch_at(float* base) const;

  void forward_sequential(const LayerContext& ctx, const LayerWeights& w, const Stash& st,
                          const Scratch& sc, float* out) const;
  void forward_parallel(const LayerContext& ctx, const LayerWeights& w, const Stash& st,
                        const Scratch& sc, float* out) const;
  void backward_sequential(const LayerContext& ctx, const LayerWeights& w, const LayerWeights& g,
                           const Stash& st, const Scratch& sc, float* dx) const;
  void backward_parallel(const LayerContext& ctx, const LayerWeights& w, const LayerWeights& g,
                         const Stash& st, const Scratch& sc, float* dx) const;

  // Shared pieces.
  // LayerNorm of the shard `x` (Nl rows) into `ln_full` (T, B, C): under SP it
  // writes this rank's block of ln_full, which the column-parallel `gemm`'s
  // all-gather (`ag_name`) completes; without SP it writes ln_full whole.
  void norm(const LayerContext& ctx, const char* ln_name, const float* x, const float* w,
            const float* b, float* mean, float* rstd, float* ln_full) const;
  // The column-parallel GEMM `gemm` on `input_full` (T, B, *). Under SP the
  // input's rows are first all-gathered from `shard` (this rank's Nl rows; may
  // be input_full's own block) by collective `ag_name`, fused with the GEMM
  // under tp_overlap (tp_gather_gemm); without SP `gemm` runs on all rows.
  void gather_gemm(const LayerContext& ctx, const char* ag_name, bool backward, const float* shard,
                   float* input_full, const BlockedGemm& gemm) const;
  // SP backward: all-gathers the column-parallel GEMM's input again from this
  // rank's block of `ln_full` (collective `ag_name`), as Megatron-LM does for the
  // weight gradient (model/layer_program.h). This engine keeps the gathered
  // input, so the values are unchanged; the collective is run so that the
  // engine's communication is the Schedule IR's. No-op without SP.
  void regather_input(const LayerContext& ctx, const char* ag_name, float* ln_full) const;
  // The row-parallel GEMM `gemm` writing partials (T, B, C) into sc.full, then
  // reduced: SP reduce-scatter into sc.shard (fused under tp_overlap), else
  // all-reduce in place. Returns the (Tl, B, C) result.
  const float* gemm_reduce(const LayerContext& ctx, const char* rs_name, const char* ar_name,
                           bool backward, const Scratch& sc, const BlockedGemm& gemm) const;
  void attention_forward(const LayerContext& ctx, const Stash& st) const;
  void attention_backward(const LayerContext& ctx, const Stash& st, const float* datt,
                          float* dqkv) const;
  void activation_forward(const LayerContext& ctx, const Stash& st) const;
  void activation_backward(const LayerContext& ctx, const Stash& st, const float* da,
                           float* dh) const;

  ModelDims d_;
  int layer_;
  size_t stash_floats_ = 0;
  size_t scratch_floats_ = 0;
  // Offsets of the stash / scratch arrays (floats).
  size_t off_full_ = 0, off_shard_ = 0, off_datt_ = 0, off_da_ = 0, off_dh_ = 0, off_dqkv_ = 0,
         off_recv_ = 0;
  size_t o_x_ = 0, o_mean1_ = 0, o_rstd1_ = 0, o_ln1_ = 0, o_qkv_ = 0, o_probs_ = 0, o_att_ = 0,
         o_x2_ = 0, o_mean2_ = 0, o_rstd2_ = 0, o_ln2_ = 0, o_h_ = 0, o_a_ = 0;
};

}  // namespace megascale::engine
