// base/mpirun.cc: see mpirun.h.
#include "base/mpirun.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace megascale::base {
namespace {

volatile sig_atomic_t g_child_group = 0;
volatile sig_atomic_t g_forwarded = 0;  // a signal was forwarded to the group

extern "C" void forward_signal(int sig) {
  const pid_t group = g_child_group;
  if (group > 0) {
    g_forwarded = 1;
    ::kill(-group, sig);
  }
}

}  // namespace

int run_mpirun(const std::vector<std::string>& args, std::ostream& err, const std::string& who, int grace_s) {
  std::vector<std::string> argv_text = {"mpirun"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);

  err.flush();
  const pid_t child = ::fork();
  if (child < 0) {
    err << who << ": cannot start mpirun: " << std::strerror(errno) << "\n";
    return 1;
  }
  if (child == 0) {
    ::setpgid(0, 0);  // its own group: a forwarded signal reaches mpirun and nothing of ours
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::execvp("mpirun", argv.data());
    // Only reached when exec failed: 127, as a shell reports a missing command.
    const char* msg = ": cannot run mpirun (is openmpi-bin installed? scripts/setup.sh)\n";
    (void)!::write(STDERR_FILENO, who.data(), who.size());
    (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
    ::_exit(127);
  }
  ::setpgid(child, child);  // also from here: no race with a signal before the child runs
  g_child_group = child;
  g_forwarded = 0;
  struct sigaction forward {}, old_int {}, old_term {}, old_hup {};
  forward.sa_handler = forward_signal;
  sigemptyset(&forward.sa_mask);
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);
  ::sigaction(SIGHUP, &forward, &old_hup);

  // Polled, not a blocking waitpid: the signal may be handled on any thread,
  // so this one is not always interrupted when it is.
  int status = 0;
  pid_t done = 0;
  int ticks_since_signal = 0;
  bool killed = false;
  constexpr int kPoll_us = 50 * 1000;
  while ((done = ::waitpid(child, &status, WNOHANG)) == 0 || (done < 0 && errno == EINTR)) {
    if (g_forwarded && !killed && ++ticks_since_signal > grace_s * (1000 * 1000 / kPoll_us)) {
      err << who << ": mpirun did not exit within " << grace_s
          << " s of the signal; killing it and its ranks (SIGKILL)\n";
      ::kill(-child, SIGKILL);
      killed = true;
    }
    ::usleep(kPoll_us);
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  g_child_group = 0;
  if (done < 0) {
    err << who << ": waiting for mpirun failed: " << std::strerror(errno) << "\n";
    return 1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    // Said, not only returned as 128 + N (mpirun itself can die: Open MPI's
    // mpirun was seen to end on SIGSEGV when its output pipe closed).
    if (!g_forwarded) err << who << ": mpirun ended on signal " << WTERMSIG(status) << " (" << ::strsignal(WTERMSIG(status)) << ")\n";
    return 128 + WTERMSIG(status);
  }
  return 1;
}

std::string sibling_program(const std::string& name) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  return (self.parent_path() / name).string();
}

}  // namespace megascale::base
