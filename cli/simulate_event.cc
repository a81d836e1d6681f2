// cli/simulate_event.cc: `megascale simulate --fidelity event`: scenario ->
// sim::simulate_job (sim/event_run.h) -> report, trace and heat-map files.
#include "cli/simulate_event.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "base/json.h"
#include "cli/report.h"
#include "base/text_file.h"
#include "model/breakdown_chart.h"
#include "model/hardware.h"
#include "model/profile.h"
#include "sim/event_run.h"
#include "sim/failure_sim.h"
#include "sim/heatmap.h"
#include "sim/job_sim.h"
#include "sim/network_crosscheck.h"
#include "sim/op_costs.h"
#include "sim/trace_writer.h"

namespace megascale::cli {
namespace {


// estimate_json with "fidelity": "event" and the event-level fields appended.
Json event_json(const sim::JobResult& res, const sim::SimOptions& o, double wall_s,
                const std::vector<std::string>& files) {
  const model::Scenario& s = res.scenario;
  const model::Estimate& e = res.estimate;
  Json extra = estimate_json(s, e, "event");
  extra["wall_time_s"] = wall_s;
  const model::TimeBreakdown& b = e.breakdown;
  Json exposed;
  exposed["tp"] = b.tp_exposed_s;
  exposed["pp"] = b.pp_exposed_s;
  exposed["pp_bubble"] = b.bubble_s;
  exposed["dp"] = b.dp_exposed_s;
  exposed["data"] = b.data_s;
  extra["exposed_s"] = exposed;
  extra["steps"] = static_cast<int64_t>(res.steps.size());
  Json times = Json::array();
  for (const sim::StepResult& st : res.steps) times.push_back(st.time_s);
  extra["step_times_s"] = times;
  Json comm;
  comm["model"] = sim::to_string(res.comm.model);
  comm["p2p"] = res.comm.p2p_s;
  // Per sending pipeline rank (network model; empty otherwise: every send takes p2p).
  comm["p2p_to_next_stage"] = res.comm.p2p_next_s;
  comm["p2p_to_previous_stage"] = res.comm.p2p_prev_s;
  comm["dp_reduce_chunk"] = e.dp_reduce_scatter_chunk_s;
  comm["dp_all_gather_chunk"] = e.dp_all_gather_chunk_s;
  comm["embedding_sync"] = res.comm.embedding_sync_s;
  comm["solves"] = res.comm.solves;
  comm["notes"] = res.comm.notes;
  extra["comm_s"] = comm;
  const sim::StepResult& first = res.steps.front();
  int most_replicas = 0, distinct = 0;
  bool exact = true;
  int64_t ops = 0;
  for (const sim::StepResult& st : res.steps) {
    most_replicas = std::max(most_replicas, static_cast<int>(st.replicas.size()));
    distinct = std::max(distinct, st.distinct_replicas);
    exact = exact && st.exact;
    ops += st.stats.ops;
  }
  Json ev;
  ev["simulated_replicas_max"] = most_replicas;
  ev["distinct_replicas_max"] = distinct;
  ev["replica_choice_exact"] = exact;
  ev["actors"] = first.stats.actors;
  ev["hosts"] = first.stats.hosts;
  ev["ops_simulated"] = ops;
  ev["critical_pp_rank"] = first.critical_rank;
  ev["critical_dp_replica"] = first.critical_replica;
  extra["event"] = ev;
  Json var;
  var["jitter_sigma"] = o.variability.jitter_sigma;
  var["seed"] = static_cast<int64_t>(o.variability.seed);
  var["gpu_speed_sigma"] = o.variability.gpu_sigma;
  var["straggler_factor"] = o.variability.stragglers.factor;
  var["straggler_fraction"] = o.variability.stragglers.machine_fraction;
  var["straggler_per_step"] = o.variability.stragglers.per_step;
  var["straggler_machines_step0"] = first.straggler_machines;
  var["straggler_gpus"] = o.variability.stragglers.gpus;
  extra["variability"] = var;
  Json ana;
  ana["iteration_time_s"] = res.analytical.iteration_time_s;
  ana["mfu"] = res.analytical.mfu;
  extra["analytical"] = ana;
  extra["files"] = files;
  return extra;
}

std::string event_text(const sim::JobResult& res, const sim::SimOptions& o, double wall_s,
                       const std::vector<std::string>& files) {
  const model::Estimate& e = res.estimate;
  std::string out = estimate_text(res.scenario, e);
  std::vector<double> t;
  for (const sim::StepResult& st : res.steps) t.push_back(st.time_s);
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
  auto to = std::back_inserter(out);
  fmt::format_to(to, "  event-level (SimGrid): {} step(s), mean {:.4f} s, min {:.4f} s, max {:.4f} s\n", t.size(),
                 e.iteration_time_s, *lo, *hi);
  fmt::format_to(to, "    analytical estimate {:.4f} s (MFU {:.1f}%); event / analytical = {:.4f}\n",
                 res.analytical.iteration_time_s, 100 * res.analytical.mfu,
                 e.iteration_time_s / res.analytical.iteration_time_s);
  const model::TimeBreakdown& b = e.breakdown;
  fmt::format_to(to, "    exposed by dimension: TP {:.4f} s, PP {:.4f} s + bubble {:.4f} s, DP {:.4f} s\n",
                 b.tp_exposed_s, b.pp_exposed_s, b.bubble_s, b.dp_exposed_s);
  // Fastest boundary with a send (V = 1 leaves one direction of the end stages empty).
  double p2p_min_s = res.comm.p2p_s;
  for (const std::vector<double>* v : {&res.comm.p2p_next_s, &res.comm.p2p_prev_s})
    for (double x : *v)
      if (x > 0) p2p_min_s = std::min(p2p_min_s, x);
  const std::string p2p = p2p_min_s < res.comm.p2p_s
                              ? fmt::format("p2p {:.3f}-{:.3f} ms by boundary", p2p_min_s * 1e3, res.comm.p2p_s * 1e3)
                              : fmt::format("p2p {:.3f} ms", res.comm.p2p_s * 1e3);
  fmt::format_to(to, "    communication: {} ({}, DP reduce {:.2f} ms / all-gather {:.2f} ms per chunk)\n",
                 sim::to_string(res.comm.model), p2p, e.dp_reduce_scatter_chunk_s * 1e3, e.dp_all_gather_chunk_s * 1e3);
  int most = 0;
  for (const sim::StepResult& st : res.steps) most = std::max(most, static_cast<int>(st.replicas.size()));
  fmt::format_to(to, "    simulated: up to {} DP replica(s) x {} pipeline ranks; GPU speed sigma {:.3f}, jitter sigma {:.3f}; ",
                 most, res.scenario.parallel.pp, o.variability.gpu_sigma, o.variability.jitter_sigma);
  fmt::format_to(to, "stragglers: {} GPU(s) + {:.2f}% of machines at x{:.2f}\n", o.variability.stragglers.gpus.size(),
                 100 * o.variability.stragglers.machine_fraction, o.variability.stragglers.factor);
  // A fraction that rounds to no machine at all does nothing: say so.
  const double fraction = o.variability.stragglers.machine_fraction;
  const int machines = std::max(1, res.scenario.parallel.gpus() / std::max(1, res.scenario.hardware.gpus_per_node));
  if (fraction > 0 && std::lround(fraction * machines) == 0) {
    fmt::format_to(to,
                   "    note: --stragglers {:.4g} of {} machines rounds to no machine: no straggler simulated "
                   "(the smallest effective fraction here is {:.4g})\n",
                   fraction, machines, 0.5 / machines);
  }
  fmt::format_to(to, "    wall time {:.3f} s\n", wall_s);
  for (const std::string& f : files) out += "    wrote " + f + "\n";
  return out;
}

const char* state_name(sim::RankWait::State st) {
  switch (st) {
    case sim::RankWait::State::kFinished: return "finished";
    case sim::RankWait::State::kDead: return "down";
    case sim::RankWait::State::kBlocked: return "blocked";
  }
  return "?";
}

// `simulate --fail-gpu G --fail-at T`: the step with GPU G's host failing.
int simulate_failure_report(const model::Scenario& s, const EventRequest& r, const sim::SimOptions& o,
                            std::ostream& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const sim::FailureResult f = sim::simulate_failure(s, o, *r.fail_gpu, r.fail_at_s);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::string> files;
  if (!r.trace.empty()) {
    try {
      files = sim::write_trace_files(r.trace, f.trace_events);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
  }
  const model::ParallelConfig& p = s.parallel;
  const sim::HangReport& h = f.hang;
  // Ranks by when they stopped (the failed one first).
  std::vector<const sim::RankWait*> order;
  for (const sim::RankWait& w : h.ranks) order.push_back(&w);
  std::stable_sort(order.begin(), order.end(), [](const sim::RankWait* a, const sim::RankWait* b) {
    const bool da = a->state == sim::RankWait::State::kDead, db = b->state == sim::RankWait::State::kDead;
    if (da != db) return da;
    return a->last_progress_s < b->last_progress_s;
  });
  auto first_gpu = [&](int sim_replica, int rank) { return sim::gpu_of(p, 0, f.replicas[sim_replica], rank); };

  if (r.json) {
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
      x["first_gpu"] = first_gpu(i, rank);
      x["gpus"] = p.tp;
      roots.push_back(x);
    }
    for (const sim::RankWait* w : order) {
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
    out << report_json(j) << "\n";
    return 0;
  }

  std::string text = s.name + " (" + s.source + ")\n";
  auto to = std::back_inserter(text);
  fmt::format_to(to, "  failure: GPU {} (DP replica {}, pipeline stage {}, TP rank {}) goes down {:.3f} s into a {:.3f} s step\n",
                 f.gpu, f.dp_replica, f.pp_rank, f.tp_rank, f.at_s, f.healthy_step_s);
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
    const size_t shown = std::min<size_t>(order.size(), 12);
    for (size_t k = 0; k < shown; ++k) {
      const sim::RankWait& w = *order[k];
      fmt::format_to(to, "    replica {:4d} stage {:2d}  {:<8} last progress {:.3f} s: {}\n", f.replicas[w.replica],
                     w.rank, state_name(w.state), w.last_progress_s, w.blocked_on);
    }
    if (order.size() > shown) fmt::format_to(to, "    ... {} more\n", order.size() - shown);
    for (const auto& [i, rank] : h.roots) {
      const int g = first_gpu(i, rank);
      fmt::format_to(to, "  the wait chains end at replica {} stage {} (GPUs {}-{}){}\n", f.replicas[i], rank, g,
                     g + p.tp - 1, i == f.failed_sim_replica && rank == f.pp_rank ? ": the failed host" : "");
    }
    fmt::format_to(to, "  no simulated rank moves after {:.3f} s; the job waits for detection (heartbeats,\n",
                   h.last_progress_s);
    text += "  NCCL timeout: [recovery]) and a restart from the last checkpoint: `megascale plan`\n";
  }
  fmt::format_to(to, "  simulated: {} DP replica(s) x {} pipeline ranks, wall time {:.3f} s\n", f.replicas.size(),
                 p.pp, wall_s);
  for (const std::string& w : files) text += "    wrote " + w + "\n";
  out << text;
  return 0;
}

}  // namespace

int simulate_event(const model::Scenario& s, const EventRequest& r, std::ostream& out, std::ostream& err) {
  sim::SimOptions o = sim::sim_options(s, r);
  if (o.steps > 1) {  // several iterations can take minutes: say where it is
    o.progress = [&err](int done, int total) {
      err << "\rsimulate: step " << done << " / " << total << (done == total ? "\n" : "") << std::flush;
    };
  }
  if (r.fail_gpu) return simulate_failure_report(s, r, o, out);
  const sim::JobResult res = sim::simulate_job(s, o);
  std::vector<std::string> files;
  try {
    if (!r.trace.empty()) {
      const std::vector<std::string> written = sim::write_trace_files(r.trace, res.trace_events);
      files.insert(files.end(), written.begin(), written.end());
    }
    if (!r.heatmap.empty()) {
      sim::write_heatmap_svg(r.heatmap, res);
      files.push_back(r.heatmap);
    }
    if (!r.chart.empty()) {
      const model::Estimate& e = res.estimate;
      if (!base::write_text_atomically(r.chart, model::breakdown_svg(s.name + " (event-level)",
                                                               {{"event-level", e.breakdown, e.iteration_time_s}})))
        throw std::runtime_error("--chart: cannot write " + r.chart);
      files.push_back(r.chart);
    }
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());  // a path that cannot be written: bad input
  }
  std::optional<sim::NetworkCrossCheck> check;
  if (r.simgrid_check) {
    sim::SimOptions every = o;
    every.max_replicas = std::max(o.max_replicas, s.parallel.dp);
    check = sim::network_crosscheck(s, every);
  }
  if (r.json) {
    Json json = event_json(res, o, res.wall_s, files);
    if (check) {
      Json x;
      x["event_step_s"] = check->event_step_s;
      x["simgrid_step_s"] = check->simgrid_step_s;
      x["rounds"] = check->rounds;
      x["flows"] = static_cast<int64_t>(check->flows);
      x["send_ops"] = check->send_ops;
      x["send_mean_rel_diff"] = check->send_mean_rel_diff;
      x["send_max_rel_diff"] = check->send_max_rel_diff;
      x["worst_send"] = check->worst_send;
      x["dp_ops"] = check->dp_ops;
      x["dp_mean_rel_diff"] = check->dp_mean_rel_diff;
      x["dp_max_rel_diff"] = check->dp_max_rel_diff;
      x["wall_s"] = check->wall_s;
      json["simgrid_check"] = x;
    }
    out << report_json(json) << "\n";
  } else {
    out << event_text(res, o, res.wall_s, files);
    if (check && check->flows == 0) {
      out << "  SimGrid cross-check: no transfer crosses the fabric (PP 1 and DP 1)\n";
    } else if (check) {
      fmt::print(out, "  SimGrid cross-check (every replica, {} rounds, {} flows, {:.2f} s):\n", check->rounds,
                 check->flows, check->wall_s);
      fmt::print(out, "    step: event {:.4f} s, with SimGrid's transfer times {:.4f} s ({:+.2f}%)\n",
                 check->event_step_s, check->simgrid_step_s, 100 * (check->simgrid_step_s / check->event_step_s - 1));
      fmt::print(out, "    sends ({}): |SimGrid - event| mean {:.1f}%, max {:.0f}%, {}\n", check->send_ops,
                 100 * check->send_mean_rel_diff, 100 * check->send_max_rel_diff, check->worst_send);
      fmt::print(out, "    DP collectives ({}): mean {:.2f}%, max {:.2f}%\n", check->dp_ops,
                 100 * check->dp_mean_rel_diff, 100 * check->dp_max_rel_diff);
    }
  }
  return 0;
}

}  // namespace megascale::cli
