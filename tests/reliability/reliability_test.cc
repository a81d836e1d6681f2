// Tests of reliability/: the init-time model at the paper's points, ETTR limits,
// monotonicity in the failure rate (common random numbers), Young/Daly on a
// synthetic case, and the MegaScale / baseline operating points.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "model/estimator.h"
#include "model/scenario.h"
#include "reliability/failure_model.h"
#include "reliability/recovery_model.h"
#include "reliability/run_model.h"

namespace megascale::reliability {
namespace {

const std::string kPaper = std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/paper/";

TEST(CommInitTest, PaperPointsAt2048AndScale) {
  EXPECT_NEAR(comm_init_s("tcpstore", 2048), 1047.0, 1e-9);
  EXPECT_NEAR(comm_init_s("redis", 2048), 361.0, 1e-9);
  EXPECT_LT(comm_init_s("ordered", 2048), 5.0);
  EXPECT_LT(comm_init_s("ordered", 10000), 30.0);
  EXPECT_LT(comm_init_s("ordered", 12288), 30.0);
  EXPECT_GT(comm_init_s("tcpstore", 4096), 4 * 1047.0 - 1e-6);  // O(n^2)
  EXPECT_THROW(comm_init_s("etcd", 8), std::invalid_argument);
}

TEST(FailureModelTest, LinkFlapToleranceAndLlama3Preset) {
  EXPECT_NEAR(link_flap_tolerance_s(20, 7), 4.096e-6 * 1048576 * 8, 1e-9);  // ~34.4 s
  model::FailureConfig f;
  f.preset = "llama3";
  model::HardwareConfig hw;
  const auto rates = cluster_rates_per_hour(16384, hw, f);
  double total = 0;
  for (double r : rates) total += r;
  EXPECT_NEAR(total * 54 * 24, 419.0, 1e-6);  // the Llama 3 count, on its own cluster
}

// A synthetic run: only GPU crashes at a given MTBF; no detection, diagnosis or
// restart cost unless asked; sync checkpoint of a given cost.
RunModel synthetic(double mtbf_s, double checkpoint_s, double interval_s) {
  RunModel m;
  m.iteration_time_s = 1;
  m.tokens_per_iteration = 1;
  m.gpus = 8;
  m.rate_per_s[static_cast<int>(Cause::kSoftware)] = mtbf_s > 0 ? 1.0 / mtbf_s : 0.0;
  m.failures.hang_fraction = 0;
  m.failures.slowdown_fraction = 0;
  model::RecoveryConfig& r = m.recovery;
  r.error_report_s = 0;
  r.self_check_s = 0;
  r.false_negative = 0;
  r.false_positive = 0;
  r.process_start_s = 0;
  r.checkpoint = "sync";
  r.checkpoint_interval_s = interval_s;
  m.checkpoint_stall_s = checkpoint_s;
  m.checkpoint_persist_s = checkpoint_s;
  m.horizon_s = 21 * 86400.0;
  return m;
}

TEST(RunModelTest, EttrIsOneWithoutFailuresOrCheckpointCost) {
  const PlanResult p = monte_carlo(synthetic(0, 0, 900), 50, 1);
  EXPECT_DOUBLE_EQ(p.ettr_mean, 1.0);
  EXPECT_DOUBLE_EQ(p.ettr_p5, 1.0);
  EXPECT_EQ(p.restarts_mean, 0.0);
}

TEST(RunModelTest, EttrDecreasesWithFailureRate) {
  double previous = 1.0;
  for (double scale : {0.25, 0.5, 1.0, 2.0, 4.0}) {
    RunModel m = synthetic(6 * 3600.0 / scale, 30, 1800);
    m.recovery.process_start_s = 600;
    const double ettr = monte_carlo(m, 400, 7).ettr_mean;
    EXPECT_LT(ettr, previous) << "rate scale " << scale;
    previous = ettr;
  }
}

TEST(RunModelTest, SweptOptimumMatchesYoungDaly) {
  const double mtbf_s = 5 * 3600.0, cost_s = 60;
  const double yd = young_daly_interval_s(cost_s, mtbf_s);  // ~1470 s
  EXPECT_NEAR(yd, std::sqrt(2 * 60 * 18000.0), 1e-9);
  const std::vector<double> grid = geometric_grid(300, 7200, 31);  // ~11% steps
  const double step = grid[1] / grid[0];
  const auto sweep = sweep_checkpoint_interval(synthetic(mtbf_s, cost_s, 900), grid, 1000, 3);
  const auto best = std::max_element(sweep.begin(), sweep.end(),
                                     [](const SweepPoint& a, const SweepPoint& b) {
                                       return a.ettr_mean < b.ettr_mean;
                                     });
  // Within the sweep resolution (one grid step either side) of sqrt(2 C M).
  EXPECT_LE(best->interval_s, yd * step * 1.0001);
  EXPECT_GE(best->interval_s, yd / step / 1.0001);
}

TEST(RunModelTest, ExplicitFaultIsReproducible) {
  RunModel m = synthetic(0, 0, 900);
  m.failures.faults.push_back({3600.0 + 450.0, "gpu", "crash"});
  m.recovery.process_start_s = 100;
  const RunOutcome o = simulate_run(m, 1, 0);
  EXPECT_EQ(o.restarts, 1);
  // 450 s of work lost after the last checkpoint, 100 s restart, eviction of the
  // GPU's node (replacement_s).
  EXPECT_NEAR((1 - o.ettr) * m.horizon_s, 450 + 100 + m.recovery.replacement_s, 1e-6);
}

PlanResult plan_of(const std::string& file, int runs) {
  const model::Scenario s = model::load_scenario(kPaper + file);
  const RunModel m = build_run_model(s, model::estimate(s).iteration_time_s);
  return monte_carlo(m, runs, 1);
}

TEST(RunModelTest, MegaScaleOperatingPointAndBaseline) {
  const PlanResult ms = plan_of("megascale-175b-12288-3weeks.toml", 300);
  EXPECT_GT(ms.restarts_mean, 80);
  EXPECT_LT(ms.restarts_mean, 125);
  EXPECT_LT(ms.diagnosis_mean_s, 600);   // detection + diagnostic tests < 10 min
  EXPECT_LT(ms.catch_up_mean_s, 900);    // catch-up < 15 min
  EXPECT_GT(ms.ettr_mean, 0.9);
  const PlanResult base = plan_of("baseline-175b-12288-3weeks.toml", 300);
  EXPECT_LT(base.ettr_mean, ms.ettr_mean - 0.05);
}

}  // namespace
}  // namespace megascale::reliability
