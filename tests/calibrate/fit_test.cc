// tests/calibrate/fit_test.cc: fitting a per-step overhead and a compute scale
// on named runs with leave-one-out errors, judged on held-out runs
// (calibrate/fit.h), and the runs file's errors.
#include "calibrate/fit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "calibrate/nccl_tests.h"
#include "model/profile.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;

// A "simulator" whose iteration time is base x the profile's compute scale +
// its step overhead: the fit must find the scale and overhead that made the
// "measured" times.
double fake_predict(const std::string& scenario, const std::string& profile_file) {
  static const std::map<std::string, double> base = {{"a", 10}, {"b", 20}, {"c", 40}, {"d", 80}, {"e", 5}};
  const model::GpuProfile p = model::load_profile(profile_file);
  const double scale = p.measured() ? p.measured()->insitu.value("gemm", 1).value_or(1.0) : 1.0;
  return base.at(scenario) * scale + p.step_overhead_s;
}

TEST(Fit, RecoversScaleAndOverheadAndJudgesOnHeldOutRuns) {
  const fs::path dir = fs::temp_directory_path() / "megascale-fit-test";
  fs::create_directories(dir);
  const std::string base = (dir / "base.toml").string();
  std::ofstream(base) << model::builtin_profile_text("A100-SXM4-80GB");
  auto run = [](const std::string& n, double base_s) {
    MeasuredRun r;
    r.scenario_file = n;
    r.name = n;
    r.iteration_s = base_s * 1.1 + 0.5;
    r.source = "test";
    return r;
  };
  const std::vector<MeasuredRun> fit = {run("a", 10), run("b", 20), run("c", 40), run("d", 80)};
  const std::vector<MeasuredRun> held = {run("e", 5)};
  const FitResult r = fit_profile(base, fit, held, FitParams{}, fake_predict, dir.string());
  EXPECT_NEAR(r.compute_scale, 1.1, 1e-6);
  EXPECT_NEAR(r.step_overhead_s, 0.5, 1e-6);
  EXPECT_NEAR(r.loo.mean_abs_error, 0.0, 1e-6);
  EXPECT_NEAR(r.held_out_mean_abs, 0.0, 1e-6);
  EXPECT_GT(r.before_held_out_mean_abs, 0.1);
  ASSERT_EQ(r.rows.size(), 5u);
  EXPECT_TRUE(r.rows.back().held_out);
  // The fitted values carry their provenance: the runs and the leave-one-out error.
  EXPECT_EQ(r.profile.provenance.at("step_overhead_s").source, "fitted");
  EXPECT_EQ(r.profile.provenance.at("step_overhead_s").runs, (std::vector<std::string>{"a", "b", "c", "d"}));
  // Only the overhead: the scale stays 1.
  const FitResult o = fit_profile(base, fit, held, FitParams{true, false}, fake_predict, dir.string());
  EXPECT_EQ(o.compute_scale, 1.0);
  EXPECT_GT(o.loo.mean_abs_error, 0.0);
  EXPECT_THROW(fit_profile(base, {}, held, FitParams{}, fake_predict, dir.string()), std::invalid_argument);
  fs::remove_all(dir);
}

// A base whose in-situ table an earlier fit wrote: the scale is fitted again
// from 1 (a refit on a fitted profile gives the same value), not multiplied.
TEST(Fit, RefitsAFittedComputeScaleFromOne) {
  const fs::path dir = fs::temp_directory_path() / "megascale-fit-refit-test";
  fs::create_directories(dir);
  const std::string base = (dir / "base.toml").string();
  {
    model::GpuProfile p = model::builtin_profile("A100-SXM4-80GB");
    auto tables = std::make_shared<model::ProfileTables>();
    tables->insitu = model::InsituTable({{1, "gemm", 1.5}, {1, "attention", 1.5}, {1, "kernel", 1.5}});
    p.tables = tables;
    p.provenance["tables.insitu"] = model::Provenance{"fitted", "earlier fit", "", "", {"a", "b"}, 0.1};
    std::ofstream(base) << model::write_profile(p);
  }
  ASSERT_NEAR(model::load_profile(base).measured()->insitu.value("gemm", 1).value_or(0), 1.5, 1e-9);
  auto run = [](const std::string& n, double base_s) {
    MeasuredRun r;
    r.scenario_file = n;
    r.name = n;
    r.iteration_s = base_s * 1.1;
    return r;
  };
  const FitResult r = fit_profile(base, {run("a", 10), run("b", 20), run("c", 40)}, {run("e", 5)},
                                  FitParams{false, true}, fake_predict, dir.string());
  EXPECT_NEAR(r.compute_scale, 1.1, 1e-6);
  EXPECT_NEAR(r.profile.measured()->insitu.value("gemm", 1).value_or(0), 1.1, 1e-6);  // not 1.5 x 1.1
  EXPECT_NEAR(r.rows[0].before_s, 10.0, 1e-9);  // "before" is the model without the old table
  EXPECT_EQ(r.profile.provenance.at("tables.insitu").runs, (std::vector<std::string>{"a", "b", "c"}));
  fs::remove_all(dir);
}

// A "simulator" whose iteration time is its own time plus the profile's
// element_overhead_ns times the run's activation elements (x 1e9 per ns).
double fake_element_predict(const std::string& scenario, const std::string& profile_file) {
  static const std::map<std::string, std::pair<double, double>> run = {
      {"a", {10, 4}}, {"b", {20, 1}}, {"c", {40, 30}}, {"d", {80, 10}}, {"e", {5, 2}}};
  const model::GpuProfile p = model::load_profile(profile_file);
  return run.at(scenario).first + p.element_overhead_ns * run.at(scenario).second;
}

TEST(Fit, RecoversAnElementOverheadFromZeroWithItsProvenance) {
  const fs::path dir = fs::temp_directory_path() / "megascale-fit-element-test";
  fs::create_directories(dir);
  const std::string base = (dir / "base.toml").string();
  {
    // A base that already holds a value: the fit replaces it, not adds to it.
    model::GpuProfile p = model::builtin_profile("H100-SXM5-80GB");
    p.element_overhead_ns = 0.3;
    p.provenance["element_overhead_ns"] = model::Provenance{"assumption", "test", "", "", {}, -1};
    std::ofstream(base) << model::write_profile(p);
  }
  const std::map<std::string, std::pair<double, double>> truth = {
      {"a", {10, 4}}, {"b", {20, 1}}, {"c", {40, 30}}, {"d", {80, 10}}, {"e", {5, 2}}};
  auto run = [&](const std::string& n) {
    MeasuredRun r;
    r.scenario_file = n;
    r.name = n;
    r.iteration_s = truth.at(n).first + 0.12 * truth.at(n).second;  // 0.12 ns planted
    return r;
  };
  FitParams only_element{false, false, true};
  const FitResult r = fit_profile(base, {run("a"), run("b"), run("c"), run("d")}, {run("e")}, only_element,
                                  fake_element_predict, dir.string());
  EXPECT_NEAR(r.element_overhead_ns, 0.12, 1e-6);
  EXPECT_NEAR(r.profile.element_overhead_ns, 0.12, 1e-6);  // replaced, not 0.3 + 0.12
  EXPECT_EQ(r.compute_scale, 1.0);
  EXPECT_EQ(r.step_overhead_s, r.profile.step_overhead_s);
  EXPECT_NEAR(r.loo.mean_abs_error, 0.0, 1e-6);
  EXPECT_NEAR(r.held_out_mean_abs, 0.0, 1e-6);
  // "Before" is the model without the value the base held.
  EXPECT_NEAR(r.rows[0].before_s, 10.0, 1e-9);
  EXPECT_EQ(r.profile.provenance.at("element_overhead_ns").source, "fitted");
  EXPECT_EQ(r.profile.provenance.at("element_overhead_ns").runs, (std::vector<std::string>{"a", "b", "c", "d"}));
  // The written profile reads back with the fitted value.
  std::ofstream(dir / "fitted-back.toml") << model::write_profile(r.profile);
  EXPECT_NEAR(model::load_profile((dir / "fitted-back.toml").string()).element_overhead_ns, 0.12, 1e-6);
  EXPECT_TRUE(parse_fit_params("element_overhead").element_overhead);
  EXPECT_FALSE(parse_fit_params("element_overhead").compute_scale);
  EXPECT_THROW(parse_fit_params("element"), std::invalid_argument);
  fs::remove_all(dir);
}

TEST(Fit, RunsFileErrorsNameFileAndLine) {
  const fs::path dir = fs::temp_directory_path() / "megascale-fit-runs-test";
  fs::create_directories(dir);
  const std::string scenario = std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/paper/table2-megascale-256.toml";
  {
    std::ofstream(dir / "ok.csv") << "# comment\nscenario,iteration_time_s,source\n" << scenario << ",32.0,paper\n";
    std::ofstream(dir / "bad_time.csv") << "scenario,iteration_time_s\n" << scenario << ",fast\n";
    std::ofstream(dir / "no_header.csv") << "file,time\n";
    std::ofstream(dir / "missing.csv") << "scenario,iteration_time_s\nnot/there.toml,1\n";
    std::ofstream(dir / "bad.toml") << "[model]\nlayers = 0\n";
    std::ofstream(dir / "bad_scenario.csv") << "scenario,iteration_time_s\n" << scenario << ",32.0\nbad.toml,1\n";
    // Milliseconds written as seconds: 32 ms is ~650x the A100s' dense peak.
    std::ofstream(dir / "too_fast.csv") << "scenario,iteration_time_s\n" << scenario << ",0.032\n";
    // The same file, spelled another way the second time.
    std::ofstream(dir / "twice.csv") << "scenario,iteration_time_s\n" << scenario << ",32.0\n"
                                     << std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/../scenarios/paper/table2-megascale-256.toml"
                                     << ",33.0\n";
  }
  const std::vector<MeasuredRun> ok = read_measured_runs((dir / "ok.csv").string());
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].name, "table2-megascale-256");
  EXPECT_EQ(ok[0].iteration_s, 32.0);
  auto error_of = [&](const char* f) {
    try {
      read_measured_runs((dir / f).string());
    } catch (const ImportError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("bad_time.csv").find("bad_time.csv:2: column 'iteration_time_s'"), std::string::npos);
  EXPECT_NE(error_of("no_header.csv").find("no_header.csv:1:"), std::string::npos);
  EXPECT_NE(error_of("missing.csv").find("missing.csv:2: column 'scenario': no such file"), std::string::npos);
  // A scenario that does not load: the CSV line, then the scenario's own file, line and key.
  EXPECT_NE(error_of("bad_scenario.csv").find("bad_scenario.csv:3: column 'scenario': "), std::string::npos)
      << error_of("bad_scenario.csv");
  EXPECT_NE(error_of("bad_scenario.csv").find("bad.toml:2:10: model.layers: must be >= 1, got 0"), std::string::npos)
      << error_of("bad_scenario.csv");
  EXPECT_EQ(error_of("too_fast.csv").rfind((dir / "too_fast.csv").string() + ":2: column 'iteration_time_s': 0.032 s for " +
                                                scenario + " on 256 x A100-SXM4-80GB is ",
                                            0),
            0u)
      << error_of("too_fast.csv");
  EXPECT_NE(error_of("too_fast.csv").find("% MFU of the GPUs' dense peak (312 TFLOP/s each): no GPU runs it that fast"),
            std::string::npos)
      << error_of("too_fast.csv");
  EXPECT_NE(error_of("twice.csv").find("twice.csv:3: column 'scenario': " + std::string(MEGASCALE_SOURCE_DIR) +
                                      "/scenarios/../scenarios/paper/table2-megascale-256.toml is already the scored "
                                      "run of line 2"),
            std::string::npos)
      << error_of("twice.csv");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace megascale::calibrate
