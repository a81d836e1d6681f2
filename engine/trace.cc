// engine/trace.cc: recorder, CSV / Chrome JSON writers, CSV reader, merge.
#include "engine/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <sstream>

#include "engine/comm.h"

namespace megascale::engine {

TraceRecorder::TraceRecorder(int rank, size_t capacity) : rank_(rank) {
  if (rank < 0) throw std::invalid_argument("TraceRecorder: negative rank");
  buf_.reserve(capacity);
  kinds_.reserve(32);
}

uint16_t TraceRecorder::intern(std::string_view kind) {
  for (size_t i = 0; i < kinds_.size(); ++i)
    if (kinds_[i] == kind) return static_cast<uint16_t>(i);
  if (kinds_.size() >= std::numeric_limits<uint16_t>::max())
    throw std::length_error("TraceRecorder: more than 65535 distinct event kinds");
  kinds_.emplace_back(kind);
  return static_cast<uint16_t>(kinds_.size() - 1);
}

void TraceRecorder::record(model::Stream stream, std::string_view kind, int microbatch, int chunk,
                           int layer, double start_us, double end_us, int64_t bytes,
                           double flops) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  buf_.push_back(Compact{start_us, end_us, flops, bytes, microbatch, chunk, layer, intern(kind),
                         static_cast<uint8_t>(stream)});
}

TraceRecorder::Scope::Scope(TraceRecorder* rec, model::Stream stream, std::string_view kind,
                            int microbatch, int chunk, int layer, int64_t bytes, double flops)
    : rec_(rec),
      stream_(stream),
      kind_(kind),
      microbatch_(microbatch),
      chunk_(chunk),
      layer_(layer),
      bytes_(bytes),
      flops_(flops),
      start_us_(now_us()) {}

TraceRecorder::Scope::~Scope() {
  if (rec_)
    rec_->record(stream_, kind_, microbatch_, chunk_, layer_, start_us_, now_us(), bytes_, flops_);
}

size_t TraceRecorder::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buf_.size();
}

void TraceRecorder::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  buf_.clear();
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TraceEvent> out;
  out.reserve(buf_.size());
  for (const Compact& c : buf_) {
    TraceEvent e;
    e.rank = rank_;
    e.stream = static_cast<model::Stream>(c.stream);
    e.kind = kinds_[c.kind_id];
    e.microbatch = c.microbatch;
    e.chunk = c.chunk;
    e.layer = c.layer;
    e.start_us = c.start_us;
    e.end_us = c.end_us;
    e.bytes = c.bytes;
    e.flops = c.flops;
    out.push_back(std::move(e));
  }
  return out;
}

// ---- files ----

std::vector<TraceEvent> merge_traces(Comm& comm, const TraceRecorder& rec,
                                     const std::string& prefix, bool keep_rank_files) {
  auto rank_file = [&](int r) { return prefix + ".rank" + std::to_string(r) + ".csv"; };
  std::exception_ptr error;
  try {
    write_trace_csv(rank_file(comm.rank()), rec.events());
  } catch (...) {
    error = std::current_exception();
  }
  comm.barrier();
  std::vector<TraceEvent> merged;
  if (comm.rank() == 0 && !error) {
    try {
      for (int r = 0; r < comm.size(); ++r) {
        std::vector<TraceEvent> ev = read_trace_csv(rank_file(r));
        merged.insert(merged.end(), std::make_move_iterator(ev.begin()),
                      std::make_move_iterator(ev.end()));
      }
      double t0 = std::numeric_limits<double>::infinity();
      for (const TraceEvent& e : merged) t0 = std::min(t0, e.start_us);
      // Shift, then round to the files' nanosecond resolution so the returned
      // events equal what read_trace_csv gives back from the merged file.
      for (TraceEvent& e : merged) {
        e.start_us = std::round((e.start_us - t0) * 1e3) / 1e3;
        e.end_us = std::round((e.end_us - t0) * 1e3) / 1e3;
      }
      std::stable_sort(merged.begin(), merged.end(), [](const TraceEvent& a, const TraceEvent& b) {
        if (a.start_us != b.start_us) return a.start_us < b.start_us;
        if (a.rank != b.rank) return a.rank < b.rank;
        return a.stream < b.stream;
      });
      write_trace_csv(prefix + ".csv", merged);
      write_chrome_trace(prefix + ".json", merged);
      if (!keep_rank_files)
        for (int r = 0; r < comm.size(); ++r) std::remove(rank_file(r).c_str());
    } catch (...) {
      error = std::current_exception();
    }
  }
  comm.barrier();
  if (error) std::rethrow_exception(error);
  return merged;
}

}  // namespace megascale::engine
