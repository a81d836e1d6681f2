// engine/layers.cc: the TP/SP collectives of a layer, reported to the op hook.
#include "engine/layers.h"

namespace megascale::engine {

model::ModelConfig with_defaults(const model::ModelConfig& m) {
  model::ModelConfig out = m;
  if (out.kv_heads <= 0) out.kv_heads = out.heads;
  if (out.ffn_hidden <= 0) out.ffn_hidden = 4 * out.hidden;
  return out;
}

ModelDims ModelDims::make(const model::ModelConfig& config, int micro_batch, int tp, bool sp) {
  const model::ModelConfig m = with_defaults(config);
  ENGINE_CHECK(micro_batch >= 1, "micro_batch must be >= 1");
  ENGINE_CHECK(tp >= 1, "tp must be >= 1");
  ENGINE_CHECK(m.hidden > 0 && m.heads > 0 && m.seq_len > 0 && m.vocab > 0 && m.layers > 0,
               "model dimensions must be positive");
  const int kv_heads = m.kv_heads;
  const int ffn = m.ffn_hidden;
  ENGINE_CHECK(m.hidden % m.heads == 0, "hidden " + std::to_string(m.hidden) +
                                            " not divisible by heads " + std::to_string(m.heads));
  ENGINE_CHECK(m.heads % kv_heads == 0, "heads " + std::to_string(m.heads) +
                                            " not divisible by kv_heads " + std::to_string(kv_heads));
  ENGINE_CHECK(m.heads % tp == 0, "heads " + std::to_string(m.heads) + " not divisible by tp " +
                                      std::to_string(tp));
  ENGINE_CHECK(kv_heads % tp == 0, "kv_heads " + std::to_string(kv_heads) +
                                       " not divisible by tp " + std::to_string(tp));
  ENGINE_CHECK(ffn % tp == 0, "ffn_hidden " + std::to_string(ffn) + " not divisible by tp " +
                                  std::to_string(tp));
  ENGINE_CHECK(m.vocab % tp == 0, "vocab " + std::to_string(m.vocab) +
                                      " not divisible by tp " + std::to_string(tp) +
                                      " (pad the vocabulary, as Megatron-LM does)");
  ENGINE_CHECK(m.attention_window >= 0, "attention_window must be >= 0");
  ModelDims d;
  d.B = micro_batch;
  d.T = m.seq_len;
  d.C = m.hidden;
  d.V = m.vocab;
  d.NH = m.heads;
  d.NKV = kv_heads;
  d.HD = m.hidden / m.heads;
  d.F = ffn;
  d.tp = tp;
  d.sp = sp && tp > 1;
  if (d.sp) {
    ENGINE_CHECK(m.seq_len % tp == 0, "seq_len " + std::to_string(m.seq_len) +
                                          " not divisible by tp " + std::to_string(tp) +
                                          " (sequence parallelism)");
  }
  d.window = m.attention_window;
  d.gelu = m.mlp == model::MlpKind::kGelu;
  d.parallel_block = m.block == model::BlockKind::kParallel;
  d.Tl = d.sp ? d.T / tp : d.T;
  d.Vl = d.V / tp;
  d.NHl = d.NH / tp;
  d.NKVl = d.NKV / tp;
  d.Fl = d.F / tp;
  d.Fo = d.gelu ? d.Fl : 2 * d.Fl;
  d.Sq = (d.NHl + 2 * d.NKVl) * d.HD;
  d.Al = d.NHl * d.HD;
  return d;
}

void tp_all_gather(const LayerContext& ctx, const char* name, int layer, bool backward,
                   const float* shard, float* full, size_t shard_floats) {
  ENGINE_CHECK(ctx.tp_size() > 1, "tp_all_gather without a TP group");
  const int64_t bytes = static_cast<int64_t>(shard_floats) * ctx.tp_size() * 4;
  OpScope scope(ctx.observer, ctx.event(name, layer, backward, 0, bytes,
                                        model::LayerStepKind::kTpAllGather));
  ctx.tp->all_gather(shard, shard_floats, full);
}

void tp_reduce_scatter(const LayerContext& ctx, const char* name, int layer, bool backward,
                       const float* full, float* shard, size_t shard_floats) {
  ENGINE_CHECK(ctx.tp_size() > 1, "tp_reduce_scatter without a TP group");
  const int64_t bytes = static_cast<int64_t>(shard_floats) * ctx.tp_size() * 4;
  OpScope scope(ctx.observer, ctx.event(name, layer, backward, 0, bytes,
                                        model::LayerStepKind::kTpReduceScatter));
  ctx.tp->reduce_scatter_sum(full, shard_floats, shard);
}

void tp_all_reduce(const LayerContext& ctx, const char* name, int layer, bool backward,
                   float* data, size_t n) {
  if (ctx.tp_size() == 1) return;
  OpScope scope(ctx.observer, ctx.event(name, layer, backward, 0, static_cast<int64_t>(n) * 4,
                                        model::LayerStepKind::kTpAllReduce));
  ctx.tp->all_reduce_sum(data, n);
}

}  // namespace megascale::engine
