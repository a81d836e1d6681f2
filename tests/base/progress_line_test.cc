// tests/base/progress_line_test.cc: base::ProgressLine rewrites one line on a
// terminal and writes separate lines, at most one per tenth, elsewhere.
#include "base/progress_line.h"

#include <gtest/gtest.h>

#include <sstream>

namespace megascale::base {
namespace {

TEST(ProgressLine, OnATerminalEachUpdateRewritesTheLineAndTheLastEndsIt) {
  std::ostringstream out;
  ProgressLine p(out, /*terminal=*/true);
  for (int i = 1; i <= 3; ++i) p.update("step " + std::to_string(i) + " / 3", i, 3);
  EXPECT_EQ(out.str(), "\rstep 1 / 3\rstep 2 / 3\rstep 3 / 3\n");
}

TEST(ProgressLine, OffATerminalAtMostOneLinePerTenthAndAlwaysTheLast) {
  std::ostringstream out;
  ProgressLine p(out, /*terminal=*/false);
  for (int i = 1; i <= 100; ++i) p.update("step " + std::to_string(i), i, 100);
  // steps 1-9 are in the first tenth (one line), then 10, 20, ..., 90, and 100
  EXPECT_EQ(out.str(),
            "step 1\nstep 10\nstep 20\nstep 30\nstep 40\nstep 50\nstep 60\nstep 70\nstep 80\nstep 90\nstep 100\n");
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
}

TEST(ProgressLine, OffATerminalFewUpdatesAreEachALine) {
  std::ostringstream out;
  ProgressLine p(out, /*terminal=*/false);
  p.update("a", 1, 2);
  p.update("b", 2, 2);
  EXPECT_EQ(out.str(), "a\nb\n");
}

TEST(ProgressLine, AStringStreamIsNotATerminal) {
  std::ostringstream out;
  EXPECT_FALSE(is_terminal(out));
}

}  // namespace
}  // namespace megascale::base
