// engine/watchdog.cc: see watchdog.h.
#include "engine/watchdog.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace megascale::engine {

Watchdog::Watchdog(double limit_s, double startup_limit_s, int rank)
    : limit_s_(limit_s), startup_limit_s_(startup_limit_s), rank_(rank) {
  if (limit_s_ > 0 || startup_limit_s_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::progress(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
  last_ = std::chrono::steady_clock::now();
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!done_) {
    wake_.wait_for(lock, std::chrono::milliseconds(200));
    if (done_) return;
    const bool starting = step_ < 0;
    const double limit_s = starting ? startup_limit_s_ : limit_s_;
    const double idle_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count();
    if (limit_s <= 0 || idle_s <= limit_s) continue;
    const std::string when = starting ? std::string("during start-up: MPI init, building the model, loading a checkpoint")
                                      : "in step " + std::to_string(step_ + 1);
    std::fprintf(stderr,
                 "megascale train: rank %d: no step finished for %.0f s (%s): a peer rank stopped or hung, or "
                 "train.%s (%.0f s) is shorter than %s; stopping the job\n",
                 rank_, idle_s, when.c_str(), starting ? "startup_watchdog_s" : "watchdog_s", limit_s,
                 starting ? "the start-up" : "a step");
    std::fflush(stderr);
    std::_Exit(1);  // mpirun sees a rank fail and stops every other one
  }
}

}  // namespace megascale::engine
