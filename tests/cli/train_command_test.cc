// tests/cli/train_command_test.cc: `megascale train FILE [--json]` end to end —
// the real binary (MEGASCALE_BINARY) launching the real engine
// (megascale-train, built next to it) under mpirun, on a copy of
// scenarios/cpu/train-small.toml (4 processes: TP 2 x PP 2 x VPP 2) cut to 3
// steps, written into a fresh temporary directory with its work_dir there too.
//
// Checks: one JSON object per step on stdout with {step, loss, step_time_s,
// tokens_per_s}, finite loss, exit 0; and the bad-input paths, each exit 2 with
// a message naming the culprit: hardware.gpu other than "cpu", an unknown
// [train] key (file:line), a corrupt dataset given as train.data (the file).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_megascale.h"

namespace {

namespace fs = std::filesystem;

using namespace megascale::cli_testing;
const std::string kTrainSmall = kSourceDir + "/scenarios/cpu/train-small.toml";


std::vector<std::string> nonempty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// The number named `key` in one JSON line of `train --json`; NaN when the line
// is not JSON or the value is absent, null or not a number.
double number_after(const std::string& json, const std::string& key) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains(key) || !j[key].is_number()) return std::nan("");
  return j[key].get<double>();
}

class TrainCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path() / "megascale-train-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::ifstream in(kTrainSmall);
    ASSERT_TRUE(in.good()) << kTrainSmall;
    std::stringstream ss;
    ss << in.rdbuf();
    scenario_ = ss.str();
    // 3 steps, the synthetic corpus made under this test's directory. [train]
    // is the file's last table: lines appended go into it.
    replace("steps = 20", "steps = 3");
    scenario_ += "work_dir = \"" + (dir_ / "work").string() + "\"\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void replace(const std::string& from, const std::string& to) {
    const size_t at = scenario_.find(from);
    ASSERT_NE(at, std::string::npos) << "'" << from << "' not in " << kTrainSmall;
    scenario_.replace(at, from.size(), to);
  }
  std::string write_scenario() {
    const std::string path = (dir_ / "train-small.toml").string();
    std::ofstream(path) << scenario_;
    return path;
  }
  int line_count() const {
    int n = 0;
    for (char c : scenario_) n += c == '\n';
    return n;
  }

  fs::path dir_;
  std::string scenario_;
};

TEST_F(TrainCommandTest, JsonPrintsOneObjectPerStep) {
  const RunResult r = run_megascale({"train", write_scenario(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const std::vector<std::string> lines = nonempty_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << dump(r);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& j = lines[i];
    EXPECT_EQ(j.front(), '{') << j;
    EXPECT_EQ(j.back(), '}') << j;
    EXPECT_EQ(number_after(j, "step"), static_cast<double>(i + 1)) << j;
    const double loss = number_after(j, "loss");
    EXPECT_TRUE(std::isfinite(loss)) << j;
    // An untrained model of vocab 96 scores about ln(96) = 4.56 nats.
    EXPECT_GT(loss, 1.0) << j;
    EXPECT_LT(loss, 8.0) << j;
    EXPECT_GT(number_after(j, "step_time_s"), 0.0) << j;
    EXPECT_GT(number_after(j, "tokens_per_s"), 0.0) << j;
  }
}

// A diverged run (issue 13: learning_rate 1e30 trained to the end with loss
// null, exit 0, and checkpointed NaN weights as complete) stops at the first
// non-finite loss with exit 1, before checkpointing that state.
TEST_F(TrainCommandTest, DivergedTrainingStopsBeforeCheckpointing) {
  scenario_ += "checkpoint_dir = \"" + (dir_ / "ckpt").string() + "\"\ncheckpoint_every = 1\n";
  const RunResult r = run_megascale({"train", write_scenario(), "--json", "--set", "train.learning_rate=1e30"});
  EXPECT_EQ(r.exit_code, 1) << dump(r);
  EXPECT_NE(r.err.find("the training diverged"), std::string::npos) << dump(r);
  // No checkpoint past the last finite state: step 2's NaN was never saved
  // (a resume would load NaN weights and report them complete).
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "step_00000002")) << dump(r);
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "step_00000003")) << dump(r);
  const std::vector<std::string> lines = nonempty_lines(r.out);
  ASSERT_GE(lines.size(), 1u) << dump(r);
  EXPECT_LE(lines.size(), 2u) << dump(r);  // it stopped at the first non-finite loss
}

// SIGTERM or SIGINT to `megascale train` stops mpirun and every rank (issue 13:
// std::system left them training after SIGTERM and ignored SIGINT).
TEST_F(TrainCommandTest, SignalsStopTheWholeJob) {
  replace("steps = 3", "steps = 1000000");
  const std::string scenario = write_scenario();
  for (int sig : {SIGTERM, SIGINT}) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
      execl(kBinary.c_str(), kBinary.c_str(), "train", scenario.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait until a rank runs (it appears in the process table), then signal.
    auto ranks_running = [&] {
      // "[m]" so that the shell running pgrep, whose command line holds the
      // pattern, does not match it.
      const std::string cmd = "pgrep -f '[m]egascale-train " + scenario + "' > /dev/null";
      return std::system(cmd.c_str()) == 0;
    };
    for (int i = 0; i < 100 && !ranks_running(); ++i) usleep(100 * 1000);
    ASSERT_TRUE(ranks_running()) << "the job never started";
    usleep(500 * 1000);
    kill(child, sig);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status)) << "signal " << sig;
    if (WIFEXITED(status)) {
      EXPECT_NE(WEXITSTATUS(status), 0) << "signal " << sig;
    }
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      gone = !ranks_running();
      if (!gone) usleep(100 * 1000);
    }
    EXPECT_TRUE(gone) << "ranks still running after signal " << sig;
    if (!gone) (void)!std::system(("pkill -9 -f '[m]egascale-train " + scenario + "'").c_str());
  }
}

// One training per checkpoint_dir (a held <dir>/LOCK refuses a second one), and
// a newer step without its COMPLETE marker is named when it is skipped
// (issue 13: two runs overwrote each other; a partial save was skipped silently).
TEST_F(TrainCommandTest, CheckpointDirIsLockedAndPartialSavesAreNamed) {
  const fs::path ckpt = dir_ / "ckpt";
  scenario_ += "checkpoint_dir = \"" + ckpt.string() + "\"\ncheckpoint_every = 1\n";
  replace("steps = 3", "steps = 2");
  const std::string scenario = write_scenario();
  fs::create_directories(ckpt);
  const int fd = open((ckpt / "LOCK").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  const RunResult busy = run_megascale({"train", scenario});
  EXPECT_NE(busy.exit_code, 0) << dump(busy);
  EXPECT_NE(busy.err.find("another training holds this checkpoint_dir"), std::string::npos) << dump(busy);
  EXPECT_FALSE(fs::exists(ckpt / "step_00000001")) << dump(busy);
  close(fd);  // the other training ended

  const RunResult first = run_megascale({"train", scenario});
  ASSERT_EQ(first.exit_code, 0) << dump(first);
  ASSERT_TRUE(fs::exists(ckpt / "step_00000002" / "COMPLETE")) << dump(first);
  fs::remove(ckpt / "step_00000002" / "COMPLETE");  // an interrupted save
  replace("steps = 2", "steps = 3");
  const RunResult again = run_megascale({"train", write_scenario()});
  EXPECT_EQ(again.exit_code, 0) << dump(again);
  EXPECT_NE(again.err.find("step_00000002 has no COMPLETE marker (an interrupted save): skipped; resuming from"),
            std::string::npos)
      << dump(again);
  EXPECT_NE(again.out.find("steps 2..3"), std::string::npos) << dump(again);  // from step 1's checkpoint
}

// A stopped rank no longer hangs the job forever with no message (issue 13): the
// other ranks' watchdog (train.watchdog_s) names the stall and the job stops,
// whether the rank stops mid-run or during start-up (MPI_Init, building the
// model: megascale-train arms the watchdog before MPI_Init; a CI run once
// stopped a rank there on a loaded machine, and the job waited forever).
struct StoppedRankRun {
  bool ended = false;  // the job ended by itself within 30 s
  int status = 0;      // its wait status
  std::string out, err;
};

StoppedRankRun stop_a_rank(const std::string& scenario, const fs::path& dir, bool during_start_up) {
  const fs::path out_file = dir / "out.txt", err_file = dir / "err.txt";
  StoppedRankRun run;
  const pid_t child = fork();
  if (child < 0) return run;
  if (child == 0) {
    const int outfd = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int errfd = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(outfd, STDOUT_FILENO);
    dup2(errfd, STDERR_FILENO);
    execl(kBinary.c_str(), kBinary.c_str(), "train", scenario.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  auto slurp = [](const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  // The ranks only: their command line starts with the binary's path, whereas
  // mpirun's (which also names the binary and the scenario) starts with
  // "mpirun". Stopping mpirun instead of a rank would hang the test, not the job.
  const std::string pattern = "'^[^ ]*[m]egascale-train " + scenario + "'";
  auto ranks = [&] {
    FILE* p = popen(("pgrep -c -f " + pattern).c_str(), "r");
    int n = 0;
    if (p != nullptr) {
      if (std::fscanf(p, "%d", &n) != 1) n = 0;
      pclose(p);
    }
    return n;
  };
  bool ready = false;
  for (int i = 0; i < 3000 && !ready; ++i) {  // 30 s at most
    // During start-up: as soon as two ranks exist (they are in MPI_Init or
    // building the model). Mid-run: once rank 0 printed step 1.
    ready = during_start_up ? ranks() >= 2 : slurp(out_file).find("\nstep ") != std::string::npos;
    if (!ready) usleep(10 * 1000);
  }
  int status = 0;
  pid_t done = 0;
  if (ready && std::system(("kill -STOP $(pgrep -n -f " + pattern + ")").c_str()) == 0) {
    for (int i = 0; i < 300 && done == 0; ++i) {  // 30 s at most
      done = waitpid(child, &status, WNOHANG);
      if (done == 0) usleep(100 * 1000);
    }
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  (void)!std::system(("pkill -9 -f '[m]egascale-train " + scenario + "'").c_str());
  run.ended = done != 0;
  run.status = status;
  run.out = slurp(out_file);
  run.err = slurp(err_file);
  return run;
}

TEST_F(TrainCommandTest, WatchdogStopsAJobWhoseRankStopped) {
  replace("steps = 3", "steps = 1000000");
  scenario_ += "watchdog_s = 2\n";
  const StoppedRankRun r = stop_a_rank(write_scenario(), dir_, /*during_start_up=*/false);
  ASSERT_NE(r.out.find("\nstep "), std::string::npos) << "the job never reached step 1\n" << r.out << r.err;
  ASSERT_TRUE(r.ended) << "the job kept waiting on its stopped rank\n" << r.err;
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
  EXPECT_NE(r.err.find("no step finished for"), std::string::npos) << r.err.substr(0, 600);
  EXPECT_NE(r.err.find("(in step "), std::string::npos) << r.err.substr(0, 600);
}

TEST_F(TrainCommandTest, WatchdogStopsAJobWhoseRankStoppedDuringStartUp) {
  replace("steps = 3", "steps = 1000000");
  scenario_ += "watchdog_s = 2\n";
  scenario_ += "startup_watchdog_s = 2\n";
  const StoppedRankRun r = stop_a_rank(write_scenario(), dir_, /*during_start_up=*/true);
  ASSERT_TRUE(r.ended) << "the job kept waiting on its stopped rank\n" << r.out << r.err;
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
  EXPECT_NE(r.err.find("no step finished for"), std::string::npos) << r.err.substr(0, 600);
}

TEST_F(TrainCommandTest, RefusesAHardwareGpuOtherThanCpu) {
  replace("gpu = \"cpu\"", "gpu = \"A100-SXM4-80GB\"");
  const std::string path = write_scenario();
  const RunResult r = run_megascale({"train", path, "--json"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("hardware.gpu"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find(path), std::string::npos) << dump(r);
  EXPECT_TRUE(r.out.empty()) << dump(r);
}

TEST_F(TrainCommandTest, RefusesAnUnknownTrainKeyWithFileAndLine) {
  scenario_ += "stepz = 3\n";
  const int line = line_count();
  const std::string path = write_scenario();
  const RunResult r = run_megascale({"train", path, "--json"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(path + ":" + std::to_string(line)), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("stepz"), std::string::npos) << dump(r);
  EXPECT_TRUE(r.out.empty()) << dump(r);
}

TEST_F(TrainCommandTest, RefusesACorruptDatasetNamingTheFile) {
  const std::string data = (dir_ / "corrupt.msds").string();
  std::ofstream(data) << "MSDS but not really a megascale dataset";
  scenario_ += "data = \"" + data + "\"\n";
  const RunResult r = run_megascale({"train", write_scenario(), "--json"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find(data), std::string::npos) << dump(r);
  EXPECT_TRUE(nonempty_lines(r.out).empty()) << dump(r);
}

// A profile whose peak is below what a step achieves gives no MFU figure
// above 100%: JSON mfu null with the reason naming the profile key, once on
// stderr (issue 13: "the engine reports MFU > 100% under load").
TEST_F(TrainCommandTest, MfuAboveOneNamesTheProfilePeakInsteadOfAFigure) {
  std::ifstream in(kSourceDir + "/calibrate/profiles/cpu.toml");
  std::stringstream profile;
  profile << in.rdbuf();
  std::string text = profile.str();
  const size_t at = text.find("peak_tflops = { value = ");
  ASSERT_NE(at, std::string::npos);
  const size_t begin = at + std::string("peak_tflops = { value = ").size();
  text.replace(begin, text.find(',', begin) - begin, "1e-06");  // 1 MFLOP/s per core
  const std::string path = (dir_ / "slow-cpu.toml").string();
  std::ofstream(path) << text;
  const RunResult r = run_megascale({"train", write_scenario(), "--json", "--set", "hardware.profile=" + path});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const std::vector<std::string> lines = nonempty_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << dump(r);
  for (const std::string& line : lines) {
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_TRUE(j["mfu"].is_null()) << line;
    EXPECT_NE(j.value("mfu_invalid", "").find("peak_tflops"), std::string::npos) << line;
  }
  EXPECT_NE(r.err.find("re-measure it with `megascale calibrate micro`"), std::string::npos) << dump(r);
}

// A one-process scenario started without a launcher trains without MPI
// (engine/tools/train_rank_main.cc): a single-GPU machine needs no MPI runtime
// (scripts/gpu-bundle.sh). The environment makes MPI_Init fail (no such
// point-to-point layer), so the run succeeds only if MPI is never started; its
// losses are those of `megascale train`, which runs the same scenario under
// mpirun -np 1.
TEST_F(TrainCommandTest, OneProcessWithoutLauncherTrainsWithoutMpi) {
  const std::string tiny = kSourceDir + "/scenarios/cpu/eval/tiny.toml";
  const std::vector<std::string> sets = {"--set", "train.steps=3", "--set",
                                         "train.work_dir=" + (dir_ / "work").string()};
  std::vector<std::string> args = {tiny, "--json"};
  args.insert(args.end(), sets.begin(), sets.end());
  const RunResult alone = run_binary(MEGASCALE_TRAIN_BINARY, args, {"OMPI_MCA_pml=no-such-pml"},
                                     {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
  ASSERT_EQ(alone.exit_code, 0) << dump(alone);
  std::vector<std::string> train = {"train", tiny, "--json"};
  train.insert(train.end(), sets.begin(), sets.end());
  const RunResult launched = run_megascale(train);
  ASSERT_EQ(launched.exit_code, 0) << dump(launched);
  const std::vector<std::string> a = nonempty_lines(alone.out), b = nonempty_lines(launched.out);
  ASSERT_EQ(a.size(), 3u) << dump(alone);
  ASSERT_EQ(b.size(), 3u) << dump(launched);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(std::isfinite(number_after(a[i], "loss"))) << a[i];
    EXPECT_EQ(number_after(a[i], "loss"), number_after(b[i], "loss")) << a[i] << "\n" << b[i];
  }
  // The same environment does stop an MPI start, so the check above is not
  // vacuous: a two-process scenario started alone initialises MPI (a
  // singleton) and fails there, before its "needs 2 processes" error.
  std::vector<std::string> two = args;
  for (const char* kv : {"cluster.gpus=2", "parallel.dp=2"}) {
    two.push_back("--set");
    two.push_back(kv);
  }
  const RunResult mpi = run_binary(MEGASCALE_TRAIN_BINARY, two, {"OMPI_MCA_pml=no-such-pml"},
                                   {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
  EXPECT_NE(mpi.exit_code, 0) << dump(mpi);
  EXPECT_EQ(mpi.err.find("needs 2 processes"), std::string::npos) << dump(mpi);
  const RunResult plain = run_binary(MEGASCALE_TRAIN_BINARY, two, {},
                                     {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
  EXPECT_NE(plain.err.find("needs 2 processes"), std::string::npos) << dump(plain);
}

}  // namespace
