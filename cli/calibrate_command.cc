// cli/calibrate_command.cc: `megascale calibrate micro|import|check|fit|net-check|runs-check ...`.
//
// Parse, call calibrate/ (or launch the engine's microbenchmarks), print
// (report/). run_cli (cli/commands.cc) dispatches "calibrate" here.
#include "cli/commands.h"

#include <cmath>
#include <filesystem>

#include "calibrate/check.h"
#include "calibrate/fit.h"
#include "calibrate/fit_inputs.h"
#include "calibrate/import.h"
#include "calibrate/nccl_tests.h"
#include "calibrate/net_check.h"
#include "calibrate/layer_check.h"
#include "calibrate/runs_check.h"
#include "base/mpirun.h"
#include "base/text_file.h"
#include "engine/micro_launch.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "report/calibrate_report.h"
#include "report/net_check_report.h"
#include "report/runs_check_report.h"
#include "report/estimate_report.h"

namespace megascale::cli {
namespace {

namespace fs = std::filesystem;

// "megascale calibrate fit --runs ..." as typed: the reports say how they were made.
std::string command_line(const std::string& sub, const ParsedArgs& p) {
  std::string line = "megascale calibrate " + sub;
  for (const std::string& a : p.args) line += " " + a;
  return line;
}

// ---- micro --------------------------------------------------------------------

int calibrate_micro(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  const bool cuda = p.text("--device", "cpu") == "cuda";
  if (!cuda)
    for (const std::string& f : p.positional) (void)model::load_scenario(f);  // bad input before the run
  const std::string micro = base::sibling_program("megascale-micro");
  if (!fs::exists(micro)) {
    err << "megascale calibrate micro: " << micro << " is missing (build the megascale-micro target)\n";
    return 1;
  }
  engine::MicroLaunch m;  // engine/micro_launch.h: mpirun's arguments
  m.cuda = cuda;
  m.ranks = static_cast<int>(p.integer("--ranks", 0));
  // --out, --gemm-csv and --engine-profile are written after minutes of
  // timing: parse_args checked them first (Kind::kOutFile).
  m.out_file = p.text("--out", "");
  m.quick = p.on("--quick");
  m.single = p.on("--single");
  m.gemm_csv = p.text("--gemm-csv", "");
  m.engine_profile = p.text("--engine-profile", "");
  m.scenarios = p.positional;
  const std::vector<std::string> mpi_args = engine::micro_mpirun_args(micro, m);  // bad combinations: exit 2
  if (!m.engine_profile.empty())  // the engine's own calls: the scenarios are read here first
    for (const std::string& f : p.positional) model::check_trainable(model::load_scenario(f));
  out.flush();
  return base::run_mpirun(mpi_args, err, "megascale calibrate micro");
}

// ---- check --------------------------------------------------------------------

int calibrate_check(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  if (p.positional.empty()) throw UsageError("calibrate check expects at least one SCENARIO");
  calibrate::CheckOptions o;
  o.profile = p.text("--profile", "");
  o.tolerance = p.number("--tolerance", o.tolerance);
  o.steps = static_cast<int>(p.integer("--steps", 0));
  o.warmup = static_cast<int>(p.integer("--warmup", 2));
  o.out_dir = p.text("--dir", "results/calibration");
  o.overrides = p.all("--set");
  o.from_run = p.text("--from-run", "");
  o.work_dir = p.text("--run-dir", "");
  if (!o.from_run.empty()) {
    if (p.positional.size() != 1) throw UsageError("--from-run DIR is one recorded run: give exactly one SCENARIO");
    if (p.has("--steps")) throw UsageError("--steps sets the engine run's length; a recorded run (--from-run) has its own");
    if (p.has("--run-dir")) throw UsageError("--run-dir records a new run; --from-run reads one: give one of them");
  }
  if (!o.work_dir.empty() && p.positional.size() != 1) {
    throw UsageError("--run-dir DIR records one run: give exactly one SCENARIO");
  }
  base::refuse_repeated_files(p.positional, "it would run twice");  // and two of one stem, one report (DIR/<stem>.md)
  calibrate::check_report_stems(p.positional, o.out_dir);
  o.engine_binary = base::sibling_program("megascale-train");
  if (o.from_run.empty() && !fs::exists(o.engine_binary)) {
    err << "megascale calibrate check: " << o.engine_binary << " is missing (build the megascale-train target)\n";
    return 1;
  }
  base::Json all = base::Json::array();  // one object per scenario
  bool pass = true;
  std::vector<double> errors;
  for (const std::string& f : p.positional) {
    err << "megascale calibrate check: " << f << ": "
        << (o.from_run.empty() ? "running the engine" : "reading the run in " + o.from_run) << " and the simulation...\n"
        << std::flush;
    const calibrate::CheckResult r = calibrate::run_check(f, o);
    pass = pass && r.pass;
    errors.push_back(std::abs(r.error));
    if (p.on("--json")) {
      all.push_back(calibrate::check_json(r));
    } else {
      out << report::check_text(r, f);
    }
  }
  if (p.on("--json")) {
    out << report::report_json(base::Json{{"checks", all}}) << "\n";
  } else if (errors.size() > 1) {
    out << report::check_summary_text(errors);
  }
  return pass ? 0 : 1;
}

// ---- import -------------------------------------------------------------------

int calibrate_import(const ParsedArgs& p, std::ostream& out, std::ostream& /*err*/) {
  if (!p.positional.empty()) throw UsageError("calibrate import takes files with --nccl-tests / --gemm-csv, not '" + p.positional[0] + "'");
  if (!p.has("--out")) throw UsageError("calibrate import needs --out FILE (the profile to write)");
  calibrate::ImportOptions o;
  o.base = p.text("--profile", o.base);
  o.name = p.text("--name", o.name);
  o.scope = p.text("--scope", o.scope);
  o.nccl_tests = p.all("--nccl-tests");
  o.gemm_csv = p.all("--gemm-csv");
  const calibrate::ImportReport r = calibrate::import_measurements(o);
  const std::string path = p.text("--out");
  base::write_text_or_throw(path, model::write_profile(r.profile));
  out << (p.on("--json") ? report::report_json(report::import_json(r, path)) + "\n" : report::import_text(r, path));
  return 0;
}

// ---- fit ----------------------------------------------------------------------

// `calibrate fit --layers FILE --params tp_gather_scatter` (calibrate/layer_fit.h).
int calibrate_fit_layers(const ParsedArgs& p, std::ostream& out) {
  if (p.has("--runs") || p.on("--engine") || !p.positional.empty())
    throw UsageError("calibrate fit --layers takes its measured times from that file alone (no --runs, --engine or SCENARIO)");
  if (p.has("--hold-out") || p.on("--same-gpu") || p.on("--hold-out-pipelined"))
    throw UsageError("--hold-out, --same-gpu and --hold-out-pipelined select runs of --runs, not rows of --layers");
  const calibrate::FitParams params =
      read_option("--params", [&] { return calibrate::parse_fit_params(p.text("--params", "")); });
  if (!params.tp_gather_scatter || params.step_overhead || params.compute_scale || params.element_overhead)
    throw UsageError("calibrate fit --layers fits tp_gather_scatter alone: --params tp_gather_scatter");
  const calibrate::LayerFitResult r = calibrate::run_layer_fit(p.text("--profile"), p.text("--layers"));
  base::write_text_or_throw(p.text("--out"), model::write_profile(r.profile));
  const std::string md = calibrate::layer_fit_markdown(r, command_line("fit", p));
  if (p.has("--report")) base::write_text_or_throw(p.text("--report"), md);
  out << md;
  return 0;
}

int calibrate_fit(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  if (!p.has("--profile")) throw UsageError("calibrate fit needs --profile NAME|FILE (the profile to start from)");
  if (!p.has("--out")) throw UsageError("calibrate fit needs --out FILE (the fitted profile)");
  if (p.has("--layers")) return calibrate_fit_layers(p, out);
  if (p.has("--runs") == p.on("--engine")) {
    throw UsageError(
        "calibrate fit takes its measured times from --runs FILE.csv, from --engine runs or from --layers FILE.csv, "
        "one of them");
  }
  if (p.has("--runs") && !p.positional.empty())
    throw UsageError("with --runs, the runs come from the file; select held-out ones with --hold-out");
  if (p.on("--engine") && p.positional.empty()) throw UsageError("calibrate fit --engine expects the SCENARIOs to run");
  base::refuse_repeated_files(p.positional, "its run would weigh twice in the fit");
  calibrate::FitRequest request;  // calibrate/fit_inputs.h
  request.profile = p.text("--profile");
  request.runs_csv = p.text("--runs", "");
  if (p.on("--engine")) request.engine_scenarios = p.positional;
  request.engine_binary = base::sibling_program("megascale-train");
  request.held_out = split_list(p.text("--hold-out", ""));
  request.same_gpu = p.on("--same-gpu");
  request.hold_out_pipelined = p.on("--hold-out-pipelined");
  if ((request.same_gpu || request.hold_out_pipelined) && !p.has("--runs")) {
    throw UsageError("--same-gpu and --hold-out-pipelined select among the rows of --runs FILE.csv");
  }
  if (p.has("--params")) request.params = read_option("--params", [&] { return calibrate::parse_fit_params(p.text("--params")); });
  const calibrate::FitResult r = calibrate::run_fit(
      request, [&](const std::string& line) { err << "megascale calibrate fit: " << line << "\n" << std::flush; });
  base::write_text_or_throw(p.text("--out"), model::write_profile(r.profile));
  const std::string md = calibrate::fit_markdown(r, command_line("fit", p));
  if (p.has("--report")) base::write_text_or_throw(p.text("--report"), md);
  out << md;
  return 0;
}

// ---- net-check (calibrate/net_check.h) ----------------------------------------

int calibrate_net_check(const ParsedArgs& p, std::ostream& out, std::ostream& /*err*/) {
  calibrate::NetRestriction only;  // NCCL_ALGO / NCCL_PROTO: what a forced choice would give
  only.algorithm = read_option("--algo", [&] { return network::algorithm_choice(p.text("--algo", "auto")); });
  if (only.algorithm == network::CollectiveAlgorithm::kHierarchical)
    throw UsageError("--algo hierarchical is three NCCL calls, not an NCCL_ALGO: net-check compares NCCL's own runs");
  only.protocol = read_option("--proto", [&] { return network::protocol_choice(p.text("--proto", "auto")); });
  std::vector<calibrate::NetMachine> machines;
  if (p.has("--manifest")) {
    if (!p.positional.empty()) throw UsageError("net-check takes --manifest FILE or nccl-tests FILEs, not both");
    machines = calibrate::read_net_manifest(p.text("--manifest"));
  } else {
    if (p.positional.empty()) throw UsageError("net-check needs --manifest FILE or nccl-tests FILEs with --gpu");
    if (!p.has("--gpu")) throw UsageError("net-check FILE... needs --gpu NAME|FILE (and --nic-gbps, --nics-per-node)");
    calibrate::NetMachine base = calibrate::profile_machine(p.text("--gpu"));
    base.nics_per_node = static_cast<int>(p.integer("--nics-per-node", base.nics_per_node));
    base.nic_gbps = p.number("--nic-gbps", base.nic_gbps);
    base::refuse_repeated_files(p.positional, "a file scored twice weighs twice");
    for (const std::string& f : p.positional) {
      calibrate::NetMachine m = base;
      m.file = f;
      machines.push_back(m);
    }
  }

  const std::vector<calibrate::NetRun> results = calibrate::predict_net_runs(machines, only);
  const std::vector<calibrate::NetClassStats> classes = calibrate::score_net_runs(results);
  const std::string md = report::net_check_markdown(results, classes, command_line("net-check", p), p.on("--points"));
  if (p.has("--write")) {
    const std::string path = p.text("--write");
    base::write_text_or_throw(path, md);
  }
  out << (p.on("--json") ? report::report_json(report::net_check_json(results, classes)) + "\n" : md);
  return calibrate::all_pass(classes) ? 0 : 1;
}

// ---- runs-check (calibrate/runs_check.h) --------------------------------------

int calibrate_runs_check(const ParsedArgs& p, std::ostream& out, std::ostream& /*err*/) {
  if (!p.positional.empty()) throw UsageError("runs-check takes --runs FILE.csv, not '" + p.positional[0] + "'");
  if (!p.has("--runs")) throw UsageError("runs-check needs --runs FILE.csv (e.g. calibrate/runs/published.csv)");
  // Every input read before the runs are simulated (a minute for the
  // published set): a bad --layers file used to be found only after it (and
  // --write is checked by parse_args, Kind::kOutFile).
  const std::vector<calibrate::MeasuredRun> runs = calibrate::read_measured_runs(p.text("--runs"));
  std::vector<calibrate::PublishedLayer> layers;
  if (p.has("--layers")) layers = calibrate::read_published_layers(p.text("--layers"));
  calibrate::RunsCheck check = calibrate::check_published_runs(runs);
  if (p.has("--layers")) check.layers = calibrate::check_published_layers(layers);
  const std::string md = report::runs_check_markdown(check, command_line("runs-check", p));
  if (p.has("--write")) {
    const std::string path = p.text("--write");
    base::write_text_or_throw(path, md);
  }
  out << (p.on("--json") ? report::report_json(report::runs_check_json(check)) + "\n" : md);
  return check.pass ? 0 : 1;
}

}  // namespace

std::vector<CommandEntry> calibrate_commands() {
  const Option json = json_flag();
  const Option write = {"--write", Kind::kOutFile, "FILE.md", "also write the report there"};
  const Option algo = {"--algo", Kind::kText, "auto|ring|tree|nvls|nvls-tree", "what NCCL_ALGO would give"};
  const Option proto = {"--proto", Kind::kText, "auto|LL|LL128|Simple", "what NCCL_PROTO would give"};
  CommandEntry micro = {
      {"calibrate micro", "[options] [SCENARIO...]",
       "time the engine's own kernels and MPI collectives (engine/microbench.h) into a cpu\n"
       "profile (calibrate/profiles/README.md); SCENARIOs add their exact shapes",
       {{"--device", Kind::kChoice, "cpu|cuda", "cuda: the CUDA device's kernels on one GPU, timed with\n"
                                                "CUDA events (engine/microbench_cuda.h); exit 2 without a GPU"},
        {"--ranks", Kind::kInt, "N", "MPI ranks (default: the cores, at most 8)", 1, 64},
        {"--out", Kind::kOutFile, "FILE", "the profile (default cpu-profile.toml, cuda-micro.toml;\n- for stdout)"},
        {"--quick", Kind::kFlag, "", "a coarser sweep"},
        {"--single", Kind::kFlag, "", "every rank alone only"},
        {"--gemm-csv", Kind::kOutFile, "FILE", "cuda: the GEMM points also as a GEMM sweep CSV\n(for calibrate import --gemm-csv)"},
        {"--engine-profile", Kind::kOutFile, "FILE", "cuda: the engine's own calls for the SCENARIOs, measured,\n"
                                                  "as a GPU profile (engine_calls = 1) for calibrate check"}}},
      calibrate_micro};
  CommandEntry import = {
      {"calibrate import", "--out FILE [options]",
       "a profile from measurements users already have: nccl-tests output and GEMM sweep CSVs",
       {{"--out", Kind::kOutFile, "FILE", "the profile to write"},
        {"--profile", Kind::kText, "BASE", "the profile they are added to (a file or a shipped name)"},
        {"--nccl-tests", Kind::kRepeated, "FILE", "nccl-tests output (repeatable)"},
        {"--gemm-csv", Kind::kRepeated, "FILE", "a GEMM sweep (repeatable)"},
        {"--scope", Kind::kText, "intra|inter", "where the collectives ran (default: from the file)"},
        {"--name", Kind::kText, "NAME", "the new profile's name"}, json}},
      calibrate_import};
  CommandEntry check = {
      {"calibrate check", "SCENARIO... [options]",
       "the engine's measured step (traced; cpu or cuda) against the simulation of the same Schedule\n"
       "IR on the profile (cpu or GPU); writes DIR/<scenario>.md, .svg, .json; exit 1 beyond the tolerance",
       {{"--profile", Kind::kText, "FILE", "the profile to predict with"},
        {"--from-run", Kind::kText, "RUN", "take the measured side from a recorded run (RUN/train.jsonl,\n"
                                           "RUN/trace.csv, e.g. scripts/gpu-check.sh's OUT) instead of running"},
        {"--run-dir", Kind::kText, "RUN", "keep the engine's run there (train.jsonl, trace.csv) for --from-run"},
        {"--tolerance", Kind::kFraction, "X", "step-time error that passes (default 0.15)", kAboveZero, 10,
         "a fraction > 0 (0.15 = 15%)"},
        {"--steps", Kind::kInt, "N", "steps timed", 1, 100000},
        {"--warmup", Kind::kInt, "K", "steps run before (default 2)", 0, 1000},
        {"--dir", Kind::kText, "DIR", "where the reports go (default results/calibration)"}, json,
        set_option()}},
      calibrate_check};
  CommandEntry fit = {
      {"calibrate fit", "--profile NAME|FILE --out FILE (--runs RUNS.csv | --engine SCENARIO...) [options]",
       "fit a per-step host overhead and an in-situ kernel scale (or a cost per activation\n"
       "element) on measured iteration times;\n"
       "prints the leave-one-out and the held-out error and writes the fitted profile",
       {{"--profile", Kind::kText, "NAME|FILE", "the profile to start from"},
        {"--out", Kind::kOutFile, "FILE", "the fitted profile"},
        {"--runs", Kind::kText, "RUNS.csv", "measured iteration times"},
        {"--engine", Kind::kFlag, "", "run the SCENARIOs on the engine instead"},
        {"--hold-out", Kind::kText, "NAME,...", "runs the fit does not use"},
        {"--hold-out-pipelined", Kind::kFlag, "", "also hold out every run with pipeline stages (pp > 1)"},
        {"--same-gpu", Kind::kFlag, "", "use only the runs on the profile's GPU (--runs)"},
        {"--layers", Kind::kText, "LAYERS.csv",
         "published per-layer times instead (calibrate/runs/published-layers.csv): fits tp_gather_scatter"},
        {"--params", Kind::kText, "step_overhead,compute_scale,element_overhead,tp_gather_scatter",
         "what is fitted (default step_overhead,compute_scale)"},
        {"--report", Kind::kOutFile, "FILE.md", "also write the report there"}}},
      calibrate_fit};
  CommandEntry net_check = {
      {"calibrate net-check",
       "(--manifest FILE.toml | NCCL-TESTS-FILE... --gpu NAME|FILE) [options]",
       "`net collective` against nccl-tests output measured on real machines (the published set:\n"
       "--manifest tests/calibrate/fixtures/nccl-tests/systems.toml); exit 1 when a bound is missed",
       {{"--manifest", Kind::kText, "FILE.toml", "the machines and their files"},
        {"--gpu", Kind::kText, "NAME|FILE", "the GPU profile of the files' machine"},
        {"--nics-per-node", Kind::kInt, "N", "its NICs per node", 1, 64},
        {"--nic-gbps", Kind::kNumber, "G", "their line rate (>= 1 Gb/s)", model::kMinLineRateGbps, kNoLimit}, algo, proto,
        {"--points", Kind::kFlag, "", "every size in the report"}, write, json}},
      calibrate_net_check};
  CommandEntry runs_check = {
      {"calibrate runs-check", "--runs RUNS.csv [options]",
       "the simulator against published iteration times of whole training runs\n"
       "(calibrate/runs/published.csv); exit 1 when median |error| > 8% or max > 20%",
       {{"--runs", Kind::kText, "RUNS.csv", "the published runs"},
        {"--layers", Kind::kText, "LAYERS.csv", "also published one-layer forward / backward times\n"
                                                "(calibrate/runs/published-layers.csv), not in the bounds"},
        write, json}},
      calibrate_runs_check};
  std::vector<CommandEntry> all = {micro, import, check, fit, net_check, runs_check};
  for (CommandEntry& e : all) e.other_errors_exit_1 = true;
  return all;
}

}  // namespace megascale::cli
