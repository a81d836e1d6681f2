// Tests of the in-process threads backend (engine/comm_threads.h) against the
// contract of engine/comm.h.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "engine/comm_threads.h"

namespace megascale::engine {
namespace {

// A value whose sums depend on the order of addition in float.
float messy(int rank, size_t i) {
  return static_cast<float>(std::pow(10.0, (rank * 7 + static_cast<int>(i)) % 9 - 4)) *
         (1.0f + 0.1234567f * static_cast<float>(rank + 1));
}

TEST(CommThreadsTest, AllReduceIsRankOrderedAndIdenticalOnEveryRank) {
  const int n = 4;
  const size_t count = 37;
  std::vector<std::vector<float>> results(n);
  run_on_threads(n, [&](Comm& world) {
    EXPECT_EQ(world.size(), n);
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = messy(world.rank(), i);
    world.all_reduce_sum(data.data(), count);
    results[world.rank()] = data;
  });
  for (size_t i = 0; i < count; ++i) {
    float expect = messy(0, i);
    for (int r = 1; r < n; ++r) expect += messy(r, i);  // ((x0 + x1) + x2) + x3
    EXPECT_EQ(results[0][i], expect) << i;
  }
  for (int r = 1; r < n; ++r) EXPECT_EQ(results[r], results[0]);
}

TEST(CommThreadsTest, AllGatherReduceScatterBroadcast) {
  const int n = 3;
  const size_t count = 5;
  run_on_threads(n, [&](Comm& world) {
    const int me = world.rank();
    std::vector<float> send(count);
    for (size_t i = 0; i < count; ++i) send[i] = float(me * 100 + int(i));
    std::vector<float> all(n * count);
    world.all_gather(send.data(), count, all.data());
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(all[r * count + i], float(r * 100 + int(i)));

    std::vector<float> full(n * count), block(count);
    for (size_t i = 0; i < full.size(); ++i) full[i] = messy(me, i);
    world.reduce_scatter_sum(full.data(), count, block.data());
    for (size_t i = 0; i < count; ++i) {
      float expect = messy(0, me * count + i);
      for (int r = 1; r < n; ++r) expect += messy(r, me * count + i);
      EXPECT_EQ(block[i], expect);
    }

    std::vector<float> b(count, float(me));
    world.broadcast(b.data(), count, 2);
    for (float v : b) EXPECT_EQ(v, 2.0f);
    world.barrier();
  });
}

// The non-blocking DP collectives (Comm::ireduce_scatter_sum, iall_gather,
// iall_reduce_sum) of a CPU backend run at the call: the request is already
// complete and the results are the blocking forms', bit for bit.
TEST(CommThreadsTest, NonBlockingCollectivesCompleteAtTheCallWithTheBlockingResults) {
  const int n = 3;
  const size_t count = 7;
  run_on_threads(n, [&](Comm& world) {
    const int me = world.rank();
    std::vector<float> full(n * count);
    for (size_t i = 0; i < full.size(); ++i) full[i] = messy(me, i);
    std::vector<float> block(count), block_async(count);
    world.reduce_scatter_sum(full.data(), count, block.data());
    std::unique_ptr<Request> rs = world.ireduce_scatter_sum(full.data(), count, block_async.data());
    EXPECT_TRUE(rs->done());
    rs->wait();
    EXPECT_EQ(block_async, block);

    std::vector<float> all(n * count), all_async(n * count);
    world.all_gather(block.data(), count, all.data());
    std::unique_ptr<Request> ag = world.iall_gather(block.data(), count, all_async.data());
    ag->wait();
    EXPECT_TRUE(ag->done());
    EXPECT_EQ(all_async, all);

    std::vector<float> sum = full, sum_async = full;
    world.all_reduce_sum(sum.data(), sum.size());
    std::unique_ptr<Request> ar = world.iall_reduce_sum(sum_async.data(), sum_async.size());
    ar->wait();
    EXPECT_EQ(sum_async, sum);
  });
}

TEST(CommThreadsTest, InPlaceAllGather) {
  run_on_threads(2, [&](Comm& world) {
    std::vector<float> buf(4, -1.0f);
    buf[world.rank() * 2] = float(world.rank());
    buf[world.rank() * 2 + 1] = float(world.rank()) + 0.5f;
    world.all_gather(buf.data() + world.rank() * 2, 2, buf.data());
    EXPECT_EQ(buf, (std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f}));
  });
}

TEST(CommThreadsTest, PointToPointMatchesByTagAndOrder) {
  run_on_threads(2, [&](Comm& world) {
    if (world.rank() == 0) {
      const float a[2] = {1, 2}, b[2] = {3, 4}, c[2] = {5, 6};
      auto r1 = world.isend(a, 2, 1, /*tag=*/7);
      auto r2 = world.isend(b, 2, 1, /*tag=*/9);
      auto r3 = world.isend(c, 2, 1, /*tag=*/7);
      r1->wait();
      r2->wait();
      r3->wait();
      EXPECT_TRUE(r1->done());
    } else {
      float x[2], y[2], z[2];
      // Posted: tag 7 twice, then tag 9; waited in reverse order.
      auto first7 = world.irecv(x, 2, 0, 7);
      auto second7 = world.irecv(y, 2, 0, 7);
      auto only9 = world.irecv(z, 2, 0, 9);
      only9->wait();
      second7->wait();
      first7->wait();
      first7->wait();  // idempotent
      EXPECT_EQ(x[0], 1);
      EXPECT_EQ(y[0], 5);  // the second send with tag 7
      EXPECT_EQ(z[1], 4);
      EXPECT_TRUE(first7->done());
    }
  });
}

TEST(CommThreadsTest, RecvSizeMismatchThrows) {
  EXPECT_THROW(run_on_threads(2,
                              [&](Comm& world) {
                                float buf[3] = {0, 0, 0};
                                if (world.rank() == 0) {
                                  world.isend(buf, 3, 1, 0)->wait();
                                } else {
                                  world.irecv(buf, 2, 0, 0)->wait();
                                }
                              }),
               std::runtime_error);
}

TEST(CommThreadsTest, SplitFollowsColorAndKey) {
  const int n = 6;
  std::mutex mu;
  std::vector<std::pair<int, int>> rank_size(n);
  run_on_threads(n, [&](Comm& world) {
    const int me = world.rank();
    // Colors: even / odd; key reverses the order; rank 5 opts out.
    const int color = me == 5 ? -1 : me % 2;
    std::unique_ptr<Comm> sub = world.split(color, -me);
    if (me == 5) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    {
      std::lock_guard<std::mutex> lk(mu);
      rank_size[me] = {sub->rank(), sub->size()};
    }
    // The sub-communicator works on its own: sum of world ranks in the group.
    float v = float(me);
    sub->all_reduce_sum(&v, 1);
    EXPECT_EQ(v, me % 2 == 0 ? 0.0f + 2.0f + 4.0f : 1.0f + 3.0f);
    // Splitting again (a group of a group).
    std::unique_ptr<Comm> again = sub->split(0, sub->rank());
    EXPECT_EQ(again->size(), sub->size());
    again->barrier();
  });
  // Even ranks {0,2,4} keyed -me: order 4, 2, 0.
  EXPECT_EQ(rank_size[4], std::make_pair(0, 3));
  EXPECT_EQ(rank_size[2], std::make_pair(1, 3));
  EXPECT_EQ(rank_size[0], std::make_pair(2, 3));
  // Odd ranks {1,3}: order 3, 1.
  EXPECT_EQ(rank_size[3], std::make_pair(0, 2));
  EXPECT_EQ(rank_size[1], std::make_pair(1, 2));
}

TEST(CommThreadsTest, FirstExceptionIsRethrownAndPeersAreReleased) {
  std::atomic<int> aborted{0};
  try {
    run_on_threads(3, [&](Comm& world) {
      if (world.rank() == 1) throw std::invalid_argument("rank 1 failed");
      try {
        world.barrier();  // would wait forever for rank 1
      } catch (const CommAborted&) {
        ++aborted;
        throw;
      }
    });
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "rank 1 failed");
  }
  EXPECT_EQ(aborted.load(), 2);
}

TEST(CommThreadsTest, MismatchedCollectivesThrowOnEveryRank) {
  std::atomic<int> errors{0};
  EXPECT_THROW(run_on_threads(2,
                              [&](Comm& world) {
                                std::vector<float> v(4, 1.0f);
                                try {
                                  if (world.rank() == 0) {
                                    world.all_reduce_sum(v.data(), 4);
                                  } else {
                                    world.all_reduce_sum(v.data(), 3);
                                  }
                                } catch (const std::runtime_error&) {
                                  ++errors;
                                  throw;
                                }
                              }),
               std::runtime_error);
  EXPECT_EQ(errors.load(), 2);
}

TEST(CommThreadsTest, DeadlockTimesOut) {
  EXPECT_THROW(run_on_threads(
                   2,
                   [&](Comm& world) {
                     float x = 0;
                     if (world.rank() == 1) world.irecv(&x, 1, 0, 0)->wait();  // never sent
                   },
                   /*timeout_s=*/0.2),
               std::runtime_error);
}

TEST(CommThreadsTest, SingleRankWorld) {
  run_on_threads(1, [&](Comm& world) {
    float v[2] = {1.5f, 2.5f}, out[2];
    world.all_reduce_sum(v, 2);
    EXPECT_EQ(v[1], 2.5f);
    world.all_gather(v, 2, out);
    EXPECT_EQ(out[0], 1.5f);
    world.reduce_scatter_sum(v, 2, out);
    EXPECT_EQ(out[1], 2.5f);
    world.barrier();
  });
}

}  // namespace
}  // namespace megascale::engine
