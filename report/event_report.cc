// report/event_report.cc: event-level simulation -> JSON / text.
#include "report/event_report.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "report/estimate_report.h"
#include "sim/op_costs.h"

namespace megascale::report {
namespace {

// How the fabric routes the network model's flows: "adaptive routing" or
// "ECMP, Q QP(s) per connection"; "" for the other communication models.
std::string routing_text(const sim::JobResult& res, const sim::SimOptions& o) {
  if (res.comm.model != sim::CommModel::kNetwork || !o.fabric) return "";
  const network::EcmpConfig& ecmp = o.fabric->ecmp;
  if (ecmp.routing == network::RoutingMode::kAdaptive) return "adaptive routing";
  return fmt::format("ECMP, {} QP(s) per connection", ecmp.qps_per_connection);
}

}  // namespace

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
  if (res.comm.model == sim::CommModel::kNetwork && o.fabric) {
    comm["routing"] = network::to_string(o.fabric->ecmp.routing);
    comm["qps_per_connection"] = o.fabric->ecmp.qps_per_connection;
  }
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
  // A pipeline with no bubble on the path reads as a contradiction: say why
  // (sim/critical_path.h: the path's compute is scaled down to what it holds,
  // and DP collectives that outlast the drain take the bubble's place).
  const model::TimeBreakdown& a = res.analytical.breakdown;
  if (b.bubble_s <= 0 && a.bubble_s > 0 && b.dp_exposed_s > a.dp_exposed_s) {
    fmt::format_to(to,
                   "    bubble 0 on the critical path: it runs through DP collectives that outlast the pipeline "
                   "drain and counts the compute beside them as DP (the closed form: bubble {:.4f} s, DP {:.4f} s; "
                   "sim/README.md, Breakdown)\n",
                   a.bubble_s, a.dp_exposed_s);
  }
  // Fastest boundary with a send (V = 1 leaves one direction of the end stages empty).
  double p2p_min_s = res.comm.p2p_s;
  for (const std::vector<double>* v : {&res.comm.p2p_next_s, &res.comm.p2p_prev_s})
    for (double x : *v)
      if (x > 0) p2p_min_s = std::min(p2p_min_s, x);
  const std::string p2p = p2p_min_s < res.comm.p2p_s
                              ? fmt::format("p2p {:.3f}-{:.3f} ms by boundary", p2p_min_s * 1e3, res.comm.p2p_s * 1e3)
                              : fmt::format("p2p {:.3f} ms", res.comm.p2p_s * 1e3);
  const std::string routing = routing_text(res, o);
  fmt::format_to(to, "    communication: {}{} ({}, DP reduce {:.2f} ms / all-gather {:.2f} ms per chunk)\n",
                 sim::to_string(res.comm.model), routing.empty() ? "" : ", " + routing, p2p,
                 e.dp_reduce_scatter_chunk_s * 1e3, e.dp_all_gather_chunk_s * 1e3);
  int most = 0;
  for (const sim::StepResult& st : res.steps) most = std::max(most, static_cast<int>(st.replicas.size()));
  // With CP each simulated gradient rank is one CP rank of a replica (model/config.h).
  fmt::format_to(to, "    simulated: up to {} {} x {} pipeline ranks; GPU speed sigma {:.3f}, jitter sigma {:.3f}; ",
                 most, res.scenario.parallel.cp > 1 ? "DP x CP rank group(s)" : "DP replica(s)",
                 res.scenario.parallel.pp, o.variability.gpu_sigma, o.variability.jitter_sigma);
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

Json crosscheck_json(const sim::NetworkCrossCheck& check) {
  Json x;
  x["event_step_s"] = check.event_step_s;
  x["simgrid_step_s"] = check.simgrid_step_s;
  x["rounds"] = check.rounds;
  x["flows"] = static_cast<int64_t>(check.flows);
  x["send_ops"] = check.send_ops;
  x["send_mean_rel_diff"] = check.send_mean_rel_diff;
  x["send_max_rel_diff"] = check.send_max_rel_diff;
  x["worst_send"] = check.worst_send;
  x["dp_ops"] = check.dp_ops;
  x["dp_mean_rel_diff"] = check.dp_mean_rel_diff;
  x["dp_max_rel_diff"] = check.dp_max_rel_diff;
  x["wall_s"] = check.wall_s;
  return x;
}

std::string crosscheck_text(const sim::NetworkCrossCheck& check) {
  if (check.flows == 0) return "  SimGrid cross-check: no transfer crosses the fabric (PP 1 and DP 1)\n";
  std::string out;
  auto to = std::back_inserter(out);
  fmt::format_to(to, "  SimGrid cross-check (every replica, {} rounds, {} flows, {:.2f} s):\n", check.rounds,
                 check.flows, check.wall_s);
  fmt::format_to(to, "    step: event {:.4f} s, with SimGrid's transfer times {:.4f} s ({:+.2f}%)\n",
                 check.event_step_s, check.simgrid_step_s, 100 * (check.simgrid_step_s / check.event_step_s - 1));
  fmt::format_to(to, "    sends ({}): |SimGrid - event| mean {:.1f}%, max {:.0f}%, {}\n", check.send_ops,
                 100 * check.send_mean_rel_diff, 100 * check.send_max_rel_diff, check.worst_send);
  fmt::format_to(to, "    DP collectives ({}): mean {:.2f}%, max {:.2f}%\n", check.dp_ops,
                 100 * check.dp_mean_rel_diff, 100 * check.dp_max_rel_diff);
  return out;
}

}  // namespace megascale::report
