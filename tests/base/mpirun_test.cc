// tests/base/mpirun_test.cc: run_mpirun (base/mpirun.h) against a stand-in
// `mpirun` put first on PATH: the exit status comes back, a signal to the
// caller reaches the job's process group, and a job that ignores it is
// SIGKILLed after the grace period (Open MPI's mpirun once hung for good after
// SIGTERM with every rank gone, and `megascale train` waited on it forever).
#include "base/mpirun.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace megascale::base {
namespace {

namespace fs = std::filesystem;

class FakeMpirun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fake_mpirun_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    const char* path = std::getenv("PATH");
    old_path_ = path ? path : "";
    ::setenv("PATH", (dir_.string() + ":" + old_path_).c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    fs::remove_all(dir_);
  }
  // Writes the stand-in: a shell script that first touches <dir>/started.
  void script(const std::string& body) {
    const fs::path p = dir_ / "mpirun";
    std::ofstream(p) << "#!/bin/sh\n: > \"" << (dir_ / "started").string() << "\"\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
  }
  // Sends `sig` to this process once the stand-in has started, from a thread
  // that blocks it, so that the handler runs on the thread in run_mpirun or
  // another one: run_mpirun must not depend on which.
  std::thread signal_when_started(int sig) {
    return std::thread([this, sig] {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, nullptr);
      for (int i = 0; i < 200 && !fs::exists(dir_ / "started"); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // run_mpirun has long set its handlers
      ::kill(::getpid(), sig);
    });
  }
  fs::path dir_;
  std::string old_path_;
};

TEST_F(FakeMpirun, ReturnsTheJobsExitStatus) {
  script("exit 3");
  std::ostringstream err;
  EXPECT_EQ(run_mpirun({"-np", "2", "prog"}, err, "test"), 3);
  EXPECT_EQ(err.str(), "");
}

TEST_F(FakeMpirun, ASignalToTheCallerEndsTheJob) {
  script("while :; do sleep 0.05; done");
  std::ostringstream err;
  std::thread t = signal_when_started(SIGTERM);
  const int rc = run_mpirun({}, err, "test", 5);
  t.join();
  EXPECT_EQ(rc, 128 + SIGTERM);
  EXPECT_EQ(err.str().find("did not exit"), std::string::npos) << err.str();
}

TEST_F(FakeMpirun, AJobThatIgnoresTheSignalIsKilledAfterTheGracePeriod) {
  script("trap '' TERM INT HUP\nwhile :; do sleep 0.05; done");
  std::ostringstream err;
  std::thread t = signal_when_started(SIGINT);
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = run_mpirun({}, err, "test", 1);
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.join();
  EXPECT_EQ(rc, 128 + SIGKILL);
  EXPECT_NE(err.str().find("test: mpirun did not exit within 1 s of the signal; killing it and its ranks"),
            std::string::npos)
      << err.str();
  EXPECT_GE(took_s, 1.0);
}

}  // namespace
}  // namespace megascale::base
