// tests/cli/run_megascale.h: runs the real `megascale` binary for the CLI
// integration tests.
//
// run_megascale(args) forks, runs MEGASCALE_BINARY (run_binary: any program) with the source tree
// (MEGASCALE_SOURCE_DIR) as working directory, and returns the exit status and
// stdout / stderr captured separately (into unlinked temporary files, not pipes,
// so a child writing much to both streams cannot deadlock). dump() renders a
// result for failure messages.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace megascale::cli_testing {

namespace fs = std::filesystem;

inline const std::string kSourceDir = MEGASCALE_SOURCE_DIR;
inline const std::string kBinary = MEGASCALE_BINARY;

struct RunResult {
  int exit_code = -1;  // -1: did not exit normally (signal)
  int signal = 0;
  std::string out;
  std::string err;
};

inline std::string read_all(int fd) {
  std::string s;
  lseek(fd, 0, SEEK_SET);
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) s.append(buf, static_cast<size_t>(n));
  return s;
}

// An unlinked temporary file, for capturing one stream of the child (files, not
// pipes, so that a child writing much to both streams cannot deadlock).
inline int capture_file() {
  std::string tmpl = fs::temp_directory_path() / "megascale-cli-XXXXXX";
  const int fd = mkstemp(tmpl.data());
  if (fd >= 0) unlink(tmpl.c_str());
  return fd;
}

// Runs `binary args...` in the source directory and waits for it; `env`
// ("NAME=VALUE") is added to the child's environment, and `unset` names
// removed from it.
inline RunResult run_binary(const std::string& binary, const std::vector<std::string>& args,
                            const std::vector<std::string>& env = {},
                            const std::vector<std::string>& unset = {}) {
  RunResult r;
  const int out_fd = capture_file();
  const int err_fd = capture_file();
  if (out_fd < 0 || err_fd < 0) {
    ADD_FAILURE() << "cannot create capture files";
    return r;
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec (and the environment
    // edits, which this single-threaded test process's child may make).
    for (const std::string& name : unset) unsetenv(name.c_str());
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    if (chdir(kSourceDir.c_str()) != 0) _exit(126);
    if (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
  } else {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  r.out = read_all(out_fd);
  r.err = read_all(err_fd);
  close(out_fd);
  close(err_fd);
  return r;
}

// Runs `megascale args...` in the source directory and waits for it.
inline RunResult run_megascale(const std::vector<std::string>& args) { return run_binary(kBinary, args); }

// For failure messages: what the command printed.
inline std::string dump(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.signal) +
         "\n--- stdout:\n" + r.out.substr(0, 4000) + "\n--- stderr:\n" + r.err.substr(0, 4000);
}

}  // namespace megascale::cli_testing
