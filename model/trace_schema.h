// model/trace_schema.h: the one trace schema for simulated and measured runs
// (DESIGN.md contract 3), its files and their reader.
//
//   (rank, stream, kind, microbatch, chunk, layer, start_us, end_us, bytes, flops)
// `stream` is a model::Stream (model/schedule.h), written by its name
// ("compute", "tp_comm", "pp_send", "pp_recv", "dp_comm"); `kind` is free text,
// by convention model::to_string(OpKind) for Schedule IR ops ("forward",
// "send_activation", ...) and the operator / layer-step name for work inside a
// layer ("qkv", "ag_qkv"). `chunk` is the rank-local model chunk 0..V-1; -1
// marks a field that does not apply (microbatch, chunk, layer).
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
// The engine records such events (engine/trace.h), the event-level simulator
// produces them (sim/trace_writer.h), and calibration compares the two.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/schedule.h"

namespace megascale::model {

struct TraceEvent {
  int rank = 0;
  Stream stream = Stream::kCompute;
  std::string kind;
  int microbatch = -1;
  int chunk = -1;
  int layer = -1;
  double start_us = 0;
  double end_us = 0;
  int64_t bytes = 0;
  double flops = 0;

  double duration_us() const { return end_us - start_us; }
  bool operator==(const TraceEvent&) const = default;
};

class TraceParseError : public std::runtime_error {
 public:
  TraceParseError(const std::string& file, int line, const std::string& column,
                  const std::string& reason);
  const std::string& file() const { return file_; }
  int line() const { return line_; }             // 1-based; the header is line 1
  const std::string& column() const { return column_; }  // schema field name ("" = whole line)

 private:
  std::string file_;
  int line_;
  std::string column_;
};

// "compute" -> Stream::kCompute, ...; false when the name is unknown.
bool parse_stream(std::string_view name, Stream* out);

// Writers; throw std::runtime_error naming the file when it cannot be written.
void write_trace_csv(const std::string& path, const std::vector<TraceEvent>& events);

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events);

// Reader of write_trace_csv's format; throws TraceParseError (malformed) or
// std::runtime_error (cannot open).
std::vector<TraceEvent> read_trace_csv(const std::string& path);

}  // namespace megascale::model
