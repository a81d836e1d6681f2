// tests/engine/data_loader_test.cc: the node-shared prefetching loader with
// "node ranks" as threads (shared memory works within one process too).
#include "engine/data_loader.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "engine/comm.h"
#include "engine/comm_threads.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("loader_test_" + std::to_string(getpid()) + ".msds")).string();
    write_dataset(path_, make_synthetic_corpus(97, 3000, 11), 97);
  }
  void TearDown() override { fs::remove(path_); }
  DataLoaderOptions options(int dp, int dp_rank) const {
    DataLoaderOptions o;
    o.dataset_path = path_;
    o.job_name = "unit";
    o.seq_len = 8;
    o.vocab = 97;
    o.global_batch = 6;
    o.dp = dp;
    o.dp_rank = dp_rank;
    o.seed = 99;
    o.start_step = 3;
    o.timeout_s = 20;
    return o;
  }
  std::string path_;
};

TEST_F(LoaderTest, LoadBatchSplitsTheGlobalBatchByReplica) {
  const Dataset ds = Dataset::open(path_);
  const Batch whole = load_batch(ds, options(1, 0), 5);
  EXPECT_EQ(whole.samples, 6);
  std::vector<int32_t> joined;
  for (int d = 0; d < 3; ++d) {
    const Batch b = load_batch(ds, options(3, d), 5);
    EXPECT_EQ(b.samples, 2);
    EXPECT_EQ(b.first_sample, 2 * d);
    joined.insert(joined.end(), b.tokens.begin(), b.tokens.end());
    for (size_t i = 0; i + 1 < static_cast<size_t>(b.seq_len); ++i) EXPECT_EQ(b.labels[i], b.tokens[i + 1]);
  }
  EXPECT_EQ(joined, whole.tokens);  // every layout sees the same global batch
  EXPECT_NE(load_batch(ds, options(1, 0), 6).tokens, whole.tokens);
  EXPECT_THROW(load_batch(ds, options(4, 0), 5), std::invalid_argument);  // 6 % 4 != 0
}

TEST_F(LoaderTest, NodeRanksGetTheirReplicasBatchesAndOnlyTheReaderOpensTheFile) {
  const int n = 4, dp = 2, steps = 5;
  const Dataset ds = Dataset::open(path_);
  std::mutex mu;
  int opens = 0, readers = 0;
  run_on_threads(n, [&](Comm& node) {
    const int d = node.rank() % dp;  // ranks 0, 2 are replica 0; 1, 3 replica 1
    NodeDataLoader loader(node, options(dp, d));
    for (int s = 0; s < steps; ++s) {
      const Batch b = loader.next();
      const Batch want = load_batch(ds, options(dp, d), 3 + s);
      EXPECT_EQ(b.step, 3 + s);
      EXPECT_EQ(b.first_sample, want.first_sample);
      EXPECT_EQ(b.tokens, want.tokens);
      EXPECT_EQ(b.labels, want.labels);
    }
    std::lock_guard<std::mutex> lock(mu);
    opens += loader.dataset_opens();
    readers += loader.is_reader();
    if (loader.is_reader()) {
      EXPECT_GE(loader.batches_loaded(), steps);
    }
    EXPECT_FALSE(fs::exists("/dev/shm" + loader.shm_name())) << "segment name must be unlinked";
  });
  EXPECT_EQ(opens, 1);
  EXPECT_EQ(readers, 1);
}

TEST_F(LoaderTest, PrefetchFillsTheRingAheadAndNoFurther) {
  run_on_threads(2, [&](Comm& node) {
    auto o = options(1, 0);
    o.prefetch_depth = 3;
    NodeDataLoader loader(node, o);
    if (loader.is_reader()) {
      // Before anyone asks, the thread loads `depth` batches, then waits for slots.
      for (int i = 0; i < 2000 && loader.batches_loaded() < 3; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(loader.batches_loaded(), 3);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_EQ(loader.batches_loaded(), 3);
    }
    node.barrier();
    EXPECT_EQ(loader.next().step, 3);
    node.barrier();  // both released step 3: its slot is free for step 6
    if (loader.is_reader()) {
      for (int i = 0; i < 2000 && loader.batches_loaded() < 4; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(loader.batches_loaded(), 4);
    }
    for (int s = 4; s < 10; ++s) EXPECT_EQ(loader.next().step, s);
  });
}

TEST_F(LoaderTest, MissingDatasetFailsOnEveryRank) {
  std::mutex mu;
  int failures = 0;
  auto o = options(1, 0);
  o.dataset_path = path_ + ".missing";
  EXPECT_ANY_THROW(run_on_threads(2, [&](Comm& node) {
    try {
      NodeDataLoader loader(node, o);
    } catch (const std::exception&) {
      std::lock_guard<std::mutex> lock(mu);
      ++failures;
      throw;
    }
  }));
  EXPECT_EQ(failures, 2);
}

// A dataset whose vocabulary exceeds the model's is refused by the reader at
// start-up, as a DatasetError on every rank, not mid-run at its first token
// without an embedding row (the engine's check in model_chunk.cc).
TEST_F(LoaderTest, DatasetWithMoreTokensThanTheModelIsRefusedOnEveryRank) {
  std::mutex mu;
  std::vector<std::string> errors;
  auto o = options(1, 0);
  o.vocab = 96;  // the dataset's is 97
  EXPECT_ANY_THROW(run_on_threads(2, [&](Comm& node) {
    try {
      NodeDataLoader loader(node, o);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors.push_back(e.what());
      throw;
    }
  }));
  ASSERT_EQ(errors.size(), 2u);
  const bool reader_named_it = std::any_of(errors.begin(), errors.end(), [&](const std::string& e) {
    return e.find(path_) != std::string::npos && e.find("has 97 tokens, the model's (model.vocab) 96") != std::string::npos;
  });
  EXPECT_TRUE(reader_named_it) << errors[0] << " | " << errors[1];
}

TEST_F(LoaderTest, ZeroVocabIsAnInvalidOption) {
  auto o = options(1, 0);
  o.vocab = 0;
  EXPECT_THROW(run_on_threads(1, [&](Comm& node) { NodeDataLoader loader(node, o); }), std::invalid_argument);
}

TEST_F(LoaderTest, DisagreeingOptionsAreRejected) {
  EXPECT_THROW(run_on_threads(2, [&](Comm& node) {
                 auto o = options(1, 0);
                 if (node.rank() == 1) o.seq_len = 9;
                 NodeDataLoader loader(node, o);
               }),
               std::invalid_argument);
}

}  // namespace
}  // namespace megascale::engine
