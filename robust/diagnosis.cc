// robust/diagnosis.cc: see diagnosis.h.
#include "robust/diagnosis.h"

#include <algorithm>
#include <map>
#include <set>

// GCC 12 at -O1 under the sanitizers (scripts/sanitize.sh) reports
// -Wmaybe-uninitialized inside libstdc++'s std::regex (std::function in its
// NFA states): a known false positive of the compiler in the library's code,
// silenced for that header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop

namespace megascale::robust {
namespace {

std::string where(const RankStatus& s) {
  if (s.coll_state.empty() || s.coll_state == "idle" || s.coll_op.empty()) return "not in a collective";
  std::string w = s.coll_op;
  if (s.coll_seq > 0) w += " #" + std::to_string(s.coll_seq);
  w += " on " + s.coll_group;
  if (s.coll_peer >= 0 && s.coll_seq == 0) w += " (peer rank " + std::to_string(s.coll_peer) + ")";
  return w;
}

}  // namespace

HangDiagnosis diagnose_hang(const std::vector<RankStatus>& ranks) {
  HangDiagnosis d;
  std::map<int, const RankStatus*> by_rank;
  for (const RankStatus& s : ranks) by_rank[s.rank] = &s;
  for (const RankStatus& s : ranks) {
    if (s.coll_state != "posted") continue;
    if (s.coll_seq > 0) {
      for (int m : group_members(s.coll_group)) {
        if (m == s.rank) continue;
        const auto it = by_rank.find(m);
        if (it == by_rank.end()) {
          d.edges.push_back({s.rank, m, "no status from rank " + std::to_string(m)});
          continue;
        }
        const RankStatus& peer = *it->second;
        const auto seq = peer.seq_by_group.find(s.coll_group);
        const int64_t at = seq == peer.seq_by_group.end() ? 0 : seq->second;
        const bool posted_same = peer.coll_group == s.coll_group && peer.coll_seq == s.coll_seq &&
                                 peer.coll_state == "posted";
        if (at < s.coll_seq) {
          d.edges.push_back({s.rank, m,
                             s.coll_op + " #" + std::to_string(s.coll_seq) + " on " + s.coll_group + ": rank " +
                                 std::to_string(m) + " has entered only #" + std::to_string(at)});
        } else if (at == s.coll_seq && !posted_same) {
          d.edges.push_back({s.rank, m,
                             s.coll_op + " #" + std::to_string(s.coll_seq) + " on " + s.coll_group + ": rank " +
                                 std::to_string(m) + " entered it and never posted its data"});
        }
      }
    } else if (s.coll_peer >= 0) {
      d.edges.push_back({s.rank, s.coll_peer, s.coll_op + " on " + s.coll_group + " for rank " +
                                                  std::to_string(s.coll_peer)});
    }
  }
  std::map<int, std::vector<int>> out;
  for (const WaitEdge& e : d.edges) out[e.from].push_back(e.to);
  // Follow every chain from every waiting rank to the ranks that wait for nobody.
  std::set<int> roots;
  for (const auto& [start, _] : out) {
    std::vector<int> stack = {start};
    std::set<int> seen;
    while (!stack.empty()) {
      const int r = stack.back();
      stack.pop_back();
      if (!seen.insert(r).second) continue;
      const auto it = out.find(r);
      if (it == out.end()) {
        roots.insert(r);
        continue;
      }
      for (int next : it->second) stack.push_back(next);
    }
  }
  d.culprits.assign(roots.begin(), roots.end());
  for (const RankStatus& s : ranks) {
    std::string state = out.count(s.rank) ? "blocked" : roots.count(s.rank) ? "holding" : "idle";
    std::string line = "rank " + std::to_string(s.rank) + " node " + std::to_string(s.node) + "  " + state +
                       "  step " + std::to_string(s.step) + ", " + where(s);
    if (s.coll_state == "entered") line += ", entered and never posted";
    bool first = true;
    for (const WaitEdge& e : d.edges) {
      if (e.from != s.rank) continue;
      line += first ? ": waits for rank " : ", rank ";
      line += std::to_string(e.to) + " (" + e.why + ")";
      first = false;
    }
    d.lines.push_back(line);
  }
  for (int r : d.culprits) {
    const auto it = by_rank.find(r);
    d.lines.push_back("the wait chains end at rank " + std::to_string(r) +
                      (it != by_rank.end() ? " (node " + std::to_string(it->second->node) + ")" : std::string()));
  }
  if (d.culprits.empty()) d.lines.push_back("no rank waits for another: the wait-for chain names nobody");
  return d;
}

int match_detection(const std::vector<FiredFault>& fired, const Detection& d) {
  int match = -1, best = -1;
  for (size_t i = 0; i < fired.size(); ++i) {
    const FiredFault& f = fired[i];
    if (f.matched || f.at_s > d.at_s + 0.5) continue;
    const int score = 2 * ((f.fault == "slow" || f.fault == "slow_all") == (d.kind == "slow")) + (d.rank >= 0 && f.rank == d.rank);
    if (score > best) {  // strictly: the earliest of equal scores stays
      best = score;
      match = static_cast<int>(i);
    }
  }
  return match;
}

std::optional<std::string> engine_error_text(const std::string& line) {
  static const std::regex engine_re(R"(megascale train: rank \d+: (.*))");
  static const std::regex diverged_re(R"(megascale train: (step \d+: .*))");
  const std::optional<LogFinding> f = scan_log_line(line, -1);
  if (!f || (f->kind != "engine_error" && f->kind != "checkpoint_error" && f->kind != "diverged")) return std::nullopt;
  std::smatch m;
  if (!std::regex_search(f->line, m, f->kind == "diverged" ? diverged_re : engine_re)) return std::nullopt;
  return f->kind + "|" + m[1].str();
}

std::optional<LogFinding> scan_log_line(const std::string& line, int rank_of_file) {
  static const std::regex signal_re(R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+))");
  static const std::regex checksum_re(R"(step_(\d+)/shard_\d+\.msck \(rank (\d+)\): checksum mismatch)");
  static const std::regex engine_re(R"(megascale train: rank (\d+): (.*))");
  static const std::regex diverged_re(R"(megascale train: step (\d+): .*the training diverged)");
  std::smatch m;
  if (std::regex_search(line, m, signal_re)) {
    return LogFinding{"signal", std::stoi(m[1]), -1, line};
  }
  if (std::regex_search(line, m, checksum_re)) {
    return LogFinding{"checksum_mismatch", std::stoi(m[2]), std::stoll(m[1]), line};
  }
  if (std::regex_search(line, m, diverged_re)) {
    return LogFinding{"diverged", -1, std::stoll(m[1]), line};
  }
  if (std::regex_search(line, m, engine_re)) {
    const std::string what = m[2];
    // "refused: the shard(s) of rank(s) ..." is a peer's echo of another rank's error.
    if (what.find("failed their checks") != std::string::npos) return std::nullopt;
    const bool ckpt = what.find("checkpoint") != std::string::npos || what.find(".msck") != std::string::npos;
    return LogFinding{ckpt ? "checkpoint_error" : "engine_error", std::stoi(m[1]), -1, line};
  }
  for (const char* crash : {"Segmentation fault", "Bus error", "Aborted (core dumped)", "std::bad_alloc"}) {
    if (line.find(crash) != std::string::npos) return LogFinding{"crash", rank_of_file, -1, line};
  }
  if (line.find("MPI_ERR") != std::string::npos) return LogFinding{"mpi_error", rank_of_file, -1, line};
  return std::nullopt;
}

}  // namespace megascale::robust
