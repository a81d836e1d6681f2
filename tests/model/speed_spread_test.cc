// Tests for model/speed_spread.h: the expected pace of the slowest GPU.
#include "model/speed_spread.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace megascale::model {
namespace {

// One GPU: the lognormal's mean exp(sigma^2 / 2). Two: E[exp(s max(z1, z2))] =
// 2 exp(s^2 / 2) Phi(s / sqrt(2)) (the max of two normals in closed form).
TEST(SpeedSpread, MatchesTheClosedFormsForOneAndTwoGpus) {
  for (double s : {0.015, 0.1, 0.5}) {
    EXPECT_NEAR(expected_slowest_speed_factor(s, 1), std::exp(0.5 * s * s), 1e-9) << s;
    const double two = 2.0 * std::exp(0.5 * s * s) * 0.5 * std::erfc(-(s / std::sqrt(2.0)) / std::sqrt(2.0));
    EXPECT_NEAR(expected_slowest_speed_factor(s, 2), two, 1e-9) << s;
  }
}

// Small sigma: log(factor) / sigma tends to E[max of n normals], whose values
// are tabulated (Harter 1961: 1.5388 for 10, 2.5076 for 100, 3.2414 for 1000).
TEST(SpeedSpread, FollowsTheExpectedLargestNormal) {
  const double s = 1e-4;
  EXPECT_NEAR(std::log(expected_slowest_speed_factor(s, 10)) / s, 1.5388, 2e-3);
  EXPECT_NEAR(std::log(expected_slowest_speed_factor(s, 100)) / s, 2.5076, 2e-3);
  EXPECT_NEAR(std::log(expected_slowest_speed_factor(s, 1000)) / s, 3.2414, 2e-3);
}

// The header's figures for the default spread (sigma 1.5%), rising with the job.
TEST(SpeedSpread, GrowsWithTheJob) {
  EXPECT_NEAR(expected_slowest_speed_factor(0.015, 16), 1.027, 0.0015);
  EXPECT_NEAR(expected_slowest_speed_factor(0.015, 256), 1.043, 0.0015);
  EXPECT_NEAR(expected_slowest_speed_factor(0.015, 2240), 1.053, 0.0015);
  EXPECT_NEAR(expected_slowest_speed_factor(0.015, 12288), 1.060, 0.0015);
  double last = 1.0;
  for (long long n = 1; n <= (1LL << 20); n *= 4) {
    const double f = expected_slowest_speed_factor(0.015, n);
    EXPECT_GT(f, last) << n;
    last = f;
  }
  EXPECT_EQ(expected_slowest_speed_factor(0.0, 12288), 1.0);
}

TEST(SpeedSpread, RefusesImpossibleInput) {
  EXPECT_THROW(expected_slowest_speed_factor(0.015, 0), std::invalid_argument);
  EXPECT_THROW(expected_slowest_speed_factor(-0.01, 8), std::invalid_argument);
  EXPECT_THROW(expected_slowest_speed_factor(NAN, 8), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::model
