// tests/calibrate/import_test.cc: `calibrate import` turns real nccl-tests
// output (tests/calibrate/fixtures/nccl-tests, sources in its README) into a
// profile that reproduces each curve: within 5% of busbw at >= 64 MiB and 20%
// below, both from the stored measurements and from the fitted protocol
// curves alone (what other rank counts use).
#include "calibrate/import.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "calibrate/nccl_tests.h"
#include "model/profile.h"
#include "model/profile_tables.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;

std::string fixture_dir() { return std::string(MEGASCALE_SOURCE_DIR) + "/tests/calibrate/fixtures/nccl-tests"; }

std::vector<std::string> fixtures() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fixture_dir())) {
    if (e.path().extension() == ".txt") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Import, EveryFixtureBecomesAProfileThatReproducesItsCurve) {
  ASSERT_GE(fixtures().size(), 5u);
  for (const std::string& f : fixtures()) {
    SCOPED_TRACE(f);
    ImportOptions o;
    const bool b200 = f.find("b200") != std::string::npos;
    o.base = f.find("a100") != std::string::npos ? "A100-SXM4-80GB" : "H100-SXM5-80GB";
    o.nccl_tests = {f};
    o.date = "2026-12-01";
    // Two fixtures print no Rank lines (their READMEs say 2 and 4 nodes).
    o.scope = f.find("1node") != std::string::npos ? "intra" : "inter";
    if (b200) {
      // A B200's measurements are refused on another GPU's profile, and go
      // into the B200 one.
      try {
        import_measurements(o);
        ADD_FAILURE() << "a B200's nccl-tests went into an H100 profile";
      } catch (const ImportError& e) {
        EXPECT_NE(std::string(e.what()).find("measured on NVIDIA B200 (B200), but the base profile H100-SXM5-80GB is "
                                             "an H100"),
                  std::string::npos)
            << e.what();
      }
      o.base = "B200-SXM-180GB";
    }
    const ImportReport r = import_measurements(o);
    ASSERT_EQ(r.runs.size(), 1u);
    const NcclTestsRun run = read_nccl_tests_file(f);
    const model::ProfileTables* t = r.profile.measured();
    ASSERT_NE(t, nullptr);
    // The profile as written and read back (what a user's simulate loads).
    const model::GpuProfile back = model::parse_profile(model::write_profile(r.profile), "imported.toml");
    const model::CollectiveTable curves_only({}, back.measured()->collectives.curves());
    const std::string scope = r.runs[0].scope;
    const int ranks = r.runs[0].ranks;
    for (const NcclTestsPoint& pt : run.points) {
      if (pt.bytes <= 0 || pt.time_us <= 0) continue;
      const double tol = pt.bytes >= 64.0 * 1024 * 1024 ? 0.05 : 0.20;
      // At the undisturbed time: out of place, or in place where the out-of-place
      // time is more than 2x it (the DGX H100 sample's 32 B row only).
      const double measured_busbw = pt.bytes * model::busbw_factor(run.op, ranks) / (undisturbed_time_us(pt) * 1e-6);
      const std::optional<double> table_s = back.measured()->collectives.time_s(run.op, scope, ranks, pt.bytes);
      ASSERT_TRUE(table_s.has_value());
      const double table_busbw = pt.bytes * model::busbw_factor(run.op, ranks) / *table_s;
      EXPECT_NEAR(table_busbw / measured_busbw, 1.0, 1e-4) << pt.bytes;  // 6 significant digits stored
      const std::optional<double> curve_s = curves_only.time_s(run.op, scope, ranks, pt.bytes);
      ASSERT_TRUE(curve_s.has_value());
      const double curve_busbw = pt.bytes * model::busbw_factor(run.op, ranks) / *curve_s;
      EXPECT_LE(std::abs(curve_busbw / measured_busbw - 1.0), tol) << pt.bytes << " B";
    }
    const bool dgxc = fs::path(f).filename() == "all_reduce_perf_h100_8gpu_1node_dgxc.txt";
    EXPECT_EQ(r.runs[0].disturbed, dgxc ? 1 : 0);
    // Provenance: the points measured (with where and when), the curves fitted
    // on the named file with a leave-one-out error.
    EXPECT_EQ(back.provenance.at("tables.collectives").source, "measured");
    EXPECT_FALSE(back.provenance.at("tables.collectives").host.empty());
    EXPECT_EQ(back.provenance.at("tables.protocols").source, "fitted");
    EXPECT_EQ(back.provenance.at("tables.protocols").runs, std::vector<std::string>{f});
    EXPECT_GE(back.provenance.at("tables.protocols").loo_error, 0.0);
  }
}

TEST(Import, ScopeComesFromTheRankLinesAndCurvesScaleToOtherRankCounts) {
  ImportOptions o;
  o.base = "H100-SXM5-80GB";
  o.nccl_tests = {fixture_dir() + "/all_reduce_perf_h100_8gpu_1node.txt", fixture_dir() + "/all_reduce_perf_h100_16gpu_2node_gcp.txt"};
  const ImportReport r = import_measurements(o);
  ASSERT_EQ(r.runs.size(), 2u);
  EXPECT_EQ(r.runs[0].scope, "intra");
  EXPECT_EQ(r.runs[1].scope, "inter");
  // 32 ranks across machines, never measured: the 16-rank protocol curves with
  // the ring's larger bus factor (and latency grown with its steps). At 8 GB the
  // bandwidth term dominates, so the time grows by the factor's ratio.
  const model::CollectiveTable curves({}, r.profile.measured()->collectives.curves());
  const double t16 = *curves.time_s("all_reduce", "inter", 16, 8e9);
  const double t32 = *curves.time_s("all_reduce", "inter", 32, 8e9);
  EXPECT_GT(t32, t16);
  EXPECT_NEAR(t32 / t16, model::busbw_factor("all_reduce", 32) / model::busbw_factor("all_reduce", 16), 0.03);
  // The table answers 16 ranks from the measured points themselves.
  EXPECT_TRUE(r.profile.measured()->collectives.time_s("all_reduce", "inter", 16, 8e9).has_value());
  // No --date given (ImportOptions::date empty): the entry is stamped with
  // today's date in UTC, as the CLI's import is.
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char today[16];
  std::strftime(today, sizeof today, "%Y-%m-%d", &utc);
  EXPECT_EQ(r.profile.provenance.at("tables.collectives").date.rfind(today, 0), 0u)
      << r.profile.provenance.at("tables.collectives").date;
}

TEST(Import, BadInputIsNamedAndNothingIsWritten) {
  ImportOptions o;
  o.nccl_tests = {fixture_dir() + "/README.md"};
  try {
    import_measurements(o);
    FAIL() << "expected ImportError";
  } catch (const ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("README.md:"), std::string::npos) << e.what();
  }
  ImportOptions none;
  EXPECT_THROW(import_measurements(none), std::invalid_argument);
  ImportOptions scope = o;
  scope.scope = "sideways";
  EXPECT_THROW(import_measurements(scope), std::invalid_argument);
  ImportOptions gemm;
  gemm.base = "H100-SXM5-80GB";  // the sweep's GPU (its 343.7 TFLOP/s row is above an A100's peak)
  gemm.gemm_csv = {std::string(MEGASCALE_SOURCE_DIR) + "/tests/calibrate/fixtures/gemm_sweep.csv"};
  const ImportReport g = import_measurements(gemm);  // its bf16 rows
  EXPECT_GT(g.gemm_points, 0);
  // A file given twice would add its points twice.
  ImportOptions twice = gemm;  // however spelled
  twice.gemm_csv.push_back(std::string(MEGASCALE_SOURCE_DIR) + "/tests/../tests/calibrate/fixtures/gemm_sweep.csv");
  try {
    import_measurements(twice);
    ADD_FAILURE() << "the same GEMM sweep imported twice";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--gemm-csv " + twice.gemm_csv.back() + " is given twice"), std::string::npos)
        << e.what();
  }
  // A GEMM faster than the GPU's dense peak (312 TFLOP/s on the A100): a time
  // in the wrong unit, say; refused at its line, naming the peak.
  const std::string fast = ::testing::TempDir() + "/fast_gemm.csv";
  std::ofstream(fast) << "m,n,k,dtype,time_us\n4096,4096,4096,bf16,600\n8192,8192,8192,bf16,0.4\n";
  ImportOptions too_fast = gemm;
  too_fast.base = "A100-SXM4-80GB";
  too_fast.gemm_csv = {fast};
  try {
    import_measurements(too_fast);
    ADD_FAILURE() << "a GEMM above the A100's peak was imported";
  } catch (const ImportError& e) {
    EXPECT_NE(std::string(e.what()).find(fast + ":3: 8192 x 8192 x 8192 bf16 at 2.749e+06 TFLOP/s is above "
                                                "A100-SXM4-80GB's dense bf16 peak of 312 TFLOP/s"),
              std::string::npos)
        << e.what();
  }
  // An H100's nccl-tests into the default A100 base: refused, naming both.
  ImportOptions other_gpu;
  other_gpu.nccl_tests = {fixture_dir() + "/all_reduce_perf_h100_8gpu_1node.txt"};
  try {
    import_measurements(other_gpu);
    ADD_FAILURE() << "an H100's measurements went into an A100 profile";
  } catch (const ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("(H100), but the base profile A100-SXM4-80GB is an A100"), std::string::npos)
        << e.what();
  }
  // The profile's GEMMs now come from the sweep.
  EXPECT_FALSE(g.profile.measured()->gemm.empty());
}

// nccl-tests output whose sizes and times are so extreme that no protocol line
// fits (a 1e-320 busbw, a -1e400 size): ImportError naming the file, not an
// out-of-bounds read (the input fuzz test found it under ASan; the file is that
// input).
TEST(Import, PointsThatAdmitNoLineAreRefusedByName) {
  ImportOptions o;
  o.base = "H100-SXM5-80GB";
  o.nccl_tests = {std::string(MEGASCALE_SOURCE_DIR) + "/tests/calibrate/fixtures/fuzz/all_reduce_perf_degenerate.txt"};
  try {
    import_measurements(o);
    FAIL() << "expected ImportError";
  } catch (const ImportError& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce_perf_degenerate.txt:"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megascale::calibrate
