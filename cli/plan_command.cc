// cli/plan_command.cc: `megascale plan FILE [--json] [--runs N] [--seed S]
// [--sweep checkpoint_interval=5m,15m,60m | --sweep gpus=1536,3072,6144,12288]
// [--plot FILE.svg]` — the run-level answer for a multi-week job: ETTR (mean,
// p5, p95), restarts, time lost per cause, days to finish, the checkpoint
// interval that maximises ETTR next to Young/Daly's sqrt(2 x checkpoint cost x
// MTBF), and the assumptions behind the recovery figures with their sources.
//
// The figures come from reliability/plan_study.h (the per-iteration time: [run]
// iteration_time_s, else the event-level simulator's healthy iteration, or the
// closed form's with --fidelity analytical), the report from report/plan_report.h.
// --sweep gpus scales the cluster (reliability/plan_inputs.h scaled_to_gpus).
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "base/text_file.h"
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
    reliability::PlanRequest request;
    request.runs = runs;
    request.seed = seed;
    if (spec && !gpu_sweep) request.checkpoint_intervals_s = spec->values;
    request.scaled = scaled;
    // One healthy iteration: at event level (sim/event_run.h, the default) or in
    // closed form (--fidelity analytical: milliseconds, optimistic).
    reliability::PlanStudy study = reliability::plan_study(s, request, [&](const model::Scenario& x) {
      return reliability::IterationTime{sim::estimate_at(x, fidelity).iteration_time_s, fidelity};
    });
    if (measured) reliability::mark_measured(*measured, &study.assumptions);
    if (p.has("--plot") &&
        !base::write_text_atomically(p.values.at("--plot"),
                                     reliability::ettr_sweep_svg(report::plan_plot(s, request, study))))
      throw UsageError("--plot: cannot write " + p.values.at("--plot"));
    if (p.on("--json")) {
      const std::vector<std::string> files =
          p.has("--plot") ? std::vector<std::string>{p.values.at("--plot")} : std::vector<std::string>{};
      out << report::report_json(report::plan_json(s, request, study, files)) << "\n";
    } else {
      out << report::plan_text(s, request, study, spec && !gpu_sweep);
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
