// tests/engine/checkpoint_test.cc: save/load round trip and every refusal
// (corrupt, truncated, partial, different layout), ranks as threads; the
// two-stage checkpoint (background persist, marker last, a crash mid-persist).
#include "engine/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "engine/comm.h"
#include "engine/comm_threads.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;

CheckpointLayout layout(int world) {
  CheckpointLayout l;
  l.world_size = world;
  l.dp = world;
  l.model = "layers=2 hidden=8";
  return l;
}

ShardState state_of(int rank) {
  ShardState s;
  s.arrays.push_back({"params", {1.0f * rank, 2.5f, -3.0f}});
  s.arrays.push_back({"exp_avg", std::vector<float>(100, 0.25f * rank)});
  s.arrays.push_back({"empty", {}});
  s.values.push_back({"rng", -12345678901234LL + rank});
  s.values.push_back({"data_cursor", 7});
  return s;
}

class CheckpointDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::temp_directory_path() /
             ("ckpt_test_" + std::to_string(getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void save(int world, int64_t step) {
    run_on_threads(world, [&](Comm& c) {
      save_checkpoint(c, root_, step, layout(world), state_of(c.rank()));
    });
  }
  // Loads with `world` ranks; returns the error text of `rank` ("" if none), and
  // checks that every rank failed or none did.
  std::string load_error(int world, int64_t step, const CheckpointLayout& expect, int rank,
                         std::string* check = nullptr) {
    std::vector<std::string> errors(world);
    std::vector<std::string> checks(world);
    run_on_threads(world, [&](Comm& c) {
      try {
        const ShardState s = load_checkpoint(c, root_, step, expect);
        EXPECT_EQ(s.step, step);
      } catch (const CheckpointError& e) {
        errors[c.rank()] = e.what();
        checks[c.rank()] = e.check();
      }
    });
    for (int r = 0; r < world; ++r)
      EXPECT_EQ(errors[r].empty(), errors[0].empty()) << "ranks disagree: rank " << r;
    if (check) *check = checks[rank];
    return errors[rank];
  }
  std::string root_;
};

TEST_F(CheckpointDir, RoundTripEveryRank) {
  save(4, 12);
  EXPECT_TRUE(fs::exists(marker_path(root_, 12)));
  EXPECT_EQ(latest_checkpoint(root_), 12);
  std::vector<ShardState> loaded(4);
  run_on_threads(4, [&](Comm& c) { loaded[c.rank()] = load_checkpoint(c, root_, 12, layout(4)); });
  for (int r = 0; r < 4; ++r) {
    const ShardState want = state_of(r);
    EXPECT_EQ(loaded[r].step, 12);
    ASSERT_EQ(loaded[r].arrays.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(loaded[r].arrays[i].name, want.arrays[i].name);
      EXPECT_EQ(loaded[r].arrays[i].data, want.arrays[i].data);  // bitwise
    }
    EXPECT_EQ(loaded[r].values, want.values);
    EXPECT_EQ(loaded[r].find_value("rng"), -12345678901234LL + r);
    ASSERT_NE(loaded[r].find_array("exp_avg"), nullptr);
    EXPECT_EQ(loaded[r].find_array("nope"), nullptr);
  }
  // No temporary files are left.
  for (const auto& e : fs::directory_iterator(checkpoint_dir(root_, 12)))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST_F(CheckpointDir, LatestSkipsIncompleteCheckpoints) {
  EXPECT_FALSE(latest_checkpoint(root_).has_value());
  save(2, 3);
  save(2, 10);
  fs::remove(marker_path(root_, 10));
  EXPECT_EQ(latest_checkpoint(root_), 3);
}

TEST_F(CheckpointDir, FlippedByteIsRefused) {
  save(2, 5);
  const std::string shard = shard_path(root_, 5, 1);
  std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(100);
  char c;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(100);
  f.write(&c, 1);
  f.close();
  std::string check;
  const std::string err = load_error(2, 5, layout(2), 1, &check);
  EXPECT_EQ(check, "checksum mismatch");
  EXPECT_NE(err.find(shard), std::string::npos) << err;
  EXPECT_NE(err.find("(rank 1)"), std::string::npos) << err;
  // Rank 0's own shard is fine, but it refuses too, naming rank 1.
  const std::string err0 = load_error(2, 5, layout(2), 0, &check);
  EXPECT_EQ(check, "refused");
  EXPECT_NE(err0.find("rank(s) 1"), std::string::npos) << err0;
}

TEST_F(CheckpointDir, MissingMarkerIsRefused) {
  save(2, 5);
  fs::remove(marker_path(root_, 5));
  std::string check;
  const std::string err = load_error(2, 5, layout(2), 0, &check);
  EXPECT_EQ(check, "partial checkpoint");
  EXPECT_NE(err.find("COMPLETE"), std::string::npos) << err;
}

TEST_F(CheckpointDir, MissingShardIsRefused) {
  save(2, 5);
  fs::remove(shard_path(root_, 5, 1));
  std::string check;
  load_error(2, 5, layout(2), 1, &check);
  EXPECT_EQ(check, "missing shard");
}

TEST_F(CheckpointDir, TruncatedShardIsRefused) {
  save(2, 5);
  const std::string shard = shard_path(root_, 5, 0);
  fs::resize_file(shard, fs::file_size(shard) - 9);
  std::string check;
  load_error(2, 5, layout(2), 0, &check);
  EXPECT_EQ(check, "truncated");
  fs::resize_file(shard, 20);
  load_error(2, 5, layout(2), 0, &check);
  EXPECT_EQ(check, "truncated");
}

TEST_F(CheckpointDir, DifferentLayoutOrModelIsRefused) {
  save(2, 5);
  std::string check;
  CheckpointLayout other = layout(2);
  other.tp = 2;
  other.dp = 1;
  std::string err = load_error(2, 5, other, 0, &check);
  EXPECT_EQ(check, "layout mismatch");
  EXPECT_NE(err.find("tp is 1 in the checkpoint, 2 in this run"), std::string::npos) << err;
  other = layout(2);
  other.model = "layers=4 hidden=8";
  err = load_error(2, 5, other, 1, &check);
  EXPECT_EQ(check, "layout mismatch");
  EXPECT_NE(err.find("layers=4"), std::string::npos) << err;
  // A different world size: the marker already disagrees, and says so plainly.
  err = load_error(1, 5, layout(1), 0, &check);
  EXPECT_EQ(check, "layout mismatch");
  EXPECT_NE(err.find("written by 2 ranks (world_size), this run has 1"), std::string::npos) << err;
}

TEST_F(CheckpointDir, MarkerOfAnotherStepOrMalformedIsRefused) {
  save(2, 5);
  const std::string marker = marker_path(root_, 5);
  std::ofstream(marker, std::ios::trunc) << "megascale checkpoint v1\nstep=7\nworld_size=2\n";
  std::string check;
  std::string err = load_error(2, 5, layout(2), 0, &check);
  EXPECT_EQ(check, "layout mismatch");
  EXPECT_NE(err.find("the marker is step 7's, in the folder of step 5"), std::string::npos) << err;
  std::ofstream(marker, std::ios::trunc) << "hello\nworld\n";
  err = load_error(2, 5, layout(2), 0, &check);
  EXPECT_EQ(check, "malformed marker");
  EXPECT_NE(err.find("got 'hello|world|'"), std::string::npos) << err;
}

TEST_F(CheckpointDir, ResavingAStepReplacesIt) {
  save(2, 5);
  save(2, 5);
  EXPECT_TRUE(load_error(2, 5, layout(2), 0).empty());
}

// Two-stage checkpoint: begin (collective), background write, finish (collective).
TEST_F(CheckpointDir, TwoStagePersistsExactlyTheSnapshotAndMarksItLast) {
  save(2, 2);  // the previous complete checkpoint
  std::vector<ShardState> snapshot(2);
  std::vector<int> polls(2, 0);
  run_on_threads(2, [&](Comm& c) {
    ShardState s = state_of(c.rank());
    s.arrays[1].data.assign(1 << 16, 0.5f + c.rank());  // a bigger shard than step 2's
    snapshot[c.rank()] = s;
    CheckpointPersister p;
    begin_checkpoint(c, root_, 4);
    p.start(root_, 4, c.rank(), layout(2), std::move(s));
    EXPECT_TRUE(p.pending());
    EXPECT_THROW(p.start(root_, 4, c.rank(), layout(2), ShardState{}), std::logic_error);
    // Every rank's shard written, the marker not yet: a crash now leaves step 2.
    p.wait();
    c.barrier();
    EXPECT_TRUE(fs::exists(shard_path(root_, 4, c.rank())));
    EXPECT_FALSE(fs::exists(marker_path(root_, 4)));
    EXPECT_EQ(latest_checkpoint(root_), 2);
    c.barrier();
    while (!finish_checkpoint(c, p, false)) ++polls[c.rank()];
    EXPECT_FALSE(p.pending());
    EXPECT_GT(p.write_s(), 0.0);
    EXPECT_THROW(finish_checkpoint(c, p, false), std::logic_error);
  });
  EXPECT_EQ(polls[0], 0);  // every write had ended: the first poll finishes
  EXPECT_EQ(latest_checkpoint(root_), 4);
  std::vector<ShardState> loaded(2);
  run_on_threads(2, [&](Comm& c) { loaded[c.rank()] = load_checkpoint(c, root_, 4, layout(2)); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(loaded[r].step, 4);
    ASSERT_EQ(loaded[r].arrays.size(), snapshot[r].arrays.size());
    for (size_t i = 0; i < loaded[r].arrays.size(); ++i) {
      EXPECT_EQ(loaded[r].arrays[i].name, snapshot[r].arrays[i].name);
      EXPECT_EQ(loaded[r].arrays[i].data, snapshot[r].arrays[i].data);  // bitwise
    }
    EXPECT_EQ(loaded[r].values, snapshot[r].values);
  }
}

TEST_F(CheckpointDir, TwoStageRemovesAStaleMarkerBeforeWriting) {
  save(2, 4);
  ASSERT_TRUE(fs::exists(marker_path(root_, 4)));
  run_on_threads(2, [&](Comm& c) {
    begin_checkpoint(c, root_, 4);
    // Until the new save finishes, step 4 is not complete: its old shards may
    // already be half replaced.
    EXPECT_FALSE(fs::exists(marker_path(root_, 4)));
    CheckpointPersister p;
    p.start(root_, 4, c.rank(), layout(2), state_of(c.rank()));
    finish_checkpoint(c, p, true);
  });
  EXPECT_EQ(latest_checkpoint(root_), 4);
}

TEST_F(CheckpointDir, TwoStageWriteFailureIsAnErrorOnEveryRankAndNoMarker) {
  save(2, 2);
  std::vector<std::string> errors(2);
  run_on_threads(2, [&](Comm& c) {
    begin_checkpoint(c, root_, 4);
    if (c.rank() == 1) fs::create_directories(shard_path(root_, 4, 1));  // the rename onto it fails
    c.barrier();
    CheckpointPersister p;
    p.start(root_, 4, c.rank(), layout(2), state_of(c.rank()));
    try {
      finish_checkpoint(c, p, true);
    } catch (const CheckpointError& e) {
      errors[c.rank()] = e.what();
    }
    EXPECT_FALSE(p.pending());
  });
  EXPECT_NE(errors[1].find("shard_00001.msck"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("rank(s) 1 failed to write; no marker written"), std::string::npos) << errors[0];
  EXPECT_FALSE(fs::exists(marker_path(root_, 4)));
  EXPECT_EQ(latest_checkpoint(root_), 2);
}

// A process SIGKILLed while its background write runs: step 4 stays partial,
// step 2 is still the latest complete checkpoint and loads.
TEST_F(CheckpointDir, TwoStageCrashDuringPersistLeavesThePreviousCheckpoint) {
  save(1, 2);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto comms = make_thread_comms(1);
    begin_checkpoint(*comms[0], root_, 4);
    ShardState s = state_of(0);
    s.arrays[1].data.assign(size_t{16} << 20, 1.0f);  // 64 MiB: the write takes a while
    CheckpointPersister p;
    p.start(root_, 4, 0, layout(1), std::move(s));
    // Die as soon as the shard's temporary file is there (or the write ended).
    for (int i = 0; i < 20000 && !p.written(); ++i) {
      bool tmp = false;
      for (const auto& e : fs::directory_iterator(checkpoint_dir(root_, 4)))
        tmp = tmp || e.path().filename().string().find(".tmp") != std::string::npos;
      if (tmp) break;
      ::usleep(100);
    }
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(fs::is_directory(checkpoint_dir(root_, 4)));
  EXPECT_FALSE(fs::exists(marker_path(root_, 4)));
  EXPECT_EQ(latest_checkpoint(root_), 2);
  EXPECT_EQ(partial_checkpoints(root_), std::vector<int64_t>{4});
  EXPECT_TRUE(load_error(1, 2, layout(1), 0).empty());
}

TEST(CheckpointLayout, DescribesModelAndLayout) {
  model::ModelConfig m;
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.seq_len = 32;
  m.vocab = 128;
  m.ffn_hidden = 256;
  model::ParallelConfig p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.vpp = 2;
  const CheckpointLayout l = make_checkpoint_layout(m, p);
  EXPECT_EQ(l.world_size, 8);
  EXPECT_EQ(l.vpp, 2);
  EXPECT_EQ(l.model,
            "layers=4 hidden=64 heads=4 kv_heads=4 seq=32 vocab=128 ffn=256 mlp=gelu "
            "block=sequential window=0");
  // Another rank order puts other coordinates behind each shard's rank: it is
  // part of the layout a resume must match (and refuses, as any model change).
  p.rank_order = model::RankOrder::kTpCpPpDp;
  const CheckpointLayout other = make_checkpoint_layout(m, p);
  EXPECT_NE(other, l);
  EXPECT_EQ(other.model, l.model + " ranks=tp-cp-pp-dp");
  // So does an uneven split of the layers over the stages.
  p.rank_order = model::RankOrder::kTpCpDpPp;
  p.vpp = 1;
  p.first_stage_layers = 1;
  const CheckpointLayout uneven = make_checkpoint_layout(m, p);
  EXPECT_NE(uneven.model, l.model);
  EXPECT_EQ(uneven.model, l.model + " first_stage_layers=1 last_stage_layers=0");
  // And a free-form layout, by its layers per virtual stage.
  p.first_stage_layers = 0;
  p.pipeline_chunk_layers = std::make_shared<const std::vector<int>>(std::vector<int>{1, 3});
  EXPECT_EQ(make_checkpoint_layout(m, p).model, l.model + " chunk_layers=1,3");
}

}  // namespace
}  // namespace megascale::engine

namespace megascale::engine {
namespace {

// One reader per DP group: 4 ranks as 2 positions x DP 2 (DP group of rank r:
// the ranks with the same r % 2, DP rank r / 2). Only each group's DP rank 0
// writes the replicated "params" (its position's values); every rank writes
// its own "exp_avg" shard. Loading gives every rank its group reader's params,
// bit for bit, and its own exp_avg.
class OneReaderPerDpGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::temp_directory_path() / ("ckpt_one_reader_" + std::to_string(getpid()) + "_" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  static ShardState written_by(int rank, bool with_params) {
    ShardState s;
    if (rank / 2 == 0 && with_params) s.arrays.push_back({"params", std::vector<float>(1000, 0.5f + static_cast<float>(rank % 2))});
    s.arrays.push_back({"exp_avg", std::vector<float>(10, 0.25f * static_cast<float>(rank))});
    s.values.push_back({"optimizer_step", 4});
    return s;
  }
  void save(bool with_params) {
    run_on_threads(4, [&](Comm& c) { save_checkpoint(c, root_, 4, layout(4), written_by(c.rank(), with_params)); });
  }
  std::string root_;
};

TEST_F(OneReaderPerDpGroup, ReaderBroadcastsTheReplicatedArrays) {
  save(true);
  // The non-readers' shards are smaller: the parameters are stored once per group.
  EXPECT_LT(fs::file_size(shard_path(root_, 4, 2)), fs::file_size(shard_path(root_, 4, 0)));
  std::vector<ShardState> loaded(4);
  run_on_threads(4, [&](Comm& c) {
    std::unique_ptr<Comm> dp = c.split(c.rank() % 2, c.rank() / 2);
    loaded[c.rank()] = load_checkpoint_one_reader(c, *dp, root_, 4, layout(4), {{"params", 1000}});
  });
  for (int r = 0; r < 4; ++r) {
    const NamedArray* p = loaded[r].find_array("params");
    ASSERT_NE(p, nullptr) << "rank " << r;
    EXPECT_EQ(p->data, std::vector<float>(1000, 0.5f + static_cast<float>(r % 2))) << "rank " << r;
    ASSERT_NE(loaded[r].find_array("exp_avg"), nullptr);
    EXPECT_EQ(loaded[r].find_array("exp_avg")->data, std::vector<float>(10, 0.25f * static_cast<float>(r)));
    EXPECT_EQ(loaded[r].find_value("optimizer_step"), 4);
  }
}

TEST_F(OneReaderPerDpGroup, AReaderWithoutTheArrayOrABadShardIsRefusedOnEveryRank) {
  // Each rank's refusal ("" when it loaded).
  auto load_on_every_rank = [&] {
    std::vector<std::string> checks(4);
    run_on_threads(4, [&](Comm& c) {
      std::unique_ptr<Comm> dp = c.split(c.rank() % 2, c.rank() / 2);
      try {
        load_checkpoint_one_reader(c, *dp, root_, 4, layout(4), {{"params", 1000}});
      } catch (const CheckpointError& e) {
        checks[c.rank()] = e.check();
      }
    });
    return checks;
  };
  save(false);
  std::vector<std::string> checks = load_on_every_rank();
  EXPECT_EQ(checks[0], "contents");
  EXPECT_EQ(checks[1], "contents");
  EXPECT_EQ(checks[2], "refused");
  EXPECT_EQ(checks[3], "refused");
  // A corrupt non-reader shard.
  fs::remove_all(root_);
  save(true);
  {
    std::fstream f(shard_path(root_, 4, 3), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(80);
    f.put('\x7f');
  }
  checks = load_on_every_rank();
  EXPECT_EQ(checks[3], "checksum mismatch");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(checks[r], "refused") << "rank " << r;
}

}  // namespace
}  // namespace megascale::engine
