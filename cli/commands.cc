// cli/commands.cc: parse -> call model/ -> print.
#include "cli/args.h"
#include "cli/commands.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "base/json.h"
#include "cli/simulate_event.h"
#include "sim/event_run.h"
#include "sim/search_refine.h"
#include "sim/system_comparison.h"
#include "calibrate/validation.h"
#include "report/estimate_report.h"
#include "report/search_report.h"
#include "report/validation_report.h"
#include "base/number_text.h"
#include "base/text_file.h"
#include "model/breakdown_chart.h"
#include "model/estimator.h"
#include "model/scenario.h"
#include "model/search.h"
#include "model/search_plot.h"

namespace megascale::cli {
namespace {

// Largest cluster `search` enumerates (1,048,576 GPUs: 64x the largest published
// job); beyond it the layout products approach int overflow.
constexpr int kMaxSearchGpus = 1 << 20;
// Most iterations `simulate --steps` runs (each a whole event-level iteration).
constexpr int kMaxSimulatedSteps = 1000;
// Largest per-step jitter sigma `simulate --jitter` takes (see its check).
constexpr double kMaxJitterSigma = 0.25;

int positive_int(const ParsedArgs& p, const std::string& name, int fallback) {
  auto it = p.values.find(name);
  if (it == p.values.end()) return fallback;
  try {
    size_t used = 0;
    const int v = std::stoi(it->second, &used);
    if (used != it->second.size() || v <= 0) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw UsageError(name + " expects a positive integer, got '" + it->second + "'");
  }
}

double number(const ParsedArgs& p, const std::string& name, double fallback) {
  auto it = p.values.find(name);
  if (it == p.values.end()) return fallback;
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used != it->second.size() || !std::isfinite(v)) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw UsageError(name + " expects a number, got '" + it->second + "'");
  }
}

// "3,17,250" -> {3, 17, 250}.
std::vector<int> int_list(const ParsedArgs& p, const std::string& name) {
  std::vector<int> out;
  auto it = p.values.find(name);
  if (it == p.values.end()) return out;
  std::string item;
  std::istringstream in(it->second);
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument("");
      out.push_back(v);
    } catch (const std::exception&) {
      throw UsageError(name + " expects comma-separated GPU ranks (integers >= 0), got '" + it->second + "'");
    }
  }
  if (out.empty()) throw UsageError(name + " expects at least one GPU rank");
  return out;
}

// --fidelity of simulate / compare / validate: "event" (sim/, the default) or
// "analytical" (model/'s closed form).
std::string chosen_fidelity(const ParsedArgs& p) {
  const std::string fidelity = p.has("--fidelity") ? p.values.at("--fidelity") : "event";
  if (fidelity != "analytical" && fidelity != "event")
    throw UsageError("--fidelity must be 'analytical' or 'event', got '" + fidelity + "'");
  return fidelity;
}

std::string source_dir() {
  if (const char* env = std::getenv("MEGASCALE_ROOT")) return env;
  return MEGASCALE_SOURCE_DIR;
}

// Runs `body`, turning the error kinds into exit codes and messages.
template <typename F>
int guarded(std::ostream& err, const char* command, F body) {
  try {
    return body();
  } catch (const UsageError& e) {
    err << "megascale " << command << ": " << e.what() << "\n\n" << command_usage(command);
    return 2;
  } catch (const model::ScenarioError& e) {
    err << "megascale " << command << ": " << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    err << "megascale " << command << ": " << e.what() << "\n";
    return 2;
  }
}

model::Scenario one_scenario(const ParsedArgs& p, const char* command) {
  if (p.positional.size() != 1) {
    throw UsageError(std::string(command) + " expects exactly one scenario FILE");
  }
  return model::load_scenario(p.positional[0], p.all("--set"));
}

}  // namespace

std::string usage() {
  return "usage: megascale <command> [options]\n"
         "\n"
         "  compare [FILE] [--json] [--fidelity event|analytical] [--chart FILE.svg]\n"
         "                                 Megatron-LM vs MegaScale side by side (default:\n"
         "                                 built-in 175B on 12,288 A100s; event fidelity);\n"
         "                                 --chart: both breakdowns as bars on one axis\n"
         "  simulate FILE [--json] [--fidelity event|analytical] [--chart FILE.svg]\n"
         "                                 predict MFU, iteration time, bubble, memory and\n"
         "                                 where the time goes (default: event, the\n"
         "                                 SimGrid simulation; analytical: closed form);\n"
         "                                 --chart: that breakdown as a stacked bar\n"
         "      event-level options (sim/, SimGrid):\n"
         "        --trace FILE             Chrome trace FILE(.json) + FILE.csv of one step\n"
         "        --trace-layers           add each chunk's layers to the trace: operators\n"
         "                                 (compute) and TP collectives (tp_comm)\n"
         "        --heatmap FILE.svg       TP group (stage, DP replica) x step forward /\n"
         "                                 backward time heat-map, step times from 0 s\n"
         "        --steps N                simulate N iterations (default 1)\n"
         "        --jitter SIGMA           lognormal per-step compute jitter per machine\n"
         "                                 (default 0 for one step, 0.01 with --steps > 1)\n"
         "        --stragglers FRACTION    fraction of machines that are slow (default 0)\n"
         "        --straggler-gpus LIST    comma-separated global GPU ranks that are slow\n"
         "        --straggler-factor X     their compute time multiplier (default 1.1)\n"
         "        --straggler-per-step     draw the slow machines again every step\n"
         "        --seed N                 of stragglers and jitter (default 1)\n"
         "        --comm network|analytical|zero  communication times (default network:\n"
         "                                 the scenario's fabric, ECMP, congestion control)\n"
         "        --max-replicas N         distinct DP replicas simulated per step (default 8)\n"
         "        --simgrid-check          re-time the step's transfers with SimGrid's own\n"
         "                                 network model (small jobs; sim/network_crosscheck.h)\n"
         "        --fail-gpu G --fail-at T  GPU G's host fails T s into the step: which\n"
         "                                 ranks stop, when, on what, and where the wait\n"
         "                                 chains lead (one step; sim/failure_sim.h)\n"
         "  search FILE [--gpus N] [--top K] [--refine N] [--fix tp=8,pp=4,...]\n"
         "         [--min-headroom 10%] [--csv FILE] [--plot FILE.svg] [--json]\n"
         "                                 rank every valid parallel layout by predicted MFU\n"
         "                                 (analytical); --refine N re-simulates the best N\n"
         "                                 at event level and re-ranks them by it (a line\n"
         "                                 per layout on stderr); --min-headroom (or\n"
         "                                 --headroom 0.1): memory each GPU keeps free;\n"
         "                                 --csv: the ranking, then every valid layout;\n"
         "                                 --plot: MFU against memory per GPU; * marks the\n"
         "                                 layouts within the model's error of #1\n"
         "  check DIR|FILE... --golden FILE [--tolerance 2%] [--update] [--fidelity event|analytical] [--json]\n"
         "                                 a CI gate: run each scenario (every *.toml under a\n"
         "                                 DIR) and compare with the stored results key by key;\n"
         "                                 exit 1 on a change beyond the tolerance, a new or a\n"
         "                                 removed scenario; --update records them\n"
         "  validate [--json] [--write] [--dir DIR] [--fidelity event|analytical]\n"
         "                                 predicted vs published MegaScale figures; --write\n"
         "                                 regenerates results/validation.md\n"
         "  net collective|ecmp|incast ... the fabric alone: collective times, ECMP\n"
         "                                 statistics, congestion control under incast\n"
         "                                 (`megascale net --help`)\n"
         "  train FILE [--json]            run the real trainer (CPU + MPI) on the scenario;\n"
         "                                 launches mpirun itself\n"
         "  run FILE [--inject NAME:rank=R:step=S[:percent=P]]... [--set KEY=VALUE]... [--out FILE]\n"
         "                                 robust training: driver, executors, Redis heartbeats,\n"
         "                                 fault injection, detection, diagnosis, eviction,\n"
         "                                 resume; writes results/recovery/<scenario>.json\n"
         "  plan FILE [--json] [--runs N] [--seed S] [--fidelity event|analytical] [--sweep checkpoint_interval=5m,15m,60m]\n"
         "       [--sweep gpus=1536,3072,6144,12288] [--plot FILE.svg] [--recovery-profile FILE.json]\n"
         "                                 a multi-week run under failures ([failures],\n"
         "                                 [recovery], [run]): ETTR mean/p5/p95, restarts,\n"
         "                                 lost time by cause, days to finish, best checkpoint\n"
         "                                 interval vs Young/Daly, labelled assumptions;\n"
         "                                 iteration time from the event simulator (else\n"
         "                                 analytical, or [run] iteration_time_s); the gpus\n"
         "                                 sweep keeps TP and PP and derives DP; recovery times\n"
         "                                 measured by `megascale run` replace the assumptions\n"
         "\n"
         "--set KEY=VALUE (simulate, compare FILE, search, validate, plan; repeatable)\n"
         "  overrides one scenario key before it is checked, e.g. --set parallel.dp=96\n"
         "  --set cluster.gpus=6144, --set hardware.gpu_speed_sigma=0 (TOML value; a bare\n"
         "  word is a string); validate applies it to every paper scenario (what-if).\n\n"
         "Scenario format: scenarios/README.md. Exit codes: 0 ok, 1 no answer (nothing fits),\n"
         "2 bad input.\n";
}

// The usage lines of one command (its block of usage(): from "  COMMAND" to the
// next command or blank line), as "usage: megascale COMMAND ...": a usage error
// shows what the command takes, not the whole 60-line usage.
std::string command_usage(const std::string& command) {
  std::istringstream in(usage());
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    const bool command_line = line.size() > 2 && line[0] == ' ' && line[1] == ' ' &&
                              std::islower(static_cast<unsigned char>(line[2]));
    if (inside && (line.empty() || command_line)) break;
    if (!inside && command_line && line.compare(2, command.size() + 1, command + " ") == 0) inside = true;
    if (inside) block += (block.empty() ? "usage: megascale " + line.substr(2) : line) + "\n";
  }
  return block.empty() ? usage() : block + "(megascale --help: every command and option)\n";
}



int cmd_simulate(const Args& args, std::ostream& out, std::ostream& err) {
  return guarded(err, "simulate", [&] {
    const std::set<std::string> event_only = {"--trace", "--heatmap", "--steps", "--jitter", "--seed",
                                              "--stragglers", "--straggler-gpus", "--straggler-factor",
                                              "--comm", "--max-replicas", "--fail-gpu", "--fail-at"};
    std::set<std::string> valued = event_only;
    valued.insert("--fidelity");
    valued.insert("--set");
    valued.insert("--chart");
    const ParsedArgs p =
        parse_args(args, {"--json", "--straggler-per-step", "--trace-layers", "--simgrid-check"}, valued);
    const std::string fidelity = chosen_fidelity(p);
    if (fidelity == "analytical") {
      for (const std::string& name : event_only)
        if (p.has(name)) throw UsageError(name + " needs --fidelity event");
      if (p.on("--straggler-per-step")) throw UsageError("--straggler-per-step needs --fidelity event");
      if (p.on("--trace-layers")) throw UsageError("--trace-layers needs --fidelity event");
      if (p.on("--simgrid-check")) throw UsageError("--simgrid-check needs --fidelity event");
    }
    const model::Scenario s = one_scenario(p, "simulate");
    if (fidelity == "event") {
      EventRequest r;
      r.json = p.on("--json");
      if (p.has("--trace")) {
        r.trace = p.values.at("--trace");
        // A prefix: TRACE.json and TRACE.csv. A directory would give hidden files
        // (dir/.json); say so instead.
        std::error_code ec;
        if (r.trace.empty() || r.trace.back() == '/' || std::filesystem::is_directory(r.trace, ec)) {
          throw UsageError("--trace expects a file prefix (writes PREFIX.json and PREFIX.csv), got the directory '" +
                           r.trace + "'");
        }
      }
      r.trace_layers = p.on("--trace-layers");
      if (r.trace_layers && r.trace.empty()) throw UsageError("--trace-layers needs --trace FILE");
      if (p.has("--heatmap")) r.heatmap = p.values.at("--heatmap");
      if (p.has("--chart")) r.chart = p.values.at("--chart");
      r.steps = positive_int(p, "--steps", 1);
      // Each step is a whole event-level iteration (up to seconds at 12,288 GPUs):
      // 100,000 ran for many minutes in silence.
      if (r.steps > kMaxSimulatedSteps) {
        throw UsageError("--steps must be at most " + std::to_string(kMaxSimulatedSteps) + ", got '" +
                         p.values.at("--steps") + "'");
      }
      if (p.has("--jitter")) {
        r.jitter_sigma = number(p, "--jitter", 0.0);
        // exp(sigma z) per machine and step: at sigma 0.25 a 2-sigma draw is a 1.65x
        // slowdown or a 0.61x "speedup" of nominal hardware; beyond it the draws
        // leave the range per-step noise describes (and can beat the peak).
        if (r.jitter_sigma < 0 || r.jitter_sigma > kMaxJitterSigma) {
          throw UsageError("--jitter expects a sigma in 0.." + std::to_string(kMaxJitterSigma).substr(0, 4) +
                           " (per-step log-normal noise; default 0.01), got '" + p.values.at("--jitter") + "'");
        }
      }
      r.seed = static_cast<uint64_t>(positive_int(p, "--seed", 1));
      r.straggler_gpus = int_list(p, "--straggler-gpus");
      r.straggler_fraction = number(p, "--stragglers", 0.0);
      r.straggler_factor = number(p, "--straggler-factor", r.straggler_factor);
      r.straggler_per_step = p.on("--straggler-per-step");
      if (p.has("--comm")) r.comm = p.values.at("--comm");
      r.max_replicas = positive_int(p, "--max-replicas", r.max_replicas);
      r.simgrid_check = p.on("--simgrid-check");
      if (r.simgrid_check && (p.has("--fail-gpu") || p.has("--steps")))
        throw UsageError("--simgrid-check checks one healthy step; drop --fail-gpu / --steps");
      if (p.has("--fail-gpu") != p.has("--fail-at")) throw UsageError("--fail-gpu G and --fail-at T go together");
      if (p.has("--fail-gpu")) {
        if (p.has("--steps") || p.has("--heatmap") || p.has("--chart")) {
          throw UsageError(
              "--fail-gpu simulates one step and writes no heat-map or chart; drop --steps / --heatmap / --chart");
        }
        const std::vector<int> gpu = int_list(p, "--fail-gpu");
        if (gpu.size() != 1) throw UsageError("--fail-gpu takes one GPU rank");
        r.fail_gpu = gpu[0];
        r.fail_at_s = number(p, "--fail-at", 0.0);
      }
      return simulate_event(s, r, out, err);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const model::Estimate e = model::estimate(s);
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (p.has("--chart")) {
      const std::string& path = p.values.at("--chart");
      if (!base::write_text_atomically(path, model::breakdown_svg(s.name + " (analytical)",
                                                            {{"analytical", e.breakdown, e.iteration_time_s}})))
        throw std::invalid_argument("--chart: cannot write " + path);
      err << "wrote " << path << "\n";
    }
    if (p.switches.count("--json")) {
      base::Json j = report::estimate_json(s, e);
      j["wall_time_s"] = wall_s;
      out << report::report_json(j) << "\n";
    } else {
      out << report::estimate_text(s, e);
    }
    return 0;
  });
}

int cmd_compare(const Args& args, std::ostream& out, std::ostream& err) {
  return guarded(err, "compare", [&] {
    const ParsedArgs p = parse_args(args, {"--json"}, {"--fidelity", "--set", "--chart"});
    if (p.positional.size() > 1) throw UsageError("compare expects at most one scenario FILE");
    if (p.positional.empty() && p.has("--set")) throw UsageError("--set needs a scenario FILE");
    const std::string fidelity = chosen_fidelity(p);
    std::optional<model::Scenario> job;
    if (!p.positional.empty()) job = model::load_scenario(p.positional[0], p.all("--set"));
    const sim::SystemComparison c = sim::compare_systems(job, fidelity);
    if (p.has("--chart")) {
      const std::string& path = p.values.at("--chart");
      const std::string title = c.megatron.model.name + " on " + std::to_string(c.megatron.parallel.gpus()) + " x " +
                                c.megatron.hardware.gpu + ": Megatron-LM vs MegaScale (" + fidelity + ")";
      const model::Estimate &eb = c.megatron_estimate, &ef = c.megascale_estimate;
      if (!base::write_text_atomically(path, model::breakdown_svg(title, {{"Megatron-LM", eb.breakdown, eb.iteration_time_s},
                                                                    {"MegaScale", ef.breakdown, ef.iteration_time_s}})))
        throw std::invalid_argument("--chart: cannot write " + path);
      err << "wrote " << path << "\n";
    }
    if (p.switches.count("--json")) {
      base::Json j;
      j["megatron"] = report::estimate_json(c.megatron, c.megatron_estimate, fidelity);
      j["megascale"] = report::estimate_json(c.megascale, c.megascale_estimate, fidelity);
      j["speedup"] = c.speedup();
      j["fidelity"] = fidelity;
      out << report::report_json(j) << "\n";
    } else {
      out << report::compare_text(c.megatron, c.megatron_estimate, c.megascale, c.megascale_estimate, fidelity);
    }
    return 0;
  });
}

int cmd_search(const Args& args, std::ostream& out, std::ostream& err) {
  return guarded(err, "search", [&] {
    const ParsedArgs p = parse_args(args, {"--json"},
                                    {"--gpus", "--top", "--refine", "--set", "--fix", "--headroom", "--min-headroom",
                                     "--csv", "--plot"});
    const model::Scenario s = one_scenario(p, "search");
    if (s.parallel.cp > 1) {
      throw UsageError("search does not enumerate context parallelism yet; " + s.source +
                       " sets parallel.cp = " + std::to_string(s.parallel.cp) + " (simulate it, or search without cp)");
    }
    model::SearchOptions o;
    o.gpus = positive_int(p, "--gpus", s.cluster.gpus);
    // Layout products (tp x pp x dp, GPUs x bytes) stay far from int overflow.
    if (o.gpus > kMaxSearchGpus) {
      throw UsageError("--gpus " + std::to_string(o.gpus) + " is more than the " + std::to_string(kMaxSearchGpus) +
                       " GPUs search handles");
    }
    // --fix tp=8,pp=4: dimensions the search keeps (the scenario's own [parallel]
    // layout, and --set parallel.*, describe the job, not constraints).
    if (p.has("--fix")) {
      std::stringstream items(p.values.at("--fix"));
      std::string item;
      while (std::getline(items, item, ',')) {
        const size_t eq = item.find('=');
        const std::string key = item.substr(0, eq);
        int value = 0;
        try {
          size_t used = 0;
          value = eq == std::string::npos ? -1 : std::stoi(item.substr(eq + 1), &used);
          if (eq == std::string::npos || used != item.size() - eq - 1) throw std::invalid_argument("");
        } catch (const std::exception&) {
          throw UsageError("--fix expects KEY=INTEGER items (tp, pp, vpp, dp, micro_batch, zero_stage), got '" + item + "'");
        }
        model::LayoutConstraints& f = o.fixed;
        int* slot = key == "tp" ? &f.tp : key == "pp" ? &f.pp : key == "vpp" ? &f.vpp : key == "dp" ? &f.dp
                  : key == "micro_batch" ? &f.micro_batch : key == "zero_stage" ? &f.zero_stage : nullptr;
        if (slot == nullptr) {
          throw UsageError("--fix: unknown dimension '" + key + "' (tp, pp, vpp, dp, micro_batch, zero_stage)");
        }
        if (value < (key == "zero_stage" ? 0 : 1) || (key == "zero_stage" && value > 3)) {
          throw UsageError("--fix " + key + "=" + std::to_string(value) + " is out of range");
        }
        *slot = value;
      }
    }
    // --min-headroom 10% (issue 13's spelling) or --headroom 0.1: one option.
    if (p.has("--headroom") && p.has("--min-headroom")) throw UsageError("give one of --headroom and --min-headroom");
    for (const std::string name : {"--headroom", "--min-headroom"}) {
      if (!p.has(name)) continue;
      const std::optional<double> headroom = base::fraction_or_percent(p.values.at(name));
      if (!headroom || *headroom < 0 || *headroom > 0.9) {
        throw UsageError(name + " expects the share of GPU memory to keep free, 0..0.9 or 0%..90%, got '" +
                         p.values.at(name) + "'");
      }
      o.memory_headroom = *headroom;
    }
    // Files written after the search: a missing directory is reported before it.
    for (const std::string name : {"--csv", "--plot"}) {
      if (!p.has(name)) continue;
      const std::filesystem::path parent = std::filesystem::path(p.values.at(name)).parent_path();
      std::error_code ec;
      if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
        throw UsageError(name + ": no directory '" + parent.string() + "' to write " + p.values.at(name) + " in");
    }
    o.keep_points = p.has("--csv") || p.has("--plot");
    const int refine = p.has("--refine") ? positive_int(p, "--refine", 1) : 0;
    // --refine re-times the best N of the ranking, so the ranking keeps at least
    // N; an explicit --top below it would silently refine fewer.
    if (p.has("--top") && refine > positive_int(p, "--top", 10)) {
      throw UsageError("--refine " + std::to_string(refine) + " re-simulates more layouts than --top " +
                       p.values.at("--top") + " keeps; raise --top or lower --refine");
    }
    o.top_k = std::max(positive_int(p, "--top", 10), refine);
    const bool json = p.switches.count("--json") > 0;
    const auto t0 = std::chrono::steady_clock::now();
    o.progress = [&](int64_t done, int64_t total) {
      if (total < 2 * o.progress_every) return;  // short searches stay quiet
      fmt::print(err, "\rsearch: {} / {} layouts ({:.0f}%){}", done, total, 100.0 * done / total,
                 done == total ? "\n" : "");
      err << std::flush;
    };
    report::SearchReport rep;
    rep.scenario = s;
    rep.gpus = o.gpus;
    rep.result = model::search(s, o);
    // Two stages: the closed form ranks every layout, the event simulation
    // re-times the best `refine` and they are re-ranked by it (sim/search_refine.h).
    rep.refined = sim::refine_search(
        s, o.gpus, rep.result, static_cast<size_t>(refine),
        [&](size_t i, size_t n, const model::Candidate& c, const model::Estimate& e, double took_s) {
          fmt::print(err, "refine {}/{}: {}: event MFU {:.1f}% (analytical {:.1f}%; {:.1f} s)\n", i + 1, n,
                     model::layout_text(c.parallel), 100 * e.mfu, 100 * c.estimate.mfu, took_s);
          err << std::flush;
        });
    rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const model::SearchResult& r = rep.result;
    if (p.has("--csv") && !base::write_text_atomically(p.values.at("--csv"), model::search_csv(r, rep.refined)))
      throw std::invalid_argument("--csv: cannot write " + p.values.at("--csv"));
    if (p.has("--plot")) {
      const std::string title = s.model.name + " on " + std::to_string(o.gpus) + " x " + s.hardware.gpu;
      if (!base::write_text_atomically(p.values.at("--plot"), model::search_scatter_svg(title, r, o.memory_headroom)))
        throw std::invalid_argument("--plot: cannot write " + p.values.at("--plot"));
    }
    for (const char* name : {"--csv", "--plot"})
      if (p.has(name)) rep.files.push_back(p.values.at(name));
    if (json) {
      out << report::report_json(report::search_json(rep)) << "\n";
    } else {
      out << report::search_text(rep);
    }
    if (r.top.empty()) {
      err << "megascale search: no layout of " << s.model.name << " fits on " << o.gpus << " x "
          << s.hardware.gpu << "\n";
      return 1;
    }
    return 0;
  });
}

int cmd_validate(const Args& args, std::ostream& out, std::ostream& err) {
  return guarded(err, "validate", [&] {
    const ParsedArgs p = parse_args(args, {"--json", "--write"}, {"--dir", "--fidelity", "--set"});
    if (!p.positional.empty()) throw UsageError("validate takes no positional arguments");
    if (p.on("--write") && p.has("--set"))
      throw UsageError("--write regenerates the reference report from the unchanged scenarios; drop --set");
    if (p.on("--write") && p.has("--dir"))
      throw UsageError("--write regenerates results/validation.md from scenarios/paper/ only; drop --dir");
    const std::string dir =
        p.values.count("--dir") ? p.values.at("--dir") : source_dir() + "/scenarios/paper";
    const std::string fidelity = chosen_fidelity(p);
    const calibrate::ValidationReport r = calibrate::run_validation(dir, fidelity, p.all("--set"));
    if (p.switches.count("--write")) {
      const std::string path = source_dir() + "/results/validation.md";
      std::ofstream f(path);
      if (!f) throw std::invalid_argument("cannot write " + path);
      f << calibrate::validation_markdown(r);
      err << "wrote " << path << "\n";
    }
    if (p.switches.count("--json")) {
      out << report::report_json(report::validation_json(r)) << "\n";
    } else {
      out << calibrate::validation_markdown(r);
    }
    // A CI gate: 1 when the report's fidelity misses a bound (the report says which).
    return calibrate::meets(r.summary, calibrate::AccuracyBounds{}) ? 0 : 1;
  });
}

int run_cli(const Args& argv, std::ostream& out, std::ostream& err) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    (argv.empty() ? err : out) << usage();
    return argv.empty() ? 2 : 0;
  }
  if (argv[0] == "--version" || argv[0] == "version") {
    out << base::tool_version() << "\n";
    return 0;
  }
  const std::string command = argv[0];
  const Args rest(argv.begin() + 1, argv.end());
  // `megascale COMMAND --help`: that command's usage, on stdout, exit 0 (net
  // and calibrate have their own).
  if (command != "net" && command != "calibrate" && (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
                           std::find(rest.begin(), rest.end(), "-h") != rest.end())) {
    out << command_usage(command);
    return 0;
  }
  if (command == "simulate") return cmd_simulate(rest, out, err);
  if (command == "compare") return cmd_compare(rest, out, err);
  if (command == "search") return cmd_search(rest, out, err);
  if (command == "validate") return cmd_validate(rest, out, err);
  if (command == "net") return cmd_net(rest, out, err);
  if (command == "train") return cmd_train(rest, out, err);
  if (command == "run") return cmd_run(rest, out, err);
  if (command == "plan") return cmd_plan(rest, out, err);
  if (command == "calibrate") return cmd_calibrate(rest, out, err);
  if (command == "check") return guarded(err, "check", [&] { return cmd_check(rest, out, err); });
  err << "megascale: unknown command '" << command << "'\n\n" << usage();
  return 2;
}

}  // namespace megascale::cli
