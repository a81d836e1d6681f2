// engine/embedding.h: token + learned position embedding of the first pipeline
// stage, vocab-parallel across TP ranks (Megatron-LM VocabParallelEmbedding).
//
// defines: EmbeddingWeights, Embedding.
//
// Each TP rank holds rows [r*Vl, (r+1)*Vl) of the word embedding wte (V, C).
// Forward: a rank looks up the tokens of its slice (zeros for the others) for
// the whole sequence, (T, B, C); the partial tables are summed over the TP group
// — reduce-scattered along the sequence with SP ("rs_embedding"), all-reduced
// without ("ar_embedding") — exactly one rank contributes each row, so the sum
// is exact; then the learned positions are added to the rank's (Tl, B, C) rows.
// Backward: positions' gradient from the rank's rows; the gradient is
// all-gathered along the sequence with SP ("ag_dembedding") and scattered into
// this rank's wte rows. Both kernels are reported as "embedding"
// (model/op_cost.h embedding_operators: 2 kernels).
//
// Tokens arrive (B, T) on the host (the data loader's order) and are kept on the
// device transposed to (T, B), the order of the activations.
//
// Thread-safety: const methods; one call at a time per buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/layers.h"

namespace megascale::engine {

struct EmbeddingWeights {
  float* wte = nullptr;  // (Vl, C) this rank's vocabulary rows
  float* wpe = nullptr;  // (T, C) replicated
};

class Embedding {
 public:
  // `layer_id` is reported in events (-1 by convention).
  explicit Embedding(const ModelDims& dims, int layer_id = -1);

  size_t scratch_floats() const;  // (T, B, C) under TP, else 0

  // tokens_tb (T, B) device ints. out (Tl, B, C).
  void forward(const LayerContext& ctx, const EmbeddingWeights& w, const int32_t* tokens_tb,
               float* scratch, float* out) const;
  // dout (Tl, B, C); gradients accumulate into g. dout is not modified.
  void backward(const LayerContext& ctx, const EmbeddingWeights& g, const int32_t* tokens_tb,
                float* scratch, const float* dout) const;

 private:
  ModelDims d_;
  int layer_;
};

}  // namespace megascale::engine
