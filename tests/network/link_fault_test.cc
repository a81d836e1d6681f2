// tests/network/link_fault_test.cc: retransmission after a link flap (NCCL over
// IB/RoCE) and ECMP re-hash around failed uplinks.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "network/link_fault.h"

namespace megascale::network {
namespace {

TEST(LinkFaultTimeout, DefaultsGiveAbout4_3Seconds) {
  EXPECT_NEAR(ib_ack_timeout_s(20), 4.096e-6 * 1048576, 1e-12);
  EXPECT_NEAR(ib_ack_timeout_s(20), 4.295, 0.001);
  const IbRetransmitConfig d = nccl_default_retransmit();
  EXPECT_EQ(d.ib_timeout, 20);
  EXPECT_EQ(d.retry_cnt, 7);
  EXPECT_EQ(d.schedule, RetransmitSchedule::kFixed);
  EXPECT_NEAR(retry_budget_s(d), 8 * 4.295, 0.01);  // (retry + 1) x timeout
  EXPECT_EQ(validate_retransmit(d), "");
  EXPECT_TRUE(std::isinf(ib_ack_timeout_s(0)));
}

TEST(LinkFaultTimeout, FixedScheduleHasNoBackoff) {
  const auto times = retransmit_times_s(nccl_default_retransmit());
  ASSERT_EQ(times.size(), 7u);
  const double t = ib_ack_timeout_s(20);
  for (int k = 0; k < 7; ++k) EXPECT_NEAR(times[k], (k + 1) * t, 1e-9);
}

TEST(LinkFaultFlap, ShortFlapRecoversAtTheFirstRetry) {
  const IbRetransmitConfig d = nccl_default_retransmit();
  const double t = ib_ack_timeout_s(d.ib_timeout);
  for (double flap : {0.0, 1e-3, 0.5, t}) {
    const FlapOutcome o = simulate_link_flap(d, flap);
    EXPECT_TRUE(o.recovered) << flap;
    EXPECT_EQ(o.retransmissions, 1) << flap;
    // The stall is a whole timeout, however short the flap.
    EXPECT_NEAR(o.stall_s, t + d.rtt_s, 1e-9) << flap;
  }
}

TEST(LinkFaultFlap, LongerFlapsWaitForTheNextRetry) {
  const IbRetransmitConfig d = nccl_default_retransmit();
  const double t = ib_ack_timeout_s(d.ib_timeout);
  const FlapOutcome o = simulate_link_flap(d, 2.5 * t);
  EXPECT_TRUE(o.recovered);
  EXPECT_EQ(o.retransmissions, 3);
  EXPECT_NEAR(o.stall_s, 3 * t + d.rtt_s, 1e-9);
  // Up exactly when the last (7th) retry leaves: still recovered.
  const FlapOutcome last = simulate_link_flap(d, 7 * t);
  EXPECT_TRUE(last.recovered);
  EXPECT_EQ(last.retransmissions, 7);
}

TEST(LinkFaultFlap, FlapBeyondTheRetryBudgetFailsTheJob) {
  const IbRetransmitConfig d = nccl_default_retransmit();
  const double t = ib_ack_timeout_s(d.ib_timeout);
  for (double flap : {7.01 * t, 8 * t, 60.0}) {
    const FlapOutcome o = simulate_link_flap(d, flap);
    EXPECT_FALSE(o.recovered) << flap;
    EXPECT_EQ(o.retransmissions, 7) << flap;
    EXPECT_NEAR(o.stall_s, 8 * t, 1e-9) << flap;  // the QP errors at (retry+1) x timeout
  }
}

TEST(LinkFaultFlap, MegaScaleSettingsSurviveAFlapThatKillsTheDefaults) {
  const IbRetransmitConfig d = nccl_default_retransmit();
  const IbRetransmitConfig m = megascale_retransmit();
  EXPECT_EQ(validate_retransmit(m), "");
  EXPECT_GT(retry_budget_s(m), retry_budget_s(d));
  const double flap = 45.0;  // seconds: a switch reboot-scale flap
  EXPECT_FALSE(simulate_link_flap(d, flap).recovered);
  const FlapOutcome o = simulate_link_flap(m, flap);
  EXPECT_TRUE(o.recovered);
  EXPECT_GE(o.stall_s, flap);
  EXPECT_LT(o.stall_s, flap + ib_ack_timeout_s(m.ib_timeout) + 1e-6);
  // Adaptive retransmission also shortens the stall after a short flap: the first
  // retry comes after ~17 ms instead of a whole 4.3 s (default) or 17 s timeout.
  const FlapOutcome short_flap = simulate_link_flap(m, 5e-3);
  EXPECT_TRUE(short_flap.recovered);
  EXPECT_LT(short_flap.stall_s, 0.05);
  EXPECT_GT(simulate_link_flap(d, 5e-3).stall_s, 4.0);
}

TEST(LinkFaultFlap, AdaptiveScheduleDoublesUpToTheQpTimeout) {
  const IbRetransmitConfig m = megascale_retransmit();
  const auto times = retransmit_times_s(m);
  const double cap = ib_ack_timeout_s(m.ib_timeout);
  ASSERT_GE(times.size(), 3u);
  EXPECT_NEAR(times[0], m.adaptive_initial_timeout_s, 1e-12);
  EXPECT_NEAR(times[1] - times[0], 2 * m.adaptive_initial_timeout_s, 1e-12);
  for (std::size_t k = 1; k < times.size(); ++k) {
    EXPECT_LE(times[k] - times[k - 1], cap * (1 + 1e-12));
    EXPECT_LE(times[k], retry_budget_s(m) * (1 + 1e-12));
  }
  EXPECT_NEAR(times.back() - times[times.size() - 2], cap, 1e-9);
}

TEST(LinkFaultFlap, ValidateRejectsOutOfRangeSettings) {
  IbRetransmitConfig c;
  c.retry_cnt = 8;
  EXPECT_NE(validate_retransmit(c), "");
  EXPECT_THROW(simulate_link_flap(c, 1.0), std::invalid_argument);
  c = IbRetransmitConfig{};
  c.ib_timeout = 32;
  EXPECT_NE(validate_retransmit(c), "");
  c.ib_timeout = 0;
  EXPECT_NE(validate_retransmit(c), "");
  EXPECT_THROW(simulate_link_flap(IbRetransmitConfig{}, -1), std::invalid_argument);
}

TEST(LinkFaultEcmp, ConsistentHashMovesOnlyTheFailedLinksFlows) {
  const EcmpRehashResult r = ecmp_rehash(8, {3}, EcmpRehash::kConsistent);
  EXPECT_EQ(r.surviving, (std::vector<int>{0, 1, 2, 4, 5, 6, 7}));
  EXPECT_DOUBLE_EQ(r.moved_fraction, 1.0 / 8);
  EXPECT_DOUBLE_EQ(r.min_moved_fraction, 1.0 / 8);
  const EcmpRehashResult two = ecmp_rehash(16, {0, 5, 5}, EcmpRehash::kConsistent);
  EXPECT_EQ(two.surviving.size(), 14u);
  EXPECT_DOUBLE_EQ(two.moved_fraction, 2.0 / 16);
}

TEST(LinkFaultEcmp, ModuloRehashMovesMostFlows) {
  // 8 -> 7 uplinks, last one failed: h mod 8 == h mod 7 only for h mod 56 < 7.
  const EcmpRehashResult r = ecmp_rehash(8, {7}, EcmpRehash::kModulo);
  EXPECT_DOUBLE_EQ(r.moved_fraction, 49.0 / 56);
  EXPECT_GT(r.moved_fraction, r.min_moved_fraction);
  // Moving a failed link's flows is unavoidable under any scheme.
  for (int n : {2, 4, 16, 64}) {
    const EcmpRehashResult m = ecmp_rehash(n, {0}, EcmpRehash::kModulo);
    EXPECT_GE(m.moved_fraction, 1.0 / n);
    EXPECT_EQ(ecmp_rehash(n, {0}, EcmpRehash::kConsistent).moved_fraction, 1.0 / n);
  }
  EXPECT_EQ(ecmp_rehash(4, {}, EcmpRehash::kModulo).moved_fraction, 0.0);
  EXPECT_THROW(ecmp_rehash(2, {0, 1}, EcmpRehash::kModulo), std::invalid_argument);
  EXPECT_THROW(ecmp_rehash(2, {2}, EcmpRehash::kModulo), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::network
