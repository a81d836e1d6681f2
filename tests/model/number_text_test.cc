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

// A report's number: its decimals, and past 1e15 in magnitude scientific
// notation (a 1e-300 Gb/s NIC once printed a 300-digit iteration time).
TEST(NumberText, FixedKeepsItsDecimalsAndSwitchesToScientificForHugeValues) {
  EXPECT_EQ(fixed(12.3456, 2), "12.35");
  EXPECT_EQ(fixed(0.5, 0), "0");  // round half to even, as printf
  EXPECT_EQ(fixed(-7.0, 1), "-7.0");
  EXPECT_EQ(fixed(999999999999999.0, 0), "999999999999999");
  EXPECT_EQ(fixed(1.2e297, 3), "1.200e+297");
  EXPECT_EQ(fixed(-1e15, 1), "-1.000e+15");
}

}  // namespace
}  // namespace megascale::base
