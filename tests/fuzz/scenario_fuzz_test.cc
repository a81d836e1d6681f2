// tests/fuzz/scenario_fuzz_test.cc: random and mutated scenarios through the
// parser and every scenario command (README "Tests", issue 13).
//
// The shipped scenarios (scenarios/**/*.toml) are the seeds; tests/fuzz/mutator.h
// edits them (values set to 0, -1, 1e308, nan, wrong types; lines deleted,
// duplicated, swapped or borrowed from another scenario; unknown keys;
// truncation; random bytes). The inputs are fixed: one seed (kFuzzSeed), one
// number of cases, every draw from base::SplitMix64, so every run feeds the
// same scenarios and a failure reproduces by its case index.
//
// Each case runs in a forked child under a time limit, so that a crash, a
// sanitizer report or a hang fails that case (and the test) instead of the
// test program; the failing input is written to fuzz-failures/ in the test's
// working directory (the build's tests/fuzz/) with the arguments and the edits
// that made it. A case passes when:
//   - model::load_scenario returns, or throws ScenarioError whose message names
//     the file; nothing else escapes;
//   - simulate (analytical, JSON and text), compare, search (small --gpus), plan
//     (few --runs) and, for a paper scenario, validate on a copy of
//     scenarios/paper/ with the mutated file in it, all with the case's --set
//     overrides (a third of the cases set one or two keys of any shipped
//     scenario to a hostile or plausible value): exit 0, 1 or 2 (2 whenever
//     the scenario does not parse), no exception escapes run_cli, and every
//     number of a JSON report that contract 4 bounds is in range (mfu in (0, 1],
//     or up to the profile's FP8 speedup under fp8, model/throughput.h;
//     bubble_fraction >= 0, ETTR in [0, 1], times and rates > 0, all finite;
//     an estimate's breakdown_s parts >= 0 and adding up to iteration_time_s);
//     a text report prints no nan or inf.
// EventFidelity runs a few mutated small scenarios through the `megascale`
// binary (which links the event-level simulator) the same way, as a
// subprocess with a time limit. RegressionCorpus replays tests/fuzz/corpus/:
// inputs that once failed.
//
// MEGASCALE_FUZZ_CASES=N runs N analytical cases instead of kAnalyticalCases
// (a longer local run; the cases are the first N of the same sequence);
// MEGASCALE_FUZZ_ONLY=I runs case I alone (a failure's reproduction).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "calibrate/validation.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "fuzz_harness.h"
#include "mutator.h"

namespace {

using megascale::fuzz::Mutator;
using namespace megascale::fuzz;  // the harness (fuzz_harness.h)

const fs::path kSourceDir = MEGASCALE_SOURCE_DIR;
const std::string kBinary = MEGASCALE_BINARY;

// The one seed of every draw: the same inputs on every run and machine.
constexpr uint64_t kFuzzSeed = 0x6d65676173636c65ull;  // "megascle"
// Analytical cases per run: each is a child process running the parser and up
// to six commands. Measured on the project's 2-core machine: ~26 ms of CPU per
// case in Release (600: 16 s of CPU; 65 s of wall time while three other
// builds shared the cores), ~4x that under the sanitizers (scripts/sanitize.sh).
const int kAnalyticalCases = scaled_cases(600);
// Event-level cases per run: each runs the `megascale` binary three times on a
// small job (16 cases: ~8 s of CPU in Release, ~3x under the sanitizers).
const int kEventCases = scaled_cases(16);
// Mutated candidates drawn per event case at most: most mutations of the small
// seeds still parse, so 20 draws per wanted case is far more than needed.
constexpr int kEventDrawsPerCase = 20;
// Largest job (cluster.gpus) the event cases simulate: an event-level step of
// a few dozen GPUs takes well under a second; the analytical cases cover the
// large ones.
constexpr int kEventMaxGpus = 64;

struct Seed {
  std::string relative;  // "paper/table2-megascale-256.toml", under scenarios/
  std::string text;
  bool paper = false;    // one of the files `validate` reads (calibrate/validation.h)
};

// Every shipped scenario, in a fixed order.
std::vector<Seed> load_seeds() {
  std::vector<Seed> seeds;
  const fs::path root = kSourceDir / "scenarios";
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().extension() != ".toml") continue;
    Seed s;
    s.relative = fs::relative(e.path(), root).string();
    s.text = read_file(e.path());
    const std::vector<megascale::calibrate::PaperCase>& read = megascale::calibrate::paper_cases();
    s.paper = e.path().parent_path().filename() == "paper" &&
              std::any_of(read.begin(), read.end(), [&](const megascale::calibrate::PaperCase& pc) {
                return pc.file == e.path().filename().string();
              });
    seeds.push_back(s);
  }
  std::sort(seeds.begin(), seeds.end(), [](const Seed& a, const Seed& b) { return a.relative < b.relative; });
  return seeds;
}

// The bounds of contract 4 (DESIGN.md) on a report's numbers, by key, wherever
// the key appears in the JSON (estimates, compare's two sides, search's
// ranking, plan's sweeps). A null (what cli/json.cc prints for nan or inf) is
// out of range too.
struct Bound {
  double low, high;
  bool low_open, high_open;
};
const std::map<std::string, Bound>& bounds() {
  static const std::map<std::string, Bound> b = {
      {"mfu", {0, 1, true, false}},
      // Pipeline bubble / the rank's compute time (model/estimator.h, Megatron-LM's
      // (P-1)/(V*M)): above 1 when there are fewer micro-batches than stages, so
      // bounded below only. Its share of the step is checked with the breakdown.
      {"bubble_fraction", {0, HUGE_VAL, false, true}},
      // The bubble's share of the step (model/estimator.h): [0, 1).
      {"bubble_share_of_step", {0, 1, false, true}},
      {"mfu_peak_tflops", {0, HUGE_VAL, true, true}},
      {"iteration_time_s", {0, HUGE_VAL, true, true}},
      {"tokens_per_s", {0, HUGE_VAL, true, true}},
      {"speedup", {0, HUGE_VAL, true, true}},
      {"effective_training_time_rate", {0, 1, false, false}},
      {"ettr_mean", {0, 1, false, false}},
      {"ettr_p5", {0, 1, false, false}},
      {"ettr_p95", {0, 1, false, false}},
      {"best_checkpoint_ettr", {0, 1, false, false}},
  };
  return b;
}

// What a case's scenario lets its reports contain.
struct Expect {
  bool parses = true;    // false: every command must exit 2 (bad input)
  double mfu_max = 1.0;  // the MFU ceiling (mfu_ceiling())
};

// MFU is against the BF16 peak also under FP8, whose GEMMs may beat it by the
// profile's FP8 speedup (model/throughput.h): the ceiling is then that speedup.
double mfu_ceiling(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    const megascale::model::Scenario s = megascale::model::load_scenario(path, overrides);
    if (s.optimizations.fp8) return std::max(1.0, megascale::model::hardware_profile(s).fp8_gemm_speedup());
  } catch (const std::exception&) {
  }
  return 1.0;
}

void check_ranges(const nlohmann::json& j, const std::string& where, const Expect& expect,
                  std::vector<std::string>* failures) {
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) check_ranges(j[i], where + "[" + std::to_string(i) + "]", expect, failures);
    return;
  }
  if (!j.is_object()) return;
  // An estimate's breakdown: every part >= 0 and finite, the parts add up to the
  // iteration (JSON keeps 9 digits: a relative 1e-6 is far above the rounding).
  if (j.contains("breakdown_s") && j["breakdown_s"].is_object() && j.contains("iteration_time_s") &&
      j["iteration_time_s"].is_number()) {
    double sum = 0;
    for (auto part = j["breakdown_s"].begin(); part != j["breakdown_s"].end(); ++part) {
      const bool ok = part.value().is_number() && std::isfinite(part.value().get<double>()) &&
                      part.value().get<double>() >= 0;
      if (!ok) failures->push_back(where + ".breakdown_s." + part.key() + " = " + part.value().dump());
      if (ok) sum += part.value().get<double>();
    }
    const double step = j["iteration_time_s"].get<double>();
    if (!(std::abs(sum - step) <= 1e-6 * step)) {
      failures->push_back(where + ".breakdown_s adds up to " + std::to_string(sum) + " s, not the iteration's " +
                          std::to_string(step) + " s");
    }
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string at = where + "." + it.key();
    const auto bound = bounds().find(it.key());
    if (bound != bounds().end()) {
      Bound b = bound->second;
      if (it.key() == "mfu") b.high = expect.mfu_max;
      if (!it.value().is_number()) {
        failures->push_back(at + " is " + it.value().dump() + ", not a number");
      } else {
        const double v = it.value().get<double>();
        const bool above_low = b.low_open ? v > b.low : v >= b.low;
        const bool below_high = b.high_open ? v < b.high : v <= b.high;
        if (!std::isfinite(v) || !above_low || !below_high) {
          failures->push_back(at + " = " + it.value().dump() + " is out of " + (b.low_open ? "(" : "[") +
                              std::to_string(b.low) + ", " + std::to_string(b.high) + (b.high_open ? ")" : "]"));
        }
      }
    }
    check_ranges(it.value(), at, expect, failures);
  }
}

// Checks one command's outcome; returns "" or what is wrong.
std::string check_outcome(const std::vector<std::string>& args, int code, const std::string& out,
                          const std::string& err, const Expect& expect, bool json) {
  const std::string who = "megascale " + joined(args);
  if (code < 0 || code > 2) return who + ": exit code " + std::to_string(code) + "\n" + err.substr(0, 2000);
  if (!expect.parses && code != 2) {
    return who + ": the scenario does not parse, yet exit code " + std::to_string(code) + " (expected 2)\n" +
           out.substr(0, 2000);
  }
  if (code != 0) return "";
  if (json) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(out);
    } catch (const nlohmann::json::exception& e) {
      return who + ": stdout is not JSON (" + e.what() + "):\n" + out.substr(0, 2000);
    }
    std::vector<std::string> failures;
    check_ranges(j, "", expect, &failures);
    if (!failures.empty()) {
      std::string s = who + ": out-of-range report values:";
      for (const std::string& f : failures) s += "\n  " + f;
      return s + "\n" + out.substr(0, 4000);
    }
    return "";
  }
  // Text: a number the report could not compute shows as nan or inf.
  if (prints_non_finite(out)) return who + ": the text report prints nan or inf:\n" + out.substr(0, 4000);
  return "";
}

// Runs one command in this process through run_cli; returns "" or what is wrong.
std::string check_in_process(const std::vector<std::string>& args, const Expect& expect, bool json) {
  std::ostringstream out, err;
  int code = -1;
  try {
    code = megascale::cli::run_cli(args, out, err);
  } catch (const std::exception& e) {
    return "megascale " + joined(args) + ": " + typeid(e).name() + " escaped run_cli: " + e.what();
  } catch (...) {
    return "megascale " + joined(args) + ": an exception of unknown type escaped run_cli";
  }
  return check_outcome(args, code, out.str(), err.str(), expect, json);
}

// The parser's contract: a Scenario, or a ScenarioError naming the file.
// Sets *parses; returns "" or what is wrong.
std::string check_parser(const std::string& path, bool* parses) {
  *parses = false;
  try {
    megascale::model::load_scenario(path);
    *parses = true;
  } catch (const megascale::model::ScenarioError& e) {
    if (std::string(e.what()).find(path) == std::string::npos || e.file() != path) {
      return "ScenarioError does not name the file " + path + ": " + e.what();
    }
  } catch (const std::exception& e) {
    return std::string("load_scenario threw ") + typeid(e).name() + " (not ScenarioError): " + e.what();
  } catch (...) {
    return "load_scenario threw an exception of unknown type";
  }
  return "";
}

// Whether the scenario parses with --set overrides (their errors name the
// override, not always the file; any ScenarioError is bad input).
bool parses_with(const std::string& path, const std::vector<std::string>& overrides) {
  try {
    megascale::model::load_scenario(path, overrides);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Values of the command options the cases draw (small, so each command is
// bounded; a few hostile ones for the option parsers).
const std::vector<std::string> kSearchGpus = {"1", "8", "16", "64", "96", "0", "-3", "2147483648", "1e3"};
const std::vector<std::string> kPlanRuns = {"1", "2", "3"};
const std::vector<std::string> kPlanSweeps = {"checkpoint_interval=5m,15m,60m", "checkpoint_interval=0s",
                                              "checkpoint_interval=1e308h", "checkpoint_interval=-5m",
                                              "gpus=8,16", "gpus=0", "gpus=2147483647", "gpus=96,nan"};

// One analytical case: the mutated text at `path`, the --set overrides every
// command gets, and the commands' options.
struct AnalyticalCase {
  std::string path;
  bool paper = false;  // run validate too, on validate_dir
  std::string validate_dir;
  std::vector<std::string> overrides;  // "--set", "k=v", ...
  std::string search_gpus;
  std::string plan_runs;
  std::string plan_sweep;  // "" = none
};

std::vector<std::vector<std::string>> commands_of(const AnalyticalCase& c) {
  std::vector<std::vector<std::string>> commands = {
      {"simulate", c.path, "--fidelity", "analytical", "--json"},
      {"simulate", c.path, "--fidelity", "analytical"},
      {"compare", c.path, "--fidelity", "analytical", "--json"},
      {"search", c.path, "--gpus", c.search_gpus, "--top", "3", "--json"},
      {"plan", c.path, "--runs", c.plan_runs, "--fidelity", "analytical", "--json"}};
  if (!c.plan_sweep.empty()) commands.back().insert(commands.back().end(), {"--sweep", c.plan_sweep});
  if (c.paper) commands.push_back({"validate", "--dir", c.validate_dir, "--fidelity", "analytical", "--json"});
  for (std::vector<std::string>& args : commands) args.insert(args.end(), c.overrides.begin(), c.overrides.end());
  return commands;
}

// Returns "" or every failure found.
std::string check_analytical_case(const AnalyticalCase& c) {
  std::string failures;
  bool parses = false;
  failures += check_parser(c.path, &parses);
  std::vector<std::string> sets;  // the overrides' values
  for (size_t i = 1; i < c.overrides.size(); i += 2) sets.push_back(c.overrides[i]);
  Expect expect;
  expect.parses = sets.empty() ? parses : parses_with(c.path, sets);
  expect.mfu_max = mfu_ceiling(c.path, sets);
  for (const std::vector<std::string>& args : commands_of(c)) {
    const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
    const std::string f = check_in_process(args, expect, json);
    if (!f.empty()) failures += (failures.empty() ? "" : "\n") + f;
  }
  return failures;
}

// Keeps a failing input: NAME.toml (the scenario) and NAME.txt (how it was made
// and what failed). Returns the .toml path.
fs::path keep_failure(const std::string& name, const std::string& text, const std::string& how) {
  const fs::path dir = failures_dir();
  write_file(dir / (name + ".toml"), text);
  write_file(dir / (name + ".txt"), how);
  return dir / (name + ".toml");
}

TEST(ScenarioFuzz, ParserAndAnalyticalCommands) {
  const std::vector<Seed> seeds = load_seeds();
  ASSERT_GT(seeds.size(), 10u);
  std::vector<std::string> texts;
  for (const Seed& s : seeds) texts.push_back(s.text);
  std::vector<std::string> all_keys;  // every "table.key" the seeds set, once
  for (const Seed& s : seeds) {
    for (const std::string& k : megascale::fuzz::scenario_keys(s.text)) {
      if (std::find(all_keys.begin(), all_keys.end(), k) == all_keys.end()) all_keys.push_back(k);
    }
  }

  TempDir tmp;
  const fs::path validate_dir = tmp.path() / "paper";
  fs::create_directories(validate_dir);
  for (const Seed& s : seeds) {
    if (s.paper) write_file(validate_dir / fs::path(s.relative).filename(), s.text);
  }
  int first = 0, cases = kAnalyticalCases;
  if (const char* env = std::getenv("MEGASCALE_FUZZ_CASES")) cases = std::max(1, std::atoi(env));
  if (const char* env = std::getenv("MEGASCALE_FUZZ_ONLY")) {
    first = std::max(0, std::atoi(env));
    cases = first + 1;
  }

  const auto t0 = std::chrono::steady_clock::now();
  int failed = 0;
  for (int i = first; i < cases; ++i) {
    Mutator rng(megascale::base::splitmix64(kFuzzSeed ^ static_cast<uint64_t>(i)), &texts);
    const Seed& seed = seeds[rng.below(seeds.size())];
    std::vector<std::string> log;
    const std::string text = rng.mutate(seed.text, &log);

    AnalyticalCase c;
    c.paper = seed.paper;
    c.validate_dir = validate_dir.string();
    const fs::path file = seed.paper ? validate_dir / fs::path(seed.relative).filename()
                                     : tmp.path() / fs::path(seed.relative).filename();
    c.path = file.string();
    // A third of the cases override one or two keys (of any shipped scenario:
    // tables this one lacks, e.g. [failures] for plan) on the command line.
    const size_t sets = rng.one_in(3) ? 1 + rng.below(2) : 0;
    for (size_t k = 0; k < sets; ++k) {
      const std::string& v = rng.one_in(2) ? rng.pick(megascale::fuzz::hostile_values())
                                           : rng.pick(megascale::fuzz::plausible_values());
      c.overrides.insert(c.overrides.end(), {"--set", rng.pick(all_keys) + "=" + v});
    }
    c.search_gpus = rng.pick(kSearchGpus);
    c.plan_runs = rng.pick(kPlanRuns);
    if (rng.one_in(4)) c.plan_sweep = rng.pick(kPlanSweeps);

    write_file(file, text);
    const std::string failure = run_in_child([&] { return check_analytical_case(c); }, tmp.path() / "report");
    if (seed.paper) write_file(file, seed.text);  // validate's copy back to the shipped scenario
    if (!failure.empty()) {
      ++failed;
      std::string how = "case " + std::to_string(i) + " of ParserAndAnalyticalCommands, seed scenarios/" +
                        seed.relative + "\nedits:";
      for (const std::string& l : log) how += "\n  " + l;
      how += "\noverrides: " + joined(c.overrides) + "\nfailure:\n" + failure + "\n";
      const fs::path kept = keep_failure("analytical-" + std::to_string(i), text, how);
      ADD_FAILURE() << how << "input kept as " << kept.string();
      if (failed >= 10) break;  // enough to go on with
    }
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << cases - first << " analytical fuzz cases in " << wall_s << " s\n";
}

// ---------------------------------------------------------------------------
// Event level, through the `megascale` binary

std::string check_binary(const std::vector<std::string>& args, const Expect& expect, const fs::path& dir) {
  const Subprocess r = run_binary(kBinary, args, dir);
  const std::string who = "megascale " + joined(args);
  if (r.timed_out) return who + ": hang: no result within " + std::to_string(kCaseTimeoutS) + " s";
  if (r.signal != 0) return who + ": crashed: " + strsignal(r.signal) + "\n" + r.err.substr(0, 4000);
  // A sanitizer's report exits 1 too: it must not pass as "no answer".
  if (sanitizer_report(r.err)) {
    return who + ": sanitizer report:\n" + r.err.substr(0, 8000);
  }
  const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
  return check_outcome(args, r.code, r.out, r.err, expect, json);
}

// Options of the event-level simulation a case adds to `simulate`.
const std::vector<std::vector<std::string>> kEventOptions = {
    {},
    {"--steps", "3"},
    {"--steps", "2", "--jitter", "0.25"},
    {"--stragglers", "0.5", "--straggler-factor", "3"},
    {"--straggler-gpus", "0,1", "--straggler-factor", "1e6"},
    {"--comm", "analytical"},
    {"--comm", "zero"},
    {"--max-replicas", "1"},
    {"--fail-gpu", "0", "--fail-at", "0.001"},
    {"--fail-gpu", "1", "--fail-at", "0"},
};

TEST(ScenarioFuzz, EventFidelity) {
  const std::vector<Seed> all = load_seeds();
  std::vector<std::string> texts;
  for (const Seed& s : all) texts.push_back(s.text);
  // Seeds small enough for the event level.
  std::vector<Seed> small;
  for (const Seed& s : all) {
    try {
      if (megascale::model::parse_scenario(s.text, s.relative).cluster.gpus <= kEventMaxGpus) small.push_back(s);
    } catch (const std::exception&) {
    }
  }
  ASSERT_FALSE(small.empty());

  TempDir tmp;
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0, failed = 0;
  for (int draw = 0; done < kEventCases && draw < kEventCases * kEventDrawsPerCase; ++draw) {
    Mutator rng(megascale::base::splitmix64(~kFuzzSeed ^ static_cast<uint64_t>(draw)), &texts);
    const Seed& seed = small[rng.below(small.size())];
    std::vector<std::string> log;
    const std::string text = rng.mutate(seed.text, &log);
    // Only mutations that keep the job small and valid: the event level's
    // inputs are what the parser accepts.
    try {
      if (megascale::model::parse_scenario(text, seed.relative).cluster.gpus > kEventMaxGpus) continue;
    } catch (const std::exception&) {
      continue;
    }
    ++done;
    const fs::path file = tmp.path() / fs::path(seed.relative).filename();
    write_file(file, text);
    std::vector<std::string> simulate = {"simulate", file.string(), "--fidelity", "event", "--json"};
    const std::vector<std::string>& extra = rng.pick(kEventOptions);
    simulate.insert(simulate.end(), extra.begin(), extra.end());
    const std::vector<std::vector<std::string>> commands = {
        simulate,
        {"compare", file.string(), "--fidelity", "event", "--json"},
        {"plan", file.string(), "--runs", "2", "--json"}};
    std::string failure;
    const Expect expect{true, mfu_ceiling(file.string(), {})};
    for (const std::vector<std::string>& args : commands) {
      const std::string f = check_binary(args, expect, tmp.path());
      if (!f.empty()) failure += (failure.empty() ? "" : "\n") + f;
    }
    if (!failure.empty()) {
      ++failed;
      std::string how = "draw " + std::to_string(draw) + " of EventFidelity, seed scenarios/" + seed.relative +
                        "\nedits:";
      for (const std::string& l : log) how += "\n  " + l;
      how += "\nfailure:\n" + failure + "\n";
      const fs::path kept = keep_failure("event-" + std::to_string(draw), text, how);
      ADD_FAILURE() << how << "input kept as " << kept.string();
      if (failed >= 5) break;  // enough to go on with
    }
  }
  EXPECT_EQ(done, kEventCases) << "too few mutations of the small seeds parse";
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << done << " event-level fuzz cases in " << wall_s << " s\n";
}

// ---------------------------------------------------------------------------
// Inputs that once failed (tests/fuzz/corpus/*.toml), through the analytical
// checks and, when they parse into a small job, the event level.

TEST(ScenarioFuzz, RegressionCorpus) {
  const fs::path corpus = kSourceDir / "tests" / "fuzz" / "corpus";
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(corpus)) {
    if (e.path().extension() == ".toml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << corpus;
  TempDir tmp;
  for (const fs::path& f : files) {
    AnalyticalCase c;
    c.path = f.string();
    c.search_gpus = "64";
    c.plan_runs = "2";
    EXPECT_EQ(run_in_child([&] { return check_analytical_case(c); }, tmp.path() / "report"), "") << f;
    bool small = false;
    try {
      small = megascale::model::load_scenario(f.string()).cluster.gpus <= kEventMaxGpus;
    } catch (const std::exception&) {
    }
    if (small) {
      const Expect expect{true, mfu_ceiling(f.string(), {})};
      EXPECT_EQ(check_binary({"simulate", f.string(), "--fidelity", "event", "--json"}, expect, tmp.path()), "") << f;
    }
  }
}

}  // namespace
