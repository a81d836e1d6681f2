// tests/engine/trainer_test.cc: the Trainer (engine/trainer.h) in one process
// on the threads backend (make_thread_comms(1) for world and node): it learns
// the synthetic corpus, reports sane per-step figures, writes a trace, resumes
// from its own checkpoints, and refuses bad options before doing anything.
//
// The multi-process properties (bitwise resume with PP x DP x VPP, corrupt and
// partial checkpoints refused on every rank, the interleaved order in the
// trace) are in tests/engine_mpi/trainer_mpi_test.cc.
#include "engine/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/comm_threads.h"
#include "engine/dataset.h"
#include "engine/trace.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;

// 2 layers, hidden 32, 4 heads, seq 16, vocab 64; global batch 8 as 4
// micro-batches of 2 (one process: TP = PP = DP = 1).
model::Scenario tiny_scenario() {
  model::Scenario s;
  s.name = "trainer-test";
  s.model.name = "tiny";
  s.model.layers = 2;
  s.model.hidden = 32;
  s.model.heads = 4;
  s.model.kv_heads = 4;
  s.model.seq_len = 16;
  s.model.vocab = 64;
  s.model.ffn_hidden = 128;
  s.parallel.micro_batch = 2;
  s.parallel.global_batch = 8;
  s.parallel.zero_stage = 1;
  s.hardware.gpu = "cpu";
  s.cluster.gpus = 1;
  s.optimizations.optimizer = model::OptimizerKind::kAdam;
  return s;
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "megascale-trainer-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    world_ = make_thread_comms(1);
    node_ = make_thread_comms(1);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  TrainOptions options(int steps) const {
    TrainOptions o;
    o.steps = steps;
    o.learning_rate = 1e-2;
    o.seed = 7;
    o.work_dir = (dir_ / "work").string();
    o.job_name = "trainer-test-" + std::to_string(getpid());
    o.optimizer.weight_decay = 0.0;
    o.optimizer.max_grad_norm = 1.0;
    return o;
  }

  std::vector<StepReport> train(const model::Scenario& s, const TrainOptions& o,
                                int64_t* start_step = nullptr) {
    Trainer trainer(s, o, *world_[0], *node_[0]);
    if (start_step != nullptr) *start_step = trainer.start_step();
    std::vector<StepReport> reports;
    trainer.run([&](const StepReport& r) { reports.push_back(r); });
    return reports;
  }

  fs::path dir_;
  std::vector<std::unique_ptr<Comm>> world_, node_;
};

double mean(const std::vector<StepReport>& r, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += r[i].loss;
  return sum / static_cast<double>(to - from);
}

TEST_F(TrainerTest, LossFallsOverThirtyStepsOnTheSyntheticCorpus) {
  const model::Scenario s = tiny_scenario();
  const std::vector<StepReport> r = train(s, options(30));
  ASSERT_EQ(r.size(), 30u);
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].step, static_cast<int64_t>(i) + 1);
    EXPECT_TRUE(std::isfinite(r[i].loss)) << "step " << i + 1;
    EXPECT_GT(r[i].step_time_s, 0.0);
    EXPECT_NEAR(r[i].tokens_per_s * r[i].step_time_s, 8.0 * 16, 1e-3 * 8 * 16);
    EXPECT_GT(r[i].mfu, 0.0);
    EXPECT_GT(r[i].grad_norm, 0.0);
  }
  // An untrained model scores about ln(64) = 4.16 nats; the chain's entropy is
  // ~0.8 (dataset.h). After 30 steps the loss must have clearly moved towards it.
  EXPECT_NEAR(r.front().loss, std::log(64.0), 0.5);
  const double first = mean(r, 0, 5), last = mean(r, 25, 30);
  EXPECT_LT(last, first - 1.0) << "first five steps " << first << ", last five " << last;
  EXPECT_GT(last, synthetic_corpus_entropy_nats() - 0.1);
  // The built-in corpus was made under work_dir.
  EXPECT_FALSE(fs::is_empty(dir_ / "work"));
}

TEST_F(TrainerTest, SameSeedSameLosses) {
  const model::Scenario s = tiny_scenario();
  const std::vector<StepReport> a = train(s, options(4));
  const std::vector<StepReport> b = train(s, options(4));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].loss, b[i].loss) << "step " << i + 1;
}

TEST_F(TrainerTest, ResumesFromItsCheckpointWithIdenticalLosses) {
  const model::Scenario s = tiny_scenario();
  TrainOptions o = options(6);
  o.checkpoint_dir = (dir_ / "ckpt").string();
  o.checkpoint_every = 4;
  int64_t start = -1;
  const std::vector<StepReport> a = train(s, o, &start);
  EXPECT_EQ(start, 0);
  ASSERT_EQ(latest_checkpoint(o.checkpoint_dir), 4);
  const std::vector<StepReport> b = train(s, o, &start);  // resume = true
  EXPECT_EQ(start, 4);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].step, 5);
  EXPECT_EQ(b[0].loss, a[4].loss);
  EXPECT_EQ(b[1].loss, a[5].loss);
  // resume = false ignores the checkpoint and starts over.
  o.resume = false;
  o.checkpoint_every = 0;
  const std::vector<StepReport> c = train(s, o, &start);
  EXPECT_EQ(start, 0);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].loss, a[0].loss);
}

// Two-stage checkpoints: each one is reported once, complete (its marker on
// disk) when reported, with the step's stall and the persist measured apart.
TEST_F(TrainerTest, ReportsEveryCheckpointOnceCompleteWithStallAndPersist) {
  const model::Scenario s = tiny_scenario();
  TrainOptions o = options(7);
  o.checkpoint_dir = (dir_ / "ckpt").string();
  o.checkpoint_every = 2;
  struct Seen {
    int64_t step;
    double stall_s, persist_s;
    uint64_t bytes;
    bool marker;
  };
  std::vector<Seen> seen;
  o.on_checkpoint = [&](int64_t step, double stall_s, double persist_s, uint64_t bytes) {
    seen.push_back({step, stall_s, persist_s, bytes, fs::exists(marker_path(o.checkpoint_dir, step))});
  };
  std::vector<int64_t> begun;
  o.on_step_begin = [&](int64_t step) { begun.push_back(step); };
  // The end of each save's stall, before the next step begins.
  std::vector<std::pair<int64_t, size_t>> saved;  // (step, steps begun by then)
  o.on_save_end = [&](int64_t step) { saved.emplace_back(step, begun.size()); };
  train(s, o);
  EXPECT_EQ(saved, (std::vector<std::pair<int64_t, size_t>>{{2, 2}, {4, 4}, {6, 6}}));
  ASSERT_EQ(seen.size(), 3u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].step, 2 * static_cast<int64_t>(i) + 2);
    EXPECT_TRUE(seen[i].marker) << "step " << seen[i].step << " reported before its marker";
    EXPECT_GT(seen[i].stall_s, 0.0);
    EXPECT_GT(seen[i].persist_s, 0.0);
    EXPECT_GT(seen[i].bytes, 0u);
  }
  EXPECT_EQ(latest_checkpoint(o.checkpoint_dir), 6);
  EXPECT_TRUE(partial_checkpoints(o.checkpoint_dir).empty());
  EXPECT_EQ(begun, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
}

TEST_F(TrainerTest, WritesTheTraceFiles) {
  const model::Scenario s = tiny_scenario();
  TrainOptions o = options(2);
  o.trace = (dir_ / "trace").string();
  train(s, o);
  ASSERT_TRUE(fs::exists(o.trace + ".json"));
  const std::vector<TraceEvent> events = read_trace_csv(o.trace + ".csv");
  int forwards = 0, backwards = 0, steps = 0;
  for (const TraceEvent& e : events) {
    EXPECT_EQ(e.rank, 0);
    EXPECT_LE(e.start_us, e.end_us);
    if (e.stream != model::Stream::kCompute) continue;
    forwards += e.kind == "forward";
    backwards += e.kind == "backward";
    steps += e.kind == "optimizer_step";
  }
  EXPECT_EQ(forwards, 2 * 4);  // 2 steps x 4 micro-batches
  EXPECT_EQ(backwards, 2 * 4);
  EXPECT_EQ(steps, 2);
}

TEST_F(TrainerTest, RefusesBadOptions) {
  const model::Scenario s = tiny_scenario();
  auto expect_invalid = [&](const TrainOptions& o, const std::string& field) {
    try {
      Trainer t(s, o, *world_[0], *node_[0]);
      ADD_FAILURE() << "expected std::invalid_argument naming " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  TrainOptions o = options(3);
  o.steps = -1;
  expect_invalid(o, "TrainOptions.steps");
  o = options(3);
  o.learning_rate = 0;
  expect_invalid(o, "TrainOptions.learning_rate");
  o.learning_rate = std::nan("");
  expect_invalid(o, "TrainOptions.learning_rate");
  o = options(3);
  o.checkpoint_every = -2;
  expect_invalid(o, "TrainOptions.checkpoint_every");
  o.checkpoint_every = 2;  // without checkpoint_dir
  expect_invalid(o, "TrainOptions.checkpoint_every");
  o = options(3);
  o.work_dir.clear();
  expect_invalid(o, "TrainOptions.work_dir");
  o = options(3);
  o.optimizer.weight_decay = -0.1;
  expect_invalid(o, "TrainOptions.optimizer.weight_decay");
  o = options(3);
  o.optimizer.max_grad_norm = INFINITY;
  expect_invalid(o, "TrainOptions.optimizer.max_grad_norm");
  o = options(3);
  o.job_name = "bad/name";
  expect_invalid(o, "job_name");

  // Layouts: a world that does not match tp*pp*dp, a batch that does not split.
  model::Scenario bad = tiny_scenario();
  bad.parallel.tp = 2;
  EXPECT_THROW(Trainer(bad, options(3), *world_[0], *node_[0]), std::invalid_argument);
  bad = tiny_scenario();
  bad.parallel.global_batch = 7;
  try {
    Trainer t(bad, options(3), *world_[0], *node_[0]);
    ADD_FAILURE() << "global_batch 7 with micro_batch 2 must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.global_batch"), std::string::npos) << e.what();
  }
  // Recomputation is a simulator switch the engine does not implement: refused,
  // not silently ignored.
  bad = tiny_scenario();
  bad.parallel.recompute = model::Recompute::kSelective;
  try {
    Trainer t(bad, options(3), *world_[0], *node_[0]);
    ADD_FAILURE() << "recompute = selective must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.recompute"), std::string::npos) << e.what();
  }
}

TEST_F(TrainerTest, RefusesBadFiles) {
  const model::Scenario s = tiny_scenario();
  // A dataset that is not one.
  TrainOptions o = options(3);
  o.data = (dir_ / "garbage.msds").string();
  std::ofstream(o.data) << "not a dataset";
  try {
    Trainer t(s, o, *world_[0], *node_[0]);
    ADD_FAILURE() << "a corrupt dataset must be refused";
  } catch (const DatasetError& e) {
    EXPECT_EQ(e.file(), o.data);
  }
  // A checkpoint of another model in checkpoint_dir.
  o = options(2);
  o.checkpoint_dir = (dir_ / "ckpt").string();
  o.checkpoint_every = 2;
  model::Scenario other = tiny_scenario();
  other.model.hidden = 64;
  train(other, o);
  ASSERT_EQ(latest_checkpoint(o.checkpoint_dir), 2);
  try {
    Trainer t(s, o, *world_[0], *node_[0]);
    ADD_FAILURE() << "a checkpoint of another model must be refused";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.check(), "layout mismatch") << e.what();
    EXPECT_EQ(e.file(), shard_path(o.checkpoint_dir, 2, 0));
    EXPECT_EQ(e.rank(), 0);
  }
}

}  // namespace
}  // namespace megascale::engine
