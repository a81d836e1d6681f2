// tests/engine_mpi/process_groups_mpi_test.cc: Megatron-LM layout on real MPI
// processes (registered with 8: TP=2 PP=2 DP=2; other sizes use TP=2 DP=n/2).
#include "engine/process_groups.h"

#include <gtest/gtest.h>

#include "engine/comm_mpi.h"

namespace megascale::engine {
namespace {

std::vector<int> members(Comm& group, int world_rank) {
  const float me = static_cast<float>(world_rank);
  std::vector<float> all(group.size());
  group.all_gather(&me, 1, all.data());
  return std::vector<int>(all.begin(), all.end());
}

TEST(ProcessGroupsMpi, CoordinatesAndGroupsFollowMegatron) {
  auto world = MpiComm::world();
  const int n = world->size();
  int tp = 2, pp = 2, dp = 2;
  if (n != 8) {
    if (n % 2 != 0) GTEST_SKIP() << "needs an even number of processes";
    pp = 1;
    dp = n / 2;
  }
  ProcessGroups g(*world, tp, pp, dp);
  const int r = world->rank();
  // rank = tp + dp*TP + pp*TP*DP
  EXPECT_EQ(g.tp_rank() + g.dp_rank() * tp + g.pp_rank() * tp * dp, r);
  EXPECT_EQ(g.tp_rank(), r % tp);
  EXPECT_EQ(g.dp_rank(), (r / tp) % dp);
  EXPECT_EQ(g.pp_rank(), r / (tp * dp));
  EXPECT_EQ(members(g.tp(), r), g.tp_peers());
  EXPECT_EQ(members(g.pp(), r), g.pp_peers());
  EXPECT_EQ(members(g.dp(), r), g.dp_peers());
  if (n == 8) {
    // Spelled out for TP=2 PP=2 DP=2.
    const std::vector<int> tp_group = {r - r % 2, r - r % 2 + 1};
    const std::vector<int> dp_group = {r % 2 + (r / 4) * 4, r % 2 + (r / 4) * 4 + 2};
    const std::vector<int> pp_group = {r % 4, r % 4 + 4};
    EXPECT_EQ(g.tp_peers(), tp_group);
    EXPECT_EQ(g.dp_peers(), dp_group);
    EXPECT_EQ(g.pp_peers(), pp_group);
    EXPECT_EQ(g.next_pp_world_rank(), (r + 4) % 8);
    EXPECT_EQ(members(g.embedding(), r), pp_group);
  }
  // A p2p exchange along the pipeline ring through the PP communicator.
  float out = static_cast<float>(r), in = -1;
  auto rr = g.pp().irecv(&in, 1, g.prev_pp_rank(), 1);
  auto sr = g.pp().isend(&out, 1, g.next_pp_rank(), 1);
  rr->wait();
  sr->wait();
  EXPECT_EQ(in, static_cast<float>(g.prev_pp_world_rank()));
}

}  // namespace
}  // namespace megascale::engine
