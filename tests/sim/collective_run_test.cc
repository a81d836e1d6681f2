// sim::answer_collective (sim/collective_run.h): `megascale net collective` as
// asked: the job checked against the machine, then run through NCCL's tuner.
#include "sim/collective_run.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>

namespace megascale::sim {
namespace {

CollectiveQuery allreduce(int ranks, double bytes) {
  CollectiveQuery q;
  q.job.op = network::CollectiveOp::kAllReduce;
  q.job.ranks = ranks;
  q.job.bytes = bytes;
  q.job.ranks_per_server = 0;  // answer_collective's default: gcd(ranks, GPUs per server)
  return q;
}

std::string error_of(const CollectiveQuery& q) {
  try {
    answer_collective(q);
  } catch (const CollectiveChoiceError& e) {
    return e.what();
  }
  return "";
}

TEST(AnswerCollective, FillsRanksPerServerAndOverrides) {
  CollectiveQuery q = allreduce(12, 1 << 30);
  q.qps_per_connection = 4;
  q.congestion_control = network::CcAlgorithm::kDcqcn;
  const CollectiveAnswer a = answer_collective(q);
  EXPECT_EQ(a.job.ranks_per_server, 4);  // gcd(12 ranks, 8 GPUs per server)
  EXPECT_EQ(a.machine.ecmp.qps_per_connection, 4);
  EXPECT_EQ(a.machine.options.congestion_control, network::CcAlgorithm::kDcqcn);
  EXPECT_EQ(a.machine.gpu.name, kDefaultCollectiveGpu);
  EXPECT_EQ(a.run.tuned.best.ranks, 12);
  EXPECT_GT(a.run.tuned.best.time_s, 0);
}

// Rings that cross the aggregation and core tiers (servers scattered): with
// one QP per connection ECMP's hash collisions cost bandwidth; InfiniBand's
// adaptive routing balances the step's flows and keeps the bus bandwidth of
// rings that stay under their ToRs.
TEST(AnswerCollective, AdaptiveRoutingAvoidsEcmpCollisions) {
  auto busbw = [](bool scattered, std::optional<network::RoutingMode> routing) {
    CollectiveQuery q = allreduce(256, 1 << 30);  // 256 servers: 4 ToR sets
    q.job.op = network::CollectiveOp::kAllGather;
    q.job.algorithm = network::CollectiveAlgorithm::kRing;
    q.job.ranks_per_server = 1;
    q.job.groups = 8;
    q.job.scattered = scattered;
    q.routing = routing;
    const CollectiveAnswer a = answer_collective(q);
    EXPECT_EQ(a.machine.ecmp.routing, routing.value_or(network::RoutingMode::kEcmp));
    return a.run.tuned.best.busbw_gbs;
  };
  const double packed = busbw(false, std::nullopt);
  const double ecmp = busbw(true, std::nullopt);
  const double adaptive = busbw(true, network::RoutingMode::kAdaptive);
  std::printf("[ info ] 8 x 256-rank ring all-gathers of 1 GiB, busbw GB/s: under the ToRs %.1f, scattered "
              "ECMP %.1f, scattered adaptive %.1f\n",
              packed, ecmp, adaptive);
  EXPECT_LT(ecmp, 0.5 * packed);  // 6.6 against 20.7 GB/s
  EXPECT_GT(adaptive, 0.99 * packed);
}

TEST(AnswerCollective, RefusesJobsTheMachineCannotHold) {
  CollectiveQuery q = allreduce(8, 1 << 20);
  q.job.ranks_per_server = 3;
  EXPECT_NE(error_of(q).find("ranks per server (3) must divide"), std::string::npos) << error_of(q);
  q = allreduce(8, 1 << 20);
  q.job.op = network::CollectiveOp::kAllGather;
  q.job.algorithm = network::CollectiveAlgorithm::kTree;
  EXPECT_NE(error_of(q).find("allreduce only"), std::string::npos) << error_of(q);
  q = allreduce(1 << 20, 1 << 20);
  q.job.groups = 64;
  EXPECT_NE(error_of(q).find("at most 16777216"), std::string::npos) << error_of(q);
}

}  // namespace
}  // namespace megascale::sim
