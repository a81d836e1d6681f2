// [[inject]] and the live-run [recovery] keys of `megascale run`.
#include <gtest/gtest.h>

#include "model/scenario.h"

namespace megascale::model {
namespace {

const char* kBase = R"(
[model]
layers = 2
hidden = 32
heads = 2
seq_len = 16
vocab = 64
[parallel]
tp = 1
pp = 1
dp = 2
micro_batch = 2
global_batch = 8
[hardware]
gpu = "cpu"
[cluster]
gpus = 2
[train]
steps = 10
)";

std::string error_of(const std::string& extra) {
  try {
    parse_scenario(std::string(kBase) + extra, "robust.toml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

TEST(InjectScenario, ReadsFaultsAndLiveRecoveryKeys) {
  const Scenario s = parse_scenario(std::string(kBase) + R"(
[recovery]
redis = "127.0.0.1:6390"
step_stall_s = 4
slow_factor = 2
slow_steps = 2
evict_slow = true
[[inject]]
fault = "kill"
rank = 1
step = 5
[[inject]]
fault = "slow"
rank = 0
step = 3
percent = 200
)",
                                    "robust.toml");
  EXPECT_EQ(s.recovery.redis, "127.0.0.1:6390");
  EXPECT_DOUBLE_EQ(s.recovery.step_stall_s, 4);
  EXPECT_TRUE(s.recovery.evict_slow);
  ASSERT_EQ(s.inject.size(), 2u);
  EXPECT_EQ(s.inject[0].fault, "kill");
  EXPECT_EQ(s.inject[0].rank, 1);
  EXPECT_EQ(s.inject[1].percent, 200);
}

TEST(InjectScenario, BadKeysNameFileKeyAndReason) {
  EXPECT_NE(error_of("[[inject]]\nfault = \"kil\"\nstep = 2\n").find("inject.fault"), std::string::npos);
  EXPECT_NE(error_of("[[inject]]\nfault = \"kil\"\nstep = 2\n").find("not allowed"), std::string::npos);
  EXPECT_NE(error_of("[[inject]]\nfault = \"kill\"\nrnak = 1\n").find("did you mean 'rank'"), std::string::npos);
  EXPECT_NE(error_of("[[inject]]\nfault = \"kill\"\nrank = 2\nstep = 1\n").find("not below cluster.gpus"),
            std::string::npos);
  EXPECT_NE(error_of("[[inject]]\nfault = \"kill\"\nrank = 1\nstep = 11\n").find("after the last step"),
            std::string::npos);
  EXPECT_NE(error_of("[[inject]]\nfault = \"slow\"\nrank = 1\nstep = 2\n").find("percent"), std::string::npos);
  EXPECT_NE(error_of("[recovery]\nredis = \"localhost\"\n").find("recovery.redis"), std::string::npos);
  EXPECT_NE(error_of("[recovery]\nslow_factor = 0.5\n").find("must be > 1"), std::string::npos);
  EXPECT_NE(error_of("[recovery]\nstep_stal_s = 3\n").find("did you mean 'step_stall_s'"), std::string::npos);
  EXPECT_NE(error_of("[recovery]\nstep_stal_s = 3\n").find("robust.toml"), std::string::npos);
  EXPECT_NE(error_of("[recovery]\nnodes = \"vm\"\n").find("recovery.nodes"), std::string::npos);
  EXPECT_NE(error_of("[[inject]]\nfault = \"slow_all\"\nrank = 1\nstep = 2\npercent = 100\n").find("names no rank"),
            std::string::npos);
  EXPECT_NE(error_of("[[inject]]\nfault = \"slow_all\"\nstep = 2\n").find("percent"), std::string::npos);
}

TEST(InjectScenario, NodesAndJobWideFaults) {
  const Scenario s = parse_scenario(
      std::string(kBase) + "[recovery]\nnodes = \"netns\"\n[[inject]]\nfault = \"slow_all\"\nstep = 4\npercent = 300\n"
                           "[[inject]]\nfault = \"link_cut\"\nrank = 1\nstep = 5\n",
      "robust.toml");
  EXPECT_EQ(s.recovery.nodes, "netns");
  ASSERT_EQ(s.inject.size(), 2u);
  EXPECT_EQ(s.inject[0].rank, -1);
  EXPECT_EQ(s.inject[0].percent, 300);
  EXPECT_EQ(s.inject[1].fault, "link_cut");
}

}  // namespace
}  // namespace megascale::model
