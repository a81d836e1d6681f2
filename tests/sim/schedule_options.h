// tests/sim/schedule_options.h: the small Schedule IR shapes the event-engine
// tests run (two layers per model chunk, 1 MiB activations, 16 MiB of DP traffic
// per chunk; `overlap` switches MegaScale's PP / DP overlap and data pipeline).
#pragma once

#include "model/schedule.h"

namespace megascale::sim::testing {

inline model::ScheduleOptions options(int pp, int vpp, int microbatches, int dp, bool overlap) {
  model::ScheduleOptions o;
  o.pp = pp;
  o.vpp = vpp;
  o.microbatches = microbatches;
  o.layers = pp * vpp * 2;
  o.dp = dp;
  o.zero_stage = 1;
  o.pp_overlap = overlap;
  o.dp_overlap = overlap;
  o.data_pipeline = overlap;
  o.activation_bytes = 1 << 20;
  o.dp_bytes_per_chunk = 1 << 24;
  return o;
}

}  // namespace megascale::sim::testing
