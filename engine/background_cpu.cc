// engine/background_cpu.cc: see background_cpu.h.
#include "engine/background_cpu.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace megascale::engine {
namespace {

double clock_s(clockid_t clock) {
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Open {
  const BackgroundCpuScope* scope;
  clockid_t clock;
  double start_s;
};

// A scope leaves `open` and adds to `ended_s` under the mutex, before its
// thread can exit: a reader holding the mutex only reads the clocks of
// threads that are alive, and counts each second once.
struct Registry {
  std::mutex mutex;
  double ended_s = 0;
  std::vector<Open> open;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: writers may outlive static destruction
  return *r;
}

}  // namespace

double background_cpu_s() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  double total = r.ended_s;
  for (const Open& o : r.open) total += std::max(0.0, clock_s(o.clock) - o.start_s);
  return total;
}

BackgroundCpuScope::BackgroundCpuScope() {
  if (::pthread_getcpuclockid(::pthread_self(), &clock_) != 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  start_s_ = clock_s(CLOCK_THREAD_CPUTIME_ID);
  r.open.push_back({this, clock_, start_s_});
  live_ = true;
}

BackgroundCpuScope::~BackgroundCpuScope() {
  if (!live_) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.ended_s += std::max(0.0, clock_s(CLOCK_THREAD_CPUTIME_ID) - start_s_);
  r.open.erase(std::remove_if(r.open.begin(), r.open.end(), [this](const Open& o) { return o.scope == this; }),
               r.open.end());
}

}  // namespace megascale::engine
