// cli/simulate_event.cc: `megascale simulate --fidelity event`: scenario ->
// sim::simulate_job -> report, trace and heat-map files. Compiled into the
// `megascale` executable only (see simulate_event.h).
#include "cli/simulate_event.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "cli/fabric_config.h"
#include "cli/json.h"
#include "cli/report.h"
#include "cli/text_file.h"
#include "model/breakdown_chart.h"
#include "model/hardware.h"
#include "model/profile.h"
#include "sim/failure_sim.h"
#include "sim/heatmap.h"
#include "sim/job_sim.h"
#include "sim/network_crosscheck.h"
#include "sim/op_costs.h"
#include "sim/trace_writer.h"

namespace megascale::cli {
namespace {

std::string line(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

sim::SimOptions sim_options(const model::Scenario& s, const EventRequest& r) {
  sim::SimOptions o;
  o.steps = r.steps;
  const std::optional<sim::CommModel> comm = sim::parse_comm_model(r.comm);
  if (!comm) throw std::invalid_argument("--comm must be network, analytical or zero, got '" + r.comm + "'");
  o.comm = *comm;
  // The CPU engine runs on one machine: no fabric; its collectives are the
  // profile's measured MPI times, which the analytical links carry.
  if (o.comm == sim::CommModel::kNetwork && model::hardware_profile(s).is_cpu()) o.comm = sim::CommModel::kAnalytical;
  if (o.comm == sim::CommModel::kNetwork) {
    const model::GpuProfile& gpu = model::hardware_profile(s);
    sim::FabricInputs f;
    f.spec = fabric_spec(s.network, s.hardware, gpu, s.cluster.gpus);
    f.ecmp = ecmp_config(s.network);
    f.collectives = collective_options(gpu, s.hardware.nic_gbps, s.network);
    o.fabric = f;
  }
  o.variability.seed = r.seed;
  o.variability.jitter_sigma = r.jitter_sigma ? *r.jitter_sigma : (r.steps > 1 ? sim::kDefaultJitterSigma : 0.0);
  o.variability.stragglers.gpus = r.straggler_gpus;
  o.variability.stragglers.machine_fraction = r.straggler_fraction;
  o.variability.stragglers.factor = r.straggler_factor;
  o.variability.stragglers.per_step = r.straggler_per_step;
  o.variability.gpu_sigma = s.hardware.gpu_speed_sigma;
  o.max_replicas = r.max_replicas;
  o.trace_step = r.trace.empty() ? -1 : 0;
  o.trace_layers = r.trace_layers;
  return o;
}

// estimate_json with "fidelity": "event" and the event-level fields appended.
std::string event_json(const sim::JobResult& res, const sim::SimOptions& o, double wall_s,
                      const std::vector<std::string>& files) {
  const model::Scenario& s = res.scenario;
  const model::Estimate& e = res.estimate;
  std::string base = estimate_json(s, e, "event").str();
  base.pop_back();  // the closing brace; more fields follow

  JsonObject extra;
  extra.add("wall_time_s", wall_s);
  const model::TimeBreakdown& b = e.breakdown;
  JsonObject exposed;
  exposed.add("tp", b.tp_exposed_s).add("pp", b.pp_exposed_s).add("pp_bubble", b.bubble_s);
  exposed.add("dp", b.dp_exposed_s).add("data", b.data_s);
  extra.add("exposed_s", exposed);
  extra.add("steps", static_cast<int64_t>(res.steps.size()));
  std::vector<std::string> times;
  for (const sim::StepResult& st : res.steps) times.push_back(json_number(st.time_s));
  extra.add_raw("step_times_s", json_array(times));
  JsonObject comm;
  comm.add("model", sim::to_string(res.comm.model)).add("p2p", res.comm.p2p_s);
  auto numbers = [](const std::vector<double>& v) {
    std::vector<std::string> out;
    for (double x : v) out.push_back(json_number(x));
    return json_array(out);
  };
  // Per sending pipeline rank (network model; empty otherwise: every send takes p2p).
  comm.add_raw("p2p_to_next_stage", numbers(res.comm.p2p_next_s));
  comm.add_raw("p2p_to_previous_stage", numbers(res.comm.p2p_prev_s));
  comm.add("dp_reduce_chunk", e.dp_reduce_scatter_chunk_s).add("dp_all_gather_chunk", e.dp_all_gather_chunk_s);
  comm.add("embedding_sync", res.comm.embedding_sync_s).add("solves", res.comm.solves);
  std::vector<std::string> notes;
  for (const std::string& n : res.comm.notes) notes.push_back(json_escape(n));
  comm.add_raw("notes", json_array(notes));
  extra.add("comm_s", comm);
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
  JsonObject ev;
  ev.add("simulated_replicas_max", most_replicas).add("distinct_replicas_max", distinct);
  ev.add("replica_choice_exact", exact).add("actors", first.stats.actors).add("hosts", first.stats.hosts);
  ev.add("ops_simulated", ops).add("critical_pp_rank", first.critical_rank);
  ev.add("critical_dp_replica", first.critical_replica);
  extra.add("event", ev);
  JsonObject var;
  var.add("jitter_sigma", o.variability.jitter_sigma).add("seed", static_cast<int64_t>(o.variability.seed));
  var.add("gpu_speed_sigma", o.variability.gpu_sigma);
  var.add("straggler_factor", o.variability.stragglers.factor);
  var.add("straggler_fraction", o.variability.stragglers.machine_fraction);
  var.add("straggler_per_step", o.variability.stragglers.per_step);
  std::vector<std::string> machines;
  for (int m : first.straggler_machines) machines.push_back(std::to_string(m));
  var.add_raw("straggler_machines_step0", json_array(machines));
  std::vector<std::string> gpus;
  for (int g : o.variability.stragglers.gpus) gpus.push_back(std::to_string(g));
  var.add_raw("straggler_gpus", json_array(gpus));
  extra.add("variability", var);
  JsonObject ana;
  ana.add("iteration_time_s", res.analytical.iteration_time_s).add("mfu", res.analytical.mfu);
  extra.add("analytical", ana);
  std::vector<std::string> quoted;
  for (const std::string& f : files) quoted.push_back(json_escape(f));
  extra.add_raw("files", json_array(quoted));
  const std::string tail = extra.str();  // "{...}"
  return base + ", " + tail.substr(1);
}

std::string event_text(const sim::JobResult& res, const sim::SimOptions& o, double wall_s,
                       const std::vector<std::string>& files) {
  const model::Estimate& e = res.estimate;
  std::string out = estimate_text(res.scenario, e);
  std::vector<double> t;
  for (const sim::StepResult& st : res.steps) t.push_back(st.time_s);
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
  out += line("  event-level (SimGrid): %.0f step(s), mean %.4f s, min %.4f s, max %.4f s\n",
              static_cast<double>(t.size()), e.iteration_time_s, *lo, *hi);
  out += line("    analytical estimate %.4f s (MFU %.1f%%); event / analytical = %.4f\n",
              res.analytical.iteration_time_s, 100 * res.analytical.mfu,
              e.iteration_time_s / res.analytical.iteration_time_s);
  const model::TimeBreakdown& b = e.breakdown;
  out += line("    exposed by dimension: TP %.4f s, PP %.4f s + bubble %.4f s, DP %.4f s\n", b.tp_exposed_s,
              b.pp_exposed_s, b.bubble_s, b.dp_exposed_s);
  // Fastest boundary with a send (V = 1 leaves one direction of the end stages empty).
  double p2p_min_s = res.comm.p2p_s;
  for (const std::vector<double>* v : {&res.comm.p2p_next_s, &res.comm.p2p_prev_s})
    for (double x : *v)
      if (x > 0) p2p_min_s = std::min(p2p_min_s, x);
  const std::string p2p = p2p_min_s < res.comm.p2p_s
                              ? line("p2p %.3f-%.3f ms by boundary", p2p_min_s * 1e3, res.comm.p2p_s * 1e3)
                              : line("p2p %.3f ms", res.comm.p2p_s * 1e3);
  out += "    communication: " + std::string(sim::to_string(res.comm.model)) + " (" + p2p +
         line(", DP reduce %.2f ms / all-gather %.2f ms per chunk)\n", e.dp_reduce_scatter_chunk_s * 1e3,
              e.dp_all_gather_chunk_s * 1e3);
  int most = 0;
  for (const sim::StepResult& st : res.steps) most = std::max(most, static_cast<int>(st.replicas.size()));
  out += line("    simulated: up to %.0f DP replica(s) x %.0f pipeline ranks; GPU speed sigma %.3f, jitter sigma %.3f; ",
              most, res.scenario.parallel.pp, o.variability.gpu_sigma, o.variability.jitter_sigma);
  out += line("stragglers: %.0f GPU(s) + %.2f%% of machines at x%.2f\n",
              static_cast<double>(o.variability.stragglers.gpus.size()),
              100 * o.variability.stragglers.machine_fraction, o.variability.stragglers.factor);
  // A fraction that rounds to no machine at all does nothing: say so.
  const double fraction = o.variability.stragglers.machine_fraction;
  const int machines = std::max(1, res.scenario.parallel.gpus() / std::max(1, res.scenario.hardware.gpus_per_node));
  if (fraction > 0 && std::lround(fraction * machines) == 0) {
    out += line("    note: --stragglers %.4g of %.0f machines rounds to no machine: no straggler simulated "
                "(the smallest effective fraction here is %.4g)\n",
                fraction, static_cast<double>(machines), 0.5 / machines);
  }
  out += line("    wall time %.3f s\n", wall_s);
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
    JsonObject j;
    j.add("scenario", s.name).add("fidelity", "event").add("gpu", f.gpu).add("dp_replica", f.dp_replica);
    j.add("pp_rank", f.pp_rank).add("tp_rank", f.tp_rank).add("at_s", f.at_s);
    j.add("healthy_step_s", f.healthy_step_s).add("hung", h.hung).add("host_went_down", h.failed_at_s >= 0);
    j.add("blocked_ranks", h.blocked).add("ranks_waiting_at_step_end", h.waiting_at_step_end);
    j.add("last_progress_s", h.last_progress_s);
    std::vector<std::string> roots, ranks, replicas;
    for (const auto& [i, rank] : h.roots) {
      JsonObject x;
      x.add("dp_replica", f.replicas[i]).add("pp_rank", rank).add("first_gpu", first_gpu(i, rank));
      x.add("gpus", p.tp);
      roots.push_back(x.str());
    }
    for (const sim::RankWait* w : order) {
      JsonObject x;
      x.add("dp_replica", f.replicas[w->replica]).add("pp_rank", w->rank).add("state", state_name(w->state));
      x.add("last_progress_s", w->last_progress_s).add("waiting_on", w->blocked_on);
      ranks.push_back(x.str());
    }
    for (int d : f.replicas) replicas.push_back(std::to_string(d));
    j.add_raw("wait_chains_end_at", json_array(roots));
    j.add_raw("ranks", json_array(ranks));
    j.add_raw("simulated_dp_replicas", json_array(replicas));
    std::vector<std::string> written;
    for (const std::string& w : files) written.push_back(json_escape(w));
    j.add_raw("files", json_array(written));
    j.add("wall_time_s", wall_s);
    out << j.str() << "\n";
    return 0;
  }

  std::string text = s.name + " (" + s.source + ")\n";
  text += line("  failure: GPU %.0f (DP replica %.0f, pipeline stage %.0f, TP rank %.0f)", f.gpu, f.dp_replica,
               f.pp_rank, f.tp_rank) +
          line(" goes down %.3f s into a %.3f s step\n", f.at_s, f.healthy_step_s);
  if (!h.hung) {
    text += h.failed_at_s < 0
                ? std::string("  the step had ended: nothing to see in it; the next step hangs at its first\n"
                              "  collective\n")
                : std::string("  the host had done its part of the step: the step ends; every rank then\n"
                              "  waits for it in the end-of-step all-reduce and the next step\n");
  } else {
    text += line("  the step hangs: %.0f of %.0f simulated ranks are stuck", h.blocked + h.waiting_at_step_end,
                 static_cast<double>(h.ranks.size()) - 1) +
            line(" (%.0f in a receive or collective, %.0f at the end-of-step all-reduce)\n", h.blocked,
                 h.waiting_at_step_end);
    const size_t shown = std::min<size_t>(order.size(), 12);
    for (size_t k = 0; k < shown; ++k) {
      const sim::RankWait& w = *order[k];
      char buf[128];
      std::snprintf(buf, sizeof buf, "    replica %4d stage %2d  %-8s last progress %.3f s: ", f.replicas[w.replica],
                    w.rank, state_name(w.state), w.last_progress_s);
      text += buf + w.blocked_on + "\n";
    }
    if (order.size() > shown) text += line("    ... %.0f more\n", static_cast<double>(order.size() - shown));
    for (const auto& [i, rank] : h.roots) {
      const int g = first_gpu(i, rank);
      char buf[128];
      std::snprintf(buf, sizeof buf, "  the wait chains end at replica %d stage %d (GPUs %d-%d)%s\n", f.replicas[i],
                    rank, g, g + p.tp - 1, i == f.failed_sim_replica && rank == f.pp_rank ? ": the failed host" : "");
      text += buf;
    }
    text += line("  no simulated rank moves after %.3f s; the job waits for detection (heartbeats,\n",
                 h.last_progress_s);
    text += "  NCCL timeout: [recovery]) and a restart from the last checkpoint: `megascale plan`\n";
  }
  text += line("  simulated: %.0f DP replica(s) x %.0f pipeline ranks, wall time %.3f s\n",
               static_cast<double>(f.replicas.size()), p.pp, wall_s);
  for (const std::string& w : files) text += "    wrote " + w + "\n";
  out << text;
  return 0;
}

int simulate_event(const model::Scenario& s, const EventRequest& r, std::ostream& out, std::ostream& err) {
  sim::SimOptions o = sim_options(s, r);
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
      if (!write_text_atomically(r.chart, model::breakdown_svg(s.name + " (event-level)",
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
    std::string json = event_json(res, o, res.wall_s, files);
    if (check) {
      JsonObject x;
      x.add("event_step_s", check->event_step_s).add("simgrid_step_s", check->simgrid_step_s);
      x.add("rounds", check->rounds).add("flows", static_cast<int64_t>(check->flows));
      x.add("send_ops", check->send_ops).add("send_mean_rel_diff", check->send_mean_rel_diff);
      x.add("send_max_rel_diff", check->send_max_rel_diff).add("worst_send", check->worst_send);
      x.add("dp_ops", check->dp_ops).add("dp_mean_rel_diff", check->dp_mean_rel_diff);
      x.add("dp_max_rel_diff", check->dp_max_rel_diff).add("wall_s", check->wall_s);
      json.pop_back();  // the closing brace
      json += ", \"simgrid_check\": " + x.str() + "}";
    }
    out << json << "\n";
  } else {
    out << event_text(res, o, res.wall_s, files);
    if (check && check->flows == 0) {
      out << "  SimGrid cross-check: no transfer crosses the fabric (PP 1 and DP 1)\n";
    } else if (check) {
      out << line("  SimGrid cross-check (every replica, %.0f rounds, %.0f flows, %.2f s):\n", check->rounds,
                  static_cast<double>(check->flows), check->wall_s);
      out << line("    step: event %.4f s, with SimGrid's transfer times %.4f s (%+.2f%%)\n", check->event_step_s,
                  check->simgrid_step_s, 100 * (check->simgrid_step_s / check->event_step_s - 1));
      out << line("    sends (%.0f): |SimGrid - event| mean %.1f%%, max %.0f%%, ", check->send_ops,
                  100 * check->send_mean_rel_diff, 100 * check->send_max_rel_diff)
          << check->worst_send << "\n";
      out << line("    DP collectives (%.0f): mean %.2f%%, max %.2f%%\n", check->dp_ops, 100 * check->dp_mean_rel_diff,
                  100 * check->dp_max_rel_diff);
    }
  }
  return 0;
}

model::Estimate estimate_event(const model::Scenario& s) {
  EventRequest r;  // defaults: network communication, one step, no variability
  return sim::simulate_job(s, sim_options(s, r)).estimate;
}

double straggler_cost_event(const model::Scenario& s, double machine_fraction, double forward_slowdown, int seeds) {
  const model::Estimate e = model::estimate(s);
  const sim::OpCosts costs(s, e, sim::comm_times(s, e, sim::CommModel::kZero, nullptr));
  double forward = 0, total = 0;
  for (int r = 0; r < s.parallel.pp; ++r) {
    forward += costs.forward_busy_s(r);
    total += costs.forward_busy_s(r) + costs.backward_busy_s(r);
  }
  EventRequest r;  // defaults: network communication, one step, no jitter
  double lost = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    sim::SimOptions o = sim_options(s, r);
    o.trace_step = -1;
    o.variability.seed = static_cast<uint64_t>(seed);
    const double clean = sim::simulate_job(s, o).estimate.mfu;
    o.variability.stragglers.machine_fraction = machine_fraction;
    o.variability.stragglers.factor = 1.0 + forward_slowdown * forward / total;
    lost += clean - sim::simulate_job(s, o).estimate.mfu;
  }
  return lost / seeds;
}

const bool registered = (register_event_simulator(&simulate_event), register_event_estimator(&estimate_event),
                         register_straggler_cost(&straggler_cost_event), true);

}  // namespace
}  // namespace megascale::cli
