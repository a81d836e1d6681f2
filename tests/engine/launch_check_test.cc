// tests/engine/launch_check_test.cc: engine::check_before_launch refuses a
// checkpoint to resume from that another layout or model wrote, and a folder
// it could not make, and leaves a corrupt checkpoint to the engine's recovery.
#include "engine/launch_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/comm_threads.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;

// A 2-rank CPU job (DP 2) whose checkpoints go to `root`.
model::Scenario job(const std::string& root, const std::vector<std::string>& overrides = {}) {
  const std::string text = R"(name = "launch-check"
[model]
name = "tiny"
layers = 2
hidden = 64
heads = 4
seq_len = 32
vocab = 96
[parallel]
tp = 1
pp = 1
dp = 2
micro_batch = 2
global_batch = 16
[hardware]
gpu = "cpu"
gpus_per_node = 1
[cluster]
gpus = 2
[train]
steps = 4
checkpoint_dir = ")" + root + R"("
checkpoint_every = 2
)";
  return model::parse_scenario(text, "launch-check.toml", overrides);
}

class LaunchCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::temp_directory_path() / ("launch_check_" + std::to_string(getpid()) + "_" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
    fs::remove_all(root_);
    // Step 4 of the DP 2 job, as its engine would save it.
    const model::Scenario s = job(root_);
    run_on_threads(2, [&](Comm& c) {
      ShardState st;
      st.arrays.push_back({"params", std::vector<float>(64, 0.5f)});
      save_checkpoint(c, root_, 4, make_checkpoint_layout(s.model, s.parallel), st);
    });
  }
  void TearDown() override { fs::remove_all(root_); }

  // The error check_before_launch gives, "" when none; `key` gets its key.
  std::string error_of(const std::vector<std::string>& overrides, std::string* key = nullptr) {
    try {
      check_before_launch(job(root_, overrides));
    } catch (const model::ScenarioError& e) {
      if (key) *key = e.key();
      return e.what();
    }
    return "";
  }
  std::string root_;
};

TEST_F(LaunchCheck, TheLayoutThatWroteTheCheckpointResumes) {
  EXPECT_EQ(error_of({}), "");
  EXPECT_EQ(error_of({"train.checkpoint_dir=\"" + root_ + "/none-yet\""}), "");  // nothing to resume from
}

TEST_F(LaunchCheck, AnotherWorldSizeOrModelIsRefusedNamingTheKey) {
  std::string key;
  std::string e = error_of({"parallel.dp=1", "cluster.gpus=1"}, &key);
  EXPECT_EQ(key, "train.checkpoint_dir");
  EXPECT_NE(e.find("launch-check.toml"), std::string::npos) << e;
  EXPECT_NE(e.find("written by 2 ranks (world_size), this run has 1"), std::string::npos) << e;
  EXPECT_NE(e.find("checkpoint of step 4"), std::string::npos) << e;
  e = error_of({"model.hidden=128"}, &key);
  EXPECT_EQ(key, "train.checkpoint_dir");
  EXPECT_NE(e.find("hidden=64"), std::string::npos) << e;
  EXPECT_NE(e.find("hidden=128"), std::string::npos) << e;
}

// A folder the engine could not make is refused once, naming the key: rank 0
// alone used to meet it, and `megascale run` evicted its node for it.
TEST_F(LaunchCheck, AFolderThatCannotBeMadeIsRefusedNamingTheKey) {
  std::ofstream(root_ + "/a-file") << "x";
  std::string key;
  std::string e = error_of({"train.checkpoint_dir=\"" + root_ + "/a-file/ckpt\""}, &key);
  EXPECT_EQ(key, "train.checkpoint_dir");
  EXPECT_NE(e.find("launch-check.toml"), std::string::npos) << e;
  EXPECT_NE(e.find(root_ + "/a-file/ckpt: cannot make this folder (Not a directory)"), std::string::npos) << e;
  e = error_of({"train.checkpoint_dir=\"" + root_ + "/a-file\""}, &key);
  EXPECT_EQ(key, "train.checkpoint_dir");
  EXPECT_NE(e.find("cannot make this folder"), std::string::npos) << e;
  e = error_of({"train.checkpoint_dir=\"/proc/megascale-launch-check\""}, &key);  // even as root
  EXPECT_EQ(key, "train.checkpoint_dir");
  EXPECT_NE(e.find("/proc/megascale-launch-check: cannot make this folder ("), std::string::npos) << e;
  // The synthetic corpus's folder, when train.data is empty.
  e = error_of({"train.work_dir=\"" + root_ + "/a-file/work\""}, &key);
  EXPECT_EQ(key, "train.work_dir");
  EXPECT_NE(e.find("cannot make this folder (Not a directory)"), std::string::npos) << e;
  // The trace, written when the training ends: its folder must take files.
  e = error_of({"train.trace=\"" + root_ + "/a-file/trace\""}, &key);
  EXPECT_EQ(key, "train.trace");
  EXPECT_NE(e.find(root_ + "/a-file/trace.csv: cannot write (Not a directory)"), std::string::npos) << e;
  e = error_of({"train.trace=\"" + root_ + "/no-folder/trace\""}, &key);
  EXPECT_EQ(key, "train.trace");
  EXPECT_NE(e.find("cannot write (No such file or directory)"), std::string::npos) << e;
  fs::create_directories(root_ + "/trace.json");  // a folder in the file's way
  e = error_of({"train.trace=\"" + root_ + "/trace\""}, &key);
  EXPECT_EQ(key, "train.trace");
  EXPECT_NE(e.find(root_ + "/trace.json: cannot write (Is a directory)"), std::string::npos) << e;
  EXPECT_EQ(error_of({"train.trace=\"" + root_ + "/ok-trace\""}), "");
  // A folder that can be made is made, as the engine would.
  EXPECT_EQ(error_of({"train.work_dir=\"" + root_ + "/work/deeper\""}), "");
  EXPECT_TRUE(fs::is_directory(root_ + "/work/deeper"));
}

// The synthetic corpus (no train.data) holds 16-bit tokens with three
// successors each: a model vocabulary it cannot draw is refused at model.vocab
// before launch (each rank stopped on it under MPI_Abort).
TEST_F(LaunchCheck, AVocabularyTheSyntheticCorpusCannotDrawIsRefused) {
  const std::string fresh = "train.checkpoint_dir=\"" + root_ + "/fresh\"";  // no checkpoint of vocab 96 there
  std::string key;
  const std::string e = error_of({"model.vocab=2", fresh}, &key);
  EXPECT_EQ(key, "model.vocab");
  EXPECT_NE(e.find("the synthetic corpus (train.data unset) draws 16-bit tokens with three successors each: vocab "
                   "3..65536, got 2"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of({"model.vocab=65538", fresh}, &key), "");
  EXPECT_EQ(key, "model.vocab");
  EXPECT_EQ(error_of({"model.vocab=3", fresh}), "");
  EXPECT_EQ(error_of({"model.vocab=65536", fresh}), "");
}

// A corrupt newest checkpoint is not refused here: the engine's CRC check
// refuses it at load, and `megascale run` moves it aside and resumes from the
// one before (the fault matrix's corrupt_checkpoint).
TEST_F(LaunchCheck, ACorruptCheckpointIsLeftToTheEngine) {
  std::fstream f(shard_path(root_, 4, 0), std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(80);
  f.write("\xde\xad\xbe\xef", 4);  // inside the body: the CRC no longer matches
  f.close();
  EXPECT_EQ(error_of({}), "");
}

}  // namespace
}  // namespace megascale::engine
