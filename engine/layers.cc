// engine/layers.cc: the TP/SP collectives of a layer, reported to the op hook.
#include "engine/layers.h"

#include <memory>
#include <vector>

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

// ---- TP overlap: collectives fused with their GEMMs -------------------------------

namespace {

// Tags of the fused transfers on the TP communicator (nothing else sends
// point-to-point there; every transfer of one fused op is waited before the op
// returns, so the tags are reused by the next one).
constexpr int kFusedGatherTag = 7100;
constexpr int kFusedScatterTag = 7200;

void run_blocks(const BlockedGemm& g, int tp, int block_rows) {
  if (g.before) g.before();
  for (int b = 0; b < tp; ++b) g.rows(b * block_rows, block_rows);
  if (g.after) g.after();
}

}  // namespace

void tp_gather_gemm(const LayerContext& ctx, const char* ag_name, int layer, bool backward,
                    const float* shard, float* full, size_t shard_floats, int block_rows,
                    const BlockedGemm& gemm) {
  ENGINE_CHECK(ctx.tp_size() > 1, "tp_gather_gemm without a TP group");
  const int P = ctx.tp_size(), r = ctx.tp_rank();
  if (!ctx.tp_overlap) {
    tp_all_gather(ctx, ag_name, layer, backward, shard, full, shard_floats);
    OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, gemm.flops));
    run_blocks(gemm, P, block_rows);
    return;
  }
  const double other_flops = gemm.flops - gemm.row_flops;
  if (gemm.before) {
    OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, other_flops));
    gemm.before();
  }
  float* own = full + static_cast<size_t>(r) * shard_floats;
  if (own != shard) ctx.device->copy(own, shard, shard_floats * sizeof(float));
  const int next = (r + 1) % P, prev = (r + P - 1) % P;
  const int64_t bytes = static_cast<int64_t>(shard_floats) * P * 4;
  std::vector<std::unique_ptr<Request>> sends;
  for (int s = 0; s < P - 1; ++s) {
    // Step s: pass on the block received in step s - 1 (own block first) and
    // receive the one before it in the ring; the GEMM runs on the held block.
    const int hold = (r - s + P) % P, incoming = (r - s - 1 + 2 * P) % P;
    std::unique_ptr<Request> recv;
    {
      OpScope op(ctx.observer, ctx.event(ag_name, layer, backward, 0, s == 0 ? bytes : 0,
                                         model::LayerStepKind::kTpAllGather));
      Comm::Exchange x = ctx.tp->isendrecv(full + static_cast<size_t>(hold) * shard_floats, shard_floats, next,
                                           full + static_cast<size_t>(incoming) * shard_floats, shard_floats,
                                           prev, kFusedGatherTag + s);
      recv = std::move(x.recv);
      sends.push_back(std::move(x.send));
    }
    {
      OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, gemm.row_flops / P));
      gemm.rows(hold * block_rows, block_rows);
    }
    {
      // On an asynchronous device wait() orders the compute stream after the
      // receive (NcclComm): the next block's GEMM and send see its data.
      OpScope op(ctx.observer, ctx.event(ag_name, layer, backward, 0, 0,
                                         model::LayerStepKind::kTpAllGather));
      recv->wait();
      if (s == P - 2) {
        for (auto& q : sends) q->wait();
      }
    }
  }
  {
    OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, gemm.row_flops / P));
    gemm.rows(next * block_rows, block_rows);  // the last block to arrive
  }
  if (gemm.after) {
    OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, other_flops));
    gemm.after();
  }
}

void tp_gemm_reduce_scatter(const LayerContext& ctx, const char* rs_name, int layer, bool backward,
                            float* full, float* shard, float* recv, size_t shard_floats,
                            int block_rows, const BlockedGemm& gemm) {
  ENGINE_CHECK(ctx.tp_size() > 1, "tp_gemm_reduce_scatter without a TP group");
  const int P = ctx.tp_size(), r = ctx.tp_rank();
  if (!ctx.tp_overlap) {
    {
      OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, gemm.flops));
      run_blocks(gemm, P, block_rows);
    }
    tp_reduce_scatter(ctx, rs_name, layer, backward, full, shard, shard_floats);
    return;
  }
  ENGINE_CHECK(recv != nullptr, "tp_gemm_reduce_scatter: no receive buffer");
  const double other_flops = gemm.flops - gemm.row_flops;
  const int64_t bytes = static_cast<int64_t>(shard_floats) * P * 4;
  auto block = [&](float* base, int b) { return base + static_cast<size_t>(b) * shard_floats; };
  std::vector<std::unique_ptr<Request>> recvs, sends;
  if (gemm.before) {
    OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, other_flops));
    gemm.before();
  }
  for (int k = 1; k <= P; ++k) {
    const int b = (r + k) % P;  // ring order; this rank's own block last
    {
      OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, gemm.row_flops / P));
      gemm.rows(b * block_rows, block_rows);
    }
    if (b != r) {
      // Step k: block b goes to its owner (rank + k) while the partial for this
      // rank's block arrives from rank - k, which computed it at its step k.
      const int from = (r - k + P) % P;
      OpScope op(ctx.observer, ctx.event(rs_name, layer, backward, 0, k == 1 ? bytes : 0,
                                         model::LayerStepKind::kTpReduceScatter));
      Comm::Exchange x = ctx.tp->isendrecv(block(full, b), shard_floats, b, block(recv, from), shard_floats,
                                           from, kFusedScatterTag + k);
      sends.push_back(std::move(x.send));
      recvs.push_back(std::move(x.recv));
    }
  }
  if (gemm.after) {
    OpScope op(ctx.observer, ctx.event(gemm.name, layer, backward, other_flops));
    gemm.after();
  }
  {
    OpScope op(ctx.observer, ctx.event(rs_name, layer, backward, 0, 0,
                                       model::LayerStepKind::kTpReduceScatter));
    for (auto& q : recvs) q->wait();
    // Rank order, as Comm::reduce_scatter_sum: ((x_0 + x_1) + x_2) + ...
    auto part = [&](int j) -> const float* { return j == r ? block(full, r) : block(recv, j); };
    ctx.device->add(shard, part(0), part(1), shard_floats);
    for (int j = 2; j < P; ++j) ctx.device->add(shard, shard, part(j), shard_floats);
    // The sent partials stay untouched until here.
    for (auto& q : sends) q->wait();
  }
}

}  // namespace megascale::engine
