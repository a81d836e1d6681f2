// tests/calibrate/protocol_fit_test.cc: protocol curves fitted to every real
// nccl-tests fixture (tests/calibrate/fixtures/nccl-tests) must reproduce its
// out-of-place busbw within 5% at sizes >= 64 MiB and 20% below; the protocol
// lines must be ordered (latency and bandwidth LL <= LL128 <= Simple); the fit
// must recover a known three-protocol model.
#include "calibrate/protocol_fit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

namespace megascale::calibrate {
namespace {

std::string fixture_dir() { return std::string(MEGASCALE_SOURCE_DIR) + "/tests/calibrate/fixtures/nccl-tests"; }

std::vector<std::string> fixture_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(fixture_dir()))
    if (e.path().extension() == ".txt") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

int protocol_rank(const std::string& p) {
  static const std::map<std::string, int> r = {{"LL", 0}, {"LL128", 1}, {"Simple", 2}};
  auto it = r.find(p);
  return it == r.end() ? -1 : it->second;
}

TEST(ProtocolFit, EveryFixtureWithinFivePercentLargeTwentySmall) {
  std::vector<std::string> files = fixture_files();
  ASSERT_GE(files.size(), 5u);
  std::printf("%-52s %5s %4s | %-24s | %-24s\n", "fixture", "pts", "segs", "3-line max err >=64M <64M",
              "used max err >=64M <64M");
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    NcclTestsRun run = read_nccl_tests_file(path);
    ProtocolFit fit = fit_protocol_model(run);
    const FitErrors& p = fit.protocol_errors;
    const FitErrors& s = fit.segment_errors;
    std::printf("%-52s %5d %4zu | %10.1f%% %11.1f%% | %10.1f%% %11.1f%%%s\n",
                std::filesystem::path(path).filename().string().c_str(), p.large_points + p.small_points,
                fit.segments.size(), 100 * p.max_rel_error_large, 100 * p.max_rel_error_small,
                100 * s.max_rel_error_large, 100 * s.max_rel_error_small, fit.refined ? "  (refined)" : "");
    for (const auto& c : fit.protocols)
      std::printf("    %-6s latency %9.2f us  busbw %8.2f GB/s  sizes %.0f .. %.0f\n", c.protocol.c_str(),
                  c.latency_us, c.busbw_gbs, c.min_bytes, c.max_bytes);
    // The requirement (every fixture: the DGX H100 sample's disturbed 32 B row,
    // 68.14 us out of place against 13.52 us in place, is fitted at its
    // in-place time, calibrate/nccl_tests.h kDisturbedRatio), on the curves used for prediction.
    EXPECT_TRUE(s.within_tolerance);
    EXPECT_LE(s.max_rel_error_large, 0.05);
    EXPECT_LE(s.max_rel_error_small, 0.20);
    for (const auto& pe : s.points) {
      double model = envelope_time_us(fit.segments, run.op, run.ranks > 0 ? run.ranks : 1,
                                      static_cast<double>(pe.bytes));
      double busbw_err = pe.measured_time_us / model - 1.0;  // model busbw / measured busbw - 1
      EXPECT_LE(std::abs(busbw_err), pe.bytes >= kLargeMessageBytes ? 0.05 : 0.20) << "size " << pe.bytes;
    }
    // Not refined unless the protocol lines missed.
    EXPECT_EQ(fit.refined, !p.within_tolerance);
    if (!fit.refined) {
      ASSERT_EQ(fit.segments.size(), fit.protocols.size());
    }
  }
}

TEST(ProtocolFit, ProtocolCurvesOrderedOnEveryFixture) {
  for (const auto& path : fixture_files()) {
    SCOPED_TRACE(path);
    NcclTestsRun run = read_nccl_tests_file(path);
    std::vector<ProtocolCurve> c = fit_protocol_curves(run);
    ASSERT_GE(c.size(), 1u);
    ASSERT_LE(c.size(), 3u);
    EXPECT_EQ(c.back().protocol, "Simple");
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_GE(protocol_rank(c[i].protocol), 0) << c[i].protocol;
      EXPECT_GE(c[i].latency_us, 0);
      EXPECT_GT(c[i].busbw_gbs, 0);
      EXPECT_LE(c[i].min_bytes, c[i].max_bytes);
      if (i == 0) continue;
      EXPECT_LT(protocol_rank(c[i - 1].protocol), protocol_rank(c[i].protocol));
      EXPECT_LE(c[i - 1].latency_us, c[i].latency_us) << c[i - 1].protocol << " vs " << c[i].protocol;
      EXPECT_LE(c[i - 1].busbw_gbs, c[i].busbw_gbs) << c[i - 1].protocol << " vs " << c[i].protocol;
      EXPECT_LT(c[i - 1].max_bytes, c[i].min_bytes);
    }
    // Refined segments keep the protocol names and tile the same sizes in order.
    ProtocolFit fit = fit_protocol_model(run);
    for (size_t i = 1; i < fit.segments.size(); ++i) {
      EXPECT_LE(protocol_rank(fit.segments[i - 1].protocol), protocol_rank(fit.segments[i].protocol));
      EXPECT_LT(fit.segments[i - 1].max_bytes, fit.segments[i].min_bytes);
    }
  }
}

// A synthetic run from a known LL / LL128 / Simple envelope (all_reduce, 8
// ranks); the printed columns are consistent, so it passes the reader's check.
NcclTestsRun synthetic_run(const std::vector<ProtocolCurve>& truth) {
  NcclTestsRun run;
  run.source = "synthetic";
  run.op = "all_reduce";
  run.ranks = 8;
  double f = nccl_busbw_factor("all_reduce", 8);
  for (int64_t b = 8; b <= (int64_t{1} << 33); b *= 2) {
    double t = 1e300;
    for (const auto& c : truth) t = std::min(t, c.latency_us + b * f / (c.busbw_gbs * 1e3));
    NcclTestsPoint p;
    p.bytes = b;
    p.count = b / 4;
    p.time_us = t;
    p.algbw_gbs = b / t / 1e3;
    p.busbw_gbs = f * p.algbw_gbs;
    run.points.push_back(p);
  }
  return run;
}

TEST(ProtocolFit, RecoversAKnownThreeProtocolModel) {
  std::vector<ProtocolCurve> truth = {{"LL", 10.0, 20.0, 0, 0}, {"LL128", 25.0, 120.0, 0, 0}, {"Simple", 80.0, 220.0, 0, 0}};
  NcclTestsRun run = synthetic_run(truth);
  ProtocolFit fit = fit_protocol_model(run);
  ASSERT_EQ(fit.protocols.size(), 3u);
  EXPECT_FALSE(fit.refined);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(fit.protocols[i].protocol, truth[i].protocol);
    EXPECT_NEAR(fit.protocols[i].latency_us, truth[i].latency_us, 0.05 * truth[i].latency_us);
    EXPECT_NEAR(fit.protocols[i].busbw_gbs, truth[i].busbw_gbs, 0.05 * truth[i].busbw_gbs);
  }
  EXPECT_LT(fit.protocol_errors.max_rel_error_large, 0.01);
  EXPECT_LT(fit.protocol_errors.max_rel_error_small, 0.05);
  EXPECT_LT(fit.protocol_errors.median_rel_error, 0.01);
}

TEST(ProtocolFit, EnvelopeScalesWithTheBusbwFactor) {
  std::vector<ProtocolCurve> c = {{"Simple", 50.0, 200.0, 1e6, 1e10}};
  double s = 1e9;
  // t = latency + S * f / busbw: f(8) = 1.75, f(16) = 1.875 for all_reduce.
  EXPECT_DOUBLE_EQ(envelope_time_us(c, "all_reduce", 8, s), 50.0 + s * 1.75 / 200e3);
  EXPECT_DOUBLE_EQ(envelope_time_us(c, "all_reduce", 16, s), 50.0 + s * 1.875 / 200e3);
  EXPECT_DOUBLE_EQ(envelope_time_us(c, "sendrecv", 16, s), 50.0 + s / 200e3);
  EXPECT_THROW(envelope_time_us({}, "all_reduce", 8, s), std::invalid_argument);
  EXPECT_THROW(envelope_time_us(c, "all_reduce", 0, s), std::invalid_argument);
}

TEST(ProtocolFit, EnvelopeUsesEachCurveOnItsOwnRange) {
  // Two non-concave pieces (the second has the lower latency): a min() over
  // lines would use the wrong one; the ranges decide, log-log in the gap.
  std::vector<ProtocolCurve> c = {{"LL128", 30.0, 100.0, 1e3, 1e6}, {"Simple", 5.0, 100.0, 4e6, 1e9}};
  double t_lo = envelope_time_us(c, "sendrecv", 2, 1e6);
  double t_hi = envelope_time_us(c, "sendrecv", 2, 4e6);
  EXPECT_DOUBLE_EQ(t_lo, 30.0 + 1e6 / 100e3);
  EXPECT_DOUBLE_EQ(t_hi, 5.0 + 4e6 / 100e3);
  double mid = envelope_time_us(c, "sendrecv", 2, 2e6);
  EXPECT_NEAR(mid, std::sqrt(t_lo * t_hi), 1e-9);
  EXPECT_DOUBLE_EQ(envelope_time_us(c, "sendrecv", 2, 10), 30.0 + 10 / 100e3);    // below: first
  EXPECT_DOUBLE_EQ(envelope_time_us(c, "sendrecv", 2, 1e12), 5.0 + 1e12 / 100e3);  // above: last
}

TEST(ProtocolFit, InterpolationFallback) {
  NcclTestsRun run = read_nccl_tests_file(fixture_dir() + "/all_gather_perf_b200_16gpu_2node_gke.txt");
  for (const auto& p : run.points) EXPECT_DOUBLE_EQ(interpolate_time_us(run.points, p.bytes), p.time_us);
  // Between 1 MiB (998.2 us) and 2 MiB (1753.7 us): log-log midpoint at sqrt(2) MiB.
  EXPECT_NEAR(interpolate_time_us(run.points, 1048576.0 * std::sqrt(2.0)), std::sqrt(998.2 * 1753.7), 1e-6);
  EXPECT_DOUBLE_EQ(interpolate_time_us(run.points, 1), 280.4);  // below: the smallest size's time
  EXPECT_DOUBLE_EQ(interpolate_time_us(run.points, 2 * 8589934592.0), 2 * 30970.0);  // above: same bandwidth
  EXPECT_THROW(interpolate_time_us({}, 1e6), std::invalid_argument);
}

TEST(ProtocolFit, NoUsablePointIsAnImportError) {
  NcclTestsRun run;
  run.source = "zero.txt";
  run.first_line = 3;
  run.op = "all_reduce";
  run.ranks = 8;
  NcclTestsPoint p;
  p.time_us = 0.13;  // the 0-byte rows nccl-tests prints for small all_gather sizes
  run.points.push_back(p);
  try {
    fit_protocol_model(run);
    ADD_FAILURE() << "no ImportError";
  } catch (const ImportError& e) {
    EXPECT_EQ(std::string(e.what()), "zero.txt:3: no measured point with size > 0 and time > 0 to fit");
  }
}

}  // namespace
}  // namespace megascale::calibrate
