// tests/cli/plan_command_test.cc: `megascale plan` end to end: the JSON keys of
// issue 5, the sweep and its SVG plot, and usage errors (exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "run_megascale.h"

namespace {

using namespace megascale::cli_testing;
const std::string kMegaScale = kSourceDir + "/scenarios/paper/megascale-175b-12288-3weeks.toml";

TEST(PlanCommandTest, JsonHasTheIssueKeys) {
  const RunResult r = run_megascale({"plan", kMegaScale, "--json", "--runs", "50"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  for (const char* key : {"ettr_mean", "ettr_p5", "ettr_p95", "restarts_mean", "days_to_finish",
                          "lost_hours_by_cause", "best_checkpoint_interval_s",
                          "young_daly_interval_s"}) {
    EXPECT_NE(r.out.find(std::string("\"") + key + "\": "), std::string::npos) << key << "\n" << r.out;
  }
}

TEST(PlanCommandTest, SweepPrintsEttrPerValueAndWritesSvg) {
  const std::string svg = (std::filesystem::temp_directory_path() / "megascale-plan-sweep.svg").string();
  std::filesystem::remove(svg);
  const RunResult r = run_megascale({"plan", kMegaScale, "--runs", "50", "--sweep",
                                     "checkpoint_interval=5m,15m,60m", "--plot", svg});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("5m"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1h"), std::string::npos) << r.out;
  std::ifstream f(svg);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
  EXPECT_NE(text.str().find("<polyline"), std::string::npos);
}

TEST(PlanCommandTest, BadSweepIsAUsageError) {
  const RunResult r = run_megascale({"plan", kMegaScale, "--sweep", "gpus=1,2"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--sweep"), std::string::npos) << r.err;
}

}  // namespace
