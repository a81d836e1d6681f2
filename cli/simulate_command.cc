// cli/simulate_command.cc: `megascale simulate FILE`: scenario -> model::estimate
// (--fidelity analytical) or sim::simulate_job (sim/event_run.h, the default) ->
// files written, report printed (report/estimate_report.h, event_report.h,
// failure_report.h).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "base/progress_line.h"
#include "base/text_file.h"
#include "cli/commands.h"
#include "model/breakdown_chart.h"
#include "model/estimator.h"
#include "model/scenario.h"
#include "model/search.h"
#include "model/sensitivity.h"
#include "report/estimate_report.h"
#include "report/event_report.h"
#include "report/failure_report.h"
#include "report/simulate_extras.h"
#include "sim/event_run.h"
#include "sim/failure_sim.h"
#include "sim/heatmap.h"
#include "sim/job_sim.h"
#include "sim/network_crosscheck.h"
#include "sim/trace_writer.h"

namespace megascale::cli {
namespace {

// Most iterations `simulate --steps` runs: each is a whole event-level iteration
// (up to seconds at 12,288 GPUs); 100,000 ran for many minutes in silence.
constexpr int kMaxSimulatedSteps = 1000;
// Largest per-step jitter sigma: exp(sigma z) per machine and step, so at 0.25 a
// 2-sigma draw is a 1.65x slowdown or a 0.61x "speedup" of nominal hardware;
// beyond it the draws leave the range per-step noise describes (and can beat the peak).
constexpr double kMaxJitterSigma = 0.25;

// The options of the event level only (sim/, SimGrid).
const std::vector<Option>& event_options() {
  static const std::vector<Option> options = {
      {"--trace", Kind::kText, "FILE", "Chrome trace FILE(.json) + FILE.csv of one step"},
      {"--trace-layers", Kind::kFlag, "", "add each chunk's layers to the trace: operators\n(compute) and TP collectives (tp_comm)"},
      {"--heatmap", Kind::kOutFile, "FILE.svg", "TP group (stage, DP replica) x step forward /\nbackward time heat-map, step times from 0 s"},
      {"--steps", Kind::kInt, "N", "simulate N iterations (default 1)", 1, kMaxSimulatedSteps},
      {"--jitter", Kind::kNumber, "SIGMA", "lognormal per-step compute jitter per machine\n(default 0 for one step, 0.01 with --steps > 1)",
       0, kMaxJitterSigma, "a sigma in 0..0.25 (per-step log-normal noise; default 0.01)"},
      {"--stragglers", Kind::kNumber, "FRACTION", "fraction of machines that are slow (default 0)"},
      {"--straggler-gpus", Kind::kText, "LIST", "comma-separated global GPU ranks that are slow"},
      {"--straggler-factor", Kind::kNumber, "X", "their compute time multiplier (default 1.1)"},
      {"--straggler-per-step", Kind::kFlag, "", "draw the slow machines again every step"},
      {"--seed", Kind::kInt, "N", "of stragglers and jitter (default 1)", 1, kMaxInt},
      {"--comm", Kind::kChoice, "network|analytical|zero", "communication times (default network: the\nscenario's fabric, ECMP, congestion control)"},
      {"--max-replicas", Kind::kInt, "N", "distinct DP replicas simulated per step (default 8)", 1, kMaxInt},
      {"--simgrid-check", Kind::kFlag, "", "re-time the step's transfers with SimGrid's own\nnetwork model (small jobs; sim/network_crosscheck.h)"},
      {"--fail-gpu", Kind::kInt, "G", "with --fail-at T: GPU G's host fails T s into the step:\nwhich ranks stop, when, on what, and where the wait\nchains lead (one step; sim/failure_sim.h)", 0, kMaxInt},
      {"--fail-at", Kind::kNumber, "T", "seconds into the step"},
  };
  return options;
}

// Writes an output file: one that cannot be written is bad input (exit 2).
template <typename F>
auto writing(F write) {
  try {
    return write();
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
}

// `--sensitivity PCT`: each hardware input changed by PCT% on its own, the job
// timed again at the fidelity of the run (model/sensitivity.h); nullopt without it.
std::optional<model::Sensitivity> sensitivity_of(const ParsedArgs& p, const model::Scenario& s,
                                                 const std::function<double(const model::Scenario&)>& time_s) {
  if (!p.has("--sensitivity")) return std::nullopt;
  return model::sensitivity(s, p.number("--sensitivity", 0) / 100, time_s);
}

int simulate_event(const model::Scenario& s, const sim::RunRequest& r, const ParsedArgs& p, std::ostream& out,
                   std::ostream& err) {
  const bool json = p.on("--json");
  const std::string chart = p.text("--chart", "");
  sim::SimOptions o = sim::sim_options(s, r);
  base::ProgressLine progress(err);
  if (o.steps > 1) {  // several iterations can take minutes: say where it is
    o.progress = [&progress](int done, int total) {
      progress.update(fmt::format("simulate: step {} / {}", done, total), done, total);
    };
  }
  if (r.fail_gpu) {  // `simulate --fail-gpu G --fail-at T`: the step with GPU G's host failing
    const auto t0 = std::chrono::steady_clock::now();
    const sim::FailureResult f = sim::simulate_failure(s, o, *r.fail_gpu, r.fail_at_s);
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<std::string> files;
    if (!r.trace.empty()) files = writing([&] { return sim::write_trace_files(r.trace, f.trace_events); });
    out << (json ? report::report_json(report::failure_json(s, f, wall_s, files)) + "\n"
                 : report::failure_text(s, f, wall_s, files));
    return 0;
  }
  const sim::JobResult res = sim::simulate_job(s, o);
  std::vector<std::string> files;
  if (!r.trace.empty()) files = writing([&] { return sim::write_trace_files(r.trace, res.trace_events); });
  if (!r.heatmap.empty()) {
    writing([&] { sim::write_heatmap_svg(r.heatmap, res); });
    files.push_back(r.heatmap);
  }
  if (!chart.empty()) {
    const model::Estimate& e = res.estimate;
    base::write_text_or_throw(
        chart, model::breakdown_svg(s.name + " (event-level)", {{"event-level", e.breakdown, e.iteration_time_s}}));
    files.push_back(chart);
  }
  std::optional<sim::NetworkCrossCheck> check;
  if (r.simgrid_check) {
    sim::SimOptions every = o;
    every.max_replicas = std::max(o.max_replicas, s.parallel.dp);
    check = sim::network_crosscheck(s, every);
  }
  // One step per changed input, with the run's options (one healthy step: the
  // combinations that are not are refused in event_request).
  const auto sens = sensitivity_of(p, s, [&r](const model::Scenario& v) {
    return sim::simulate_job(v, sim::sim_options(v, r)).estimate.iteration_time_s;
  });
  // A split with the heads balanced, where the closed form has it faster.
  const report::SimulateExtras x{res.analytical, model::head_balanced_candidate(s, res.analytical), check, sens};
  if (json) {
    base::Json j = report::event_json(res, o, res.wall_s, files);
    report::add_simulate_extras(j, s, x, "event");
    out << report::report_json(j) << "\n";
  } else {
    out << report::event_text(res, o, res.wall_s, files) << report::simulate_extras_text(s, x, "event");
  }
  return 0;
}

// The event-level request from the options, with the combinations that make no sense refused.
sim::RunRequest event_request(const ParsedArgs& p) {
  sim::RunRequest r;
  r.trace = p.text("--trace", "");
  // A prefix: TRACE.json and TRACE.csv. A directory would give hidden files
  // (dir/.json); say so instead.
  std::error_code ec;
  if (p.has("--trace") && (r.trace.empty() || r.trace.back() == '/' || std::filesystem::is_directory(r.trace, ec))) {
    throw UsageError("--trace expects a file prefix (writes PREFIX.json and PREFIX.csv), got the directory '" +
                     r.trace + "'");
  }
  r.trace_layers = p.on("--trace-layers");
  if (r.trace_layers && r.trace.empty()) throw UsageError("--trace-layers needs --trace FILE");
  r.heatmap = p.text("--heatmap", "");
  r.steps = static_cast<int>(p.integer("--steps", 1));
  if (p.has("--jitter")) r.jitter_sigma = p.number("--jitter", 0);
  r.seed = static_cast<uint64_t>(p.integer("--seed", 1));
  if (p.has("--straggler-gpus")) r.straggler_gpus = int_list("--straggler-gpus", p.text("--straggler-gpus"));
  r.straggler_fraction = p.number("--stragglers", 0.0);
  r.straggler_factor = p.number("--straggler-factor", r.straggler_factor);
  r.straggler_per_step = p.on("--straggler-per-step");
  // Options that only shape stragglers did nothing, silently, without them.
  if (r.straggler_per_step && !(r.straggler_fraction > 0)) {
    throw UsageError("--straggler-per-step draws the slow machines again every step: it needs --stragglers FRACTION "
                     "(--straggler-gpus are the same GPUs every step)");
  }
  if (p.has("--straggler-factor") && !(r.straggler_fraction > 0) && r.straggler_gpus.empty()) {
    throw UsageError("--straggler-factor is the slow machines' compute multiplier: give --stragglers FRACTION or "
                     "--straggler-gpus LIST");
  }
  r.comm = p.text("--comm", r.comm);
  r.max_replicas = static_cast<int>(p.integer("--max-replicas", r.max_replicas));
  r.simgrid_check = p.on("--simgrid-check");
  if (p.has("--sensitivity") && (p.has("--fail-gpu") || p.has("--steps") || p.has("--simgrid-check") ||
                                 p.has("--trace") || p.has("--heatmap") || p.has("--straggler-per-step"))) {
    throw UsageError(
        "--sensitivity times one healthy step per changed input; drop --fail-gpu / --steps / --simgrid-check / "
        "--trace / --heatmap / --straggler-per-step");
  }
  if (r.simgrid_check && (p.has("--fail-gpu") || p.has("--steps")))
    throw UsageError("--simgrid-check checks one healthy step; drop --fail-gpu / --steps");
  if (p.has("--fail-gpu") != p.has("--fail-at")) throw UsageError("--fail-gpu G and --fail-at T go together");
  if (p.has("--fail-gpu")) {
    if (p.has("--steps") || p.has("--heatmap") || p.has("--chart")) {
      throw UsageError(
          "--fail-gpu simulates one step and writes no heat-map or chart; drop --steps / --heatmap / --chart");
    }
    r.fail_gpu = static_cast<int>(p.integer("--fail-gpu", 0));
    r.fail_at_s = p.number("--fail-at", 0.0);
  }
  return r;
}

int simulate(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  const std::string fidelity = p.text("--fidelity", "event");
  if (fidelity == "analytical") {
    for (const Option& o : event_options())
      if (p.has(o.name) || p.on(o.name)) throw UsageError(o.name + " needs --fidelity event");
  }
  if (p.positional.size() != 1) throw UsageError("simulate expects exactly one scenario FILE");
  const model::Scenario s = model::load_scenario(p.positional[0], p.all("--set"));
  if (fidelity == "event") return simulate_event(s, event_request(p), p, out, err);
  const auto t0 = std::chrono::steady_clock::now();
  const model::Estimate e = model::estimate(s);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (p.has("--chart")) {
    const std::string& path = p.text("--chart");
    base::write_text_or_throw(
        path, model::breakdown_svg(s.name + " (analytical)", {{"analytical", e.breakdown, e.iteration_time_s}}));
    err << "wrote " << path << "\n";
  }
  const auto sens =
      sensitivity_of(p, s, [](const model::Scenario& v) { return model::estimate(v).iteration_time_s; });
  const report::SimulateExtras x{e, model::head_balanced_candidate(s, e), std::nullopt, sens};
  if (p.on("--json")) {
    base::Json j = report::estimate_json(s, e);
    j["wall_time_s"] = wall_s;
    report::add_simulate_extras(j, s, x, "analytical");
    out << report::report_json(j) << "\n";
  } else {
    out << report::estimate_text(s, e) << report::simulate_extras_text(s, x, "analytical");
  }
  return 0;
}

}  // namespace

CommandEntry simulate_command() {
  std::vector<Option> options = {
      json_flag(), fidelity_option("event (SimGrid, the default) or analytical (closed form)"),
      {"--chart", Kind::kOutFile, "FILE.svg", "where the iteration time goes, one stacked bar on an\naxis from 0 s"},
      {"--sensitivity", Kind::kNumber, "PCT",
       "also time the job once per hardware input, each changed\nby PCT% on its own: which inputs (and which of them\n"
       "assumed) the prediction hangs on (model/sensitivity.h)",
       // 0 is refused here, as the range says (model/sensitivity.h refused it
       // in its own words).
       kAboveZero, model::kMaxSensitivityStep * 100, "a percentage in (0, 50]"},
      set_option()};
  options.insert(options.end(), event_options().begin(), event_options().end());
  return {{"simulate", "FILE [options]",
           "predict MFU, iteration time, bubble, memory and where the time goes; the\n"
           "options from --trace on are the event level's (sim/README.md)",
           options},
          simulate};
}

}  // namespace megascale::cli
