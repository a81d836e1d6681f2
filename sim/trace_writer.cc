// sim/trace_writer.cc: see trace_writer.h. The file formats follow
// engine/trace.cc byte for byte (same columns, number formats and metadata).
#include "sim/trace_writer.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "sim/comm_costs.h"  // defines: gpu_of

namespace megascale::sim {
namespace {

std::string fmt(double v, const char* f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::ofstream open_out(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path + ": cannot open for writing");
  return out;
}

void finish(std::ofstream& out, const std::string& path) {
  out.flush();
  if (!out) throw std::runtime_error(path + ": write failed");
}

}  // namespace

std::vector<TraceEvent> timeline_events(const model::ParallelConfig& p, const model::Schedule& s,
                                        const EventTimeline& t, const std::vector<int>& replicas,
                                        const OpCosts& costs) {
  std::vector<TraceEvent> events;
  for (int i = 0; i < t.replicas; ++i) {
    for (size_t r = 0; r < s.ranks.size(); ++r) {
      const int rank = gpu_of(p, 0, replicas[i], static_cast<int>(r));
      const std::vector<model::Op>& ops = s.ranks[r].ops;
      for (size_t k = 0; k < ops.size(); ++k) {
        const model::Op& op = ops[k];
        TraceEvent e;
        e.rank = rank;
        e.stream = op.stream;
        e.kind = model::to_string(op.kind);
        e.microbatch = op.microbatch;
        e.chunk = op.chunk;
        e.start_us = t.at(i, static_cast<int>(r), static_cast<int>(k)).start_s * 1e6;
        e.end_us = t.at(i, static_cast<int>(r), static_cast<int>(k)).end_s * 1e6;
        e.bytes = op.bytes;
        e.flops = costs.flops(static_cast<int>(r), op);
        if (op.kind == model::OpKind::kForward || op.kind == model::OpKind::kBackward) e.bytes = 0;
        events.push_back(std::move(e));
      }
    }
  }
  std::stable_sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return std::make_tuple(a.start_us, a.rank, static_cast<int>(a.stream)) <
           std::make_tuple(b.start_us, b.rank, static_cast<int>(b.stream));
  });
  return events;
}

void write_trace_csv(const std::string& path, const std::vector<TraceEvent>& events) {
  std::ofstream out = open_out(path);
  out << "rank,stream,kind,microbatch,chunk,layer,start_us,end_us,bytes,flops\n";
  for (const TraceEvent& e : events) {
    out << e.rank << ',' << model::to_string(e.stream) << ',' << csv_field(e.kind) << ','
        << e.microbatch << ',' << e.chunk << ',' << e.layer << ',' << fmt(e.start_us, "%.3f") << ','
        << fmt(e.end_us, "%.3f") << ',' << e.bytes << ',' << fmt(e.flops, "%.17g") << "\n";
  }
  finish(out, path);
}

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  std::ofstream out = open_out(path);
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  std::vector<std::pair<int, int>> seen;
  for (const TraceEvent& e : events) seen.emplace_back(e.rank, static_cast<int>(e.stream));
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  int last_rank = -1;
  for (auto [rank, stream] : seen) {
    if (rank != last_rank) {
      sep();
      out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << rank
          << ",\"args\":{\"name\":\"rank " << rank << "\"}}";
      sep();
      out << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << rank
          << ",\"args\":{\"sort_index\":" << rank << "}}";
      last_rank = rank;
    }
    sep();
    out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << stream
        << ",\"args\":{\"name\":\"" << model::to_string(static_cast<model::Stream>(stream)) << "\"}}";
    sep();
    out << "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << stream
        << ",\"args\":{\"sort_index\":" << stream << "}}";
  }
  for (const TraceEvent& e : events) {
    std::string name = e.kind;
    if (e.microbatch >= 0) {
      name.append(" ").append(std::to_string(e.microbatch));
      if (e.chunk >= 0) name.append(".").append(std::to_string(e.chunk));
    }
    if (e.layer >= 0) name.append(" L").append(std::to_string(e.layer));
    sep();
    out << "{\"name\":" << json_string(name) << ",\"cat\":\"" << model::to_string(e.stream)
        << "\",\"ph\":\"X\",\"pid\":" << e.rank << ",\"tid\":" << static_cast<int>(e.stream)
        << ",\"ts\":" << fmt(e.start_us, "%.3f") << ",\"dur\":" << fmt(e.end_us - e.start_us, "%.3f")
        << ",\"args\":{\"kind\":" << json_string(e.kind) << ",\"microbatch\":" << e.microbatch
        << ",\"chunk\":" << e.chunk << ",\"layer\":" << e.layer << ",\"bytes\":" << e.bytes
        << ",\"flops\":" << fmt(e.flops, "%.17g") << "}}";
  }
  out << "\n]}\n";
  finish(out, path);
}

std::vector<std::string> write_trace_files(const std::string& file, const std::vector<TraceEvent>& events) {
  std::string prefix = file;
  for (const char* ext : {".json", ".csv"}) {
    const std::string e = ext;
    if (prefix.size() > e.size() && prefix.compare(prefix.size() - e.size(), e.size(), e) == 0) {
      prefix.resize(prefix.size() - e.size());
      break;
    }
  }
  const std::string json = prefix + ".json";
  const std::string csv = prefix + ".csv";
  write_chrome_trace(json, events);
  write_trace_csv(csv, events);
  return {json, csv};
}

}  // namespace megascale::sim
