// cli/plan_command.cc: `megascale plan FILE [--json] [--runs N] [--seed S]
// [--sweep checkpoint_interval=5m,15m,60m | --sweep gpus=1536,3072,6144,12288]
// [--plot FILE.svg]` — the run-level answer for a multi-week job: ETTR (mean,
// p5, p95), restarts, time lost per cause, days to finish, the checkpoint
// interval that maximises ETTR next to Young/Daly's sqrt(2 x checkpoint cost x
// MTBF), and the assumptions behind the recovery figures with their sources.
//
// The per-iteration time: [run] iteration_time_s when the scenario gives it
// ("scenario"); else the event-level simulator's healthy iteration
// (sim::event_estimate: "event"), or the closed form's with --fidelity
// analytical ("analytical").
//
// --sweep gpus scales the cluster: the layout's TP and PP are kept, DP = GPUs /
// (TP x PP), the global batch is kept (strong scaling, as MegaScale Table 2), and
// explicit [failures] links / switches counts scale with the GPUs.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "base/json.h"
#include "cli/report.h"
#include "sim/event_run.h"
#include "base/text_file.h"
#include "reliability/plan_inputs.h"
#include "model/estimator.h"
#include "model/hardware.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "reliability/ettr_plot.h"
#include "reliability/measured_recovery.h"
#include "reliability/recovery_model.h"
#include "reliability/run_model.h"

namespace megascale::cli {
namespace {

using reliability::SweepPoint;

std::string fmt(double v, int decimals = 1) { return fmt::format("{:.{}f}", v, decimals); }

std::string duration_label(double s) {
  if (s >= 86400 && std::fmod(s, 86400) == 0) return fmt(s / 86400, 0) + "d";
  if (s >= 3600 && std::fmod(s, 3600) == 0) return fmt(s / 3600, 0) + "h";
  if (s >= 60 && std::fmod(s, 60) == 0) return fmt(s / 60, 0) + "m";
  return fmt(s, 0) + "s";
}

struct SweepSpec {
  std::string quantity;        // "checkpoint_interval" | "gpus"
  std::vector<double> values;  // seconds | GPU counts
};

SweepSpec parse_sweep(const std::string& spec) {
  SweepSpec out;
  const size_t eq = spec.find('=');
  out.quantity = spec.substr(0, eq);
  if (eq == std::string::npos || (out.quantity != "checkpoint_interval" && out.quantity != "gpus")) {
    throw UsageError(
        "--sweep supports checkpoint_interval=V1,V2,... (durations like 5m) or gpus=N1,N2,..., got '" +
        spec + "'");
  }
  std::stringstream in(spec.substr(eq + 1));
  std::string item;
  while (std::getline(in, item, ',')) {
    if (out.quantity == "gpus") {
      char* end = nullptr;
      const long n = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || n < 1 || n > 10000000) {
        throw UsageError("--sweep gpus: bad GPU count '" + item + "' (a positive integer)");
      }
      out.values.push_back(static_cast<double>(n));
    } else {
      const std::optional<double> v = model::parse_duration_s(item);
      if (!v || *v <= 0) throw UsageError("--sweep: bad duration '" + item + "'");
      out.values.push_back(*v);
    }
  }
  if (out.values.empty()) throw UsageError("--sweep: no values");
  return out;
}

struct IterationTime {
  double s = 0;
  std::string source;  // "scenario" | "event" | "analytical"
};

// One healthy iteration of `s`: at event level (sim/event_run.h, the default)
// or in closed form (--fidelity analytical: milliseconds, optimistic).
IterationTime simulated_iteration_time(const model::Scenario& s, const std::string& fidelity) {
  if (fidelity == "analytical") return {model::estimate(s).iteration_time_s, "analytical"};
  return {sim::event_estimate(s).iteration_time_s, "event"};
}

IterationTime iteration_time(const model::Scenario& s, const std::string& fidelity) {
  if (s.run.iteration_time_s > 0) return {s.run.iteration_time_s, "scenario"};
  return simulated_iteration_time(s, fidelity);
}

const char* source_words(const std::string& source) {
  if (source == "scenario") return "[run] iteration_time_s";
  if (source == "analytical") return "analytical estimator, model::estimate (--fidelity analytical)";
  return "event-level simulator, sim/";
}

struct GpuPoint {
  int gpus = 0, dp = 0;
  IterationTime iteration;
  reliability::PlanResult plan;
};

}  // namespace

int cmd_plan(const Args& args, std::ostream& out, std::ostream& err) {
  try {
    const ParsedArgs p = parse_args(args, {"--json"}, {"--runs", "--seed", "--sweep", "--plot", "--set", "--fidelity", "--recovery-profile"});
    const std::string fidelity = p.has("--fidelity") ? p.values.at("--fidelity") : "event";
    if (fidelity != "event" && fidelity != "analytical")
      throw UsageError("--fidelity must be 'analytical' or 'event', got '" + fidelity + "'");
    if (p.positional.size() != 1) throw UsageError("plan expects exactly one scenario FILE");
    if (p.has("--plot") && !p.has("--sweep")) throw UsageError("--plot needs --sweep");
    model::Scenario s = model::load_scenario(p.positional[0], p.all("--set"));
    // Measured recovery times (`megascale run`) in place of the assumptions.
    std::optional<reliability::MeasuredRecovery> measured;
    if (p.has("--recovery-profile")) {
      measured = reliability::load_recovery_profile(p.values.at("--recovery-profile"));
      reliability::apply_measured_recovery(*measured, &s.recovery);
    }
    int runs = s.run.runs;
    uint64_t seed = static_cast<uint64_t>(s.run.seed);
    if (p.has("--runs")) {
      const std::string& v = p.values.at("--runs");
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      // 10 million runs: ~70 s on one core (BM_MonteCarlo: 7 us per run); more is
      // refused rather than wrapped around (4294967297 used to run once).
      constexpr long long kMaxRuns = 10'000'000;
      if (v.empty() || *end != '\0' || errno == ERANGE || n < 1 || n > kMaxRuns) {
        throw UsageError("--runs expects an integer in 1.." + std::to_string(kMaxRuns) + ", got '" + v + "'");
      }
      runs = static_cast<int>(n);
    }
    if (p.has("--seed")) {
      const std::string& v = p.values.at("--seed");
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0') throw UsageError("--seed expects an integer >= 0, got '" + v + "'");
      seed = n;
    }
    const std::optional<SweepSpec> spec =
        p.has("--sweep") ? std::optional<SweepSpec>(parse_sweep(p.values.at("--sweep"))) : std::nullopt;
    const bool gpu_sweep = spec && spec->quantity == "gpus";
    if (gpu_sweep && s.run.iteration_time_s > 0) {
      throw UsageError(
          "--sweep gpus needs the iteration time at each GPU count, but [run] iteration_time_s fixes "
          "one; remove it to use the simulator");
    }
    // Scale first: a GPU count that does not fit is reported before any simulation.
    std::vector<model::Scenario> scaled;
    if (gpu_sweep) {
      for (double g : spec->values) try {
          scaled.push_back(reliability::scaled_to_gpus(s, static_cast<int>(g)));
        } catch (const std::invalid_argument& e) {
          throw UsageError(std::string("--sweep gpus: ") + e.what());
        }
    }
    const IterationTime iteration = iteration_time(s, fidelity);
    const double iteration_s = iteration.s;
    const reliability::RunModel m = reliability::build_run_model(s, iteration_s);
    const reliability::PlanResult r = reliability::monte_carlo(m, runs, seed);

    // The best interval: the swept intervals, or a geometric grid of 1 min .. 4 h.
    const std::vector<double> grid = spec && !gpu_sweep ? spec->values
                                                        : reliability::geometric_grid(60, 4 * 3600, 25);
    const std::vector<SweepPoint> sweep = reliability::sweep_checkpoint_interval(m, grid, runs, seed);
    const SweepPoint best = *std::max_element(
        sweep.begin(), sweep.end(),
        [](const SweepPoint& a, const SweepPoint& b) { return a.ettr_mean < b.ettr_mean; });
    const double mtbf_s = m.mtbf_s();
    // Young/Daly's cost: the time the job loses per checkpoint (the stall); with
    // a two-stage checkpoint it is only the GPU -> host copy.
    const double young_daly_s = reliability::young_daly_interval_s(m.checkpoint_stall_s, mtbf_s);

    // ETTR per GPU count (common random numbers across the counts).
    std::vector<GpuPoint> gpu_points;
    for (const model::Scenario& x : scaled) {
      GpuPoint g;
      g.gpus = x.parallel.gpus();
      g.dp = x.parallel.dp;
      g.iteration = simulated_iteration_time(x, fidelity);
      g.plan = reliability::monte_carlo(reliability::build_run_model(x, g.iteration.s), runs, seed);
      gpu_points.push_back(g);
    }

    if (p.has("--plot")) {
      reliability::EttrPlot plot;
      plot.runs = runs;
      if (gpu_sweep) {
        plot.title = s.name + ": ETTR vs GPUs";
        plot.x_label = "GPUs";
        for (const GpuPoint& g : gpu_points) {
          plot.points.push_back({double(g.gpus), std::to_string(g.gpus), g.plan.ettr_mean, g.plan.ettr_p5,
                                 g.plan.ettr_p95});
        }
      } else {
        plot.title = s.name + ": ETTR vs checkpoint interval";
        plot.x_label = "checkpoint interval";
        for (const SweepPoint& q : sweep) {
          plot.points.push_back({q.interval_s, duration_label(q.interval_s), q.ettr_mean, q.ettr_p5, q.ettr_p95});
        }
      }
      if (!base::write_text_atomically(p.values.at("--plot"), reliability::ettr_sweep_svg(plot)))
        throw UsageError("--plot: cannot write " + p.values.at("--plot"));
    }
    std::vector<reliability::Assumption> assumptions = reliability::recovery_assumptions(s);
    if (measured) reliability::mark_measured(*measured, &assumptions);

    if (p.on("--json")) {
      Json lost;
      for (const auto& [cause, hours] : r.lost_hours_by_cause) lost[cause] = hours;
      Json points = Json::array();
      for (const SweepPoint& q : sweep) {
        points.push_back(Json{{"checkpoint_interval_s", q.interval_s},
                              {"ettr_mean", q.ettr_mean},
                              {"ettr_p5", q.ettr_p5},
                              {"ettr_p95", q.ettr_p95}});
      }
      Json sources;
      for (const reliability::Assumption& a : assumptions) sources[a.key] = a.source;
      Json j;
      j["scenario"] = s.name;
      j["runs"] = runs;
      j["seed"] = static_cast<int64_t>(seed);
      j["gpus"] = s.parallel.gpus();
      j["iteration_time_s"] = iteration_s;
      j["iteration_time_source"] = iteration.source;
      j["duration_days"] = m.horizon_s / 86400.0;
      j["ettr_mean"] = r.ettr_mean;
      j["ettr_p5"] = r.ettr_p5;
      j["ettr_p95"] = r.ettr_p95;
      j["restarts_mean"] = r.restarts_mean;
      j["failures_mean"] = r.failures_mean;
      j["failures_during_recovery"] = s.failures.during_recovery;
      j["recovery_failures_mean"] = r.recovery_failures_mean;
      j["days_to_finish"] = r.days_to_finish;
      j["diagnosis_mean_s"] = r.diagnosis_mean_s;
      j["manual_mean_s"] = r.manual_mean_s;
      j["catch_up_mean_s"] = r.catch_up_mean_s;
      j["spare_wait_hours"] = r.spare_wait_hours;
      j["mtbf_h"] = mtbf_s / 3600.0;
      j["comm_init_s"] = m.init_s;
      j["checkpoint_load_s"] = m.load_s;
      j["restart_s"] = m.restart_s();
      j["checkpoint_stall_s"] = m.checkpoint_stall_s;
      j["checkpoint_persist_s"] = m.checkpoint_persist_s;
      j["checkpoint_interval_s"] = s.recovery.checkpoint_interval_s;
      j["lost_hours_by_cause"] = lost;
      j["best_checkpoint_interval_s"] = best.interval_s;
      j["best_checkpoint_ettr"] = best.ettr_mean;
      j["young_daly_interval_s"] = young_daly_s;
      j["sweep"] = points;
      j["assumption_sources"] = sources;
      j["files"] = p.has("--plot") ? Json::array({p.values.at("--plot")}) : Json::array();
      if (gpu_sweep) {
        Json rows = Json::array();
        for (const GpuPoint& g : gpu_points) {
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
      out << report_json(j) << "\n";
      return 0;
    }
    out << "plan: " << s.name << " (" << s.parallel.gpus() << " GPUs, " << fmt(m.horizon_s / 86400, 1)
        << " days, " << runs << " runs, seed " << seed << ")\n"
        << "  iteration time      " << fmt(iteration_s, 2) << " s (" << iteration.source << ": "
        << source_words(iteration.source) << ")\n"
        << "  ETTR                " << fmt(100 * r.ettr_mean, 1) << "% (p5 " << fmt(100 * r.ettr_p5, 1)
        << "%, p95 " << fmt(100 * r.ettr_p95, 1) << "%)\n"
        << "  restarts            " << fmt(r.restarts_mean, 1) << " (failures " << fmt(r.failures_mean, 1)
        << ", of which while down " << fmt(r.recovery_failures_mean, 1) << "; MTBF "
        << fmt(mtbf_s / 3600, 2) << " h)\n"
        << "  days to finish      " << fmt(r.days_to_finish, 1) << "\n"
        << "  per restart         detection+diagnosis " << fmt(r.diagnosis_mean_s / 60, 1)
        << " min, manual " << fmt(r.manual_mean_s / 60, 1) << " min, catch-up "
        << fmt(r.catch_up_mean_s / 60, 1) << " min\n"
        << "  restart             " << fmt(m.restart_s(), 0) << " s (comm init " << fmt(m.init_s, 0)
        << " s, checkpoint load " << fmt(m.load_s, 0) << " s)\n"
        << "  checkpoint          " << s.recovery.checkpoint << ", every "
        << duration_label(s.recovery.checkpoint_interval_s) << ": stall " << fmt(m.checkpoint_stall_s, 2)
        << " s, on storage after " << fmt(m.checkpoint_persist_s, 1) << " s\n"
        << "  lost hours by cause (mean per run):\n";
    double lost_total_h = 0;
    for (const auto& [cause, hours] : r.lost_hours_by_cause) {
      out << "    " << cause << std::string(12 - std::min<size_t>(cause.size(), 11), ' ') << fmt(hours, 1) << "\n";
      lost_total_h += hours;
    }
    // Name the binding constraint when the spare pool is: recoveries that wait
    // for a repaired machine (issue 13: 16,384 GPUs with the fixed 32 spares and a
    // 3-day repair gave ETTR ~12% with nothing saying why).
    if (r.spare_wait_hours > 0.1 * lost_total_h && r.spare_wait_hours > 0) {
      out << "  binding constraint  the spare pool: recoveries waited " << fmt(r.spare_wait_hours, 1)
          << " h per run for a repaired machine (recovery.spare_nodes = " << s.recovery.spare_nodes
          << ", repair_s = " << fmt(s.recovery.repair_s / 86400, 1)
          << " d); raise spare_nodes or shorten repair_s\n";
    }
    if (spec && !gpu_sweep) {
      out << "  sweep checkpoint_interval:\n";
      for (const SweepPoint& q : sweep) {
        out << "    " << duration_label(q.interval_s) << std::string(8, ' ') << "ETTR "
            << fmt(100 * q.ettr_mean, 2) << "%\n";
      }
    }
    if (gpu_sweep) {
      out << "  sweep gpus (TP " << s.parallel.tp << ", PP " << s.parallel.pp << ", global batch "
          << s.parallel.global_batch << " kept):\n"
          << "    GPUs       DP  iteration s  source      ETTR     p5       p95      restarts  days to finish\n";
      for (const GpuPoint& g : gpu_points) {
        fmt::print(out, "    {:<7} {:5}  {:11.2f}  {:<10}  {:5.1f}%   {:5.1f}%   {:5.1f}%   {:8.1f}  {:14.1f}\n", g.gpus,
                   g.dp, g.iteration.s, g.iteration.source, 100 * g.plan.ettr_mean, 100 * g.plan.ettr_p5,
                   100 * g.plan.ettr_p95, g.plan.restarts_mean, g.plan.days_to_finish);
      }
    }
    out << "  best checkpoint interval " << fmt(best.interval_s, 0) << " s (ETTR "
        << fmt(100 * best.ettr_mean, 2) << "%); Young/Daly sqrt(2 x " << fmt(m.checkpoint_stall_s, 2)
        << " s x MTBF) = " << fmt(young_daly_s, 0) << " s\n"
        << "  assumptions (value: source):\n";
    for (const reliability::Assumption& a : assumptions) {
      out << "    " << a.key << std::string(24 - std::min<size_t>(a.key.size(), 23), ' ') << a.value
          << ": " << a.source << "\n";
    }
    return 0;
  } catch (const UsageError& e) {
    err << "megascale plan: " << e.what() << "\n\n" << command_usage("plan");
    return 2;
  } catch (const model::ScenarioError& e) {
    err << "megascale plan: " << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    err << "megascale plan: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace megascale::cli
