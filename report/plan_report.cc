// report/plan_report.cc: plan study -> JSON / text / chart points.
#include "report/plan_report.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "base/number_text.h"

namespace megascale::report {
namespace {

using base::Json;
using reliability::GpuPoint;
using reliability::SweepPoint;

using base::fixed;

// Days as a reader takes them in: beyond 100,000 days (274 years: [run]
// tokens far past what the cluster trains) in three significant figures with
// the years beside, not 19 digits.
std::string days_text(double days) {
  if (!std::isfinite(days) || days < 1e5) return fixed(days, 1);
  return fmt::format("{:.3g} ({:.3g} years)", days, days / 365.25);
}

// What "days to finish" finishes: [run] tokens ("300B tokens"), or with none
// the run's own failure-free work ("21.0 days of work").
std::string finish_work_text(const reliability::RunModel& m) {
  if (!(m.tokens > 0 && m.tokens_per_iteration > 0)) return fmt::format("{} days of work", fixed(m.horizon_s / 86400, 1));
  static constexpr struct {
    double scale;
    const char* suffix;
  } kUnits[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}};
  for (const auto& u : kUnits) {
    if (m.tokens >= u.scale && m.tokens < 1e15) return fmt::format("{:.4g}{} tokens", m.tokens / u.scale, u.suffix);
  }
  return fmt::format("{:.4g} tokens", m.tokens);
}

const char* source_words(const std::string& source) {
  if (source == "scenario") return "[run] iteration_time_s";
  if (source == "analytical") return "analytical estimator, model::estimate (--fidelity analytical)";
  return "event-level simulator, sim/";
}

// `text` padded with spaces to `width` columns (at least one space after it).
std::string padded(const std::string& text, size_t width) {
  return text + std::string(width - std::min(text.size(), width - 1), ' ');
}

}  // namespace

std::string duration_label(double s) {
  if (s >= 86400 && std::fmod(s, 86400) == 0) return fixed(s / 86400, 0) + "d";
  if (s >= 3600 && std::fmod(s, 3600) == 0) return fixed(s / 3600, 0) + "h";
  if (s >= 60 && std::fmod(s, 60) == 0) return fixed(s / 60, 0) + "m";
  return fmt::format("{:.4g}s", s);  // 90s, 1.5s, 0.25s: never two intervals as one label
}

Json plan_json(const model::Scenario& s, const reliability::PlanRequest& request,
               const reliability::PlanStudy& study, const std::vector<std::string>& files) {
  const reliability::PlanResult& r = study.result;
  const reliability::RunModel& m = study.model;
  Json lost;
  for (const auto& [cause, hours] : r.lost_hours_by_cause) lost[cause] = hours;
  Json points = Json::array();
  for (const SweepPoint& q : study.sweep) {
    points.push_back(Json{{"checkpoint_interval_s", q.interval_s},
                          {"ettr_mean", q.ettr_mean},
                          {"ettr_p5", q.ettr_p5},
                          {"ettr_p95", q.ettr_p95}});
  }
  Json sources;
  for (const reliability::Assumption& a : study.assumptions) sources[a.key] = a.source;
  Json j;
  j["scenario"] = s.name;
  j["runs"] = request.runs;
  j["seed"] = static_cast<int64_t>(request.seed);
  j["gpus"] = s.parallel.gpus();
  j["iteration_time_s"] = study.iteration.s;
  j["iteration_time_source"] = study.iteration.source;
  j["duration_days"] = m.horizon_s / 86400.0;
  j["ettr_mean"] = r.ettr_mean;
  j["ettr_p5"] = r.ettr_p5;
  j["ettr_p95"] = r.ettr_p95;
  j["restarts_mean"] = r.restarts_mean;
  j["failures_mean"] = r.failures_mean;
  j["failures_during_recovery"] = s.failures.during_recovery;
  j["recovery_failures_mean"] = r.recovery_failures_mean;
  j["days_to_finish"] = r.days_to_finish;
  // What days_to_finish finishes: [run] tokens, 0 = the run's own failure-free work.
  j["tokens_to_finish"] = m.tokens > 0 && m.tokens_per_iteration > 0 ? m.tokens : 0.0;
  j["diagnosis_mean_s"] = r.diagnosis_mean_s;
  j["manual_mean_s"] = r.manual_mean_s;
  j["catch_up_mean_s"] = r.catch_up_mean_s;
  j["spare_wait_hours"] = r.spare_wait_hours;
  j["mtbf_h"] = study.mtbf_s / 3600.0;
  j["comm_init_s"] = m.init_s;
  j["checkpoint_load_s"] = m.load_s;
  j["restart_s"] = m.restart_s();
  j["checkpoint_stall_s"] = m.checkpoint_stall_s;
  j["checkpoint_persist_s"] = m.checkpoint_persist_s;
  j["checkpoint_cycle_stall_s"] = m.checkpoint_cycle_stall_s();
  j["checkpoint_interval_s"] = s.recovery.checkpoint_interval_s;
  j["lost_hours_by_cause"] = lost;
  j["best_checkpoint_interval_s"] = study.best.interval_s;
  j["best_checkpoint_ettr"] = study.best.ettr_mean;
  j["young_daly_interval_s"] = study.young_daly_s;
  j["sweep"] = points;
  j["assumption_sources"] = sources;
  j["files"] = files;
  if (!request.scaled.empty()) {
    Json rows = Json::array();
    for (const GpuPoint& g : study.gpu_points) {
      rows.push_back(Json{{"gpus", g.gpus},
                          {"dp", g.dp},
                          {"iteration_time_s", g.iteration.s},
                          {"iteration_time_source", g.iteration.source},
                          {"ettr_mean", g.plan.ettr_mean},
                          {"ettr_p5", g.plan.ettr_p5},
                          {"ettr_p95", g.plan.ettr_p95},
                          {"restarts_mean", g.plan.restarts_mean},
                          {"days_to_finish", g.plan.days_to_finish}});
    }
    j["gpus_sweep"] = rows;
  }
  return j;
}

std::string plan_text(const model::Scenario& s, const reliability::PlanRequest& request,
                      const reliability::PlanStudy& study, bool interval_sweep) {
  const reliability::PlanResult& r = study.result;
  const reliability::RunModel& m = study.model;
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "plan: {} ({} GPUs, {} days, {} run{}, seed {})\n", s.name, s.parallel.gpus(),
                 fixed(m.horizon_s / 86400, 1), request.runs, request.runs == 1 ? "" : "s", request.seed);
  fmt::format_to(o, "  iteration time      {} s ({}: {})\n", fixed(study.iteration.s, 2), study.iteration.source,
                 source_words(study.iteration.source));
  fmt::format_to(o, "  ETTR                {}% (p5 {}%, p95 {}%)\n", fixed(100 * r.ettr_mean, 1),
                 fixed(100 * r.ettr_p5, 1), fixed(100 * r.ettr_p95, 1));
  fmt::format_to(o, "  restarts            {} (failures {}, of which while down {}; MTBF {} h)\n",
                 fixed(r.restarts_mean, 1), fixed(r.failures_mean, 1), fixed(r.recovery_failures_mean, 1),
                 fixed(study.mtbf_s / 3600, 2));
  fmt::format_to(o, "  days to finish      {} ({} at the mean ETTR)\n", days_text(r.days_to_finish),
                 finish_work_text(m));
  fmt::format_to(o, "  per restart         detection+diagnosis {} min, manual {} min, catch-up {} min\n",
                 fixed(r.diagnosis_mean_s / 60, 1), fixed(r.manual_mean_s / 60, 1), fixed(r.catch_up_mean_s / 60, 1));
  fmt::format_to(o, "  restart             {} s (comm init {} s, checkpoint load {} s)\n", fixed(m.restart_s(), 0),
                 fixed(m.init_s, 0), fixed(m.load_s, 0));
  fmt::format_to(o, "  checkpoint          {}, every {}: stall {} s, on storage after {} s\n", s.recovery.checkpoint,
                 duration_label(s.recovery.checkpoint_interval_s), fixed(m.checkpoint_stall_s, 2),
                 fixed(m.checkpoint_persist_s, 1));
  if (m.checkpoint_cycle_stall_s() > m.checkpoint_stall_s) {
    fmt::format_to(o,
                   "  checkpoint wait     each checkpoint first waits {} s for the previous one to reach storage "
                   "(the interval is shorter than the {} s a save takes): {} s lost per checkpoint\n",
                   fixed(m.checkpoint_cycle_stall_s() - m.checkpoint_stall_s, 1), fixed(m.checkpoint_persist_s, 1),
                   fixed(m.checkpoint_cycle_stall_s(), 1));
  }
  out += "  lost hours by cause (mean per run):\n";
  double lost_total_h = 0;
  for (const auto& [cause, hours] : r.lost_hours_by_cause) {
    fmt::format_to(o, "    {}{}\n", padded(cause, 12), fixed(hours, 1));
    lost_total_h += hours;
  }
  // Name the binding constraint when the spare pool is: recoveries that wait
  // for a repaired machine (issue 13: 16,384 GPUs with the fixed 32 spares and a
  // 3-day repair gave ETTR ~12% with nothing saying why).
  if (r.spare_wait_hours > 0.1 * lost_total_h && r.spare_wait_hours > 0) {
    fmt::format_to(o,
                   "  binding constraint  the spare pool: recoveries waited {} h per run for a repaired machine "
                   "(recovery.spare_nodes = {}, repair_s = {} d); raise spare_nodes or shorten repair_s\n",
                   fixed(r.spare_wait_hours, 1), s.recovery.spare_nodes, fixed(s.recovery.repair_s / 86400, 1));
  }
  if (interval_sweep) {
    out += "  sweep checkpoint_interval:\n";
    size_t width = 0;
    for (const SweepPoint& q : study.sweep) width = std::max(width, duration_label(q.interval_s).size());
    for (const SweepPoint& q : study.sweep) {
      fmt::format_to(o, "    {:<{}}  ETTR {}%\n", duration_label(q.interval_s), width + 6, fixed(100 * q.ettr_mean, 2));
    }
  }
  if (!request.scaled.empty()) {
    fmt::format_to(o, "  sweep gpus (TP {}{}, PP {}, global batch {} kept):\n", s.parallel.tp,
                   s.parallel.cp > 1 ? fmt::format(", CP {}", s.parallel.cp) : "", s.parallel.pp,
                   s.parallel.global_batch / s.parallel.cp);  // the user's (CP folds into it, model/config.h)
    out += "    GPUs       DP  iteration s  source      ETTR     p5       p95      restarts  days to finish\n";
    for (const GpuPoint& g : study.gpu_points) {
      fmt::format_to(o, "    {:<7} {:5}  {:11.2f}  {:<10}  {:5.1f}%   {:5.1f}%   {:5.1f}%   {:8.1f}  {:14.1f}\n", g.gpus,
                     g.dp, g.iteration.s, g.iteration.source, 100 * g.plan.ettr_mean, 100 * g.plan.ettr_p5,
                     100 * g.plan.ettr_p95, g.plan.restarts_mean, g.plan.days_to_finish);
    }
  }
  fmt::format_to(o, "  best checkpoint interval {} s (ETTR {}%); Young/Daly sqrt(2 x {} s x MTBF) = {} s{}\n",
                 fixed(study.best.interval_s, study.best.interval_s < 10 ? 2 : 0), fixed(100 * study.best.ettr_mean, 2), fixed(m.checkpoint_stall_s, 2),
                 fixed(study.young_daly_s, 0),
                 // Young/Daly's cost is the stall; below the persist time each
                 // checkpoint would also wait for the one before (run_model.h).
                 study.young_daly_s < m.checkpoint_persist_s
                     ? fmt::format(" (shorter than the {} s a save takes to reach storage: at it each checkpoint "
                                   "would wait for the one before)",
                                   fixed(m.checkpoint_persist_s, 1))
                     : "");
  out += "  assumptions (value: source):\n";
  for (const reliability::Assumption& a : study.assumptions) {
    fmt::format_to(o, "    {}{}: {}\n", padded(a.key, 24), a.value, a.source);
  }
  return out;
}

reliability::EttrPlot plan_plot(const model::Scenario& s, const reliability::PlanRequest& request,
                                const reliability::PlanStudy& study) {
  reliability::EttrPlot plot;
  plot.runs = request.runs;
  if (!request.scaled.empty()) {
    plot.title = s.name + ": ETTR vs GPUs";
    plot.x_label = "GPUs";
    for (const GpuPoint& g : study.gpu_points) {
      plot.points.push_back(
          {double(g.gpus), std::to_string(g.gpus), g.plan.ettr_mean, g.plan.ettr_p5, g.plan.ettr_p95});
    }
  } else {
    plot.title = s.name + ": ETTR vs checkpoint interval";
    plot.x_label = "checkpoint interval";
    for (const SweepPoint& q : study.sweep) {
      plot.points.push_back({q.interval_s, duration_label(q.interval_s), q.ettr_mean, q.ettr_p5, q.ettr_p95});
    }
  }
  return plot;
}

}  // namespace megascale::report
