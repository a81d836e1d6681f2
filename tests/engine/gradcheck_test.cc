// Gradient checks: every hand-written backward (kernels, transformer layer in
// each variant, embedding, output head, a whole ModelChunk) against central
// finite differences of its own forward.
//
// Method. The scalar checked is L = sum_i r_i * out_i for fixed random r (the
// output head and the chunk: their mean cross-entropy), accumulated in double
// from the fp32 forward. For a sample of coordinates of every input and
// parameter tensor, fd = (L(p + e) - L(p - e)) / (2e), and the analytic
// gradient comes from one backward with dout = r.
//
// Tolerance. fp32 forward values carry a relative rounding error of ~1e-7, so
// L carries an absolute error of about 1e-7 * sum_i |r_i out_i| (~1e-4 for the
// ~1e3-element outputs here) and the finite difference an error of that over
// 2e; with e = 1e-2 this is ~1e-5 .. 1e-4 of a typical gradient, while the
// truncation error of the central difference, e^2 f''' / 6, is ~1e-5 relative
// for these O(1)-scaled smooth functions. So each tensor is judged by
//   err = max_i |analytic_i - fd_i| / max_i |analytic_i|   (over its sample)
// against 1e-3 for kernels and layers (measured: 6e-7 .. 4e-4) and 5e-3 for the
// whole chunk (measured: 4e-5 .. 9e-4; its loss is returned in fp32, which adds
// ~5e-7 / 2e of noise, and its gradients are ~100x smaller than a layer's). A
// wrong term in a backward gives errors of O(0.1 - 1). The measured values are
// printed in the test log.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/device_cpu.h"
#include "engine/embedding.h"
#include "engine/model_chunk.h"
#include "engine/output_head.h"
#include "engine/param_init.h"
#include "engine/transformer_layer.h"

namespace megascale::engine {
namespace {

constexpr float kEps = 1e-2f;
constexpr double kTolerance = 1e-3;       // kernels, layers
constexpr double kChunkTolerance = 5e-3;  // the whole chunk

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f, float mean = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

double dot(const std::vector<float>& r, const float* out) {
  double s = 0;
  for (size_t i = 0; i < r.size(); ++i) s += double(r[i]) * out[i];
  return s;
}

// Up to `k` indices spread over [0, n), always including 0 and n-1.
std::vector<size_t> sample(size_t n, size_t k, uint32_t seed) {
  std::vector<size_t> idx;
  if (n <= k) {
    for (size_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  std::mt19937 gen(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  idx.push_back(0);
  idx.push_back(n - 1);
  while (idx.size() < k) idx.push_back(pick(gen));
  return idx;
}

// Compares `analytic` (n values) with central differences of loss() in the
// coordinates of p; returns the normalised error described above.
double check_tensor(const std::string& what, float* p, const float* analytic, size_t n,
                    const std::function<double()>& loss, size_t k = 16,
                    double tolerance = kTolerance) {
  double max_err = 0, max_grad = 0;
  for (size_t i : sample(n, k, static_cast<uint32_t>(n * 31 + what.size()))) {
    const float saved = p[i];
    const float hi = saved + kEps, lo = saved - kEps;
    p[i] = hi;
    const double lp = loss();
    p[i] = lo;
    const double lm = loss();
    p[i] = saved;
    const double fd = (lp - lm) / (double(hi) - double(lo));
    max_err = std::max(max_err, std::fabs(fd - analytic[i]));
    max_grad = std::max(max_grad, std::fabs(double(analytic[i])));
  }
  const double err = max_err / std::max(max_grad, 1e-12);
  std::printf("  gradcheck %-34s max|grad| %.3e  err %.2e\n", what.c_str(), max_grad, err);
  EXPECT_GT(max_grad, 0.0) << what << ": gradient identically zero in the sample";
  EXPECT_LT(err, tolerance) << what;
  return err;
}

class GradCheckTest : public ::testing::Test {
 protected:
  CpuDevice dev;
};

// ---- kernels ------------------------------------------------------------------------

TEST_F(GradCheckTest, LayerNorm) {
  const int N = 4, C = 16;
  auto x = randn(N * C, 1, 2.0f), w = randn(C, 2, 0.3f, 1.0f), b = randn(C, 3, 0.3f);
  const auto r = randn(N * C, 4);
  std::vector<float> y(N * C), mean(N), rstd(N);
  auto loss = [&] {
    dev.layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    return dot(r, y.data());
  };
  loss();
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  dev.layer_norm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  check_tensor("layer_norm dx", x.data(), dx.data(), x.size(), loss);
  check_tensor("layer_norm dweight", w.data(), dw.data(), w.size(), loss);
  check_tensor("layer_norm dbias", b.data(), db.data(), b.size(), loss);
}

TEST_F(GradCheckTest, GeluSwiGluSoftmax) {
  const int N = 3, F = 8;
  auto x = randn(N * 2 * F, 1, 1.5f);
  const auto r = randn(N * 2 * F, 2);
  std::vector<float> y(x.size()), dx(x.size());
  auto gelu = [&] {
    dev.gelu_forward(y.data(), x.data(), x.size());
    return dot(r, y.data());
  };
  dev.gelu_backward(dx.data(), x.data(), r.data(), x.size());
  check_tensor("gelu", x.data(), dx.data(), x.size(), gelu);

  const std::vector<float> r_half(r.begin(), r.begin() + N * F);
  auto swiglu = [&] {
    dev.swiglu_forward(y.data(), x.data(), N, F);
    return dot(r_half, y.data());
  };
  dev.swiglu_backward(dx.data(), x.data(), r_half.data(), N, F);
  check_tensor("swiglu", x.data(), dx.data(), x.size(), swiglu);

  auto softmax = [&] {
    dev.softmax_forward(y.data(), x.data(), N, 2 * F);
    return dot(r, y.data());
  };
  softmax();
  dev.softmax_backward(dx.data(), y.data(), r.data(), N, 2 * F);
  check_tensor("softmax", x.data(), dx.data(), x.size(), softmax);
}

TEST_F(GradCheckTest, AttentionFullWindowedGqa) {
  const int T = 8, B = 2, HD = 4;
  struct Case { int NH, NKV, W; };
  for (const Case c : {Case{2, 2, 0}, Case{2, 2, 2}, Case{4, 2, 3}, Case{4, 1, 0}}) {
    const int S = (c.NH + 2 * c.NKV) * HD;
    auto qkv = randn(size_t(T) * B * S, 5, 1.0f);
    const auto r = randn(size_t(T) * B * c.NH * HD, 6);
    std::vector<float> out(r.size()), probs(size_t(B) * c.NH * T * T), dqkv(qkv.size());
    auto loss = [&] {
      dev.attention_forward(out.data(), probs.data(), qkv.data(), T, B, c.NH, c.NKV, HD, c.W);
      return dot(r, out.data());
    };
    loss();
    dev.attention_backward(dqkv.data(), r.data(), qkv.data(), probs.data(), T, B, c.NH, c.NKV, HD);
    check_tensor("attention NH" + std::to_string(c.NH) + " NKV" + std::to_string(c.NKV) + " W" +
                     std::to_string(c.W),
                 qkv.data(), dqkv.data(), qkv.size(), loss, 48);
  }
}

TEST_F(GradCheckTest, CrossEntropy) {
  const int N = 4, V = 11;
  auto logits = randn(N * V, 1, 2.0f);
  const std::vector<int32_t> targets = {0, 10, 3, 3};
  const auto dl = randn(N, 2);
  std::vector<float> mx(N), se(N), tl(N), losses(N), dlogits(N * V);
  auto loss = [&] {
    dev.cross_entropy_row_max(mx.data(), logits.data(), N, V);
    dev.cross_entropy_partials(se.data(), tl.data(), logits.data(), mx.data(), targets.data(), 0,
                               N, V);
    dev.cross_entropy_loss(losses.data(), se.data(), tl.data(), N);
    return dot(dl, losses.data());
  };
  loss();
  dev.cross_entropy_backward(dlogits.data(), logits.data(), mx.data(), se.data(), targets.data(),
                             dl.data(), 0, N, V);
  check_tensor("cross_entropy", logits.data(), dlogits.data(), logits.size(), loss, 44);
}

// ---- layers -------------------------------------------------------------------------

model::ModelConfig tiny_model(model::BlockKind block, model::MlpKind mlp, int kv_heads, int window) {
  model::ModelConfig m;
  m.layers = 2;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = kv_heads;
  m.seq_len = 8;
  m.vocab = 24;
  m.ffn_hidden = 32;
  m.mlp = mlp;
  m.block = block;
  m.attention_window = window;
  return m;
}

// Owns host storage for every tensor of `specs` (tp = 1), randomised so that no
// gradient is trivially zero: weights N(0, 0.3), LayerNorm gains 1 + N(0, 0.2),
// biases N(0, 0.2).
struct HostParams {
  std::vector<TensorSpec> specs;
  std::vector<std::vector<float>> values, grads;

  explicit HostParams(std::vector<TensorSpec> s, uint32_t seed) : specs(std::move(s)) {
    for (size_t i = 0; i < specs.size(); ++i) {
      const size_t n = size_t(shape_numel(specs[i].full_shape));
      const bool gain = specs[i].init == InitKind::kOnes;
      const float scale = specs[i].full_shape.size() == 2 ? 0.3f : 0.2f;
      values.push_back(randn(n, seed + uint32_t(i), scale, gain ? 1.0f : 0.0f));
      grads.emplace_back(n, 0.0f);
    }
  }
  float* value(const std::string& kind) { return ptr(values, kind); }
  float* grad(const std::string& kind) { return ptr(grads, kind); }
  float* ptr(std::vector<std::vector<float>>& v, const std::string& kind) {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].kind == kind) return v[i].data();
    }
    return nullptr;
  }
  LayerWeights layer(std::vector<std::vector<float>>& v, bool parallel) {
    LayerWeights w;
    w.ln1_w = ptr(v, parallel ? "ln_w" : "ln1_w");
    w.ln1_b = ptr(v, parallel ? "ln_b" : "ln1_b");
    w.qkv_w = ptr(v, "qkv_w");
    w.qkv_b = ptr(v, "qkv_b");
    w.proj_w = ptr(v, "proj_w");
    w.proj_b = ptr(v, "proj_b");
    w.ln2_w = ptr(v, "ln2_w");
    w.ln2_b = ptr(v, "ln2_b");
    w.fc1_w = ptr(v, "fc1_w");
    w.fc1_b = ptr(v, "fc1_b");
    w.fc2_w = ptr(v, "fc2_w");
    w.fc2_b = ptr(v, "fc2_b");
    return w;
  }
};

struct LayerCase {
  const char* name;
  model::BlockKind block;
  model::MlpKind mlp;
  int kv_heads;
  int window;
};

class LayerGradCheck : public GradCheckTest, public ::testing::WithParamInterface<LayerCase> {};

TEST_P(LayerGradCheck, InputAndEveryParameter) {
  const LayerCase c = GetParam();
  const model::ModelConfig m = tiny_model(c.block, c.mlp, c.kv_heads, c.window);
  const int B = 2;
  const ModelDims d = ModelDims::make(m, B, 1, false);
  const TransformerLayer layer(d, 0);
  HostParams hp(layer_tensor_specs(m, 0), 11);
  const bool parallel = c.block == model::BlockKind::kParallel;
  const LayerWeights w = hp.layer(hp.values, parallel);
  const LayerWeights g = hp.layer(hp.grads, parallel);

  std::vector<float> stash(layer.stash_floats()), scratch(layer.scratch_floats());
  const TransformerLayer::Stash st = layer.stash_at(stash.data());
  const size_t act = size_t(d.Nl()) * d.C;
  std::vector<float> x = randn(act, 3), out(act);
  const auto r = randn(act, 4);
  LayerContext ctx;
  ctx.device = &dev;
  auto loss = [&] {
    std::copy(x.begin(), x.end(), st.x);
    layer.forward(ctx, w, st, scratch.data(), out.data());
    return dot(r, out.data());
  };
  loss();
  std::vector<float> dx(act);
  layer.backward(ctx, w, g, st, scratch.data(), r.data(), dx.data());

  std::printf("%s\n", c.name);
  check_tensor("x", x.data(), dx.data(), act, loss, 24);
  for (size_t i = 0; i < hp.specs.size(); ++i) {
    check_tensor(hp.specs[i].kind, hp.values[i].data(), hp.grads[i].data(), hp.values[i].size(),
                 loss);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllVariants, LayerGradCheck,
    ::testing::Values(
        LayerCase{"sequential gelu full", model::BlockKind::kSequential, model::MlpKind::kGelu, 4, 0},
        LayerCase{"sequential swiglu window3 gqa", model::BlockKind::kSequential,
                  model::MlpKind::kSwiGlu, 2, 3},
        LayerCase{"parallel gelu window2", model::BlockKind::kParallel, model::MlpKind::kGelu, 4, 2},
        LayerCase{"parallel swiglu full gqa", model::BlockKind::kParallel, model::MlpKind::kSwiGlu,
                  1, 0}),
    [](const ::testing::TestParamInfo<LayerCase>& info) {
      std::string s = info.param.name;
      for (char& ch : s) if (ch == ' ') ch = '_';
      return s;
    });

TEST_F(GradCheckTest, Embedding) {
  const model::ModelConfig m =
      tiny_model(model::BlockKind::kSequential, model::MlpKind::kGelu, 4, 0);
  const int B = 2;
  const ModelDims d = ModelDims::make(m, B, 1, false);
  const Embedding emb(d);
  HostParams hp(embedding_tensor_specs(m), 5);
  const EmbeddingWeights w{hp.value("wte"), hp.value("wpe")};
  const EmbeddingWeights g{hp.grad("wte"), hp.grad("wpe")};
  std::vector<int32_t> tokens(size_t(d.N()));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7) % 5);  // repeats
  const size_t act = size_t(d.Nl()) * d.C;
  std::vector<float> out(act);
  const auto r = randn(act, 6);
  LayerContext ctx;
  ctx.device = &dev;
  auto loss = [&] {
    emb.forward(ctx, w, tokens.data(), nullptr, out.data());
    return dot(r, out.data());
  };
  loss();
  emb.backward(ctx, g, tokens.data(), nullptr, r.data());
  // Only rows of used tokens have gradients: check rows 0..4 of wte.
  check_tensor("wte (used rows)", w.wte, g.wte, size_t(5) * d.C, loss, 24);
  check_tensor("wpe", w.wpe, g.wpe, size_t(d.T) * d.C, loss, 24);
}

TEST_F(GradCheckTest, OutputHead) {
  const model::ModelConfig m =
      tiny_model(model::BlockKind::kSequential, model::MlpKind::kGelu, 4, 0);
  const int B = 2;
  const ModelDims d = ModelDims::make(m, B, 1, false);
  const OutputHead head(d, m.layers);
  HostParams hp(head_tensor_specs(m), 7);
  const HeadWeights w{hp.value("ln_f_w"), hp.value("ln_f_b"), hp.value("out_w")};
  const HeadWeights g{hp.grad("ln_f_w"), hp.grad("ln_f_b"), hp.grad("out_w")};
  std::vector<float> stash(head.stash_floats()), scratch(head.scratch_floats());
  const OutputHead::Stash st = head.stash_at(stash.data());
  for (int i = 0; i < d.N(); ++i) st.targets[i] = (i * 5 + 1) % d.V;
  const size_t act = size_t(d.Nl()) * d.C;
  std::vector<float> x = randn(act, 8);
  LayerContext ctx;
  ctx.device = &dev;
  const float scale = 3.0f;
  auto loss = [&] {
    std::copy(x.begin(), x.end(), st.x);
    return scale * double(head.forward(ctx, w, st, scratch.data()));
  };
  loss();
  std::vector<float> dx(act);
  head.backward(ctx, w, g, st, scratch.data(), scale, dx.data());
  check_tensor("head x", x.data(), dx.data(), act, loss, 24);
  check_tensor("ln_f_w", w.ln_f_w, g.ln_f_w, size_t(d.C), loss);
  check_tensor("ln_f_b", w.ln_f_b, g.ln_f_b, size_t(d.C), loss);
  check_tensor("out_w", w.out_w, g.out_w, size_t(d.V) * d.C, loss, 24);
}

// ---- the whole chunk ------------------------------------------------------------------

TEST_F(GradCheckTest, WholeChunkBothBlockKinds) {
  for (model::BlockKind block : {model::BlockKind::kSequential, model::BlockKind::kParallel}) {
    const model::ModelConfig m = tiny_model(block, model::MlpKind::kGelu, 2, 3);
    const int B = 2;
    ModelChunk chunk(ChunkConfig::whole_model(m, B), dev, nullptr);
    // Larger weights than the 0.02 init so every gradient is well above the
    // finite-difference noise.
    const auto noise = randn(chunk.num_params(), 9, 0.15f);
    for (size_t i = 0; i < chunk.num_params(); ++i) chunk.params()[i] += noise[i];
    std::vector<int32_t> tokens(size_t(B) * m.seq_len), labels(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = int32_t((i * 5 + 3) % m.vocab);
      labels[i] = int32_t((i * 11 + 1) % m.vocab);
    }
    const MicroBatchData data{tokens.data(), labels.data()};
    auto loss = [&] {
      const double l = chunk.forward(0, nullptr, data, nullptr);
      chunk.backward(0, nullptr, nullptr);  // frees the stash; gradients are reset below
      return l;
    };
    chunk.zero_grad();
    chunk.forward(0, nullptr, data, nullptr);
    chunk.backward(0, nullptr, nullptr);
    const std::vector<float> grads(chunk.grads(), chunk.grads() + chunk.num_params());
    std::printf("whole chunk, %s block\n", model::to_string(block));
    for (const ParamTensor& t : chunk.tensors()) {
      if (t.spec.kind == "wte") continue;  // rows of unused tokens are 0; covered above
      check_tensor(t.spec.name, chunk.params() + t.offset, grads.data() + t.offset, t.numel, loss,
                   6, kChunkTolerance);
    }
  }
}

}  // namespace
}  // namespace megascale::engine
