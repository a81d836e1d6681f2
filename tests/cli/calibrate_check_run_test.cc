// tests/cli/calibrate_check_run_test.cc: `megascale calibrate check` on a
// recorded run (--from-run, calibrate/check.h), end to end and without a GPU.
//
// The fixture is a real engine run, recorded once per suite by the live path
// (`calibrate check --run-dir`: mpirun megascale-train, one process, a tiny
// GPT on the CPU, 7 steps; seconds). Checked here:
//   (a) --from-run on the same cpu scenario reads the run exactly as the live
//       check did, and its measured step is the median, after the warm-up, of
//       the step_time_s lines of train.jsonl, parsed here independently;
//   (b) the same run checked as a cuda scenario on a GPU profile (H200): the
//       prediction is the GPU op-cost model's, every op kind compares, the
//       engine's one `flash_attention` kind holds the predicted attention core,
//       and error = predicted / measured - 1;
//   (c) bad input exits 2 naming the file and the reason: a missing directory,
//       an empty trace, a trace of only a header, a train.jsonl with no step,
//       a run of another scenario, and --steps with --from-run.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_megascale.h"

namespace megascale::cli_testing {
namespace {

using Json = nlohmann::json;

// The model of scenarios/cpu/check-single.toml (shapes the shipped cpu profile
// holds), 3 micro-batches per step. `[train]` is last: callers append to it.
std::string scenario_text(const std::string& name, const std::string& hardware, const std::string& train) {
  return "name = \"" + name + "\"\n"
         "[model]\nname = \"gpt-check-single\"\nlayers = 4\nhidden = 192\nheads = 6\nseq_len = 96\nvocab = 384\n"
         "[parallel]\ntp = 1\npp = 1\ndp = 1\nmicro_batch = 2\nglobal_batch = 6\n"
         "[hardware]\n" + hardware +
         "[cluster]\ngpus = 1\n"
         "[optimizations]\npreset = \"megatron\"\n"
         "[train]\nsteps = 7\nlearning_rate = 0.003\n" + train;
}

class CalibrateCheckRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = fs::temp_directory_path() / "megascale-check-run-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = new fs::path(tmpl);
    const std::string work = "work_dir = \"" + (*dir_ / "work").string() + "\"\n";
    std::ofstream(cpu_scenario()) << scenario_text("tiny-cpu", "gpu = \"cpu\"\ngpus_per_node = 1\nnics_per_node = 1\n",
                                                   work);
    std::ofstream(cuda_scenario()) << scenario_text(
        "tiny-cuda", "gpu = \"H200-SXM-141GB\"\ngpus_per_node = 1\nnics_per_node = 1\n",
        "device = \"cuda\"\nprecision = \"bf16\"\n" + work);
    live_ = new RunResult(run_megascale({"calibrate", "check", cpu_scenario(), "--run-dir", run_dir(), "--dir",
                                         (*dir_ / "live").string(), "--tolerance", "10", "--json"}));
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    delete live_;
  }
  static std::string cpu_scenario() { return (*dir_ / "tiny-cpu.toml").string(); }
  static std::string cuda_scenario() { return (*dir_ / "tiny-cuda.toml").string(); }
  static std::string run_dir() { return (*dir_ / "run").string(); }

  // `calibrate check SCENARIO --from-run RUN --json ...`: the one check's object.
  static RunResult from_run(const std::string& scenario, const std::string& run, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"calibrate", "check", scenario, "--from-run", run, "--tolerance", "10",
                                     "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_megascale(args);
  }
  static Json check_of(const RunResult& r) { return Json::parse(r.out)["checks"][0]; }

  // A copy of the recorded run, to spoil.
  static std::string copy_run(const std::string& name) {
    const fs::path to = *dir_ / name;
    fs::remove_all(to);
    fs::copy(run_dir(), to, fs::copy_options::recursive);
    return to.string();
  }

  static const Json* row(const Json& check, const std::string& kind) {
    for (const Json& op : check["ops"]) {
      if (op["kind"] == kind) return &op;
    }
    return nullptr;
  }

  static fs::path* dir_;
  static RunResult* live_;
};

fs::path* CalibrateCheckRun::dir_ = nullptr;
RunResult* CalibrateCheckRun::live_ = nullptr;

TEST_F(CalibrateCheckRun, LiveRunIsRecordedWhereAsked) {
  ASSERT_EQ(live_->exit_code, 0) << dump(*live_);
  EXPECT_TRUE(fs::is_regular_file(fs::path(run_dir()) / "train.jsonl"));
  EXPECT_TRUE(fs::is_regular_file(fs::path(run_dir()) / "trace.csv"));
  const Json c = check_of(*live_);
  EXPECT_EQ(c["measured_from"], "engine run");
  EXPECT_EQ(c["run_dir"], run_dir());
  EXPECT_EQ(c["device"], "cpu");
  EXPECT_EQ(c["measured_steps_s"].size(), 7u);
}

// (a) The recorded run reads as the live check read it; its measured step is
// the median of train.jsonl's steps 3..7 (warm-up 2), parsed here.
TEST_F(CalibrateCheckRun, FromRunMeasuresWhatTheLiveRunParsed) {
  ASSERT_EQ(live_->exit_code, 0) << dump(*live_);
  const RunResult r = from_run(cpu_scenario(), run_dir(), {"--dir", (*dir_ / "again").string()});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json live = check_of(*live_);
  const Json again = check_of(r);
  EXPECT_EQ(again["measured_from"], "recorded run");
  EXPECT_EQ(again["measured_steps_s"], live["measured_steps_s"]);
  EXPECT_EQ(again["measured_step_s"], live["measured_step_s"]);
  EXPECT_EQ(again["measured_split"], live["measured_split"]);
  EXPECT_EQ(again["predicted_step_s"], live["predicted_step_s"]);

  std::vector<double> steps;
  std::ifstream in(fs::path(run_dir()) / "train.jsonl");
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step_time_s")) steps.push_back(j["step_time_s"].get<double>());
  }
  ASSERT_EQ(steps.size(), 7u);
  std::vector<double> steady(steps.begin() + 2, steps.end());
  std::sort(steady.begin(), steady.end());
  EXPECT_DOUBLE_EQ(again["measured_step_s"].get<double>(), steady[2]);
  EXPECT_DOUBLE_EQ(again["measured_spread"].get<double>(), (steady.back() - steady.front()) / steady[2]);
  EXPECT_EQ(again["steps_used"], 5);
  // The markdown says where the measured side came from.
  std::ifstream md(*dir_ / "again" / "tiny-cpu.md");
  std::stringstream text;
  text << md.rdbuf();
  EXPECT_NE(text.str().find("--from-run " + run_dir()), std::string::npos) << text.str();
}

// (b) The CPU-recorded run as a cuda scenario on the H200 profile: a GPU
// prediction (microseconds per op, not the CPU engine's milliseconds) and a
// per-op comparison of the same kinds.
TEST_F(CalibrateCheckRun, CudaScenarioOnAGpuProfileComparesStepAndOps) {
  ASSERT_EQ(live_->exit_code, 0) << dump(*live_);
  const std::string out = (*dir_ / "cuda").string();
  const RunResult r = from_run(cuda_scenario(), run_dir(), {"--dir", out});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const Json c = check_of(r);
  const Json cpu = check_of(*live_);
  EXPECT_EQ(c["device"], "cuda");
  EXPECT_EQ(c["profile"], "calibrate/profiles/H200-SXM-141GB.toml (shipped)");
  EXPECT_EQ(c["measured_step_s"], cpu["measured_step_s"]);
  const double measured = c["measured_step_s"].get<double>();
  const double predicted = c["predicted_step_s"].get<double>();
  EXPECT_GT(predicted, 0);
  // The GPU op-cost model, not the CPU engine's measured kernels: an H200
  // computes this tiny GPT in a few ms (per-kernel floors), a CPU core in ~50.
  EXPECT_LT(c["predicted_split"]["compute_s"].get<double>(), 0.1 * cpu["predicted_split"]["compute_s"].get<double>());
  EXPECT_NEAR(c["error"].get<double>(), predicted / measured - 1, 1e-12);
  EXPECT_EQ(c["pass"], std::abs(predicted / measured - 1) <= 10);
  // Per op: the layer kernels compare both ways; the engine's single attention
  // kind carries the predicted attention core whatever the profile's kinds.
  for (const char* kind : {"qkv", "fc1", "fc2", "qkv.bwd", "flash_attention", "flash_attention.bwd", "forward",
                           "backward", "optimizer_step"}) {
    const Json* op = row(c, kind);
    ASSERT_NE(op, nullptr) << kind << " missing in " << c["ops"].dump();
    EXPECT_GT((*op)["measured_s"].get<double>(), 0) << kind;
    EXPECT_GT((*op)["predicted_s"].get<double>(), 0) << kind;
    EXPECT_NEAR((*op)["error"].get<double>(),
                (*op)["predicted_s"].get<double>() / (*op)["measured_s"].get<double>() - 1, 1e-12)
        << kind;
  }
  for (const char* kind : {"attn_scores", "attn_context", "softmax"}) EXPECT_EQ(row(c, kind), nullptr) << kind;
  for (const char* ext : {".md", ".svg", ".json"}) EXPECT_TRUE(fs::is_regular_file(fs::path(out) / ("tiny-cuda" + std::string(ext)))) << ext;
  std::ifstream md(fs::path(out) / "tiny-cuda.md");
  std::stringstream text;
  text << md.rdbuf();
  EXPECT_NE(text.str().find("on cuda, a recorded run"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("CUDA events"), std::string::npos);
}

// (c) Bad input: exit 2, the file and the reason named.
TEST_F(CalibrateCheckRun, BadRunsNameTheFileAndTheReason) {
  ASSERT_EQ(live_->exit_code, 0) << dump(*live_);
  auto expect_bad = [&](const RunResult& r, const std::string& file, const std::string& reason) {
    EXPECT_EQ(r.exit_code, 2) << dump(r);
    EXPECT_NE(r.err.find(file), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
  };
  const std::string missing = (*dir_ / "no-such-run").string();
  expect_bad(from_run(cpu_scenario(), missing), missing, "no such directory");

  std::string bad = copy_run("bad-no-trace");
  fs::remove(fs::path(bad) / "trace.csv");
  expect_bad(from_run(cpu_scenario(), bad), bad + "/trace.csv", "missing");

  bad = copy_run("bad-empty-trace");
  std::ofstream(fs::path(bad) / "trace.csv", std::ios::trunc).flush();
  expect_bad(from_run(cpu_scenario(), bad), bad + "/trace.csv", "empty file");

  bad = copy_run("bad-header-only");
  {
    std::ifstream in(fs::path(run_dir()) / "trace.csv");
    std::string header;
    std::getline(in, header);
    std::ofstream(fs::path(bad) / "trace.csv", std::ios::trunc) << header << "\n";
  }
  expect_bad(from_run(cpu_scenario(), bad), bad + "/trace.csv", "no Schedule IR events");

  bad = copy_run("bad-no-steps");
  std::ofstream(fs::path(bad) / "train.jsonl", std::ios::trunc) << "not json\n";
  expect_bad(from_run(cpu_scenario(), bad), bad + "/train.jsonl", "no step reports");

  // Another scenario: twice the tokens per step; then one more layer than traced
  // in a model with twice the micro-batches (same tokens): the trace disagrees.
  expect_bad(from_run(cuda_scenario(), run_dir(), {"--set", "parallel.global_batch=12"}), run_dir() + "/train.jsonl",
             "a run of another scenario");
  expect_bad(from_run(cpu_scenario(), run_dir(), {"--set", "parallel.micro_batch=1"}), run_dir() + "/trace.csv",
             "a run of another scenario");

  const RunResult steps = from_run(cpu_scenario(), run_dir(), {"--steps", "5"});
  EXPECT_EQ(steps.exit_code, 2) << dump(steps);
  EXPECT_NE(steps.err.find("--from-run"), std::string::npos) << steps.err;
}

}  // namespace
}  // namespace megascale::cli_testing
