// engine/trace.h: per-rank, per-stream timed events (DESIGN.md contract 3).
//
// One schema for simulated and measured traces:
//   (rank, stream, kind, microbatch, chunk, layer, start_us, end_us, bytes, flops)
// `stream` is a model::Stream (model/schedule.h), written by its name
// ("compute", "tp_comm", "pp_send", "pp_recv", "dp_comm"); `kind` is free text,
// by convention model::to_string(OpKind) for Schedule IR ops ("forward",
// "send_activation", ...) and model::to_string(LayerStepKind) or the layer
// step's name for work inside a layer ("tp_allgather", "attn_in"). -1 marks a
// field that does not apply (microbatch, chunk, layer).
//
// Files:
//  - CSV with the header line
//      rank,stream,kind,microbatch,chunk,layer,start_us,end_us,bytes,flops
//    (times with 3 decimals = nanoseconds); read back by read_trace_csv(), which
//    throws TraceParseError naming file, line and column on a malformed line.
//  - Chrome trace JSON: one complete event (ph "X") per event, pid = rank,
//    tid = stream (model::Stream as an integer, named by thread_name metadata),
//    ts/dur in microseconds; opens in Perfetto (ui.perfetto.dev) and
//    chrome://tracing. The schema's fields are in each event's "args".
//
// Recording: TraceRecorder stamps std::chrono::steady_clock in microseconds
// (on Linux CLOCK_MONOTONIC, one clock for all processes of a machine) into a
// preallocated vector; `kind` strings are interned once, so a record is a
// mutex-protected append of ~56 bytes (no allocation until the capacity is
// exceeded, after which the vector grows).
//
// Merging across ranks (merge_traces): every rank writes its own
// "<prefix>.rank<r>.csv", a barrier on the Comm, then rank 0 reads them all,
// shifts times so the earliest event starts at 0 (rounded to ns), sorts by (start, rank,
// stream) and writes "<prefix>.csv" and "<prefix>.json"; a last barrier makes
// the merged files visible to all ranks on return. This needs a directory all
// ranks can reach (any local directory on one machine); it was chosen over a
// gather through Comm because Comm moves floats only and the per-rank files are
// useful on their own when a run dies. Clocks are only comparable between
// processes of one machine; a multi-machine merge is aligned by start only.
//
// Thread-safety: TraceRecorder::record / Scope may be called from several
// threads (a mutex guards the buffer); the file functions are free of shared
// state.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/schedule.h"
#include "model/trace_schema.h"

namespace megascale::engine {

// The schema and its files live in model/ (shared with the simulator).
using model::parse_stream;
using model::read_trace_csv;
using model::TraceEvent;
using model::TraceParseError;
using model::write_chrome_trace;
using model::write_trace_csv;

class Comm;




class TraceRecorder {
 public:
  // REQUIRES: rank >= 0. `capacity` events are preallocated.
  explicit TraceRecorder(int rank, size_t capacity = 1 << 16);

  // Microseconds on std::chrono::steady_clock (fractional, ns resolution).
  static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  int rank() const { return rank_; }
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }

  void record(model::Stream stream, std::string_view kind, int microbatch, int chunk, int layer,
              double start_us, double end_us, int64_t bytes = 0, double flops = 0);

  // Times its own lifetime: construction stamps start, destruction records.
  class Scope {
   public:
    Scope(TraceRecorder* rec, model::Stream stream, std::string_view kind, int microbatch = -1,
          int chunk = -1, int layer = -1, int64_t bytes = 0, double flops = 0);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TraceRecorder* rec_;
    model::Stream stream_;
    std::string_view kind_;
    int microbatch_, chunk_, layer_;
    int64_t bytes_;
    double flops_;
    double start_us_;
  };

  size_t size() const;
  void clear();
  // The recorded events in recording order, with this recorder's rank.
  std::vector<TraceEvent> events() const;

 private:
  struct Compact {
    double start_us, end_us, flops;
    int64_t bytes;
    int32_t microbatch, chunk, layer;
    uint16_t kind_id;
    uint8_t stream;
  };
  uint16_t intern(std::string_view kind);  // REQUIRES: mu_ held

  int rank_;
  bool enabled_ = true;
  mutable std::mutex mu_;
  std::vector<Compact> buf_;
  std::vector<std::string> kinds_;
};


// Collective over `comm` (see the header comment). Returns the merged events on
// rank 0 and an empty vector elsewhere. `keep_rank_files` leaves the per-rank
// CSVs in place. Errors on rank 0 are rethrown there after the last barrier.
std::vector<TraceEvent> merge_traces(Comm& comm, const TraceRecorder& rec,
                                     const std::string& prefix, bool keep_rank_files = false);

}  // namespace megascale::engine
