// base/mpirun.h: launching an MPI job from the CLI (`megascale train`,
// `megascale calibrate micro`) so that stopping the CLI stops the job. In base/
// because it needs no layer and no MPI library (it execs mpirun): the
// `megascale` binary cannot link the engine's MPI (sim/ brings SimGrid's).
//
// defines: run_mpirun, sibling_program
//
// The job runs as `mpirun ARGS...` (execvp, no shell) in its own process group,
// with Open MPI's run-as-root variables set. While it runs, SIGINT, SIGTERM and
// SIGHUP sent to the CLI are forwarded to that group: mpirun then terminates its
// ranks and exits (std::system ignored SIGINT and, on SIGTERM, left mpirun and
// every rank running; issue 13). Should mpirun still run 10 s after such a
// signal (grace_s), the group is SIGKILLed (with a message on `err`): Open
// MPI's mpirun once hung on a futex with every rank gone. The previous handlers are
// restored afterwards.
//
// Thread-safety: one call at a time per process (signal handlers are global).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace megascale::base {

// Runs mpirun with `args` and returns its exit status: the code it exited with,
// 128 + the signal when a signal ended it, or 1 (with a message on `err` naming
// `who`) when it cannot be started.
// `grace_s`: how long mpirun may take to end its ranks and exit after a
// forwarded signal before the whole group is SIGKILLed. Open MPI 4.1's mpirun,
// signalled with its ranks, once hung for good on a futex with every rank
// already a zombie (ctest TrainCommandTest.SignalsStopTheWholeJob, 2026-12-06:
// 15 min, until killed by hand); it normally exits within a second.
inline constexpr int kMpirunGrace_s = 10;
int run_mpirun(const std::vector<std::string>& args, std::ostream& err, const std::string& who,
               int grace_s = kMpirunGrace_s);

// The path of the program `name` in this executable's folder (the build folder
// holds megascale, megascale-train and megascale-micro side by side).
std::string sibling_program(const std::string& name);

}  // namespace megascale::base
