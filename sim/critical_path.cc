// sim/critical_path.cc: see critical_path.h.
#include "sim/critical_path.h"

#include <algorithm>
#include <array>
#include <utility>

namespace megascale::sim {
namespace {

using model::Op;
using model::OpKind;


// [rank][op] -> previous op on the same stream of the rank, or -1.
std::vector<std::vector<int>> stream_predecessors(const model::Schedule& s) {
  constexpr int kStreams = static_cast<int>(model::Stream::kDpComm) + 1;
  std::vector<std::vector<int>> pred(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    std::array<int, kStreams> last;
    last.fill(-1);
    for (size_t i = 0; i < s.ranks[r].ops.size(); ++i) {
      int& l = last[static_cast<int>(s.ranks[r].ops[i].stream)];
      pred[r].push_back(l);
      l = static_cast<int>(i);
    }
  }
  return pred;
}

}  // namespace

std::vector<PathSegment> critical_path(const model::Schedule& s, const EventTimeline& t) {
  std::vector<PathSegment> path;
  if (t.timing.empty()) return path;
  const double eps = 1e-9 * std::max(1.0, t.iteration_s);
  const std::vector<std::vector<int>> pred = stream_predecessors(s);

  // The op that ends last (first found on ties).
  int rep = -1, rank = -1, op = -1;
  double latest = -1;
  for (int q = 0; q < t.replicas; ++q)
    for (size_t r = 0; r < t.timing[q].size(); ++r)
      for (size_t i = 0; i < t.timing[q][r].size(); ++i)
        if (t.timing[q][r][i].end_s > latest) {
          latest = t.timing[q][r][i].end_s;
          rep = q, rank = static_cast<int>(r), op = static_cast<int>(i);
        }
  if (op < 0) return path;

  while (true) {
    const Op& o = s.ranks[rank].ops[op];
    double start = t.at(rep, rank, op).start_s;
    const double end = t.at(rep, rank, op).end_s;
    if (model::is_recv(o.kind) && end > start + eps) {
      rank = o.peer;
      op = o.match;
      continue;
    }
    if (model::is_dp_collective(o.kind) && t.replicas > 1) {
      for (int q = 0; q < t.replicas; ++q) {
        if (t.at(q, rank, op).start_s > start) {
          start = t.at(q, rank, op).start_s;
          rep = q;
        }
      }
    }
    if (end > start) path.push_back(PathSegment{rep, rank, op, start, end});
    // The predecessor that ended last.
    int best = pred[rank][op];
    for (int d : o.deps)
      if (best < 0 || t.at(rep, rank, d).end_s > t.at(rep, rank, best).end_s) best = d;
    const double best_end = best >= 0 ? t.at(rep, rank, best).end_s : 0.0;
    if (start > best_end + eps) path.push_back(PathSegment{rep, rank, -1, best_end, start});
    if (best < 0) break;
    op = best;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

PathBreakdown attribute_path(const model::Schedule& s, const std::vector<PathSegment>& path,
                             const PartsFn& parts, const std::vector<std::vector<OpParts>>& busy) {
  PathBreakdown out;
  model::TimeBreakdown& b = out.breakdown;
  double path_compute_s = 0;
  for (const PathSegment& seg : path) {
    const double len = seg.length_s();
    if (seg.op < 0) {
      b.bubble_s += len;
      continue;
    }
    const Op& o = s.ranks[seg.pp_rank].ops[seg.op];
    switch (o.kind) {
      case OpKind::kForward:
      case OpKind::kBackward:
        path_compute_s += len;
        break;
      case OpKind::kDataLoad:
        b.data_s += len;
        break;
      case OpKind::kOptimizerStep: {
        const OpParts p = parts(seg.replica, seg.pp_rank, o);
        const double total = p.total();
        if (!(total > 0)) {
          b.optimizer_s += len;
          break;
        }
        b.optimizer_s += len * p.optimizer / total;
        b.embedding_sync_s += len * p.embedding_sync / total;
        b.grad_norm_s += len * p.grad_norm / total;
        b.host_s += len * p.host / total;
        b.pp_exposed_s += len * p.pp / total;
        break;
      }
      case OpKind::kDpAllGather:
      case OpKind::kDpReduceScatter:
      case OpKind::kDpAllReduce:
        b.dp_exposed_s += len;
        break;
      default:  // sends (receives never form segments of their own)
        b.pp_exposed_s += len;
        break;
    }
  }
  // The critical rank: the most forward + backward time.
  double most = -1;
  for (size_t q = 0; q < busy.size(); ++q) {
    for (size_t r = 0; r < busy[q].size(); ++r) {
      if (busy[q][r].total() > most) {
        most = busy[q][r].total();
        out.critical_replica = static_cast<int>(q);
        out.critical_rank = static_cast<int>(r);
      }
    }
  }
  if (most > 0) {
    const OpParts& c = busy[out.critical_replica][out.critical_rank];
    const double on_path = std::min(path_compute_s, most);
    const double scale = on_path / most;
    b.compute_s = c.compute * scale;
    b.recompute_s = c.recompute * scale;
    b.tp_exposed_s = c.tp * scale;
    b.bubble_s += path_compute_s - on_path;
    out.busy_s = on_path;
  } else {
    b.bubble_s += path_compute_s;
  }
  return out;
}

}  // namespace megascale::sim
