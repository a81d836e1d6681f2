// engine/background_cpu.h: the CPU time of this process's background helper
// threads (the checkpoint writer), so that a measure of a rank's own compute
// by process CPU time can leave it out.
//
// defines: background_cpu_s, BackgroundCpuScope
//
// robust/heartbeat.h measures a rank's compute per step as the process's CPU
// time between two step ends less its communication's. The two-stage
// checkpoint's writer (engine/checkpoint.h CheckpointPersister) runs on its own
// thread and would land in the compute of the steps it overlaps, on every rank
// alike (a 5x slow rank came out 2.47x on such a step, robust/README.md).
// Such a thread opens a BackgroundCpuScope; background_cpu_s() is the CPU
// time every scope has used so far: the scopes that ended plus, read live
// through the thread's CPU clock (pthread_getcpuclockid), the ones still
// open. Sampled at two step ends, its difference is the helpers' CPU in
// that interval, whenever a write started or ended.
//
// Thread-safety: background_cpu_s from any thread; a scope is opened and
// closed by the thread it measures (one mutex for all).
#pragma once

#include <pthread.h>
#include <time.h>

namespace megascale::engine {

// Seconds of CPU time spent so far inside every BackgroundCpuScope of this
// process (ended and open). Monotone; take differences.
double background_cpu_s();

// Counts the calling thread's CPU time from construction to destruction into
// background_cpu_s(). Open and close it on the same thread.
class BackgroundCpuScope {
 public:
  BackgroundCpuScope();
  ~BackgroundCpuScope();
  BackgroundCpuScope(const BackgroundCpuScope&) = delete;
  BackgroundCpuScope& operator=(const BackgroundCpuScope&) = delete;

 private:
  clockid_t clock_{};
  double start_s_ = 0;  // the thread's CPU time when the scope opened
  bool live_ = false;   // registered (the thread's CPU clock was available)
};

}  // namespace megascale::engine
