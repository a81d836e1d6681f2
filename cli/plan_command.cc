// cli/plan_command.cc: `megascale plan FILE [--json] [--runs N] [--seed S]
// [--sweep checkpoint_interval=5m,15m,60m] [--plot FILE.svg]` — the run-level
// answer for a multi-week job: ETTR (mean, p5, p95), restarts, time lost per
// cause, days to finish, and the checkpoint interval that maximises ETTR next to
// Young/Daly's sqrt(2 x checkpoint cost x MTBF).
//
// The per-iteration time comes from model::estimate (megascale_cli_lib links no
// SimGrid), or from [run] iteration_time_s when the scenario gives it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/json.h"
#include "model/estimator.h"
#include "model/scenario.h"
#include "reliability/recovery_model.h"
#include "reliability/run_model.h"

namespace megascale::cli {
namespace {

using reliability::SweepPoint;

std::vector<double> parse_sweep(const std::string& spec) {
  const std::string prefix = "checkpoint_interval=";
  if (spec.rfind(prefix, 0) != 0) {
    throw UsageError("--sweep supports checkpoint_interval=V1,V2,... (durations like 5m), got '" +
                     spec + "'");
  }
  std::vector<double> values;
  std::stringstream in(spec.substr(prefix.size()));
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::optional<double> v = model::parse_duration_s(item);
    if (!v || *v <= 0) throw UsageError("--sweep: bad duration '" + item + "'");
    values.push_back(*v);
  }
  if (values.empty()) throw UsageError("--sweep: no values");
  return values;
}

std::string fmt(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string duration_label(double s) {
  if (s >= 86400 && std::fmod(s, 86400) == 0) return fmt(s / 86400, 0) + "d";
  if (s >= 3600 && std::fmod(s, 3600) == 0) return fmt(s / 3600, 0) + "h";
  if (s >= 60 && std::fmod(s, 60) == 0) return fmt(s / 60, 0) + "m";
  return fmt(s, 0) + "s";
}

// ETTR against the swept value, a hand-written SVG line plot.
std::string sweep_svg(const std::vector<SweepPoint>& points, const std::string& title) {
  const double W = 640, H = 400, left = 70, right = 20, top = 40, bottom = 60;
  double lo = points.front().ettr_mean, hi = lo;
  double xmin = points.front().interval_s, xmax = xmin;
  for (const SweepPoint& p : points) {
    lo = std::min(lo, p.ettr_mean);
    hi = std::max(hi, p.ettr_mean);
    xmin = std::min(xmin, p.interval_s);
    xmax = std::max(xmax, p.interval_s);
  }
  if (hi - lo < 1e-3) { lo -= 0.005; hi += 0.005; }
  const bool logx = xmax / xmin > 1.0001;
  auto X = [&](double v) {
    if (!logx) return left + (W - left - right) / 2;
    return left + (W - left - right) * std::log(v / xmin) / std::log(xmax / xmin);
  };
  auto Y = [&](double v) { return top + (H - top - bottom) * (hi - v) / (hi - lo); };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">"
    << title << "</text>\n"
    << "<line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\""
    << H - bottom << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << H - bottom
    << "\" stroke=\"black\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"" << H - 15
    << "\" text-anchor=\"middle\">checkpoint interval (log scale)</text>\n"
    << "<text x=\"18\" y=\"" << H / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
    << H / 2 << ")\">ETTR (mean)</text>\n";
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4;
    o << "<text x=\"" << left - 6 << "\" y=\"" << Y(v) + 4 << "\" text-anchor=\"end\">"
      << fmt(v, 3) << "</text>\n";
  }
  o << "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
  for (const SweepPoint& p : points) o << fmt(X(p.interval_s), 1) << "," << fmt(Y(p.ettr_mean), 1) << " ";
  o << "\"/>\n";
  for (const SweepPoint& p : points) {
    o << "<circle cx=\"" << fmt(X(p.interval_s), 1) << "\" cy=\"" << fmt(Y(p.ettr_mean), 1)
      << "\" r=\"3\" fill=\"#1f77b4\"/>\n"
      << "<text x=\"" << fmt(X(p.interval_s), 1) << "\" y=\"" << H - bottom + 16
      << "\" text-anchor=\"middle\">" << duration_label(p.interval_s) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace

int cmd_plan(const Args& args, std::ostream& out, std::ostream& err) {
  try {
    const ParsedArgs p = parse_args(args, {"--json"}, {"--runs", "--seed", "--sweep", "--plot"});
    if (p.positional.size() != 1) throw UsageError("plan expects exactly one scenario FILE");
    if (p.has("--plot") && !p.has("--sweep")) throw UsageError("--plot needs --sweep");
    const model::Scenario s = model::load_scenario(p.positional[0]);
    int runs = s.run.runs;
    uint64_t seed = static_cast<uint64_t>(s.run.seed);
    if (p.has("--runs")) {
      const std::string& v = p.values.at("--runs");
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1) throw UsageError("--runs expects a positive integer, got '" + v + "'");
      runs = static_cast<int>(n);
    }
    if (p.has("--seed")) {
      const std::string& v = p.values.at("--seed");
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0') throw UsageError("--seed expects an integer >= 0, got '" + v + "'");
      seed = n;
    }
    const double iteration_s =
        s.run.iteration_time_s > 0 ? s.run.iteration_time_s : model::estimate(s).iteration_time_s;
    const reliability::RunModel m = reliability::build_run_model(s, iteration_s);
    const reliability::PlanResult r = reliability::monte_carlo(m, runs, seed);

    // The best interval: the sweep's values, or a geometric grid of 1 min .. 4 h.
    const std::vector<double> grid = p.has("--sweep") ? parse_sweep(p.values.at("--sweep"))
                                                      : reliability::geometric_grid(60, 4 * 3600, 25);
    const std::vector<SweepPoint> sweep = reliability::sweep_checkpoint_interval(m, grid, runs, seed);
    const SweepPoint best = *std::max_element(
        sweep.begin(), sweep.end(),
        [](const SweepPoint& a, const SweepPoint& b) { return a.ettr_mean < b.ettr_mean; });
    const double mtbf_s = m.mtbf_s();
    // Young/Daly's cost: the time the job loses per checkpoint (the stall); with
    // a two-stage checkpoint it is only the GPU -> host copy.
    const double young_daly_s = reliability::young_daly_interval_s(m.checkpoint_stall_s, mtbf_s);

    if (p.has("--plot")) {
      std::ofstream f(p.values.at("--plot"));
      if (!f) throw UsageError("cannot write " + p.values.at("--plot"));
      f << sweep_svg(sweep, s.name + ": ETTR vs checkpoint interval");
    }

    if (p.on("--json")) {
      JsonObject lost;
      for (const auto& [cause, hours] : r.lost_hours_by_cause) lost.add(cause, hours);
      std::vector<std::string> points;
      for (const SweepPoint& q : sweep) {
        points.push_back(JsonObject().add("checkpoint_interval_s", q.interval_s).add("ettr_mean", q.ettr_mean).str());
      }
      JsonObject j;
      j.add("scenario", s.name)
          .add("runs", runs)
          .add("seed", static_cast<int64_t>(seed))
          .add("iteration_time_s", iteration_s)
          .add("duration_days", m.horizon_s / 86400.0)
          .add("ettr_mean", r.ettr_mean)
          .add("ettr_p5", r.ettr_p5)
          .add("ettr_p95", r.ettr_p95)
          .add("restarts_mean", r.restarts_mean)
          .add("failures_mean", r.failures_mean)
          .add("days_to_finish", r.days_to_finish)
          .add("diagnosis_mean_s", r.diagnosis_mean_s)
          .add("manual_mean_s", r.manual_mean_s)
          .add("catch_up_mean_s", r.catch_up_mean_s)
          .add("mtbf_h", mtbf_s / 3600.0)
          .add("comm_init_s", m.init_s)
          .add("checkpoint_load_s", m.load_s)
          .add("restart_s", m.restart_s())
          .add("checkpoint_stall_s", m.checkpoint_stall_s)
          .add("checkpoint_persist_s", m.checkpoint_persist_s)
          .add("checkpoint_interval_s", s.recovery.checkpoint_interval_s)
          .add("lost_hours_by_cause", lost)
          .add("best_checkpoint_interval_s", best.interval_s)
          .add("best_checkpoint_ettr", best.ettr_mean)
          .add("young_daly_interval_s", young_daly_s)
          .add_raw("sweep", json_array(points));
      out << j.str() << "\n";
      return 0;
    }
    out << "plan: " << s.name << " (" << s.parallel.gpus() << " GPUs, " << fmt(m.horizon_s / 86400, 1)
        << " days, " << runs << " runs, seed " << seed << ")\n"
        << "  iteration time      " << fmt(iteration_s, 2) << " s"
        << (s.run.iteration_time_s > 0 ? " ([run])" : " (model::estimate)") << "\n"
        << "  ETTR                " << fmt(100 * r.ettr_mean, 1) << "% (p5 " << fmt(100 * r.ettr_p5, 1)
        << "%, p95 " << fmt(100 * r.ettr_p95, 1) << "%)\n"
        << "  restarts            " << fmt(r.restarts_mean, 1) << " (failures " << fmt(r.failures_mean, 1)
        << ", MTBF " << fmt(mtbf_s / 3600, 2) << " h)\n"
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
    for (const auto& [cause, hours] : r.lost_hours_by_cause) {
      out << "    " << cause << std::string(12 - std::min<size_t>(cause.size(), 11), ' ') << fmt(hours, 1) << "\n";
    }
    if (p.has("--sweep")) {
      out << "  sweep checkpoint_interval:\n";
      for (const SweepPoint& q : sweep) {
        out << "    " << duration_label(q.interval_s) << std::string(8, ' ') << "ETTR "
            << fmt(100 * q.ettr_mean, 2) << "%\n";
      }
    }
    out << "  best checkpoint interval " << fmt(best.interval_s, 0) << " s (ETTR "
        << fmt(100 * best.ettr_mean, 2) << "%); Young/Daly sqrt(2 x " << fmt(m.checkpoint_stall_s, 2)
        << " s x MTBF) = " << fmt(young_daly_s, 0) << " s\n";
    return 0;
  } catch (const UsageError& e) {
    err << "megascale plan: " << e.what() << "\n\n" << usage();
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
