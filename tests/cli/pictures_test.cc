// tests/cli/pictures_test.cc: the pictures the commands draw, read back as XML
// (issue 13, "pictures people read at a glance"): `plan --plot` with its
// p5-p95 band on an ETTR axis from 0% to 100%, `simulate --heatmap` rows named
// by stage and DP replica with step times from 0 s, and the breakdown chart of
// `simulate --chart` / `compare --chart`.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "run_megascale.h"
#include "tests/svg_reader.h"

namespace {

namespace fs = std::filesystem;
using namespace megascale::cli_testing;
using megascale::svg_testing::read_svg;
using megascale::svg_testing::SvgElement;
using megascale::svg_testing::texts_of;

const std::string kSmall = kSourceDir + "/scenarios/example-small.toml";

class Pictures : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("megascale-pictures-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // The elements of the SVG at `p`; fails the test when it is not well formed.
  static std::vector<SvgElement> elements(const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    std::string error;
    std::vector<SvgElement> all = read_svg(s.str(), &error);
    EXPECT_EQ(error, "") << p;
    return all;
  }
  static bool has_text(const std::vector<SvgElement>& all, const std::string& t) {
    const std::vector<std::string> texts = texts_of(all);
    return std::find(texts.begin(), texts.end(), t) != texts.end();
  }
  static std::vector<SvgElement> of_class(const std::vector<SvgElement>& all, const std::string& c) {
    std::vector<SvgElement> out;
    for (const SvgElement& e : all)
      if (e.has("class") && e.attrs.at("class") == c) out.push_back(e);
    return out;
  }
  fs::path dir_;
};

TEST_F(Pictures, PlanPlotHasABandInsideAnAxisFromZeroToOneHundredPercent) {
  const std::string svg = path("plan.svg");
  const RunResult r = run_megascale({"plan", kSmall, "--runs", "40", "--sweep", "checkpoint_interval=5m,30m,2h",
                                     "--plot", svg, "--set", "name=\"a & b <c>\""});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const std::vector<SvgElement> all = elements(svg);
  EXPECT_TRUE(has_text(all, "a & b <c>: ETTR vs checkpoint interval"));
  double y0 = -1, y100 = -1;
  for (const SvgElement& e : all) {
    if (e.name == "text" && e.text == "0%") y0 = e.number("y") - 4;
    if (e.name == "text" && e.text == "100%") y100 = e.number("y") - 4;
  }
  ASSERT_GT(y0, y100) << "no ETTR axis from 0% (bottom) to 100%";
  ASSERT_GT(y100, 0);
  const std::vector<SvgElement> band = of_class(all, "p5-p95");
  ASSERT_EQ(band.size(), 1u);
  const auto points = megascale::svg_testing::point_values(band[0].attrs.at("points"));
  ASSERT_EQ(points.size(), 6u);  // three intervals, p95 then p5
  for (const auto& [x, y] : points) {
    EXPECT_LE(y, y0);
    EXPECT_GE(y, y100);
  }
  EXPECT_EQ(of_class(all, "mean").size(), 1u);
}

TEST_F(Pictures, HeatmapRowsNameStagesAndReplicas) {
  const std::string svg = path("heat.svg");
  const RunResult r = run_megascale({"simulate", kSmall, "--steps", "3", "--heatmap", svg});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const std::vector<SvgElement> all = elements(svg);
  // example-small: TP 2, PP 2, DP 4; stage 1 of replica 3 holds GPUs 14-15.
  EXPECT_TRUE(has_text(all, "stage 0, DP replica 0 (GPUs 0-1)"));
  EXPECT_TRUE(has_text(all, "stage 1, DP replica 3 (GPUs 14-15)"));
  EXPECT_TRUE(has_text(all, "% vs its stage's median"));
  EXPECT_TRUE(has_text(all, "step time (s)"));
  for (const SvgElement& e : all) EXPECT_EQ(e.text.find("ranks "), std::string::npos) << e.text;
  EXPECT_EQ(of_class(all, "step-time").size(), 3u);
}

// The breakdown bars: one per estimate, each starting at the axis' 0 tick.
void expect_bars_from_zero(const std::vector<SvgElement>& all, size_t bars) {
  double zero_x = -1;
  for (const SvgElement& e : all)
    if (e.name == "text" && e.text == "0" && e.has("text-anchor") && e.attrs.at("text-anchor") == "middle")
      zero_x = e.number("x");
  ASSERT_GT(zero_x, 0) << "no 0 s tick";
  std::map<double, double> left_by_bar;  // y -> leftmost x
  for (const SvgElement& e : all) {
    if (!e.has("class") || e.attrs.at("class") != "segment") continue;
    auto [it, fresh] = left_by_bar.emplace(e.number("y"), e.number("x"));
    if (!fresh) it->second = std::min(it->second, e.number("x"));
  }
  EXPECT_EQ(left_by_bar.size(), bars);
  for (const auto& [y, left] : left_by_bar) EXPECT_NEAR(left, zero_x, 0.01) << y;
}

TEST_F(Pictures, SimulateChartIsOneStackedBarAtEitherFidelity) {
  for (const std::string fidelity : {"analytical", "event"}) {
    const std::string svg = path(fidelity + ".svg");
    const RunResult r = run_megascale({"simulate", kSmall, "--fidelity", fidelity, "--chart", svg});
    ASSERT_EQ(r.exit_code, 0) << dump(r);
    EXPECT_NE((r.out + r.err).find("wrote " + svg), std::string::npos) << dump(r);
    const std::vector<SvgElement> all = elements(svg);
    EXPECT_TRUE(has_text(all, "time per iteration (s)"));
    EXPECT_TRUE(has_text(all, "compute"));
    expect_bars_from_zero(all, 1);
  }
  const RunResult bad = run_megascale({"simulate", kSmall, "--fidelity", "analytical", "--chart", "/nonexistent/x.svg"});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("/nonexistent/x.svg: cannot write (No such file or directory)"), std::string::npos) << bad.err;
}

TEST_F(Pictures, CompareChartPutsBothSystemsOnOneAxis) {
  const std::string svg = path("compare.svg");
  const RunResult r = run_megascale({"compare", kSmall, "--fidelity", "analytical", "--chart", svg});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const std::vector<SvgElement> all = elements(svg);
  EXPECT_TRUE(has_text(all, "Megatron-LM"));
  EXPECT_TRUE(has_text(all, "MegaScale"));
  expect_bars_from_zero(all, 2);
}

}  // namespace
