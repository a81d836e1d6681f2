// tests/calibrate/layer_check_test.cc: published one-layer times against the
// closed form's one-layer pass (calibrate/layer_check.h), the CSV they come in
// and its errors, and the one CSV splitter (calibrate/csv_line.h).
#include "calibrate/layer_check.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "calibrate/csv_line.h"
#include "calibrate/nccl_tests.h"  // ImportError
#include "model/estimator.h"
#include "model/scenario.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;

const std::string kShipped = std::string(MEGASCALE_SOURCE_DIR) + "/calibrate/runs/published-layers.csv";

const LayerCheckRow& row(const std::vector<LayerCheckRow>& rows, const std::string& name) {
  for (const LayerCheckRow& r : rows) {
    if (r.layer.name == name) return r;
  }
  throw std::runtime_error("no row " + name);
}

// Korthikanti et al. 2022 Table 4 (22B, 8 A100s): the rows without sequence
// parallelism test the operator costs, the TP all-reduces and both kinds of
// recomputation; each is within 3% today (0.0-2.0%), so a wrong kernel time,
// a recomputation that re-runs the wrong part or a lost collective fails here.
TEST(LayerCheck, TheRowsWithoutSequenceParallelismMatchTheirMeasurement) {
  const std::vector<LayerCheckRow> rows = check_published_layers(read_published_layers(kShipped));
  ASSERT_EQ(rows.size(), 5u);
  for (const char* name : {"22b-baseline", "22b-full-recompute", "22b-selective"}) {
    const LayerCheckRow& r = row(rows, name);
    EXPECT_LT(std::abs(r.forward_error()), 0.03) << name;
    EXPECT_LT(std::abs(r.backward_error()), 0.03) << name;
  }
  // What recomputation adds to the backward pass, predicted against measured
  // (the paper: 7.6 ms full, 1.3 ms selective).
  const double full_added = row(rows, "22b-full-recompute").backward_ms - row(rows, "22b-baseline").backward_ms;
  const double selective_added = row(rows, "22b-selective").backward_ms - row(rows, "22b-baseline").backward_ms;
  EXPECT_NEAR(full_added, 7.6, 0.6);
  EXPECT_NEAR(selective_added, 1.3, 0.4);
}

// With sequence parallelism the layer is faster than without, as measured. The
// SP rows are the ones the A100 profile's tp_gather_scatter_extra is fitted on
// (section 6.2: the RS + AG pair runs slower than one all-reduce of the same
// bytes): with it they are within 2% (without it 4.8% and 5.8% fast).
TEST(LayerCheck, SequenceParallelismIsFasterAndMatchesWithTheFittedGatherScatterExtra) {
  const std::vector<LayerCheckRow> rows = check_published_layers(read_published_layers(kShipped));
  EXPECT_LT(row(rows, "22b-sp").forward_ms, row(rows, "22b-baseline").forward_ms);
  EXPECT_LT(row(rows, "22b-selective-sp").backward_ms, row(rows, "22b-selective").backward_ms);
  for (const char* name : {"22b-sp", "22b-selective-sp"}) {
    EXPECT_LT(std::abs(row(rows, name).combined_error()), 0.02) << name;
  }
}

// The one-layer pass is what estimate() repeats per layer: a chunk is
// layers-per-chunk of them.
TEST(LayerCheck, LayerPassesAreTheEstimatesChunkPerLayer) {
  const model::Scenario s = model::load_scenario(
      std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/korthikanti-22b-8-selective-sp.toml");
  const model::LayerPasses l = model::layer_passes(s);
  const model::Estimate e = model::estimate(s);
  const int layers_per_chunk = s.model.layers / (s.parallel.pp * s.parallel.vpp);
  EXPECT_DOUBLE_EQ(e.chunk_forward_s, layers_per_chunk * l.forward_s());
  EXPECT_DOUBLE_EQ(e.chunk_backward_s, layers_per_chunk * l.backward_s());
  EXPECT_GT(l.backward.recompute_s, 0.0);
}

// Each test writes in its own directory: ctest runs the tests of this fixture
// as separate processes at the same time, and a shared file let one test read
// the CSV another had just written.
class LayerCsv : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("megascale-layer-check-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& body) {
    fs::copy_file(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/korthikanti-22b-8-full.toml",
                  dir_ / "s.toml", fs::copy_options::overwrite_existing);
    const std::string path = (dir_ / "layers.csv").string();
    std::ofstream(path) << body;
    return path;
  }
  std::string error_of(const std::string& body) {
    try {
      read_published_layers(write(body));
    } catch (const ImportError& e) {
      return e.what();
    }
    return "";
  }
  const std::string header = "name,scenario,set,forward_ms,backward_ms,source\n";
  fs::path dir_;
};

TEST_F(LayerCsv, ReadsOverridesAndQuotedCells) {
  const std::vector<PublishedLayer> l =
      read_published_layers(write("# comment\n" + header +
                                  "a,s.toml,parallel.recompute=none  parallel.sequence_parallel=true,7.2,11.8,"
                                  "\"Paper, Table 4 \"\"SP\"\"\"\n"));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].overrides, (std::vector<std::string>{"parallel.recompute=none", "parallel.sequence_parallel=true"}));
  EXPECT_EQ(l[0].source, "Paper, Table 4 \"SP\"");
  EXPECT_EQ(l[0].line, 3);
  EXPECT_DOUBLE_EQ(l[0].backward_ms, 11.8);
}

TEST_F(LayerCsv, ErrorsNameTheFileLineAndColumn) {
  EXPECT_NE(error_of("name,scenario,forward_ms,backward_ms,source\n").find(":1: the header must name column 'set'"),
            std::string::npos);
  EXPECT_NE(error_of(header + "a,s.toml,,0,11.8,x\n").find(":2: column 'forward_ms': expected milliseconds > 0, got '0'"),
            std::string::npos);
  EXPECT_NE(error_of(header + "a,nope.toml,,7,11.8,x\n").find(":2: column 'scenario': no such file"),
            std::string::npos);
  EXPECT_NE(error_of(header + "a,s.toml,,7,11.8\n").find(":2: column 'source': missing (the row has 5 cells)"),
            std::string::npos);
  EXPECT_NE(error_of(header + "a,s.toml,,7,11.8,\"open\n").find(":2: unterminated quoted field"), std::string::npos);
  EXPECT_NE(error_of(header).find(":1: no rows"), std::string::npos);
  EXPECT_EQ(error_of(header + "a,s.toml,,7,11.8,x\n"), "");
}

// A broken override or scenario is named at the row that sets it, when the
// file is read (it was the scenario's error alone, found when the row was checked).
TEST_F(LayerCsv, ABrokenOverrideIsNamedAtItsRow) {
  const std::string e = error_of(header + "a,s.toml,,7.7,11.9,x\nb,s.toml,parallel.tp=7,7,11.8,x\n");
  EXPECT_NE(e.find(":3: column 'set': --set parallel.tp=7"), std::string::npos) << e;
  fs::create_directories(dir_ / "sub");
  std::ofstream(dir_ / "sub" / "bad.toml") << "[model]\nlayers = = 2\n";
  const std::string b = error_of(header + "a,sub/bad.toml,,7.7,11.9,x\n");
  EXPECT_NE(b.find(":2: column 'scenario': "), std::string::npos) << b;
  EXPECT_NE(b.find("bad.toml:2"), std::string::npos) << b;
}

// A pass faster than the GPU's dense peak for the layer's FLOPs: the 22B layer
// (TP 8, micro-batch 4) is 979 GFLOP forward on one GPU, 3.14 ms at the A100's
// 312 TFLOP/s. 0.77 ms (a tenth of the published 7.7) is refused; 3.2 ms is
// not, nor the published rows.
TEST_F(LayerCsv, APassFasterThanThePeakIsRefused) {
  const std::string e = error_of(header + "a,s.toml,,0.77,11.9,x\n");
  EXPECT_NE(e.find(":2: column 'forward_ms': 0.77 ms for 979.3 GFLOP of one layer on one A100-SXM4-80GB"),
            std::string::npos)
      << e;
  const std::string b = error_of(header + "a,s.toml,,7.7,1.19,x\n");
  EXPECT_NE(b.find(":2: column 'backward_ms': 1.19 ms for 1959 GFLOP"), std::string::npos) << b;
  EXPECT_EQ(error_of(header + "a,s.toml,,3.2,11.9,x\n"), "");
  EXPECT_NO_THROW(read_published_layers(std::string(MEGASCALE_SOURCE_DIR) + "/calibrate/runs/published-layers.csv"));
}

TEST(CsvLine, QuotesTrimAndCarriageReturn) {
  EXPECT_EQ(split_csv_line(" a , \"b, c\" ,\"d\"\"e\"\r", "f", 1), (std::vector<std::string>{"a", "b, c", "d\"e"}));
  EXPECT_EQ(split_csv_line("", "f", 1), (std::vector<std::string>{""}));
  EXPECT_THROW(split_csv_line("a,\"b", "f", 7), ImportError);
}

}  // namespace
}  // namespace megascale::calibrate
