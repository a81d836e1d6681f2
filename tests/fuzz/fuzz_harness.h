// tests/fuzz/fuzz_harness.h: what the fuzz tests share: files, a private
// temporary directory, a case run in a forked child under a time limit, a
// binary run as a subprocess under a time limit, and the "nan"/"inf" check of
// text reports.
//
// defines: read_file, write_file, joined, TempDir, failures_dir, run_in_child,
//          Subprocess, run_binary, sanitizer_report, prints_non_finite,
//          kCaseTimeoutS, scaled_cases
//
// Thread-safety: one test thread (fork()).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace megascale::fuzz {

namespace fs = std::filesystem;

// A case whose commands take longer than this in all is a hang. Generous: a
// case takes milliseconds (analytical) to a second (event, a 2-step training)
// in Release, and several times that under the sanitizers on a loaded machine.
constexpr unsigned kCaseTimeoutS = 120;
// Exit status of a child whose checks failed (its report file says why); 0 is
// a pass, anything else a crash or a sanitizer's report.
constexpr int kChecksFailedExit = 77;

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

// A fresh directory under the system's temporary directory, removed with it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "megascale-fuzz-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A test's case count scaled by MEGASCALE_FUZZ_SCALE (a fraction in (0, 1],
// default 1): the sanitizer stage of CI (scripts/sanitize.sh) runs a quarter
// of the cases, which are the first ones of the same sequences, so every kind
// of input is still exercised there at a quarter of the time. Never below 1.
inline int scaled_cases(int cases) {
  const char* env = std::getenv("MEGASCALE_FUZZ_SCALE");
  if (env == nullptr) return cases;
  char* end = nullptr;
  const double scale = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(scale > 0) || scale > 1) {
    std::fprintf(stderr, "MEGASCALE_FUZZ_SCALE must be a fraction in (0, 1], got '%s'\n", env);
    std::abort();
  }
  return std::max(1, static_cast<int>(cases * scale));
}

// Where failing inputs are kept for reproduction (the test's working directory).
inline fs::path failures_dir() {
  const fs::path dir = fs::current_path() / "fuzz-failures";
  fs::create_directories(dir);
  return dir;
}

// Runs `checks` in a forked child under kCaseTimeoutS; returns "" when it
// passed, else why not (its checks' report, a hang, a crash).
inline std::string run_in_child(const std::function<std::string()>& checks, const fs::path& report) {
  std::error_code ec;
  fs::remove(report, ec);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) return std::string("fork failed: ") + std::strerror(errno);
  if (pid == 0) {
    alarm(kCaseTimeoutS);
    std::string failure;
    try {
      failure = checks();
    } catch (const std::exception& e) {
      failure = std::string("exception escaped the checks: ") + e.what();
    } catch (...) {
      failure = "an exception of unknown type escaped the checks";
    }
    if (!failure.empty()) write_file(report, failure);
    _exit(failure.empty() ? 0 : kChecksFailedExit);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFEXITED(status) && WEXITSTATUS(status) == kChecksFailedExit) return read_file(report);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    return "hang: no result within " + std::to_string(kCaseTimeoutS) + " s";
  }
  if (WIFSIGNALED(status)) return std::string("crashed: ") + strsignal(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status)) +
         " (a crash or a sanitizer's report: see the test's output above)";
}

struct Subprocess {
  int code = -1;           // exit code, -1 when a signal ended it
  int signal = 0;
  bool timed_out = false;  // stopped by run_binary after its time limit
  std::string out, err;
};

// Runs `binary` with `args`, stdout and stderr into files in `dir`, with
// `env` ("NAME=VALUE") added to its environment. After `timeout_s` it is sent
// SIGTERM (which `megascale train` forwards to its mpirun, so no rank outlives
// the case), then SIGKILL 10 s later.
inline Subprocess run_binary(const std::string& binary, const std::vector<std::string>& args, const fs::path& dir,
                             unsigned timeout_s = kCaseTimeoutS, const std::vector<std::string>& env = {}) {
  Subprocess r;
  const fs::path out = dir / "stdout", err = dir / "stderr";
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) {
    r.err = std::string("fork failed: ") + std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(126);
    std::vector<char*> argv;
    std::vector<std::string> all = {binary};
    all.insert(all.end(), args.begin(), args.end());
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (const std::string& kv : env) {
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  bool termed = false, killed = false;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!termed && waited_s > timeout_s) {
      kill(pid, SIGTERM);
      termed = true;
      r.timed_out = true;
    } else if (termed && !killed && waited_s > timeout_s + 10.0) {
      kill(pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

// Whether a subprocess's stderr holds a sanitizer's report (which exits 1,
// and must not pass as "no answer").
inline bool sanitizer_report(const std::string& err) {
  return err.find("Sanitizer") != std::string::npos || err.find("runtime error:") != std::string::npos;
}

// Whether `text` has a word "nan" or "inf" (any case), as printf writes a
// number it could not compute.
inline bool prints_non_finite(const std::string& text) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = 0; at + 3 <= text.size(); ++at) {
    std::string word = text.substr(at, 3);
    for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (word != "nan" && word != "inf") continue;
    if ((at == 0 || !word_char(text[at - 1])) && (at + 3 == text.size() || !word_char(text[at + 3]))) return true;
  }
  return false;
}

}  // namespace megascale::fuzz
