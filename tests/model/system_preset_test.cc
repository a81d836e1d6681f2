// tests/model/system_preset_test.cc: the two systems MegaScale compares.
#include "model/system_preset.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "model/scenario.h"

namespace megascale::model {
namespace {

TEST(SystemPreset, MegascaleSwitchesBlockWindowAndOptimizer) {
  const Scenario s = as_system(default_scenario("megatron"), "megascale");
  EXPECT_EQ(s.optimizations.preset, "megascale");
  EXPECT_TRUE(s.optimizations.tp_overlap && s.optimizations.pp_overlap && s.optimizations.dp_overlap);
  EXPECT_TRUE(s.optimizations.efficient_operators && s.optimizations.data_pipeline);
  EXPECT_EQ(s.model.block, BlockKind::kParallel);
  EXPECT_EQ(s.model.attention_window, 1024);  // half of 2,048 (assumption)
  EXPECT_EQ(s.optimizations.optimizer, OptimizerKind::kLamb);
  // The job itself is unchanged.
  EXPECT_EQ(s.parallel.dp, 192);
  EXPECT_EQ(s.parallel.global_batch, 6144);
  EXPECT_EQ(s.model.hidden, 12288);
}

TEST(SystemPreset, MegatronUndoesEveryTechnique) {
  const Scenario s = as_system(default_scenario("megascale"), "megatron");
  EXPECT_FALSE(s.optimizations.tp_overlap || s.optimizations.pp_overlap || s.optimizations.dp_overlap);
  EXPECT_FALSE(s.optimizations.efficient_operators || s.optimizations.data_pipeline);
  EXPECT_EQ(s.model.block, BlockKind::kSequential);
  EXPECT_EQ(s.model.attention_window, 0);
  EXPECT_EQ(s.optimizations.optimizer, OptimizerKind::kAdam);
}

TEST(SystemPreset, AJobsOwnWindowIsKept) {
  Scenario job = default_scenario("megatron");
  job.model.attention_window = 512;
  EXPECT_EQ(as_system(job, "megascale").model.attention_window, 512);
}

TEST(SystemPreset, UnknownSystemIsAnError) {
  EXPECT_THROW(as_system(default_scenario("megatron"), "deepspeed"), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::model
