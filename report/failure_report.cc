// report/failure_report.cc: a step with a failing host -> JSON / text.
#include "report/failure_report.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "sim/comm_costs.h"

namespace megascale::report {
namespace {

using base::Json;

const char* state_name(sim::RankWait::State st) {
  switch (st) {
    case sim::RankWait::State::kFinished: return "finished";
    case sim::RankWait::State::kDead: return "down";
    case sim::RankWait::State::kBlocked: return "blocked";
  }
  return "?";
}

// Ranks by when they stopped (the failed one first).
std::vector<const sim::RankWait*> stop_order(const sim::HangReport& h) {
  std::vector<const sim::RankWait*> order;
  for (const sim::RankWait& w : h.ranks) order.push_back(&w);
  std::stable_sort(order.begin(), order.end(), [](const sim::RankWait* a, const sim::RankWait* b) {
    const bool da = a->state == sim::RankWait::State::kDead, db = b->state == sim::RankWait::State::kDead;
    if (da != db) return da;
    return a->last_progress_s < b->last_progress_s;
  });
  return order;
}

// The first GPU of a pipeline rank of a simulated replica.
int first_gpu(const model::Scenario& s, const sim::FailureResult& f, int sim_replica, int rank) {
  return sim::gpu_of(s.parallel, 0, f.replicas[sim_replica], rank);
}

}  // namespace

Json failure_json(const model::Scenario& s, const sim::FailureResult& f, double wall_s,
                  const std::vector<std::string>& files) {
  const sim::HangReport& h = f.hang;
  Json j;
  j["scenario"] = s.name;
  j["fidelity"] = "event";
  j["gpu"] = f.gpu;
  j["dp_replica"] = f.dp_replica;
  j["pp_rank"] = f.pp_rank;
  j["tp_rank"] = f.tp_rank;
  j["at_s"] = f.at_s;
  j["healthy_step_s"] = f.healthy_step_s;
  j["hung"] = h.hung;
  j["host_went_down"] = h.failed_at_s >= 0;
  j["blocked_ranks"] = h.blocked;
  j["ranks_waiting_at_step_end"] = h.waiting_at_step_end;
  j["last_progress_s"] = h.last_progress_s;
  Json roots = Json::array(), ranks = Json::array();
  for (const auto& [i, rank] : h.roots) {
    Json x;
    x["dp_replica"] = f.replicas[i];
    x["pp_rank"] = rank;
    x["first_gpu"] = first_gpu(s, f, i, rank);
    x["gpus"] = s.parallel.tp;
    roots.push_back(x);
  }
  for (const sim::RankWait* w : stop_order(h)) {
    Json x;
    x["dp_replica"] = f.replicas[w->replica];
    x["pp_rank"] = w->rank;
    x["state"] = state_name(w->state);
    x["last_progress_s"] = w->last_progress_s;
    x["waiting_on"] = w->blocked_on;
    ranks.push_back(x);
  }
  j["wait_chains_end_at"] = roots;
  j["ranks"] = ranks;
  j["simulated_dp_replicas"] = f.replicas;
  j["files"] = files;
  j["wall_time_s"] = wall_s;
  return j;
}

std::string failure_text(const model::Scenario& s, const sim::FailureResult& f, double wall_s,
                         const std::vector<std::string>& files) {
  const model::ParallelConfig& p = s.parallel;
  const sim::HangReport& h = f.hang;
  std::string text = s.name + " (" + s.source + ")\n";
  auto to = std::back_inserter(text);
  // dp_replica is the folded gradient rank (model/config.h): with CP, the user's
  // replica and CP rank.
  const std::string where = p.cp > 1 ? fmt::format("DP replica {}, CP rank {}", f.dp_replica / p.cp, f.dp_replica % p.cp)
                                     : fmt::format("DP replica {}", f.dp_replica);
  fmt::format_to(to, "  failure: GPU {} ({}, pipeline stage {}, TP rank {}) goes down {:.3f} s into a {:.3f} s step\n",
                 f.gpu, where, f.pp_rank, f.tp_rank, f.at_s, f.healthy_step_s);
  if (!h.hung) {
    text += h.failed_at_s < 0
                ? std::string("  the step had ended: nothing to see in it; the next step hangs at its first\n"
                              "  collective\n")
                : std::string("  the host had done its part of the step: the step ends; every rank then\n"
                              "  waits for it in the end-of-step all-reduce and the next step\n");
  } else {
    fmt::format_to(to,
                   "  the step hangs: {} of {} simulated ranks are stuck ({} in a receive or collective, {} at the "
                   "end-of-step all-reduce)\n",
                   h.blocked + h.waiting_at_step_end, static_cast<int>(h.ranks.size()) - 1, h.blocked,
                   h.waiting_at_step_end);
    const std::vector<const sim::RankWait*> order = stop_order(h);
    const size_t shown = std::min<size_t>(order.size(), 12);
    for (size_t k = 0; k < shown; ++k) {
      const sim::RankWait& w = *order[k];
      fmt::format_to(to, "    replica {:4d} stage {:2d}  {:<8} last progress {:.3f} s: {}\n", f.replicas[w.replica],
                     w.rank, state_name(w.state), w.last_progress_s, w.blocked_on);
    }
    if (order.size() > shown) fmt::format_to(to, "    ... {} more\n", order.size() - shown);
    for (const auto& [i, rank] : h.roots) {
      const int g = first_gpu(s, f, i, rank);
      fmt::format_to(to, "  the wait chains end at replica {} stage {} (GPUs {}-{}){}\n", f.replicas[i], rank, g,
                     g + p.tp - 1, i == f.failed_sim_replica && rank == f.pp_rank ? ": the failed host" : "");
    }
    fmt::format_to(to, "  no simulated rank moves after {:.3f} s; the job waits for detection (heartbeats,\n",
                   h.last_progress_s);
    text += "  NCCL timeout: [recovery]) and a restart from the last checkpoint: `megascale plan`\n";
  }
  fmt::format_to(to, "  simulated: {} {} x {} pipeline ranks, wall time {:.3f} s\n", f.replicas.size(),
                 p.cp > 1 ? "DP x CP rank group(s)" : "DP replica(s)", p.pp, wall_s);
  for (const std::string& w : files) text += "    wrote " + w + "\n";
  return text;
}

}  // namespace megascale::report
