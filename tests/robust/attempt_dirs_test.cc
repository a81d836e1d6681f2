// tests/robust/attempt_dirs_test.cc: robust/attempt_dirs.h. Before a run's first
// launch the driver removes the attempt folders an earlier run left in the same
// work directory: the ranks append to rank_<r>.log and the driver reads each
// log from its start, so a stale error line was taken for this run's fault (a
// clean `megascale run` after a failed one detected "engine_error", evicted a
// healthy node and relaunched). Only WORK/attempt_<digits> folders go.
#include "robust/attempt_dirs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace megascale::robust {
namespace {

namespace fs = std::filesystem;

TEST(AttemptDirs, RemovesEveryAttemptFolderAndNothingElse) {
  const fs::path work = fs::temp_directory_path() / "megascale-attempt-dirs-test";
  fs::remove_all(work);
  EXPECT_EQ(remove_attempt_dirs(work.string()), 0);  // no work directory yet
  for (int n : {1, 2, 12}) {
    fs::create_directories(attempt_dir(work.string(), n));
    std::ofstream(fs::path(attempt_dir(work.string(), n)) / "rank_0.log")
        << "megascale train: rank 0: an error of the earlier run\n";
  }
  EXPECT_EQ(attempt_dir(work.string(), 12), (work / "attempt_12").string());
  // Kept: the executors' logs, a folder whose name only starts like one, a file so named.
  std::ofstream(work / "executor_0.log") << "kept\n";
  fs::create_directories(work / "attempt_notes");
  fs::create_directories(work / "attempt_");
  std::ofstream(work / "attempt_7") << "a file, not a folder\n";
  EXPECT_EQ(remove_attempt_dirs(work.string()), 3);
  for (int n : {1, 2, 12}) EXPECT_FALSE(fs::exists(attempt_dir(work.string(), n))) << n;
  EXPECT_TRUE(fs::exists(work / "executor_0.log"));
  EXPECT_TRUE(fs::is_directory(work / "attempt_notes"));
  EXPECT_TRUE(fs::is_directory(work / "attempt_"));
  EXPECT_TRUE(fs::is_regular_file(work / "attempt_7"));
  EXPECT_EQ(remove_attempt_dirs(work.string()), 0);
  fs::remove_all(work);
}

}  // namespace
}  // namespace megascale::robust
