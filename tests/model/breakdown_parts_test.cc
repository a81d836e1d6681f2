// tests/model/breakdown_parts_test.cc: model/breakdown_parts.h names every
// component of TimeBreakdown once.
#include "model/breakdown_parts.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace megascale::model {
namespace {

TEST(BreakdownParts, EveryComponentOnceAndTheySumToTheTotal) {
  // A new double in TimeBreakdown without a part here fails the size check.
  EXPECT_EQ(sizeof(TimeBreakdown), kBreakdownParts.size() * sizeof(double));
  TimeBreakdown b;
  double v = 1, sum = 0;
  std::set<std::string> keys;
  for (const BreakdownPart& part : kBreakdownParts) {
    EXPECT_EQ(b.*part.seconds, 0) << part.key << " shares a member with an earlier part";
    b.*part.seconds = v;
    sum += v;
    v *= 2;  // powers of two: any member counted twice or missed changes the sum
    keys.insert(part.key);
  }
  EXPECT_EQ(keys.size(), kBreakdownParts.size());
  EXPECT_DOUBLE_EQ(b.total(), sum);
}

}  // namespace
}  // namespace megascale::model
