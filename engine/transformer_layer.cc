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

// Linear backward: dw (OC, K) += dout^T @ inp; dinp (N, K) (= or += with
// beta_dinp) dout @ w; dbias (OC) += column sums when given.
void linear_backward(Device& dev, float* dinp, float* dw, float* dbias, const float* dout,
                     const float* inp, const float* w, int N, int OC, int K,
                     float beta_dinp = 0.0f) {
  if (dbias != nullptr) dev.bias_backward(dbias, dout, N, OC);
  dev.matmul(dw, dout, inp, OC, K, N, /*trans_a=*/true, /*trans_b=*/false, 1.0f);
  dev.matmul(dinp, dout, w, N, K, OC, false, false, beta_dinp);
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
  return Scratch{base + off_full_, base + off_shard_, base + off_datt_,
                 base + off_da_,   base + off_dh_,    base + off_dqkv_};
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

void TransformerLayer::norm_and_gather(const LayerContext& ctx, const char* ln_name,
                                       const char* ag_name, const float* x, const float* w,
                                       const float* b, float* mean, float* rstd, float* ln_full,
                                       float* shard_scratch) const {
  const int Nl = d_.Nl(), C = d_.C;
  float* ln_out = d_.sp ? shard_scratch : ln_full;
  {
    OpScope op(ctx.observer, ctx.event(ln_name, layer_, false, 0, 2 * kF32 * Nl * C));
    ctx.device->layer_norm_forward(ln_out, mean, rstd, x, w, b, Nl, C);
  }
  if (d_.sp) {
    tp_all_gather(ctx, ag_name, layer_, false, ln_out, ln_full, static_cast<size_t>(Nl) * C);
  }
}

const float* TransformerLayer::reduce_partial(const LayerContext& ctx, const char* name,
                                              bool backward, float* full,
                                              float* shard_scratch) const {
  const size_t shard = static_cast<size_t>(d_.Nl()) * d_.C;
  if (d_.sp) {
    tp_reduce_scatter(ctx, name, layer_, backward, full, shard_scratch, shard);
    return shard_scratch;
  }
  tp_all_reduce(ctx, name, layer_, backward, full, shard);
  return full;
}

const float* TransformerLayer::gather_grad(const LayerContext& ctx, const char* name,
                                           const float* dy, float* full) const {
  if (!d_.sp) return dy;
  tp_all_gather(ctx, name, layer_, true, dy, full, static_cast<size_t>(d_.Nl()) * d_.C);
  return full;
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

void TransformerLayer::forward_sequential(const LayerContext& ctx, const LayerWeights& w,
                                          const Stash& st, const Scratch& sc, float* out) const {
  Device& dev = *ctx.device;
  const int N = d_.N(), Nl = d_.Nl(), C = d_.C;
  const size_t shard = static_cast<size_t>(Nl) * C;

  // Attention branch: LN1 | AG | qkv, attention, proj | RS | residual.
  norm_and_gather(ctx, "ln1", "ag_qkv", st.x, w.ln1_w, w.ln1_b, st.mean1, st.rstd1, st.ln1,
                  sc.shard);
  {
    OpScope op(ctx.observer, ctx.event("qkv", layer_, false, gemm_flops(N, d_.Sq, C)));
    linear_forward(dev, st.qkv, st.ln1, w.qkv_w, w.qkv_b, N, d_.Sq, C);  // (T, B, Sq)
  }
  attention_forward(ctx, st);
  {
    OpScope op(ctx.observer, ctx.event("proj", layer_, false, gemm_flops(N, C, d_.Al)));
    linear_forward(dev, sc.full, st.att, w.proj_w, nullptr, N, C, d_.Al);  // (T, B, C) partial
  }
  const float* y = reduce_partial(ctx, d_.sp ? "rs_proj" : "ar_proj", false, sc.full, sc.shard);
  {
    OpScope op(ctx.observer, ctx.event("bias_dropout_add1", layer_, false, 0, 3 * kF32 * shard));
    dev.bias_residual_add(st.x2, st.x, y, w.proj_b, nullptr, Nl, C);  // (Tl, B, C)
  }

  // MLP branch: LN2 | AG | fc1, act, fc2 | RS | residual.
  norm_and_gather(ctx, "ln2", "ag_fc1", st.x2, w.ln2_w, w.ln2_b, st.mean2, st.rstd2, st.ln2,
                  sc.shard);
  {
    OpScope op(ctx.observer, ctx.event("fc1", layer_, false, gemm_flops(N, d_.Fo, C)));
    linear_forward(dev, st.h, st.ln2, w.fc1_w, w.fc1_b, N, d_.Fo, C);  // (T, B, Fo)
  }
  activation_forward(ctx, st);
  {
    OpScope op(ctx.observer, ctx.event("fc2", layer_, false, gemm_flops(N, C, d_.Fl)));
    linear_forward(dev, sc.full, st.a, w.fc2_w, nullptr, N, C, d_.Fl);  // (T, B, C) partial
  }
  const float* m = reduce_partial(ctx, d_.sp ? "rs_fc2" : "ar_fc2", false, sc.full, sc.shard);
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

  // MLP branch, mirrored: residual | AG | fc2, act, fc1 | RS | LN2.
  {
    // The residual add passes dx through; only the bias (GeLU MLP) has work.
    OpScope op(ctx.observer, ctx.event("bias_dropout_add2", layer_, true, 0, 2 * kF32 * shard));
    if (g.fc2_b != nullptr) dev.bias_backward(g.fc2_b, dx, Nl, C);
  }
  const float* dm = gather_grad(ctx, "ag_dfc2", dx, sc.full);  // (T, B, C)
  {
    OpScope op(ctx.observer, ctx.event("fc2", layer_, true, 2 * gemm_flops(N, C, d_.Fl)));
    linear_backward(dev, sc.da, g.fc2_w, nullptr, dm, st.a, w.fc2_w, N, C, d_.Fl);
  }
  activation_backward(ctx, st, sc.da, sc.dh);
  {
    // dm (== sc.full under SP) is dead: the input gradient reuses sc.full.
    OpScope op(ctx.observer, ctx.event("fc1", layer_, true, 2 * gemm_flops(N, d_.Fo, C)));
    linear_backward(dev, sc.full, g.fc1_w, g.fc1_b, sc.dh, st.ln2, w.fc1_w, N, d_.Fo, C);
  }
  const float* dln2 = reduce_partial(ctx, d_.sp ? "rs_dfc1" : "ar_dfc1", true, sc.full, sc.shard);
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
  const float* dy = gather_grad(ctx, "ag_dproj", dx, sc.full);  // (T, B, C)
  {
    OpScope op(ctx.observer, ctx.event("proj", layer_, true, 2 * gemm_flops(N, C, d_.Al)));
    linear_backward(dev, sc.datt, g.proj_w, nullptr, dy, st.att, w.proj_w, N, C, d_.Al);
  }
  attention_backward(ctx, st, sc.datt, sc.dqkv);
  {
    OpScope op(ctx.observer, ctx.event("qkv", layer_, true, 2 * gemm_flops(N, d_.Sq, C)));
    linear_backward(dev, sc.full, g.qkv_w, g.qkv_b, sc.dqkv, st.ln1, w.qkv_w, N, d_.Sq, C);
  }
  const float* dln1 = reduce_partial(ctx, d_.sp ? "rs_dqkv" : "ar_dqkv", true, sc.full, sc.shard);
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

  // LN | AG | qkv_fc1, attention, act, proj_fc2 | RS | residual.
  norm_and_gather(ctx, "ln", "ag_qkv_fc1", st.x, w.ln1_w, w.ln1_b, st.mean1, st.rstd1, st.ln1,
                  sc.shard);
  {
    OpScope op(ctx.observer,
               ctx.event("qkv_fc1", layer_, false, gemm_flops(N, d_.Sq + d_.Fo, C)));
    linear_forward(dev, st.qkv, st.ln1, w.qkv_w, w.qkv_b, N, d_.Sq, C);  // (T, B, Sq)
    linear_forward(dev, st.h, st.ln1, w.fc1_w, w.fc1_b, N, d_.Fo, C);    // (T, B, Fo)
  }
  attention_forward(ctx, st);
  activation_forward(ctx, st);
  {
    // One row-parallel GEMM over [att | a] (K = Al + Fl): two products into one sum.
    OpScope op(ctx.observer,
               ctx.event("proj_fc2", layer_, false, gemm_flops(N, C, d_.Al + d_.Fl)));
    linear_forward(dev, sc.full, st.att, w.proj_w, nullptr, N, C, d_.Al);
    linear_forward(dev, sc.full, st.a, w.fc2_w, nullptr, N, C, d_.Fl, /*beta=*/1.0f);
  }
  const float* y =
      reduce_partial(ctx, d_.sp ? "rs_proj_fc2" : "ar_proj_fc2", false, sc.full, sc.shard);
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

  // residual | AG | proj_fc2, act, attention, qkv_fc1 | RS | LN.
  {
    OpScope op(ctx.observer, ctx.event("bias_dropout_add", layer_, true, 0, 2 * kF32 * shard));
    dev.bias_backward(g.proj_b, dx, Nl, C);
    if (g.fc2_b != nullptr) dev.bias_backward(g.fc2_b, dx, Nl, C);
  }
  const float* dy = gather_grad(ctx, "ag_dproj_fc2", dx, sc.full);  // (T, B, C)
  {
    OpScope op(ctx.observer,
               ctx.event("proj_fc2", layer_, true, 2 * gemm_flops(N, C, d_.Al + d_.Fl)));
    linear_backward(dev, sc.datt, g.proj_w, nullptr, dy, st.att, w.proj_w, N, C, d_.Al);
    linear_backward(dev, sc.da, g.fc2_w, nullptr, dy, st.a, w.fc2_w, N, C, d_.Fl);
  }
  activation_backward(ctx, st, sc.da, sc.dh);
  attention_backward(ctx, st, sc.datt, sc.dqkv);
  {
    OpScope op(ctx.observer,
               ctx.event("qkv_fc1", layer_, true, 2 * gemm_flops(N, d_.Sq + d_.Fo, C)));
    linear_backward(dev, sc.full, g.qkv_w, g.qkv_b, sc.dqkv, st.ln1, w.qkv_w, N, d_.Sq, C);
    linear_backward(dev, sc.full, g.fc1_w, g.fc1_b, sc.dh, st.ln1, w.fc1_w, N, d_.Fo, C,
                    /*beta_dinp=*/1.0f);
  }
  const float* dln =
      reduce_partial(ctx, d_.sp ? "rs_dqkv_fc1" : "ar_dqkv_fc1", true, sc.full, sc.shard);
  {
    OpScope op(ctx.observer, ctx.event("ln", layer_, true, 0, 3 * kF32 * shard));
    dev.layer_norm_backward(dx, g.ln1_w, g.ln1_b, dln, st.x, w.ln1_w, st.mean1, st.rstd1, Nl,
                            C);
  }
}

}  // namespace megascale::engine
