// tests/engine/background_cpu_test.cc: the CPU time of background helper
// threads (engine/background_cpu.h), counted live and once, and the checkpoint
// writer's CPU counted there.
#include "engine/background_cpu.h"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/checkpoint.h"
#include "engine/comm.h"
#include "engine/comm_threads.h"

namespace megascale::engine {
namespace {

double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double process_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void spin_cpu(double seconds) {
  const double until = thread_cpu_s() + seconds;
  volatile double sink = 0;
  while (thread_cpu_s() < until) sink = sink + 1;
}

TEST(BackgroundCpu, CountsAScopedThreadLiveAndOnceAndNothingElse) {
  const double b0 = background_cpu_s();
  std::atomic<bool> half{false};
  std::atomic<bool> read{false};
  std::thread helper([&] {
    const BackgroundCpuScope scope;
    spin_cpu(0.03);
    half = true;
    while (!read) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // ~no CPU
    spin_cpu(0.03);
  });
  while (!half) std::this_thread::yield();
  // Read while the scope is open: its CPU so far, through the thread's clock.
  const double live = background_cpu_s() - b0;
  read = true;
  helper.join();
  const double ended = background_cpu_s() - b0;
  EXPECT_GE(live, 0.03);
  EXPECT_LT(live, 0.06);
  EXPECT_GE(ended, 0.06);
  EXPECT_LT(ended, 0.09);  // counted once, not again when the scope closed
  // A thread without a scope, and the caller's own work, are not background.
  std::thread other([] { spin_cpu(0.03); });
  other.join();
  spin_cpu(0.03);
  EXPECT_NEAR(background_cpu_s() - b0, ended, 1e-3);
}

// The two-stage checkpoint's writer: its CPU (checksum, copies into the page
// cache, freeing the snapshot) is counted, and is part of the process's.
TEST(BackgroundCpu, CountsTheCheckpointWritersThread) {
  namespace fs = std::filesystem;
  const std::string root = (fs::temp_directory_path() / ("bgcpu_test_" + std::to_string(::getpid()))).string();
  fs::remove_all(root);
  double writer_s = 0;
  double process_s = 0;
  run_on_threads(1, [&](Comm& c) {
    CheckpointLayout layout;
    layout.model = "bgcpu";
    ShardState s;
    s.arrays.push_back({"params", std::vector<float>(8 << 20, 0.5f)});  // 32 MB
    begin_checkpoint(c, root, 1);
    CheckpointPersister p;
    const double b0 = background_cpu_s();
    const double p0 = process_cpu_s();
    p.start(root, 1, 0, layout, std::move(s));
    p.wait();
    writer_s = background_cpu_s() - b0;
    process_s = process_cpu_s() - p0;
    ASSERT_TRUE(finish_checkpoint(c, p, true));
  });
  fs::remove_all(root);
  EXPECT_GT(writer_s, 0.001);  // a 32 MB checksum and write take milliseconds
  EXPECT_LE(writer_s, process_s + 1e-3);
}

}  // namespace
}  // namespace megascale::engine
