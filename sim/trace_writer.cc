// sim/trace_writer.cc: see trace_writer.h. The file formats follow
// engine/trace.cc byte for byte (same columns, number formats and metadata).
#include "sim/trace_writer.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "sim/comm_costs.h"  // defines: gpu_of

namespace megascale::sim {

std::vector<TraceEvent> timeline_events(const model::ParallelConfig& p, const model::Schedule& s,
                                        const EventTimeline& t, const std::vector<int>& replicas,
                                        const OpCosts& costs, const LayerTrace* layers) {
  std::vector<TraceEvent> events;
  for (int i = 0; i < t.replicas; ++i) {
    for (size_t r = 0; r < s.ranks.size(); ++r) {
      const int rank = gpu_of(p, 0, replicas[i], static_cast<int>(r));
      const std::vector<model::Op>& ops = s.ranks[r].ops;
      for (size_t k = 0; k < ops.size(); ++k) {
        const model::Op& op = ops[k];
        // After a host failure (sim/failure_sim.h) ops that never ended have no slice.
        if (!t.state.empty() && t.state[i][r][k] != OpState::kEnded) continue;
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
        // The most gating replica only (file size); bucketed pieces (fraction < 1)
        // carry part of a chunk and get no per-layer slices.
        if (layers != nullptr && i == 0 && op.fraction == 1.0) {
          const double nominal_s = layers->nominal_s(static_cast<int>(r), op);
          const double scale = nominal_s > 0 ? (e.end_us - e.start_us) / (nominal_s * 1e6) : 0.0;
          for (const LayerSlice& sl : layers->op_slices(static_cast<int>(r), op)) {
            TraceEvent x;
            x.rank = rank;
            x.stream = sl.stream;
            x.kind = sl.kind;
            x.microbatch = op.microbatch;
            x.chunk = op.chunk;
            x.layer = sl.layer;
            x.start_us = e.start_us + sl.start_s * 1e6 * scale;
            x.end_us = e.start_us + sl.end_s * 1e6 * scale;
            // Compute slices stay inside their op despite rounding (a fused
            // collective on tp_comm may end after it).
            if (sl.stream == model::Stream::kCompute) x.end_us = std::min(x.end_us, e.end_us);
            x.bytes = sl.bytes;
            x.flops = sl.flops;
            events.push_back(std::move(x));
          }
        }
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
