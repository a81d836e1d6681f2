// sim/trace_writer.h: the simulated timeline in the project's one trace schema
// (DESIGN.md contract 3), so simulated and measured traces compare event by
// event.
//
// defines: TraceEvent, timeline_events, write_trace_csv, write_chrome_trace,
//          write_trace_files
//
// Schema (identical to engine/trace.h, which sim/ cannot link: the engine
// links Open MPI and SimGrid exports MPI symbols):
//   (rank, stream, kind, microbatch, chunk, layer, start_us, end_us, bytes, flops)
//   - rank: global GPU rank of TP rank 0 of the (replica, pipeline rank) the
//     event ran on (Megatron-LM order: d*TP + r*TP*DP); TP ranks of a stage
//     and replicas with the same compute factors have identical timelines;
//   - stream: model::to_string(Stream); kind: model::to_string(OpKind);
//   - microbatch, chunk: the op's (-1 when not about one); layer: -1 for the
//     ops themselves (whole chunks at this fidelity); with `layers` each
//     Forward / Backward op is followed by its per-layer slices
//     (sim/layer_trace.h: operators on the compute stream, TP collectives on
//     tp_comm, global layer numbers), scaled to the op's interval;
//   - bytes: the op's payload per GPU (p2p message, DP chunk); flops: FLOPs
//     one GPU executes for a Forward / Backward op.
// CSV: header `rank,stream,kind,microbatch,chunk,layer,start_us,end_us,bytes,flops`,
// times with 3 decimals (ns); events sorted by (start, rank, stream).
// Chrome trace JSON: one complete event (ph "X") per event, pid = rank,
// tid = stream id, named by process_name / thread_name metadata; opens in
// Perfetto (ui.perfetto.dev) and chrome://tracing.
//
// Errors: the writers throw std::runtime_error naming the file when it cannot
// be written. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/schedule.h"
#include "model/trace_schema.h"
#include "sim/event_engine.h"
#include "sim/layer_trace.h"
#include "sim/op_costs.h"

namespace megascale::sim {

// The schema and its writers are model/'s (DESIGN.md contract 3): the same
// columns and files as the engine's measured traces.
using model::TraceEvent;
using model::write_chrome_trace;
using model::write_trace_csv;


// Events of every op of `t` (replica i is DP index replicas[i]), sorted;
// with `layers`, also the per-layer slices of every Forward / Backward op of
// the first (most gating) replica.
std::vector<TraceEvent> timeline_events(const model::ParallelConfig& p, const model::Schedule& s,
                                        const EventTimeline& t, const std::vector<int>& replicas,
                                        const OpCosts& costs, const LayerTrace* layers = nullptr);

// `file` names the trace: a trailing ".json" or ".csv" is dropped and both
// PREFIX.json (Chrome) and PREFIX.csv are written. Returns {json, csv} paths.
std::vector<std::string> write_trace_files(const std::string& file, const std::vector<TraceEvent>& events);

}  // namespace megascale::sim
