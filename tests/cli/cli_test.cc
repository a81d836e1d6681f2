// tests/cli/cli_test.cc: integration tests of the `megascale` executable.
//
// Each test runs the real binary (MEGASCALE_BINARY) in a child process whose
// working directory is the source tree (MEGASCALE_SOURCE_DIR), capturing stdout,
// stderr and the exit status separately, and checks the contracts of DESIGN.md:
// JSON reports with the contract-4 keys (report/estimate_report.h), exit codes 0 / 1 (no
// answer) / 2 (bad input), and error messages that name file, line, key and
// reason (model/scenario.h). Scenario files for the error cases are written by
// the test into a fresh temporary directory.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_megascale.h"

namespace {

namespace fs = std::filesystem;

using namespace megascale::cli_testing;
using Json = nlohmann::ordered_json;
const std::string kSmall = kSourceDir + "/scenarios/example-small.toml";


// stdout of a `--json` run as JSON (a parse error fails the test with the text).
Json parsed(const RunResult& r) {
  Json j = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << dump(r);
  return j;
}

// Each test gets its own directory for scenario files it writes.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path() / "megascale-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Writes `text` to <dir>/<name> and returns the absolute path.
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  fs::path dir_;
};

// 1-based line of the first line of `text` that starts with `prefix`; 0 if none.
int line_of(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.rfind(prefix, 0) == 0) return n;
  }
  return 0;
}

// ---- predictions ----------------------------------------------------------

TEST_F(CliTest, SimulateJsonHasContractKeys) {
  const RunResult r = run_megascale({"simulate", kSmall, "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.front(), '{') << dump(r);
  EXPECT_EQ(r.out.substr(r.out.size() - 2), "}\n") << dump(r);
  const Json j = parsed(r);
  for (const char* key : {"schema_version", "tool_version", "mfu", "iteration_time_s", "tokens_per_s",
                          "bubble_fraction", "memory_per_gpu_bytes", "breakdown_s"}) {
    EXPECT_TRUE(j.contains(key)) << "missing key " << key << "\n" << dump(r);
  }
  EXPECT_EQ(j.value("tool_version", "").rfind("megascale ", 0), 0u) << dump(r);
  EXPECT_NE(j.value("tool_version", "").find("(git "), std::string::npos) << dump(r);
  const double mfu = j.value("mfu", 0.0);
  EXPECT_GT(mfu, 0.0) << dump(r);
  EXPECT_LT(mfu, 1.0) << dump(r);
  EXPECT_GT(j.value("iteration_time_s", 0.0), 0.0);
  EXPECT_GT(j.value("tokens_per_s", 0.0), 0.0);
  EXPECT_EQ(r.err, "");
}

// The event report says how the fabric routes the job's flows: ECMP with the
// scenario's QPs by default, InfiniBand's adaptive routing when asked, and the
// choice changes the DP collectives of a job whose rings leave their ToR sets.
TEST_F(CliTest, SimulateSaysHowTheFabricRoutes) {
  const RunResult ecmp = run_megascale({"simulate", kSmall});
  ASSERT_EQ(ecmp.exit_code, 0) << dump(ecmp);
  EXPECT_NE(ecmp.out.find("communication: network, ECMP, 1 QP(s) per connection ("), std::string::npos) << dump(ecmp);
  const std::string big = kSourceDir + "/scenarios/published/mcore-gpt-177b-2304.toml";
  const RunResult adaptive = run_megascale({"simulate", big, "--json"});
  ASSERT_EQ(adaptive.exit_code, 0) << dump(adaptive);
  const Json a = parsed(adaptive);
  EXPECT_EQ(a["comm_s"].value("routing", ""), "adaptive");
  const RunResult hashed = run_megascale({"simulate", big, "--json", "--set", "network.routing=\"ecmp\""});
  ASSERT_EQ(hashed.exit_code, 0) << dump(hashed);
  const Json h = parsed(hashed);
  EXPECT_EQ(h["comm_s"].value("routing", ""), "ecmp");
  // One QP per connection: hash collisions across ToR sets slow the DP reduce-scatter.
  EXPECT_GT(h["comm_s"].value("dp_reduce_chunk", 0.0), 1.5 * a["comm_s"].value("dp_reduce_chunk", 0.0));
  const RunResult bad = run_megascale({"simulate", kSmall, "--set", "network.routing=\"spray\""});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("network.routing"), std::string::npos) << dump(bad);
}

// When the event level's critical path holds no bubble on a pipelined job
// (DP collectives outlasting the drain), the report says why and gives the
// closed form's split; a job whose path holds its bubble prints no such line.
TEST_F(CliTest, SimulateExplainsABubbleOfZeroOnThePath) {
  const std::string file = kSourceDir + "/scenarios/paper/table2-megascale-12288.toml";
  const RunResult r = run_megascale({"simulate", file, "--set", "hardware.gpu=\"B200-SXM-180GB\"", "--set",
                                     "optimizations.preset=\"megatron-core\"", "--set", "hardware.nic_gbps=400"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("+ bubble 0.0000 s, DP"), std::string::npos) << dump(r);
  EXPECT_NE(r.out.find("    bubble 0 on the critical path: it runs through DP collectives that outlast the pipeline "
                       "drain and counts the compute beside them as DP (the closed form: bubble 0."),
            std::string::npos)
      << dump(r);
  const RunResult shipped = run_megascale({"simulate", file});
  ASSERT_EQ(shipped.exit_code, 0) << dump(shipped);
  EXPECT_EQ(shipped.out.find("bubble 0 on the critical path"), std::string::npos) << dump(shipped);
}

// The GPU check's 1B scenario (scripts/gpu-check.sh, "predict") is simulated
// as shipped: one GPU on one node (it was refused: 8 NICs do not divide 1 GPU).
TEST_F(CliTest, SimulatesTheOneGpuTrainingScenario) {
  const RunResult r = run_megascale({"simulate", kSourceDir + "/scenarios/gpu/gpt-1b-h200.toml", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  EXPECT_EQ(j.value("gpus", 0), 1) << dump(r);
  EXPECT_GT(j.value("mfu", 0.0), 0.0) << dump(r);
  EXPECT_LT(j.value("mfu", 0.0), 1.0) << dump(r);
  EXPECT_GT(j.value("iteration_time_s", 0.0), 0.0) << dump(r);
}

// --sensitivity PCT times the job once per hardware input at the run's own
// fidelity and reports each; a step out of range and the event options that
// are not one healthy step are refused (exit 2).
TEST_F(CliTest, SimulateSensitivity) {
  const RunResult a = run_megascale({"simulate", kSmall, "--fidelity", "analytical", "--sensitivity", "10", "--json"});
  ASSERT_EQ(a.exit_code, 0) << dump(a);
  const Json ja = parsed(a);
  const Json sa = ja["sensitivity"];
  EXPECT_EQ(sa.value("fidelity", ""), "analytical");
  EXPECT_DOUBLE_EQ(sa.value("step", 0.0), 0.1);
  EXPECT_DOUBLE_EQ(sa.value("base_iteration_time_s", 0.0), ja.value("iteration_time_s", -1.0));
  ASSERT_TRUE(sa["inputs"].is_array());
  ASSERT_GT(sa["inputs"].size(), 5u) << dump(a);
  bool has_peak = false;
  for (const Json& i : sa["inputs"]) {
    if (i.value("input", "") == "peak_tflops") {
      has_peak = true;
      EXPECT_LT(i.value("elasticity", 0.0), 0.0) << i.dump();
    }
  }
  EXPECT_TRUE(has_peak) << dump(a);

  const RunResult e = run_megascale({"simulate", kSmall, "--sensitivity", "5"});
  ASSERT_EQ(e.exit_code, 0) << dump(e);
  EXPECT_NE(e.out.find("sensitivity (event fidelity; each input changed by 5%"), std::string::npos) << dump(e);
  EXPECT_NE(e.out.find("hardware.nic_gbps"), std::string::npos) << dump(e);

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"simulate", kSmall, "--sensitivity", "60"},
        std::vector<std::string>{"simulate", kSmall, "--sensitivity", "0"},
        std::vector<std::string>{"simulate", kSmall, "--sensitivity", "10", "--steps", "2"}}) {
    const RunResult r = run_megascale(bad);
    EXPECT_EQ(r.exit_code, 2) << dump(r);
    EXPECT_NE(r.err.find("sensitivity"), std::string::npos) << dump(r);
  }
  // 0 is refused by the option's own range, in the option's words.
  const RunResult zero = run_megascale({"simulate", kSmall, "--sensitivity", "0"});
  EXPECT_NE(zero.err.find("--sensitivity expects a percentage in (0, 50], got '0'"), std::string::npos) << dump(zero);
}

TEST_F(CliTest, SimulateTextPrintsMfu) {
  const RunResult r = run_megascale({"simulate", kSmall});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("MFU"), std::string::npos) << dump(r);
  EXPECT_EQ(r.out.find("\"mfu\""), std::string::npos) << "text mode printed JSON\n" << dump(r);
}

// example-small (24 layers, 2,048 wide, 50,257 words, PP 2) carries an output
// head of more than two layers: simulate offers the heads-balanced split
// (model/search.h head_balanced_candidate) in both fidelities' text and JSON,
// and offers nothing once the scenario runs that split.
TEST_F(CliTest, SimulateOffersTheHeadsBalancedSplit) {
  const std::string layout = "Et*6|t*6|t*7|t*5L";
  for (const char* fidelity : {"analytical", "event"}) {
    const RunResult text = run_megascale({"simulate", kSmall, "--fidelity", fidelity});
    ASSERT_EQ(text.exit_code, 0) << dump(text);
    EXPECT_NE(text.out.find("heads balanced: the embedding weighs"), std::string::npos) << dump(text);
    EXPECT_NE(text.out.find("--pipeline-model-parallel-layout \"" + layout + "\""), std::string::npos) << dump(text);
    const RunResult json = run_megascale({"simulate", kSmall, "--fidelity", fidelity, "--json"});
    ASSERT_EQ(json.exit_code, 0) << dump(json);
    const Json j = parsed(json);
    ASSERT_TRUE(j.contains("head_balanced")) << json.out;
    const Json& b = j.at("head_balanced");
    EXPECT_EQ(b.at("megatron_layout"), layout);
    EXPECT_EQ(b.at("stage_layers"), Json::array({13, 11}));
    EXPECT_LT(b.at("iteration_time_s").get<double>(), b.at("own_iteration_time_s").get<double>());
    EXPECT_GT(b.at("head_layer_passes").at("output").get<double>(), 1.0);
  }
  const RunResult done = run_megascale(
      {"simulate", kSmall, "--fidelity", "analytical", "--json", "--set", "parallel.pipeline_layout=\"" + layout + "\""});
  ASSERT_EQ(done.exit_code, 0) << dump(done);
  EXPECT_FALSE(parsed(done).contains("head_balanced")) << done.out;
}

// --set overrides a scenario key before the checks; a bad one is exit 2 naming
// the override, and validate --write refuses to mix a what-if into the reference.
TEST_F(CliTest, SetOverridesAScenarioKey) {
  const RunResult base = run_megascale({"simulate", kSmall, "--json", "--fidelity", "analytical"});
  ASSERT_EQ(base.exit_code, 0) << dump(base);
  const RunResult r = run_megascale(
      {"simulate", kSmall, "--json", "--fidelity", "analytical", "--set", "hardware.gpu=H100-SXM5-80GB"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("H100-SXM5-80GB"), std::string::npos) << dump(r);
  EXPECT_LT(parsed(r)["iteration_time_s"].get<double>(), parsed(base)["iteration_time_s"].get<double>()) << dump(r);

  const RunResult bad = run_megascale({"simulate", kSmall, "--set", "parallel.tp=0"});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("--set parallel.tp=0: parallel.tp:"), std::string::npos) << dump(bad);
  EXPECT_EQ(bad.err.find("as changed by"), std::string::npos) << dump(bad);  // the error names the --set itself
  // A rule between keys is reported at the file's line of one of them; the
  // --set that broke it is named beside.
  const RunResult between = run_megascale({"simulate", kSmall, "--set", "model.seq_len=3", "--set", "parallel.dp=4"});
  EXPECT_EQ(between.exit_code, 2) << dump(between);
  EXPECT_NE(between.err.find("parallel.tp: seq_len (3) not divisible by tp (2)"), std::string::npos) << dump(between);
  EXPECT_NE(between.err.find("example-small.toml as changed by --set model.seq_len=3, --set parallel.dp=4)"),
            std::string::npos)
      << dump(between);
  const RunResult malformed = run_megascale({"simulate", kSmall, "--set", "parallel.tp"});
  EXPECT_EQ(malformed.exit_code, 2) << dump(malformed);
  EXPECT_NE(malformed.err.find("KEY=VALUE"), std::string::npos) << dump(malformed);

  const RunResult write = run_megascale({"validate", "--write", "--set", "hardware.gpu_speed_sigma=0"});
  EXPECT_EQ(write.exit_code, 2) << dump(write);
  const RunResult what_if =
      run_megascale({"validate", "--fidelity", "analytical", "--set", "optimizations.tp_overlap=false"});
  // Exit 1: the bounds are missed (more so without TP overlap); the report is still printed.
  ASSERT_EQ(what_if.exit_code, 1) << dump(what_if);
  EXPECT_NE(what_if.out.find("What-if, not the reference report"), std::string::npos) << dump(what_if);
  EXPECT_NE(what_if.out.find("`--set optimizations.tp_overlap=false`"), std::string::npos) << dump(what_if);
}

// --fail-gpu G --fail-at T: the step with G's host going down hangs, and the
// wait chains lead back to G's (replica, stage). Usage errors are exit 2.
TEST_F(CliTest, SimulateAFailedGpu) {
  // example-small: TP 2, PP 2, DP 4; GPU 3 = TP 1 of replica 1, stage 0.
  const RunResult r = run_megascale({"simulate", kSmall, "--fail-gpu", "3", "--fail-at", "0.1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  EXPECT_EQ(j["hung"], true) << dump(r);
  ASSERT_FALSE(j["wait_chains_end_at"].empty()) << dump(r);
  const Json& root = j["wait_chains_end_at"][0];
  EXPECT_EQ(root["dp_replica"], 1) << dump(r);
  EXPECT_EQ(root["pp_rank"], 0) << dump(r);
  EXPECT_EQ(root["first_gpu"], 2) << dump(r);
  EXPECT_EQ(j["dp_replica"], 1);
  EXPECT_EQ(j["pp_rank"], 0);
  EXPECT_GT(j["blocked_ranks"].get<int>(), 0);
  const RunResult text = run_megascale({"simulate", kSmall, "--fail-gpu", "3", "--fail-at", "0.1"});
  ASSERT_EQ(text.exit_code, 0) << dump(text);
  EXPECT_NE(text.out.find("the wait chains end at replica 1 stage 0 (GPUs 2-3): the failed host"),
            std::string::npos)
      << dump(text);

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"simulate", kSmall, "--fail-gpu", "3"},
        std::vector<std::string>{"simulate", kSmall, "--fail-at", "0.1"},
        std::vector<std::string>{"simulate", kSmall, "--fail-gpu", "16", "--fail-at", "0.1"},
        std::vector<std::string>{"simulate", kSmall, "--fail-gpu", "3", "--fail-at", "-1"},
        std::vector<std::string>{"simulate", kSmall, "--fail-gpu", "3", "--fail-at", "0.1", "--steps", "2"},
        std::vector<std::string>{"simulate", kSmall, "--fail-gpu", "3", "--fail-at", "0.1", "--fidelity",
                                 "analytical"}}) {
    const RunResult e = run_megascale(bad);
    EXPECT_EQ(e.exit_code, 2) << dump(e);
    EXPECT_NE(e.err.find("fail"), std::string::npos) << dump(e);
  }
}

// --simgrid-check re-times the step's transfers with SimGrid's network model.
TEST_F(CliTest, SimulateSimGridCheck) {
  const RunResult r = run_megascale({"simulate", kSmall, "--simgrid-check", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  ASSERT_TRUE(j.contains("simgrid_check")) << dump(r);
  const double event = j["simgrid_check"]["event_step_s"], simgrid = j["simgrid_check"]["simgrid_step_s"];
  EXPECT_NEAR(simgrid, event, 0.02 * event) << dump(r);
  EXPECT_GT(j["simgrid_check"]["flows"].get<double>(), 0.0);
  const RunResult bad = run_megascale({"simulate", kSmall, "--simgrid-check", "--fidelity", "analytical"});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
}

TEST_F(CliTest, CompareDefaultJsonShowsSpeedup) {
  const RunResult r = run_megascale({"compare", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  ASSERT_TRUE(j["megatron"].is_object()) << dump(r);
  ASSERT_TRUE(j["megascale"].is_object()) << dump(r);
  EXPECT_GT(j.value("speedup", 0.0), 1.0) << dump(r);
  // Event level by default, both systems; the analytical fidelity on request
  // gives the closed form: another computation, within a few percent of it.
  EXPECT_EQ(j["fidelity"], "event");
  EXPECT_EQ(j["megatron"]["fidelity"], "event");
  EXPECT_EQ(j["megascale"]["fidelity"], "event");
  const RunResult a = run_megascale({"compare", "--json", "--fidelity", "analytical"});
  ASSERT_EQ(a.exit_code, 0) << dump(a);
  const Json ja = parsed(a);
  EXPECT_EQ(ja["fidelity"], "analytical");
  EXPECT_EQ(ja["megatron"]["fidelity"], "analytical");
  EXPECT_EQ(ja["megascale"]["fidelity"], "analytical");
  const double closed_s = ja["megatron"]["iteration_time_s"].get<double>();
  const double event_s = j["megatron"]["iteration_time_s"].get<double>();
  EXPECT_NE(closed_s, event_s) << dump(a);
  EXPECT_NEAR(closed_s, event_s, 0.05 * event_s) << dump(a);
  const RunResult bad = run_megascale({"compare", "--fidelity", "exact"});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("--fidelity"), std::string::npos) << dump(bad);
}

// The built-in comparison and `compare FILE` on the same job (Table 2's
// 12,288-GPU row) compare the same two systems (model/system_preset.h).
TEST_F(CliTest, CompareFileOnTheBuiltInJobGivesTheBuiltInSpeedup) {
  const RunResult builtin = run_megascale({"compare", "--json", "--fidelity", "analytical"});
  ASSERT_EQ(builtin.exit_code, 0) << dump(builtin);
  for (const char* file : {"table2-megatron-12288.toml", "table2-megascale-12288.toml"}) {
    const RunResult r =
        run_megascale({"compare", kSourceDir + "/scenarios/paper/" + file, "--json", "--fidelity", "analytical"});
    ASSERT_EQ(r.exit_code, 0) << dump(r);
    EXPECT_NEAR(parsed(r)["speedup"].get<double>(), parsed(builtin)["speedup"].get<double>(), 1e-6)
        << file << "\n" << dump(r);
  }
}

// `compare FILE` on a job the Megatron-LM baseline cannot hold (no
// FlashAttention at 8,192 tokens: the attention scores) says so beside the
// table, as `simulate` does, and in its JSON.
TEST_F(CliTest, CompareMarksASystemThatDoesNotFit) {
  const std::string file = kSourceDir + "/scenarios/published/dgxc-llama31-405b-128-gb200-fp8.toml";
  const RunResult r = run_megascale({"compare", file, "--fidelity", "analytical"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("** Megatron-LM DOES NOT FIT: "), std::string::npos) << dump(r);
  EXPECT_EQ(r.out.find("** MegaScale DOES NOT FIT"), std::string::npos) << dump(r);
  const RunResult j = run_megascale({"compare", file, "--fidelity", "analytical", "--json"});
  ASSERT_EQ(j.exit_code, 0) << dump(j);
  EXPECT_FALSE(parsed(j)["megatron"]["fits_in_memory"].get<bool>()) << dump(j);
  EXPECT_TRUE(parsed(j)["megascale"]["fits_in_memory"].get<bool>()) << dump(j);
}

// --refine N: the best N of the closed form re-simulated at event level and
// re-ranked by the event MFU; the rest keep the closed form's order.
TEST_F(CliTest, SearchRefineReRanksTheBestByTheEventSimulation) {
  const RunResult r = run_megascale({"search", kSmall, "--top", "4", "--refine", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  EXPECT_EQ(j["refined"], 3) << dump(r);
  const Json& top = j["top"];
  ASSERT_EQ(top.size(), 4u) << dump(r);
  double previous = 1.0;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(top[i].contains("event")) << top[i].dump();
    const double event_mfu = top[i]["event"]["mfu"];
    EXPECT_GT(event_mfu, 0.0) << top[i].dump();
    EXPECT_LE(event_mfu, previous) << "refined rank " << i + 1 << " beats the one above it";
    previous = event_mfu;
  }
  EXPECT_FALSE(top[3].contains("event")) << top[3].dump();
  const RunResult bad = run_megascale({"search", kSmall, "--refine", "0"});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
}

TEST_F(CliTest, SearchTopThreeRankedByMfu) {
  const RunResult r = run_megascale({"search", kSmall, "--top", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  EXPECT_GT(j["enumerated"].get<double>(), 0.0) << dump(r);
  // The ranking against the model's measured error: #1 is always within it.
  EXPECT_EQ(j["error_band"]["fidelity"], "analytical") << dump(r);
  EXPECT_GT(j["error_band"]["error_points"].get<double>(), 0.0) << dump(r);
  EXPECT_EQ(j["top"][0]["within_error_of_best"], true) << dump(r);
  const Json& top = j["top"];
  ASSERT_EQ(top.size(), 3u) << dump(r);
  double previous_mfu = 1.0;
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i]["rank"], i + 1) << top[i].dump();
    const double mfu = top[i]["mfu"];
    EXPECT_GT(mfu, 0.0) << top[i].dump();
    EXPECT_LE(mfu, previous_mfu) << "rank " << i + 1 << " beats rank " << i;
    previous_mfu = mfu;
  }
}

TEST_F(CliTest, ValidateJsonHasEveryPaperRow) {
  const RunResult r = run_megascale({"validate", "--json"});
  // 0 when issue 12's bounds are met, 1 when not (calibrate/validation.h AccuracyBounds).
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << dump(r);
  // One object: versions, the verdict agreeing with the exit code, the summary,
  // then the rows, each {"case": ..., "table": T, "metric": M, ...}.
  const Json j = parsed(r);
  ASSERT_TRUE(j.is_object()) << dump(r);
  EXPECT_EQ(j.begin().key(), "schema_version") << r.out.substr(0, 200);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j.value("tool_version", "").rfind("megascale ", 0), 0u);
  EXPECT_EQ(j["pass"], r.exit_code == 0);
  EXPECT_TRUE(j["summary"].contains("table3_max_abs_increment_error"));
  std::map<std::string, int> rows_of;  // "table/metric" -> rows
  for (const Json& row : j["rows"]) {
    ++rows_of[row["table"].get<std::string>() + "/" + row["metric"].get<std::string>()];
    EXPECT_EQ(row["fidelity"], "event") << row.dump();
  }
  EXPECT_EQ(rows_of["table2/mfu"], 16) << dump(r);
  EXPECT_EQ(rows_of["table3/mfu"], 9) << dump(r);
  EXPECT_EQ(rows_of["fig9/mfu"], 6) << dump(r);
  EXPECT_EQ(rows_of["table2/speedup"], 8) << dump(r);

  // Accuracy guard. Issue 4's bounds (Table 2 mean <= 2.0 / max <= 4.0 points,
  // speedup within 0.05, Table 3 rows within 2.0 with every increment of the
  // right sign, Figure 9 within 3.0) are not met yet; until they are, these
  // are the figures of results/validation.md plus a small margin, so a change
  // that makes the event fidelity less accurate fails here instead of moving
  // the report silently. Tighten them when the model improves.
  double t2_sum = 0, t2_max = 0, t3_max = 0, f9_max = 0, speedup_max = 0, stragglers_error = -1;
  int t2_n = 0, t3_wrong = 0;
  std::vector<std::pair<double, double>> t3;  // published, predicted
  for (const Json& row : j["rows"]) {
    const double error = std::fabs(row["error"].get<double>());
    const std::string table = row["table"], metric = row["metric"];
    if (metric == "speedup") speedup_max = std::max(speedup_max, error);
    if (metric != "mfu") continue;
    if (table == "table2") {
      t2_sum += error;
      t2_max = std::max(t2_max, error);
      ++t2_n;
    } else if (table == "table3") {
      t3_max = std::max(t3_max, error);
      t3.emplace_back(row["published"].get<double>(), row["predicted"].get<double>());
    } else if (table == "fig9") {
      f9_max = std::max(f9_max, error);
    } else if (table == "stragglers") {
      stragglers_error = error;
    }
  }
  for (size_t i = 1; i < t3.size(); ++i)
    if ((t3[i].first > t3[i - 1].first) != (t3[i].second > t3[i - 1].second)) ++t3_wrong;
  ASSERT_EQ(t2_n, 16);
  // 3.61 / 7.45 / 0.124 / 3.69 / 12.02 since the A100 profile's
  // tp_gather_scatter_extra (4.81 / 8.36 / 0.103 / 4.75 / 12.63 before: slower
  // exposed SP collectives bring Megatron-LM's rows closer and widen the
  // speedup, MegaScale overlapping them).
  EXPECT_LE(t2_sum / t2_n, 0.040) << "Table 2 mean |MFU error| regressed";
  EXPECT_LE(t2_max, 0.080) << "Table 2 max |MFU error| regressed";
  EXPECT_LE(speedup_max, 0.13) << "Table 2 speedup error regressed";
  EXPECT_LE(t3_max, 0.042) << "Table 3 max |MFU error| regressed";
  EXPECT_EQ(t3_wrong, 0) << "a Table 3 technique's increment has the wrong sign";
  EXPECT_LE(f9_max, 0.125) << "Figure 9 max |MFU error| regressed";
  // Section 5: the MFU the paper's stragglers cost vs ~0.7% gained by removing them.
  ASSERT_GE(stragglers_error, 0.0) << "no stragglers row";
  EXPECT_LE(stragglers_error, 0.004) << "the stragglers' cost moved away from the paper's ~0.7 points";
}

// Golden output (SimGrid's style): results/validation.md is exactly what
// `megascale validate` prints, so a change to the models cannot move the
// published-vs-predicted figures without regenerating the checked-in report
// (`megascale validate --write`) and showing the new numbers in the diff.
TEST_F(CliTest, ValidationReportIsUpToDate) {
  const RunResult r = run_megascale({"validate"});
  // The exit code is the report's verdict.
  const bool met = r.out.find("Bounds met by the event fidelity: **yes**") != std::string::npos;
  ASSERT_EQ(r.exit_code, met ? 0 : 1) << dump(r);
  std::ifstream f(kSourceDir + "/results/validation.md");
  ASSERT_TRUE(f) << "results/validation.md is missing";
  std::stringstream golden;
  golden << f.rdbuf();
  EXPECT_EQ(r.out, golden.str())
      << "results/validation.md is stale: run `megascale validate --write` and commit it";
}

// ---- no answer (exit 1) ---------------------------------------------------

TEST_F(CliTest, SearchWhereNothingFitsExitsOne) {
  // ~1T parameters (128 layers, hidden 25600) on 8 x 40 GB: even the weights of a
  // TP-8 shard (~125B parameters in bf16) are far beyond one GPU.
  const std::string path = write("one-trillion.toml",
                                 "name = \"one-trillion-on-8\"\n"
                                 "\n"
                                 "[model]\n"
                                 "name = \"gpt-1t\"\n"
                                 "layers = 128\n"
                                 "hidden = 25600\n"
                                 "heads = 160\n"
                                 "seq_len = 2048\n"
                                 "vocab = 51200\n"
                                 "\n"
                                 "[parallel]\n"
                                 "tp = 8\n"
                                 "pp = 1\n"
                                 "global_batch = 8\n"
                                 "\n"
                                 "[hardware]\n"
                                 "gpu = \"A100-SXM4-40GB\"\n"
                                 "gpus_per_node = 8\n"
                                 "\n"
                                 "[cluster]\n"
                                 "gpus = 8\n");
  const RunResult r = run_megascale({"search", path, "--json"});
  EXPECT_EQ(r.exit_code, 1) << dump(r);
  EXPECT_NE(r.err.find("no layout"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("fits"), std::string::npos) << dump(r);
  const Json j = parsed(r);
  EXPECT_EQ(j["fit"], 0) << dump(r);
  EXPECT_TRUE(j["top"].empty()) << dump(r);
}

// ---- bad input (exit 2) ---------------------------------------------------

TEST_F(CliTest, IndivisibleTpNamesFileLineKeyReason) {
  const std::string text =
      "name = \"bad-tp\"\n"
      "\n"
      "[model]\n"
      "layers = 96\n"
      "hidden = 12288\n"
      "heads = 128\n"
      "seq_len = 2048\n"
      "vocab = 51200\n"
      "\n"
      "[parallel]\n"
      "tp = 3\n"
      "pp = 8\n"
      "global_batch = 64\n"
      "\n"
      "[cluster]\n"
      "gpus = 24\n";
  const std::string path = write("bad-tp.toml", text);
  const int line = line_of(text, "tp = 3");
  ASSERT_GT(line, 0);
  const RunResult r = run_megascale({"simulate", path});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(path + ":" + std::to_string(line) + ":"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("parallel.tp"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("not divisible"), std::string::npos) << dump(r);
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, MissingFileNamesThePath) {
  const std::string path = (dir_ / "does-not-exist.toml").string();
  const RunResult r = run_megascale({"simulate", path, "--json"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(path), std::string::npos) << dump(r);
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, SyntaxErrorNamesTheLine) {
  const std::string path = write("syntax.toml",
                                 "[model]\n"
                                 "layers = 24\n"
                                 "hidden = = 2048\n");
  const RunResult r = run_megascale({"simulate", path});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(path + ":3:"), std::string::npos) << dump(r);
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, UnknownOptionPrintsUsage) {
  const RunResult r = run_megascale({"simulate", kSmall, "--jsn"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--jsn"), std::string::npos) << dump(r);
  // The command's own usage, not every command's (issue 13: 60 lines each time).
  EXPECT_NE(r.err.find("usage: megascale simulate FILE"), std::string::npos) << dump(r);
  EXPECT_EQ(r.err.find("  plan FILE"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("megascale --help"), std::string::npos) << dump(r);
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, UnknownCommandPrintsUsage) {
  const RunResult r = run_megascale({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("usage: megascale"), std::string::npos) << dump(r);
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, NoCommandPrintsUsage) {
  const RunResult r = run_megascale({});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("usage: megascale"), std::string::npos) << dump(r);
}

TEST_F(CliTest, SearchTopZeroIsRejected) {
  const RunResult r = run_megascale({"search", kSmall, "--top", "0"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--top"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("positive integer"), std::string::npos) << dump(r);
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, UnknownFidelityNamesTheChoices) {
  const RunResult r = run_megascale({"simulate", kSmall, "--fidelity", "exact"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--fidelity"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("event or analytical"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("'exact'"), std::string::npos) << dump(r);
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, EventFidelityReportsEventJson) {
  const RunResult r = run_megascale({"simulate", kSmall, "--fidelity", "event", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  EXPECT_EQ(j["fidelity"], "event") << dump(r);
  for (const char* key : {"mfu", "iteration_time_s", "breakdown_s", "exposed_s", "wall_time_s", "step_times_s"}) {
    EXPECT_TRUE(j.contains(key)) << "missing key " << key << "\n" << dump(r);
  }
  EXPECT_GT(j.value("iteration_time_s", 0.0), 0.0) << dump(r);
}

// The event fidelity is the default of simulate; event-only options are
// refused with the analytical one, and --trace-layers needs a trace file.
TEST_F(CliTest, SimulateDefaultsToEventAndChecksEventOnlyOptions) {
  const RunResult r = run_megascale({"simulate", kSmall, "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_EQ(parsed(r)["fidelity"], "event") << dump(r);
  const RunResult analytical = run_megascale({"simulate", kSmall, "--fidelity", "analytical", "--trace-layers"});
  EXPECT_EQ(analytical.exit_code, 2) << dump(analytical);
  EXPECT_NE(analytical.err.find("--trace-layers needs --fidelity event"), std::string::npos) << dump(analytical);
  const RunResult no_file = run_megascale({"simulate", kSmall, "--trace-layers"});
  EXPECT_EQ(no_file.exit_code, 2) << dump(no_file);
  EXPECT_NE(no_file.err.find("--trace-layers needs --trace FILE"), std::string::npos) << dump(no_file);
}

}  // namespace

namespace megascale::cli_testing {
namespace {

// Hardening (issue 13): out-of-range numbers and endless inputs are usage errors
// naming the option or file, not crashes (SIGFPE, abort, bad_alloc) or silent
// wrap-around.
TEST(CliHardening, OutOfRangeOptionsAndEndlessFilesAreErrors) {
  const std::string small = kSourceDir + "/scenarios/example-small.toml";
  RunResult r = run_megascale({"search", small, "--gpus", "2147483647"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--gpus expects an integer in 1..1048576, got '2147483647'"), std::string::npos) << dump(r);
  for (const char* runs : {"2147483648", "4294967297", "0"}) {
    r = run_megascale({"plan", small, "--runs", runs});
    EXPECT_EQ(r.exit_code, 2) << runs << "\n" << dump(r);
    EXPECT_NE(r.err.find("--runs expects an integer in 1..10000000"), std::string::npos) << dump(r);
  }
  r = run_megascale({"simulate", "/dev/zero"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("/dev/zero: file is larger than 16 MiB"), std::string::npos) << dump(r);
  for (const char* sigma : {"1", "-0.1"}) {
    r = run_megascale({"simulate", small, "--jitter", sigma});
    EXPECT_EQ(r.exit_code, 2) << sigma << "\n" << dump(r);
    EXPECT_NE(r.err.find("--jitter expects a sigma in 0..0.25"), std::string::npos) << dump(r);
  }
  r = run_megascale({"simulate", small, "--jitter", "0.05", "--steps", "2"});
  EXPECT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.err.find("simulate: step 2 / 2"), std::string::npos) << dump(r);  // progress for several steps
  // Unbounded work: minutes of silence before (issue 13).
  r = run_megascale({"simulate", small, "--steps", "100000"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--steps expects an integer in 1..1000"), std::string::npos) << dump(r);
  r = run_megascale({"net", "incast", "--senders", "4", "--cc", "dcqcn", "--capacity-gbps", "1e12"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--capacity-gbps expects a positive line rate, at most 3200"), std::string::npos) << dump(r);
  // A directory as --trace prefix would write hidden dir/.json.
  const fs::path dir = fs::temp_directory_path() / ("megascale-trace-dir-" + std::to_string(getpid()));
  fs::create_directories(dir);
  r = run_megascale({"simulate", small, "--trace", dir.string() + "/"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--trace expects a file prefix"), std::string::npos) << dump(r);
  EXPECT_FALSE(fs::exists(dir / ".json"));
  fs::remove_all(dir);
  // A trace that cannot be written: the path and the system's reason, exit 2
  // (was "cannot open for writing", without the reason).
  r = run_megascale({"simulate", small, "--trace", (dir / "absent" / "t").string()});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find((dir / "absent" / "t").string() + ".json: cannot write (No such file or directory)"),
            std::string::npos)
      << dump(r);
  // validate --write regenerates the reference report only from the paper's scenarios.
  r = run_megascale({"validate", "--write", "--dir", kSourceDir + "/scenarios/paper"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("drop --dir"), std::string::npos) << dump(r);
  // validate --dir names a folder that is not one (it named the first case file
  // inside it as missing), and a folder without a case names the case.
  r = run_megascale({"validate", "--dir", (dir / "absent").string()});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find((dir / "absent").string() + " is not a folder of the paper's scenarios"), std::string::npos)
      << dump(r);
  fs::create_directories(dir);
  r = run_megascale({"validate", "--dir", dir.string(), "--fidelity", "analytical"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find((dir / "table2-megatron-256.toml").string() + ": cannot open file"), std::string::npos)
      << dump(r);
  fs::remove_all(dir);
}

// search --refine N keeps at least N in the ranking (it refined min(N, top)
// silently); an explicit smaller --top is refused. simulate says when a straggler
// fraction rounds to no machine.
TEST(CliHardening, RefineAndStragglerFractionSayWhatTheyDo) {
  const std::string small = kSourceDir + "/scenarios/example-small.toml";
  RunResult r = run_megascale({"search", small, "--top", "3", "--refine", "5"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--refine 5 re-simulates more layouts than --top 3"), std::string::npos) << dump(r);
  r = run_megascale({"search", small, "--refine", "12", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  size_t refined = 0, at = 0;
  while ((at = r.out.find("\"event\"", at)) != std::string::npos) ++refined, ++at;
  EXPECT_GE(refined, 12u) << r.out.substr(0, 300);
  r = run_megascale({"simulate", kSourceDir + "/scenarios/paper/table2-megascale-256.toml", "--stragglers", "0.005"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("rounds to no machine: no straggler simulated"), std::string::npos) << r.out;
  // Straggler options without stragglers did nothing, silently.
  r = run_megascale({"simulate", small, "--steps", "2", "--straggler-per-step"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--straggler-per-step draws the slow machines again every step: it needs --stragglers"),
            std::string::npos)
      << dump(r);
  r = run_megascale({"simulate", small, "--straggler-factor", "1.5"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--straggler-factor is the slow machines' compute multiplier"), std::string::npos) << dump(r);
}

// search --fix keeps the named dimensions; bad items are usage errors.
TEST(CliHardening, SearchFixKeepsDimensions) {
  const std::string paper = kSourceDir + "/scenarios/paper/table2-megascale-1024.toml";
  RunResult r = run_megascale({"search", paper, "--fix", "tp=4,pp=16", "--top", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  EXPECT_GE(j["top"].size(), 1u) << r.out.substr(0, 400);
  for (const Json& row : j["top"]) {
    EXPECT_EQ(row["parallel"]["tp"], 4) << row.dump();
    EXPECT_EQ(row["parallel"]["pp"], 16) << row.dump();
  }
  for (const char* bad : {"tp", "tp=x", "ep=2", "zero_stage=4"}) {
    r = run_megascale({"search", paper, "--fix", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << dump(r);
    EXPECT_NE(r.err.find("--fix"), std::string::npos) << dump(r);
  }
}

// search --headroom: every ranked layout leaves that fraction of memory free.
TEST(CliHardening, SearchHeadroomLeavesMemoryFree) {
  const std::string paper = kSourceDir + "/scenarios/paper/table2-megascale-1024.toml";
  const RunResult r = run_megascale({"search", paper, "--headroom", "0.25", "--top", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json j = parsed(r);
  EXPECT_GE(j["top"].size(), 1u) << r.out.substr(0, 400);
  for (const Json& row : j["top"]) {
    EXPECT_LE(row["memory_per_gpu_bytes"].get<double>(), 0.75 * row["memory_capacity_bytes"].get<double>())
        << row.dump();
  }
  const RunResult bad = run_megascale({"search", paper, "--headroom", "1.5"});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("--headroom expects"), std::string::npos) << dump(bad);
}

// --version, and --help after any command: stdout, exit 0.
TEST(CliHardening, VersionAndHelpEverywhere) {
  RunResult r = run_megascale({"--version"});
  EXPECT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_EQ(r.out.rfind("megascale ", 0), 0u) << r.out;
  const RunResult all = run_megascale({"--help"});
  for (const char* command : {"simulate", "compare", "search", "validate", "train", "plan", "net", "run", "check"}) {
    r = run_megascale({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << dump(r);
    EXPECT_NE(r.out.find("usage: megascale"), std::string::npos) << command << "\n" << dump(r);
    // The command's own usage, not the whole list of commands.
    if (std::string(command) != "net") {
      EXPECT_EQ(r.out.rfind(std::string("usage: megascale ") + command + " ", 0), 0u) << r.out;
      EXPECT_LT(r.out.size(), all.out.size() / 2) << command << "\n" << r.out;
    }
  }
}

// `run --work-dir` and `calibrate check --dir` / `--run-dir`: a folder that
// cannot be made is named (option, path, the system's reason), exit 2, before
// any work: run failed with the file system's bare words and exit 1 after
// writing a recovery profile of no attempt, check after running the engine.
TEST(CliHardening, AFolderThatCannotBeMadeIsNamedBeforeTheWork) {
  const fs::path dir = fs::temp_directory_path() / ("megascale-folders-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a-file") << "x";
  const std::string profile = (dir / "recovery.json").string();
  for (const std::string& work : {std::string("/proc/megascale-no-folder"), (dir / "a-file" / "sub").string()}) {
    const RunResult r = run_megascale(
        {"run", kSourceDir + "/scenarios/cpu/robust-tiny.toml", "--work-dir", work, "--out", profile});
    EXPECT_EQ(r.exit_code, 2) << dump(r);
    EXPECT_NE(r.err.find("--work-dir: " + work + ": cannot make this folder ("), std::string::npos) << dump(r);
    EXPECT_FALSE(fs::exists(profile)) << "a recovery profile of a run that never started";
  }
  for (const char* option : {"--dir", "--run-dir"}) {
    const RunResult r = run_megascale({"calibrate", "check", kSourceDir + "/scenarios/cpu/check-single.toml", option,
                                       (dir / "a-file").string()});
    EXPECT_EQ(r.exit_code, 2) << dump(r);
    EXPECT_NE(r.err.find(std::string(option) + ": " + (dir / "a-file").string() + ": cannot make this folder ("),
              std::string::npos)
        << dump(r);
  }
  fs::remove_all(dir);
}

// plan --plot writes the scenario's name into the SVG escaped (issue 13).
TEST(CliHardening, PlotEscapesTheScenarioName) {
  const fs::path dir = fs::temp_directory_path() / ("megascale-plot-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string svg = (dir / "p.svg").string();
  const RunResult r = run_megascale({"plan", kSourceDir + "/scenarios/example-small.toml", "--runs", "20",
                                     "--sweep", "checkpoint_interval=5m,60m", "--plot", svg, "--set",
                                     "name=\"a & b <text><script>x<script>\""});  // no '/': a name is a file name
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  std::ifstream f(svg);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(text.str().find("<script>"), std::string::npos) << text.str().substr(0, 400);
  EXPECT_NE(text.str().find("&amp;"), std::string::npos) << text.str().substr(0, 400);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace megascale::cli_testing
