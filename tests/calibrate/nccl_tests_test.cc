// tests/calibrate/nccl_tests_test.cc: the nccl-tests reader on real outputs
// (tests/calibrate/fixtures/nccl-tests, sources in its README.md) and on
// damaged copies of them (FILE:LINE errors).
#include "calibrate/nccl_tests.h"

#include <gtest/gtest.h>

#include "base/text_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace megascale::calibrate {
namespace {

std::string fixture_path(const std::string& name) {
  return std::string(MEGASCALE_SOURCE_DIR) + "/tests/calibrate/fixtures/nccl-tests/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The message of the ImportError `f` throws ("" and a test failure if none).
template <class F>
std::string import_error(F&& f) {
  try {
    f();
  } catch (const ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ImportError thrown";
  return "";
}

// Line `n` (1-based) of `text` replaced by `repl`.
std::string replace_line(const std::string& text, int n, const std::string& repl) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  int i = 0;
  while (std::getline(in, line)) out << (++i == n ? repl : line) << "\n";
  return out.str();
}

std::string line_of(const std::string& text, int n) {
  std::istringstream in(text);
  std::string line;
  for (int i = 0; i < n && std::getline(in, line); ++i) {
  }
  return line;
}

// The 1-based line holding `needle`.
int find_line(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  std::string line;
  int i = 0;
  while (std::getline(in, line)) {
    ++i;
    if (line.find(needle) != std::string::npos) return i;
  }
  ADD_FAILURE() << "no line with " << needle;
  return 0;
}

TEST(NcclBusbwFactor, MatchesNcclTestsPerformanceMd) {
  // doc/PERFORMANCE.md and src/<op>.cu <Op>GetBw of NVIDIA/nccl-tests.
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("all_reduce", 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("all_gather", 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("reduce_scatter", 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("alltoall", 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("sendrecv", 8), 1.0);
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("broadcast", 8), 1.0);
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("reduce", 8), 1.0);
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("all_reduce_perf", 2), 1.0);
  EXPECT_DOUBLE_EQ(nccl_busbw_factor("AllGather", 1), 0.0);
  EXPECT_THROW(nccl_busbw_factor("gather", 8), std::invalid_argument);
  EXPECT_THROW(nccl_busbw_factor("all_reduce", 0), std::invalid_argument);
}

TEST(GpuModel, DeviceAndProfileNames) {
  EXPECT_EQ(gpu_model("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(gpu_model("H100-SXM5-80GB"), "H100");
  EXPECT_EQ(gpu_model("NVIDIA A100-SXM4-40GB"), "A100");
  EXPECT_EQ(gpu_model("H200-SXM-141GB"), "H200");
  EXPECT_EQ(gpu_model("NVIDIA B200"), "B200");
  EXPECT_EQ(gpu_model("cpu"), "");
  EXPECT_EQ(gpu_model(""), "");
  EXPECT_EQ(gpu_model("my-profile-2024"), "");
}

TEST(CanonicalNcclOp, Spellings) {
  EXPECT_EQ(canonical_nccl_op("all_reduce_perf"), "all_reduce");
  EXPECT_EQ(canonical_nccl_op("all_gather_perf_mpi"), "all_gather");
  EXPECT_EQ(canonical_nccl_op("ReduceScatter"), "reduce_scatter");
  EXPECT_EQ(canonical_nccl_op("alltoall"), "alltoall");
  EXPECT_EQ(canonical_nccl_op("reduce_perf"), "reduce");
  EXPECT_EQ(canonical_nccl_op("hypercube_perf"), "");
}

TEST(NcclTestsFixtures, AllReduceA100TwoNodesOke) {
  NcclTestsRun r = read_nccl_tests_file(fixture_path("all_reduce_perf_a100_16gpu_2node_oke.txt"));
  EXPECT_EQ(r.op, "all_reduce");
  EXPECT_EQ(r.op_from, "file name");
  EXPECT_EQ(r.ranks, 16);
  EXPECT_EQ(r.ranks_from, "rank lines");
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.device, "NVIDIA A100-SXM4-40GB");
  ASSERT_EQ(r.points.size(), 31u);  // 8 B .. 8 GiB
  const NcclTestsPoint& first = r.points.front();
  EXPECT_EQ(first.bytes, 8);
  EXPECT_EQ(first.count, 2);
  EXPECT_EQ(first.dtype, "float");
  EXPECT_EQ(first.redop, "sum");
  EXPECT_EQ(first.root, -1);
  EXPECT_DOUBLE_EQ(first.time_us, 36.47);
  EXPECT_DOUBLE_EQ(first.inplace_time_us, 34.74);
  EXPECT_EQ(first.wrong, 0);
  const NcclTestsPoint& last = r.points.back();
  EXPECT_EQ(last.bytes, 8589934592);
  EXPECT_DOUBLE_EQ(last.time_us, 67689);
  EXPECT_DOUBLE_EQ(last.algbw_gbs, 126.90);
  EXPECT_DOUBLE_EQ(last.busbw_gbs, 237.94);
  EXPECT_DOUBLE_EQ(last.inplace_busbw_gbs, 237.52);
  EXPECT_DOUBLE_EQ(r.avg_busbw_gbs, 66.4834);
}

TEST(NcclTestsFixtures, AllReduceH100TwoNodesGcp) {
  NcclTestsRun r = read_nccl_tests_file(fixture_path("all_reduce_perf_h100_16gpu_2node_gcp.txt"));
  EXPECT_EQ(r.op, "all_reduce");
  EXPECT_EQ(r.op_from, "file name");
  EXPECT_EQ(r.ranks, 16);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.device, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(r.points.size(), 31u);
  EXPECT_DOUBLE_EQ(r.points[0].time_us, 135.8);
  EXPECT_EQ(r.points[25].bytes, 268435456);
  EXPECT_DOUBLE_EQ(r.points[25].busbw_gbs, 213.19);
  EXPECT_DOUBLE_EQ(r.points.back().time_us, 47535);
}

TEST(NcclTestsFixtures, AllReduceH100OneNode) {
  NcclTestsRun r = read_nccl_tests_file(fixture_path("all_reduce_perf_h100_8gpu_1node.txt"));
  EXPECT_EQ(r.op, "all_reduce");
  EXPECT_EQ(r.op_from, "text");
  EXPECT_EQ(r.ranks, 8);
  EXPECT_EQ(r.nodes, 1);
  EXPECT_EQ(r.nccl_tests_version, "2.17.8");
  ASSERT_EQ(r.points.size(), 10u);  // 32 MiB .. 16 GiB ("Reducing maxBytes" line is noise)
  EXPECT_EQ(r.points[0].dtype, "double");
  EXPECT_EQ(r.points[0].count, 4194304);
  EXPECT_DOUBLE_EQ(r.points[0].time_us, 182.87);
  EXPECT_EQ(r.points[9].bytes, 17179869184);
  EXPECT_DOUBLE_EQ(r.points[9].busbw_gbs, 482.27);
}

TEST(NcclTestsFixtures, OldFormatWithoutRankLines) {
  // DeepOps docs: no Rank lines, no root column, an "error" column: the ranks
  // come from busbw / algbw = 2(n-1)/n.
  NcclTestsRun k8s = read_nccl_tests_file(fixture_path("all_reduce_perf_a100_16gpu_2node_deepops_k8s.txt"));
  EXPECT_EQ(k8s.op, "all_reduce");
  EXPECT_EQ(k8s.ranks, 16);
  EXPECT_EQ(k8s.ranks_from, "busbw/algbw");
  EXPECT_EQ(k8s.nodes, 0);
  EXPECT_EQ(k8s.device, "");
  ASSERT_EQ(k8s.points.size(), 30u);  // 8 B .. 4 GiB
  EXPECT_EQ(k8s.points[0].root, -1);
  EXPECT_EQ(k8s.points[0].wrong, -1);  // "2e-07" is an error magnitude, not a count
  EXPECT_DOUBLE_EQ(k8s.points[0].time_us, 38.63);
  EXPECT_DOUBLE_EQ(k8s.points.back().busbw_gbs, 188.53);

  NcclTestsRun slurm = read_nccl_tests_file(fixture_path("all_reduce_perf_a100_32gpu_4node_deepops_slurm.txt"));
  EXPECT_EQ(slurm.ranks, 32);
  ASSERT_EQ(slurm.points.size(), 13u);  // 1 MiB .. 4 GiB
  EXPECT_EQ(slurm.points[0].bytes, 1048576);
  EXPECT_DOUBLE_EQ(slurm.points.back().time_us, 43557);
}

TEST(NcclTestsFixtures, AllGatherB200WithShellNoise) {
  NcclTestsRun r = read_nccl_tests_file(fixture_path("all_gather_perf_b200_16gpu_2node_gke.txt"));
  EXPECT_EQ(r.op, "all_gather");
  EXPECT_EQ(r.op_from, "file name");  // the echoed command says "-t all_gather", not a binary
  EXPECT_EQ(r.ranks, 16);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.device, "NVIDIA B200");
  ASSERT_EQ(r.points.size(), 24u);  // 1 KiB .. 8 GiB
  EXPECT_EQ(r.points[0].count, 16);  // per-rank count: 1024 B / 4 B / 16 ranks
  EXPECT_EQ(r.points[0].redop, "none");
  EXPECT_DOUBLE_EQ(r.points[11].time_us, 1753.7);
  EXPECT_DOUBLE_EQ(r.points.back().busbw_gbs, 260.03);
  EXPECT_DOUBLE_EQ(r.avg_busbw_gbs, 59.3638);
}

TEST(NcclTestsFixtures, OtherCollectivesH100OneNode) {
  NcclTestsRun ag = read_nccl_tests_file(fixture_path("all_gather_perf_h100_8gpu_1node.txt"));
  EXPECT_EQ(ag.op, "all_gather");
  EXPECT_EQ(ag.ranks, 8);
  ASSERT_EQ(ag.points.size(), 10u);
  EXPECT_EQ(ag.points[0].count, 524288);
  EXPECT_DOUBLE_EQ(ag.points.back().busbw_gbs, 361.86);

  NcclTestsRun rs = read_nccl_tests_file(fixture_path("reduce_scatter_perf_h100_8gpu_1node.txt"));
  EXPECT_EQ(rs.op, "reduce_scatter");
  EXPECT_EQ(rs.ranks, 8);
  ASSERT_EQ(rs.points.size(), 10u);

  NcclTestsRun a2a = read_nccl_tests_file(fixture_path("alltoall_perf_h100_8gpu_1node.txt"));
  EXPECT_EQ(a2a.op, "alltoall");
  ASSERT_EQ(a2a.points.size(), 10u);

  NcclTestsRun sr = read_nccl_tests_file(fixture_path("sendrecv_perf_h100_8gpu_1node.txt"));
  EXPECT_EQ(sr.op, "sendrecv");
  EXPECT_EQ(sr.ranks, 8);
  ASSERT_EQ(sr.points.size(), 10u);
  EXPECT_EQ(sr.points[0].wrong, 0);
  EXPECT_DOUBLE_EQ(sr.points[2].time_us, 825.74);  // the flat 64 -> 256 MiB stretch
  EXPECT_DOUBLE_EQ(sr.points[2].inplace_busbw_gbs, 161.42);  // in-place "#wrong" is N/A

  NcclTestsRun sr2 = read_nccl_tests_file(fixture_path("sendrecv_perf_h100_16gpu_2node.txt"));
  EXPECT_EQ(sr2.ranks, 16);
  EXPECT_EQ(sr2.nodes, 2);
  EXPECT_DOUBLE_EQ(sr2.points.back().time_us, 1194007);
}

TEST(NcclTestsFixtures, MpirunTaggedLogWithNcclInfoNoise) {
  // 2,900 interleaved NCCL INFO lines between the Rank lines and the table.
  NcclTestsRun r = read_nccl_tests_file(fixture_path("all_reduce_perf_h100_16gpu_2node_aws_p5.txt"));
  EXPECT_EQ(r.op, "all_reduce");
  EXPECT_EQ(r.ranks, 16);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.device, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(r.points.size(), 32u);  // 8 B .. 16 GiB
  EXPECT_DOUBLE_EQ(r.points[0].time_us, 65.43);
  EXPECT_DOUBLE_EQ(r.points.back().time_us, 66154);
  EXPECT_DOUBLE_EQ(r.avg_busbw_gbs, 124.343);
}

TEST(NcclTestsParse, MpirunTagsInsideRows) {
  // mpirun --tag-output tags each chunk a rank writes; nccl-tests writes a row
  // as "%12li  %12li  %8s  %6s  %6i" (52 columns), then the out-of-place and
  // in-place groups (33 columns each), so tags land inside rows (seen in
  // KeitaW/p5-nccl-test-2024-07-19 nccl-test-output-v2.22.3-1.log).
  std::string text = slurp(fixture_path("all_reduce_perf_a100_16gpu_2node_oke.txt"));
  NcclTestsRun plain = parse_nccl_tests(text, "oke_all_reduce.txt");
  std::istringstream in(text);
  std::string line, tagged;
  const std::string tag = "[1,0]<stdout>:";
  while (std::getline(in, line)) {
    if (line.size() > 85 && line[0] == ' ')
      line = line.substr(0, 52) + tag + line.substr(52, 33) + tag + line.substr(85);
    tagged += tag + line + "\n";
  }
  NcclTestsRun r = parse_nccl_tests(tagged, "oke_all_reduce.txt");
  ASSERT_EQ(r.points.size(), plain.points.size());
  for (size_t i = 0; i < r.points.size(); ++i) {
    EXPECT_DOUBLE_EQ(r.points[i].time_us, plain.points[i].time_us);
    EXPECT_DOUBLE_EQ(r.points[i].inplace_busbw_gbs, plain.points[i].inplace_busbw_gbs);
  }
}

TEST(NcclTestsParse, LauncherPrefixesAndEatenCommentMarks) {
  std::string text = slurp(fixture_path("all_reduce_perf_a100_16gpu_2node_oke.txt"));
  NcclTestsRun plain = parse_nccl_tests(text, "oke.txt");
  std::istringstream in(text);
  std::string line, mpirun, markdown;
  while (std::getline(in, line)) {
    mpirun += "[1,0]<stdout>:" + line + "\n";
    size_t b = line.find_first_not_of('#');
    markdown += (b == std::string::npos ? "" : line.substr(b)) + "\n";
  }
  for (const std::string& variant : {mpirun, markdown}) {
    NcclTestsRun r = parse_nccl_tests(variant, "oke.txt");
    EXPECT_EQ(r.op, plain.op);
    EXPECT_EQ(r.ranks, 16);
    EXPECT_EQ(r.nodes, 2);
    ASSERT_EQ(r.points.size(), plain.points.size());
    EXPECT_DOUBLE_EQ(r.points[17].time_us, plain.points[17].time_us);
  }
}

TEST(NcclTestsParse, SeveralRunsInOneText) {
  std::string ag = slurp(fixture_path("all_gather_perf_h100_8gpu_1node.txt"));
  std::string rs = slurp(fixture_path("reduce_scatter_perf_h100_8gpu_1node.txt"));
  std::string both = ag + "\n" + rs;
  std::vector<NcclTestsRun> runs = parse_nccl_tests_runs(both, "cnode3-002.log");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].op, "all_gather");
  EXPECT_EQ(runs[1].op, "reduce_scatter");
  EXPECT_EQ(runs[1].points.size(), 10u);
  // The second run starts at its "# nccl-tests version" line: 34 lines + 1 blank.
  std::string msg = import_error([&] { parse_nccl_tests(both, "cnode3-002.log"); });
  EXPECT_EQ(msg.rfind("cnode3-002.log:36: the text holds 2 nccl-tests runs", 0), 0u) << msg;
}

TEST(NcclTestsParse, OpResolution) {
  std::string text = slurp(fixture_path("all_reduce_perf_a100_16gpu_2node_deepops_k8s.txt"));
  // No op in the text or the file name, and count x 4 B = size fits
  // all_reduce and sendrecv: an error that says how to fix it.
  std::string msg = import_error([&] { parse_nccl_tests(text, "run.txt"); });
  EXPECT_NE(msg.find("run.txt:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot tell which collective"), std::string::npos) << msg;
  // The caller's hint resolves it, and then the ranks follow from busbw/algbw.
  NcclTestsRun r = parse_nccl_tests(text, "run.txt", "all_reduce");
  EXPECT_EQ(r.op_from, "hint");
  EXPECT_EQ(r.ranks, 16);
  // A wrong hint on a text that names its binary is an error at that line.
  std::string ag = slurp(fixture_path("all_gather_perf_h100_8gpu_1node.txt"));
  msg = import_error([&] { parse_nccl_tests(ag, "ag.txt", "all_reduce"); });
  EXPECT_NE(msg.find("ag.txt:2: the output is all_gather_perf"), std::string::npos) << msg;
  // A wrong hint on an unlabelled text: busbw / algbw = 1.875 is no
  // all_gather's (n-1)/n, so no rank count fits.
  msg = import_error([&] { parse_nccl_tests(text, "run.txt", "all_gather"); });
  EXPECT_NE(msg.find("run.txt:3: cannot tell how many ranks ran all_gather"), std::string::npos) << msg;
  // Inferring from the columns: reduce_scatter's count = size / 8 B / 8 ranks.
  std::string rs = slurp(fixture_path("reduce_scatter_perf_h100_8gpu_1node.txt"));
  std::string unlabelled = replace_line(replace_line(rs, 2, "#"), 33, "#");
  NcclTestsRun inferred = parse_nccl_tests(unlabelled, "log.txt");
  EXPECT_EQ(inferred.op, "reduce_scatter");
  EXPECT_EQ(inferred.op_from, "columns");
}

TEST(NcclTestsErrors, EmptyAndGarbage) {
  std::string msg = import_error([] { parse_nccl_tests("", "empty.txt"); });
  EXPECT_EQ(msg, "empty.txt:1: empty input");
  msg = import_error([] { parse_nccl_tests("hello\nworld 12 34\n", "junk.txt"); });
  EXPECT_NE(msg.find("junk.txt:1: no nccl-tests result table"), std::string::npos) << msg;
  msg = import_error([] {
    parse_nccl_tests("#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
                     "# Avg bus bandwidth    : 0\n",
                     "header_only.txt", "all_reduce");
  });
  EXPECT_EQ(msg, "header_only.txt:1: no data rows under this table header");
}

TEST(NcclTestsErrors, TruncatedRowNamesItsLine) {
  std::string text = slurp(fixture_path("all_reduce_perf_a100_16gpu_2node_oke.txt"));
  int n = find_line(text, "  8589934592    2147483648");
  std::string row = line_of(text, n);
  std::string cut = replace_line(text, n, row.substr(0, 70));  // in-place columns lost
  std::string msg = import_error([&] { parse_nccl_tests(cut, "oke.txt"); });
  EXPECT_EQ(msg.rfind("oke.txt:" + std::to_string(n) + ": data row has ", 0), 0u) << msg;
  EXPECT_NE(msg.find("columns, the header on line 22 has 13 (truncated row?)"), std::string::npos) << msg;
}

// A row whose results nccl-tests found wrong (#wrong > 0, out of place or in
// place) came from a broken machine: refused at its line, not imported or scored.
TEST(NcclTestsErrors, WrongResultsAreRefusedAtTheirLine) {
  const std::string text = slurp(fixture_path("all_reduce_perf_a100_16gpu_2node_oke.txt"));
  const int n = find_line(text, "     1048576        262144");
  const std::string row = line_of(text, n);
  const std::string healthy = "   22.97      0    84.50   12.41   23.27      0";
  const size_t at = row.find(healthy);
  ASSERT_NE(at, std::string::npos) << row;
  const std::string out_of_place = replace_line(text, n, row.substr(0, at) + "   22.97     12    84.50   12.41   23.27      0");
  std::string msg = import_error([&] { parse_nccl_tests(out_of_place, "oke.txt"); });
  EXPECT_EQ(msg.rfind("oke.txt:" + std::to_string(n) + ": column '#wrong': nccl-tests counted 12 wrong element(s)", 0), 0u)
      << msg;
  const std::string in_place = replace_line(text, n, row.substr(0, at) + "   22.97      0    84.50   12.41   23.27      3");
  msg = import_error([&] { parse_nccl_tests(in_place, "oke.txt"); });
  EXPECT_EQ(msg.rfind("oke.txt:" + std::to_string(n) + ": column '#wrong' (in-place): nccl-tests counted 3 wrong", 0), 0u)
      << msg;
  // N/A (nccl-tests -c 0) and zero are a clean run.
  const std::string unchecked = replace_line(text, n, row.substr(0, at) + "   22.97    N/A    84.50   12.41   23.27    N/A");
  EXPECT_EQ(parse_nccl_tests(unchecked, "oke.txt").points.size(), parse_nccl_tests(text, "oke.txt").points.size());
}

TEST(NcclTestsErrors, NonNumericTimeNamesItsLineAndColumn) {
  std::string text = slurp(fixture_path("all_reduce_perf_a100_16gpu_2node_oke.txt"));
  int n = find_line(text, "     1048576        262144");
  std::string row = line_of(text, n);
  size_t at = row.find("85.58");
  ASSERT_NE(at, std::string::npos);
  std::string bad = replace_line(text, n, row.substr(0, at) + "85.5x" + row.substr(at + 5));
  std::string msg = import_error([&] { parse_nccl_tests(bad, "oke.txt"); });
  EXPECT_EQ(msg, "oke.txt:" + std::to_string(n) + ": column 'time': '85.5x' is not a number");
}

TEST(NcclTestsErrors, InconsistentBusbwIsRejectedRoundingIsNot) {
  std::string text = slurp(fixture_path("all_reduce_perf_a100_16gpu_2node_oke.txt"));
  // Every printed row passes (rounding of 0.00 / 0.01 GB/s rows included).
  EXPECT_NO_THROW(parse_nccl_tests(text, "oke.txt"));
  int n = find_line(text, "   536870912     134217728");
  std::string row = line_of(text, n);
  size_t at = row.find("156.41");
  ASSERT_NE(at, std::string::npos);
  // 3% off the all_reduce factor: clearly inconsistent.
  std::string bad = replace_line(text, n, row.substr(0, at) + "161.10" + row.substr(at + 6));
  std::string msg = import_error([&] { parse_nccl_tests(bad, "oke.txt"); });
  EXPECT_EQ(msg.rfind("oke.txt:" + std::to_string(n) + ": busbw 161.10 GB/s is not all_reduce's factor 1.875", 0), 0u)
      << msg;
  // 1% off: inside the 2% allowance.
  std::string ok = replace_line(text, n, row.substr(0, at) + "157.97" + row.substr(at + 6));
  EXPECT_NO_THROW(parse_nccl_tests(ok, "oke.txt"));
}

TEST(NcclTestsErrors, MissingFileOrADirectory) {
  for (const auto& [path, why] : {std::pair{"/nonexistent/all_reduce_perf.txt", "No such file or directory"},
                                  std::pair{"/tmp", "Is a directory"}}) {
    try {
      read_nccl_tests_file(path);
      ADD_FAILURE() << path << " was read";
    } catch (const base::InputFileError& e) {
      EXPECT_EQ(std::string(e.what()), std::string(path) + ": cannot read (" + why + ")");
    }
  }
}

}  // namespace
}  // namespace megascale::calibrate
