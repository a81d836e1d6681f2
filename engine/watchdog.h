// engine/watchdog.h: stops a rank that makes no progress, so that a stopped or
// hung peer does not leave the job blocked in a collective forever with no
// message (issue 13).
//
// defines: Watchdog.
//
// A thread checks five times a second how long ago the last step finished
// (or the watchdog started: then the start-up limit applies). Past the limit
// it writes one line to stderr, naming the rank, the idle seconds and the
// step it waits in (or start-up), and exits the process with status 1;
// mpirun then stops every other rank.
// `megascale-train` arms one before MPI_Init, so that a peer that stops
// during start-up (MPI init, building the model, loading a checkpoint) is
// caught as surely as one that stops mid-run, and hands it to the Trainer
// (TrainOptions::watchdog), which reports each finished step.
//
// Thread-safety: progress() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace megascale::engine {

class Watchdog {
 public:
  // limit_s: the most seconds between two finished steps; startup_limit_s:
  // before the first progress() (start-up takes far longer than a step at
  // scale). Each <= 0: off in that phase (no thread when both are). `rank`:
  // the world rank the message names.
  Watchdog(double limit_s, double startup_limit_s, int rank);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Step `step` (1-based) finished, or 0 when start-up did and step 1 begins
  // (after a resume: the checkpoint's step): the idle clock starts again.
  void progress(int64_t step);

 private:
  void watch();

  double limit_s_, startup_limit_s_;
  int rank_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  int64_t step_ = -1;  // -1: start-up; else the last finished step
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::thread thread_;
};

}  // namespace megascale::engine
