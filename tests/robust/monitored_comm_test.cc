// MonitoredComm over the threads backend: results unchanged, sequence numbers
// per group, group names equal on every rank, hooks in order.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "engine/comm_threads.h"
#include "robust/monitored_comm.h"

namespace megascale::robust {
namespace {

TEST(MonitoredComm, CountsAndNamesGroupsAndLeavesResultsAlone) {
  std::mutex mu;
  std::map<int, RankMonitor::Snapshot> snaps;
  std::map<int, std::string> sub_names;
  engine::run_on_threads(4, [&](engine::Comm& world) {
    auto monitor = std::make_shared<RankMonitor>(world.rank());
    std::vector<std::string> order;
    monitor->before_enter = [&] { order.push_back("before"); };
    monitor->after_enter = [&] { order.push_back("after"); };
    std::vector<int> members = {0, 1, 2, 3};
    MonitoredComm w(world, monitor, members);
    float x = static_cast<float>(world.rank() + 1);
    w.all_reduce_sum(&x, 1);
    EXPECT_EQ(x, 10.0f);
    ASSERT_EQ(order, (std::vector<std::string>{"before", "after"}));
    // Pairs {0,2} and {1,3}.
    std::unique_ptr<engine::Comm> sub = w.split(world.rank() % 2, world.rank());
    ASSERT_TRUE(sub);
    float y = static_cast<float>(world.rank());
    sub->all_reduce_sum(&y, 1);
    EXPECT_EQ(y, world.rank() % 2 == 0 ? 2.0f : 4.0f);
    sub->barrier();
    w.barrier();
    std::lock_guard<std::mutex> lock(mu);
    snaps[world.rank()] = monitor->snapshot();
    sub_names[world.rank()] = static_cast<MonitoredComm*>(sub.get())->group();
  });
  EXPECT_EQ(sub_names[0], "c1[0,2]");
  EXPECT_EQ(sub_names[2], "c1[0,2]");
  EXPECT_EQ(sub_names[3], "c1[1,3]");
  for (const auto& [rank, s] : snaps) {
    EXPECT_EQ(s.current.state, "idle");
    EXPECT_EQ(s.seq_by_group.at("c0[0,1,2,3]"), 2) << "all_reduce + barrier on the world";
    EXPECT_EQ(s.seq_by_group.at(sub_names[rank]), 2) << "all_reduce + barrier on the pair";
    EXPECT_EQ(s.bytes_sent, 8u) << "two 1-float all-reduces";
    EXPECT_GT(s.comm_s, 0.0);
  }
}

TEST(MonitoredComm, AHookThatNeverReturnsLeavesTheRankEnteredAndUnposted) {
  // The hang fault's footprint: the monitor says "entered" while blocked.
  engine::run_on_threads(1, [&](engine::Comm& world) {
    auto monitor = std::make_shared<RankMonitor>(0);
    RankMonitor::Snapshot seen;
    monitor->after_enter = [&] { seen = monitor->snapshot(); };
    MonitoredComm w(world, monitor, {0});
    float x = 1;
    w.all_reduce_sum(&x, 1);
    EXPECT_EQ(seen.current.state, "entered");
    EXPECT_EQ(seen.current.op, "all_reduce");
    EXPECT_EQ(seen.current.seq, 1);
  });
}

}  // namespace
}  // namespace megascale::robust
