// tests/engine/watchdog_test.cc: engine::Watchdog (engine/watchdog.h) stops the
// process with exit 1 and one line naming the rank, the phase and the key whose
// limit ran out: the start-up limit before the first progress(), the step limit
// after it; a limit of 0 turns its phase off. The stops are death tests (the
// watchdog ends the whole process).
#include "engine/watchdog.h"

#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

namespace megascale::engine {
namespace {

TEST(WatchdogDeathTest, StartUpLimitNamesTheStartUp) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(/*limit_s=*/60, /*startup_limit_s=*/0.2, /*rank=*/3);
        sleep(10);
        std::exit(0);
      },
      ::testing::ExitedWithCode(1), "rank 3: no step finished for [0-9]+ s \\(during start-up.*train\\.startup_watchdog_s");
}

TEST(WatchdogDeathTest, StepLimitAppliesOnceStartUpEnded) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(/*limit_s=*/0.2, /*startup_limit_s=*/60, /*rank=*/2);
        w.progress(4);  // step 4 finished: the rank now waits in step 5
        sleep(10);
        std::exit(0);
      },
      ::testing::ExitedWithCode(1), "rank 2: no step finished for [0-9]+ s \\(in step 5\\).*train\\.watchdog_s");
}

// A start-up limit of 0 is off: a start-up far longer than the step limit
// does not stop the process (it would, were the step limit applied there).
TEST(WatchdogDeathTest, ZeroStartUpLimitIsOff) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(/*limit_s=*/0.2, /*startup_limit_s=*/0, /*rank=*/0);
        usleep(1000 * 1000);
        std::exit(7);
      },
      ::testing::ExitedWithCode(7), "");
}

}  // namespace
}  // namespace megascale::engine
