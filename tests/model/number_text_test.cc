// tests/model/number_text_test.cc: base/number_text.h, the field helpers of the
// measurement readers (header-only, tested with the model layer's suite).
#include "base/number_text.h"

#include <gtest/gtest.h>

namespace megascale::base {
namespace {

TEST(NumberText, FiniteNumberIsStrict) {
  EXPECT_EQ(finite_number("12.5"), 12.5);
  EXPECT_EQ(finite_number("-3e2"), -300.0);
  EXPECT_FALSE(finite_number(""));
  EXPECT_FALSE(finite_number("12.5 GB"));   // trailing text
  EXPECT_EQ(finite_number(" 12"), 12.0);    // leading white space skipped (strtod)
  EXPECT_FALSE(finite_number("12 "));       // trailing white space is trailing text
  EXPECT_FALSE(finite_number("inf"));
  EXPECT_FALSE(finite_number("nan"));
  EXPECT_FALSE(finite_number("1e999"));     // overflows to infinity
}

TEST(NumberText, TrimAndLower) {
  EXPECT_EQ(trim("  a b \t\n"), "a b");
  EXPECT_EQ(trim("   "), "");
  EXPECT_EQ(lower("AllReduce"), "allreduce");
}

}  // namespace
}  // namespace megascale::base
