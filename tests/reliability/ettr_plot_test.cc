// tests/reliability/ettr_plot_test.cc: the ETTR sweep picture of `plan --plot`
// (reliability/ettr_plot.h) read back as XML: a p5-p95 band around the mean
// line, an ETTR axis from 0% to 100%, and escaped text.
#include "reliability/ettr_plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/svg_reader.h"

namespace megascale::reliability {
namespace {

using svg_testing::elements_named;
using svg_testing::point_values;
using svg_testing::read_svg;
using svg_testing::SvgElement;
using svg_testing::texts_of;

EttrPlot three_intervals() {
  EttrPlot p;
  p.title = "job: ETTR vs checkpoint interval";
  p.x_label = "checkpoint interval";
  p.runs = 200;
  p.points = {{3600, "1h", 0.90, 0.86, 0.93}, {300, "5m", 0.95, 0.93, 0.97}, {900, "15m", 0.96, 0.94, 0.975}};
  return p;
}

// The pixel y of a left-axis tick label: the <text> whose content is `label`.
double tick_y(const std::vector<SvgElement>& all, const std::string& label) {
  for (const SvgElement& e : all)
    if (e.name == "text" && e.text == label) return e.number("y") - 4;  // labels sit 4 px under the tick
  ADD_FAILURE() << "no tick labelled " << label;
  return 0;
}

TEST(EttrPlotTest, BandLiesBetweenTheEndsOfAnAxisFromZeroToOneHundredPercent) {
  std::string error;
  const std::vector<SvgElement> all = read_svg(ettr_sweep_svg(three_intervals()), &error);
  ASSERT_EQ(error, "");
  const double y0 = tick_y(all, "0%"), y100 = tick_y(all, "100%");
  EXPECT_GT(y0, y100);  // 0% at the bottom
  for (const char* tick : {"20%", "40%", "60%", "80%"}) {
    const double y = tick_y(all, tick);
    EXPECT_LT(y, y0) << tick;
    EXPECT_GT(y, y100) << tick;
  }
  std::vector<SvgElement> bands;
  for (const SvgElement& e : elements_named(all, "polygon"))
    if (e.attrs.count("class") && e.attrs.at("class") == "p5-p95") bands.push_back(e);
  ASSERT_EQ(bands.size(), 1u);
  const auto band = point_values(bands[0].attrs.at("points"));
  ASSERT_EQ(band.size(), 6u);  // p95 of three points, then p5 back
  const auto px = [&](double ettr) { return y0 + (y100 - y0) * ettr; };
  EXPECT_NEAR(band[0].second, px(0.97), 0.02);  // 5m's p95: sorted by interval
  EXPECT_NEAR(band[5].second, px(0.93), 0.02);  // 5m's p5
  for (const auto& [x, y] : band) {
    EXPECT_LE(y, y0 + 1e-9);
    EXPECT_GE(y, y100 - 1e-9);
  }
  // The mean line runs inside the band.
  const std::vector<SvgElement> lines = elements_named(all, "polyline");
  ASSERT_EQ(lines.size(), 1u);
  const auto mean = point_values(lines[0].attrs.at("points"));
  ASSERT_EQ(mean.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(mean[i].first, band[i].first);
    EXPECT_GE(mean[i].second, band[i].second);          // below p95 (pixels grow down)
    EXPECT_LE(mean[i].second, band[5 - i].second);      // above p5
  }
  const std::vector<std::string> texts = texts_of(all);
  for (const char* want : {"5m", "15m", "1h", "96.0%", "checkpoint interval (log scale)", "mean ETTR",
                           "p5-p95 of the runs"}) {
    EXPECT_NE(std::find(texts.begin(), texts.end(), want), texts.end()) << want;
  }
}

TEST(EttrPlotTest, OnePointGetsABandAndTitlesAreEscaped) {
  EttrPlot p = three_intervals();
  p.points.resize(1);
  p.title = "a & b </text><script>x</script>";
  std::string error;
  const std::vector<SvgElement> all = read_svg(ettr_sweep_svg(p), &error);
  ASSERT_EQ(error, "");
  EXPECT_TRUE(elements_named(all, "script").empty());
  const std::vector<std::string> texts = texts_of(all);
  EXPECT_NE(std::find(texts.begin(), texts.end(), p.title), texts.end());
  std::vector<SvgElement> polygons = elements_named(all, "polygon");
  ASSERT_EQ(polygons.size(), 1u);
  EXPECT_EQ(point_values(polygons[0].attrs.at("points")).size(), 4u);
}

TEST(EttrPlotTest, RefusesAnEmptySweep) {
  EXPECT_THROW(ettr_sweep_svg(EttrPlot{}), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::reliability
