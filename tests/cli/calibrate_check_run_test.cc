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
//   (b') scripts/gpu-check.sh's step 7 on its 1B scenario, with a run recorded
//       from the simulator's own step (20 copies of its trace, train.jsonl
//       of its step time): error 0 on every op with the profile it came
//       from, and a `calibrate import --gemm-csv` profile predicts otherwise;
//   (c) bad input exits 2 naming the file and the reason: a missing directory,
//       an empty trace, a trace of only a header, a train.jsonl with no step,
//       a run of another scenario, a GPU profile on a scenario training on
//       cpu, and --steps with --from-run.
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

#include "model/trace_schema.h"
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

// (b') The GPU check's own scenario and commands: a run made of the
// simulator's step checks to error 0, op by op; an imported profile moves the
// prediction and the error follows it.
TEST_F(CalibrateCheckRun, GpuCheckScenarioAgainstItsOwnPredictionIsExact) {
  const std::string scenario = kSourceDir + "/scenarios/gpu/gpt-1b-h200.toml";
  const fs::path run = *dir_ / "gpt-1b-run";
  fs::create_directories(run);
  const RunResult sim = run_megascale({"simulate", scenario, "--fidelity", "event", "--trace-layers", "--trace",
                                       (*dir_ / "sim-1b").string(), "--json"});
  ASSERT_EQ(sim.exit_code, 0) << dump(sim);
  const double step_s = Json::parse(sim.out)["iteration_time_s"].get<double>();
  const std::vector<model::TraceEvent> one = model::read_trace_csv((*dir_ / "sim-1b.csv").string());
  std::vector<model::TraceEvent> all;
  std::ofstream jsonl(run / "train.jsonl");
  jsonl << "a line that is not a step report\n";
  for (int k = 0; k < 20; ++k) {
    for (model::TraceEvent e : one) {
      e.start_us += k * step_s * 1e6;
      e.end_us += k * step_s * 1e6;
      all.push_back(e);
    }
    jsonl << Json{{"step", k + 1}, {"loss", 10.0}, {"step_time_s", step_s}, {"tokens_per_s", 8 * 2048 / step_s}}.dump()
          << "\n";
  }
  jsonl.close();
  model::write_trace_csv((run / "trace.csv").string(), all);

  const RunResult shipped = from_run(scenario, run.string(), {"--warmup", "3", "--dir", (*dir_ / "c1b").string()});
  ASSERT_EQ(shipped.exit_code, 0) << dump(shipped);
  const Json c = check_of(shipped);
  EXPECT_EQ(c["device"], "cuda");
  EXPECT_EQ(c["steps_used"], 17);
  EXPECT_NEAR(c["error"].get<double>(), 0, 1e-9);
  EXPECT_NEAR(c["measured_step_s"].get<double>(), step_s, 1e-12);
  ASSERT_GT(c["ops"].size(), 20u);
  for (const Json& op : c["ops"]) {  // the CSV keeps 1 ns: a few ns per kind and step
    EXPECT_NEAR(op["error"].get<double>(), 0, 1e-3) << op.dump();
    EXPECT_NEAR(op["measured_s"].get<double>(), op["predicted_s"].get<double>(), 1e-6) << op.dump();
  }

  const std::string profile = (*dir_ / "h200-imported.toml").string();
  const RunResult imported = run_megascale({"calibrate", "import", "--profile", "H200-SXM-141GB", "--gemm-csv",
                                            kSourceDir + "/tests/calibrate/fixtures/gemm_sweep.csv", "--name",
                                            "H200-imported", "--out", profile});
  ASSERT_EQ(imported.exit_code, 0) << dump(imported);
  const RunResult other = from_run(scenario, run.string(), {"--warmup", "3", "--profile", profile, "--dir",
                                                            (*dir_ / "c1b-imported").string()});
  ASSERT_LE(other.exit_code, 1) << dump(other);
  const Json o = check_of(other);
  EXPECT_EQ(o["profile"], profile);
  EXPECT_GT(std::abs(o["predicted_step_s"].get<double>() / step_s - 1), 0.01) << "the imported GEMM curve is another";
  EXPECT_NEAR(o["error"].get<double>(), o["predicted_step_s"].get<double>() / step_s - 1, 1e-12);
  EXPECT_EQ(o["pass"], std::abs(o["error"].get<double>()) <= 10);
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

  // A step that took no time would make every error infinite.
  bad = copy_run("bad-zero-step");
  {
    std::ifstream in(fs::path(run_dir()) / "train.jsonl");
    std::string first, rest, line;
    std::getline(in, first);
    while (std::getline(in, line)) rest += line + "\n";
    Json j = Json::parse(first);
    j["step_time_s"] = 0.0;
    std::ofstream(fs::path(bad) / "train.jsonl", std::ios::trunc) << j.dump() << "\n" << rest;
  }
  expect_bad(from_run(cpu_scenario(), bad), bad + "/train.jsonl:1", "positive number of seconds");

  // A step report cut mid-line: a damaged record, named at its line and column
  // (skipped as a warning, it lost a step and read as "a run of another scenario").
  bad = copy_run("bad-broken-step");
  {
    std::ifstream in(fs::path(run_dir()) / "train.jsonl");
    std::string first, rest, line;
    std::getline(in, first);
    while (std::getline(in, line)) rest += line + "\n";
    std::ofstream(fs::path(bad) / "train.jsonl", std::ios::trunc) << first << "\n" << rest.substr(0, 20) << "\n";
  }
  expect_bad(from_run(cpu_scenario(), bad), bad + "/train.jsonl:2:", "a step report that is not valid JSON");

  // Another scenario: twice the tokens per step; then one more layer than traced
  // in a model with twice the micro-batches (same tokens): the trace disagrees.
  expect_bad(from_run(cuda_scenario(), run_dir(), {"--set", "parallel.global_batch=12"}), run_dir() + "/train.jsonl",
             "a run of another scenario");
  expect_bad(from_run(cpu_scenario(), run_dir(), {"--set", "parallel.micro_batch=1"}), run_dir() + "/trace.csv",
             "a run of another scenario");

  // A GPU profile predicts the CUDA engine: a scenario training on cpu is refused.
  const RunResult device = from_run(cpu_scenario(), run_dir(), {"--set", "hardware.gpu=\"H200-SXM-141GB\""});
  EXPECT_EQ(device.exit_code, 2) << dump(device);
  EXPECT_NE(device.err.find("train.device"), std::string::npos) << device.err;

  const RunResult steps = from_run(cpu_scenario(), run_dir(), {"--steps", "5"});
  EXPECT_EQ(steps.exit_code, 2) << dump(steps);
  EXPECT_NE(steps.err.find("--from-run"), std::string::npos) << steps.err;
}

}  // namespace
}  // namespace megascale::cli_testing
