// tests/cli/calibrate_check_h200_test.cc: the CUDA engine's recorded runs on
// an NVIDIA H200 (results/gpu/2026-12-04-NVIDIA-H200*, scripts/gpu-check.sh)
// predicted again by `megascale calibrate check --from-run` from the engine
// profiles measured there (`calibrate micro --device cuda --engine-profile`).
//
// These are real measurements, kept in the repository: a change to the
// engine-call model (model/engine_ops.h), the tables' interpolation
// (model/profile_tables.h) or the simulator that moves these predictions out
// of issue 14's 10% fails here. Checked:
//   - the 1.1B GPT (micro-batch 4, sequence 2048) from the profile measured
//     for it: step within 10%, attention forward and backward within 5%, and
//     the report says the prediction is the engine's own calls;
//   - two held-out runs (micro-batch 2; sequence 4096), each from the profile
//     measured for all three scenarios' shapes: step within 10%;
//   - the profiles measured with fused_bias: all three within 5% from the
//     profile of their shapes, within 10% from the 1B profile alone.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_megascale.h"

namespace megascale::cli_testing {
namespace {

const std::string kRun = "results/gpu/2026-12-04-NVIDIA-H200";
const std::string kHeldOut = "results/gpu/2026-12-04-NVIDIA-H200-heldout";

class CalibrateCheckH200 : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path() / "megascale-check-h200-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // `calibrate check SCENARIO --from-run RUN --profile PROFILE`: its one check.
  nlohmann::json check(const std::string& scenario, const std::string& run, const std::string& profile) {
    const RunResult r = run_megascale({"calibrate", "check", scenario, "--from-run", run, "--warmup", "3", "--tolerance",
                                       "0.10", "--json", "--profile", profile, "--dir", dir_.string()});
    EXPECT_EQ(r.exit_code, 0) << dump(r);
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded() || !j.contains("checks") || j["checks"].empty()) {
      ADD_FAILURE() << "no check in the JSON\n" << dump(r);
      return {};
    }
    return j["checks"][0];
  }
  fs::path dir_;
};

TEST_F(CalibrateCheckH200, TheRecordedRunIsPredictedFromItsEngineProfile) {
  const nlohmann::json c = check("scenarios/gpu/gpt-1b-h200.toml", kRun, kRun + "/profile-engine.toml");
  ASSERT_FALSE(c.is_null());
  EXPECT_NEAR(c["measured_step_s"].get<double>(), 0.4598, 0.0005);  // the recorded median, as read
  EXPECT_LT(std::abs(c["error"].get<double>()), 0.10) << c.dump();
  int attention = 0;
  for (const nlohmann::json& op : c["ops"]) {
    const std::string kind = op["kind"];
    if (kind == "flash_attention" || kind == "flash_attention.bwd") {
      ++attention;
      EXPECT_LT(std::abs(op["error"].get<double>()), 0.05) << op.dump();
    }
  }
  EXPECT_EQ(attention, 2);
  bool said = false;
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    if (e.path().extension() != ".md") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    said = said || text.find("The prediction times the engine's own calls") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

TEST_F(CalibrateCheckH200, HeldOutShapesArePredictedFromTheProfileOfTheirShapes) {
  const std::string profile = kHeldOut + "/profile-engine-3.toml";
  for (const auto& [scenario, run] : std::vector<std::pair<std::string, std::string>>{
           {"scenarios/gpu/gpt-1b-h200-mb2.toml", kHeldOut + "/mb2"},
           {"scenarios/gpu/gpt-1b-h200-seq4096.toml", kHeldOut + "/s4k"}}) {
    const nlohmann::json c = check(scenario, run, profile);
    ASSERT_FALSE(c.is_null()) << scenario;
    EXPECT_LT(std::abs(c["error"].get<double>()), 0.10) << scenario << ": " << c.dump().substr(0, 400);
  }
}

// The profiles measured later with fused_bias (results/gpu/...-fused): the
// CUDA device's fused biases taken into account, the three runs come within
// 5% from the profile of their shapes, and within 10% from the 1B profile
// alone (shapes not measured).
TEST_F(CalibrateCheckH200, FusedBiasProfilesPredictAllThreeRuns) {
  const std::string dir = "results/gpu/2026-12-04-NVIDIA-H200-fused";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"scenarios/gpu/gpt-1b-h200.toml", kRun},
      {"scenarios/gpu/gpt-1b-h200-mb2.toml", kHeldOut + "/mb2"},
      {"scenarios/gpu/gpt-1b-h200-seq4096.toml", kHeldOut + "/s4k"}};
  for (const auto& [scenario, run] : runs) {
    const nlohmann::json own = check(scenario, run, dir + "/profile-engine-fused-3.toml");
    ASSERT_FALSE(own.is_null()) << scenario;
    EXPECT_LT(std::abs(own["error"].get<double>()), 0.05) << scenario;
    const nlohmann::json one = check(scenario, run, dir + "/profile-engine-fused-1b.toml");
    ASSERT_FALSE(one.is_null()) << scenario;
    EXPECT_LT(std::abs(one["error"].get<double>()), 0.10) << scenario;
  }
}

}  // namespace
}  // namespace megascale::cli_testing
