// engine/output_head.cc: final LayerNorm, vocab-parallel logits and cross-entropy.
#include "engine/output_head.h"

#include <algorithm>
#include <vector>

namespace megascale::engine {

OutputHead::OutputHead(const ModelDims& dims, int layer_id) : d_(dims), layer_(layer_id) {
  const size_t N = static_cast<size_t>(d_.N()), Nl = static_cast<size_t>(d_.Nl());
  const size_t C = static_cast<size_t>(d_.C);
  BufferLayout st;
  o_x_ = st.take(Nl * C);
  o_mean_ = st.take(Nl);
  o_rstd_ = st.take(Nl);
  o_lnf_ = st.take(N * C);
  o_logits_ = st.take(N * d_.Vl);
  o_max_ = st.take(N);
  o_partials_ = st.take(2 * N);
  o_losses_ = st.take(N);
  o_targets_ = st.take(N);  // int32, same size as float
  stash_floats_ = st.floats;
  BufferLayout sc;
  s_shard_ = sc.take(Nl * C);
  s_full_ = sc.take(N * C);
  s_dlogits_ = sc.take(N * d_.Vl);
  s_maxes_ = sc.take(static_cast<size_t>(d_.tp) * N);
  s_dlosses_ = sc.take(N);
  scratch_floats_ = sc.floats;
}

OutputHead::Stash OutputHead::stash_at(float* base) const {
  Stash s;
  s.x = base + o_x_;
  s.mean = base + o_mean_;
  s.rstd = base + o_rstd_;
  s.lnf = base + o_lnf_;
  s.logits = base + o_logits_;
  s.row_max = base + o_max_;
  s.partials = base + o_partials_;
  s.losses = base + o_losses_;
  s.targets = reinterpret_cast<int32_t*>(base + o_targets_);
  return s;
}

float OutputHead::forward(const LayerContext& ctx, const HeadWeights& w, const Stash& st,
                          float* scratch) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), Nl = d_.Nl(), C = d_.C, Vl = d_.Vl;
  float* shard = scratch + s_shard_;
  float* ln_out = d_.sp ? shard : st.lnf;
  {
    OpScope op(ctx.observer, ctx.event("final_ln", layer_, false, 0, 2 * 4 * int64_t{Nl} * C));
    dev.layer_norm_forward(ln_out, st.mean, st.rstd, st.x, w.ln_f_w, w.ln_f_b, Nl, C);
  }
  if (d_.sp) {
    tp_all_gather(ctx, "ag_logits", layer_, false, ln_out, st.lnf, static_cast<size_t>(Nl) * C);
  }
  {
    OpScope op(ctx.observer, ctx.event("logits", layer_, false, gemm_flops(N, Vl, C)));
    dev.matmul(st.logits, st.lnf, w.out_w, N, Vl, C, false, true, 0.0f);  // (T, B, Vl)
  }
  {
    OpScope op(ctx.observer, ctx.event("cross_entropy", layer_, false, 0, 3 * 4 * int64_t{N} * Vl));
    dev.cross_entropy_row_max(st.row_max, st.logits, N, Vl);
  }
  if (d_.tp > 1) {
    float* maxes = scratch + s_maxes_;  // (tp, N)
    {
      OpScope op(ctx.observer, ctx.event("ag_cross_entropy", layer_, false, 0,
                                         4 * int64_t{N} * d_.tp,
                                         model::LayerStepKind::kTpAllGather));
      ctx.tp->all_gather(st.row_max, static_cast<size_t>(N), maxes);
    }
    // max is exact and order-free; a few floats, done on the host.
    std::vector<float> host(static_cast<size_t>(d_.tp) * N);
    dev.copy_to_host(host.data(), maxes, host.size() * sizeof(float));
    std::vector<float> global(host.begin(), host.begin() + N);
    for (int r = 1; r < d_.tp; ++r) {
      for (int i = 0; i < N; ++i) global[i] = std::max(global[i], host[size_t(r) * N + i]);
    }
    dev.copy_to_device(st.row_max, global.data(), global.size() * sizeof(float));
  }
  {
    OpScope op(ctx.observer, ctx.event("cross_entropy", layer_, false, 0, 4 * int64_t{N} * Vl));
    dev.cross_entropy_partials(st.partials, st.partials + N, st.logits, st.row_max, st.targets,
                               ctx.tp_rank() * Vl, N, Vl);
  }
  tp_all_reduce(ctx, "ar_cross_entropy", layer_, false, st.partials, 2 * static_cast<size_t>(N));
  dev.cross_entropy_loss(st.losses, st.partials, st.partials + N, N);
  std::vector<float> losses(static_cast<size_t>(N));
  dev.copy_to_host(losses.data(), st.losses, losses.size() * sizeof(float));
  double sum = 0.0;
  for (float l : losses) sum += l;
  return static_cast<float>(sum / N);
}

void OutputHead::backward(const LayerContext& ctx, const HeadWeights& w, const HeadWeights& g,
                          const Stash& st, float* scratch, float loss_scale, float* dx) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), Nl = d_.Nl(), C = d_.C, Vl = d_.Vl;
  float* dlosses = scratch + s_dlosses_;
  float* dlogits = scratch + s_dlogits_;
  float* full = scratch + s_full_;
  float* shard = scratch + s_shard_;
  {
    OpScope op(ctx.observer, ctx.event("cross_entropy", layer_, true, 0, 2 * 4 * int64_t{N} * Vl));
    const std::vector<float> dl(static_cast<size_t>(N), loss_scale / static_cast<float>(N));
    dev.copy_to_device(dlosses, dl.data(), dl.size() * sizeof(float));
    dev.cross_entropy_backward(dlogits, st.logits, st.row_max, st.partials, st.targets, dlosses,
                               ctx.tp_rank() * Vl, N, Vl);  // (T, B, Vl)
  }
  {
    OpScope op(ctx.observer, ctx.event("logits", layer_, true, 2 * gemm_flops(N, Vl, C)));
    dev.matmul(g.out_w, dlogits, st.lnf, Vl, C, N, true, false, 1.0f);  // (Vl, C)
    dev.matmul(full, dlogits, w.out_w, N, C, Vl, false, false, 0.0f);   // (T, B, C) partial
  }
  const float* dln = full;
  if (d_.sp) {
    tp_reduce_scatter(ctx, "rs_dlogits", layer_, true, full, shard, static_cast<size_t>(Nl) * C);
    dln = shard;
  } else {
    tp_all_reduce(ctx, "ar_dlogits", layer_, true, full, static_cast<size_t>(Nl) * C);
  }
  {
    OpScope op(ctx.observer, ctx.event("final_ln", layer_, true, 0, 3 * 4 * int64_t{Nl} * C));
    dev.fill_zero(dx, static_cast<size_t>(Nl) * C * sizeof(float));
    dev.layer_norm_backward(dx, g.ln_f_w, g.ln_f_b, dln, st.x, w.ln_f_w, st.mean, st.rstd, Nl, C);
  }
}

}  // namespace megascale::engine
