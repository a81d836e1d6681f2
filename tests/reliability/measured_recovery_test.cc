// `megascale plan --recovery-profile`: reading a measured profile, errors
// that name file and key, and the assumptions it replaces.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "model/scenario.h"
#include "reliability/measured_recovery.h"
#include "reliability/plan_inputs.h"

namespace megascale::reliability {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("megascale-profile-" + name + "-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << text;
  return path.string();
}

const char* kProfile = R"({"schema_version": 1, "tool_version": "t", "ranks": 2,
  "stages_s": {"detection": 0.5, "diagnosis": 0.25, "eviction": 0.05, "restart": 1.5,
               "checkpoint_stall": 0.001, "checkpoint_persist": 0.004, "checkpoint_load": 0.002, "catch_up": null},
  "detection_by_fault_s": {"kill": 0.3, "hang": 3.2},
  "checkpoint_bytes_per_rank": 1000000})";

std::string error_of(const std::string& text) {
  const std::string path = write("bad", text);
  try {
    load_recovery_profile(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(MeasuredRecovery, MapsStagesToRecoveryInputs) {
  const MeasuredRecovery m = load_recovery_profile(write("good", kProfile));
  model::RecoveryConfig r;
  apply_measured_recovery(m, &r);
  EXPECT_DOUBLE_EQ(r.error_report_s, 0.3);
  EXPECT_DOUBLE_EQ(r.anomaly_detect_s, 3.2);
  EXPECT_DOUBLE_EQ(r.traffic_drop_detect_s, model::RecoveryConfig{}.traffic_drop_detect_s) << "not measured: kept";
  EXPECT_DOUBLE_EQ(r.self_check_s, 0.25);
  EXPECT_DOUBLE_EQ(r.replacement_s, 0.05);
  EXPECT_DOUBLE_EQ(r.process_start_s, 1.5);
  EXPECT_DOUBLE_EQ(r.pcie_gbs, 1e6 / 0.001 / 1e9);
  EXPECT_DOUBLE_EQ(r.storage_write_gbs, 2e6 / 0.004 / 1e9);
  EXPECT_DOUBLE_EQ(r.storage_read_gbs, 2e6 / 0.002 / 1e9);
}

// A profile with self-checks (robust/self_check.h): self_check_s is the
// self-checks' time, not the whole diagnosis (which includes stopping the job).
TEST(MeasuredRecovery, SelfCheckStageIsTheSelfCheckInput) {
  const MeasuredRecovery m = load_recovery_profile(write("selfcheck", R"({"schema_version": 1, "ranks": 2,
    "stages_s": {"detection": 0.5, "diagnosis": 0.9, "self_check": 0.4, "eviction": 0.05},
    "detection_by_fault_s": {"slow": 1.2}, "checkpoint_bytes_per_rank": 0})"));
  model::RecoveryConfig r;
  apply_measured_recovery(m, &r);
  EXPECT_DOUBLE_EQ(r.self_check_s, 0.4);
  EXPECT_NE(m.values.at("self_check_s").second.find("stages_s.self_check"), std::string::npos);
  // Without it, the diagnosis stage stands in and says so.
  const MeasuredRecovery old = load_recovery_profile(write("goodold", kProfile));
  EXPECT_NE(old.values.at("self_check_s").second.find("no self-check in this profile"), std::string::npos);
}

// With one reader per DP group the parameters are stored once per group: the
// bandwidths use all shards' bytes, not the largest shard x ranks.
TEST(MeasuredRecovery, CheckpointBandwidthsUseAllShardsBytes) {
  const MeasuredRecovery m = load_recovery_profile(write("total", R"({"schema_version": 1, "ranks": 2,
    "stages_s": {"checkpoint_load": 0.002}, "detection_by_fault_s": {},
    "checkpoint_bytes_per_rank": 1000000, "checkpoint_bytes_total": 1500000})"));
  model::RecoveryConfig r;
  apply_measured_recovery(m, &r);
  EXPECT_DOUBLE_EQ(r.storage_read_gbs, 1.5e6 / 0.002 / 1e9);
  EXPECT_NE(error_of(R"({"schema_version": 1, "ranks": 2, "stages_s": {}, "detection_by_fault_s": {},
      "checkpoint_bytes_per_rank": 1, "checkpoint_bytes_total": -1})")
                .find("checkpoint_bytes_total: expected a number >= 0"),
            std::string::npos);
}

TEST(MeasuredRecovery, AssumptionsSayWhatWasMeasured) {
  const MeasuredRecovery m = load_recovery_profile(write("marks", kProfile));
  model::Scenario s = model::load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/example-small.toml");
  apply_measured_recovery(m, &s.recovery);
  std::vector<Assumption> a = recovery_assumptions(s);
  const std::vector<std::string> marked = mark_measured(m, &a);
  EXPECT_NE(std::find(marked.begin(), marked.end(), "process_start_s"), marked.end());
  EXPECT_EQ(std::find(marked.begin(), marked.end(), "traffic_drop_detect_s"), marked.end());
  for (const Assumption& x : a) {
    if (x.key == "process_start_s") {
      EXPECT_EQ(x.source.rfind("measured (", 0), 0u) << x.source;
      EXPECT_NE(x.source.find("stages_s.restart"), std::string::npos) << x.source;
    }
    if (x.key == "traffic_drop_detect_s") {
      EXPECT_EQ(x.source.find("measured"), std::string::npos);
    }
  }
}

// A run that gave up still measured what it measured; the labels say the
// run did not finish, and why.
TEST(MeasuredRecovery, ARunThatDidNotFinishIsNamedInTheLabels) {
  std::string text = kProfile;
  text.insert(text.rfind('}'), R"J(, "completed": false,
    "error": "gave up after 0 recoveries ([recovery] max_restarts); last: rank 1 exited (signal 9)")J");
  const MeasuredRecovery m = load_recovery_profile(write("gaveup", text));
  EXPECT_EQ(m.run_outcome,
            "did not finish: gave up after 0 recoveries ([recovery] max_restarts); last: rank 1 exited (signal 9)");
  model::Scenario s = model::load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/example-small.toml");
  std::vector<Assumption> a = recovery_assumptions(s);
  mark_measured(m, &a);
  bool seen = false;
  for (const Assumption& x : a) {
    if (x.key != "error_report_s") continue;
    seen = true;
    EXPECT_NE(x.source.find("[the run did not finish: gave up after 0 recoveries"), std::string::npos) << x.source;
    EXPECT_NE(x.source.find("detection_by_fault_s.kill"), std::string::npos) << x.source;
  }
  EXPECT_TRUE(seen);
  std::string done = kProfile;
  done.insert(done.rfind('}'), R"(, "completed": true)");
  EXPECT_EQ(load_recovery_profile(write("done", done)).run_outcome, "");
  std::string bad = kProfile;
  bad.insert(bad.rfind('}'), R"(, "completed": "no")");
  EXPECT_NE(error_of(bad).find("completed: expected true or false, got \"no\""), std::string::npos) << error_of(bad);
}

TEST(MeasuredRecovery, BadProfilesNameFileKeyAndReason) {
  EXPECT_NE(error_of("not json").find(":1:2: not valid JSON ("), std::string::npos) << error_of("not json");
  EXPECT_NE(error_of("[1, 2]").find("(file): not a JSON object"), std::string::npos) << error_of("[1, 2]");
  EXPECT_NE(error_of(R"({"schema_version": 1})").find("stages_s: missing"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema_version": 1, "ranks": 2, "stages_s": {"restart": "fast"},
      "detection_by_fault_s": {}, "checkpoint_bytes_per_rank": 1})")
                .find("stages_s.restart: expected a number of seconds"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"schema_version": 1, "ranks": 0, "stages_s": {}, "detection_by_fault_s": {},
      "checkpoint_bytes_per_rank": 1})")
                .find("ranks: expected an integer >= 1"),
            std::string::npos);
  const std::string missing = "/nonexistent/profile.json";
  try {
    load_recovery_profile(missing);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos);
  }
}

}  // namespace
}  // namespace megascale::reliability
