// tests/model/scenario_overrides_test.cc: `--set dotted.key=value` overrides of a
// scenario (model/scenario.h parse_scenario with overrides): values as TOML or
// bare strings, tables created, the same checks as the file, and errors that
// name the override.
#include <gtest/gtest.h>

#include "tests/model/valid_scenario.h"

#include <string>
#include <vector>

#include "model/scenario.h"

namespace megascale::model {
namespace {

constexpr const char* kValid = testing::kValidScenario;

Scenario with(const std::vector<std::string>& overrides) { return parse_scenario(kValid, "t.toml", overrides); }

ScenarioError error_with(const std::vector<std::string>& overrides) {
  try {
    with(overrides);
  } catch (const ScenarioError& e) {
    return e;
  }
  ADD_FAILURE() << "no ScenarioError";
  return ScenarioError("", 0, 0, "", "");
}

TEST(ScenarioOverrides, ValuesReplaceTheFilesAndKeepTheRest) {
  const Scenario base = with({});
  EXPECT_EQ(base.parallel.dp, 4);
  const Scenario s = with({"parallel.pp=4", "parallel.global_batch=128"});
  EXPECT_EQ(s.parallel.pp, 4);
  EXPECT_EQ(s.parallel.dp, 2);  // derived from the overridden pp
  EXPECT_EQ(s.parallel.global_batch, 128);
  EXPECT_EQ(s.parallel.tp, 2);
  EXPECT_EQ(s.model.layers, 24);
  EXPECT_EQ(s.source, "t.toml");
  // In order: the last one wins.
  EXPECT_EQ(with({"parallel.pp=4", "parallel.pp=1"}).parallel.pp, 1);
}

TEST(ScenarioOverrides, TomlValuesBareStringsAndNewTables) {
  EXPECT_DOUBLE_EQ(with({"hardware.gpu_speed_sigma=0.03"}).hardware.gpu_speed_sigma, 0.03);
  EXPECT_EQ(with({"hardware.gpu=H100-SXM5-80GB"}).hardware.gpu, "H100-SXM5-80GB");
  EXPECT_EQ(with({"hardware.gpu=\"H100-SXM5-80GB\""}).hardware.gpu, "H100-SXM5-80GB");
  EXPECT_FALSE(with({"optimizations.tp_overlap=false"}).optimizations.tp_overlap);
  EXPECT_TRUE(with({"optimizations.tp_overlap=true"}).optimizations.tp_overlap);
  EXPECT_EQ(with({"run.runs=7"}).run.runs, 7);  // [run] is not in the file
}

TEST(ScenarioOverrides, AnOverriddenValueIsCheckedAndTheErrorNamesTheOverride) {
  ScenarioError e = error_with({"parallel.tp=0"});
  EXPECT_EQ(e.file(), "--set parallel.tp=0");
  EXPECT_EQ(e.line(), 0);
  EXPECT_EQ(e.key(), "parallel.tp");
  e = error_with({"optimizations.tp_overlap=maybe"});
  EXPECT_EQ(e.file(), "--set optimizations.tp_overlap=maybe");
  EXPECT_NE(e.reason().find("expected a boolean"), std::string::npos) << e.what();
  e = error_with({"parallel.tpp=2"});
  EXPECT_EQ(e.file(), "--set parallel.tpp=2");
  EXPECT_NE(e.reason().find("did you mean 'tp'"), std::string::npos) << e.what();
  e = error_with({"bogus.x=1"});
  EXPECT_EQ(e.file(), "--set bogus.x=1");
  EXPECT_EQ(e.key(), "bogus");
  // A cross-key check names the key it is about, where that key was set: here
  // the file's cluster.gpus, with the overridden dp in the reason.
  e = error_with({"parallel.dp=3"});
  EXPECT_EQ(e.file(), "t.toml");
  EXPECT_EQ(e.key(), "cluster.gpus");
  EXPECT_NE(e.reason().find("2*2*3"), std::string::npos) << e.what();
  e = error_with({"cluster.gpus=24", "parallel.dp=4"});
  EXPECT_EQ(e.file(), "--set cluster.gpus=24");
  EXPECT_EQ(e.key(), "cluster.gpus");
}

TEST(ScenarioOverrides, MalformedOverridesAreNamed) {
  for (const std::string& bad : {std::string("parallel.tp"), std::string("parallel..tp=2"), std::string("=2"),
                                 std::string("parallel.t p=2")}) {
    const ScenarioError e = error_with({bad});
    EXPECT_EQ(e.file(), "--set " + bad) << e.what();
  }
  ScenarioError e = error_with({"parallel=3"});
  EXPECT_NE(e.reason().find("is a table"), std::string::npos) << e.what();
  e = error_with({"parallel.tp.x=3"});
  EXPECT_EQ(e.key(), "parallel.tp");
  EXPECT_NE(e.reason().find("not a table"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace megascale::model
