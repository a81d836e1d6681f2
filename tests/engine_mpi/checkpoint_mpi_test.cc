// tests/engine_mpi/checkpoint_mpi_test.cc: checkpoint save/load across real
// processes (registered with 2 and 4), including the marker logic when one
// rank fails to write.
#include "engine/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/comm_mpi.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;

std::string make_root(MpiComm& world, const char* name) {
  float pid = world.rank() == 0 ? static_cast<float>(getpid() % (1 << 24)) : 0.0f;
  world.broadcast(&pid, 1, 0);
  const std::string root = (fs::temp_directory_path() / (std::string(name) + "_" +
                                                         std::to_string(static_cast<int>(pid))))
                               .string();
  if (world.rank() == 0) fs::remove_all(root);
  world.barrier();
  return root;
}

CheckpointLayout layout(int n) {
  CheckpointLayout l;
  l.world_size = n;
  l.dp = n;
  l.model = "mpi test model";
  return l;
}

ShardState state(int rank) {
  ShardState s;
  s.arrays.push_back({"params", std::vector<float>(1000 + rank, 0.5f + rank)});
  s.values.push_back({"data_cursor", 40 + rank});
  return s;
}

TEST(CheckpointMpi, SaveLoadRoundTrip) {
  auto world = MpiComm::world();
  const std::string root = make_root(*world, "ckpt_mpi_rt");
  const int n = world->size(), me = world->rank();
  save_checkpoint(*world, root, 20, layout(n), state(me));
  EXPECT_TRUE(fs::exists(marker_path(root, 20)));  // visible to all on return
  EXPECT_EQ(latest_checkpoint(root), 20);
  const ShardState s = load_checkpoint(*world, root, 20, layout(n));
  EXPECT_EQ(s.step, 20);
  EXPECT_EQ(s.arrays[0].data, state(me).arrays[0].data);
  EXPECT_EQ(s.find_value("data_cursor"), 40 + me);
  world->barrier();
  if (me == 0) fs::remove_all(root);
}

TEST(CheckpointMpi, NoMarkerWhenOneRankFailsAndLoadRefuses) {
  auto world = MpiComm::world();
  const std::string root = make_root(*world, "ckpt_mpi_fail");
  const int n = world->size(), me = world->rank();
  const int bad = n - 1;
  // Block the last rank's shard: a directory where its file must go makes the
  // rename fail on that rank only.
  if (me == 0) fs::create_directories(shard_path(root, 7, bad) + "/blocker");
  world->barrier();
  std::string check;
  try {
    save_checkpoint(*world, root, 7, layout(n), state(me));
    ADD_FAILURE() << "save must fail on every rank";
  } catch (const CheckpointError& e) {
    check = e.check();
  }
  EXPECT_EQ(check, me == bad ? "write failed" : "save failed");
  EXPECT_FALSE(fs::exists(marker_path(root, 7)));
  EXPECT_FALSE(latest_checkpoint(root).has_value());
  try {
    load_checkpoint(*world, root, 7, layout(n));
    ADD_FAILURE() << "load of a partial checkpoint must fail";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.check(), "partial checkpoint") << e.what();
  }
  world->barrier();
  if (me == 0) fs::remove_all(root);
}

TEST(CheckpointMpi, CorruptShardOfOneRankIsRefusedEverywhere) {
  auto world = MpiComm::world();
  const std::string root = make_root(*world, "ckpt_mpi_crc");
  const int n = world->size(), me = world->rank();
  save_checkpoint(*world, root, 3, layout(n), state(me));
  if (me == 0) {
    const std::string p = shard_path(root, 3, 1);
    std::FILE* f = std::fopen(p.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 200, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, 200, SEEK_SET);
    std::fputc(c ^ 0xFF, f);
    std::fclose(f);
  }
  world->barrier();
  try {
    load_checkpoint(*world, root, 3, layout(n));
    ADD_FAILURE() << "must refuse";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.check(), me == 1 ? "checksum mismatch" : "refused") << e.what();
  }
  world->barrier();
  if (me == 0) fs::remove_all(root);
}

}  // namespace
}  // namespace megascale::engine
