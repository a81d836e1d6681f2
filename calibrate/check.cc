// calibrate/check.cc: see check.h.
#include "calibrate/check.h"

#include <fmt/format.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/shell_text.h"
#include "calibrate/timeline_svg.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "sim/job_sim.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;


// A TOML string value for --set (quoted, escaped).
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string last_lines(const std::string& path, int n) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += "\n  " + lines[i];
  }
  return out;
}

}  // namespace

CheckResult run_check(const std::string& scenario_file, const CheckOptions& o) {
  std::vector<std::string> overrides = o.overrides;
  if (!o.profile.empty()) {
    overrides.push_back("hardware.profile=" + toml_string(fs::absolute(o.profile).string()));
  }
  const model::Scenario s = model::load_scenario(scenario_file, overrides);
  const model::GpuProfile& profile = model::hardware_profile(s);
  if (!profile.is_cpu()) {
    throw model::ScenarioError(scenario_file, 0, 0, "hardware.gpu",
                               "calibrate check runs the engine, which runs on CPU in this version: "
                               "hardware.gpu must be \"cpu\" (or give a cpu profile), got \"" + s.hardware.gpu + "\"");
  }
  CheckResult r;
  r.scenario_file = scenario_file;
  r.name = s.name;
  r.profile_name = profile.name;
  r.profile_file = s.hardware.profile.empty() ? "calibrate/profiles/" + s.hardware.gpu + ".toml (shipped)"
                                              : s.hardware.profile;
  r.processes = s.cluster.gpus;
  r.tolerance = o.tolerance;
  const int steps = o.steps > 0 ? o.steps : std::max(s.train.steps, o.warmup + 5);
  if (steps <= o.warmup) throw std::invalid_argument("--steps must exceed the warm-up (" + std::to_string(o.warmup) + ")");

  // ---- measure ----
  std::string work = o.work_dir;
  if (work.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "megascale-check-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a scratch directory under /tmp");
    work = tmpl;
  }
  fs::create_directories(work);
  const std::string prefix = (fs::path(work) / "trace").string();
  const std::string err_file = (fs::path(work) / "engine.stderr").string();
  std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np " +
                    std::to_string(s.cluster.gpus) + " " + base::shell_quote(o.engine_binary) + " " +
                    base::shell_quote(scenario_file) + " --json";
  for (const std::string& ov : overrides) cmd += " --set " + base::shell_quote(ov);
  for (const std::string& ov : {"train.trace=" + toml_string(prefix), "train.steps=" + std::to_string(steps),
                                std::string("train.checkpoint_dir=\"\""), std::string("train.checkpoint_every=0")}) {
    cmd += " --set " + base::shell_quote(ov);
  }
  cmd += " 2> " + base::shell_quote(err_file);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot start mpirun (is openmpi-bin installed? scripts/setup.sh)");
  char buf[4096];
  while (fgets(buf, sizeof buf, pipe) != nullptr) {
    const base::Json j = base::Json::parse(buf, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step_time_s")) r.measured_steps_s.push_back(j["step_time_s"].get<double>());
  }
  const int status = pclose(pipe);
  if (status != 0 || static_cast<int>(r.measured_steps_s.size()) != steps) {
    throw std::runtime_error("the engine run of " + scenario_file + " failed (exit status " +
                             std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ", " +
                             std::to_string(r.measured_steps_s.size()) + " of " + std::to_string(steps) +
                             " steps reported); its last lines:" + last_lines(err_file, 8));
  }
  std::vector<double> steady(r.measured_steps_s.begin() + o.warmup, r.measured_steps_s.end());
  std::sort(steady.begin(), steady.end());
  const size_t n = steady.size();
  r.measured_step_s = n % 2 ? steady[n / 2] : 0.5 * (steady[n / 2 - 1] + steady[n / 2]);
  r.measured_spread = (steady.back() - steady.front()) / r.measured_step_s;
  const std::vector<model::TraceEvent> measured = model::read_trace_csv(prefix + ".csv");

  // ---- predict ----
  sim::SimOptions so;
  so.steps = 1;
  so.comm = sim::CommModel::kAnalytical;  // one machine: the profile's measured MPI collectives
  so.trace_step = 0;
  so.trace_layers = true;
  const sim::JobResult job = sim::simulate_job(s, so);
  r.predicted_step_s = job.estimate.iteration_time_s;
  r.error = r.predicted_step_s / r.measured_step_s - 1.0;
  r.pass = std::abs(r.error) <= o.tolerance;
  r.ops = compare_traces(measured, job.trace_events, job.schedule, s.parallel, o.warmup);

  // ---- picture: the steady step nearest the median, stage by stage ----
  const std::vector<StepWindow> windows = split_steps(measured, job.schedule, s.parallel);
  int pick = o.warmup;
  for (int k = o.warmup; k < steps; ++k) {
    if (std::abs(r.measured_steps_s[k] - r.measured_step_s) < std::abs(r.measured_steps_s[pick] - r.measured_step_s)) {
      pick = k;
    }
  }
  std::vector<TimelineLane> lanes;
  for (int pp = 0; pp < s.parallel.pp; ++pp) {
    const int rank = pp * s.parallel.tp * s.parallel.dp;  // TP rank 0 of DP replica 0
    TimelineLane m{"stage " + std::to_string(pp) + " measured", false, {}};
    for (const StepWindow& w : windows) {
      if (w.rank != rank || w.step != pick) continue;
      for (const model::TraceEvent& e : w.events) {
        if (is_ir_kind(e.kind)) m.events.push_back(e);
      }
    }
    TimelineLane p{"stage " + std::to_string(pp) + " predicted", true, {}};
    for (const model::TraceEvent& e : job.trace_events) {
      if (e.rank == sim::group_rank(s.parallel, 0, pp) && is_ir_kind(e.kind)) p.events.push_back(e);
    }
    lanes.push_back(std::move(m));
    lanes.push_back(std::move(p));
  }
  r.svg = timeline_svg(s.name + ": step " + std::to_string(pick + 1) + " measured (" +
                           fmt::format("{:.1f}", r.measured_steps_s[pick] * 1e3) + " ms) over predicted (" +
                           fmt::format("{:.1f}", r.predicted_step_s * 1e3) + " ms)",
                       lanes);

  if (!o.out_dir.empty()) {
    fs::create_directories(o.out_dir);
    const std::string stem = (fs::path(o.out_dir) / fs::path(scenario_file).stem()).string();
    std::ofstream(stem + ".svg") << r.svg;
    r.files.push_back(stem + ".svg");
    std::ofstream(stem + ".json") << check_json(r).dump(2) << "\n";
    r.files.push_back(stem + ".json");
    std::ofstream(stem + ".md") << check_markdown(r);
    r.files.push_back(stem + ".md");
  }
  if (o.work_dir.empty()) {
    std::error_code ignored;
    fs::remove_all(work, ignored);
  }
  return r;
}

base::Json check_json(const CheckResult& r) {
  base::Json j;
  j["scenario"] = r.name;
  j["scenario_file"] = r.scenario_file;
  j["profile"] = r.profile_file;
  j["processes"] = r.processes;
  j["measured_step_s"] = r.measured_step_s;
  j["measured_spread"] = r.measured_spread;
  j["measured_steps_s"] = r.measured_steps_s;
  j["predicted_step_s"] = r.predicted_step_s;
  j["error"] = r.error;
  j["tolerance"] = r.tolerance;
  j["pass"] = r.pass;
  auto split = [](const TimeSplit& t) {
    return base::Json{{"compute_s", t.compute_s}, {"tp_s", t.tp_s}, {"optimizer_s", t.optimizer_s},
                          {"wait_s", t.wait_s}, {"window_s", t.window_s}};
  };
  j["measured_split"] = split(r.ops.measured);
  j["predicted_split"] = split(r.ops.predicted);
  j["bubble_and_exposed_comm"] = {{"measured_s", r.ops.measured.wait_s}, {"predicted_s", r.ops.predicted.wait_s}};
  j["steps_used"] = r.ops.steps_used;
  base::Json ops = base::Json::array();
  for (const OpRow& op : r.ops.ops) {
    ops.push_back({{"kind", op.kind}, {"stream", op.stream}, {"measured_s", op.measured_s},
                   {"measured_spread", op.measured_spread}, {"predicted_s", op.predicted_s}, {"error", op.error}});
  }
  j["ops"] = ops;
  return j;
}

std::string check_markdown(const CheckResult& r) {
  std::ostringstream o;
  auto ms = [](double s) { return fmt::format("{:.2f}", s * 1e3); };
  auto pct = [](double f) { return fmt::format("{:+.1f}%", 100 * f); };
  o << "# Calibration check: " << r.name << "\n\n";
  o << "Generated by `megascale calibrate check " << r.scenario_file << "` (" << r.processes
    << " process(es)); prediction on profile `" << r.profile_file << "`.\n\n";
  o << "| | measured | predicted | error |\n|---|---|---|---|\n";
  o << "| steady-state step (median of " << r.measured_steps_s.size() - r.ops.steps_used << "+"
    << r.ops.steps_used << " steps, warm-up left out) | " << ms(r.measured_step_s) << " ms (spread "
    << fmt::format("{:.1f}", 100 * r.measured_spread) << "%) | " << ms(r.predicted_step_s) << " ms | " << pct(r.error) << " |\n";
  auto row = [&](const char* what, double m, double p) {
    o << "| " << what << " per rank | " << ms(m) << " ms | " << ms(p) << " ms | "
      << (m > 0 ? pct(p / m - 1) : std::string("-")) << " |\n";
  };
  row("compute (forward + backward kernels)", r.ops.measured.compute_s, r.ops.predicted.compute_s);
  row("TP communication", r.ops.measured.tp_s, r.ops.predicted.tp_s);
  row("optimizer step", r.ops.measured.optimizer_s, r.ops.predicted.optimizer_s);
  row("bubble + exposed p2p / DP communication", r.ops.measured.wait_s, r.ops.predicted.wait_s);
  o << "\nTolerance " << fmt::format("{:.0f}", 100 * r.tolerance) << "% on the step time: **" << (r.pass ? "pass" : "FAIL")
    << "**.\n\n";
  const std::string svg_name = fs::path(r.scenario_file).stem().string() + ".svg";
  o << "![measured over predicted timeline](" << svg_name << ")\n\n";
  o << "## Per op (per step, per rank)\n\n| kind | stream | measured ms | spread | predicted ms | error |\n"
       "|---|---|---|---|---|---|\n";
  for (const OpRow& op : r.ops.ops) {
    if (op.measured_s < 1e-5 && op.predicted_s < 1e-5) continue;
    o << "| " << op.kind << " | " << op.stream << " | " << fmt::format("{:.3f}", op.measured_s * 1e3) << " | "
      << fmt::format("{:.0f}%", 100 * op.measured_spread) << " | " << fmt::format("{:.3f}", op.predicted_s * 1e3) << " | "
      << (op.measured_s > 0 ? pct(op.error) : std::string("-")) << " |\n";
  }
  o << "\nStep times reported by the engine (s):";
  for (double t : r.measured_steps_s) o << " " << fmt::format("{:.4f}", t);
  o << "\n";
  return o.str();
}

}  // namespace megascale::calibrate
