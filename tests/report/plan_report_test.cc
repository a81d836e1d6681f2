// tests/report/plan_report_test.cc: report/plan_report.h's labels, text, JSON
// and chart points, on a hand-made study.
#include "report/plan_report.h"

#include <string>

#include <gtest/gtest.h>

#include "model/scenario.h"

namespace megascale::report {
namespace {

reliability::PlanStudy study() {
  reliability::PlanStudy st;
  st.iteration = {12.5, "analytical"};
  st.model.horizon_s = 21 * 86400.0;
  st.model.checkpoint_stall_s = 2;
  st.result.ettr_mean = 0.9;
  st.result.ettr_p5 = 0.85;
  st.result.ettr_p95 = 0.95;
  st.result.lost_hours_by_cause = {{"gpu", 10.0}, {"network", 2.5}};
  st.sweep = {{300, 0.8, 0.7, 0.9}, {3600, 0.9, 0.85, 0.95}};
  st.best = st.sweep[1];
  st.mtbf_s = 7200;
  st.young_daly_s = 170;
  st.assumptions = {{"comm_init_s", "30 s", "paper"}};
  return st;
}

TEST(PlanReport, DurationLabelUsesTheLargestWholeUnit) {
  EXPECT_EQ(duration_label(300), "5m");
  EXPECT_EQ(duration_label(7200), "2h");
  EXPECT_EQ(duration_label(86400), "1d");
  EXPECT_EQ(duration_label(90), "90s");
  EXPECT_EQ(duration_label(5400), "90m");
  // Below a second or not whole: two intervals never share a label (0.1 s and
  // 0.01 s both read "0s").
  EXPECT_EQ(duration_label(1.5), "1.5s");
  EXPECT_EQ(duration_label(0.1), "0.1s");
  EXPECT_EQ(duration_label(0.01), "0.01s");
}

TEST(PlanReport, TextGivesTheFiguresAndOnlyTheSweepsAsked) {
  const model::Scenario s = model::default_scenario("megascale");
  reliability::PlanRequest request;
  request.runs = 100;
  request.seed = 7;
  const std::string text = plan_text(s, request, study(), false);
  EXPECT_NE(text.find("100 runs, seed 7)"), std::string::npos) << text;
  request.runs = 1;
  EXPECT_NE(plan_text(s, request, study(), false).find("1 run, seed 7)"), std::string::npos);
  request.runs = 100;
  EXPECT_NE(text.find("  iteration time      12.50 s (analytical: analytical estimator"), std::string::npos) << text;
  EXPECT_NE(text.find("  ETTR                90.0% (p5 85.0%, p95 95.0%)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    gpu         10.0\n    network     2.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  best checkpoint interval 3600 s (ETTR 90.00%)"), std::string::npos) << text;
  EXPECT_NE(text.find("    comm_init_s             30 s: paper\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("sweep checkpoint_interval"), std::string::npos);
  // Days past 100,000 in three figures with the years beside (19 digits for
  // [run] tokens = 1e30); an ordinary figure as it was.
  reliability::PlanStudy far = study();
  far.result.days_to_finish = 5.787711489579317e18;
  EXPECT_NE(plan_text(s, request, far, false).find("  days to finish      5.79e+18 (1.58e+16 years) (21.0 days of work"),
            std::string::npos)
      << plan_text(s, request, far, false);
  far.result.days_to_finish = 36.04;
  EXPECT_NE(plan_text(s, request, far, false).find("  days to finish      36.0 (21.0 days of work at the mean ETTR)\n"),
            std::string::npos);
  // With [run] tokens, the line says how many it finishes.
  far.model.tokens = 300e9;
  far.model.tokens_per_iteration = 2048.0 * 6144;
  EXPECT_NE(plan_text(s, request, far, false).find("  days to finish      36.0 (300B tokens at the mean ETTR)\n"),
            std::string::npos)
      << plan_text(s, request, far, false);
  far.model.tokens = 1.5e12;
  EXPECT_NE(plan_text(s, request, far, false).find("(1.5T tokens at the mean ETTR)"), std::string::npos);
  far.model.tokens = 5e4;
  EXPECT_NE(plan_text(s, request, far, false).find("(5e+04 tokens at the mean ETTR)"), std::string::npos)
      << plan_text(s, request, far, false);
  const std::string swept = plan_text(s, request, study(), true);
  EXPECT_NE(swept.find("  sweep checkpoint_interval:\n    5m        ETTR 80.00%\n    1h        ETTR 90.00%\n"),
            std::string::npos)
      << swept;
}

// The wait for the previous save appears only when the interval is shorter
// than a save's trip to storage.
TEST(PlanReport, TheWaitForThePreviousCheckpointIsNamedWhenItExists) {
  model::Scenario s = model::default_scenario("megascale");
  const reliability::PlanRequest request;
  reliability::PlanStudy st = study();
  st.model.checkpoint_persist_s = 50;
  st.model.recovery.checkpoint_interval_s = 1800;
  EXPECT_EQ(plan_text(s, request, st, false).find("checkpoint wait"), std::string::npos);
  st.model.recovery.checkpoint_interval_s = 20;
  const std::string text = plan_text(s, request, st, false);
  EXPECT_NE(text.find("  checkpoint wait     each checkpoint first waits 28.0 s for the previous one to reach "
                      "storage (the interval is shorter than the 50.0 s a save takes): 30.0 s lost per checkpoint\n"),
            std::string::npos)
      << text;
  EXPECT_DOUBLE_EQ(plan_json(s, request, st, {})["checkpoint_cycle_stall_s"].get<double>(), 30);
  // Young/Daly's interval (170 s here) below a 200 s persist says so.
  EXPECT_EQ(text.find("would wait for the one before"), std::string::npos);
  st.model.checkpoint_persist_s = 200;
  EXPECT_NE(plan_text(s, request, st, false)
                .find("= 170 s (shorter than the 200.0 s a save takes to reach storage: at it each checkpoint would "
                      "wait for the one before)\n"),
            std::string::npos)
      << plan_text(s, request, st, false);
}

TEST(PlanReport, JsonAndChartFollowTheStudy) {
  const model::Scenario s = model::default_scenario("megascale");
  reliability::PlanRequest request;
  request.runs = 100;
  const base::Json j = plan_json(s, request, study(), {"plot.svg"});
  EXPECT_DOUBLE_EQ(j["ettr_mean"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(j["mtbf_h"].get<double>(), 2.0);
  EXPECT_EQ(j["sweep"].size(), 2u);
  EXPECT_EQ(j["files"][0], "plot.svg");
  EXPECT_FALSE(j.contains("gpus_sweep"));
  const reliability::EttrPlot plot = plan_plot(s, request, study());
  ASSERT_EQ(plot.points.size(), 2u);
  EXPECT_EQ(plot.points[0].label, "5m");
  EXPECT_EQ(plot.x_label, "checkpoint interval");
  EXPECT_EQ(plot.runs, 100);
}

}  // namespace
}  // namespace megascale::report
