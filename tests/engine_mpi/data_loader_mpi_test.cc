// tests/engine_mpi/data_loader_mpi_test.cc: the node-shared loader across real
// processes of one machine: one reader, identical batches, prefetch.
#include "engine/data_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "engine/comm_mpi.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;

// A dataset written once by world rank 0 (its path broadcast by construction:
// every rank derives it from rank 0's pid).
std::string make_dataset(MpiComm& world) {
  float pid = world.rank() == 0 ? static_cast<float>(getpid() % (1 << 24)) : 0.0f;
  world.broadcast(&pid, 1, 0);
  const std::string path = (fs::temp_directory_path() /
                            ("loader_mpi_" + std::to_string(static_cast<int>(pid)) + ".msds"))
                               .string();
  if (world.rank() == 0) write_dataset(path, make_synthetic_corpus(211, 20000, 5), 211);
  world.barrier();
  return path;
}

DataLoaderOptions options(const std::string& path, int dp, int dp_rank) {
  DataLoaderOptions o;
  o.dataset_path = path;
  o.job_name = "mpitest";
  o.seq_len = 16;
  o.vocab = 211;
  o.global_batch = 8;
  o.dp = dp;
  o.dp_rank = dp_rank;
  o.seed = 1234;
  o.start_step = 0;
  o.timeout_s = 15;
  return o;
}

TEST(NodeDataLoaderMpi, OneReaderAndIdenticalBatchesOnTheNode) {
  auto world = MpiComm::world();
  const std::string path = make_dataset(*world);
  auto node = world->split_shared();
  const int steps = 6;
  {
    NodeDataLoader loader(*node, options(path, 1, 0));
    EXPECT_EQ(loader.is_reader(), node->rank() == 0);
    for (int s = 0; s < steps; ++s) {
      const Batch b = loader.next();
      ASSERT_EQ(b.tokens.size(), 8u * 16u);
      // Same bits on every rank of the node (tokens < 2^24 are exact as floats).
      std::vector<float> mine(b.tokens.begin(), b.tokens.end());
      std::vector<float> all(mine.size() * node->size());
      node->all_gather(mine.data(), mine.size(), all.data());
      for (int r = 0; r < node->size(); ++r)
        EXPECT_TRUE(std::equal(mine.begin(), mine.end(), all.begin() + r * mine.size()))
            << "step " << s << " rank " << r;
      if (world->rank() == 0) {
        const Batch want = load_batch(Dataset::open(path), options(path, 1, 0), s);
        EXPECT_EQ(b.tokens, want.tokens);
        EXPECT_EQ(b.labels, want.labels);
      }
    }
    // Exactly one process of the node opened the dataset file.
    float opens = static_cast<float>(loader.dataset_opens());
    node->all_reduce_sum(&opens, 1);
    EXPECT_EQ(opens, 1.0f);
    EXPECT_FALSE(fs::exists("/dev/shm" + loader.shm_name()));
    node->barrier();
  }
  world->barrier();
  if (world->rank() == 0) fs::remove(path);
}

TEST(NodeDataLoaderMpi, ReplicasGetTheirShareOfTheGlobalBatch) {
  auto world = MpiComm::world();
  if (world->size() % 2 != 0) GTEST_SKIP() << "needs an even number of processes";
  const std::string path = make_dataset(*world);
  auto node = world->split_shared();
  const int dp = 2, d = world->rank() % dp;
  const Dataset ds = Dataset::open(path);  // the test's own reference read
  {
    auto o = options(path, dp, d);
    o.start_step = 10;
    NodeDataLoader loader(*node, o);
    for (int s = 0; s < 4; ++s) {
      const Batch b = loader.next();
      const Batch want = load_batch(ds, o, 10 + s);
      EXPECT_EQ(b.step, 10 + s);
      EXPECT_EQ(b.first_sample, 4 * d);
      EXPECT_EQ(b.tokens, want.tokens);
    }
    node->barrier();
  }
  world->barrier();
  if (world->rank() == 0) fs::remove(path);
}

}  // namespace
}  // namespace megascale::engine
