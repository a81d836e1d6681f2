// tests/engine/microbench_test.cc: the engine's microbenchmarks (a tiny plan,
// on the threads backend) produce a valid cpu profile, and every op the
// engine's layers report is an operator the simulator times with the engine's
// kernel calls (model/engine_ops.h), so the two stay in step.
#include "engine/microbench.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <string>

#include "engine/comm_threads.h"
#include "engine/device_cpu.h"
#include "engine/model_chunk.h"
#include "model/engine_ops.h"
#include "model/profile.h"

namespace megascale::engine {
namespace {

model::ModelConfig tiny_model(model::BlockKind block, model::MlpKind mlp) {
  model::ModelConfig m;
  m.name = "tiny";
  m.layers = 2;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 2;
  m.seq_len = 16;
  m.vocab = 64;
  m.ffn_hidden = 64;
  m.block = block;
  m.mlp = mlp;
  return m;
}

MicroPlan tiny_plan() {
  MicroPlan p;
  p.label = "test";
  for (const char* layout : {"nt", "tn", "nn"}) {
    for (int64_t d : {16, 24, 32}) p.gemms.push_back({layout, d, d, d});
  }
  p.attention_seqs = {16, 32};
  p.attention_head_dims = {8, 16};
  p.kernel_elements = {256, 1024};
  p.collective_bytes = {64, 4096};
  p.repeats = 2;
  p.min_point_s = 0;
  p.insitu_iterations = 1;
  InsituModel im;
  im.name = "tiny";
  im.model = tiny_model(model::BlockKind::kSequential, model::MlpKind::kGelu);
  im.micro_batch = 1;
  im.microbatches = 2;
  p.insitu = {im};
  return p;
}

TEST(Microbench, ATinyPlanMakesAValidCpuProfile) {
  const MicroPlan plan = tiny_plan();
  MicroResult r;
  run_on_threads(1, [&](Comm& world) { r = run_microbenchmarks(cpu_device(), world, plan); });
  EXPECT_EQ(r.gemm.size(), 9u + 6u);  // every shape cold, the octave ones (16, 32) warm too
  EXPECT_FALSE(r.attention.empty());
  EXPECT_FALSE(r.insitu.empty());
  const model::GpuProfile p = micro_profile(r, plan, "test-host", "2026-12-01");
  // What is written reads back, with provenance, the in-situ fit and every kernel.
  const model::GpuProfile back = model::parse_profile(model::write_profile(p), "micro.toml");
  EXPECT_TRUE(back.is_cpu());
  EXPECT_GT(back.peak_tflops, 0.0);
  EXPECT_EQ(back.provenance.at("peak_tflops").host, "test-host");
  EXPECT_EQ(back.provenance.at("tables.insitu").source, "fitted");
  EXPECT_EQ(back.provenance.at("tables.insitu").runs, std::vector<std::string>{"tiny"});
  EXPECT_TRUE(back.measured()->insitu.value("gemm", 1).has_value());
  for (const std::string& k : model::kCpuKernels) EXPECT_TRUE(back.measured()->kernels.has(k)) << k;
}

TEST(Microbench, TwoRanksMeasureTogetherAndTheirCollectives) {
  MicroPlan plan = tiny_plan();
  plan.insitu.clear();
  MicroResult r;
  run_on_threads(2, [&](Comm& world) {
    MicroResult mine = run_microbenchmarks(cpu_device(), world, plan);
    if (world.rank() == 0) r = std::move(mine);
  });
  std::set<int> ranks;
  for (const model::GemmPoint& g : r.gemm) ranks.insert(g.ranks);
  EXPECT_EQ(ranks, (std::set<int>{1, 2}));
  std::set<std::string> ops;
  for (const model::CollectivePoint& c : r.collectives) {
    ops.insert(c.op);
    EXPECT_EQ(c.ranks, 2);
    EXPECT_GT(c.seconds, 0.0);
  }
  EXPECT_EQ(ops, (std::set<std::string>{"all_gather", "all_reduce", "reduce_scatter", "sendrecv"}));
}

// Records the name of every compute op the engine reports.
class Names : public OpObserver {
 public:
  void op_begin(const OpEvent&) override {}
  void op_end(const OpEvent& e) override {
    if (e.kind != model::LayerStepKind::kCompute) return;
    std::lock_guard<std::mutex> lock(mu);
    names.insert(e.name);
  }
  std::mutex mu;
  std::set<std::string> names;
};

TEST(Microbench, EveryEngineOpIsAnOperatorTheSimulatorTimes) {
  for (model::BlockKind block : {model::BlockKind::kSequential, model::BlockKind::kParallel}) {
    for (model::MlpKind mlp : {model::MlpKind::kGelu, model::MlpKind::kSwiGlu}) {
      for (int tp : {1, 2}) {
        const model::ModelConfig m = tiny_model(block, mlp);
        Names obs;
        run_on_threads(tp, [&](Comm& world) {
          ModelChunk chunk(ChunkConfig::whole_model(m, 1, tp, /*sequence_parallel=*/tp > 1), cpu_device(),
                           tp > 1 ? &world : nullptr, &obs);
          std::vector<int32_t> ids(m.seq_len, 3), labels(m.seq_len, 5);
          MicroBatchData data{ids.data(), labels.data()};
          chunk.forward(0, nullptr, data, nullptr);
          chunk.backward(0, nullptr, nullptr, 1.0f);
        });
        model::Scenario s;
        s.model = m;
        s.parallel.tp = tp;
        s.parallel.sequence_parallel = tp > 1;
        s.parallel.global_batch = 1;
        s.hardware.gpu = "cpu";
        s.cluster.gpus = tp;
        model::GpuProfile kind_only;
        kind_only.kind = "cpu";
        std::vector<model::OperatorCost> ops = model::job_layer_operators(s, kind_only);
        for (auto&& extra : {model::job_embedding_operators(s, kind_only), model::job_output_operators(s, kind_only)}) {
          ops.insert(ops.end(), extra.begin(), extra.end());
        }
        ASSERT_FALSE(obs.names.empty());
        for (const std::string& name : obs.names) {
          EXPECT_GE(model::find_operator(ops, name), 0)
              << "the engine reports '" << name << "', which the simulator does not time (block "
              << model::to_string(block) << ", " << model::to_string(mlp) << ", tp " << tp << ")";
        }
      }
    }
  }
}

}  // namespace
}  // namespace megascale::engine
