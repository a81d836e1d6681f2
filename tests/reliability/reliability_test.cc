// Tests of reliability/: the init-time model at the paper's points, ETTR limits,
// monotonicity in the failure rate (common random numbers), Young/Daly on a
// synthetic case, RDMA traffic drops and their detection, failures during
// recovery, the time accounting, the [failures]/[recovery] keys, and the
// MegaScale / baseline operating points.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
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
  for (bool during_recovery : {true, false}) {
    double previous = 1.0;
    for (double scale : {0.25, 0.5, 1.0, 2.0, 4.0}) {
      RunModel m = synthetic(6 * 3600.0 / scale, 30, 1800);
      m.recovery.process_start_s = 600;
      m.failures.during_recovery = during_recovery;
      const double ettr = monte_carlo(m, 400, 7).ettr_mean;
      EXPECT_LT(ettr, previous) << "rate scale " << scale << " during_recovery " << during_recovery;
      previous = ettr;
    }
  }
}

// Only hardware (GPU) crashes, so that failures can arrive while the job is down.
RunModel gpu_crashes(double mtbf_s, double restart_s) {
  RunModel m = synthetic(0, 30, 1800);
  m.rate_per_s[static_cast<int>(Cause::kGpu)] = 1.0 / mtbf_s;
  m.recovery.process_start_s = restart_s;
  m.recovery.spare_nodes = 1000;
  return m;
}

TEST(FailuresDuringRecoveryTest, LowerEttrAtHighFailureRates) {
  // MTBF 2 h and a 1 h restart: about 40% of restarts see another failure.
  RunModel on = gpu_crashes(2 * 3600.0, 3600);
  RunModel off = on;
  off.failures.during_recovery = false;
  const PlanResult p_on = monte_carlo(on, 300, 5);
  const PlanResult p_off = monte_carlo(off, 300, 5);
  EXPECT_LT(p_on.ettr_mean, p_off.ettr_mean - 0.03) << p_on.ettr_mean << " vs " << p_off.ettr_mean;
  EXPECT_GT(p_on.recovery_failures_mean, 10);
  EXPECT_EQ(p_off.recovery_failures_mean, 0);
  // At a low rate the two agree closely (few failures fall into a short downtime).
  RunModel low_on = gpu_crashes(48 * 3600.0, 120);
  RunModel low_off = low_on;
  low_off.failures.during_recovery = false;
  EXPECT_NEAR(monte_carlo(low_on, 300, 5).ettr_mean, monte_carlo(low_off, 300, 5).ettr_mean, 0.002);
}

TEST(FailuresDuringRecoveryTest, CommonRandomNumbersAcrossRecoverySettings) {
  // The failure times are drawn on the wall clock, so a slower restart can only
  // lose time: ETTR falls with the restart time run by run, not only on average.
  double previous_mean = 1.0;
  std::vector<double> previous(200, 1.0);
  for (double restart_s : {60.0, 600.0, 1800.0, 3600.0}) {
    const RunModel m = gpu_crashes(4 * 3600.0, restart_s);
    double mean = 0;
    for (int i = 0; i < 200; ++i) {
      const double ettr = simulate_run(m, 11, i).ettr;
      EXPECT_LE(ettr, previous[i] + 1e-12) << "run " << i << " restart " << restart_s;
      previous[i] = ettr;
      mean += ettr / 200;
    }
    EXPECT_LT(mean, previous_mean);
    previous_mean = mean;
  }
}

TEST(FailuresDuringRecoveryTest, FailureDuringRestartRestartsTheRestart) {
  RunModel m = synthetic(0, 0, 900);
  m.recovery.process_start_s = 100;
  m.recovery.replacement_s = 60;
  // Down at 4050 s: replacement 60 s, restart 4110..4210 s; a second crash at
  // 4150 s restarts it: replacement again, restart 4210..4310 s.
  m.failures.faults = {{4050.0, "gpu", "crash"}, {4150.0, "gpu", "crash"}};
  const RunOutcome o = simulate_run(m, 1, 0);
  EXPECT_EQ(o.restarts, 2);
  EXPECT_EQ(o.recovery_failures, 1);
  EXPECT_NEAR((1 - o.ettr) * m.horizon_s, 450 + (4310 - 4050), 1e-6);
}

TEST(FailuresDuringRecoveryTest, FailureDuringDiagnosisJoinsTheRecovery) {
  RunModel m = synthetic(0, 0, 900);
  m.recovery.process_start_s = 100;
  m.recovery.replacement_s = 60;
  m.recovery.self_check_s = 300;
  // Down at 4050 s, restart due at 4410 s; a crash at 4100 s is diagnosed by
  // 4400 s, replaced by 4460 s and restarted with the first: up at 4560 s, one
  // restart.
  m.failures.faults = {{4050.0, "gpu", "crash"}, {4100.0, "node", "crash"}};
  const RunOutcome o = simulate_run(m, 1, 0);
  EXPECT_EQ(o.restarts, 1);
  EXPECT_NEAR((1 - o.ettr) * m.horizon_s, 450 + (4560 - 4050), 1e-6);
  // With the failure clock stopped while down, the second fault waits for the
  // job to be back (4510 s) and costs a full recovery of its own.
  m.failures.during_recovery = false;
  const RunOutcome off = simulate_run(m, 1, 0);
  EXPECT_EQ(off.restarts, 2);
  EXPECT_NEAR((1 - off.ettr) * m.horizon_s, 450 + 460 + 460, 1e-6);
}

TEST(TrafficDropTest, KindShareOfNetworkCauses) {
  model::FailureConfig f;
  f.traffic_drop_fraction = 0.2;
  f.hang_fraction = 0.1;
  f.slowdown_fraction = 0.05;
  for (Cause c : {Cause::kNic, Cause::kLink, Cause::kSwitch}) {
    EXPECT_EQ(failure_kind(c, 0.19, 0.5, f), Kind::kTrafficDrop) << to_string(c);
    EXPECT_NE(failure_kind(c, 0.21, 0.5, f), Kind::kTrafficDrop) << to_string(c);
  }
  EXPECT_EQ(failure_kind(Cause::kLink, 0.5, 0.01, f), Kind::kLinkFlap);
  EXPECT_EQ(failure_kind(Cause::kNic, 0.5, 0.01, f), Kind::kHang);
  EXPECT_EQ(failure_kind(Cause::kGpu, 0.0, 0.5, f), Kind::kCrash);  // GPUs drop no traffic
  EXPECT_EQ(failure_kind(Cause::kNode, 0.0, 0.5, f), Kind::kNodeDown);
  EXPECT_EQ(failure_kind(Cause::kSoftware, 0.0, 0.12, f), Kind::kSlowdown);
  f.traffic_drop_fraction = 0;
  EXPECT_EQ(failure_kind(Cause::kNic, 0.0, 0.5, f), Kind::kCrash);
  EXPECT_EQ(kind_from_string("traffic_drop"), Kind::kTrafficDrop);
  EXPECT_STREQ(to_string(Kind::kTrafficDrop), "traffic_drop");
}

TEST(TrafficDropTest, DetectedByTrafficMonitoringElseNcclTimeout) {
  RunModel m = synthetic(0, 0, 900);
  m.recovery.process_start_s = 100;
  m.recovery.traffic_drop_detect_s = 60;
  m.failures.faults = {{4050.0, "nic", "traffic_drop"}};
  const double fixed_s = 450 + m.recovery.replacement_s + 100;  // lost work, swap, restart
  const RunOutcome monitored = simulate_run(m, 1, 0);
  const double detect_s = (1 - monitored.ettr) * m.horizon_s - fixed_s;
  EXPECT_GE(detect_s, 30 - 1e-6);  // 60 s x U(0.5, 1.5)
  EXPECT_LE(detect_s, 90 + 1e-6);
  EXPECT_NEAR(monitored.diagnosis_s, detect_s, 1e-6);
  m.recovery.traffic_anomaly_detection = false;  // nothing sees it: the NCCL timeout
  const RunOutcome unmonitored = simulate_run(m, 1, 0);
  EXPECT_NEAR((1 - unmonitored.ettr) * m.horizon_s, fixed_s + m.recovery.nccl_timeout_s, 1e-6);
}

TEST(TrafficDropTest, MoreDropsWithoutMonitoringLowerEttr) {
  // Network failures only; without traffic monitoring every drop costs the NCCL
  // timeout, so ETTR falls as the drop share grows (common random numbers).
  RunModel m = synthetic(0, 0, 900);
  m.rate_per_s[static_cast<int>(Cause::kSwitch)] = 1.0 / (3 * 3600.0);
  m.recovery.traffic_anomaly_detection = false;
  double previous = 1.0;
  for (double share : {0.0, 0.25, 0.5, 1.0}) {
    m.failures.traffic_drop_fraction = share;
    const double ettr = monte_carlo(m, 200, 9).ettr_mean;
    EXPECT_LT(ettr, previous) << "share " << share;
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

// A two-stage save whose persist outlasts the interval: the next checkpoint
// waits for the previous one to reach storage (one save in flight), so the
// stall per checkpoint is max(stage, persist - interval). The run model used to
// let the persists overlap: every snapshot on storage 100 s after it was taken
// at full bandwidth, however many were in flight, and the loss was the 10 s
// staging alone.
TEST(RunModelTest, ACheckpointWaitsForThePreviousOneToReachStorage) {
  RunModel m = synthetic(0, 10, 30);
  m.recovery.checkpoint = "async";
  m.checkpoint_persist_s = 100;
  EXPECT_DOUBLE_EQ(m.checkpoint_cycle_stall_s(), 70);
  // 30 s of training per 100 s cycle; 21 days are a whole number of cycles.
  EXPECT_NEAR(simulate_run(m, 1, 0).ettr, 0.3, 1e-9);
  // An interval longer than the persist: the staging alone.
  m.recovery.checkpoint_interval_s = 200;
  EXPECT_DOUBLE_EQ(m.checkpoint_cycle_stall_s(), 10);
  EXPECT_NEAR(simulate_run(m, 1, 0).ettr, 200.0 / 210, 1e-9);
  // Lost work counts from the last snapshot on storage. Cycle 100 s: snapshot j
  // is staged over [100 j - 10, 100 j] and on storage at 100 j + 90. A crash at
  // 1,050 s has trained 330 s; snapshot 10 (300 s) is not yet on storage,
  // snapshot 9 (270 s) is: 60 s of training are redone after the restart.
  m.recovery.checkpoint_interval_s = 30;
  m.recovery.process_start_s = 100;
  m.failures.faults.push_back({1050.0, "software", "crash"});
  const RunOutcome o = simulate_run(m, 1, 0);
  EXPECT_EQ(o.restarts, 1);
  EXPECT_NEAR(o.catch_up_s, 100 + 60, 1e-6);
}

// Found by the fuzz test (tests/fuzz/corpus/plan-rate-scale-1e308.toml):
// failures.rate_scale = 1e6 on the 12,288-GPU run made `plan` run for hours, and
// 1e308 (an infinite rate: failures at the same instant) forever. A run whose
// expected failures pass kMaxExpectedFailuresPerRun is refused at once.
TEST(RunModelTest, RefusesFailureCountsNoRunCouldSimulate) {
  RunModel m = synthetic(1e-3, 0, 900);  // 21 days at a 1 ms MTBF: 1.8e9 failures
  EXPECT_GT(expected_failures_per_run(m), kMaxExpectedFailuresPerRun);
  EXPECT_THROW(simulate_run(m, 1, 0), std::invalid_argument);
  EXPECT_THROW(monte_carlo(m, 1, 1), std::invalid_argument);
  m.rate_per_s[static_cast<int>(Cause::kSoftware)] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(monte_carlo(m, 1, 1), std::invalid_argument);
  // The bound is far above any real run: a minute's MTBF for three weeks is ~30k.
  const RunModel busy = synthetic(60, 0, 900);
  EXPECT_LT(expected_failures_per_run(busy), kMaxExpectedFailuresPerRun);
  EXPECT_GT(monte_carlo(busy, 1, 1).failures_mean, 20000);
  // Through the scenario: the error reaches `plan` as bad input.
  const model::Scenario s = model::load_scenario(kPaper + "megascale-175b-12288-3weeks.toml",
                                                 {"failures.rate_scale=1e308"});
  EXPECT_THROW(monte_carlo(build_run_model(s, 5.0), 1, 1), std::invalid_argument);
}

// Every second of the run is either progress or lost to one category.
TEST(RunModelTest, LostTimeAndProgressAddUpToTheRun) {
  for (const char* file : {"megascale-175b-12288-3weeks.toml", "baseline-175b-12288-3weeks.toml"}) {
    const model::Scenario s = model::load_scenario(kPaper + file);
    for (bool during_recovery : {true, false}) {
      RunModel m = build_run_model(s, 5.0);
      m.failures.during_recovery = during_recovery;
      m.failures.slowdown_fraction = 0.3;  // exercise the straggler path too
      for (int i = 0; i < 50; ++i) {
        const RunOutcome o = simulate_run(m, 3, i);
        const double lost = std::accumulate(o.lost_s.begin(), o.lost_s.end(), 0.0);
        EXPECT_NEAR(o.ettr * m.horizon_s + lost, m.horizon_s, 1e-6 * m.horizon_s)
            << file << " run " << i << " during_recovery " << during_recovery;
      }
    }
  }
}

// The new [failures] / [recovery] keys parse, and bad values name file, key and reason.
TEST(ScenarioKeysTest, TrafficDropAndDuringRecoveryKeys) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  auto load = [&](const std::string& extra) {
    const std::string path = (dir / "megascale-reliability-keys.toml").string();
    std::ifstream in(kPaper + "megascale-175b-12288-3weeks.toml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string marker = "[failures]\n";
    text.insert(text.find(marker) + marker.size(), extra);
    std::ofstream(path) << text;
    return model::load_scenario(path);
  };
  const model::Scenario s = load("traffic_drop_fraction = 0.5\nduring_recovery = false\n");
  EXPECT_DOUBLE_EQ(s.failures.traffic_drop_fraction, 0.5);
  EXPECT_FALSE(s.failures.during_recovery);
  EXPECT_TRUE(load("").failures.during_recovery);
  try {
    load("traffic_drop_fraction = 1.5\n");
    FAIL() << "no error";
  } catch (const model::ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("traffic_drop_fraction"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("megascale-reliability-keys.toml"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load("during_recovery = \"yes\"\n"), model::ScenarioError);
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
