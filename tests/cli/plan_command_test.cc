// tests/cli/plan_command_test.cc: `megascale plan` end to end: the JSON keys of
// issue 5, the iteration-time source (event, or scenario from [run]), the checkpoint
// and GPU sweeps and their SVG plots, the labelled assumptions, and usage errors
// (exit 2).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "run_megascale.h"

namespace {

using namespace megascale::cli_testing;
using Json = nlohmann::json;

// stdout of a `--json` run as JSON (a parse error fails the test with the text).
Json parsed(const std::string& out) {
  Json j = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << out;
  return j;
}
const std::string kMegaScale = kSourceDir + "/scenarios/paper/megascale-175b-12288-3weeks.toml";

TEST(PlanCommandTest, JsonHasTheIssueKeys) {
  const RunResult r = run_megascale({"plan", kMegaScale, "--json", "--runs", "50"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  for (const char* key : {"ettr_mean", "ettr_p5", "ettr_p95", "restarts_mean", "days_to_finish",
                          "lost_hours_by_cause", "best_checkpoint_interval_s",
                          "young_daly_interval_s"}) {
    EXPECT_TRUE(parsed(r.out).contains(key)) << key << "\n" << r.out;
  }
  // days_to_finish counts the scenario's [run] tokens (300e9).
  EXPECT_DOUBLE_EQ(parsed(r.out).value("tokens_to_finish", 0.0), 300e9) << r.out;
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

// When recoveries wait for repaired machines, the report names the spare pool
// as the binding constraint (issue 13); with enough spares it says nothing.
TEST(PlanCommandTest, AnEmptySparePoolIsNamedAsTheBindingConstraint) {
  const RunResult starved = run_megascale({"plan", kMegaScale, "--runs", "50", "--set", "recovery.spare_nodes=0",
                                           "--set", "failures.rate_scale=3"});
  ASSERT_EQ(starved.exit_code, 0) << dump(starved);
  EXPECT_NE(starved.out.find("binding constraint  the spare pool"), std::string::npos) << starved.out;
  const RunResult ample = run_megascale({"plan", kMegaScale, "--runs", "50", "--set", "recovery.spare_nodes=4096"});
  ASSERT_EQ(ample.exit_code, 0) << dump(ample);
  EXPECT_EQ(ample.out.find("binding constraint"), std::string::npos) << ample.out;
  const RunResult j = run_megascale({"plan", kMegaScale, "--runs", "50", "--json", "--set", "recovery.spare_nodes=0",
                                     "--set", "failures.rate_scale=3"});
  ASSERT_EQ(j.exit_code, 0) << dump(j);
  EXPECT_GT(parsed(j.out).value("spare_wait_hours", 0.0), 0.0) << j.out.substr(0, 300);
}

// Without failure rates plan says no failure is modelled (it called the zeros
// "explicit rates: scenario"; issue 13).
TEST(PlanCommandTest, NoFailureRatesAreNamedAsSuch) {
  const RunResult r = run_megascale({"plan", kSourceDir + "/scenarios/example-small.toml", "--runs", "20"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("none: no failure is modelled"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("explicit rates"), std::string::npos) << r.out;
}

TEST(PlanCommandTest, BadSweepIsAUsageError) {
  const RunResult r = run_megascale({"plan", kMegaScale, "--sweep", "nodes=1,2"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--sweep"), std::string::npos) << r.err;
}

TEST(PlanCommandTest, IterationTimeFromTheEventSimulatorInTheBinary) {
  const RunResult r = run_megascale({"plan", kMegaScale, "--json", "--runs", "20"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r.out);
  EXPECT_EQ(j["iteration_time_source"], "event") << r.out;
  const double iteration_s = j["iteration_time_s"];
  EXPECT_GT(iteration_s, 3.0);  // 175B on 12,288 A100s: MegaScale Table 2 prints 6.34 s
  EXPECT_LT(iteration_s, 10.0);
  const RunResult text = run_megascale({"plan", kMegaScale, "--runs", "20"});
  ASSERT_EQ(text.exit_code, 0) << dump(text);
  EXPECT_NE(text.out.find("(event: event-level simulator"), std::string::npos) << text.out;
}

TEST(PlanCommandTest, InProcessLibraryHasTheSimulatorAndScenarioWhenGiven) {
  // In-process: megascale_cli_lib links sim/ itself (no hook to register).
  std::ostringstream out, err;
  ASSERT_EQ(megascale::cli::run_cli({"plan", kMegaScale, "--json", "--runs", "20"}, out, err), 0) << err.str();
  EXPECT_EQ(parsed(out.str())["iteration_time_source"], "event") << out.str();
  // --fidelity analytical: the closed form's iteration, another computation
  // within a few percent of the event level's.
  std::ostringstream a_out, a_err;
  ASSERT_EQ(megascale::cli::run_cli({"plan", kMegaScale, "--json", "--runs", "20", "--fidelity", "analytical"}, a_out, a_err), 0)
      << a_err.str();
  EXPECT_EQ(parsed(a_out.str())["iteration_time_source"], "analytical") << a_out.str();
  const double closed_s = parsed(a_out.str())["iteration_time_s"].get<double>();
  const double event_s = parsed(out.str())["iteration_time_s"].get<double>();
  EXPECT_NE(closed_s, event_s);
  EXPECT_NEAR(closed_s, event_s, 0.05 * event_s);

  const std::string file = (std::filesystem::temp_directory_path() / "megascale-plan-fixed.toml").string();
  {
    std::ifstream in(kMegaScale);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text += "iteration_time_s = 7.5\n";  // [run] is the file's last table
    std::ofstream(file) << text;
  }
  const RunResult r = run_megascale({"plan", file, "--json", "--runs", "20"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_EQ(parsed(r.out)["iteration_time_source"], "scenario") << r.out;
  EXPECT_DOUBLE_EQ(parsed(r.out)["iteration_time_s"].get<double>(), 7.5);
  // A GPU sweep needs an iteration time per GPU count: refused with the reason.
  const RunResult sweep = run_megascale({"plan", file, "--sweep", "gpus=1536,3072"});
  EXPECT_EQ(sweep.exit_code, 2) << dump(sweep);
  EXPECT_NE(sweep.err.find("iteration_time_s"), std::string::npos) << sweep.err;
}

TEST(PlanCommandTest, GpuSweepScalesDpAndEttrFallsWithGpus) {
  const std::string svg = (std::filesystem::temp_directory_path() / "megascale-plan-gpus.svg").string();
  std::filesystem::remove(svg);
  const RunResult r = run_megascale({"plan", kMegaScale, "--json", "--runs", "100", "--sweep",
                                     "gpus=1536,3072,6144,12288", "--plot", svg});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json rows = parsed(r.out)["gpus_sweep"];
  ASSERT_EQ(rows.size(), 4u) << r.out;
  double previous_ettr = 1.0, previous_iteration_s = 1e9;
  size_t i = 0;
  for (int gpus : {1536, 3072, 6144, 12288}) {
    const Json& row = rows[i++];
    EXPECT_EQ(row["gpus"], gpus) << row.dump();
    EXPECT_EQ(row["dp"], gpus / 64);
    EXPECT_EQ(row["iteration_time_source"], "event");
    const double ettr = row["ettr_mean"], iteration_s = row["iteration_time_s"];
    EXPECT_LT(ettr, previous_ettr) << gpus;  // more GPUs, more failures
    EXPECT_LT(iteration_s, previous_iteration_s) << gpus;
    previous_ettr = ettr;
    previous_iteration_s = iteration_s;
  }
  std::ifstream f(svg);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("GPUs (log scale)"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find(">12288<"), std::string::npos) << text.str();
}

// With context parallelism the sweep keeps whole CP groups and reports the
// user's DP (CP is folded into dp, model/config.h).
TEST(PlanCommandTest, GpuSweepKeepsContextParallelGroups) {
  const RunResult bad = run_megascale({"plan", kMegaScale, "--set", "parallel.cp=2", "--set", "parallel.dp=96",
                                       "--sweep", "gpus=1088"});  // 17 x 64: not whole CP groups
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("1088 GPUs is not a multiple of tp x cp x pp = 8 x 2 x 8 = 128"), std::string::npos)
      << bad.err;
  const RunResult r = run_megascale({"plan", kMegaScale, "--runs", "20", "--set", "parallel.cp=2", "--set",
                                     "parallel.dp=96", "--sweep", "gpus=3072", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& g : j.at("gpus_sweep")) {
    if (g.at("gpus") != 3072) continue;
    found = true;
    EXPECT_EQ(g.at("dp"), 24) << g.dump();  // 3072 / (tp 8 x cp 2 x pp 8)
  }
  EXPECT_TRUE(found) << r.out;
}

// A sweep value given twice (one more row of the same figures) or an interval
// of 0 is refused, naming the value.
TEST(PlanCommandTest, SweepValuesAreDistinctAndPositive) {
  RunResult r = run_megascale({"plan", kMegaScale, "--runs", "5", "--sweep", "checkpoint_interval=5m,300s"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("checkpoint_interval: '300s' is given twice"), std::string::npos) << r.err;
  r = run_megascale({"plan", kMegaScale, "--runs", "5", "--sweep", "gpus=1536,3072,1536"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("gpus: '1536' is given twice"), std::string::npos) << r.err;
  r = run_megascale({"plan", kMegaScale, "--runs", "5", "--sweep", "checkpoint_interval=0m"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("checkpoint_interval: '0m' must be longer than 0 s"), std::string::npos) << r.err;
  // The job checkpoints between iterations: an interval below one (6.3 s
  // here) would have counted stalls that never happen (0.1 s read ETTR 53%).
  r = run_megascale({"plan", kMegaScale, "--runs", "5", "--fidelity", "analytical", "--sweep",
                     "checkpoint_interval=1s,5m"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--sweep checkpoint_interval 1 s is shorter than one iteration ("), std::string::npos) << r.err;
  r = run_megascale({"plan", kMegaScale, "--runs", "5", "--fidelity", "analytical", "--set",
                     "recovery.checkpoint_interval=2s"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(": recovery.checkpoint_interval 2 s is shorter than one iteration ("), std::string::npos)
      << r.err;
}

TEST(PlanCommandTest, GpuSweepRejectsCountsThatDoNotDivide) {
  const RunResult r = run_megascale({"plan", kMegaScale, "--sweep", "gpus=1536,1000"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("1000 GPUs is not a multiple of tp x pp = 8 x 8 = 64"), std::string::npos) << r.err;
  const RunResult batch = run_megascale({"plan", kMegaScale, "--sweep", "gpus=448"});  // dp 7
  EXPECT_EQ(batch.exit_code, 2) << dump(batch);
  EXPECT_NE(batch.err.find("448 GPUs (dp 7)"), std::string::npos) << batch.err;
  EXPECT_NE(batch.err.find("global_batch"), std::string::npos) << batch.err;
}

TEST(PlanCommandTest, TextLabelsTheAssumptions) {
  const RunResult r = run_megascale({"plan", kMegaScale, "--runs", "20"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  for (const char* line : {"storage_read_gbs        100 GB/s: assumption",
                           "storage_write_gbs       50 GB/s: assumption",
                           "pcie_gbs                20 GB/s per GPU: assumption",
                           "self_check_s            300 s: assumption", "traffic_drop_detect_s   60 s: assumption",
                           "nccl_timeout_s          1800 s: PyTorch ProcessGroupNCCL default",
                           "heartbeat               10 s x 3 misses: assumption"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
}

// A measured profile (`megascale run`) below 1 s shows its figures, not "0 s";
// one from a run that gave up says so next to each figure it replaced.
TEST(PlanCommandTest, MeasuredRecoveryShowsFiguresAndTheRunsOutcome) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("megascale-plan-profile-" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream(path) << R"J({"schema_version": 1, "ranks": 2, "completed": false,
    "error": "gave up after 0 recoveries ([recovery] max_restarts); last: executor 1: rank 1 is gone",
    "stages_s": {"restart": 0.25, "checkpoint_load": 0.004},
    "detection_by_fault_s": {"kill": 0.144}, "checkpoint_bytes_per_rank": 1000000})J";
  const RunResult r = run_megascale({"plan", kMegaScale, "--runs", "20", "--recovery-profile", path});
  std::filesystem::remove(path);
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("error_report_s          0.144 s: measured (" + path +
                       " [the run did not finish: gave up after 0 recoveries"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("process_start_s         0.25 s: measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("storage_read_gbs        0.5 GB/s: measured"), std::string::npos) << r.out;
}

}  // namespace
