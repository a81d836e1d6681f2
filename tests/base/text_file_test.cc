// tests/base/text_file_test.cc: write_text_or_throw (base/text_file.h) either
// leaves the whole text at the path or throws an error that names the path and
// the system's reason, leaving nothing behind (no temporary, the old file
// intact). The CLI's --out / --report / --write / --dir outputs go through it:
// before, several were written with an unchecked std::ofstream, so a path in a
// missing folder printed a report and wrote nothing, with exit 0.
#include "base/text_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace megascale::base {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string error_of(const std::string& path, const std::string& text) {
  try {
    write_text_or_throw(path, text);
  } catch (const OutputFileError& e) {
    EXPECT_EQ(e.path(), path);
    return e.what();
  }
  return "(no error)";
}

class TextFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("megascale-text-file-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

TEST_F(TextFile, WritesAndReplacesTheWholeText) {
  const fs::path p = dir_ / "report.md";
  write_text_or_throw(p.string(), "first\n");
  EXPECT_EQ(read_all(p), "first\n");
  write_text_or_throw(p.string(), "second, longer\n");
  EXPECT_EQ(read_all(p), "second, longer\n");
  EXPECT_EQ(entries(), 1u);  // no temporary left beside it
}

TEST_F(TextFile, AMissingFolderNamesThePathAndTheReason) {
  const std::string p = (dir_ / "no-such-folder" / "out.toml").string();
  EXPECT_EQ(error_of(p, "x"), p + ": cannot write (No such file or directory)");
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(write_text_atomically(p, "x"));
}

TEST_F(TextFile, AFolderInTheWayKeepsItAndLeavesNoTemporary) {
  const fs::path p = dir_ / "taken";
  fs::create_directories(p);
  std::ofstream(p / "inside") << "kept";
  const std::string e = error_of(p.string(), "x");
  EXPECT_EQ(e.rfind(p.string() + ": cannot write (", 0), 0u) << e;
  EXPECT_EQ(e.find("unknown reason"), std::string::npos) << e;  // the rename's errno survives the cleanup
  EXPECT_TRUE(fs::is_directory(p));
  EXPECT_EQ(read_all(p / "inside"), "kept");
  EXPECT_EQ(entries(), 1u);  // only the folder: the temporary beside it was removed
}

// The check before a long job meets the errors its final write would: the
// path a folder, its folder missing or a file; with create_folders the
// nearest existing folder decides. Nothing is created.
TEST_F(TextFile, OutputPathIsCheckedBeforeTheWork) {
  auto error = [](const std::string& path, bool create) {
    try {
      check_output_path(path, create);
    } catch (const OutputFileError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string ok = (dir_ / "profile.toml").string();
  EXPECT_EQ(error(ok, false), "(no error)");
  EXPECT_FALSE(fs::exists(ok));
  EXPECT_EQ(error(dir_.string(), false), dir_.string() + ": cannot write (Is a directory)");
  const std::string deep = (dir_ / "a" / "b" / "p.json").string();
  EXPECT_EQ(error(deep, false), deep + ": cannot write (No such file or directory)");
  EXPECT_EQ(error(deep, true), "(no error)");
  EXPECT_FALSE(fs::exists(dir_ / "a"));
  std::ofstream(dir_ / "file") << "x";
  const std::string under_file = (dir_ / "file" / "p.json").string();
  EXPECT_EQ(error(under_file, false), under_file + ": cannot write (Not a directory)");
  EXPECT_EQ(error(under_file, true), under_file + ": cannot write (Not a directory)");
  EXPECT_EQ(error("relative-name.toml", false), "(no error)");  // the working folder
  // A relative path whose top folder is missing: made in the working folder.
  EXPECT_EQ(error("megascale-no-such-top/results/p.json", true), "(no error)");
  EXPECT_EQ(error("megascale-no-such-top/results/p.json", false),
            "megascale-no-such-top/results/p.json: cannot write (No such file or directory)");
  // A folder where no file can be made, though access(2) says yes to root:
  // refused with the reason creating one gives.
  EXPECT_EQ(error("/proc/megascale-profile.toml", false).rfind("/proc/megascale-profile.toml: cannot write (", 0), 0u);
  EXPECT_EQ(error("/proc/megascale-dir/p.toml", true).rfind("/proc/megascale-dir/p.toml: cannot write (", 0), 0u);
  // Nothing is left behind by the check.
  EXPECT_EQ(entries(), 1u);  // "file"
}

// A directory, a missing file and an endless one (/dev/zero) are errors naming
// the path and the reason; before, a directory given as --runs, --gemm-csv,
// --manifest, --nccl-tests or --recovery-profile read as an empty file ("no
// runs", "empty GEMM sweep") and /dev/zero was read until memory ran out.
// One file however its path is spelled; a missing one is itself.
TEST_F(TextFile, FileIdentityIsOneNamePerFile) {
  const std::string x = (dir_ / "x.toml").string();
  std::ofstream(x) << "x";
  fs::create_directories(dir_ / "sub");
  fs::create_symlink(x, dir_ / "link.toml");
  EXPECT_EQ(file_identity(x), file_identity((dir_ / "sub" / ".." / "x.toml").string()));
  EXPECT_EQ(file_identity(x), file_identity((dir_ / "link.toml").string()));
  EXPECT_NE(file_identity(x), file_identity((dir_ / "sub").string()));
  const std::string missing = (dir_ / "missing.toml").string();
  EXPECT_EQ(file_identity(missing), missing);
}

TEST_F(TextFile, MakeFolderMakesTheParentsOrNamesWhyNot) {
  const std::string deep = (dir_ / "a" / "b" / "c").string();
  make_folder_or_throw(deep);
  EXPECT_TRUE(fs::is_directory(deep));
  make_folder_or_throw(deep);  // already there
  std::ofstream(dir_ / "f") << "x";
  for (const fs::path& bad : {dir_ / "f", dir_ / "f" / "sub"}) {
    try {
      make_folder_or_throw(bad.string());
      ADD_FAILURE() << bad << " was made a folder";
    } catch (const FileError& e) {
      EXPECT_EQ(e.path(), bad.string());
      EXPECT_NE(std::string(e.what()).find(bad.string() + ": cannot make this folder ("), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(TextFile, AFileGivenTwiceHoweverSpelledIsRefusedNamingBothSpellings) {
  const std::string x = (dir_ / "x.toml").string(), y = (dir_ / "y.toml").string();
  std::ofstream(x) << "x";
  std::ofstream(y) << "y";
  fs::create_directories(dir_ / "sub");
  EXPECT_NO_THROW(refuse_repeated_files({x, y}, "why"));
  const std::string again = (dir_ / "sub" / ".." / "x.toml").string();
  try {
    refuse_repeated_files({x, y, again}, "it would count twice", "--in");
    ADD_FAILURE() << "a file given twice was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--in " + again + " is given twice (as " + x + "): it would count twice");
  }
}

TEST(ReadText, WholeFileOrAnErrorNamingThePathAndTheReason) {
  const fs::path dir = fs::temp_directory_path() / ("read_text_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "a.txt").string();
  std::string big(200000, 'x');
  big += "\nend\n";
  std::ofstream(file) << big;
  EXPECT_EQ(read_text_or_throw(file), big);
  auto reason = [](const std::string& path, size_t max_bytes) -> std::string {
    try {
      read_text_or_throw(path, max_bytes);
    } catch (const InputFileError& e) {
      EXPECT_EQ(e.path(), path);
      EXPECT_EQ(std::string(e.what()), path + ": cannot read (" + e.reason() + ")");
      return e.reason();
    }
    return "read";
  };
  EXPECT_EQ(reason(dir.string(), kMaxInputBytes), "Is a directory");
  EXPECT_EQ(reason((dir / "none").string(), kMaxInputBytes), "No such file or directory");
  EXPECT_EQ(reason("/dev/zero", 1 << 20), "more than 1048576 bytes: not a text input");
  EXPECT_EQ(reason(file, big.size()), "read");  // exactly at the bound
  EXPECT_EQ(reason(file, big.size() - 1), "more than " + std::to_string(big.size() - 1) + " bytes: not a text input");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace megascale::base
