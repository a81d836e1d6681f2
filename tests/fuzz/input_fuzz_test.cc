// tests/fuzz/input_fuzz_test.cc: mutated inputs other than scenarios, through
// their readers and the commands that take them (issue 13: "the parser and
// every command"; scenario_fuzz_test.cc covers the scenario commands).
//
// Each test starts from real files (the shipped hardware profiles, the
// nccl-tests fixtures, the GEMM sweep fixture, the published-runs CSV, a golden
// file, a trace and a checkpoint shard written at the start) and edits them
// with tests/fuzz/mutator.h plus field edits (a CSV field or a whitespace-
// separated token set to a hostile value) or, for the binary checkpoint shard,
// byte edits. Every draw comes from base::SplitMix64 with a fixed seed, so a
// failure reproduces by its test and case index. A case passes when:
//   - the reader returns, or throws its own error type (ScenarioError,
//     ImportError, GoldenError, TraceParseError, CheckpointError) naming the
//     file; nothing else escapes;
//   - the commands (run in a forked child under a time limit, in-process
//     through run_cli, or as the `megascale` binary for `train`) exit 0, 1 or
//     2, print no nan or inf, and every number of a JSON report is finite;
//   - a corrupted checkpoint shard is refused (CheckpointError) or, when the
//     edit changed nothing that is read, loads as the state that was written.
// `net` gets random option values the same way, `train` mutated CPU scenarios
// (small ones, 2 steps, a time limit: a hang fails the case).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/splitmix64.h"
#include "calibrate/fit.h"
#include "calibrate/gemm_sweep.h"
#include "calibrate/golden.h"
#include "calibrate/nccl_tests.h"
#include "cli/commands.h"
#include "engine/checkpoint.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "model/trace_schema.h"
#include "fuzz_harness.h"
#include "mutator.h"

namespace {

using megascale::fuzz::Mutator;
using namespace megascale::fuzz;  // the harness (fuzz_harness.h)

const fs::path kSourceDir = MEGASCALE_SOURCE_DIR;
const std::string kBinary = MEGASCALE_BINARY;

// The seed of every draw here ("msinputs"); scenario_fuzz_test.cc has its own.
constexpr uint64_t kInputFuzzSeed = 0x6d73696e70757473ull;
// Cases per reader: each is one child process running a reader and at most
// two in-process commands, ~10 ms in Release (200: ~2 s; ~4x under the
// sanitizers).
const int kReaderCases = scaled_cases(200);
// `net` cases: one in-process command each (incast simulates a few hundred
// microseconds of a switch port: ~10 ms; 200 cases ~3 s in Release).
const int kNetCases = scaled_cases(200);
// `train` cases: the `megascale` binary launching mpirun and 1-4 ranks for
// two steps of a tiny model (~3 s each in Release on the 2-core machine).
const int kTrainCases = std::max(2, scaled_cases(6));  // case 0 is refused by the parser, case 1 trains
// Largest mutated CPU job a train case runs (processes, and model sizes that
// keep two steps near a second).
constexpr int kTrainMaxRanks = 4;
constexpr int kTrainMaxHidden = 512;
constexpr int kTrainMaxLayers = 8;
constexpr int kTrainMaxSeq = 512;
constexpr int kTrainMaxVocab = 4096;
constexpr int kTrainMaxGlobalBatch = 64;
// A train case's time limit: ~3 s in Release, ~30 s under the sanitizers.
constexpr unsigned kTrainTimeoutS = 90;

// Tokens a field edit puts in place of a CSV field or a whitespace-separated
// token: TOML-agnostic numbers and non-numbers.
const std::vector<std::string>& hostile_tokens() {
  static const std::vector<std::string> t = {
      "0", "-1", "1e308", "1e400", "-1e400", "nan", "inf", "-inf", "", "x", "0x10", "9223372036854775808",
      "-9223372036854775809", "2147483648", "1.5", "1e-320", "\"", ",", "#", "\xff\xfe"};
  return t;
}

// One field edit: a line that is not a comment, one of its tokens (split at
// `sep`; ' ' splits on runs of blanks) replaced.
std::string edit_field(Mutator& rng, const std::string& text, char sep, std::vector<std::string>* log) {
  std::vector<size_t> starts;  // line starts of candidate lines
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const size_t first = text.find_first_not_of(" \t", at);
    if (first < end && text[first] != '#') starts.push_back(at);
    at = end + 1;
  }
  if (starts.empty()) return text;
  const size_t line_at = rng.pick(starts);
  const size_t line_end = std::min(text.find('\n', line_at), text.size());
  const std::string line = text.substr(line_at, line_end - line_at);
  // Token boundaries.
  std::vector<std::pair<size_t, size_t>> tokens;
  size_t i = 0;
  while (i <= line.size()) {
    if (sep == ' ') {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i >= line.size()) break;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      tokens.emplace_back(i, j);
      i = j;
    } else {
      size_t j = line.find(sep, i);
      if (j == std::string::npos) j = line.size();
      tokens.emplace_back(i, j);
      i = j + 1;
    }
  }
  if (tokens.empty()) return text;
  const auto [b, e] = rng.pick(tokens);
  const std::string& v = rng.pick(hostile_tokens());
  log->push_back("line at byte " + std::to_string(line_at) + " token '" + line.substr(b, e - b).substr(0, 30) +
                 "' -> '" + v + "'");
  return text.substr(0, line_at) + line.substr(0, b) + v + line.substr(e) + text.substr(line_end);
}

// Structural edits (mutator.h) or field edits, one to three in all.
std::string mutate_text(Mutator& rng, const std::string& text, char sep, std::vector<std::string>* log) {
  if (rng.one_in(2)) return rng.mutate(text, log);
  std::string out = text;
  const size_t edits = 1 + rng.below(3);
  for (size_t k = 0; k < edits; ++k) out = edit_field(rng, out, sep, log);
  return out;
}

// Every number of a JSON document finite; "" or where one is not.
std::string non_finite_in(const nlohmann::json& j, const std::string& where) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) return where;
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string f = non_finite_in(j[i], where + "[" + std::to_string(i) + "]");
      if (!f.empty()) return f;
    }
  }
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string f = non_finite_in(it.value(), where + "." + it.key());
      if (!f.empty()) return f;
    }
  }
  return "";
}

// Where check_command notes its exit code (NetOptions counts them).
fs::path g_exit_code_file;

// One in-process command: exit 0-2, no escaped exception, JSON that parses
// with finite numbers, text without nan / inf. "" or what is wrong.
std::string check_command(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = -1;
  const std::string who = "megascale " + joined(args);
  try {
    code = megascale::cli::run_cli(args, out, err);
  } catch (const std::exception& e) {
    return who + ": " + typeid(e).name() + " escaped run_cli: " + e.what();
  } catch (...) {
    return who + ": an exception of unknown type escaped run_cli";
  }
  if (code < 0 || code > 2) return who + ": exit code " + std::to_string(code) + "\n" + err.str().substr(0, 2000);
  if (!g_exit_code_file.empty()) write_file(g_exit_code_file, std::to_string(code));
  if (code != 0) return "";
  if (std::find(args.begin(), args.end(), "--json") != args.end()) {
    try {
      const nlohmann::json j = nlohmann::json::parse(out.str());
      const std::string f = non_finite_in(j, "");
      if (!f.empty()) return who + ": a non-finite number at " + f;
    } catch (const nlohmann::json::exception& e) {
      return who + ": stdout is not JSON (" + e.what() + ")";
    }
    return "";
  }
  if (prints_non_finite(out.str())) return who + ": the text report prints nan or inf:\n" + out.str().substr(0, 3000);
  return "";
}

// Where a case's child notes that its reader accepted the input (fuzz_files
// counts them: a fuzzer whose inputs are all refused tests only the errors).
fs::path g_accepted_marker;

// A reader's contract: returns, or throws `Error` whose message names `path`.
template <class Error, class Read>
std::string check_reader(const std::string& what, const std::string& path, Read read) {
  try {
    read();
    if (!g_accepted_marker.empty()) write_file(g_accepted_marker, "");
  } catch (const Error& e) {
    if (std::string(e.what()).find(fs::path(path).filename().string()) == std::string::npos) {
      return what + ": the error does not name the file " + path + ": " + e.what();
    }
  } catch (const std::exception& e) {
    return what + " threw " + typeid(e).name() + " instead of its own error type: " + e.what();
  } catch (...) {
    return what + " threw an exception of unknown type";
  }
  return "";
}

// FNV-1a of a test's name: each test draws its own sequence, the same on
// every platform (std::hash is not).
uint64_t name_hash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Runs `cases` mutated copies of `seeds` (text) through `checks(path)` in
// children; reports every failure (at most 10) with the edits that made it.
void fuzz_files(const std::string& test, const std::vector<std::string>& seeds, const std::string& file_name,
                char sep, int cases, const std::function<std::string(const std::string&)>& checks) {
  ASSERT_FALSE(seeds.empty()) << test;
  TempDir tmp;
  const fs::path file = tmp.path() / file_name;
  g_accepted_marker = tmp.path() / "accepted";
  int failed = 0, accepted = 0;
  for (int i = 0; i < cases; ++i) {
    std::error_code ec;
    fs::remove(g_accepted_marker, ec);
    Mutator rng(megascale::base::splitmix64(kInputFuzzSeed ^ name_hash(test) ^ static_cast<uint64_t>(i)), &seeds);
    const size_t seed = rng.below(seeds.size());
    std::vector<std::string> log;
    const std::string text = mutate_text(rng, seeds[seed], sep, &log);
    write_file(file, text);
    const std::string failure = run_in_child([&] { return checks(file.string()); }, tmp.path() / "report");
    if (fs::exists(g_accepted_marker)) ++accepted;
    if (!failure.empty()) {
      ++failed;
      std::string how = "case " + std::to_string(i) + " of " + test + ", seed " + std::to_string(seed) + "\nedits:";
      for (const std::string& l : log) how += "\n  " + l;
      const fs::path kept = failures_dir() / (test + "-" + std::to_string(i) + "-" + file_name);
      write_file(kept, text);
      ADD_FAILURE() << how << "\nfailure:\n" << failure << "\ninput kept as " << kept.string();
      if (failed >= 10) break;
    }
  }
  g_accepted_marker.clear();
  std::cout << test << ": " << cases << " cases, " << accepted << " accepted by the reader\n";
  // Both sides of the reader's contract are exercised.
  EXPECT_GT(accepted, 0) << test << ": every mutated input was refused";
  EXPECT_LT(accepted, cases) << test << ": no mutated input was refused";
}

std::vector<std::string> texts_of(const std::vector<fs::path>& files) {
  std::vector<std::string> out;
  for (const fs::path& f : files) out.push_back(read_file(f));
  return out;
}

std::vector<fs::path> files_in(const fs::path& dir, const std::string& extension) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == extension) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(InputFuzz, HardwareProfiles) {
  const std::vector<std::string> seeds = texts_of(files_in(kSourceDir / "calibrate" / "profiles", ".toml"));
  const std::string example = (kSourceDir / "scenarios" / "example-small.toml").string();
  fuzz_files("profiles", seeds, "fuzzed-profile.toml", ' ', kReaderCases, [&](const std::string& path) {
    bool parses = false;
    std::string f = check_reader<megascale::model::ScenarioError>("load_profile", path, [&] {
      megascale::model::load_profile(path);
      parses = true;
    });
    if (!f.empty() || !parses) return f;
    // A profile that parses drives a simulation (of a GPU profile; a cpu
    // profile is refused by the scenario with exit 2).
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"simulate", example, "--fidelity", "analytical", "--json", "--set",
                                   "hardware.profile=" + path},
          std::vector<std::string>{"simulate", example, "--fidelity", "analytical", "--set",
                                   "hardware.profile=" + path}}) {
      f = check_command(args);
      if (!f.empty()) return f;
    }
    return std::string();
  });
}

TEST(InputFuzz, NcclTestsOutput) {
  const std::vector<std::string> seeds =
      texts_of(files_in(kSourceDir / "tests" / "calibrate" / "fixtures" / "nccl-tests", ".txt"));
  fuzz_files("nccl-tests", seeds, "all_reduce_perf.txt", ' ', kReaderCases, [&](const std::string& path) {
    std::string f = check_reader<megascale::calibrate::ImportError>(
        "parse_nccl_tests_runs", path,
        [&] { megascale::calibrate::parse_nccl_tests_runs(read_file(path), path); });
    if (!f.empty()) return f;
    const std::string out = (fs::path(path).parent_path() / "imported.toml").string();
    f = check_command({"calibrate", "import", "--out", out, "--profile", "H100-SXM5-80GB", "--nccl-tests", path});
    if (!f.empty()) return f;
    return check_command({"calibrate", "net-check", path, "--gpu", "H100-SXM5-80GB", "--json"});
  });
}

TEST(InputFuzz, GemmSweepCsv) {
  const std::vector<std::string> seeds = {read_file(kSourceDir / "tests" / "calibrate" / "fixtures" / "gemm_sweep.csv")};
  fuzz_files("gemm-sweep", seeds, "gemm.csv", ',', kReaderCases, [&](const std::string& path) {
    std::string f = check_reader<megascale::calibrate::ImportError>(
        "read_gemm_sweep_file", path, [&] { megascale::calibrate::read_gemm_sweep_file(path); });
    if (!f.empty()) return f;
    const std::string out = (fs::path(path).parent_path() / "imported.toml").string();
    // The H100's profile: the fixture is an H100's sweep (above an A100's peak).
    return check_command({"calibrate", "import", "--profile", "H100-SXM5-80GB", "--out", out, "--gemm-csv", path});
  });
}

TEST(InputFuzz, PublishedRunsCsv) {
  // The runs file names scenarios relative to its folder (../../scenarios/...):
  // the mutated copy is read from TMP/calibrate/runs/ with TMP/scenarios a link
  // to the shipped scenarios, so that its lines still point at real files and
  // nothing is written into the source tree.
  const fs::path runs_dir = kSourceDir / "calibrate" / "runs";
  const std::vector<std::string> seeds = texts_of(files_in(runs_dir, ".csv"));
  TempDir tree;
  fs::create_directories(tree.path() / "calibrate" / "runs");
  fs::create_directory_symlink(kSourceDir / "scenarios", tree.path() / "scenarios");
  const fs::path in_tree = tree.path() / "calibrate" / "runs" / "runs.csv";
  fuzz_files("runs-csv", seeds, "runs.csv", ',', kReaderCases, [&](const std::string& path) {
    fs::copy_file(path, in_tree, fs::copy_options::overwrite_existing);
    return check_reader<megascale::calibrate::ImportError>(
        "read_measured_runs", in_tree.string(), [&] { megascale::calibrate::read_measured_runs(in_tree.string()); });
  });
}

TEST(InputFuzz, GoldenFile) {
  TempDir seed_dir;
  const std::string example = (kSourceDir / "scenarios" / "example-small.toml").string();
  const fs::path golden = seed_dir.path() / "golden.json";
  {
    std::ostringstream out, err;
    ASSERT_EQ(megascale::cli::run_cli({"check", example, "--golden", golden.string(), "--update", "--fidelity",
                                       "analytical"},
                                      out, err),
              0)
        << err.str();
  }
  const std::vector<std::string> seeds = {read_file(golden)};
  fuzz_files("golden", seeds, "golden.json", ' ', kReaderCases, [&](const std::string& path) {
    std::string f = check_reader<megascale::calibrate::GoldenError>(
        "read_golden", path, [&] { megascale::calibrate::read_golden(path); });
    if (!f.empty()) return f;
    f = check_command({"check", example, "--golden", path, "--fidelity", "analytical"});
    if (!f.empty()) return f;
    return check_command({"check", example, "--golden", path, "--fidelity", "analytical", "--json"});
  });
}

TEST(InputFuzz, TraceCsv) {
  TempDir seed_dir;
  const std::string example = (kSourceDir / "scenarios" / "example-small.toml").string();
  const fs::path prefix = seed_dir.path() / "trace";
  const Subprocess r = run_binary(kBinary, {"simulate", example, "--trace", prefix.string()}, seed_dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> seeds = {read_file(prefix.string() + ".csv")};
  ASSERT_FALSE(seeds[0].empty());
  fuzz_files("trace-csv", seeds, "trace.csv", ',', kReaderCases, [&](const std::string& path) {
    return check_reader<megascale::model::TraceParseError>("read_trace_csv", path,
                                                           [&] { megascale::model::read_trace_csv(path); });
  });
}

TEST(InputFuzz, CheckpointShards) {
  namespace engine = megascale::engine;
  TempDir tmp;
  engine::CheckpointLayout layout;
  layout.world_size = 2;
  layout.tp = 2;
  layout.model = "layers=2 hidden=8 heads=2 kv_heads=2 seq=4 vocab=16 ffn=32 mlp=gelu block=sequential window=0";
  engine::ShardState state;
  state.step = 7;
  state.arrays = {{"param", std::vector<float>(64, 0.25f)}, {"exp_avg", std::vector<float>(64, -1.5f)}};
  state.values = {{"rng", 12345}, {"data_cursor", 96}};
  const fs::path clean = tmp.path() / "shard.msck";
  engine::write_shard_file(clean.string(), 1, layout, state);
  const std::string bytes = read_file(clean);
  ASSERT_GT(bytes.size(), 64u);

  const fs::path file = tmp.path() / "fuzzed.msck";
  int refused = 0;
  for (int i = 0; i < kReaderCases; ++i) {
    Mutator rng(megascale::base::splitmix64(kInputFuzzSeed ^ 0xc4ec4b0177ull ^ static_cast<uint64_t>(i)), nullptr);
    std::string b = bytes;
    std::string how;
    const size_t edits = 1 + rng.below(3);
    for (size_t k = 0; k < edits && !b.empty(); ++k) {
      const size_t at = rng.below(b.size());
      switch (rng.below(5)) {
        case 0:  // a bit flipped
          b[at] = static_cast<char>(b[at] ^ (1 << rng.below(8)));
          how += " flip@" + std::to_string(at);
          break;
        case 1:  // truncated
          b.resize(at);
          how += " truncate@" + std::to_string(at);
          break;
        case 2:  // bytes inserted
          b.insert(at, std::string(1 + rng.below(8), static_cast<char>(rng.below(256))));
          how += " insert@" + std::to_string(at);
          break;
        case 3:  // a header field (the first 64 bytes) set to a large value
          if (b.size() >= 64) {
            const size_t field = 4 * rng.below(16);
            for (size_t j = 0; j < 4; ++j) b[field + j] = static_cast<char>(rng.one_in(2) ? 0xff : rng.below(256));
            how += " header-field@" + std::to_string(field);
          }
          break;
        default:  // a byte overwritten
          b[at] = static_cast<char>(rng.below(256));
          how += " byte@" + std::to_string(at);
          break;
      }
    }
    write_file(file, b);
    const std::string failure = run_in_child(
        [&]() -> std::string {
          try {
            const engine::ShardState got = engine::read_shard_file(file.string(), 1, layout);
            // Accepted: only if the bytes read are the ones written.
            if (got.step != state.step || got.arrays.size() != state.arrays.size() || got.values != state.values) {
              return "a corrupted shard loaded as a different state";
            }
            for (size_t a = 0; a < got.arrays.size(); ++a) {
              if (got.arrays[a].name != state.arrays[a].name || got.arrays[a].data != state.arrays[a].data) {
                return "a corrupted shard loaded with different array " + state.arrays[a].name;
              }
            }
          } catch (const engine::CheckpointError& e) {
            if (e.file() != file.string()) return std::string("CheckpointError does not name the file: ") + e.what();
          } catch (const std::exception& e) {
            return std::string("read_shard_file threw ") + typeid(e).name() + ", not CheckpointError: " + e.what();
          }
          return std::string();
        },
        tmp.path() / "report");
    if (b != bytes) ++refused;
    EXPECT_EQ(failure, "") << "case " << i << " edits:" << how;
  }
  EXPECT_GT(refused, kReaderCases / 2) << "most cases must change the shard";
}

// Option values `net` cases draw from: plausible ones and hostile ones.
// Each option is hostile one time in six, so that most cases get past the
// option checks and reach the models.
const std::vector<std::string> kNetNumbers = {"1", "2", "8", "16", "64", "1024"};
const std::vector<std::string> kNetHostileNumbers = {"0", "-1", "nan", "1e308", "2147483648", "3.5", "x", ""};
const std::vector<std::string> kNetBytes = {"1", "8", "1K", "1MiB", "256MB", "4GiB"};
const std::vector<std::string> kNetHostileBytes = {"0", "-1", "1e30", "1Q", "nan", "18446744073709551616"};

std::string net_number(Mutator& rng) { return rng.one_in(6) ? rng.pick(kNetHostileNumbers) : rng.pick(kNetNumbers); }
std::string net_bytes(Mutator& rng) { return rng.one_in(6) ? rng.pick(kNetHostileBytes) : rng.pick(kNetBytes); }

std::vector<std::string> net_case(Mutator& rng) {
  switch (rng.below(3)) {
    case 0: {
      std::vector<std::string> a = {"net", "collective", "--op",
                                    rng.pick(std::vector<std::string>{"allreduce", "allgather", "reducescatter",
                                                                      "sendrecv", "allreduce", "alltoall"}),
                                    "--gpus", net_number(rng), "--bytes", net_bytes(rng)};
      if (rng.one_in(2)) a.insert(a.end(), {"--algo", rng.pick(std::vector<std::string>{"auto", "ring", "tree", "nvls",
                                                                                         "nvls-tree", "hierarchical", "x"})});
      if (rng.one_in(2)) a.insert(a.end(), {"--proto", rng.pick(std::vector<std::string>{"auto", "LL", "LL128", "Simple", "y"})});
      if (rng.one_in(3)) a.insert(a.end(), {"--groups", net_number(rng)});
      if (rng.one_in(3)) a.insert(a.end(), {"--ranks-per-server", net_number(rng)});
      if (rng.one_in(3)) a.insert(a.end(), {"--placement", rng.one_in(2) ? "scattered" : "packed", "--seed", net_number(rng)});
      if (rng.one_in(3)) a.insert(a.end(), {"--qps", net_number(rng)});
      if (rng.one_in(3)) a.insert(a.end(), {"--gpu", rng.one_in(2) ? "H100-SXM5-80GB" : "A100-SXM4-80GB"});
      if (rng.one_in(2)) a.push_back("--json");
      return a;
    }
    case 1: {
      std::vector<std::string> a = {"net", "ecmp", "--paths", net_number(rng), "--flows", net_number(rng),
                                    "--qps", net_number(rng), "--trials", net_number(rng)};
      if (rng.one_in(2)) a.insert(a.end(), {"--hash", rng.one_in(2) ? "crc32" : "murmur3"});
      if (rng.one_in(2)) a.push_back("--json");
      return a;
    }
    default: {
      std::vector<std::string> a = {"net", "incast", "--senders", net_number(rng), "--cc",
                                    rng.pick(std::vector<std::string>{"dcqcn", "swift", "hybrid", "none", "z"})};
      if (rng.one_in(2)) a.insert(a.end(), {"--duration-us", net_number(rng)});
      if (rng.one_in(2)) a.insert(a.end(), {"--capacity-gbps", net_number(rng)});
      if (rng.one_in(3)) a.push_back("--no-pfc");
      if (rng.one_in(2)) a.push_back("--json");
      return a;
    }
  }
}

TEST(InputFuzz, NetOptions) {
  TempDir tmp;
  int failed = 0;
  std::map<std::string, int> outcomes;  // exit code -> cases
  g_exit_code_file = tmp.path() / "exit-code";
  for (int i = 0; i < kNetCases && failed < 10; ++i) {
    Mutator rng(megascale::base::splitmix64(kInputFuzzSeed ^ 0x6e6574ull ^ static_cast<uint64_t>(i)), nullptr);
    const std::vector<std::string> args = net_case(rng);
    write_file(g_exit_code_file, "none");
    const std::string failure = run_in_child([&] { return check_command(args); }, tmp.path() / "report");
    ++outcomes[read_file(g_exit_code_file)];
    if (!failure.empty()) ++failed;
    EXPECT_EQ(failure, "") << "case " << i << ": megascale " << joined(args);
  }
  g_exit_code_file.clear();
  std::string summary;
  for (const auto& [code, n] : outcomes) summary += " exit " + code + ": " + std::to_string(n);
  std::cout << kNetCases << " net cases:" << summary << "\n";
  EXPECT_GT(outcomes["0"], kNetCases / 10) << "too few net cases get past the option checks:" << summary;
}

// Under the sanitizers (scripts/sanitize.sh), the ranks are Open MPI programs:
// LeakSanitizer gets the suppressions of Open MPI's own allocations that the
// mpi tests use (scripts/sanitizer-suppressions.txt, which says why), with the
// whole-stack unwinding they need. No effect in other builds.
std::vector<std::string> sanitizer_env_for_mpi() {
  std::string asan = std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "";
  asan += std::string(asan.empty() ? "" : ":") + "fast_unwind_on_malloc=0";
  return {"ASAN_OPTIONS=" + asan,
          "LSAN_OPTIONS=suppressions=" + (kSourceDir / "scripts" / "sanitizer-suppressions.txt").string() +
              ":print_suppressions=0"};
}

// Whether a mutated CPU scenario is small enough for a train case.
bool small_cpu_job(const std::string& text, const std::string& name) {
  try {
    const megascale::model::Scenario s = megascale::model::parse_scenario(text, name);
    return s.cluster.gpus <= kTrainMaxRanks && s.model.hidden <= kTrainMaxHidden && s.model.layers <= kTrainMaxLayers &&
           s.model.seq_len <= kTrainMaxSeq && s.model.vocab <= kTrainMaxVocab &&
           s.parallel.global_batch <= kTrainMaxGlobalBatch;
  } catch (const megascale::model::ScenarioError&) {
    return true;  // bad input: refused before any rank starts
  }
}

TEST(InputFuzz, TrainScenarios) {
  const std::vector<fs::path> files = files_in(kSourceDir / "scenarios" / "cpu", ".toml");
  const std::vector<std::string> seeds = texts_of(files);
  TempDir tmp;
  int done = 0, failed = 0;
  std::map<int, int> outcomes;  // exit code -> cases
  for (int draw = 0; done < kTrainCases && draw < kTrainCases * 50; ++draw) {
    Mutator rng(megascale::base::splitmix64(kInputFuzzSeed ^ 0x747261696eull ^ static_cast<uint64_t>(draw)), &seeds);
    const size_t seed = rng.below(seeds.size());
    std::vector<std::string> log;
    const std::string text = rng.mutate(seeds[seed], &log);
    const fs::path file = tmp.path() / files[seed].filename();
    if (!small_cpu_job(text, file.string())) continue;
    bool parses = true;
    try {
      megascale::model::parse_scenario(text, file.string());
    } catch (const std::exception&) {
      parses = false;
    }
    // Two cases in three parse (most mutations do not, and a case refused by
    // the parser never starts a rank).
    if (parses != (done % 3 != 0)) continue;
    ++done;
    write_file(file, text);
    // The checkpoints and the corpus go to this case's directory.
    const std::vector<std::string> args = {
        "train", file.string(), "--set", "train.steps=2", "--set",
        "train.checkpoint_dir=\"" + (tmp.path() / ("ckpt-" + std::to_string(draw))).string() + "\"", "--set",
        "train.work_dir=\"" + (tmp.path() / "work").string() + "\""};
    const Subprocess r = run_binary(kBinary, args, tmp.path(), kTrainTimeoutS, sanitizer_env_for_mpi());
    std::string failure;
    if (r.timed_out) failure = "hang: no result within " + std::to_string(kTrainTimeoutS) + " s";
    else if (r.signal != 0) failure = std::string("crashed: ") + strsignal(r.signal);
    else if (sanitizer_report(r.err)) failure = "sanitizer report";
    else if (r.code < 0 || r.code > 2) failure = "exit code " + std::to_string(r.code);
    else if (!parses && r.code != 2) failure = "the scenario does not parse, yet exit code " + std::to_string(r.code);
    ++outcomes[r.code];
    if (!failure.empty()) {
      ++failed;
      std::string how = "draw " + std::to_string(draw) + " of TrainScenarios, seed " + files[seed].filename().string() +
                        "\nedits:";
      for (const std::string& l : log) how += "\n  " + l;
      const fs::path kept = failures_dir() / ("train-" + std::to_string(draw) + ".toml");
      write_file(kept, text);
      ADD_FAILURE() << how << "\nfailure: " << failure << "\nstderr:\n"
                    << r.err.substr(0, 4000) << "\ninput kept as " << kept.string();
      if (failed >= 3) break;
    }
  }
  EXPECT_EQ(done, kTrainCases) << "too few mutations of the CPU scenarios are small jobs";
  std::string summary;
  for (const auto& [code, n] : outcomes) summary += " exit " + std::to_string(code) + ": " + std::to_string(n);
  std::cout << done << " train cases:" << summary << "\n";
  // A fuzzer whose inputs are all refused tests only the parser.
  EXPECT_GT(outcomes[0] + outcomes[1], 0) << "no mutated training ran:" << summary;
}

}  // namespace
