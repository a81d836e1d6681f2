// engine/embedding.cc: vocab-parallel token embedding + learned positions.
#include "engine/embedding.h"

namespace megascale::engine {

Embedding::Embedding(const ModelDims& dims, int layer_id) : d_(dims), layer_(layer_id) {}

size_t Embedding::scratch_floats() const {
  return d_.tp > 1 ? static_cast<size_t>(d_.N()) * d_.C : 0;
}

void Embedding::forward(const LayerContext& ctx, const EmbeddingWeights& w,
                        const int32_t* tokens_tb, float* scratch, float* out) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), C = d_.C;
  const size_t shard = static_cast<size_t>(d_.Nl()) * C;
  const int vocab_start = ctx.tp_rank() * d_.Vl;
  float* lookup = d_.sp ? scratch : out;  // (T, B, C): SP reduce-scatters it into out
  {
    OpScope op(ctx.observer, ctx.event("embedding", layer_, false, 0, 2 * 4 * int64_t{N} * C));
    dev.embedding_forward(lookup, tokens_tb, w.wte, vocab_start, N, d_.Vl, C);
  }
  if (d_.sp) {
    tp_reduce_scatter(ctx, "rs_embedding", layer_, false, lookup, out, shard);
  } else {
    tp_all_reduce(ctx, "ar_embedding", layer_, false, out, shard);
  }
  {
    const int t0 = d_.sp ? ctx.tp_rank() * d_.Tl : 0;
    OpScope op(ctx.observer, ctx.event("embedding", layer_, false, 0, 3 * 4 * int64_t(shard)));
    dev.position_embedding_forward(out, w.wpe, t0, d_.Tl, d_.B, C);
  }
}

void Embedding::backward(const LayerContext& ctx, const EmbeddingWeights& g,
                         const int32_t* tokens_tb, float* scratch, const float* dout) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), C = d_.C;
  const size_t shard = static_cast<size_t>(d_.Nl()) * C;
  {
    const int t0 = d_.sp ? ctx.tp_rank() * d_.Tl : 0;
    OpScope op(ctx.observer, ctx.event("embedding", layer_, true, 0, 2 * 4 * int64_t(shard)));
    dev.position_embedding_backward(g.wpe, dout, t0, d_.Tl, d_.B, C);
  }
  const float* dfull = dout;  // (T, B, C)
  if (d_.sp) {
    tp_all_gather(ctx, "ag_dembedding", layer_, true, dout, scratch, shard);
    dfull = scratch;
  }
  {
    OpScope op(ctx.observer, ctx.event("embedding", layer_, true, 0, 2 * 4 * int64_t{N} * C));
    dev.embedding_backward(g.wte, dfull, tokens_tb, ctx.tp_rank() * d_.Vl, N, d_.Vl, C);
  }
}

}  // namespace megascale::engine
