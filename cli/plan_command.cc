// cli/plan_command.cc: `megascale plan FILE`: the run-level answer for a
// multi-week job: ETTR (mean, p5, p95), restarts, time lost per cause, days to
// finish, the checkpoint interval that maximises ETTR next to Young/Daly's
// sqrt(2 x checkpoint cost x MTBF), and the assumptions behind the recovery
// figures with their sources.
//
// The figures come from reliability/plan_study.h (the per-iteration time: [run]
// iteration_time_s, else the event-level simulator's healthy iteration, or the
// closed form's with --fidelity analytical), the report from report/plan_report.h.
// --sweep gpus scales the cluster (reliability/plan_inputs.h scaled_to_gpus).
#include <optional>
#include <string>
#include <vector>

#include "base/text_file.h"
#include "cli/commands.h"
#include "model/scenario.h"
#include "reliability/ettr_plot.h"
#include "reliability/measured_recovery.h"
#include "reliability/plan_inputs.h"
#include "reliability/plan_study.h"
#include "report/estimate_report.h"
#include "report/plan_report.h"
#include "sim/system_comparison.h"

namespace megascale::cli {
namespace {

// 10 million runs: ~70 s on one core (BM_MonteCarlo: 7 us per run); more is
// refused rather than wrapped around (4294967297 used to run once).
constexpr int kMaxRuns = 10'000'000;

int plan(const ParsedArgs& p, std::ostream& out, std::ostream&) {
  const std::string fidelity = p.text("--fidelity", "event");
  if (p.positional.size() != 1) throw UsageError("plan expects exactly one scenario FILE");
  if (p.has("--plot") && !p.has("--sweep")) throw UsageError("--plot needs --sweep");
  model::Scenario s = model::load_scenario(p.positional[0], p.all("--set"));
  // Measured recovery times (`megascale run`) in place of the assumptions.
  std::optional<reliability::MeasuredRecovery> measured;
  if (p.has("--recovery-profile")) {
    measured = reliability::load_recovery_profile(p.text("--recovery-profile"));
    reliability::apply_measured_recovery(*measured, &s.recovery);
  }
  std::optional<reliability::Sweep> sweep;
  if (p.has("--sweep")) sweep = read_option("--sweep", [&] { return reliability::parse_sweep(p.text("--sweep")); });
  const bool gpu_sweep = sweep && sweep->quantity == "gpus";
  if (gpu_sweep && s.run.iteration_time_s > 0) {
    throw UsageError(
        "--sweep gpus needs the iteration time at each GPU count, but [run] iteration_time_s fixes "
        "one; remove it to use the simulator");
  }
  reliability::PlanRequest request;
  request.runs = static_cast<int>(p.integer("--runs", s.run.runs));
  request.seed = static_cast<uint64_t>(p.integer("--seed", static_cast<int64_t>(s.run.seed)));
  if (sweep && !gpu_sweep) request.checkpoint_intervals_s = sweep->values;
  // Scale first: a GPU count that does not fit is reported before any simulation.
  for (double g : gpu_sweep ? sweep->values : std::vector<double>{})
    request.scaled.push_back(read_option("--sweep gpus", [&] { return reliability::scaled_to_gpus(s, static_cast<int>(g)); }));
  // One healthy iteration: at event level (sim/event_run.h, the default) or in
  // closed form (--fidelity analytical: milliseconds, optimistic).
  reliability::PlanStudy study = reliability::plan_study(s, request, [&](const model::Scenario& x) {
    return reliability::IterationTime{sim::estimate_at(x, fidelity).iteration_time_s, fidelity};
  });
  if (measured) reliability::mark_measured(*measured, &study.assumptions);
  if (p.has("--plot")) {
    base::write_text_or_throw(p.text("--plot"), reliability::ettr_sweep_svg(report::plan_plot(s, request, study)));
  }
  if (p.on("--json")) {
    const std::vector<std::string> files = p.has("--plot") ? std::vector<std::string>{p.text("--plot")}
                                                           : std::vector<std::string>{};
    out << report::report_json(report::plan_json(s, request, study, files)) << "\n";
  } else {
    out << report::plan_text(s, request, study, sweep && !gpu_sweep);
  }
  return 0;
}

}  // namespace

CommandEntry plan_command() {
  return {{"plan", "FILE [options]",
           "a multi-week run under failures ([failures], [recovery], [run]): ETTR\n"
           "mean/p5/p95, restarts, lost time by cause, days to finish, best checkpoint\n"
           "interval vs Young/Daly, labelled assumptions; iteration time from the event\n"
           "simulator (else analytical, or [run] iteration_time_s)",
           {json_flag(), {"--runs", Kind::kInt, "N", "Monte Carlo runs (default: [run] runs)", 1, kMaxRuns},
            {"--seed", Kind::kInt, "S", "of the runs (default: [run] seed)", 0, kNoLimit},
            fidelity_option("of the iteration time: event (the default) or analytical"),
            {"--sweep", Kind::kText, "checkpoint_interval=5m,15m,60m | gpus=1536,3072,...",
             "ETTR at each checkpoint interval, or at each GPU count\n(TP and PP kept, DP derived)"},
            {"--plot", Kind::kOutFile, "FILE.svg", "the sweep as a chart"},
            {"--recovery-profile", Kind::kText, "FILE.json",
             "recovery times measured by `megascale run`, in place\nof the assumptions"},
            set_option()}},
          plan};
}

}  // namespace megascale::cli
