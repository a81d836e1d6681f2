// tests/model/svg_test.cc: base/svg.h, the one SVG writer (header-only, below
// every layer; tested here beside base/number_text.h's test): escaping of text
// and attributes, the number format, round ticks and an axis from zero.
#include "base/svg.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/svg_reader.h"

namespace megascale::base {
namespace {

using svg_testing::elements_named;
using svg_testing::read_svg;
using svg_testing::SvgElement;

TEST(Svg, EscapesTextTooltipsAndAttributeValues) {
  Svg svg(100, 50);
  const std::string evil = "a & b </text><script>alert(1)</script> \"q\"";
  svg.text(1, 2, evil, {{"data-name", evil}});
  svg.rect(0, 0, 10, 10, "red", {}, evil);
  std::string error;
  const std::vector<SvgElement> all = read_svg(svg.str(), &error);
  ASSERT_EQ(error, "") << svg.str();
  EXPECT_TRUE(elements_named(all, "script").empty());
  const std::vector<SvgElement> texts = elements_named(all, "text");
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0].text, evil);
  EXPECT_EQ(texts[0].attrs.at("data-name"), evil);
  const std::vector<SvgElement> titles = elements_named(all, "title");
  ASSERT_EQ(titles.size(), 1u);
  EXPECT_EQ(titles[0].text, evil);
  EXPECT_EQ(titles[0].parent, "rect");
  EXPECT_EQ(all[0].name, "svg");
  EXPECT_EQ(all[0].attrs.at("width"), "100");
}

TEST(Svg, NumbersAreShortAndNeverNegativeZero) {
  EXPECT_EQ(svg_number(12), "12");
  EXPECT_EQ(svg_number(3.14159), "3.14");
  EXPECT_EQ(svg_number(2.5), "2.5");
  EXPECT_EQ(svg_number(-0.001), "0");
  EXPECT_EQ(svg_number(-1.5), "-1.5");
}

TEST(Svg, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_DOUBLE_EQ(nice_step(1.0, 5), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(7.3, 5), 2.0);
  EXPECT_DOUBLE_EQ(nice_step(0.037, 4), 0.01);
  const std::vector<double> t = nice_ticks(0, 1, 5);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_DOUBLE_EQ(t.front(), 0.0);
  EXPECT_NEAR(t.back(), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(nice_ceiling(7.3, 5), 8.0);
  EXPECT_DOUBLE_EQ(nice_ceiling(0.41, 4), 0.6);  // step 0.2
  EXPECT_DOUBLE_EQ(nice_ceiling(0, 4), 1.0);
}

TEST(Svg, AxisStartsAtZeroWithLabelledTicks) {
  Svg svg(400, 300);
  const LinearScale y{0.0, 10.0, 250, 50};
  draw_axis(svg, y, AxisSide::kLeft, 60, "time (s)", [](double v) { return svg_number(v); }, 5);
  std::string error;
  const std::vector<SvgElement> all = read_svg(svg.str(), &error);
  ASSERT_EQ(error, "");
  std::vector<std::string> labels;
  for (const SvgElement& e : elements_named(all, "text")) labels.push_back(e.text);
  EXPECT_EQ(labels, (std::vector<std::string>{"0", "2", "4", "6", "8", "10", "time (s)"}));
  EXPECT_DOUBLE_EQ(y(0.0), 250);
  EXPECT_DOUBLE_EQ(y(10.0), 50);
}

}  // namespace
}  // namespace megascale::base
