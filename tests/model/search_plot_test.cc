// tests/model/search_plot_test.cc: what `megascale search` gives users to act
// on beyond the ranking (model/search.h, model/search_plot.h): every valid
// layout recorded, the CSV, the spread of the ranking against the model's
// error, and the scatter of MFU against memory per GPU read back as XML.
#include "model/search_plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "model/accuracy.h"
#include "model/scenario.h"
#include "model/search.h"
#include "tests/svg_reader.h"

namespace megascale::model {
namespace {

using svg_testing::elements_named;
using svg_testing::read_svg;
using svg_testing::SvgElement;
using svg_testing::texts_of;

Scenario small_job() {
  Scenario s = default_scenario("megascale");
  s.model.layers = 24;
  s.model.hidden = 2048;
  s.model.heads = 16;
  s.model.kv_heads = 16;
  s.model.ffn_hidden = 4 * 2048;
  s.parallel = ParallelConfig{};
  s.parallel.tp = 2;
  s.parallel.pp = 2;
  s.parallel.dp = 4;
  s.parallel.global_batch = 64;
  s.cluster.gpus = 16;
  return s;
}

// 175B on 64 GPUs: most layouts do not fit in 80 GB.
Scenario tight_job() {
  Scenario s = default_scenario("megascale");
  s.parallel.dp = 1;
  s.cluster.gpus = 64;
  return s;
}

TEST(SearchPoints, EveryValidLayoutIsRecordedOnlyWhenAsked) {
  const Scenario s = tight_job();
  SearchOptions o;
  o.top_k = 5;
  const SearchResult plain = search(s, o);
  EXPECT_TRUE(plain.points.empty());
  o.keep_points = true;
  const SearchResult r = search(s, o);
  EXPECT_EQ(static_cast<int64_t>(r.points.size()), r.valid);
  const int64_t fits = std::count_if(r.points.begin(), r.points.end(), [](const LayoutPoint& q) { return q.fits; });
  EXPECT_EQ(fits, r.fit);
  EXPECT_LT(fits, r.valid);  // some do not fit, and are recorded with their memory
  EXPECT_GT(r.memory_capacity_bytes, 0);
  for (const LayoutPoint& q : r.points) {
    EXPECT_EQ(q.fits, q.memory_per_gpu_bytes <= r.memory_capacity_bytes) << layout_text(q.parallel);
    EXPECT_GT(q.mfu, 0);
  }
  // The ranking is the same with or without the record.
  ASSERT_EQ(r.top.size(), plain.top.size());
  for (size_t i = 0; i < r.top.size(); ++i) EXPECT_EQ(r.top[i].estimate.mfu, plain.top[i].estimate.mfu);
}

TEST(SearchPoints, LayoutTextNamesEveryDimension) {
  ParallelConfig p;
  p.tp = 8;
  p.pp = 4;
  p.vpp = 2;
  p.dp = 96;
  p.micro_batch = 1;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(layout_text(p), "TP 8 PP 4 VPP 2 DP 96 mb 1 SP ZeRO 1 recompute selective");
}

TEST(SearchPoints, RankingSpreadMarksLayoutsWithinTheErrorOfTheBest) {
  const RankingSpread r = ranking_spread({0.55, 0.54, 0.50, 0.40}, 5.0);
  EXPECT_NEAR(r.spread_points, 15.0, 1e-9);
  EXPECT_EQ(r.within_error, 3);  // 0.50 is exactly 5 points behind: within
  EXPECT_EQ(r.within, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(ranking_spread({}, 5.0).within_error, 0);
  EXPECT_GT(kAnalyticalMfuErrorPoints, 0);
}

TEST(SearchPoints, CsvHasTheRankingThenEveryOtherValidLayout) {
  const Scenario s = small_job();
  SearchOptions o;
  o.top_k = 3;
  o.keep_points = true;
  const SearchResult r = search(s, o);
  ASSERT_EQ(r.top.size(), 3u);
  Estimate event = r.top[0].estimate;
  event.mfu = 0.4242;
  const std::string csv = search_csv(r, {event});
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "rank,tp,pp,vpp,dp,micro_batch,zero_stage,recompute,sequence_parallel,mfu,iteration_time_s,"
            "memory_per_gpu_bytes,fits,event_mfu,event_iteration_time_s,cp,first_stage_layers,last_stage_layers,"
            "pipeline_layout");
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  EXPECT_EQ(rows.size(), r.points.size());  // the ranked 3 are not repeated
  EXPECT_EQ(rows[0].rfind("1,", 0), 0u) << rows[0];
  EXPECT_NE(rows[0].find(",0.424200,"), std::string::npos) << rows[0];
  // RFC 4180: a quoted field (the Megatron-Core layout string) keeps its commas.
  auto fields = [](const std::string& row) {
    std::vector<std::string> f(1);
    bool quoted = false;
    for (char ch : row) {
      if (ch == '"') {
        quoted = !quoted;
      } else if (ch == ',' && !quoted) {
        f.emplace_back();
      } else {
        f.back() += ch;
      }
    }
    return f;
  };
  EXPECT_EQ(fields(rows[1])[13], "") << rows[1];  // not refined: no event MFU
  EXPECT_EQ(fields(rows[1])[14], "") << rows[1];  // nor event time
  EXPECT_EQ(rows[3].rfind(",", 0), 0u) << rows[3];  // unranked: no rank
  for (const std::string& row : rows) {
    ASSERT_EQ(fields(row).size(), 19u) << row;
    EXPECT_GE(std::stoi(fields(row)[15]), 1) << row;  // cp
    EXPECT_GE(std::stoi(fields(row)[16]), 0) << row;  // first_stage_layers (0: even)
    EXPECT_GE(std::stoi(fields(row)[17]), 0) << row;  // last_stage_layers
    // pipeline_layout: empty, or a split with its first and last stage's heads
    if (!fields(row)[18].empty()) {
      EXPECT_EQ(fields(row)[18].front(), 'E') << row;
      EXPECT_EQ(fields(row)[18].back(), 'L') << row;
    }
  }
}

TEST(SearchScatter, CapacityLineRankedDotsAndAxesFromZero) {
  const Scenario s = tight_job();
  SearchOptions o;
  o.top_k = 6;
  o.keep_points = true;
  o.memory_headroom = 0.1;
  const SearchResult r = search(s, o);
  ASSERT_FALSE(r.top.empty());
  std::string error;
  const std::vector<SvgElement> all = read_svg(search_scatter_svg("175B & co <64 GPUs>", r, 0.1), &error);
  ASSERT_EQ(error, "");
  const std::vector<std::string> texts = texts_of(all);
  auto has = [&](const std::string& t) { return std::find(texts.begin(), texts.end(), t) != texts.end(); };
  EXPECT_TRUE(has("175B & co <64 GPUs>"));
  EXPECT_TRUE(has("MFU (% of peak)"));
  EXPECT_TRUE(has("memory per GPU (GB), most loaded stage"));
  EXPECT_TRUE(has("0%"));  // the MFU axis starts at zero
  EXPECT_TRUE(has("#1"));
  // The memory axis starts at zero: its "0" tick; the capacity line sits at
  // capacity / axis end of the way along it.
  double x0 = -1;
  for (const SvgElement& e : elements_named(all, "text"))
    if (e.text == "0" && e.has("text-anchor") && e.attrs.at("text-anchor") == "middle") x0 = e.number("x");
  ASSERT_GT(x0, 0);
  std::vector<SvgElement> capacity, limit, ranked, dots;
  for (const SvgElement& e : all) {
    const std::string c = e.has("class") ? e.attrs.at("class") : "";
    if (c == "capacity") capacity.push_back(e);
    if (c == "headroom-limit") limit.push_back(e);
    if (c == "ranked") ranked.push_back(e);
    if (c == "fits" || c == "does-not-fit") dots.push_back(e);
  }
  ASSERT_EQ(capacity.size(), 1u);
  ASSERT_EQ(limit.size(), 1u);
  EXPECT_EQ(capacity[0].number("x1"), capacity[0].number("x2"));  // vertical
  EXPECT_NEAR((limit[0].number("x1") - x0) / (capacity[0].number("x1") - x0), 0.9, 0.01);
  EXPECT_EQ(ranked.size(), r.top.size());
  // 175B on 64 GPUs has ~39,000 valid layouts: an even sample is drawn.
  ASSERT_GT(r.points.size(), static_cast<size_t>(kMaxScatterPoints));
  EXPECT_LE(dots.size() + ranked.size(), static_cast<size_t>(kMaxScatterPoints));
  EXPECT_GE(dots.size(), static_cast<size_t>(kMaxScatterPoints) * 9 / 10);
  for (const SvgElement& d : ranked) EXPECT_LE(d.number("cx"), limit[0].number("x1") + 0.01);
  EXPECT_TRUE(std::any_of(dots.begin(), dots.end(), [](const SvgElement& d) {
    return d.attrs.at("class") == "does-not-fit";
  }));
}

TEST(SearchScatter, ManyLayoutsAreSampled) {
  SearchResult r;
  r.memory_capacity_bytes = 80e9;
  for (int i = 0; i < 3 * kMaxScatterPoints; ++i) {
    r.points.push_back({ParallelConfig{}, 0.3 + 1e-5 * i, 1.0, 1e9 * (i % 120), (i % 120) <= 80});
  }
  std::string error;
  const std::vector<SvgElement> all = read_svg(search_scatter_svg("t", r, 0), &error);
  ASSERT_EQ(error, "");
  EXPECT_LE(elements_named(all, "circle").size(), static_cast<size_t>(kMaxScatterPoints));
  const std::vector<std::string> texts = texts_of(all);
  EXPECT_TRUE(std::any_of(texts.begin(), texts.end(), [](const std::string& t) {
    return t.find("drawn: 1 in 3") != std::string::npos;
  }));
}

}  // namespace
}  // namespace megascale::model
