// model/trace_schema.cc: the trace schema's CSV / Chrome JSON writers and CSV reader.
#include "model/trace_schema.h"

#include "base/json.h"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <fmt/format.h>
#include "base/text_file.h"

namespace megascale::model {
namespace {

constexpr model::Stream kStreams[] = {model::Stream::kCompute, model::Stream::kTpComm,
                                      model::Stream::kPpSend, model::Stream::kPpRecv,
                                      model::Stream::kDpComm};
constexpr const char* kColumns[] = {"rank",   "stream", "kind",   "microbatch", "chunk",
                                    "layer",  "start_us", "end_us", "bytes",    "flops"};
constexpr int kNumColumns = 10;

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}



// A trace streams out (a 12,288-GPU step is tens of MB); a path that cannot
// be opened or written is an OutputFileError with the system's reason, as
// every other output (base/text_file.h).
std::ofstream open_out(const std::string& path) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw base::OutputFileError(path, errno != 0 ? std::strerror(errno) : "cannot open");
  return out;
}

void finish(std::ofstream& out, const std::string& path) {
  errno = 0;
  out.flush();
  if (!out) throw base::OutputFileError(path, errno != 0 ? std::strerror(errno) : "write failed");
}

// Splits one CSV line into fields (RFC 4180 quoting). Returns false on an
// unterminated quote.
bool split_csv(const std::string& line, std::vector<std::string>* fields) {
  fields->clear();
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields->push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  fields->push_back(std::move(cur));
  return !quoted;
}

template <typename T>
bool parse_number(const std::string& s, T* out) {
  if (s.empty()) return false;
  const char* first = s.data();
  if (*first == '+') ++first;
  auto [p, ec] = std::from_chars(first, s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

TraceParseError::TraceParseError(const std::string& file, int line, const std::string& column,
                                 const std::string& reason)
    : std::runtime_error(file + ":" + std::to_string(line) +
                         (column.empty() ? "" : " (column " + column + ")") + ": " + reason),
      file_(file),
      line_(line),
      column_(column) {}

bool parse_stream(std::string_view name, Stream* out) {
  for (Stream s : kStreams) {
    if (name == model::to_string(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

// ---- recorder ----

void write_trace_csv(const std::string& path, const std::vector<TraceEvent>& events) {
  std::ofstream out = open_out(path);
  for (int i = 0; i < kNumColumns; ++i) out << (i ? "," : "") << kColumns[i];
  out << "\n";
  for (const TraceEvent& e : events) {
    out << e.rank << ',' << to_string(e.stream) << ',' << csv_field(e.kind) << ','
        << e.microbatch << ',' << e.chunk << ',' << e.layer << ','
        << fmt::format("{:.3f}", e.start_us) << ',' << fmt::format("{:.3f}", e.end_us) << ','
        << e.bytes << ',' << fmt::format("{:.17g}", e.flops) << "\n";
  }
  finish(out, path);
}

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  std::ofstream out = open_out(path);
  // One event object per line (nlohmann-json renders each), so a large trace
  // streams out without a whole-document tree in memory.
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const base::Json& j) {
    if (!first) out << ",\n";
    first = false;
    out << j.dump();
  };
  // Metadata: name every (rank, stream) that occurs; sort streams by their id.
  std::vector<std::pair<int, int>> seen;
  for (const TraceEvent& e : events) seen.emplace_back(e.rank, static_cast<int>(e.stream));
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  int last_rank = -1;
  for (auto [rank, stream] : seen) {
    if (rank != last_rank) {
      emit({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
      emit({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
      last_rank = rank;
    }
    emit({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", stream},
          {"args", {{"name", to_string(static_cast<Stream>(stream))}}}});
    emit({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", stream}, {"args", {{"sort_index", stream}}}});
  }
  for (const TraceEvent& e : events) {
    // Display name "forward 3.1 L5"; the fields themselves are in args.
    std::string name = e.kind;
    if (e.microbatch >= 0) {
      name.append(" ").append(std::to_string(e.microbatch));
      if (e.chunk >= 0) name.append(".").append(std::to_string(e.chunk));
    }
    if (e.layer >= 0) name.append(" L").append(std::to_string(e.layer));
    emit({{"name", name},
          {"cat", to_string(e.stream)},
          {"ph", "X"},
          {"pid", e.rank},
          {"tid", static_cast<int>(e.stream)},
          {"ts", e.start_us},
          {"dur", e.end_us - e.start_us},
          {"args",
           {{"kind", e.kind}, {"microbatch", e.microbatch}, {"chunk", e.chunk}, {"layer", e.layer},
            {"bytes", e.bytes}, {"flops", e.flops}}}});
  }
  out << "\n]}\n";
  finish(out, path);
}

std::vector<TraceEvent> read_trace_csv(const std::string& path) {
  std::istringstream in(base::read_text_or_throw(path));
  std::string line;
  std::vector<std::string> f;
  int lineno = 0;
  if (!std::getline(in, line)) throw TraceParseError(path, 1, "", "empty file (no header line)");
  ++lineno;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  split_csv(line, &f);
  for (int i = 0; i < kNumColumns; ++i) {
    if (i >= static_cast<int>(f.size()) || f[i] != kColumns[i])
      throw TraceParseError(path, 1, kColumns[i],
                            "header must be rank,stream,kind,microbatch,chunk,layer,start_us,"
                            "end_us,bytes,flops");
  }
  if (f.size() != kNumColumns)
    throw TraceParseError(path, 1, "", "header has " + std::to_string(f.size()) +
                                           " columns, expected 10");

  std::vector<TraceEvent> events;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (!split_csv(line, &f)) throw TraceParseError(path, lineno, "", "unterminated quote");
    if (f.size() != kNumColumns)
      throw TraceParseError(path, lineno, "",
                            std::to_string(f.size()) + " fields, expected " +
                                std::to_string(kNumColumns));
    TraceEvent e;
    auto bad = [&](int col, const std::string& why) {
      return TraceParseError(path, lineno, kColumns[col], why + ": '" + f[col] + "'");
    };
    if (!parse_number(f[0], &e.rank) || e.rank < 0) throw bad(0, "not a rank (integer >= 0)");
    if (!parse_stream(f[1], &e.stream))
      throw bad(1, "unknown stream (compute, tp_comm, pp_send, pp_recv, dp_comm)");
    if (f[2].empty()) throw bad(2, "empty kind");
    e.kind = f[2];
    if (!parse_number(f[3], &e.microbatch) || e.microbatch < -1)
      throw bad(3, "not an integer >= -1");
    if (!parse_number(f[4], &e.chunk) || e.chunk < -1) throw bad(4, "not an integer >= -1");
    if (!parse_number(f[5], &e.layer) || e.layer < -1) throw bad(5, "not an integer >= -1");
    // Times count from the trace's origin (0) and are finite: from_chars reads
    // "nan" and "inf", which no clock writes and which no comparison catches.
    if (!parse_number(f[6], &e.start_us) || !std::isfinite(e.start_us)) throw bad(6, "not a number");
    if (e.start_us < 0) throw bad(6, "before the trace's origin (times are >= 0)");
    if (!parse_number(f[7], &e.end_us) || !std::isfinite(e.end_us)) throw bad(7, "not a number");
    if (e.end_us < e.start_us) throw bad(7, "end before start_us " + f[6]);
    if (!parse_number(f[8], &e.bytes) || e.bytes < 0) throw bad(8, "not an integer >= 0");
    if (!parse_number(f[9], &e.flops) || !std::isfinite(e.flops) || e.flops < 0) throw bad(9, "not a number >= 0");
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace megascale::model
