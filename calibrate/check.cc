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
#include <set>
#include <stdexcept>

#include "base/json_document.h"
#include "base/number_text.h"
#include "base/shell_text.h"
#include "base/text_file.h"
#include "calibrate/timeline_svg.h"
#include "model/job_schedule.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "sim/event_run.h"
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

// Where a recorded run comes from, for error messages.
const char* kRunHint =
    "a recorded run is a directory with train.jsonl (megascale-train --json) and trace.csv (train.trace), "
    "as `calibrate check --run-dir` or scripts/gpu-check.sh step 6 write them";

// The step reports of `megascale-train --json`: lines that are JSON objects
// with step_time_s (anything else, e.g. a warning on stdout, is skipped). A
// line that opens an object and does not parse is a damaged report, not a
// warning: skipped, it lost a step and surfaced as "the trace has more steps".
struct StepLines {
  std::vector<double> steps_s;
  std::vector<double> tokens;  // step_time_s x tokens_per_s: the tokens of that step
  int bad_line = 0;            // first line whose step_time_s is not a positive finite number (0: none)
  int broken_line = 0;         // first line that starts with '{' and is not JSON (0: none)
  int broken_column = 0;       // where its syntax error is
  std::string broken_why;      // and what it is
};

StepLines read_step_lines(const std::string& path) {
  // An unreadable file is an InputFileError naming it, not "no step reports".
  std::istringstream in(base::read_text_or_throw(path));
  StepLines out;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const base::Json j = base::Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() && base::trim(line).rfind('{', 0) == 0) {
      if (out.broken_line == 0) {
        out.broken_line = line_no;
        try {
          (void)base::parse_json_document(line, path);
        } catch (const base::JsonSyntaxError& e) {
          out.broken_column = e.column();
          out.broken_why = e.reason();
        }
      }
      continue;
    }
    if (!j.is_object() || !j.contains("step_time_s") || !j["step_time_s"].is_number()) continue;
    const double step_s = j["step_time_s"].get<double>();
    if (!(step_s > 0) || !std::isfinite(step_s)) {
      if (out.bad_line == 0) out.bad_line = line_no;
      continue;
    }
    out.steps_s.push_back(step_s);
    out.tokens.push_back(j.contains("tokens_per_s") && j["tokens_per_s"].is_number()
                             ? j["tokens_per_s"].get<double>() * out.steps_s.back()
                             : -1.0);
  }
  return out;
}

// The kinds of the unfused attention core (model/op_cost.h append_attention_core),
// which the engine traces as one `flash_attention` event on both CUDA paths.
bool unfused_attention_kind(const std::string& kind) {
  const std::string base = kind.substr(0, kind.find('.'));
  return base == "attn_scores" || base == "softmax" || base == "attn_dropout" || base == "attn_context";
}

// The predicted events with the unfused attention core renamed
// flash_attention(.bwd / .recompute) when the measured trace has that kind and
// the prediction does not (check.h: where the CUDA engine differs).
std::vector<model::TraceEvent> as_measured_kinds(std::vector<model::TraceEvent> predicted,
                                                 const std::vector<model::TraceEvent>& measured) {
  auto has = [](const std::vector<model::TraceEvent>& v, const char* kind) {
    return std::any_of(v.begin(), v.end(), [&](const model::TraceEvent& e) { return e.kind == kind; });
  };
  if (!has(measured, "flash_attention") || has(predicted, "flash_attention")) return predicted;
  for (model::TraceEvent& e : predicted) {
    if (!unfused_attention_kind(e.kind)) continue;
    const size_t dot = e.kind.find('.');
    e.kind = "flash_attention" + (dot == std::string::npos ? std::string() : e.kind.substr(dot));
  }
  return predicted;
}

}  // namespace

RecordedRun read_recorded_run(const std::string& dir, const model::Scenario& s) {
  RecordedRun run;
  run.dir = dir;
  if (!fs::is_directory(dir)) {
    throw std::invalid_argument(dir + ": " + (fs::exists(dir) ? "not a directory" : "no such directory") + " (" +
                             kRunHint + ")");
  }
  const std::string jsonl = (fs::path(dir) / "train.jsonl").string();
  const std::string csv = (fs::path(dir) / "trace.csv").string();
  if (!fs::is_regular_file(jsonl)) throw std::invalid_argument(jsonl + ": missing (" + kRunHint + ")");
  if (!fs::is_regular_file(csv)) throw std::invalid_argument(csv + ": missing (" + kRunHint + ")");
  const StepLines lines = read_step_lines(jsonl);
  if (lines.broken_line > 0) {
    throw std::invalid_argument(fmt::format("{}:{}:{}: a step report that is not valid JSON ({}): a damaged run record",
                                            jsonl, lines.broken_line, lines.broken_column, lines.broken_why));
  }
  if (lines.bad_line > 0) {
    throw std::invalid_argument(fmt::format("{}:{}: step_time_s must be a positive number of seconds: a corrupt "
                                            "step report", jsonl, lines.bad_line));
  }
  if (lines.steps_s.empty()) {
    throw std::invalid_argument(jsonl + ": no step reports (JSON lines with step_time_s): the run printed no step");
  }
  const double tokens = static_cast<double>(s.tokens_per_iteration());
  for (size_t k = 0; k < lines.tokens.size(); ++k) {
    if (lines.tokens[k] >= 0 && std::abs(lines.tokens[k] / tokens - 1) > 1e-3) {
      throw std::invalid_argument(fmt::format(
          "{}: step {} trained {:.6g} tokens, scenario {} has {:.6g} per step (global_batch x seq_len): "
          "a run of another scenario",
          jsonl, k + 1, lines.tokens[k], s.name, tokens));
    }
  }
  run.steps_s = lines.steps_s;
  try {
    run.trace = model::read_trace_csv(csv);
  } catch (const std::runtime_error& e) {  // model::TraceParseError names the file, line and column
    throw std::invalid_argument(e.what());
  }
  std::set<int> ranks;
  int max_layer = -1;
  bool ir = false;
  for (const model::TraceEvent& e : run.trace) {
    if (e.rank < 0 || e.rank >= s.cluster.gpus) {
      throw std::invalid_argument(fmt::format("{}: rank {} is outside scenario {}'s {} process(es): a run of another "
                                           "scenario", csv, e.rank, s.name, s.cluster.gpus));
    }
    ranks.insert(e.rank);
    max_layer = std::max(max_layer, e.layer);
    ir = ir || is_ir_kind(e.kind);
  }
  if (!ir) throw std::invalid_argument(csv + ": no Schedule IR events, so no steps (an empty or cut trace)");
  if (static_cast<int>(ranks.size()) != s.cluster.gpus) {
    throw std::invalid_argument(fmt::format("{}: events of {} rank(s), scenario {} runs {}: a run of another scenario "
                                         "(or a trace of one rank only)", csv, ranks.size(), s.name, s.cluster.gpus));
  }
  if (max_layer > s.model.layers) {  // layer L is the output head
    throw std::invalid_argument(fmt::format("{}: layer {} traced, scenario {} has {} layers: a run of another scenario",
                                         csv, max_layer, s.name, s.model.layers));
  }
  const model::Schedule schedule = model::build_job_schedule(s);
  std::vector<StepWindow> windows;
  try {
    windows = split_steps(run.trace, schedule, s.parallel);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(csv + ": " + e.what() + " of scenario " + s.name + ": a run of another scenario or a cut trace");
  }
  for (const StepWindow& w : windows) {
    if (w.step + 1 > static_cast<int>(run.steps_s.size())) {
      throw std::invalid_argument(fmt::format("{}: rank {} traced more steps than the {} that {} reports: a run of another "
                                           "scenario or of another run", csv, w.rank,
                                           run.steps_s.size(), jsonl));
    }
  }
  for (int rank : ranks) {
    const long steps = std::count_if(windows.begin(), windows.end(), [&](const StepWindow& w) { return w.rank == rank; });
    if (steps != static_cast<long>(run.steps_s.size())) {
      throw std::invalid_argument(fmt::format("{}: rank {} traced {} step(s), {} reports {}: a run of another scenario, "
                                           "of another run or a cut trace", csv, rank, steps, jsonl,
                                           run.steps_s.size()));
    }
  }
  return run;
}

void check_report_stems(const std::vector<std::string>& files, const std::string& out_dir) {
  for (size_t i = 0; i < files.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (fs::path(files[j]).stem() != fs::path(files[i]).stem()) continue;
      throw std::invalid_argument(fmt::format(
          "{} and {} would both write their report to {}.md, .svg and .json: check them in two runs with different "
          "--dir",
          files[j], files[i], (fs::path(out_dir) / fs::path(files[i]).stem()).string()));
    }
  }
}

CheckResult run_check(const std::string& scenario_file, const CheckOptions& o) {
  std::vector<std::string> overrides = o.overrides;
  if (!o.profile.empty()) {
    overrides.push_back("hardware.profile=" + toml_string(fs::absolute(o.profile).string()));
  }
  const model::Scenario s = model::load_scenario(scenario_file, overrides);
  const model::GpuProfile& profile = model::hardware_profile(s);
  // The folders written after the run (the reports, a recorded run): one that
  // cannot be made fails now, not after the engine's minutes.
  for (const auto& [option, folder] : {std::pair{"--dir", o.out_dir}, std::pair{"--run-dir", o.work_dir}}) {
    if (folder.empty()) continue;
    try {
      base::make_folder_or_throw(folder);
    } catch (const base::FileError& e) {
      throw std::invalid_argument(std::string(option) + ": " + e.what());
    }
  }
  // The engine's device and the profile describe one machine: a cpu profile
  // times the CPU engine (the scenario loader refuses cuda with it), a GPU
  // profile the CUDA engine.
  if (!profile.is_cpu() && s.train.device != "cuda") {
    throw model::ScenarioError(scenario_file, 0, 0, "train.device",
                               "hardware.gpu = \"" + s.hardware.gpu + "\" is a GPU profile, which predicts the CUDA "
                               "engine: set train.device = \"cuda\" (got \"" + s.train.device +
                               "\"), or check the CPU engine on a cpu profile");
  }
  CheckResult r;
  r.scenario_file = scenario_file;
  r.name = s.name;
  r.device = s.train.device;
  r.engine_calls = profile.models_engine();
  r.profile_name = profile.name;
  r.profile_file = s.hardware.profile.empty() ? "calibrate/profiles/" + s.hardware.gpu + ".toml (shipped)"
                                              : s.hardware.profile;
  r.processes = s.cluster.gpus;
  r.tolerance = o.tolerance;

  // ---- measure: run the engine into a run directory, or take a recorded one ----
  std::string work = o.work_dir;
  if (!o.from_run.empty()) {
    if (o.steps > 0) throw std::invalid_argument("--steps sets the engine run's length; a recorded run (--from-run) has its own");
    work = o.from_run;
    r.recorded = true;
  } else {
    const int steps = o.steps > 0 ? o.steps : std::max(s.train.steps, o.warmup + 5);
    if (steps <= o.warmup) throw std::invalid_argument("--steps must exceed the warm-up (" + std::to_string(o.warmup) + ")");
    if (work.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "megascale-check-XXXXXX").string();
      if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("cannot create a scratch directory under /tmp");
      work = tmpl;
    }
    fs::create_directories(work);
    work = fs::absolute(work).string();  // train.trace is relative to the scenario's folder, not ours
    const std::string prefix = (fs::path(work) / "trace").string();
    const std::string out_file = (fs::path(work) / "train.jsonl").string();
    const std::string err_file = (fs::path(work) / "engine.stderr").string();
    std::error_code ignored;
    fs::remove(out_file, ignored);
    fs::remove(prefix + ".csv", ignored);
    std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np " +
                      std::to_string(s.cluster.gpus) + " " + base::shell_quote(o.engine_binary) + " " +
                      base::shell_quote(scenario_file) + " --json";
    for (const std::string& ov : overrides) cmd += " --set " + base::shell_quote(ov);
    for (const std::string& ov : {"train.trace=" + toml_string(prefix), "train.steps=" + std::to_string(steps),
                                  std::string("train.checkpoint_dir=\"\""), std::string("train.checkpoint_every=0")}) {
      cmd += " --set " + base::shell_quote(ov);
    }
    cmd += " > " + base::shell_quote(out_file) + " 2> " + base::shell_quote(err_file);
    const int status = std::system(cmd.c_str());
    const size_t reported = read_step_lines(out_file).steps_s.size();
    if (status != 0 || static_cast<int>(reported) != steps) {
      throw std::runtime_error("the engine run of " + scenario_file + " failed (exit status " +
                               std::to_string(status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ", " +
                               std::to_string(reported) + " of " + std::to_string(steps) +
                               " steps reported); its last lines:" + last_lines(err_file, 8));
    }
  }
  r.run_dir = o.work_dir.empty() && o.from_run.empty() ? "" : work;
  // The live run is read back exactly as a recorded one.
  const RecordedRun run = read_recorded_run(work, s);
  const int steps = static_cast<int>(run.steps_s.size());
  if (steps <= o.warmup) {
    throw std::invalid_argument(fmt::format("{}: {} step(s), no more than the warm-up ({}, --warmup): no step to compare",
                                         (fs::path(work) / "train.jsonl").string(), steps, o.warmup));
  }
  r.measured_steps_s = run.steps_s;
  std::vector<double> steady(r.measured_steps_s.begin() + o.warmup, r.measured_steps_s.end());
  std::sort(steady.begin(), steady.end());
  const size_t n = steady.size();
  r.measured_step_s = n % 2 ? steady[n / 2] : 0.5 * (steady[n / 2 - 1] + steady[n / 2]);
  r.measured_spread = (steady.back() - steady.front()) / r.measured_step_s;
  const std::vector<model::TraceEvent>& measured = run.trace;

  // ---- predict ----
  // `megascale simulate --fidelity event --trace-layers`, one step, no
  // variability: a cpu profile's collectives are its measured MPI times
  // (analytical links), a GPU profile's go through the scenario's fabric.
  sim::RunRequest request;
  request.trace_layers = true;
  sim::SimOptions so = sim::sim_options(s, request);
  so.trace_step = 0;  // keep step 0's timeline (in memory; nothing is written)
  const sim::JobResult job = sim::simulate_job(s, so);
  r.predicted_step_s = job.estimate.iteration_time_s;
  r.error = r.predicted_step_s / r.measured_step_s - 1.0;
  r.pass = std::abs(r.error) <= o.tolerance;
  r.ops = compare_traces(measured, as_measured_kinds(job.trace_events, measured), job.schedule, s.parallel, o.warmup);

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
    base::write_text_or_throw(stem + ".svg", r.svg);
    r.files.push_back(stem + ".svg");
    base::write_text_or_throw(stem + ".json", check_json(r).dump(2) + "\n");
    r.files.push_back(stem + ".json");
    base::write_text_or_throw(stem + ".md", check_markdown(r));
    r.files.push_back(stem + ".md");
  }
  if (o.work_dir.empty() && o.from_run.empty()) {
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
  j["device"] = r.device;
  j["measured_from"] = r.recorded ? "recorded run" : "engine run";
  if (!r.run_dir.empty()) j["run_dir"] = r.run_dir;
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
  o << "Generated by `megascale calibrate check " << r.scenario_file
    << (r.recorded ? " --from-run " + r.run_dir : std::string()) << "` (" << r.processes << " process(es) on "
    << r.device << ", " << (r.recorded ? "a recorded run" : "run now") << "); prediction on profile `" << r.profile_file
    << "`.\n\n";
  if (r.device == "cuda" && r.engine_calls) {
    o << "The CUDA engine times each op with CUDA events. The prediction times the engine's own calls "
         "(model/engine_ops.h) from the profile's tables, which `megascale calibrate micro --device cuda "
         "--engine-profile` measured on the device (fused_bias: the biases run inside the GEMM epilogue and the "
         "residual kernel when the device does so). The profile's data_load_s_per_sample is an assumption, not the "
         "engine's loader.\n\n";
  } else if (r.device == "cuda") {
    o << "The CUDA engine times each op with CUDA events. Where it differs from the Megatron-LM kernels the "
         "profile models: bf16 GEMMs cast their fp32 inputs per call; activations stay fp32 (twice the modelled "
         "bytes of LayerNorm, GeLU, bias-add, softmax); its own fp32 AdamW kernel; attention is the cuBLAS "
         "explicit-scores path in bf16 (a CUDA-core flash kernel in fp32), traced as `flash_attention`, under "
         "which a prediction's unfused attention kinds are summed (calibrate/check.h).\n\n";
  }
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
