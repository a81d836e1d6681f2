// tests/calibrate/layer_fit_test.cc: tp_gather_scatter_extra fitted on
// per-layer times (calibrate/layer_fit.h): a planted value is recovered, the
// base's own value is replaced, rows without sequence parallelism do not move
// it, and too few informative rows is an error.
#include "calibrate/layer_fit.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/profile.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;

class LayerFit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("megascale-layer-fit-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    fs::copy_file(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/korthikanti-22b-8-full.toml",
                  dir_ / "s.toml");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The shipped A100 profile with tp_gather_scatter_extra = x.
  std::string profile(double x, const std::string& name) {
    model::GpuProfile p = model::load_profile(std::string(MEGASCALE_SOURCE_DIR) + "/calibrate/profiles/A100-SXM4-80GB.toml");
    p.tp_gather_scatter_extra = x;
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << model::write_profile(p);
    return path;
  }

  // Rows whose "measured" times are the model's own with the profile `truth`.
  std::vector<PublishedLayer> rows(const std::string& truth, const std::vector<std::string>& sets) {
    std::vector<PublishedLayer> layers;
    for (size_t i = 0; i < sets.size(); ++i) {
      PublishedLayer l;
      l.name = "row" + std::to_string(i);
      l.scenario_file = (dir_ / "s.toml").string();
      for (const char* kv : {"parallel.recompute=none", "parallel.recompute=selective"})
        if (sets[i].find(kv) != std::string::npos) l.overrides.push_back(kv);
      l.overrides.push_back(sets[i].find("sp") != std::string::npos ? "parallel.sequence_parallel=true"
                                                                    : "parallel.sequence_parallel=false");
      l.forward_ms = l.backward_ms = 1;  // replaced below
      layers.push_back(l);
    }
    const std::vector<LayerCheckRow> truth_rows = check_published_layers(layers, truth);
    for (size_t i = 0; i < layers.size(); ++i) {
      layers[i].forward_ms = truth_rows[i].forward_ms;
      layers[i].backward_ms = truth_rows[i].backward_ms;
    }
    return layers;
  }
  fs::path dir_;
};

// Times made with x = 0.3 are fitted back to 0.3 from a base that holds 0.9
// (replaced, not added to), leave-one-out ~0, and the no-SP row is shown but
// has no say; the provenance names the SP rows.
TEST_F(LayerFit, RecoversAPlantedValueFromZeroWithItsProvenance) {
  const std::vector<PublishedLayer> layers =
      rows(profile(0.3, "truth.toml"),
           {"parallel.recompute=none", "parallel.recompute=none sp", "parallel.recompute=selective sp"});
  const LayerFitResult r = fit_layer_gather_scatter(profile(0.9, "base.toml"), layers, dir_.string());
  EXPECT_NEAR(r.extra, 0.3, 1e-3);
  EXPECT_LT(r.loo_error, 1e-3);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_FALSE(r.rows[0].informative);
  EXPECT_TRUE(r.rows[1].informative);
  EXPECT_TRUE(r.rows[2].informative);
  // Before the fit (x = 0.9) the SP rows are slower than "measured"; after, equal.
  EXPECT_GT(r.rows[1].before_forward_ms, layers[1].forward_ms * 1.01);
  EXPECT_NEAR(r.rows[1].after_forward_ms, layers[1].forward_ms, 1e-3 * layers[1].forward_ms);
  EXPECT_NEAR(r.rows[2].after_backward_ms, layers[2].backward_ms, 1e-3 * layers[2].backward_ms);
  EXPECT_DOUBLE_EQ(r.profile.tp_gather_scatter_extra, r.extra);
  const model::Provenance& prov = r.profile.provenance.at("tp_gather_scatter_extra");
  EXPECT_EQ(prov.source, "fitted");
  EXPECT_EQ(prov.runs, (std::vector<std::string>{"row1", "row2"}));
  EXPECT_DOUBLE_EQ(prov.loo_error, r.loo_error);
  // The written profile reads back with the value.
  const std::string out = (dir_ / "fitted.toml").string();
  std::ofstream(out) << model::write_profile(r.profile);
  EXPECT_NEAR(model::load_profile(out).tp_gather_scatter_extra, 0.3, 1e-3);
  const std::string md = layer_fit_markdown(r, "megascale calibrate fit ...");
  EXPECT_NE(md.find("tp_gather_scatter_extra = 0.3000"), std::string::npos) << md;
  EXPECT_NE(md.find("| row0 | no TP all-gather / reduce-scatter |"), std::string::npos) << md;
}

// A value is not fitted below zero: times faster than the formula give 0.
TEST_F(LayerFit, NeverFitsBelowZero) {
  std::vector<PublishedLayer> layers =
      rows(profile(0.0, "truth.toml"), {"parallel.recompute=none sp", "parallel.recompute=selective sp"});
  for (PublishedLayer& l : layers) l.forward_ms *= 0.8, l.backward_ms *= 0.8;
  EXPECT_DOUBLE_EQ(fit_layer_gather_scatter(profile(0.0, "base.toml"), layers, dir_.string()).extra, 0.0);
}

TEST_F(LayerFit, NeedsTwoRowsWithTheCollectives) {
  const std::vector<PublishedLayer> layers =
      rows(profile(0.3, "truth.toml"), {"parallel.recompute=none", "parallel.recompute=none sp"});
  try {
    fit_layer_gather_scatter(profile(0.0, "base.toml"), layers, dir_.string());
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("1 row(s) have TP all-gathers or reduce-scatters"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace megascale::calibrate
