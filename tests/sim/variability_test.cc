// tests/sim/variability_test.cc: straggler / jitter factors and the choice of
// replicas to simulate.
#include "sim/variability.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/scenario.h"
#include "sim/comm_costs.h"  // defines: gpu_of

namespace megascale::sim {
namespace {

// 175B, TP 8, PP 8, DP 16: 1,024 GPUs, 128 machines, one TP group per machine.
model::Scenario scenario(int tp = 8) {
  model::Scenario s = model::default_scenario("megatron");
  s.parallel.tp = tp;
  s.parallel.pp = 8;
  s.parallel.vpp = 1;
  s.parallel.dp = 16;
  s.parallel.global_batch = 16 * 8;
  s.cluster.gpus = s.parallel.gpus();
  return s;
}

TEST(Variability, NothingSlowMeansOneReplica) {
  const model::Scenario s = scenario();
  const Variability v(s, {});
  EXPECT_TRUE(v.uniform());
  const StepFactors f = v.step(0);
  for (double x : f.group) EXPECT_EQ(x, 1.0);
  const ReplicaChoice c = choose_replicas(f, std::vector<double>(8, 1.0), 4);
  ASSERT_EQ(c.replicas.size(), 1u);
  EXPECT_EQ(c.distinct, 1);
  EXPECT_TRUE(c.exact);
  for (int d = 0; d < 16; ++d) EXPECT_EQ(c.replica_of[d], 0);
}

TEST(Variability, AStragglerGpuSlowsItsWholeTensorParallelGroup) {
  const model::Scenario s = scenario();
  VariabilityOptions o;
  o.stragglers.gpus = {gpu_of(s.parallel, 3, 5, 2)};  // TP 3 of replica 5, stage 2
  o.stragglers.factor = 1.25;
  const Variability v(s, o);
  EXPECT_FALSE(v.uniform());
  const StepFactors f = v.step(0);
  for (int d = 0; d < 16; ++d)
    for (int r = 0; r < 8; ++r) EXPECT_EQ(f.factor(d, r), d == 5 && r == 2 ? 1.25 : 1.0);
  const ReplicaChoice c = choose_replicas(f, std::vector<double>(8, 1.0), 4);
  ASSERT_EQ(c.replicas.size(), 2u);
  EXPECT_EQ(c.replicas[0], 5);  // the gating one first
  EXPECT_TRUE(c.exact);
  EXPECT_EQ(c.replica_of[5], 0);
  EXPECT_EQ(c.replica_of[0], 1);
}

TEST(Variability, SlowMachinesAreDrawnFromTheSeedOnceOrEveryStep) {
  const model::Scenario s = scenario();
  VariabilityOptions o;
  o.stragglers.machine_fraction = 0.05;  // round(6.4) = 6 of 128 machines
  o.seed = 11;
  const Variability fixed(s, o);
  EXPECT_EQ(fixed.machines(), 128);
  EXPECT_EQ(fixed.step(0).straggler_machines.size(), 6u);
  EXPECT_EQ(fixed.step(0).straggler_machines, fixed.step(9).straggler_machines);
  EXPECT_EQ(Variability(s, o).step(0).straggler_machines, fixed.step(0).straggler_machines);
  o.stragglers.per_step = true;
  const Variability moving(s, o);
  EXPECT_NE(moving.step(0).straggler_machines, moving.step(1).straggler_machines);
  o.seed = 12;
  o.stragglers.per_step = false;
  EXPECT_NE(Variability(s, o).step(0).straggler_machines, fixed.step(0).straggler_machines);
  // Six slow machines = six slow (replica, stage) groups here.
  int slow = 0;
  for (double x : fixed.step(0).group) slow += x > 1.0;
  EXPECT_EQ(slow, 6);
}

TEST(Variability, JitterIsLognormalWithTheGivenSigma) {
  model::Scenario s = scenario(1);  // TP 1: 128 groups of one GPU, 16 machines... use many steps
  VariabilityOptions o;
  o.jitter_sigma = 0.02;
  const Variability v(s, o);
  // log of a machine's factor ~ N(0, sigma): check over steps x machines.
  double sum = 0, sum2 = 0;
  int n = 0;
  for (int k = 0; k < 200; ++k) {
    const StepFactors f = v.step(k);
    for (int d = 0; d < 16; d += 8) {  // replicas 0 and 8 sit on different machines
      const double x = std::log(f.factor(d, 0));
      sum += x;
      sum2 += x * x;
      ++n;
    }
  }
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.004);
  EXPECT_NEAR(sd, 0.02, 0.003);
  EXPECT_EQ(v.step(3).group, Variability(s, o).step(3).group);  // reproducible
}

// The GPU speed spread is persistent (the same GPUs are slow in every step),
// lognormal per GPU with the given sigma, and a TP group runs at its slowest
// GPU's pace, so group factors sit above 1 by about the expected maximum of
// 8 normals (1.42 sigma).
TEST(Variability, GpuSpeedSpreadIsPersistentPerGpuAndGatedByTheSlowestInTheGroup) {
  const double sigma = 0.02;
  VariabilityOptions o;
  o.gpu_sigma = sigma;
  // TP 1: every group is one GPU, so group factors are the GPU factors.
  const Variability one(scenario(1), o);
  EXPECT_FALSE(one.uniform());
  const StepFactors a = one.step(0), b = one.step(7);
  EXPECT_EQ(a.group, b.group);  // persistent across steps
  double sum = 0, sum2 = 0;
  for (double f : a.group) {
    sum += std::log(f);
    sum2 += std::log(f) * std::log(f);
  }
  const double n = static_cast<double>(a.group.size());  // 8 x 16 = 128 GPUs
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 3 * sigma / std::sqrt(n));
  EXPECT_NEAR(sd, sigma, 0.25 * sigma);
  // TP 8: a group's factor is the max over its 8 GPUs.
  const StepFactors g = Variability(scenario(8), o).step(0);
  double mean_log = 0;
  for (double f : g.group) mean_log += std::log(f) / static_cast<double>(g.group.size());
  EXPECT_NEAR(mean_log / sigma, 1.42, 0.3);
  // A different seed draws a different population of GPUs.
  VariabilityOptions other = o;
  other.seed = 2;
  EXPECT_NE(Variability(scenario(8), other).step(0).group, g.group);
  // Zero spread: identical GPUs.
  EXPECT_TRUE(Variability(scenario(8), VariabilityOptions{}).uniform());
}

TEST(Variability, TooManyDistinctReplicasKeepsTheMostGating) {
  const model::Scenario s = scenario();
  VariabilityOptions o;
  o.jitter_sigma = 0.05;
  const StepFactors f = Variability(s, o).step(0);
  const std::vector<double> busy(8, 1.0);
  const ReplicaChoice c = choose_replicas(f, busy, 3);
  EXPECT_EQ(c.distinct, 16);
  ASSERT_EQ(c.replicas.size(), 3u);
  EXPECT_FALSE(c.exact);
  auto worst = [&](int d) {
    double w = 0;
    for (int r = 0; r < 8; ++r) w = std::max(w, f.factor(d, r));
    return w;
  };
  for (int d = 0; d < 16; ++d) {
    if (std::find(c.replicas.begin(), c.replicas.end(), d) != c.replicas.end()) continue;
    EXPECT_LE(worst(d), worst(c.replicas[2]));
  }
  EXPECT_GE(worst(c.replicas[0]), worst(c.replicas[1]));
}

TEST(Variability, BadValuesAreErrors) {
  {
    VariabilityOptions o;
    o.gpu_sigma = -0.1;
    EXPECT_THROW(Variability(scenario(), o), std::invalid_argument);
  }
  const model::Scenario s = scenario();
  VariabilityOptions o;
  o.stragglers.factor = 0.9;
  EXPECT_THROW(Variability(s, o), std::invalid_argument);
  o.stragglers.factor = 1.1;
  o.stragglers.machine_fraction = 1.5;
  EXPECT_THROW(Variability(s, o), std::invalid_argument);
  o.stragglers.machine_fraction = 0;
  o.stragglers.gpus = {-1};
  EXPECT_THROW(Variability(s, o), std::invalid_argument);
  o.stragglers.gpus = {};
  o.jitter_sigma = -0.1;
  EXPECT_THROW(Variability(s, o), std::invalid_argument);
  EXPECT_THROW(choose_replicas(Variability(s, {}).step(0), std::vector<double>(8, 1.0), 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace megascale::sim
