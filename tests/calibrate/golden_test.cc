// tests/calibrate/golden_test.cc: calibrate/golden.h's comparison rules.
#include "calibrate/golden.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace megascale::calibrate {
namespace {

base::Json stored(double step_s, double mfu) {
  base::Json j;
  j["schema_version"] = 1;
  j["fidelity"] = "event";
  j["scenarios"]["a.toml"] = {{"mfu", mfu}, {"iteration_time_s", step_s}, {"fits_in_memory", true},
                              {"breakdown_s", {{"compute", 0.5 * step_s}, {"host", 0.0}}}};
  return j;
}

auto always = [](const std::string&) { return true; };

TEST(Golden, IdenticalFiguresPassWithNoChange) {
  const base::Json g = stored(10, 0.5);
  const GateResult r = compare_with_golden(g, "g.json", {{"a.toml", g["scenarios"]["a.toml"]}}, 0.0, always);
  EXPECT_TRUE(r.pass());
  EXPECT_EQ(r.checked, 1);
  EXPECT_TRUE(r.changes.empty());
}

TEST(Golden, NonFiniteShapeAndTypeChangesFail) {
  const base::Json g = stored(10, 0.5);
  base::Json now = g["scenarios"]["a.toml"];
  now["mfu"] = std::numeric_limits<double>::quiet_NaN();  // stored as null by nlohmann-json
  GateResult r = compare_with_golden(g, "g.json", {{"a.toml", now}}, 0.5, always);
  EXPECT_FALSE(r.pass());
  now = g["scenarios"]["a.toml"];
  now["fits_in_memory"] = false;
  r = compare_with_golden(g, "g.json", {{"a.toml", now}}, 0.5, always);
  EXPECT_FALSE(r.pass());
  ASSERT_EQ(r.changes.size(), 1u);
  EXPECT_EQ(r.changes[0].metric, "fits_in_memory");
  now = g["scenarios"]["a.toml"];
  now["breakdown_s"]["optimizer"] = 0.1;  // a key the stored report did not have
  r = compare_with_golden(g, "g.json", {{"a.toml", now}}, 0.5, always);
  EXPECT_FALSE(r.pass());
  EXPECT_EQ(r.changes[0].metric, "breakdown_s.optimizer");
}

TEST(Golden, HostComponentFromZeroIsJudgedAgainstTheStep) {
  const base::Json g = stored(10, 0.5);
  base::Json now = g["scenarios"]["a.toml"];
  now["breakdown_s"]["host"] = 0.1;  // 1% of the 10 s step, from 0
  EXPECT_TRUE(compare_with_golden(g, "g.json", {{"a.toml", now}}, 0.02, always).pass());
  EXPECT_FALSE(compare_with_golden(g, "g.json", {{"a.toml", now}}, 0.005, always).pass());
}

TEST(Golden, UpdateKeepsStoredScenariosWhoseFilesRemain) {
  const base::Json g = stored(10, 0.5);
  const base::Json u = updated_golden(g, {{"b.toml", g["scenarios"]["a.toml"]}}, "event", always);
  EXPECT_TRUE(u["scenarios"].contains("a.toml"));
  EXPECT_TRUE(u["scenarios"].contains("b.toml"));
  const base::Json dropped =
      updated_golden(g, {{"b.toml", g["scenarios"]["a.toml"]}}, "event", [](const std::string&) { return false; });
  EXPECT_FALSE(dropped["scenarios"].contains("a.toml"));
}

// `megascale check` ran a file named twice twice (and reported it once).
TEST(Golden, AFileNamedTwiceIsRunOnce) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("golden_files_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  for (const char* name : {"b.toml", "sub/a.toml", "notes.txt"}) std::ofstream(dir / name) << "x";
  const std::string b = (dir / "b.toml").string(), a = (dir / "sub" / "a.toml").string();
  EXPECT_EQ(scenario_files({b, b}), std::vector<std::string>({b}));
  EXPECT_EQ(scenario_files({b, (dir / "sub" / ".." / "b.toml").string()}), std::vector<std::string>({b}));
  EXPECT_EQ(scenario_files({a, dir.string()}), std::vector<std::string>({a, b}));
  EXPECT_EQ(scenario_files({dir.string(), dir.string()}), std::vector<std::string>({b, a}));
  EXPECT_THROW(scenario_files({(dir / "missing.toml").string()}), std::invalid_argument);
  fs::remove_all(dir);
}

// The gate's golden file and fidelity: the file's fidelity unless one is
// asked; a missing file only with --update; another fidelity than the file's
// only with --update (which re-records at it).
TEST(Golden, OpenGoldenTakesTheFilesFidelityAndRefusesAMismatch) {
  namespace fs = std::filesystem;
  const fs::path path = fs::temp_directory_path() / ("golden_open_" + std::to_string(getpid()) + ".json");
  fs::remove(path);
  EXPECT_THROW(open_golden(path.string(), "", false), std::invalid_argument);  // no file, no --update
  GoldenGate g = open_golden(path.string(), "", true);
  EXPECT_TRUE(g.golden.is_null());
  EXPECT_EQ(g.fidelity, "event");
  std::ofstream(path) << updated_golden(base::Json(), {}, "analytical", [](const std::string&) { return true; }).dump(2);
  g = open_golden(path.string(), "", false);
  EXPECT_EQ(g.fidelity, "analytical");
  EXPECT_TRUE(g.golden.contains("scenarios"));
  try {
    open_golden(path.string(), "event", false);
    ADD_FAILURE() << "a gate at event fidelity compared with analytical figures";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("recorded at analytical fidelity; checking at event"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(open_golden(path.string(), "event", true).fidelity, "event");
  std::ofstream(path) << "{\"schema_version\": 1}";  // malformed: named, as invalid input
  EXPECT_THROW(open_golden(path.string(), "", false), std::invalid_argument);
  fs::remove(path);
}

}  // namespace
}  // namespace megascale::calibrate
