// engine/op_timer.h: timestamps taken in a device's queue order, for the trace
// of an asynchronous device (MegaScale's performance monitor: CUDA events per
// op, collected per rank and merged into one timeline, section 4.1).
//
// defines: OpTimer.
//
// On the CPU an op runs while the host waits, so engine/trace.h stamps the host
// clock. On a GPU the host only queues work: stamp() records a marker (a CUDA
// event) in the device's stream at the point of the call, costing no
// synchronisation; resolve() later waits for the markers (once per step, when
// the step's loss is read anyway) and converts them to TraceRecorder::now_us()'s
// clock. Device::make_op_timer() returns one (nullptr: use the host clock).
//
// Thread-safety: one OpTimer per rank thread.
#pragma once

#include <vector>

namespace megascale::engine {

class OpTimer {
 public:
  virtual ~OpTimer() = default;
  // Records a marker after the work queued so far; returns its id (0, 1, ...
  // since the last resolve()).
  virtual int stamp() = 0;
  // Waits for every marker and returns their times (microseconds on
  // TraceRecorder::now_us()'s clock), indexed by id; then forgets them.
  virtual std::vector<double> resolve() = 0;
};

}  // namespace megascale::engine
