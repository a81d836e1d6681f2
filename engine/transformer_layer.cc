// engine/transformer_layer.cc: forward and backward of one transformer layer.
#include "engine/transformer_layer.h"

namespace megascale::engine {
namespace {

using model::LayerStepKind;

constexpr int64_t kF32 = 4;

// Linear forward: out (N, OC) = inp (N, K) @ w^T (w: (OC, K)) [+ bias (OC)].
void linear_forward(Device& dev, float* out, const float* inp, const float* w, const float* bias,
                    int N, int OC, int K, float beta = 0.0f) {
  if (bias != nullptr && beta == 0.0f) {
    dev.matmul_bias(out, inp, w, bias, N, OC, K, /*trans_a=*/false, /*trans_b=*/true);
    return;
  }
  dev.matmul(out, inp, w, N, OC, K, /*trans_a=*/false, /*trans_b=*/true, beta);
  if (bias != nullptr) dev.bias_add(out, bias, N, OC);
}

}  // namespace

TransformerLayer::TransformerLayer(const ModelDims& dims, int layer) : d_(dims), layer_(layer) {
  const size_t N = static_cast<size_t>(d_.N()), Nl = static_cast<size_t>(d_.Nl());
  const size_t C = static_cast<size_t>(d_.C);
  BufferLayout st;
  o_x_ = st.take(Nl * C);
  o_mean1_ = st.take(Nl);
  o_rstd1_ = st.take(Nl);
  o_ln1_ = st.take(N * C);
  o_qkv_ = st.take(N * d_.Sq);
  o_probs_ = st.take(static_cast<size_t>(d_.B) * d_.NHl * d_.T * d_.T);
  o_att_ = st.take(N * d_.Al);
  if (!d_.parallel_block) {
    o_x2_ = st.take(Nl * C);
    o_mean2_ = st.take(Nl);
    o_rstd2_ = st.take(Nl);
    o_ln2_ = st.take(N * C);
  }
  o_h_ = st.take(N * d_.Fo);
  o_a_ = st.take(N * d_.Fl);
  stash_floats_ = st.floats;

  BufferLayout sc;
  off_full_ = sc.take(N * C);
  off_shard_ = sc.take(Nl * C);
  off_datt_ = sc.take(N * d_.Al);
  off_da_ = sc.take(N * d_.Fl);
  off_dh_ = sc.take(N * d_.Fo);
  off_dqkv_ = sc.take(N * d_.Sq);
  if (d_.sp) off_recv_ = sc.take(N * C);  // the fused reduce-scatter's receives (tp_overlap)
  scratch_floats_ = sc.floats;
}

TransformerLayer::Stash TransformerLayer::stash_at(float* base) const {
  Stash s;
  s.x = base + o_x_;
  s.mean1 = base + o_mean1_;
  s.rstd1 = base + o_rstd1_;
  s.ln1 = base + o_ln1_;
  s.qkv = base + o_qkv_;
  s.probs = base + o_probs_;
  s.att = base + o_att_;
  if (!d_.parallel_block) {
    s.x2 = base + o_x2_;
    s.mean2 = base + o_mean2_;
    s.rstd2 = base + o_rstd2_;
    s.ln2 = base + o_ln2_;
  }
  s.h = base + o_h_;
  s.a = base + o_a_;
  return s;
}

TransformerLayer::Scratch TransformerLayer::scratch_at(float* base) const {
  return Scratch{base + off_full_, base + off_shard_, base + off_datt_, base + off_da_,
                 base + off_dh_,   base + off_dqkv_,  d_.sp ? base + off_recv_ : nullptr};
}

void TransformerLayer::forward(const LayerContext& ctx, const LayerWeights& w, const Stash& stash,
                               float* scratch, float* out) const {
  ENGINE_CHECK(ctx.tp_size() == d_.tp, "TP group size differs from the layer's tp");
  const Scratch sc = scratch_at(scratch);
  if (d_.parallel_block) {
    forward_parallel(ctx, w, stash, sc, out);
  } else {
    forward_sequential(ctx, w, stash, sc, out);
  }
}

void TransformerLayer::backward(const LayerContext& ctx, const LayerWeights& w,
                                const LayerWeights& g, const Stash& stash, float* scratch,
                                const float* dout, float* dx) const {
  ENGINE_CHECK(ctx.tp_size() == d_.tp, "TP group size differs from the layer's tp");
  // The residual path: dx starts as dout; the branches add into it.
  ctx.device->copy(dx, dout, static_cast<size_t>(d_.Nl()) * d_.C * sizeof(float));
  const Scratch sc = scratch_at(scratch);
  if (d_.parallel_block) {
    backward_parallel(ctx, w, g, stash, sc, dx);
  } else {
    backward_sequential(ctx, w, g, stash, sc, dx);
  }
}

// ---- shared pieces ------------------------------------------------------------

void TransformerLayer::norm(const LayerContext& ctx, const char* ln_name, const float* x,
                            const float* w, const float* b, float* mean, float* rstd,
                            float* ln_full) const {
  const int Nl = d_.Nl(), C = d_.C;
  float* ln_out = ln_full + (d_.sp ? static_cast<size_t>(ctx.tp_rank()) * Nl * C : 0);
  OpScope op(ctx.observer, ctx.event(ln_name, layer_, false, 0, 2 * kF32 * Nl * C));
  ctx.device->layer_norm_forward(ln_out, mean, rstd, x, w, b, Nl, C);
}

void TransformerLayer::gather_gemm(const LayerContext& ctx, const char* ag_name, bool backward,
                                   const float* shard, float* input_full,
                                   const BlockedGemm& gemm) const {
  if (d_.sp) {
    tp_gather_gemm(ctx, ag_name, layer_, backward, shard, input_full,
                   static_cast<size_t>(d_.Nl()) * d_.C, d_.Nl(), gemm);
    return;
  }
  OpScope op(ctx.observer, ctx.event(gemm.name, layer_, backward, gemm.flops));
  if (gemm.before) gemm.before();
  gemm.rows(0, d_.N());
  if (gemm.after) gemm.after();
}

void TransformerLayer::regather_input(const LayerContext& ctx, const char* ag_name, float* ln_full) const {
  if (!d_.sp) return;
  const size_t shard = static_cast<size_t>(d_.Nl()) * d_.C;
  tp_all_gather(ctx, ag_name, layer_, /*backward=*/true, ln_full + static_cast<size_t>(ctx.tp_rank()) * shard,
                ln_full, shard);
}

const float* TransformerLayer::gemm_reduce(const LayerContext& ctx, const char* rs_name,
                                           const char* ar_name, bool backward, const Scratch& sc,
                                           const BlockedGemm& gemm) const {
  const size_t shard = static_cast<size_t>(d_.Nl()) * d_.C;
  if (d_.sp) {
    tp_gemm_reduce_scatter(ctx, rs_name, layer_, backward, sc.full, sc.shard, sc.recv, shard,
                           d_.Nl(), gemm);
    return sc.shard;
  }
  {
    OpScope op(ctx.observer, ctx.event(gemm.name, layer_, backward, gemm.flops));
    if (gemm.before) gemm.before();
    gemm.rows(0, d_.N());
    if (gemm.after) gemm.after();
  }
  tp_all_reduce(ctx, ar_name, layer_, backward, sc.full, shard);
  return sc.full;
}

void TransformerLayer::attention_forward(const LayerContext& ctx, const Stash& st) const {
  const double flops = 4.0 * d_.B * d_.NHl * static_cast<double>(d_.T) * d_.T * d_.HD;
  OpScope op(ctx.observer, ctx.event("flash_attention", layer_, false, flops,
                                     kF32 * d_.N() * (d_.Sq + d_.Al)));
  ctx.device->attention_forward(st.att, st.probs, st.qkv, d_.T, d_.B, d_.NHl, d_.NKVl, d_.HD,
                                d_.window);
}

void TransformerLayer::attention_backward(const LayerContext& ctx, const Stash& st,
                                          const float* datt, float* dqkv) const {
  const double flops = 8.0 * d_.B * d_.NHl * static_cast<double>(d_.T) * d_.T * d_.HD;
  OpScope op(ctx.observer, ctx.event("flash_attention", layer_, true, flops,
                                     kF32 * d_.N() * (2 * d_.Sq + d_.Al)));
  ctx.device->attention_backward(dqkv, datt, st.qkv, st.probs, d_.T, d_.B, d_.NHl, d_.NKVl,
                                 d_.HD);
}

void TransformerLayer::activation_forward(const LayerContext& ctx, const Stash& st) const {
  const int64_t N = d_.N();
  if (d_.gelu) {
    OpScope op(ctx.observer, ctx.event("gelu", layer_, false, 0, 2 * kF32 * N * d_.Fl));
    ctx.device->gelu_forward(st.a, st.h, static_cast<size_t>(N) * d_.Fl);
  } else {
    OpScope op(ctx.observer, ctx.event("swiglu", layer_, false, 0, 3 * kF32 * N * d_.Fl));
    ctx.device->swiglu_forward(st.a, st.h, d_.N(), d_.Fl);
  }
}

void TransformerLayer::activation_backward(const LayerContext& ctx, const Stash& st,
                                           const float* da, float* dh) const {
  const int64_t N = d_.N();
  if (d_.gelu) {
    OpScope op(ctx.observer, ctx.event("gelu", layer_, true, 0, 3 * kF32 * N * d_.Fl));
    ctx.device->gelu_backward(dh, st.h, da, static_cast<size_t>(N) * d_.Fl);
  } else {
    OpScope op(ctx.observer, ctx.event("swiglu", layer_, true, 0, 5 * kF32 * N * d_.Fl));
    ctx.device->swiglu_backward(dh, st.h, da, d_.N(), d_.Fl);
  }
}

// ---- sequential block ------------------------------------------------------------
//
// Every column-parallel GEMM goes through gather_gemm and every row-parallel one
// through gemm_reduce as a BlockedGemm: the token-parallel product by row
// blocks (`rows`: rows [r0, r0 + n) of the output from the same rows of the
// input), the weight / bias gradients (which sum over every token) whole. Under
// SP the row blocks are the TP ranks' sequence shards, with or without
// tp_overlap, so both give the same bits.

void TransformerLayer::forward_sequential(const LayerContext& ctx, const LayerWeights& w,
                                          const Stash& st, const Scratch& sc, float* out) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), Nl = d_.Nl(), C = d_.C;
  const size_t shard = static_cast<size_t>(Nl) * C;
  const size_t own = d_.sp ? static_cast<size_t>(ctx.tp_rank()) * shard : 0;

  // Attention branch: LN1 | AG | qkv, attention, proj | RS | residual.
  norm(ctx, "ln1", st.x, w.ln1_w, w.ln1_b, st.mean1, st.rstd1, st.ln1);
  BlockedGemm qkv;
  qkv.name = "qkv";
  qkv.flops = qkv.row_flops = gemm_flops(N, d_.Sq, C);
  qkv.rows = [&](int r0, int n) {  // (T, B, Sq)
    linear_forward(dev, st.qkv + size_t(r0) * d_.Sq, st.ln1 + size_t(r0) * C, w.qkv_w, w.qkv_b,
                   n, d_.Sq, C);
  };
  gather_gemm(ctx, "ag_qkv", false, st.ln1 + own, st.ln1, qkv);
  attention_forward(ctx, st);
  BlockedGemm proj;
  proj.name = "proj";
  proj.flops = proj.row_flops = gemm_flops(N, C, d_.Al);
  proj.rows = [&](int r0, int n) {  // (T, B, C) partial
    linear_forward(dev, sc.full + size_t(r0) * C, st.att + size_t(r0) * d_.Al, w.proj_w, nullptr,
                   n, C, d_.Al);
  };
  const float* y = gemm_reduce(ctx, "rs_proj", "ar_proj", false, sc, proj);
  {
    OpScope op(ctx.observer, ctx.event("bias_dropout_add1", layer_, false, 0, 3 * kF32 * shard));
    dev.bias_residual_add(st.x2, st.x, y, w.proj_b, nullptr, Nl, C);  // (Tl, B, C)
  }

  // MLP branch: LN2 | AG | fc1, act, fc2 | RS | residual.
  norm(ctx, "ln2", st.x2, w.ln2_w, w.ln2_b, st.mean2, st.rstd2, st.ln2);
  BlockedGemm fc1;
  fc1.name = "fc1";
  fc1.flops = fc1.row_flops = gemm_flops(N, d_.Fo, C);
  fc1.rows = [&](int r0, int n) {  // (T, B, Fo)
    linear_forward(dev, st.h + size_t(r0) * d_.Fo, st.ln2 + size_t(r0) * C, w.fc1_w, w.fc1_b, n,
                   d_.Fo, C);
  };
  gather_gemm(ctx, "ag_fc1", false, st.ln2 + own, st.ln2, fc1);
  activation_forward(ctx, st);
  BlockedGemm fc2;
  fc2.name = "fc2";
  fc2.flops = fc2.row_flops = gemm_flops(N, C, d_.Fl);
  fc2.rows = [&](int r0, int n) {  // (T, B, C) partial
    linear_forward(dev, sc.full + size_t(r0) * C, st.a + size_t(r0) * d_.Fl, w.fc2_w, nullptr, n,
                   C, d_.Fl);
  };
  const float* m = gemm_reduce(ctx, "rs_fc2", "ar_fc2", false, sc, fc2);
  {
    OpScope op(ctx.observer, ctx.event("bias_dropout_add2", layer_, false, 0, 3 * kF32 * shard));
    dev.bias_residual_add(out, st.x2, m, w.fc2_b, nullptr, Nl, C);  // (Tl, B, C)
  }
}

void TransformerLayer::backward_sequential(const LayerContext& ctx, const LayerWeights& w,
                                           const LayerWeights& g, const Stash& st,
                                           const Scratch& sc, float* dx) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), Nl = d_.Nl(), C = d_.C;
  const size_t shard = static_cast<size_t>(Nl) * C;
  // The gradient of a row-parallel output: all-gathered into sc.full under SP,
  // dx itself otherwise.
  const float* dfull = d_.sp ? sc.full : dx;

  // MLP branch, mirrored: residual | AG | fc2, act, fc1 | RS | LN2.
  {
    // The residual add passes dx through; only the bias (GeLU MLP) has work.
    OpScope op(ctx.observer, ctx.event("bias_dropout_add2", layer_, true, 0, 2 * kF32 * shard));
    if (g.fc2_b != nullptr) dev.bias_backward(g.fc2_b, dx, Nl, C);
  }
  BlockedGemm fc2;
  fc2.name = "fc2";
  fc2.flops = 2 * gemm_flops(N, C, d_.Fl);
  fc2.row_flops = gemm_flops(N, C, d_.Fl);
  fc2.rows = [&](int r0, int n) {  // da = dm @ fc2_w
    dev.matmul(sc.da + size_t(r0) * d_.Fl, dfull + size_t(r0) * C, w.fc2_w, n, d_.Fl, C, false,
               false, 0.0f);
  };
  fc2.after = [&] {  // d fc2_w += dm^T @ a
    dev.matmul(g.fc2_w, dfull, st.a, C, d_.Fl, N, true, false, 1.0f);
  };
  gather_gemm(ctx, "ag_dfc2", true, dx, sc.full, fc2);
  activation_backward(ctx, st, sc.da, sc.dh);
  BlockedGemm fc1;  // sc.full (dm) is dead: the input gradient reuses it
  fc1.name = "fc1";
  fc1.flops = 2 * gemm_flops(N, d_.Fo, C);
  fc1.row_flops = gemm_flops(N, d_.Fo, C);
  fc1.before = [&] {
    if (g.fc1_b != nullptr) dev.bias_backward(g.fc1_b, sc.dh, N, d_.Fo);
    dev.matmul(g.fc1_w, sc.dh, st.ln2, d_.Fo, C, N, true, false, 1.0f);
  };
  fc1.rows = [&](int r0, int n) {
    dev.matmul(sc.full + size_t(r0) * C, sc.dh + size_t(r0) * d_.Fo, w.fc1_w, n, C, d_.Fo, false,
               false, 0.0f);
  };
  regather_input(ctx, "ag_in_fc1", st.ln2);
  const float* dln2 = gemm_reduce(ctx, "rs_dfc1", "ar_dfc1", true, sc, fc1);
  {
    OpScope op(ctx.observer, ctx.event("ln2", layer_, true, 0, 3 * kF32 * shard));
    dev.layer_norm_backward(dx, g.ln2_w, g.ln2_b, dln2, st.x2, w.ln2_w, st.mean2, st.rstd2, Nl,
                            C);
  }

  // Attention branch, mirrored: residual | AG | proj, attention, qkv | RS | LN1.
  {
    OpScope op(ctx.observer, ctx.event("bias_dropout_add1", layer_, true, 0, 2 * kF32 * shard));
    dev.bias_backward(g.proj_b, dx, Nl, C);
  }
  BlockedGemm proj;
  proj.name = "proj";
  proj.flops = 2 * gemm_flops(N, C, d_.Al);
  proj.row_flops = gemm_flops(N, C, d_.Al);
  proj.rows = [&](int r0, int n) {  // datt = dy @ proj_w
    dev.matmul(sc.datt + size_t(r0) * d_.Al, dfull + size_t(r0) * C, w.proj_w, n, d_.Al, C, false,
               false, 0.0f);
  };
  proj.after = [&] { dev.matmul(g.proj_w, dfull, st.att, C, d_.Al, N, true, false, 1.0f); };
  gather_gemm(ctx, "ag_dproj", true, dx, sc.full, proj);
  attention_backward(ctx, st, sc.datt, sc.dqkv);
  BlockedGemm qkv;
  qkv.name = "qkv";
  qkv.flops = 2 * gemm_flops(N, d_.Sq, C);
  qkv.row_flops = gemm_flops(N, d_.Sq, C);
  qkv.before = [&] {
    dev.bias_backward(g.qkv_b, sc.dqkv, N, d_.Sq);
    dev.matmul(g.qkv_w, sc.dqkv, st.ln1, d_.Sq, C, N, true, false, 1.0f);
  };
  qkv.rows = [&](int r0, int n) {
    dev.matmul(sc.full + size_t(r0) * C, sc.dqkv + size_t(r0) * d_.Sq, w.qkv_w, n, C, d_.Sq, false,
               false, 0.0f);
  };
  regather_input(ctx, "ag_in_qkv", st.ln1);
  const float* dln1 = gemm_reduce(ctx, "rs_dqkv", "ar_dqkv", true, sc, qkv);
  {
    OpScope op(ctx.observer, ctx.event("ln1", layer_, true, 0, 3 * kF32 * shard));
    dev.layer_norm_backward(dx, g.ln1_w, g.ln1_b, dln1, st.x, w.ln1_w, st.mean1, st.rstd1, Nl,
                            C);
  }
}

// ---- parallel block -----------------------------------------------------------------

void TransformerLayer::forward_parallel(const LayerContext& ctx, const LayerWeights& w,
                                        const Stash& st, const Scratch& sc, float* out) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), Nl = d_.Nl(), C = d_.C;
  const size_t shard = static_cast<size_t>(Nl) * C;
  const size_t own = d_.sp ? static_cast<size_t>(ctx.tp_rank()) * shard : 0;

  // LN | AG | qkv_fc1, attention, act, proj_fc2 | RS | residual.
  norm(ctx, "ln", st.x, w.ln1_w, w.ln1_b, st.mean1, st.rstd1, st.ln1);
  BlockedGemm qkv_fc1;
  qkv_fc1.name = "qkv_fc1";
  qkv_fc1.flops = qkv_fc1.row_flops = gemm_flops(N, d_.Sq + d_.Fo, C);
  qkv_fc1.rows = [&](int r0, int n) {
    const float* in = st.ln1 + size_t(r0) * C;
    linear_forward(dev, st.qkv + size_t(r0) * d_.Sq, in, w.qkv_w, w.qkv_b, n, d_.Sq, C);
    linear_forward(dev, st.h + size_t(r0) * d_.Fo, in, w.fc1_w, w.fc1_b, n, d_.Fo, C);
  };
  gather_gemm(ctx, "ag_qkv_fc1", false, st.ln1 + own, st.ln1, qkv_fc1);
  attention_forward(ctx, st);
  activation_forward(ctx, st);
  BlockedGemm proj_fc2;
  // One row-parallel GEMM over [att | a] (K = Al + Fl): two products into one sum.
  proj_fc2.name = "proj_fc2";
  proj_fc2.flops = proj_fc2.row_flops = gemm_flops(N, C, d_.Al + d_.Fl);
  proj_fc2.rows = [&](int r0, int n) {
    float* o = sc.full + size_t(r0) * C;
    linear_forward(dev, o, st.att + size_t(r0) * d_.Al, w.proj_w, nullptr, n, C, d_.Al);
    linear_forward(dev, o, st.a + size_t(r0) * d_.Fl, w.fc2_w, nullptr, n, C, d_.Fl,
                   /*beta=*/1.0f);
  };
  const float* y = gemm_reduce(ctx, "rs_proj_fc2", "ar_proj_fc2", false, sc, proj_fc2);
  {
    OpScope op(ctx.observer, ctx.event("bias_dropout_add", layer_, false, 0, 3 * kF32 * shard));
    dev.bias_residual_add(out, st.x, y, w.proj_b, w.fc2_b, Nl, C);  // (Tl, B, C)
  }
}

void TransformerLayer::backward_parallel(const LayerContext& ctx, const LayerWeights& w,
                                         const LayerWeights& g, const Stash& st,
                                         const Scratch& sc, float* dx) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), Nl = d_.Nl(), C = d_.C;
  const size_t shard = static_cast<size_t>(Nl) * C;
  const float* dy = d_.sp ? sc.full : dx;  // (T, B, C) once gathered

  // residual | AG | proj_fc2, act, attention, qkv_fc1 | RS | LN.
  {
    OpScope op(ctx.observer, ctx.event("bias_dropout_add", layer_, true, 0, 2 * kF32 * shard));
    dev.bias_backward(g.proj_b, dx, Nl, C);
    if (g.fc2_b != nullptr) dev.bias_backward(g.fc2_b, dx, Nl, C);
  }
  BlockedGemm proj_fc2;
  proj_fc2.name = "proj_fc2";
  proj_fc2.flops = 2 * gemm_flops(N, C, d_.Al + d_.Fl);
  proj_fc2.row_flops = gemm_flops(N, C, d_.Al + d_.Fl);
  proj_fc2.rows = [&](int r0, int n) {
    const float* d = dy + size_t(r0) * C;
    dev.matmul(sc.datt + size_t(r0) * d_.Al, d, w.proj_w, n, d_.Al, C, false, false, 0.0f);
    dev.matmul(sc.da + size_t(r0) * d_.Fl, d, w.fc2_w, n, d_.Fl, C, false, false, 0.0f);
  };
  proj_fc2.after = [&] {
    dev.matmul(g.proj_w, dy, st.att, C, d_.Al, N, true, false, 1.0f);
    dev.matmul(g.fc2_w, dy, st.a, C, d_.Fl, N, true, false, 1.0f);
  };
  gather_gemm(ctx, "ag_dproj_fc2", true, dx, sc.full, proj_fc2);
  activation_backward(ctx, st, sc.da, sc.dh);
  attention_backward(ctx, st, sc.datt, sc.dqkv);
  BlockedGemm qkv_fc1;
  qkv_fc1.name = "qkv_fc1";
  qkv_fc1.flops = 2 * gemm_flops(N, d_.Sq + d_.Fo, C);
  qkv_fc1.row_flops = gemm_flops(N, d_.Sq + d_.Fo, C);
  qkv_fc1.before = [&] {
    dev.bias_backward(g.qkv_b, sc.dqkv, N, d_.Sq);
    dev.matmul(g.qkv_w, sc.dqkv, st.ln1, d_.Sq, C, N, true, false, 1.0f);
    if (g.fc1_b != nullptr) dev.bias_backward(g.fc1_b, sc.dh, N, d_.Fo);
    dev.matmul(g.fc1_w, sc.dh, st.ln1, d_.Fo, C, N, true, false, 1.0f);
  };
  qkv_fc1.rows = [&](int r0, int n) {
    float* o = sc.full + size_t(r0) * C;
    dev.matmul(o, sc.dqkv + size_t(r0) * d_.Sq, w.qkv_w, n, C, d_.Sq, false, false, 0.0f);
    dev.matmul(o, sc.dh + size_t(r0) * d_.Fo, w.fc1_w, n, C, d_.Fo, false, false, 1.0f);
  };
  regather_input(ctx, "ag_in_qkv_fc1", st.ln1);
  const float* dln = gemm_reduce(ctx, "rs_dqkv_fc1", "ar_dqkv_fc1", true, sc, qkv_fc1);
  {
    OpScope op(ctx.observer, ctx.event("ln", layer_, true, 0, 3 * kF32 * shard));
    dev.layer_norm_backward(dx, g.ln1_w, g.ln1_b, dln, st.x, w.ln1_w, st.mean1, st.rstd1, Nl,
                            C);
  }
}

}  // namespace megascale::engine
