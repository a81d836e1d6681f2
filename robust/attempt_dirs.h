// robust/attempt_dirs.h: the driver's per-attempt folders under a run's work
// directory, WORK/attempt_<n>/ (mpirun.out, mpirun.err, rank_<r>.log).
//
// defines: attempt_dir, remove_attempt_dirs
//
// The ranks append to rank_<r>.log and the driver reads each log from its start
// (robust/driver.cc LogTail), so a folder left by an earlier `megascale run` of
// the same scenario and work directory fed that run's error lines to this one:
// a clean run detected a stale "engine_error", evicted a healthy node and
// relaunched. The driver removes every attempt folder before its first launch.
//
// Thread-safety: filesystem calls only; one driver per work directory.
#pragma once

#include <string>

namespace megascale::robust {

// WORK/attempt_<n>.
std::string attempt_dir(const std::string& work_dir, int attempt);

// Removes WORK/attempt_<n> for every n (folders named so, nothing else);
// returns how many. Throws std::filesystem::filesystem_error when one cannot
// be removed (a run must not read another's logs). A missing WORK is 0.
int remove_attempt_dirs(const std::string& work_dir);

}  // namespace megascale::robust
