// tests/cli/calibrate_command_test.cc: `megascale calibrate ...` end to end: its
// bad input (exit 2, the culprit named) and an import from real nccl-tests
// output whose profile `simulate` and `net collective` then use. The
// measure-then-check loop on this machine is the ctest pair
// calibrate_micro_quick / calibrate_check_cpu (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_megascale.h"

namespace megascale::cli_testing {
namespace {
using Json = nlohmann::ordered_json;

// stdout of a `--json` run as JSON (a parse error fails the test with the text).
Json parsed(const std::string& out) {
  Json j = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << out;
  return j;
}
}  // namespace
}  // namespace megascale::cli_testing

namespace megascale::cli_testing {
namespace {

std::string fixture(const std::string& name) { return kSourceDir + "/tests/calibrate/fixtures/nccl-tests/" + name; }

TEST(CalibrateCli, UsageAndBadInputExitTwoNamingTheCulprit) {
  RunResult r = run_megascale({"calibrate"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("calibrate micro"), std::string::npos) << dump(r);
  r = run_megascale({"calibrate", "frobnicate"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("unknown subcommand 'frobnicate'"), std::string::npos) << dump(r);
  r = run_megascale({"calibrate", "micro", "--device", "cuda"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << dump(r);
  // The GEMM sweep CSV is written from the CUDA device's timings only.
  r = run_megascale({"calibrate", "micro", "--gemm-csv", "/tmp/megascale-cli-test-gemm.csv"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--gemm-csv needs --device cuda"), std::string::npos) << dump(r);
  EXPECT_FALSE(fs::exists("/tmp/megascale-cli-test-gemm.csv"));
  // The engine profile measures given scenarios' calls on the GPU.
  r = run_megascale({"calibrate", "micro", "--engine-profile", "/tmp/megascale-cli-test-engine.toml",
                     "scenarios/gpu/gpt-1b-h200.toml"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--engine-profile needs --device cuda"), std::string::npos) << dump(r);
  r = run_megascale({"calibrate", "micro", "--device", "cuda", "--engine-profile", "/tmp/megascale-cli-test-engine.toml"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("needs the SCENARIO files"), std::string::npos) << dump(r);
  r = run_megascale({"calibrate", "micro", "--device", "cuda", "--engine-profile", "/tmp/megascale-cli-test-engine.toml",
                     "scenarios/gpu/gpt-1b-h200.toml"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << dump(r);
  EXPECT_FALSE(fs::exists("/tmp/megascale-cli-test-engine.toml"));
  // One profile measures one device set-up: scenarios asking for another
  // precision are refused, naming both files, before any GPU is needed.
  const std::string fp32 = (fs::temp_directory_path() / "megascale-cli-test-fp32.toml").string();
  {
    std::ifstream in(kSourceDir + "/scenarios/gpu/gpt-1b-h200.toml");
    std::stringstream text;
    text << in.rdbuf();
    std::string t = text.str();
    const size_t at = t.find("precision = \"bf16\"");
    ASSERT_NE(at, std::string::npos);
    t.replace(at, std::string("precision = \"bf16\"").size(), "precision = \"fp32\"");
    std::ofstream(fp32) << t;
  }
  r = run_megascale({"calibrate", "micro", "--device", "cuda", "--engine-profile", "/tmp/megascale-cli-test-engine.toml",
                     "scenarios/gpu/gpt-1b-h200.toml", fp32});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("differs from scenarios/gpu/gpt-1b-h200.toml"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find(fp32), std::string::npos) << dump(r);
  EXPECT_FALSE(fs::exists("/tmp/megascale-cli-test-engine.toml"));
  fs::remove(fp32);
  r = run_megascale({"calibrate", "micro", "--ranks", "0"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--ranks"), std::string::npos) << dump(r);
  // A GPU profile predicts the CUDA engine: the scenario must train on cuda.
  r = run_megascale({"calibrate", "check", "scenarios/paper/table2-megascale-256.toml"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("hardware.gpu"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("train.device = \"cuda\""), std::string::npos) << dump(r);
  r = run_megascale({"calibrate", "check", "scenarios/cpu/check-single.toml", "--tolerance", "-1"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  // A scenario given twice ran twice; two of one file stem overwrote one report.
  r = run_megascale({"calibrate", "check", "scenarios/cpu/check-single.toml", "scenarios/cpu/../cpu/check-single.toml"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("scenarios/cpu/../cpu/check-single.toml is given twice (as scenarios/cpu/check-single.toml)"),
            std::string::npos)
      << dump(r);
  r = run_megascale({"calibrate", "fit", "--profile", "cpu", "--out", "/tmp/megascale-cli-fit.toml", "--engine",
                     "scenarios/cpu/check-single.toml", "./scenarios/cpu/check-single.toml"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("./scenarios/cpu/check-single.toml is given twice (as scenarios/cpu/check-single.toml): its run "
                       "would weigh twice in the fit"),
            std::string::npos)
      << dump(r);
  const fs::path twin = fs::temp_directory_path() / ("megascale-cli-twin-" + std::to_string(getpid()));
  fs::create_directories(twin);
  fs::copy_file(kSourceDir + "/scenarios/cpu/check-single.toml", twin / "check-single.toml",
                fs::copy_options::overwrite_existing);
  r = run_megascale({"calibrate", "check", "scenarios/cpu/check-single.toml", (twin / "check-single.toml").string(),
                     "--dir", "/tmp/reports"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("would both write their report to /tmp/reports/check-single.md"), std::string::npos) << dump(r);
  fs::remove_all(twin);
  r = run_megascale({"calibrate", "import", "--out", "/tmp/x.toml", "--nccl-tests",
                     kSourceDir + "/tests/calibrate/fixtures/nccl-tests/README.md"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("README.md:"), std::string::npos) << dump(r);
}

// `calibrate fit` on the published runs of one GPU, with the runs that have
// pipeline stages held out: the unscored rows and the other GPUs' rows are left
// out and said so, and the fitted value carries the runs it came from.
TEST(CalibrateCli, FitSelectsTheProfilesGpuAndHoldsOutPipelinedRuns) {
  const fs::path dir = fs::temp_directory_path() / "megascale-calibrate-fit-cli-test";
  fs::create_directories(dir);
  const std::string out = (dir / "fitted.toml").string();
  RunResult r = run_megascale({"calibrate", "fit", "--profile", "A100-SXM4-40GB", "--out", out, "--runs",
                               "calibrate/runs/published.csv", "--same-gpu", "--hold-out-pipelined", "--params",
                               "element_overhead"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.err.find("unscored run(s) left out"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("run(s) on other GPUs than A100-SXM4-40GB left out"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("6 fit run(s), 0 held out"), std::string::npos) << dump(r);
  std::ifstream in(out);
  const std::string toml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = toml.find("element_overhead_ns = { value = ");
  ASSERT_NE(at, std::string::npos) << toml;
  const std::string line = toml.substr(at, toml.find('\n', at) - at);
  EXPECT_NE(line.find("source = \"fitted\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"mosaic-mpt-1b-128-a100-40gb\""), std::string::npos) << line;
  EXPECT_EQ(line.find("mosaic-mpt-1b-512"), std::string::npos) << line;  // an H100 run
  // The selections pick among a runs file's rows.
  r = run_megascale({"calibrate", "fit", "--profile", "cpu", "--out", out, "--engine", "--same-gpu",
                     "scenarios/cpu/check-single.toml"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--same-gpu"), std::string::npos) << dump(r);
  fs::remove_all(dir);
}

// `calibrate fit --layers`: tp_gather_scatter on the shipped per-layer times
// reproduces the shipped A100 profile's value (fitted from 0, so the shipped
// value does not feed back), and the option mix-ups are usage errors.
TEST(CalibrateCli, FitOnPublishedLayerTimesReproducesTheShippedValue) {
  const fs::path dir = fs::temp_directory_path() / "megascale-calibrate-layer-fit-cli-test";
  fs::create_directories(dir);
  const std::string out = (dir / "fitted.toml").string();
  RunResult r = run_megascale({"calibrate", "fit", "--profile", "A100-SXM4-80GB", "--out", out, "--layers",
                               "calibrate/runs/published-layers.csv", "--params", "tp_gather_scatter"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("tp_gather_scatter_extra = 0.3279"), std::string::npos) << dump(r);
  std::ifstream in(out);
  const std::string toml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = toml.find("tp_gather_scatter_extra = { value = 0.32");
  ASSERT_NE(at, std::string::npos) << toml;
  const std::string line = toml.substr(at, toml.find('\n', at) - at);
  EXPECT_NE(line.find("runs = [\"22b-sp\", \"22b-selective-sp\"]"), std::string::npos) << line;
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--params", "element_overhead"},
        std::vector<std::string>{"--params", "tp_gather_scatter", "--runs", "calibrate/runs/published.csv"},
        std::vector<std::string>{"--params", "tp_gather_scatter", "--same-gpu"}}) {
    std::vector<std::string> args = {"calibrate", "fit", "--profile", "A100-SXM4-80GB", "--out", out,
                                     "--layers", "calibrate/runs/published-layers.csv"};
    args.insert(args.end(), bad.begin(), bad.end());
    r = run_megascale(args);
    EXPECT_EQ(r.exit_code, 2) << dump(r);
  }
  // Too few rows with the collectives: the file is named, nothing is written.
  const std::string few = (dir / "few.csv").string();
  std::ofstream(few) << "name,scenario,set,forward_ms,backward_ms,source\na," << kSourceDir
                     << "/scenarios/published/korthikanti-22b-8-full.toml,parallel.sequence_parallel=false,7.7,11.9,x\n";
  fs::remove(out);
  r = run_megascale({"calibrate", "fit", "--profile", "A100-SXM4-80GB", "--out", out, "--layers", few, "--params",
                     "tp_gather_scatter"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(few + ": calibrate fit --layers: 0 row(s)"), std::string::npos) << dump(r);
  EXPECT_FALSE(fs::exists(out));
  // An --out or --report that cannot be written is an error naming it (an
  // unchecked std::ofstream printed the report and exited 0 with no file).
  const std::string missing = (dir / "no-such-folder" / "fitted.toml").string();
  r = run_megascale({"calibrate", "fit", "--profile", "A100-SXM4-80GB", "--out", missing, "--layers",
                     "calibrate/runs/published-layers.csv", "--params", "tp_gather_scatter"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(missing + ": cannot write (No such file or directory)"), std::string::npos) << dump(r);
  const std::string report = (dir / "no-such-folder" / "fit.md").string();
  r = run_megascale({"calibrate", "fit", "--profile", "A100-SXM4-80GB", "--out", out, "--report", report,
                     "--layers", "calibrate/runs/published-layers.csv", "--params", "tp_gather_scatter"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(report + ": cannot write"), std::string::npos) << dump(r);
  fs::remove(out);
  // On iteration times it is not a parameter.
  r = run_megascale({"calibrate", "fit", "--profile", "A100-SXM4-80GB", "--out", out, "--runs",
                     "calibrate/runs/published.csv", "--params", "tp_gather_scatter"});
  EXPECT_NE(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.err.find("per-layer times"), std::string::npos) << dump(r);
  fs::remove_all(dir);
}

TEST(CalibrateCli, ImportedProfileDrivesNetAndSimulate) {
  const fs::path dir = fs::temp_directory_path() / "megascale-calibrate-cli-test";
  fs::create_directories(dir);
  const std::string out = (dir / "h100-imported.toml").string();
  RunResult r = run_megascale({"calibrate", "import", "--profile", "H100-SXM5-80GB", "--out", out, "--nccl-tests",
                               fixture("all_reduce_perf_h100_8gpu_1node.txt"), "--nccl-tests",
                               fixture("all_reduce_perf_h100_16gpu_2node_gcp.txt"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json imported = parsed(r.out);
  ASSERT_FALSE(imported["nccl_tests"].empty()) << dump(r);
  EXPECT_EQ(imported["nccl_tests"][0]["scope"], "intra") << dump(r);
  ASSERT_TRUE(fs::exists(out));
  // net collective answers from the profile beside the fabric model: the
  // fixture's 1 GiB all-reduce on 8 H100 in one node printed busbw 469.67 GB/s.
  r = run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1073741824", "--gpu",
                     "H100-SXM5-80GB", "--profile", out, "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json net = parsed(r.out);
  ASSERT_TRUE(net.contains("profile")) << dump(r);
  const double busbw = net["profile"]["busbw_gbs"];
  EXPECT_NEAR(busbw, 469.67, 469.67 * 0.01) << dump(r);
  // simulate takes it through --set hardware.profile (relative to the current directory).
  r = run_megascale({"simulate", "scenarios/paper/table2-megascale-256.toml", "--set", "hardware.profile=" + out,
                     "--fidelity", "analytical"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("profile " + out), std::string::npos) << dump(r);
  fs::remove_all(dir);
}

// A disturbed size (out of place > 2x in place) is imported at its in-place
// time, and the import says so: the DGX H100 sample's 32 B all-reduce printed
// 68.14 us out of place and 13.52 us in place.
TEST(CalibrateCli, ImportTakesADisturbedSizeAtItsInPlaceTime) {
  const fs::path dir = fs::temp_directory_path() / ("megascale-calibrate-disturbed-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string out = (dir / "dgx.toml").string();
  RunResult r = run_megascale({"calibrate", "import", "--profile", "H100-SXM5-80GB", "--out", out, "--nccl-tests",
                               fixture("all_reduce_perf_h100_8gpu_1node_dgxc.txt")});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("1 size(s) taken at the in-place time"), std::string::npos) << dump(r);
  r = run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "32", "--gpu",
                     "H100-SXM5-80GB", "--profile", out, "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json net = parsed(r.out);
  ASSERT_TRUE(net.contains("profile")) << dump(r);
  EXPECT_NEAR(net["profile"]["time_s"].get<double>() * 1e6, 13.52, 0.01) << dump(r);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace megascale::cli_testing

namespace megascale::cli_testing {
namespace {

// `calibrate runs-check`: predicted vs published iteration times; the bounds
// decide the exit code, unscored rows are listed but not counted, a bad CSV
// line is named.
TEST(RunsCheck, ScoresOnlyScoredRowsAndNamesBadLines) {
  const fs::path dir = fs::temp_directory_path() / ("megascale-runs-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string small = kSourceDir + "/scenarios/example-small.toml";
  // The event prediction of example-small, to write runs 0% and 50% off.
  const RunResult sim = run_megascale({"simulate", small, "--json"});
  ASSERT_EQ(sim.exit_code, 0) << dump(sim);
  const double t = parsed(sim.out)["iteration_time_s"];
  {
    std::ofstream f(dir / "runs.csv");
    f << "scenario,iteration_time_s,source,note,scored\n"
      << small << "," << t << ",exact,,yes\n"
      << small << "," << 2 * t << ",half,,\"no: a run on other hardware\"\n";
  }
  // --write: the report lands whole, and a link planted at the old fixed
  // temporary name is not followed.
  std::ofstream(dir / "victim.txt") << "precious";
  fs::create_symlink(dir / "victim.txt", dir / "report.md.tmp");
  RunResult r = run_megascale(
      {"calibrate", "runs-check", "--runs", (dir / "runs.csv").string(), "--json", "--write", (dir / "report.md").string()});
  EXPECT_EQ(r.exit_code, 0) << dump(r);  // the scored row is exact; the unscored one is 50% off
  {
    std::ifstream report(dir / "report.md"), victim(dir / "victim.txt");
    std::string first, kept;
    std::getline(report, first);
    std::getline(victim, kept);
    EXPECT_EQ(first, "# Published training runs: predicted vs published iteration time");
    EXPECT_EQ(kept, "precious");
  }
  EXPECT_EQ(parsed(r.out)["scored_runs"], 1) << r.out;
  EXPECT_EQ(parsed(r.out)["pass"], true) << r.out;
  EXPECT_EQ(parsed(r.out)["within_median_bound"], 1) << r.out;  // the unscored row is not counted
  EXPECT_EQ(parsed(r.out)["within_max_bound"], 1) << r.out;
  {
    std::ofstream f(dir / "runs.csv");
    f << "scenario,iteration_time_s,source,note,scored\n" << small << "," << 2 * t << ",half,,yes\n";
  }
  r = run_megascale({"calibrate", "runs-check", "--runs", (dir / "runs.csv").string()});
  EXPECT_EQ(r.exit_code, 1) << dump(r);  // -50% misses the 20% bound
  EXPECT_NE(r.out.find("-50.0%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| event | 1 | 50.0% | 50.0% | 0 | 0 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Bounds **not met**"), std::string::npos) << r.out;
  {
    std::ofstream f(dir / "runs.csv");
    f << "scenario,iteration_time_s,source,note,scored\n" << small << "," << t << ",x,,maybe\n";
  }
  r = run_megascale({"calibrate", "runs-check", "--runs", (dir / "runs.csv").string()});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("runs.csv:2: column 'scored'"), std::string::npos) << dump(r);
  // A run that a value of the scenario's profile was fitted on is listed, not
  // scored: fit a profile on a copy of the scenario, then point the copy at it.
  std::ifstream in(small);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "fit-me.toml") << text;
  std::ofstream(dir / "fit.csv") << "scenario,iteration_time_s\nfit-me.toml," << 1.1 * t << "\n";
  r = run_megascale({"calibrate", "fit", "--profile", "A100-SXM4-80GB", "--out", (dir / "fitted.toml").string(),
                     "--runs", (dir / "fit.csv").string(), "--params", "element_overhead"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const size_t hw = text.find("[hardware]\n");
  ASSERT_NE(hw, std::string::npos);
  std::ofstream(dir / "fit-me.toml") << text.substr(0, hw) << "[hardware]\nprofile = \"fitted.toml\"\n"
                                     << text.substr(hw + 11);
  r = run_megascale({"calibrate", "runs-check", "--runs", (dir / "fit.csv").string()});
  EXPECT_EQ(parsed(run_megascale({"calibrate", "runs-check", "--runs", (dir / "fit.csv").string(), "--json"}).out)
                ["scored_runs"],
            0);
  EXPECT_NE(r.out.find("NOT SCORED: fitted on: the A100-SXM4-80GB profile's element_overhead_ns"), std::string::npos)
      << dump(r);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace megascale::cli_testing

namespace megascale::cli_testing {
namespace {

// Accuracy guards on the published sets (not the bounds, which are not
// all met: the figures of results/published-runs.md and results/nccl-tests.md
// plus a small margin), so a change that makes the model less general fails
// here instead of moving the reports silently.
double json_number(const std::string& json, const std::string& key) {
  const Json j = parsed(json);
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : -1.0;
}

TEST(PublishedSets, RunsCheckStaysWithinItsCurrentErrors) {
  const RunResult r =
      run_megascale({"calibrate", "runs-check", "--runs", kSourceDir + "/calibrate/runs/published.csv", "--json"});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << dump(r);
  // 60 scorable runs since the Narayanan 2021, Megatron-Core, NeMo 24.07, Megatron-Bridge and
  // MosaicML rows were added (25 before: median 7.4%, max 28.3%); 39 scored since the H100 and
  // A100-40GB profiles' element_overhead_ns was fitted on the other 21 (all 60 scored before:
  // median 8.5%, max 28.3%). 40 scored since the Llama 3 CP 16 row (with Meta's 16 flows
  // per GPU pair on the Llama 3 rows: median 7.1% -> 6.1%). 54 since the B200 rows and the
  // sixteen rows of NVIDIA's DGX Cloud recipes (12 H100, four of them fit runs; 4 GB200): 58,
  // median 5.4%. 65 since four Megatron-Bridge rows of 26.04.01 and 26.06 (64 H100s, 64 and
  // 256 GB200s) joined: median 4.9%.
  EXPECT_GE(json_number(r.out, "scored_runs"), 65);
  EXPECT_LE(json_number(r.out, "median_abs_error"), 0.07);  // 4.9%: issue 12's bound (8%), met
  EXPECT_LE(json_number(r.out, "max_abs_error"), 0.30);      // 25.2% (MT-NLG 530B on 3,360 A100); the bound is 20%
}

TEST(PublishedSets, NetCheckLargeMessagesStayWithinTheirCurrentErrors) {
  const RunResult r = run_megascale({"calibrate", "net-check", "--manifest",
                                     kSourceDir + "/tests/calibrate/fixtures/nccl-tests/systems.toml", "--json"});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << dump(r);
  // classes[0]: one node >= 256 MiB; [1]: one node <= 1 MiB; [2]: across nodes >= 256 MiB;
  // [3]: across nodes <= 1 MiB.
  std::vector<double> medians, maxes;
  const Json report = parsed(r.out);
  for (const Json& c : report["classes"]) {
    medians.push_back(c["median_abs_error"].get<double>());
    maxes.push_back(c["max_abs_error"].get<double>());
  }
  ASSERT_GE(medians.size(), 4u) << r.out.substr(0, 600);
  EXPECT_LE(medians[0], 0.05);  // 2.2%
  // One node <= 1 MiB: the DGX H100 sample (all_reduce_perf_h100_8gpu_1node_dgxc.txt), 18 points.
  EXPECT_LE(medians[1], 0.20);  // 9.8% (10.5% with 32 channels; NCCL runs 24): issue 12's bound (20%), met
  // Its 32 B row printed 68.14 us out of place and 13.52 us in place (13.0-14.9 us around it): compared
  // in place (calibrate/net_check.h kDisturbedRatio), +10.9%; out of place it was -78.0%.
  EXPECT_LE(maxes[1], 0.50);    // 32.5%, at 4 KiB: the bound (50%), met
  EXPECT_LE(medians[2], 0.05);  // 2.8%
  EXPECT_LE(medians[3], 0.20);  // 12.0%: issue 12's bound (20%), met since NCCL's small-size channels
  EXPECT_LE(maxes[3], 0.50);    // 35.2%: the bound (50%), met
}

}  // namespace
}  // namespace megascale::cli_testing
