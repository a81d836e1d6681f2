// sim/hang_analysis.cc: see hang_analysis.h.
#include "sim/hang_analysis.h"

#include <algorithm>
#include <array>
#include <set>

namespace megascale::sim {
namespace {

using model::Op;
using model::OpKind;

constexpr int kStreams = static_cast<int>(model::Stream::kDpComm) + 1;


std::string op_name(const Op& op) {
  std::string out = model::to_string(op.kind);
  if (op.microbatch >= 0) out += " mb " + std::to_string(op.microbatch);
  if (op.chunk >= 0) out += " chunk " + std::to_string(op.chunk);
  return out;
}

struct Reason {
  std::vector<std::pair<int, int>> targets;
  std::string text;
};

// Why op `index` of (replica, rank) has not ended, following unfinished
// dependencies on the same rank down to a receive or a collective.
Reason reason_of(const model::Schedule& s, const EventTimeline& t, int replica, int rank, int index) {
  while (true) {
    const Op& op = s.ranks[rank].ops[index];
    const OpState st = t.state[replica][rank][index];
    if (st == OpState::kStarted) {
      if (model::is_recv(op.kind)) {
        return {{{replica, op.peer}}, op_name(op) + " from pp rank " + std::to_string(op.peer)};
      }
      if (model::is_send(op.kind)) {
        // A transfer the receiver's NICs never take in (sim/event_engine.h:
        // receiving-side NIC sharing): it waits for its peer.
        return {{{replica, op.peer}}, op_name(op) + " to pp rank " + std::to_string(op.peer) + " (never received)"};
      }
      if (model::is_dp_collective(op.kind)) {
        Reason r;
        for (int j = 0; j < t.replicas; ++j)
          if (j != replica && t.state[j][rank][index] == OpState::kNotStarted) r.targets.push_back({j, rank});
        r.text = op_name(op) + ": " + std::to_string(r.targets.size()) + " replica(s) never arrived";
        return r;
      }
      return {{}, op_name(op) + " (running, never ended)"};
    }
    int next = -1;
    for (int d : op.deps) {
      if (t.state[replica][rank][d] != OpState::kEnded) {
        next = d;
        break;
      }
    }
    if (next < 0) return {{}, op_name(op) + " (never started)"};
    index = next;
  }
}

}  // namespace

HangReport analyse_hang(const model::Schedule& s, const EventTimeline& t, const HostFailure& failure) {
  HangReport out;
  out.hung = !t.complete;
  out.failed_at_s = t.failed_at_s;
  const int ranks = static_cast<int>(s.ranks.size());
  for (int i = 0; i < t.replicas; ++i) {
    for (int r = 0; r < ranks; ++r) {
      RankWait w;
      w.replica = i;
      w.rank = r;
      const std::vector<Op>& ops = s.ranks[r].ops;
      std::array<int, kStreams> first{};
      first.fill(-1);
      for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
        if (t.state[i][r][k] == OpState::kEnded) {
          w.last_progress_s = std::max(w.last_progress_s, t.timing[i][r][k].end_s);
        } else {
          int& f = first[static_cast<int>(ops[k].stream)];
          if (f < 0) f = k;
        }
      }
      const bool dead = t.failed_at_s >= 0 && i == failure.replica && r == failure.rank;
      const bool unfinished = std::any_of(first.begin(), first.end(), [](int k) { return k >= 0; });
      if (dead) {
        w.state = RankWait::State::kDead;
        w.blocked_on = "host down (no heartbeat)";
      } else if (unfinished) {
        w.state = RankWait::State::kBlocked;
        ++out.blocked;
        out.last_progress_s = std::max(out.last_progress_s, w.last_progress_s);
        std::set<std::pair<int, int>> targets;
        for (int k : first) {
          if (k < 0) continue;
          const Reason why = reason_of(s, t, i, r, k);
          if (w.blocked_op < 0) {
            w.blocked_op = k;
            w.blocked_on = why.text;
          }
          targets.insert(why.targets.begin(), why.targets.end());
        }
        targets.erase({i, r});
        w.waits_for.assign(targets.begin(), targets.end());
      }
      if (dead) {  // the earliest op it never finished
        for (int k : first)
          if (k >= 0 && (w.blocked_op < 0 || k < w.blocked_op)) w.blocked_op = k;
      }
      out.ranks.push_back(std::move(w));
    }
  }

  // In a hung step, a rank that finished waits in the end-of-step all-reduce for
  // every rank that did not.
  if (out.hung) {
    std::vector<std::pair<int, int>> unfinished;
    for (const RankWait& w : out.ranks)
      if (w.state != RankWait::State::kFinished) unfinished.push_back({w.replica, w.rank});
    for (RankWait& w : out.ranks) {
      if (w.state != RankWait::State::kFinished) continue;
      w.waits_for = unfinished;
      w.blocked_on = "end of step (global gradient-norm all-reduce)";
      ++out.waiting_at_step_end;
      out.last_progress_s = std::max(out.last_progress_s, w.last_progress_s);
    }
  }

  // Follow the wait-for edges from every waiting rank to where they end: a dead
  // rank, or a blocked one that waits for no other rank.
  auto at = [&](std::pair<int, int> node) -> const RankWait& {
    return out.ranks[static_cast<size_t>(node.first) * ranks + node.second];
  };
  std::set<std::pair<int, int>> roots, seen;
  for (const RankWait& w : out.ranks) {
    if (w.state == RankWait::State::kDead || w.waits_for.empty()) {
      if (w.state == RankWait::State::kBlocked) roots.insert({w.replica, w.rank});
      continue;
    }
    std::vector<std::pair<int, int>> stack = {{w.replica, w.rank}};
    while (!stack.empty()) {
      const std::pair<int, int> node = stack.back();
      stack.pop_back();
      if (!seen.insert(node).second) continue;
      const RankWait& n = at(node);
      if (n.state == RankWait::State::kDead || (n.state == RankWait::State::kBlocked && n.waits_for.empty())) {
        roots.insert(node);
        continue;
      }
      for (const std::pair<int, int>& next : n.waits_for) stack.push_back(next);
    }
  }
  out.roots.assign(roots.begin(), roots.end());
  return out;
}

}  // namespace megascale::sim
