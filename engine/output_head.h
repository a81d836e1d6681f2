// engine/output_head.h: the last pipeline stage's final LayerNorm, output layer
// and cross-entropy, vocab-parallel across TP ranks (Megatron-LM
// ColumnParallelLinear output layer + vocab_parallel_cross_entropy).
//
// defines: HeadWeights, OutputHead.
//
// Forward, one rank:
//   final_ln   LN of the (Tl, B, C) input; SP all-gathers it ("ag_logits")
//   logits     (T, B, Vl) = LN @ out_w^T for this rank's vocabulary rows
//   cross_entropy  per token: the row max over the whole vocabulary (each rank's
//              maxima all-gathered, "ag_cross_entropy": Comm has no max
//              reduction and max is exact in any order), then sum_j exp(l_j - m)
//              and the target's logit summed over ranks in one all-reduce
//              ("ar_cross_entropy"); loss = log(sum) - (l_target - m).
// The loss returned is the mean over the micro-batch's B*T tokens (per-token
// losses summed on the host in double, token order (T, B)); every TP rank
// returns the same bits.
// Backward from d loss = loss_scale: dlogits = (softmax - onehot) *
// loss_scale / (B*T); dW += dlogits^T LN; dLN = dlogits @ out_w, reduce-scattered
// (SP, "rs_dlogits") or all-reduced ("ar_dlogits"); LayerNorm backward.
//
// out_w is the output layer's own weight (V, C), not tied to the embedding.
//
// Thread-safety: const methods; one call at a time per buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/layers.h"

namespace megascale::engine {

struct HeadWeights {
  float* ln_f_w = nullptr;  // (C)
  float* ln_f_b = nullptr;  // (C)
  float* out_w = nullptr;   // (Vl, C) this rank's vocabulary rows
};

class OutputHead {
 public:
  struct Stash {
    float* x = nullptr;        // (Tl, B, C) input (written by the caller / last layer)
    float* mean = nullptr;     // (Nl)
    float* rstd = nullptr;     // (Nl)
    float* lnf = nullptr;      // (T, B, C) final LN output, gathered
    float* logits = nullptr;   // (T, B, Vl)
    float* row_max = nullptr;  // (N) global max per token
    float* partials = nullptr; // (2, N): sum_exp, then target logit, summed over TP
    float* losses = nullptr;   // (N)
    int32_t* targets = nullptr;  // (T, B) labels
  };

  // `layer_id` is reported in events (ModelConfig::layers by convention).
  OutputHead(const ModelDims& dims, int layer_id);

  size_t stash_floats() const { return stash_floats_; }  // int32 targets included
  size_t scratch_floats() const { return scratch_floats_; }
  Stash stash_at(float* base) const;

  // Mean loss over the N tokens of stash.x with labels stash.targets.
  float forward(const LayerContext& ctx, const HeadWeights& w, const Stash& st,
                float* scratch) const;
  // dx (Tl, B, C) = d(loss_scale * loss) / dx (overwritten); g accumulates.
  void backward(const LayerContext& ctx, const HeadWeights& w, const HeadWeights& g,
                const Stash& st, float* scratch, float loss_scale, float* dx) const;

 private:
  ModelDims d_;
  int layer_;
  size_t stash_floats_ = 0, scratch_floats_ = 0;
  size_t o_x_ = 0, o_mean_ = 0, o_rstd_ = 0, o_lnf_ = 0, o_logits_ = 0, o_max_ = 0,
         o_partials_ = 0, o_losses_ = 0, o_targets_ = 0;
  // scratch: shard (Nl*C) | full (N*C) | dlogits (N*Vl) | gathered maxima (tp*N) | dlosses (N)
  size_t s_shard_ = 0, s_full_ = 0, s_dlogits_ = 0, s_maxes_ = 0, s_dlosses_ = 0;
};

}  // namespace megascale::engine
