// tests/model/collective_cost_test.cc: NCCL-style ring cost.
#include "model/collective_cost.h"

#include <gtest/gtest.h>

namespace megascale::model {
namespace {

TEST(CollectiveCost, RingFactorsFollowNcclTests) {
  const Link l = nvlink_link(100.0);
  const double bytes = 1e9;
  // Large messages: latency negligible; AG/RS move (n-1)/n, AR 2(n-1)/n.
  const double ag = collective_time_s(CollectiveKind::kAllGather, 8, bytes, l);
  const double rs = collective_time_s(CollectiveKind::kReduceScatter, 8, bytes, l);
  const double ar = collective_time_s(CollectiveKind::kAllReduce, 8, bytes, l);
  EXPECT_NEAR(ag, 7.0 / 8 * bytes / 100e9 + (8.4 + 7 * 3.4) * 1e-6, 1e-12);
  EXPECT_DOUBLE_EQ(ag, rs);
  EXPECT_NEAR(ar, 2 * 7.0 / 8 * bytes / 100e9 + (8.4 + 14 * 3.4) * 1e-6, 1e-12);
}

// A link's gather_scatter_extra lengthens the bandwidth term of an all-gather
// and a reduce-scatter by that fraction; the latency and the all-reduce keep
// the formula.
TEST(CollectiveCost, GatherScatterExtraLengthensOnlyTheirBandwidthTerm) {
  Link plain = nvlink_link(100.0);
  Link slow = plain;
  slow.gather_scatter_extra = 0.25;
  const double bytes = 1e9, latency_s = (8.4 + 7 * 3.4) * 1e-6;
  for (CollectiveKind k : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
    EXPECT_NEAR(collective_time_s(k, 8, bytes, slow) - latency_s,
                1.25 * (collective_time_s(k, 8, bytes, plain) - latency_s), 1e-12);
  }
  EXPECT_DOUBLE_EQ(collective_time_s(CollectiveKind::kAllReduce, 8, bytes, slow),
                   collective_time_s(CollectiveKind::kAllReduce, 8, bytes, plain));
  EXPECT_DOUBLE_EQ(collective_time_s(CollectiveKind::kAllGather, 8, 0, slow), 0.0);
}

TEST(CollectiveCost, OneRankOrNoBytesIsFree) {
  const Link l = network_link(24.0);
  EXPECT_EQ(collective_time_s(CollectiveKind::kAllReduce, 1, 1e9, l), 0.0);
  EXPECT_EQ(collective_time_s(CollectiveKind::kAllGather, 8, 0.0, l), 0.0);
  EXPECT_EQ(p2p_time_s(0.0, l), 0.0);
}

TEST(CollectiveCost, NetworkHopsCostMoreLatencyThanNvlink) {
  EXPECT_GT(p2p_time_s(8, network_link(24.0)), p2p_time_s(8, nvlink_link(24.0)));
  EXPECT_NEAR(p2p_time_s(8, network_link(24.0)), (8.4 + 14.0) * 1e-6 + 8 / 24e9, 1e-12);
}

TEST(CollectiveCost, SmallAllReduceIsLogarithmic) {
  const Link l = network_link(24.0);
  EXPECT_NEAR(small_allreduce_time_s(12288, l), (8.4 + 2 * 14 * 14.0) * 1e-6, 1e-12);
  EXPECT_LT(small_allreduce_time_s(12288, l), 1e-3);
}

}  // namespace
}  // namespace megascale::model
