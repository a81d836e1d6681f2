// model/replay.cc: dependency-driven replay of a Schedule (see replay.h).
//
// Every op of every rank is a node; its predecessors are the previous op on its
// stream of its rank, its deps and, for a Recv, the matching Send. Nodes are
// timed in topological order (Kahn's algorithm); nodes left untimed form a cycle,
// i.e. a deadlock.

#include "model/replay.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace megascale::model {
namespace {

struct OpRef {
  int pp_rank;
  int index;
};

// All ops of all ranks numbered rank by rank; id = rank_offset[rank] + index.
struct OpGraph {
  std::vector<int> rank_offset;              // size P + 1
  std::vector<OpRef> ref;                    // [id]
  std::vector<int> stream_predecessor;       // [id] -> id, or -1
  std::vector<int> matching_send;            // [id] -> id for a Recv, else -1
  std::vector<std::vector<int>> successors;  // [id] -> ids that wait on it
  std::vector<int> untimed_predecessors;     // [id]
};

OpKind send_kind_for(OpKind recv) {
  return recv == OpKind::kRecvActivation ? OpKind::kSendActivation : OpKind::kSendGradient;
}

std::string describe(const Schedule& s, OpRef r) {
  const Op& op = s.ranks[r.pp_rank].ops[r.index];
  return "pp rank " + std::to_string(r.pp_rank) + " op " + std::to_string(r.index) + " (" +
         to_string(op.kind) + " mb " + std::to_string(op.microbatch) + " chunk " +
         std::to_string(op.chunk) + ")";
}

// The id of the Send that Recv `r` matches. Throws std::invalid_argument when
// `match` does not name a send of the right kind addressed to this rank.
int matching_send_id(const Schedule& s, const std::vector<int>& rank_offset, OpRef r) {
  const Op& recv = s.ranks[r.pp_rank].ops[r.index];
  auto fail = [&] {
    throw std::invalid_argument("replay: " + describe(s, r) +
                                " does not match a send addressed to it");
  };
  if (recv.peer < 0 || recv.peer >= static_cast<int>(s.ranks.size())) fail();
  if (recv.match < 0 || recv.match >= static_cast<int>(s.ranks[recv.peer].ops.size())) fail();
  const Op& send = s.ranks[recv.peer].ops[recv.match];
  if (send.kind != send_kind_for(recv.kind) || send.peer != r.pp_rank) fail();
  return rank_offset[recv.peer] + recv.match;
}

void add_edge(OpGraph& g, int from, int to) {
  g.successors[from].push_back(to);
  ++g.untimed_predecessors[to];
}

OpGraph build_graph(const Schedule& s) {
  OpGraph g;
  const int ranks = static_cast<int>(s.ranks.size());
  g.rank_offset.assign(ranks + 1, 0);
  for (int r = 0; r < ranks; ++r)
    g.rank_offset[r + 1] = g.rank_offset[r] + static_cast<int>(s.ranks[r].ops.size());
  const int total = g.rank_offset[ranks];
  g.ref.resize(total);
  g.stream_predecessor.assign(total, -1);
  g.matching_send.assign(total, -1);
  g.successors.resize(total);
  g.untimed_predecessors.assign(total, 0);

  constexpr int kStreams = static_cast<int>(Stream::kDpComm) + 1;
  for (int r = 0; r < ranks; ++r) {
    std::array<int, kStreams> last_on_stream;
    last_on_stream.fill(-1);
    const std::vector<Op>& ops = s.ranks[r].ops;
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      const int id = g.rank_offset[r] + i;
      g.ref[id] = OpRef{r, i};
      int& previous = last_on_stream[static_cast<int>(ops[i].stream)];
      if (previous >= 0) add_edge(g, previous, id);
      g.stream_predecessor[id] = previous;
      previous = id;
      for (int dep : ops[i].deps) {
        if (dep < 0 || dep >= i)
          throw std::invalid_argument("replay: " + describe(s, {r, i}) + " depends on op " +
                                      std::to_string(dep) + ", not an earlier op");
        add_edge(g, g.rank_offset[r] + dep, id);
      }
      if (is_recv(ops[i].kind)) {
        g.matching_send[id] = matching_send_id(s, g.rank_offset, {r, i});
        add_edge(g, g.matching_send[id], id);
      }
    }
  }
  return g;
}

// REQUIRES: some op is untimed. The first untimed op of a rank has all its
// same-rank predecessors timed, so it is a Recv whose Send never runs.
[[noreturn]] void report_deadlock(const Schedule& s, const OpGraph& g,
                                  const std::vector<bool>& timed) {
  const auto first_untimed = std::find(timed.begin(), timed.end(), false) - timed.begin();
  const int blocked = static_cast<int>(first_untimed);
  const int send = g.matching_send[blocked];
  throw std::logic_error("replay: deadlock: " + describe(s, g.ref[blocked]) +
                         " waits for " + describe(s, g.ref[send]) + ", which never runs");
}

double checked_duration_s(const Schedule& s, const DurationFn& duration, OpRef r) {
  const double d = duration(r.pp_rank, s.ranks[r.pp_rank].ops[r.index]);
  if (!(d >= 0) || !std::isfinite(d))
    throw std::invalid_argument("replay: duration of " + describe(s, r) +
                                " is negative or not finite");
  return d;
}

}  // namespace

ReplayResult replay(const Schedule& s, const DurationFn& duration) {
  OpGraph g = build_graph(s);
  const int total = static_cast<int>(g.ref.size());
  std::vector<OpTiming> timing(total);
  std::vector<bool> timed(total, false);
  ReplayResult result;
  result.compute_busy_s.assign(s.ranks.size(), 0.0);

  std::vector<int> ready;
  for (int id = 0; id < total; ++id)
    if (g.untimed_predecessors[id] == 0) ready.push_back(id);
  while (!ready.empty()) {
    const int id = ready.back();
    ready.pop_back();
    const OpRef r = g.ref[id];
    const Op& op = s.ranks[r.pp_rank].ops[r.index];
    double start_s = g.stream_predecessor[id] >= 0 ? timing[g.stream_predecessor[id]].end_s : 0.0;
    for (int dep : op.deps)
      start_s = std::max(start_s, timing[g.rank_offset[r.pp_rank] + dep].end_s);
    double end_s = 0;
    if (is_recv(op.kind)) {
      end_s = std::max(start_s, timing[g.matching_send[id]].end_s);
    } else {
      const double duration_s = checked_duration_s(s, duration, r);
      end_s = start_s + duration_s;
      if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward)
        result.compute_busy_s[r.pp_rank] += duration_s;
    }
    timing[id] = OpTiming{start_s, end_s};
    timed[id] = true;
    result.iteration_s = std::max(result.iteration_s, end_s);
    for (int next : g.successors[id])
      if (--g.untimed_predecessors[next] == 0) ready.push_back(next);
  }
  if (std::find(timed.begin(), timed.end(), false) != timed.end()) report_deadlock(s, g, timed);

  result.timing.resize(s.ranks.size());
  for (size_t rank = 0; rank < s.ranks.size(); ++rank)
    result.timing[rank].assign(timing.begin() + g.rank_offset[rank],
                               timing.begin() + g.rank_offset[rank + 1]);
  return result;
}

double bubble_fraction(const ReplayResult& r) {
  const double busy_s =
      r.compute_busy_s.empty()
          ? 0.0
          : *std::max_element(r.compute_busy_s.begin(), r.compute_busy_s.end());
  if (!(busy_s > 0))
    throw std::invalid_argument("bubble_fraction: no Forward/Backward time in the replay");
  return (r.iteration_s - busy_s) / busy_s;
}

}  // namespace megascale::model
