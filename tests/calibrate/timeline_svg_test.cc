// tests/calibrate/timeline_svg_test.cc: the measured-over-predicted timeline of
// `calibrate check` (calibrate/timeline_svg.h), read back as XML: lanes
// labelled, ops on a time axis from 0 ms, text escaped.
#include "calibrate/timeline_svg.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/svg_reader.h"

namespace megascale::calibrate {
namespace {

using svg_testing::elements_named;
using svg_testing::read_svg;
using svg_testing::SvgElement;
using svg_testing::texts_of;

model::TraceEvent op(const std::string& kind, int microbatch, double start_us, double end_us) {
  model::TraceEvent e;
  e.kind = kind;
  e.microbatch = microbatch;
  e.chunk = 0;
  e.start_us = start_us;
  e.end_us = end_us;
  return e;
}

TEST(TimelineSvg, LanesOnOneAxisFromZeroWithEscapedText) {
  const std::vector<TimelineLane> lanes = {
      {"stage 0 measured <&>", false, {op("forward", 0, 1000, 5000), op("backward", 0, 6000, 14000)}},
      {"stage 0 predicted", true, {op("forward", 0, 0, 3000), op("backward", 0, 3000, 9000)}}};
  std::string error;
  const std::vector<SvgElement> all = read_svg(timeline_svg("job & co: step 1", lanes), &error);
  ASSERT_EQ(error, "");
  const std::vector<std::string> texts = texts_of(all);
  for (const char* want : {"job & co: step 1", "stage 0 measured <&>", "stage 0 predicted", "0",
                           "ms from the lane's first op"}) {
    EXPECT_NE(std::find(texts.begin(), texts.end(), want), texts.end()) << want;
  }
  // Each lane starts at its own first op: both forwards begin at the "0" tick.
  double zero_x = -1;
  for (const SvgElement& e : elements_named(all, "text"))
    if (e.text == "0") zero_x = e.number("x");
  int forwards = 0;
  for (const SvgElement& e : elements_named(all, "title")) forwards += e.text.rfind("forward mb 0", 0) == 0;
  EXPECT_EQ(forwards, 2);
  int at_zero = 0;
  for (const SvgElement& e : elements_named(all, "rect")) at_zero += std::abs(e.number("x") - zero_x) < 0.01;
  EXPECT_GE(at_zero, 2);
}

}  // namespace
}  // namespace megascale::calibrate
