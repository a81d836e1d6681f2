// tests/cli/check_command_test.cc: `megascale check DIR --golden FILE`, the CI
// gate of issue 13, end to end: record, pass, a regression beyond the
// tolerance, a change within it, new and removed scenarios, and bad input
// (exit 2 naming the file and key).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_megascale.h"

namespace megascale::cli_testing {
namespace {

using Json = nlohmann::ordered_json;

class CheckCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("megascale-check-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "scenarios" / "team");
    fs::copy_file(kSourceDir + "/scenarios/example-small.toml", dir_ / "scenarios" / "small.toml");
    fs::copy_file(kSourceDir + "/scenarios/paper/table2-megascale-256.toml",
                  dir_ / "scenarios" / "team" / "megascale-256.toml");
    golden_ = (dir_ / "ci" / "golden.json").string();
    fs::create_directories(dir_ / "ci");
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunResult check(std::vector<std::string> extra) {
    std::vector<std::string> args = {"check", (dir_ / "scenarios").string(), "--golden", golden_,
                                     "--fidelity", "analytical"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_megascale(args);
  }
  Json golden() {
    std::ifstream in(golden_);
    return Json::parse(in);
  }
  void store(const Json& j) { std::ofstream(golden_) << j.dump(2); }

  fs::path dir_;
  std::string golden_;
};

TEST_F(CheckCommand, RecordsThenPassesAndKeysArePathsBesideTheGolden) {
  RunResult r = check({"--update"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json g = golden();
  EXPECT_EQ(g["fidelity"], "analytical");
  EXPECT_EQ(g["schema_version"], 1);
  ASSERT_TRUE(g["scenarios"].contains("../scenarios/small.toml")) << g.dump(2);
  ASSERT_TRUE(g["scenarios"].contains("../scenarios/team/megascale-256.toml")) << g.dump(2);
  EXPECT_GT(g["scenarios"]["../scenarios/small.toml"]["iteration_time_s"].get<double>(), 0);
  EXPECT_TRUE(g["scenarios"]["../scenarios/small.toml"]["breakdown_s"].contains("compute"));
  r = check({});
  EXPECT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("check: pass"), std::string::npos) << r.out;
  r = check({"--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["pass"], true);
  EXPECT_EQ(j["checked"], 2);
  EXPECT_EQ(j.value("tool_version", "").rfind("megascale ", 0), 0u);
}

// A stored figure 3% away fails at 2% and passes at 5%; the diff names the
// scenario, the key and both values.
TEST_F(CheckCommand, ChangeBeyondTheToleranceIsARegression) {
  ASSERT_EQ(check({"--update"}).exit_code, 0);
  Json g = golden();
  const std::string key = "../scenarios/team/megascale-256.toml";
  const double t = g["scenarios"][key]["iteration_time_s"];
  g["scenarios"][key]["iteration_time_s"] = t * 1.03;
  store(g);
  RunResult r = check({});
  EXPECT_EQ(r.exit_code, 1) << dump(r);
  EXPECT_NE(r.out.find("REGRESSION"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(key + "  iteration_time_s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check: FAIL"), std::string::npos) << r.out;
  r = check({"--tolerance", "5%"});
  EXPECT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("moved"), std::string::npos) << r.out;  // shown, not failed
  r = check({"--tolerance", "0.05", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = Json::parse(r.out);
  ASSERT_FALSE(j["changes"].empty());
  EXPECT_EQ(j["changes"][0]["metric"], "iteration_time_s");
  EXPECT_NEAR(j["changes"][0]["change"].get<double>(), 1 / 1.03 - 1, 1e-9);
  EXPECT_EQ(j["changes"][0]["regression"], false);
}

// A breakdown component is measured against the step: a tiny component moving
// by half of itself is not a regression, a whole-step shift is.
TEST_F(CheckCommand, BreakdownChangesCountAsShareOfTheStep) {
  ASSERT_EQ(check({"--update"}).exit_code, 0);
  Json g = golden();
  const std::string key = "../scenarios/small.toml";
  Json& b = g["scenarios"][key]["breakdown_s"];
  const double step = g["scenarios"][key]["iteration_time_s"];
  b["host"] = b["host"].get<double>() + 0.001 * step;  // 0.1% of the step
  store(g);
  EXPECT_EQ(check({}).exit_code, 0);
  b["compute"] = b["compute"].get<double>() + 0.1 * step;  // 10% of the step
  store(g);
  const RunResult r = check({});
  EXPECT_EQ(r.exit_code, 1) << dump(r);
  EXPECT_NE(r.out.find("breakdown_s.compute"), std::string::npos) << r.out;
}

TEST_F(CheckCommand, NewAndRemovedScenariosFailUntilRecorded) {
  ASSERT_EQ(check({"--update"}).exit_code, 0);
  fs::copy_file(kSourceDir + "/scenarios/example-small.toml", dir_ / "scenarios" / "team" / "new.toml");
  RunResult r = check({});
  EXPECT_EQ(r.exit_code, 1) << dump(r);
  EXPECT_NE(r.out.find("NEW        ../scenarios/team/new.toml"), std::string::npos) << r.out;
  ASSERT_EQ(check({"--update"}).exit_code, 0);
  fs::remove(dir_ / "scenarios" / "small.toml");
  r = check({});
  EXPECT_EQ(r.exit_code, 1) << dump(r);
  EXPECT_NE(r.out.find("REMOVED    ../scenarios/small.toml"), std::string::npos) << r.out;
  ASSERT_EQ(check({"--update"}).exit_code, 0);
  EXPECT_FALSE(golden()["scenarios"].contains("../scenarios/small.toml"));
  // Checking one file of several lists the others as not run, without failing.
  r = run_megascale({"check", (dir_ / "scenarios" / "team" / "new.toml").string(), "--golden", golden_});
  EXPECT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("not run    ../scenarios/team/megascale-256.toml"), std::string::npos) << r.out;
}

TEST_F(CheckCommand, BadInputNamesTheFileAndKey) {
  RunResult r = check({});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("no such golden file (record one with --update)"), std::string::npos) << dump(r);
  std::ofstream(golden_) << "{\"schema_version\": 1, \"fidelity\": \"analytical\", \"scenarios\": {\"a.toml\": "
                            "{\"mfu\": 0.5}}}";
  r = check({});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(golden_ + ": key 'scenarios.a.toml.iteration_time_s': missing"), std::string::npos)
      << dump(r);
  std::ofstream(golden_) << "not json";
  r = check({});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(golden_ + ":1:2: not valid JSON ("), std::string::npos) << dump(r);
  // --update refuses to overwrite a golden file it cannot read: nothing is lost.
  r = check({"--update"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  std::ifstream kept(golden_);
  std::string first;
  std::getline(kept, first);
  EXPECT_EQ(first, "not json");
  fs::remove(golden_);
  ASSERT_EQ(check({"--update"}).exit_code, 0);
  r = run_megascale({"check", (dir_ / "scenarios").string(), "--golden", golden_, "--fidelity", "event"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("recorded at analytical fidelity"), std::string::npos) << dump(r);
  r = check({"--tolerance", "2"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--tolerance expects"), std::string::npos) << dump(r);
  r = run_megascale({"check", (dir_ / "nowhere").string(), "--golden", golden_});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("no such scenario file or directory"), std::string::npos) << dump(r);
  // A broken scenario: the parser's file:line:key error, exit 2.
  std::ofstream(dir_ / "scenarios" / "broken.toml") << "[parallel]\ntp = \"eight\"\n";
  r = check({});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("broken.toml"), std::string::npos) << dump(r);
}

// The event fidelity (the default when recording) is deterministic: a second
// run matches the first exactly.
TEST_F(CheckCommand, EventFidelityIsReproducible) {
  fs::remove(dir_ / "scenarios" / "team" / "megascale-256.toml");
  RunResult r = run_megascale({"check", (dir_ / "scenarios").string(), "--golden", golden_, "--update"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_EQ(golden()["fidelity"], "event");
  r = run_megascale({"check", (dir_ / "scenarios").string(), "--golden", golden_, "--tolerance", "0"});
  EXPECT_EQ(r.exit_code, 0) << dump(r);
}

}  // namespace
}  // namespace megascale::cli_testing
