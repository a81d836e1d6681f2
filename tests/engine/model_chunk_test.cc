// Tests of engine/model_chunk.h: pipeline splits reproduce the single chunk
// bit for bit, micro-batches in flight, determinism, the flat buffer layout,
// initialisation, errors, and that a few SGD steps learn.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm_threads.h"
#include "engine/device_cpu.h"
#include "engine/model_chunk.h"
#include "model/megatron_layout.h"

namespace megascale::engine {
namespace {

constexpr int kBatch = 2;

model::ModelConfig small_model(model::BlockKind block = model::BlockKind::kSequential,
                               model::MlpKind mlp = model::MlpKind::kGelu, int window = 0) {
  model::ModelConfig m;
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.seq_len = 32;
  m.vocab = 96;
  m.ffn_hidden = 256;
  m.mlp = mlp;
  m.block = block;
  m.attention_window = window;
  return m;
}

std::vector<int32_t> ids(int mb, int salt, int vocab = 96) {
  std::vector<int32_t> v(size_t(kBatch) * 32);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 29 + mb * 13 + salt * 3 + i / 5) % vocab);
  return v;
}

ChunkConfig part(const model::ModelConfig& m, int first, int n, bool emb, bool head, int tp = 1,
                 bool sp = false) {
  ChunkConfig c = ChunkConfig::whole_model(m, kBatch, tp, sp);
  c.first_layer = first;
  c.num_layers = n;
  c.has_embedding = emb;
  c.has_head = head;
  return c;
}

std::map<std::string, std::vector<float>> named(const ModelChunk& c, bool grads) {
  std::map<std::string, std::vector<float>> out;
  const float* base = grads ? c.grads() : c.params();
  for (const ParamTensor& t : c.tensors()) {
    out[t.spec.name].assign(base + t.offset, base + t.offset + t.numel);
  }
  return out;
}

// Runs M micro-batches through a single chunk or hand-chained chunks (A -> B ->
// ...), F0 F1 .. then B0 B1 .. with loss_scale 1/M; returns losses, fills grads.
struct Pipeline {
  std::vector<ModelChunk*> stages;

  std::vector<float> step(int M) {
    for (ModelChunk* s : stages) s->zero_grad();
    const size_t n = stages.size();
    const size_t act = stages[0]->activation_numel();
    // acts[mb][k]: the activation stage k hands to stage k + 1.
    std::vector<std::vector<std::vector<float>>> acts(
        M, std::vector<std::vector<float>>(n, std::vector<float>(act)));
    std::vector<std::vector<int32_t>> tok, lab;
    for (int mb = 0; mb < M; ++mb) {
      tok.push_back(ids(mb, 1));
      lab.push_back(ids(mb, 2));
    }
    std::vector<float> losses;
    for (int mb = 0; mb < M; ++mb) {
      if (n == 1) {
        losses.push_back(stages[0]->forward(mb, nullptr, {tok[mb].data(), lab[mb].data()}, nullptr));
        continue;
      }
      stages[0]->forward(mb, nullptr, {tok[mb].data(), nullptr}, acts[mb][0].data());
      for (size_t k = 1; k + 1 < n; ++k) stages[k]->forward(mb, acts[mb][k - 1].data(), {}, acts[mb][k].data());
      losses.push_back(stages[n - 1]->forward(mb, acts[mb][n - 2].data(), {nullptr, lab[mb].data()}, nullptr));
    }
    for (int mb = 0; mb < M; ++mb) {
      if (n == 1) {
        stages[0]->backward(mb, nullptr, nullptr, 1.0f / M);
        continue;
      }
      std::vector<std::vector<float>> grad(n, std::vector<float>(act));
      stages[n - 1]->backward(mb, nullptr, grad[n - 2].data(), 1.0f / M);
      for (size_t k = n - 2; k >= 1; --k) stages[k]->backward(mb, grad[k].data(), grad[k - 1].data());
      stages[0]->backward(mb, grad[0].data(), nullptr);
    }
    for (ModelChunk* s : stages) s->sync_sequence_parallel_grads();
    return losses;
  }
};

void expect_chain_is_exact(ModelChunk& whole, const std::vector<ModelChunk*>& chain) {
  int64_t params = 0;
  for (ModelChunk* c : chain) params += c->num_params();
  EXPECT_EQ(params, whole.num_params());
  const auto whole_params = named(whole, false);
  for (ModelChunk* c : chain) {
    for (const auto& [name, values] : named(*c, false)) {
      EXPECT_EQ(values, whole_params.at(name)) << name;  // init independent of PP
    }
  }
  Pipeline single{{&whole}};
  Pipeline split{chain};
  const std::vector<float> l1 = single.step(3);
  const std::vector<float> l2 = split.step(3);
  EXPECT_EQ(l1, l2);
  const auto g = named(whole, true);
  for (ModelChunk* c : chain) {
    for (const auto& [name, values] : named(*c, true)) EXPECT_EQ(values, g.at(name)) << name;
  }
}

// Every (pipeline rank, chunk) of `p`, chained in model order (virtual stage
// chunk * pp + rank), against the whole model.
void expect_layout_chain_is_exact(const model::ModelConfig& m, const model::ParallelConfig& p) {
  std::vector<std::unique_ptr<ModelChunk>> chunks;
  std::vector<ModelChunk*> chain;
  for (int c = 0; c < p.vpp; ++c) {
    for (int r = 0; r < p.pp; ++r) {
      chunks.push_back(std::make_unique<ModelChunk>(ChunkConfig::for_stage(m, p, r, c), cpu_device(), nullptr));
      chain.push_back(chunks.back().get());
    }
  }
  ModelChunk whole(part(m, 0, m.layers, true, true), cpu_device(), nullptr);
  expect_chain_is_exact(whole, chain);
}

void expect_split_is_exact(const model::ModelConfig& m, Comm* tp_comm, int tp, bool sp) {
  ModelChunk whole(part(m, 0, 4, true, true, tp, sp), cpu_device(), tp_comm);
  ModelChunk a(part(m, 0, 2, true, false, tp, sp), cpu_device(), tp_comm);
  ModelChunk b(part(m, 2, 2, false, true, tp, sp), cpu_device(), tp_comm);
  expect_chain_is_exact(whole, {&a, &b});
}

TEST(ModelChunkTest, TwoChunkSplitEqualsSingleChunkBitwise) {
  expect_split_is_exact(small_model(model::BlockKind::kSequential), nullptr, 1, false);
  expect_split_is_exact(small_model(model::BlockKind::kParallel, model::MlpKind::kSwiGlu, 7),
                        nullptr, 1, false);
}

TEST(ModelChunkTest, TwoChunkSplitWithTpAndSpEqualsSingleChunkBitwise) {
  run_on_threads(2, [&](Comm& world) {
    expect_split_is_exact(small_model(model::BlockKind::kSequential), &world, 2, true);
  });
}

TEST(ModelChunkTest, ForStageFollowsMegatronInterleavedLayout) {
  model::ModelConfig m = small_model();
  m.layers = 16;
  model::ParallelConfig p;
  p.pp = 4;
  p.vpp = 2;
  p.tp = 1;
  p.micro_batch = kBatch;
  // Chunk c of rank r: layers [c*L/V + r*L/(P*V), + L/(P*V)).
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 2; ++c) {
      const ChunkConfig cfg = ChunkConfig::for_stage(m, p, r, c);
      EXPECT_EQ(cfg.num_layers, 2);
      EXPECT_EQ(cfg.first_layer, c * 8 + r * 2);
      EXPECT_EQ(cfg.has_embedding, r == 0 && c == 0);
      EXPECT_EQ(cfg.has_head, r == 3 && c == 1);
      EXPECT_EQ(cfg.chunk_id, c * 4 + r);
      EXPECT_EQ(cfg.micro_batch, kBatch);
    }
  }
  p.vpp = 3;
  EXPECT_THROW(ChunkConfig::for_stage(m, p, 0, 0), std::runtime_error);  // 16 % 12 != 0
}

// Megatron-Core's uneven split (model/pipeline_layout.h) through for_stage: the
// embedding and layer 0 on rank 0, layers 1-3 and the head on rank 1; chained,
// they equal the single chunk exactly.
TEST(ModelChunkTest, UnevenStagesFromForStageEqualSingleChunkBitwise) {
  const model::ModelConfig m = small_model();
  model::ParallelConfig p;
  p.pp = 2;
  p.micro_batch = kBatch;
  p.first_stage_layers = 1;
  const ChunkConfig first = ChunkConfig::for_stage(m, p, 0, 0);
  const ChunkConfig last = ChunkConfig::for_stage(m, p, 1, 0);
  EXPECT_EQ(first.first_layer, 0);
  EXPECT_EQ(first.num_layers, 1);
  EXPECT_EQ(last.first_layer, 1);
  EXPECT_EQ(last.num_layers, 3);
  ModelChunk whole(part(m, 0, 4, true, true), cpu_device(), nullptr);
  ModelChunk a(first, cpu_device(), nullptr);
  ModelChunk b(last, cpu_device(), nullptr);
  expect_chain_is_exact(whole, {&a, &b});
  // A first stage of all four layers leaves none for the last.
  p.first_stage_layers = 4;
  EXPECT_THROW(ChunkConfig::for_stage(m, p, 0, 0), std::runtime_error);
}

// Meta's split with interleaving (model/pipeline_layout.h): 4 layers on 2
// stages x 2 chunks, the first stage holding 1 and the last 3. In model order:
// rank 0 chunk 0 holds only the embedding, rank 1 chunk 0 layers 0-1, rank 0
// chunk 1 layer 2, rank 1 chunk 1 layer 3 and the head; chained, the four equal
// the single chunk exactly.
TEST(ModelChunkTest, InterleavedUnevenStagesWithAnEmbeddingOnlyChunkAreExact) {
  const model::ModelConfig m = small_model();
  model::ParallelConfig p;
  p.pp = 2;
  p.vpp = 2;
  p.micro_batch = kBatch;
  p.first_stage_layers = 1;
  p.last_stage_layers = 3;
  const ChunkConfig r0c0 = ChunkConfig::for_stage(m, p, 0, 0);
  const ChunkConfig r1c0 = ChunkConfig::for_stage(m, p, 1, 0);
  const ChunkConfig r0c1 = ChunkConfig::for_stage(m, p, 0, 1);
  const ChunkConfig r1c1 = ChunkConfig::for_stage(m, p, 1, 1);
  EXPECT_EQ(r0c0.num_layers, 0);
  EXPECT_TRUE(r0c0.has_embedding);
  EXPECT_EQ(r1c0.first_layer, 0);
  EXPECT_EQ(r1c0.num_layers, 2);
  EXPECT_EQ(r0c1.first_layer, 2);
  EXPECT_EQ(r0c1.num_layers, 1);
  EXPECT_EQ(r1c1.first_layer, 3);
  EXPECT_EQ(r1c1.num_layers, 1);
  EXPECT_TRUE(r1c1.has_head);
  expect_layout_chain_is_exact(m, p);
}

// Megatron-Core's free-form layout (model/megatron_layout.h) "Et||tt|tL": rank
// 1's first chunk holds no layer at all, in the middle of the model; chained,
// the four chunks still equal the single chunk exactly.
TEST(ModelChunkTest, FreeFormLayoutWithAnEmptyMiddleChunkIsExact) {
  const model::ModelConfig m = small_model();
  model::ParallelConfig p;
  p.pp = 2;
  p.vpp = 2;
  p.micro_batch = kBatch;
  p.pipeline_layout = "Et||tt|tL";
  p.pipeline_chunk_layers = std::make_shared<const std::vector<int>>(model::parse_megatron_layout("Et||tt|tL", 4));
  const ChunkConfig r0c0 = ChunkConfig::for_stage(m, p, 0, 0);
  const ChunkConfig r1c0 = ChunkConfig::for_stage(m, p, 1, 0);
  const ChunkConfig r0c1 = ChunkConfig::for_stage(m, p, 0, 1);
  const ChunkConfig r1c1 = ChunkConfig::for_stage(m, p, 1, 1);
  EXPECT_EQ(r0c0.num_layers, 1);
  EXPECT_EQ(r1c0.num_layers, 0);
  EXPECT_FALSE(r1c0.has_embedding);
  EXPECT_FALSE(r1c0.has_head);
  EXPECT_EQ(r0c1.first_layer, 1);
  EXPECT_EQ(r0c1.num_layers, 2);
  EXPECT_EQ(r1c1.first_layer, 3);
  EXPECT_EQ(r1c1.num_layers, 1);
  expect_layout_chain_is_exact(m, p);
  // A layout for other layers is refused.
  p.pipeline_chunk_layers = std::make_shared<const std::vector<int>>(std::vector<int>{1, 0, 2, 2});
  EXPECT_THROW(ChunkConfig::for_stage(m, p, 0, 0), std::runtime_error);
}

TEST(ModelChunkTest, MicroBatchesInFlightAndOrder) {
  const model::ModelConfig m = small_model();
  ModelChunk c1(ChunkConfig::whole_model(m, kBatch), cpu_device(), nullptr);
  ModelChunk c2(ChunkConfig::whole_model(m, kBatch), cpu_device(), nullptr);
  std::vector<std::vector<int32_t>> tok, lab;
  for (int mb = 0; mb < 3; ++mb) {
    tok.push_back(ids(mb, 1));
    lab.push_back(ids(mb, 2));
  }
  // c1: F0 F1 F2 B0 B1 B2 (three stashes alive); c2: F0 B0 F1 B1 F2 B2.
  std::vector<float> l1, l2;
  for (int mb = 0; mb < 3; ++mb) {
    l1.push_back(c1.forward(mb, nullptr, {tok[mb].data(), lab[mb].data()}, nullptr));
    EXPECT_EQ(c1.in_flight(), mb + 1);
  }
  for (int mb = 0; mb < 3; ++mb) c1.backward(mb, nullptr, nullptr);
  EXPECT_EQ(c1.in_flight(), 0);
  for (int mb = 0; mb < 3; ++mb) {
    l2.push_back(c2.forward(mb, nullptr, {tok[mb].data(), lab[mb].data()}, nullptr));
    c2.backward(mb, nullptr, nullptr);
  }
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(named(c1, true), named(c2, true));
  // Micro-batch ids are labels, not positions: any order of backwards works.
  c1.zero_grad();
  c1.forward(7, nullptr, {tok[0].data(), lab[0].data()}, nullptr);
  c1.forward(3, nullptr, {tok[1].data(), lab[1].data()}, nullptr);
  c1.backward(3, nullptr, nullptr);
  c1.backward(7, nullptr, nullptr);
  EXPECT_EQ(c1.in_flight(), 0);
}

TEST(ModelChunkTest, DeterministicRunToRun) {
  const model::ModelConfig m = small_model(model::BlockKind::kParallel);
  ModelChunk a(ChunkConfig::whole_model(m, kBatch), cpu_device(), nullptr);
  ModelChunk b(ChunkConfig::whole_model(m, kBatch), cpu_device(), nullptr);
  EXPECT_EQ(named(a, false), named(b, false));
  Pipeline pa{{&a}}, pb{{&b}};
  const auto la = pa.step(2);
  EXPECT_EQ(la, pb.step(2));
  EXPECT_EQ(named(a, true), named(b, true));
  // The same chunk again after zero_grad: the same bits.
  const auto ga = named(a, true);
  EXPECT_EQ(pa.step(2), la);
  EXPECT_EQ(named(a, true), ga);
  // Another seed is another model.
  ChunkConfig other = ChunkConfig::whole_model(m, kBatch);
  other.seed = 99;
  ModelChunk c(other, cpu_device(), nullptr);
  EXPECT_NE(named(c, false).at("layers.0.qkv_w"), named(a, false).at("layers.0.qkv_w"));
}

TEST(ModelChunkTest, FlatBufferLayout) {
  const model::ModelConfig m = small_model();
  ChunkConfig cfg = ChunkConfig::whole_model(m, kBatch);
  cfg.pad_to_multiple = 1000;
  ModelChunk c(cfg, cpu_device(), nullptr);
  size_t at = 0;
  for (const ParamTensor& t : c.tensors()) {
    EXPECT_EQ(t.offset, at) << t.spec.name;
    EXPECT_EQ(t.numel, size_t(shape_numel(t.shape)));
    at += t.numel;
  }
  EXPECT_EQ(at, c.num_params());
  EXPECT_EQ(c.buffer_floats() % 1000, 0u);
  EXPECT_GE(c.buffer_floats(), c.num_params());
  // ModelConfig counts the output layer as tied to the embedding; here it is not.
  EXPECT_EQ(int64_t(c.num_params()), m.parameters() + int64_t(m.vocab) * m.hidden);
  ASSERT_NE(c.find("head.out_w"), nullptr);
  EXPECT_EQ(c.find("head.out_w")->shape, (Shape{96, 64}));
  EXPECT_EQ(c.find("nope"), nullptr);
  EXPECT_TRUE(c.find("layers.2.fc1_w")->spec.weight_decay());
  EXPECT_FALSE(c.find("layers.2.fc1_b")->spec.weight_decay());
  Tensor w = c.param(*c.find("layers.1.qkv_w"));
  EXPECT_EQ(w.shape(), (Shape{192, 64}));
  EXPECT_EQ(w.data(), c.params() + c.find("layers.1.qkv_w")->offset);

  // TP = 2 shards: column-parallel rows, row-parallel columns, vocab rows.
  run_on_threads(2, [&](Comm& world) {
    ModelChunk s(ChunkConfig::whole_model(m, kBatch, 2, true), cpu_device(), &world);
    EXPECT_EQ(s.find("layers.0.qkv_w")->shape, (Shape{96, 64}));
    EXPECT_EQ(s.find("layers.0.proj_w")->shape, (Shape{64, 32}));
    EXPECT_EQ(s.find("layers.0.fc1_w")->shape, (Shape{128, 64}));
    EXPECT_EQ(s.find("layers.0.fc2_w")->shape, (Shape{64, 128}));
    EXPECT_EQ(s.find("embedding.wte")->shape, (Shape{48, 64}));
    EXPECT_EQ(s.find("layers.0.ln1_w")->shape, (Shape{64}));
    EXPECT_TRUE(s.find("layers.0.ln1_w")->spec.sequence_parallel_grad);
    EXPECT_EQ(s.activation_numel(), size_t(16 * kBatch * 64));  // (T/2, B, C)
  });
}

TEST(ModelChunkTest, Gpt2Initialisation) {
  const model::ModelConfig m = small_model();
  ModelChunk c(ChunkConfig::whole_model(m, kBatch), cpu_device(), nullptr);
  auto stats = [&](const std::string& name) {
    const ParamTensor* t = c.find(name);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < t->numel; ++i) {
      const double v = c.params()[t->offset + i];
      s += v;
      s2 += v * v;
    }
    const double mean = s / double(t->numel);
    return std::make_pair(mean, std::sqrt(s2 / double(t->numel) - mean * mean));
  };
  EXPECT_NEAR(stats("embedding.wte").second, 0.02, 0.001);
  EXPECT_NEAR(stats("layers.0.qkv_w").second, 0.02, 0.001);
  EXPECT_NEAR(stats("layers.0.qkv_w").first, 0.0, 0.001);
  EXPECT_NEAR(stats("layers.3.fc2_w").second, 0.02 / std::sqrt(8.0), 0.0005);
  EXPECT_NEAR(stats("layers.3.proj_w").second, 0.02 / std::sqrt(8.0), 0.0005);
  EXPECT_EQ(stats("layers.1.ln2_w"), std::make_pair(1.0, 0.0));
  EXPECT_EQ(stats("layers.1.qkv_b"), std::make_pair(0.0, 0.0));
  // Two layers draw different values.
  const ParamTensor* a = c.find("layers.0.qkv_w");
  const ParamTensor* b = c.find("layers.1.qkv_w");
  EXPECT_NE(c.params()[a->offset], c.params()[b->offset]);
}

TEST(ModelChunkTest, MisuseIsReported) {
  const model::ModelConfig m = small_model();
  ModelChunk c(ChunkConfig::whole_model(m, kBatch), cpu_device(), nullptr);
  const auto tok = ids(0, 1), lab = ids(0, 2);
  EXPECT_THROW(c.backward(0, nullptr, nullptr), std::runtime_error);
  c.forward(0, nullptr, {tok.data(), lab.data()}, nullptr);
  EXPECT_THROW(c.forward(0, nullptr, {tok.data(), lab.data()}, nullptr), std::runtime_error);
  EXPECT_THROW(c.forward(1, nullptr, {nullptr, lab.data()}, nullptr), std::runtime_error);
  std::vector<int32_t> bad = tok;
  bad[5] = 96;
  EXPECT_THROW(c.forward(2, nullptr, {bad.data(), lab.data()}, nullptr), std::runtime_error);
  EXPECT_EQ(c.in_flight(), 1);

  ChunkConfig wrong = ChunkConfig::whole_model(m, kBatch);
  wrong.num_layers = 5;
  EXPECT_THROW(ModelChunk(wrong, cpu_device(), nullptr), std::runtime_error);
  EXPECT_THROW(ModelChunk(ChunkConfig::whole_model(m, kBatch, 3), cpu_device(), nullptr),
               std::runtime_error);  // tp 3 without a comm; 4 heads % 3
  model::ModelConfig gqa = m;
  gqa.kv_heads = 1;
  run_on_threads(2, [&](Comm& world) {
    EXPECT_THROW(ModelChunk(ChunkConfig::whole_model(gqa, kBatch, 2), cpu_device(), &world),
                 std::runtime_error);  // kv_heads % tp
  });
}

TEST(ModelChunkTest, SgdStepsLowerTheLoss) {
  const model::ModelConfig m = small_model(model::BlockKind::kParallel);
  ModelChunk c(ChunkConfig::whole_model(m, kBatch), cpu_device(), nullptr);
  Pipeline p{{&c}};
  const std::vector<float> first = p.step(1);
  float last = first[0];
  for (int step = 0; step < 8; ++step) {
    for (size_t i = 0; i < c.num_params(); ++i) c.params()[i] -= 0.5f * c.grads()[i];
    last = p.step(1)[0];
  }
  EXPECT_LT(last, first[0] - 0.5f) << "first " << first[0] << " last " << last;
}

}  // namespace
}  // namespace megascale::engine
