// tests/model/breakdown_chart_test.cc: the breakdown chart of `simulate` /
// `compare --chart` (model/breakdown_chart.h) read back as XML: stacked
// segments that add up to each iteration, bars on one axis from zero, a
// legend of the categories present, escaped labels.
#include "model/breakdown_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <string>

#include "model/scenario.h"
#include "tests/svg_reader.h"

namespace megascale::model {
namespace {

using svg_testing::elements_named;
using svg_testing::read_svg;
using svg_testing::SvgElement;
using svg_testing::texts_of;

TEST(BreakdownChart, EveryCategoryOfTheBreakdownIsDrawn) {
  // Each TimeBreakdown field once: a new field without a category fails here.
  TimeBreakdown b;
  double* fields[] = {&b.data_s, &b.compute_s, &b.recompute_s, &b.tp_exposed_s, &b.bubble_s, &b.pp_exposed_s,
                      &b.dp_exposed_s, &b.embedding_sync_s, &b.grad_norm_s, &b.optimizer_s, &b.host_s};
  EXPECT_EQ(sizeof(TimeBreakdown), std::size(fields) * sizeof(double)) << "a TimeBreakdown field has no chart category";
  for (size_t i = 0; i < std::size(fields); ++i) *fields[i] = static_cast<double>(i + 1);
  double drawn = 0;
  for (const BreakdownCategory& c : breakdown_categories()) drawn += b.*(c.seconds);
  EXPECT_DOUBLE_EQ(drawn, b.total());
}

TEST(BreakdownChart, CompareBarsShareAnAxisFromZero) {
  const Estimate slow = estimate(default_scenario("megatron"));
  const Estimate fast = estimate(default_scenario("megascale"));
  const std::string svg = breakdown_svg("175B & friends <12,288 GPUs>",
                                        {{"Megatron-LM", slow.breakdown, slow.iteration_time_s},
                                         {"MegaScale", fast.breakdown, fast.iteration_time_s}});
  std::string error;
  const std::vector<SvgElement> all = read_svg(svg, &error);
  ASSERT_EQ(error, "");
  const std::vector<std::string> texts = texts_of(all);
  auto has = [&](const std::string& t) { return std::find(texts.begin(), texts.end(), t) != texts.end(); };
  EXPECT_TRUE(has("175B & friends <12,288 GPUs>"));
  EXPECT_TRUE(has("Megatron-LM"));
  EXPECT_TRUE(has("MegaScale"));
  EXPECT_TRUE(has("time per iteration (s)"));
  EXPECT_TRUE(has("compute"));          // legend
  EXPECT_TRUE(has("pipeline bubble"));  // legend
  // The "0" tick of the bottom axis is where every bar starts.
  double zero_x = -1;
  for (const SvgElement& e : elements_named(all, "text"))
    if (e.text == "0" && e.has("text-anchor") && e.attrs.at("text-anchor") == "middle") zero_x = e.number("x");
  ASSERT_GT(zero_x, 0);
  std::map<double, std::vector<SvgElement>> bars;  // by y
  for (const SvgElement& e : elements_named(all, "rect"))
    if (e.has("class") && e.attrs.at("class") == "segment") bars[e.number("y")].push_back(e);
  ASSERT_EQ(bars.size(), 2u);
  std::vector<double> sums_s, widths_px;
  for (const auto& [y, segments] : bars) {
    double sum_s = 0, left = 1e9, right = 0;
    for (const SvgElement& e : segments) {
      sum_s += e.number("data-seconds");
      left = std::min(left, e.number("x"));
      right = std::max(right, e.number("x") + e.number("width"));
    }
    EXPECT_NEAR(left, zero_x, 0.01);
    sums_s.push_back(sum_s);
    widths_px.push_back(right - left);
  }
  EXPECT_NEAR(sums_s[0], slow.iteration_time_s, 1e-4 * slow.iteration_time_s);
  EXPECT_NEAR(sums_s[1], fast.iteration_time_s, 1e-4 * fast.iteration_time_s);
  // One scale: the bars' lengths are in the ratio of their times.
  EXPECT_NEAR(widths_px[0] / widths_px[1], slow.iteration_time_s / fast.iteration_time_s, 0.01);
}

TEST(BreakdownChart, TimeTheBreakdownMissesIsUnattributed) {
  TimeBreakdown b;
  b.compute_s = 1.0;
  const std::string svg = breakdown_svg("t", {{"job", b, 1.5}});
  std::string error;
  const std::vector<SvgElement> all = read_svg(svg, &error);
  ASSERT_EQ(error, "");
  bool unattributed = false;
  for (const SvgElement& e : elements_named(all, "rect"))
    if (e.has("data-category") && e.attrs.at("data-category") == "unattributed") {
      unattributed = true;
      EXPECT_NEAR(e.number("data-seconds"), 0.5, 1e-9);
    }
  EXPECT_TRUE(unattributed);
  EXPECT_THROW(breakdown_svg("t", {}), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::model
