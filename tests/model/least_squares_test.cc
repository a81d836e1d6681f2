// tests/model/least_squares_test.cc: the small non-negative least squares of
// the calibration fits and their leave-one-out errors (model/least_squares.h).
#include "model/least_squares.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace megascale::model {
namespace {

TEST(LeastSquares, RecoversAnExactNonNegativeSolution) {
  // b = 2 x0 + 0.5 x1 over four rows.
  const std::vector<std::vector<double>> rows = {{1, 1}, {2, 1}, {3, 0}, {0, 4}};
  std::vector<double> b;
  for (const auto& r : rows) b.push_back(2 * r[0] + 0.5 * r[1]);
  const std::vector<double> x = nnls(rows, b);
  EXPECT_NEAR(x[0], 2.0, 1e-12);
  EXPECT_NEAR(x[1], 0.5, 1e-12);
}

TEST(LeastSquares, ClampsANegativeComponentAndRefitsTheRest) {
  // Unconstrained the best fit wants x1 < 0; constrained, x1 = 0 and x0 fits alone.
  const std::vector<std::vector<double>> rows = {{1, 1}, {1, 2}, {1, 3}};
  const std::vector<double> b = {3, 2, 1};
  const std::vector<double> x = nnls(rows, b);
  EXPECT_EQ(x[1], 0.0);
  EXPECT_NEAR(x[0], 2.0, 1e-12);  // the mean of b
}

TEST(LeastSquares, WeightsAndLeaveOneOut) {
  // Relative weights: the small row counts as much as the big one.
  const std::vector<std::vector<double>> rows = {{1}, {100}};
  const std::vector<double> b = {2, 100};  // slopes 2 and 1
  const double plain = nnls(rows, b)[0];
  const double relative = weighted_nnls(rows, b, {1.0 / 2, 1.0 / 100})[0];
  EXPECT_NEAR(plain, 1.0, 0.01);
  EXPECT_NEAR(relative, 1.5, 0.5);
  EXPECT_GT(relative, plain);
  // Three groups of a clean b = 3 x: every left-out group is predicted exactly.
  const LeaveOneOut l = leave_one_out({{1}, {2}, {3}}, {3, 6, 9}, {"a", "b", "c"});
  ASSERT_EQ(l.groups.size(), 3u);
  EXPECT_NEAR(l.mean_abs_error, 0.0, 1e-12);
  // A group off the line shows in its own error.
  const LeaveOneOut off = leave_one_out({{1}, {2}, {3}}, {3, 6, 12}, {"a", "b", "c"});
  EXPECT_GT(std::abs(off.error[2]), 0.2);
}

TEST(LeastSquares, BadShapesAreErrors) {
  EXPECT_THROW(nnls({}, {}), std::invalid_argument);
  EXPECT_THROW(nnls({{1, 2}, {1}}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(nnls({std::vector<double>(9, 1.0)}, {1}), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::model
