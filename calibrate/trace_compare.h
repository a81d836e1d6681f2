// calibrate/trace_compare.h: a measured engine trace against the simulated one
// of the same Schedule IR, op by op (DESIGN.md contract 3).
//
// defines: StepWindow, split_steps, OpRow, TimeSplit, Comparison, compare_traces
//
// Both traces use model/trace_schema.h. The engine records every Schedule IR
// op of every step (kinds model::to_string(OpKind)) and, inside Forward /
// Backward, every kernel and TP collective (kinds from model/op_cost.h and
// model/layer_program.h, ".bwd" in backward); the simulator (sim/trace_writer.h,
// with per-layer slices) writes the same kinds for one step.
//
// Steps of the measured trace: a rank runs its IR op list once per step in
// order, so its IR-op events sorted by start split into steps of
// schedule.ranks[pp].ops.size() each (split_steps). The first `warmup` steps
// are left out (allocation, page faults, cold caches).
//
// What is compared, per step and per rank, averaged over the ranks (the
// simulator folds TP ranks and identical DP replicas into one per stage):
//   ops       each kind's summed duration (a kernel, an IR op, a TP collective);
//   split     compute (Forward/Backward less the TP collectives inside them),
//             TP communication, optimizer, and the rest of the step window:
//             waiting (pipeline bubble, exposed p2p and DP communication).
// The step time itself is the engine's own report (world rank 0's clock),
// compared by the caller.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "model/schedule.h"
#include "model/trace_schema.h"

namespace megascale::calibrate {

// One rank's events of one step.
struct StepWindow {
  int rank = 0;
  int step = 0;
  double start_us = 0, end_us = 0;          // first IR op's start, last IR op's end
  std::vector<model::TraceEvent> events;    // IR ops and the layer events inside them
};

// True for the kinds of Schedule IR ops (model::to_string(OpKind)).
bool is_ir_kind(const std::string& kind);

// Splits a merged measured trace into per-(rank, step) windows. `pp_of_rank`
// maps a world rank to its pipeline rank (Megatron-LM order). Throws
// std::runtime_error when a rank's IR-op count is not a whole number of steps
// of its op list (a trace of another schedule, or a truncated one).
std::vector<StepWindow> split_steps(const std::vector<model::TraceEvent>& events, const model::Schedule& schedule,
                                    const model::ParallelConfig& p);

struct OpRow {
  std::string kind;           // e.g. "fc1", "fc1.bwd", "forward", "ag_qkv"
  std::string stream;         // its stream
  double measured_s = 0;      // per step per rank
  double measured_spread = 0; // (p90 - p10) / median of its per-step totals
  double predicted_s = 0;
  double error = 0;           // predicted / measured - 1 (0 when nothing measured)
};

struct TimeSplit {
  double compute_s = 0, tp_s = 0, optimizer_s = 0, wait_s = 0, window_s = 0;
};

struct Comparison {
  std::vector<OpRow> ops;          // by measured time, largest first
  TimeSplit measured, predicted;   // per rank, averaged
  int steps_used = 0;
};

// `measured`: the engine's trace of every step; `predicted`: the simulator's
// events of one step (sim::JobResult::trace_events). `warmup` leading steps
// are skipped.
Comparison compare_traces(const std::vector<model::TraceEvent>& measured,
                          const std::vector<model::TraceEvent>& predicted, const model::Schedule& schedule,
                          const model::ParallelConfig& p, int warmup);

// The TimeSplit of one window (or of a whole predicted step of one rank).
TimeSplit time_split(const std::vector<model::TraceEvent>& events, double window_us);

}  // namespace megascale::calibrate
