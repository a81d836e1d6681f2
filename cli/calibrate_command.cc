// cli/calibrate_command.cc: `megascale calibrate micro|import|check|fit|net-check|runs-check ...`.
//
// Parse, call calibrate/ (or launch the engine's microbenchmarks), print
// (report/). run_cli (cli/commands.cc) dispatches "calibrate" here.
#include "cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <thread>

#include "calibrate/check.h"
#include "calibrate/fit.h"
#include "calibrate/fit_inputs.h"
#include "calibrate/import.h"
#include "calibrate/nccl_tests.h"
#include "calibrate/net_check.h"
#include "calibrate/runs_check.h"
#include "cli/args.h"
#include "base/mpirun.h"
#include "base/text_file.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "report/calibrate_report.h"
#include "report/net_check_report.h"
#include "report/runs_check_report.h"
#include "report/estimate_report.h"

namespace megascale::cli {
namespace {

namespace fs = std::filesystem;

int usage_error(std::ostream& err, const std::string& what) {
  err << "megascale calibrate: " << what << "\n\n" << calibrate_usage();
  return 2;
}

int number_option(const ParsedArgs& p, const std::string& name, int fallback, int lo, int hi) {
  if (!p.has(name)) return fallback;
  const std::string& v = p.values.at(name);
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || n < lo || n > hi) {
    throw UsageError(name + " must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                     ", got '" + v + "'");
  }
  return n;
}

// ---- micro --------------------------------------------------------------------

int calibrate_micro(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_args(args, {"--quick", "--single"}, {"--device", "--ranks", "--out"});
  const std::string device = p.has("--device") ? p.values.at("--device") : "cpu";
  if (device == "cuda") {
    // One process on the GPU (engine/microbench_cuda.h); megascale-micro says
    // why when there is none (exit 2).
    const std::string micro = base::sibling_program("megascale-micro");
    if (!fs::exists(micro)) {
      err << "megascale calibrate micro: " << micro << " is missing (build the megascale-micro target)\n";
      return 1;
    }
    std::vector<std::string> mpi_args = {"--oversubscribe", "-np", "1", micro, "--device", "cuda",
                                         "--out", p.has("--out") ? p.values.at("--out") : "cuda-micro.toml"};
    if (p.on("--quick")) mpi_args.push_back("--quick");
    out.flush();
    return base::run_mpirun(mpi_args, err, "megascale calibrate micro");
  }
  if (device != "cpu") throw UsageError(std::string("--device must be cpu or cuda, got '").append(device).append("'"));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int ranks = number_option(p, "--ranks", std::min(cores, 8), 1, 64);
  for (const std::string& f : p.positional) (void)model::load_scenario(f);  // bad input before the run
  const std::string micro = base::sibling_program("megascale-micro");
  if (!fs::exists(micro)) {
    err << "megascale calibrate micro: " << micro << " is missing (build the megascale-micro target)\n";
    return 1;
  }
  std::vector<std::string> mpi_args = {"--oversubscribe", "-np", std::to_string(ranks), micro};
  // "-" writes the profile to stdout; the default is a file (it is ~2 MB).
  const std::string out_file = p.has("--out") ? p.values.at("--out") : "cpu-profile.toml";
  if (out_file != "-") {
    mpi_args.push_back("--out");
    mpi_args.push_back(out_file);
  }
  if (p.on("--quick")) mpi_args.push_back("--quick");
  if (p.on("--single")) mpi_args.push_back("--single");
  for (const std::string& f : p.positional) mpi_args.push_back(f);
  out.flush();
  return base::run_mpirun(mpi_args, err, "megascale calibrate micro");
}

// ---- check --------------------------------------------------------------------

int calibrate_check(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_args(args, {"--json"}, {"--profile", "--tolerance", "--steps", "--warmup", "--dir", "--set"});
  if (p.positional.empty()) throw UsageError("calibrate check expects at least one SCENARIO");
  calibrate::CheckOptions o;
  o.profile = p.has("--profile") ? p.values.at("--profile") : "";
  if (p.has("--tolerance")) {
    const std::string& v = p.values.at("--tolerance");
    char* end = nullptr;
    o.tolerance = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !(o.tolerance > 0) || o.tolerance > 10) {
      throw UsageError("--tolerance must be a fraction > 0 (0.15 = 15%), got '" + v + "'");
    }
  }
  o.steps = number_option(p, "--steps", 0, 1, 100000);
  o.warmup = number_option(p, "--warmup", 2, 0, 1000);
  o.out_dir = p.has("--dir") ? p.values.at("--dir") : "results/calibration";
  o.overrides = p.all("--set");
  o.engine_binary = base::sibling_program("megascale-train");
  if (!fs::exists(o.engine_binary)) {
    err << "megascale calibrate check: " << o.engine_binary << " is missing (build the megascale-train target)\n";
    return 1;
  }
  base::Json all = base::Json::array();  // one object per scenario
  bool pass = true;
  std::vector<double> errors;
  for (const std::string& f : p.positional) {
    err << "megascale calibrate check: " << f << ": running the engine and the simulation...\n" << std::flush;
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

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

int calibrate_import(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_args(args, {"--json"}, {"--out", "--profile", "--nccl-tests", "--gemm-csv", "--scope", "--name"});
  if (!p.positional.empty()) throw UsageError("calibrate import takes files with --nccl-tests / --gemm-csv, not '" + p.positional[0] + "'");
  if (!p.has("--out")) throw UsageError("calibrate import needs --out FILE (the profile to write)");
  calibrate::ImportOptions o;
  if (p.has("--profile")) o.base = p.values.at("--profile");
  if (p.has("--name")) o.name = p.values.at("--name");
  if (p.has("--scope")) o.scope = p.values.at("--scope");
  o.nccl_tests = p.all("--nccl-tests");
  o.gemm_csv = p.all("--gemm-csv");
  o.date = today();
  calibrate::ImportReport r;
  try {
    r = calibrate::import_measurements(o);
  } catch (const calibrate::ImportError& e) {
    err << "megascale calibrate import: " << e.what() << "\n";
    return 2;
  }
  const std::string path = p.values.at("--out");
  if (!base::write_text_atomically(path, model::write_profile(r.profile))) {
    err << "megascale calibrate import: cannot write " << path << "\n";
    return 1;
  }
  if (p.on("--json")) {
    out << report::report_json(report::import_json(r, path)) << "\n";
  } else {
    out << report::import_text(r, path);
  }
  return 0;
}

// ---- fit ----------------------------------------------------------------------

std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : v) {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

int calibrate_fit(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_args(args, {"--engine"}, {"--profile", "--out", "--runs", "--hold-out", "--params", "--report"});
  if (!p.has("--profile")) throw UsageError("calibrate fit needs --profile NAME|FILE (the profile to start from)");
  if (!p.has("--out")) throw UsageError("calibrate fit needs --out FILE (the fitted profile)");
  if (p.has("--runs") == p.on("--engine")) {
    throw UsageError("calibrate fit takes its measured times from --runs FILE.csv or from --engine runs, one of them");
  }
  calibrate::FitParams params;
  if (p.has("--params")) {
    params = {false, false};
    for (const std::string& name : split_list(p.values.at("--params"))) {
      if (name == "step_overhead") params.step_overhead = true;
      else if (name == "compute_scale") params.compute_scale = true;
      else throw UsageError("--params takes step_overhead and/or compute_scale, got '" + name + "'");
    }
  }
  const fs::path scratch = fs::temp_directory_path() / ("megascale-fit-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  const std::string base_file = calibrate::profile_file(p.values.at("--profile"), scratch.string());
  std::vector<calibrate::MeasuredRun> runs;
  if (p.has("--runs")) {
    try {
      runs = calibrate::read_measured_runs(p.values.at("--runs"));
    } catch (const calibrate::ImportError& e) {
      err << "megascale calibrate fit: " << e.what() << "\n";
      return 2;
    }
    if (!p.positional.empty()) throw UsageError("with --runs, the runs come from the file; select held-out ones with --hold-out");
  } else {
    if (p.positional.empty()) throw UsageError("calibrate fit --engine expects the SCENARIOs to run");
    calibrate::CheckOptions co;
    co.profile = base_file;
    co.engine_binary = base::sibling_program("megascale-train");
    for (const std::string& f : p.positional) {
      err << "megascale calibrate fit: running " << f << " on the engine...\n" << std::flush;
      runs.push_back(calibrate::engine_run(f, co));
    }
  }
  const std::vector<std::string> held = p.has("--hold-out") ? split_list(p.values.at("--hold-out")) : std::vector<std::string>{};
  std::vector<calibrate::MeasuredRun> fit, held_out;
  for (const calibrate::MeasuredRun& r : runs) {
    (std::find(held.begin(), held.end(), r.name) != held.end() ? held_out : fit).push_back(r);
  }
  for (const std::string& h : held) {
    if (std::none_of(runs.begin(), runs.end(), [&](const calibrate::MeasuredRun& r) { return r.name == h; })) {
      throw UsageError("--hold-out: no run named '" + h + "'");
    }
  }
  err << "megascale calibrate fit: " << fit.size() << " fit run(s), " << held_out.size() << " held out\n" << std::flush;
  const calibrate::FitResult r = calibrate::fit_profile(base_file, fit, held_out, params, calibrate::event_iteration_s, scratch.string());
  std::ofstream(p.values.at("--out")) << model::write_profile(r.profile);
  std::string command = "megascale calibrate fit";
  for (const std::string& a : args) command += " " + a;
  const std::string md = calibrate::fit_markdown(r, command);
  if (p.has("--report")) {
    std::ofstream(p.values.at("--report")) << md;
  }
  out << md;
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  return 0;
}

// ---- net-check (calibrate/net_check.h) ----------------------------------------

int calibrate_net_check(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_args(args, {"--json", "--points"},
                                  {"--manifest", "--gpu", "--nics-per-node", "--nic-gbps", "--write", "--algo",
                                   "--proto"});
  calibrate::NetRestriction only;  // NCCL_ALGO / NCCL_PROTO: what a forced choice would give
  if (p.has("--algo") && p.values.at("--algo") != "auto") {
    only.algorithm = network::parse_collective_algorithm(p.values.at("--algo"));
    if (!only.algorithm || *only.algorithm == network::CollectiveAlgorithm::kHierarchical) {
      throw UsageError("--algo must be auto, ring, tree, nvls or nvls-tree, got '" + p.values.at("--algo") + "'");
    }
  }
  if (p.has("--proto") && p.values.at("--proto") != "auto") {
    only.protocol = network::parse_nccl_protocol(p.values.at("--proto"));
    if (!only.protocol) throw UsageError("--proto must be auto, LL, LL128 or Simple, got '" + p.values.at("--proto") + "'");
  }
  std::vector<calibrate::NetMachine> machines;
  if (p.has("--manifest")) {
    if (!p.positional.empty()) throw UsageError("net-check takes --manifest FILE or nccl-tests FILEs, not both");
    machines = calibrate::read_net_manifest(p.values.at("--manifest"));
  } else {
    if (p.positional.empty()) throw UsageError("net-check needs --manifest FILE or nccl-tests FILEs with --gpu");
    if (!p.has("--gpu")) throw UsageError("net-check FILE... needs --gpu NAME|FILE (and --nic-gbps, --nics-per-node)");
    calibrate::NetMachine base = calibrate::profile_machine(p.values.at("--gpu"));
    try {
      if (p.has("--nics-per-node")) base.nics_per_node = std::stoi(p.values.at("--nics-per-node"));
      if (p.has("--nic-gbps")) base.nic_gbps = std::stod(p.values.at("--nic-gbps"));
    } catch (const std::exception&) {
      throw UsageError("--nics-per-node and --nic-gbps take positive numbers");
    }
    if (base.nics_per_node < 1 || base.nics_per_node > 64 || !(base.nic_gbps > 0) || !std::isfinite(base.nic_gbps)) {
      throw UsageError("--nics-per-node must be in 1..64 and --nic-gbps positive");
    }
    for (const std::string& f : p.positional) {
      calibrate::NetMachine m = base;
      m.file = f;
      machines.push_back(m);
    }
  }

  std::vector<calibrate::NetRun> results;
  for (const calibrate::NetMachine& m : machines) {
    try {
      results.push_back(calibrate::predict_net_run(m, only));
    } catch (const calibrate::ImportError& e) {
      err << "megascale calibrate net-check: " << e.what() << "\n";
      return 2;
    } catch (const std::invalid_argument& e) {  // a restriction no NCCL pair meets on this machine
      err << "megascale calibrate net-check: " << m.file << ": " << e.what() << "\n";
      return 2;
    }
  }

  const std::vector<calibrate::NetClassStats> classes = calibrate::score_net_runs(results);
  std::string command = "megascale calibrate net-check";
  for (const std::string& a : args) command += " " + a;
  const std::string md = report::net_check_markdown(results, classes, command, p.on("--points"));
  if (p.has("--write")) {
    const std::string path = p.values.at("--write");
    if (!base::write_text_atomically(path, md)) {
      err << "megascale calibrate net-check: cannot write " << path << "\n";
      return 2;
    }
  }
  if (p.on("--json")) {
    out << report::report_json(report::net_check_json(results, classes)) << "\n";
  } else {
    out << md;
  }
  return calibrate::all_pass(classes) ? 0 : 1;
}

// ---- runs-check (calibrate/runs_check.h) --------------------------------------

int calibrate_runs_check(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_args(args, {"--json"}, {"--runs", "--write"});
  if (!p.positional.empty()) throw UsageError("runs-check takes --runs FILE.csv, not '" + p.positional[0] + "'");
  if (!p.has("--runs")) throw UsageError("runs-check needs --runs FILE.csv (e.g. calibrate/runs/published.csv)");
  std::vector<calibrate::MeasuredRun> runs;
  try {
    runs = calibrate::read_measured_runs(p.values.at("--runs"));
  } catch (const calibrate::ImportError& e) {
    err << "megascale calibrate runs-check: " << e.what() << "\n";
    return 2;
  }
  const calibrate::RunsCheck check = calibrate::check_published_runs(runs);
  std::string command = "megascale calibrate runs-check";
  for (const std::string& a : args) command += " " + a;
  const std::string md = report::runs_check_markdown(check, command);
  if (p.has("--write")) {
    const std::string path = p.values.at("--write");
    if (!base::write_text_atomically(path, md)) {
      err << "megascale calibrate runs-check: cannot write " << path << "\n";
      return 2;
    }
  }
  if (p.on("--json")) {
    out << report::report_json(report::runs_check_json(check)) << "\n";
  } else {
    out << md;
  }
  return check.pass ? 0 : 1;
}

}  // namespace

std::string calibrate_usage() {
  return "megascale calibrate micro [--device cpu|cuda] [--ranks N] [--out FILE] [--quick] [--single] [SCENARIO...]\n"
         "    Times the engine's own kernels and MPI collectives (engine/microbench.h) and writes\n"
         "    a cpu profile (calibrate/profiles/README.md): GEMMs by (m, n, k, layout), attention,\n"
         "    every element-wise and optimizer kernel, collectives by size; with every rank alone\n"
         "    and all at once. SCENARIOs add their exact shapes. --quick: a coarser sweep.\n"
         "    --device cuda: the CUDA device's kernels on one GPU, timed with CUDA events\n"
         "    (engine/microbench_cuda.h), written to --out (default cuda-micro.toml); exit 2 without a GPU.\n"
         "megascale calibrate import --out FILE [--profile BASE] [--nccl-tests FILE]... [--gemm-csv FILE]...\n"
         "                           [--scope intra|inter] [--name NAME]\n"
         "    A profile from measurements users already have: nccl-tests output (all_reduce_perf,\n"
         "    all_gather_perf, reduce_scatter_perf, sendrecv_perf) and GEMM sweep CSVs, added to\n"
         "    BASE (a profile file or a shipped name).\n"
         "megascale calibrate check SCENARIO... [--profile FILE] [--tolerance X] [--steps N] [--warmup K]\n"
         "                          [--dir DIR] [--json] [--set KEY=VALUE]...\n"
         "    Runs the engine on each scenario with tracing, simulates the same Schedule IR on the\n"
         "    profile, and reports measured vs predicted: step time, per-op times, bubble and exposed\n"
         "    communication; writes DIR/<scenario>.md, .svg, .json (default results/calibration).\n"
         "    Exit 1 when a step-time error exceeds the tolerance (default 0.15).\n"
         "megascale calibrate fit --profile NAME|FILE --out FILE (--runs RUNS.csv | --engine SCENARIO...)\n"
         "                        [--hold-out NAME,...] [--params step_overhead,compute_scale] [--report FILE.md]\n"
         "    Fits what no microbenchmark measures (a per-step host overhead, one in-situ scale of the\n"
         "    kernels) on named runs: measured iteration times from RUNS.csv (scenario, iteration_time_s,\n"
         "    source) or from engine runs of the SCENARIOs; prints the leave-one-out error and the error\n"
         "    on the --hold-out runs, which the fit does not use, and writes the fitted profile.\n"
         "megascale calibrate net-check (--manifest FILE.toml | NCCL-TESTS-FILE... --gpu NAME|FILE\n"
         "                              [--nics-per-node N] [--nic-gbps G]) [--algo A] [--proto P] [--points]\n"
         "                              [--write FILE.md] [--json]\n"
         "    `net collective` (NCCL tuner on the fabric model) against nccl-tests output measured on\n"
         "    real machines: every printed size predicted and compared; median and max error for\n"
         "    large (>= 256 MiB) and small (<= 1 MiB) messages, in a node and across nodes. The\n"
         "    published set: --manifest tests/calibrate/fixtures/nccl-tests/systems.toml.\n"
         "    Exit 1 when a bound (large 5% / 10%, small 20% / 50%) is missed.\n"
         "megascale calibrate runs-check --runs RUNS.csv [--write FILE.md] [--json]\n"
         "    The simulator as it stands against published iteration times of whole training runs\n"
         "    (RUNS.csv: scenario, iteration_time_s, source, note, scored), event and analytical;\n"
         "    median and max |error| over the scored rows (calibrate/runs/published.csv: runs from\n"
         "    other papers than MegaScale). Exit 1 when median > 8% or max > 20%.\n";
}

int cmd_calibrate(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << calibrate_usage();
    return args.empty() ? 2 : 0;
  }
  const std::string sub = args[0];
  const Args rest(args.begin() + 1, args.end());
  try {
    if (sub == "micro") return calibrate_micro(rest, out, err);
    if (sub == "check") return calibrate_check(rest, out, err);
    if (sub == "import") return calibrate_import(rest, out, err);
    if (sub == "fit") return calibrate_fit(rest, out, err);
    if (sub == "net-check") return calibrate_net_check(rest, out, err);
    if (sub == "runs-check") return calibrate_runs_check(rest, out, err);
    return usage_error(err, "unknown subcommand '" + sub + "'");
  } catch (const UsageError& e) {
    return usage_error(err, e.what());
  } catch (const model::ScenarioError& e) {
    err << "megascale calibrate " << sub << ": " << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    err << "megascale calibrate " << sub << ": " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "megascale calibrate " << sub << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace megascale::cli
