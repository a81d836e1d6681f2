// calibrate/fit.cc: see fit.h.
#include "calibrate/fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "base/number_text.h"
#include "base/text_file.h"
#include "calibrate/csv_line.h"
#include "calibrate/nccl_tests.h"  // ImportError
#include "model/profile.h"
#include "model/scenario.h"
#include "model/throughput.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;

// `base` with every in-situ class value times `scale` (created at `scale` for
// one busy rank when the base has none), `overhead_s` per step and
// `element_ns` more per activation element.
model::GpuProfile scaled(const model::GpuProfile& base, double scale, double overhead_s, double element_ns = 0) {
  model::GpuProfile p = base;
  auto tables = std::make_shared<model::ProfileTables>(base.tables ? *base.tables : model::ProfileTables{});
  std::vector<model::InsituPoint> pts = tables->insitu.points();
  if (pts.empty()) {
    for (const char* cls : {"gemm", "attention", "kernel"}) pts.push_back({1, cls, 1.0});
  }
  for (model::InsituPoint& q : pts) {
    if (q.cls != "gap_us") q.value *= scale;
  }
  tables->insitu = model::InsituTable(pts);
  p.tables = tables;
  p.step_overhead_s = base.step_overhead_s + overhead_s;
  p.element_overhead_ns = base.element_overhead_ns + element_ns;
  // A profile file holds only the values that carry a provenance.
  if (element_ns != 0 && p.provenance.count("element_overhead_ns") == 0) {
    p.provenance["element_overhead_ns"] =
        model::Provenance{"assumption", "calibrate fit: a trial value (calibrate/fit.h)", "", "", {}, -1};
  }
  return p;
}

std::string write_to(const model::GpuProfile& p, const std::string& path) {
  base::write_text_or_throw(path, model::write_profile(p));
  return path;
}

std::string pct(double f) { return fmt::format("{:+.1f}%", 100 * f); }

}  // namespace

std::vector<MeasuredRun> read_measured_runs(const std::string& path) {
  std::istringstream in(base::read_text_or_throw(path));
  std::vector<MeasuredRun> runs;
  std::string line;
  int n = 0;
  int col_scenario = -1, col_time = -1, col_source = -1, col_note = -1, col_scored = -1;
  const fs::path dir = fs::path(path).parent_path();
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> cells = split_csv_line(line, path, n);
    if (col_scenario < 0) {
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "scenario") col_scenario = static_cast<int>(i);
        if (cells[i] == "iteration_time_s") col_time = static_cast<int>(i);
        if (cells[i] == "source") col_source = static_cast<int>(i);
        if (cells[i] == "note") col_note = static_cast<int>(i);
        if (cells[i] == "scored") col_scored = static_cast<int>(i);
      }
      if (col_scenario < 0 || col_time < 0) {
        throw ImportError(path + ":" + std::to_string(n) + ": the header must name columns 'scenario' and 'iteration_time_s'");
      }
      continue;
    }
    if (static_cast<int>(cells.size()) <= std::max(col_scenario, col_time)) {
      throw ImportError(path + ":" + std::to_string(n) + ": row has " + std::to_string(cells.size()) + " cells");
    }
    MeasuredRun r;
    r.line = n;
    r.scenario_file = (dir / cells[col_scenario]).lexically_normal().string();
    r.name = fs::path(cells[col_scenario]).stem().string();
    const std::optional<double> seconds = base::finite_number(cells[col_time]);
    r.iteration_s = seconds.value_or(0.0);
    if (!(r.iteration_s > 0)) {
      throw ImportError(path + ":" + std::to_string(n) + ": column 'iteration_time_s': expected seconds > 0, got '" +
                        cells[col_time] + "'");
    }
    if (col_source >= 0 && col_source < static_cast<int>(cells.size())) r.source = cells[col_source];
    if (col_note >= 0 && col_note < static_cast<int>(cells.size())) r.note = cells[col_note];
    if (col_scored >= 0 && col_scored < static_cast<int>(cells.size())) {
      const std::string& v = cells[col_scored];
      if (v.rfind("no", 0) == 0) {
        r.unscored = v.size() > 3 && v[2] == ':' ? std::string(base::trim(std::string_view(v).substr(3))) : std::string("marked no");
      } else if (v != "yes" && !v.empty()) {
        throw ImportError(path + ":" + std::to_string(n) + ": column 'scored': expected yes or \"no: reason\", got '" +
                          v + "'");
      }
    }
    if (!fs::is_regular_file(r.scenario_file)) {
      throw ImportError(path + ":" + std::to_string(n) + ": column 'scenario': no such file " + r.scenario_file);
    }
    // A scenario that does not load is named with the line that lists it, and
    // found before any run is simulated (a minute for the published set).
    model::Scenario scenario;
    try {
      scenario = model::load_scenario(r.scenario_file);
    } catch (const model::ScenarioError& e) {
      throw ImportError(path + ":" + std::to_string(n) + ": column 'scenario': " + e.what());
    }
    // A time no GPU could run: its model FLOPs above the GPUs' dense peak (the
    // FP8 peak under FP8; MFU as model/throughput.h counts it). Seconds in the
    // wrong unit, or the row names the wrong scenario. CPU profiles' peaks are
    // measured per core and may be beaten on a faster moment: not checked.
    const model::GpuProfile& gpu = model::hardware_profile(scenario);
    if (!gpu.is_cpu() && gpu.peak_tflops > 0) {
      const double mfu =
          model::throughput(scenario, r.iteration_s, scenario.parallel.gpus(), gpu.peak_tflops * 1e12).mfu;
      if (mfu > model::mfu_ceiling(scenario)) {
        throw ImportError(fmt::format(
            "{}:{}: column 'iteration_time_s': {} s for {} on {} x {} is {:.0f}% MFU of the GPUs' dense peak ({} "
            "TFLOP/s each){}: no GPU runs it that fast; seconds in the wrong unit, or the wrong scenario",
            path, n, cells[col_time], cells[col_scenario], scenario.parallel.gpus(), gpu.name, 100 * mfu,
            gpu.peak_tflops, scenario.optimizations.fp8 ? ", above the FP8 GEMMs' speedup" : ""));
      }
    }
    // A run scored twice would weigh twice in a fit and in the accuracy
    // figures (it was, silently). An unscored row of the same scenario (a
    // measurement listed for reference) is kept.
    for (const MeasuredRun& earlier : runs) {
      if (base::file_identity(earlier.scenario_file) == base::file_identity(r.scenario_file) &&
          earlier.unscored.empty() && r.unscored.empty()) {
        throw ImportError(fmt::format("{}:{}: column 'scenario': {} is already the scored run of line {} (one "
                                      "scored row per run: a run scored twice weighs twice in the fit and the error "
                                      "figures; mark one \"no: reason\" in column 'scored')",
                                      path, n, cells[col_scenario], earlier.line));
      }
    }
    runs.push_back(r);
  }
  if (runs.empty()) throw ImportError(path + ":1: no runs");
  return runs;
}

FitResult fit_profile(const std::string& base_file, const std::vector<MeasuredRun>& fit,
                      const std::vector<MeasuredRun>& held_out, const FitParams& params,
                      const std::function<double(const std::string&, const std::string&)>& predict,
                      const std::string& scratch_dir) {
  if (fit.empty()) throw std::invalid_argument("calibrate fit: no runs to fit on");
  if (params.tp_gather_scatter) {
    throw std::invalid_argument("calibrate fit: tp_gather_scatter is fitted on per-layer times (--layers FILE), "
                                "not on iteration times");
  }
  if (!params.step_overhead && !params.compute_scale && !params.element_overhead) {
    throw std::invalid_argument("calibrate fit: nothing to fit");
  }
  model::GpuProfile base = model::load_profile(base_file);
  std::string base_path = base_file;
  if (params.element_overhead && base.element_overhead_ns != 0) {
    // Fitted from 0: the value the base holds is replaced, so a refit on a
    // fitted profile gives the same value again.
    base.element_overhead_ns = 0;
    base.provenance["element_overhead_ns"] =
        model::Provenance{"assumption", "calibrate fit: replaced by the fit (calibrate/fit.h)", "", "", {}, -1};
    base_path = write_to(base, (fs::path(scratch_dir) / "base.toml").string());
  }
  if (const auto prov = base.provenance.find("tables.insitu");
      params.compute_scale && base.tables && !base.tables->insitu.empty() && prov != base.provenance.end() &&
      prov->second.source == "fitted") {
    // An in-situ table an earlier fit wrote is fitted again from 1, as the
    // element overhead is from 0, so a refit on a fitted profile gives the
    // same scale; a measured table (calibrate micro) is scaled, not replaced.
    auto tables = std::make_shared<model::ProfileTables>(*base.tables);
    tables->insitu = model::InsituTable{};
    base.tables = tables;
    base_path = write_to(base, (fs::path(scratch_dir) / "base.toml").string());
  }
  constexpr double kProbeScale = 1.25;
  constexpr double kProbeElementNs = 0.1;
  const std::string probe_file = write_to(scaled(base, kProbeScale, 0.0), (fs::path(scratch_dir) / "probe.toml").string());
  const std::string element_probe_file =
      write_to(scaled(base, 1.0, 0.0, kProbeElementNs), (fs::path(scratch_dir) / "probe-element.toml").string());
  // Columns of x: [a if compute_scale] [c if element_overhead] [b if step_overhead].
  const size_t col_c = params.compute_scale ? 1 : 0;

  // Linear model per fit run: t = t1 + (a - 1) d + c e + b.
  std::vector<std::vector<double>> rows;
  std::vector<double> rhs;
  std::vector<std::string> groups;
  FitResult r;
  std::vector<double> t1s, ds, es;
  for (const MeasuredRun& run : fit) {
    const double t1 = predict(run.scenario_file, base_path);
    const double d = params.compute_scale ? (predict(run.scenario_file, probe_file) - t1) / (kProbeScale - 1.0) : 0.0;
    const double e =
        params.element_overhead ? (predict(run.scenario_file, element_probe_file) - t1) / kProbeElementNs : 0.0;
    t1s.push_back(t1);
    ds.push_back(d);
    es.push_back(e);
    std::vector<double> row;
    if (params.compute_scale) row.push_back(d);
    if (params.element_overhead) row.push_back(e);
    if (params.step_overhead) row.push_back(1.0);
    rows.push_back(row);
    // a enters as (a - 1) d = a d - d.
    rhs.push_back(run.iteration_s - t1 + (params.compute_scale ? d : 0.0));
    groups.push_back(run.name);
  }
  const std::vector<double> x = model::nnls(rows, rhs);
  r.compute_scale = params.compute_scale ? x[0] : 1.0;
  r.element_overhead_ns = params.element_overhead ? x[col_c] : 0.0;
  r.step_overhead_s = params.step_overhead ? x.back() : 0.0;
  // Leave-one-out on the runs' own time (rhs is time minus a constant per run).
  r.loo.groups.clear();
  for (size_t i = 0; i < fit.size(); ++i) {
    std::vector<std::vector<double>> rr;
    std::vector<double> rb;
    for (size_t j = 0; j < fit.size(); ++j) {
      if (j == i) continue;
      rr.push_back(rows[j]);
      rb.push_back(rhs[j]);
    }
    double pred = t1s[i];
    if (!rr.empty()) {
      const std::vector<double> y = model::nnls(rr, rb);
      const double a = params.compute_scale ? y[0] : 1.0;
      const double c = params.element_overhead ? y[col_c] : 0.0;
      const double b = params.step_overhead ? y.back() : 0.0;
      pred = t1s[i] + (a - 1.0) * ds[i] + c * es[i] + b;
    }
    const double e = pred / fit[i].iteration_s - 1.0;
    r.loo.groups.push_back(fit[i].name);
    r.loo.error.push_back(e);
    r.loo.mean_abs_error += std::abs(e) / fit.size();
    r.loo.max_abs_error = std::max(r.loo.max_abs_error, std::abs(e));
    FitRow row;
    row.name = fit[i].name;
    row.measured_s = fit[i].iteration_s;
    row.before_s = t1s[i];
    row.loo_s = pred;
    r.rows.push_back(row);
  }

  // The fitted profile, with provenance.
  r.profile = scaled(base, r.compute_scale, r.step_overhead_s, r.element_overhead_ns);
  std::vector<std::string> names;
  for (const MeasuredRun& run : fit) names.push_back(run.name);
  const std::string method =
      "non-negative least squares of the runs' iteration times, t = t(1,0,0) + (a-1) dt/da + c dt/dc + b "
      "(calibrate/fit.h)";
  if (params.element_overhead) {
    r.profile.provenance["element_overhead_ns"] =
        model::Provenance{"fitted", method, "", "", names, r.loo.mean_abs_error};
  }
  if (params.step_overhead) {
    r.profile.provenance["step_overhead_s"] = model::Provenance{"fitted", method, "", "", names, r.loo.mean_abs_error};
  }
  if (params.compute_scale) {
    r.profile.provenance["tables.insitu"] = model::Provenance{"fitted", method + "; compute_scale " +
                                                                            fmt::format("{:.4f}", r.compute_scale) + " on every class",
                                                              "", "", names, r.loo.mean_abs_error};
  }
  const std::string fitted_file = write_to(r.profile, (fs::path(scratch_dir) / "fitted.toml").string());
  for (size_t i = 0; i < fit.size(); ++i) r.rows[i].after_s = predict(fit[i].scenario_file, fitted_file);
  double before_sum = 0;
  for (const MeasuredRun& run : held_out) {
    FitRow row;
    row.name = run.name;
    row.measured_s = run.iteration_s;
    row.before_s = predict(run.scenario_file, base_path);
    row.after_s = predict(run.scenario_file, fitted_file);
    row.held_out = true;
    const double e = row.after_s / row.measured_s - 1.0;
    r.held_out_mean_abs += std::abs(e) / held_out.size();
    r.held_out_max_abs = std::max(r.held_out_max_abs, std::abs(e));
    before_sum += std::abs(row.before_s / row.measured_s - 1.0);
    r.rows.push_back(row);
  }
  if (!held_out.empty()) r.before_held_out_mean_abs = before_sum / held_out.size();
  return r;
}

std::string fit_markdown(const FitResult& r, const std::string& command) {
  std::ostringstream o;
  o << "# Calibration fit: " << r.profile.name << "\n\n";
  o << "Generated by `" << command << "`.\n\n";
  o << "Fitted: step_overhead_s = " << fmt::format("{:.4f}", r.step_overhead_s) << " s, compute_scale = "
    << fmt::format("{:.4f}", r.compute_scale) << ", element_overhead_ns = " << fmt::format("{:.4f}", r.element_overhead_ns)
    << " (calibrate/fit.h; a parameter not fitted keeps its base value). Leave-one-out over the fit runs: mean |error| "
    << fmt::format("{:.1f}", 100 * r.loo.mean_abs_error) << "%, max " << fmt::format("{:.1f}", 100 * r.loo.max_abs_error) << "%.\n\n";
  const bool any_held = std::any_of(r.rows.begin(), r.rows.end(), [](const FitRow& x) { return x.held_out; });
  if (any_held) {
    o << "Held-out runs (not used by the fit): mean |error| " << fmt::format("{:.1f}", 100 * r.held_out_mean_abs) << "%, max "
      << fmt::format("{:.1f}", 100 * r.held_out_max_abs) << "% (before the fit: mean " << fmt::format("{:.1f}", 100 * r.before_held_out_mean_abs)
      << "%). Accuracy is only claimed on these.\n\n";
  }
  o << "| run | role | measured s | before fit | after fit | leave-one-out |\n|---|---|---|---|---|---|\n";
  for (const FitRow& x : r.rows) {
    o << "| " << x.name << " | " << (x.held_out ? "held out" : "fit") << " | " << fmt::format("{:.3f}", x.measured_s) << " | "
      << fmt::format("{:.3f}", x.before_s) << " (" << pct(x.before_s / x.measured_s - 1) << ") | " << fmt::format("{:.3f}", x.after_s)
      << " (" << pct(x.after_s / x.measured_s - 1) << ") | "
      << (x.held_out ? std::string("-") : fmt::format("{:.3f}", x.loo_s) + " (" + pct(x.loo_s / x.measured_s - 1) + ")")
      << " |\n";
  }
  return o.str();
}

FitParams parse_fit_params(const std::string& names) {
  FitParams params = {false, false, false, false};
  std::istringstream in(names);
  for (std::string name; std::getline(in, name, ',');) {
    if (name == "step_overhead") params.step_overhead = true;
    else if (name == "compute_scale") params.compute_scale = true;
    else if (name == "element_overhead") params.element_overhead = true;
    else if (name == "tp_gather_scatter") params.tp_gather_scatter = true;
    else if (!name.empty()) {
      throw std::invalid_argument(
          "expected step_overhead, compute_scale, element_overhead and/or tp_gather_scatter, got '" + name + "'");
    }
  }
  return params;
}

std::pair<std::vector<MeasuredRun>, std::vector<MeasuredRun>> split_held_out(const std::vector<MeasuredRun>& runs,
                                                                             const std::vector<std::string>& held_out) {
  std::pair<std::vector<MeasuredRun>, std::vector<MeasuredRun>> split;
  for (const MeasuredRun& r : runs)
    (std::find(held_out.begin(), held_out.end(), r.name) != held_out.end() ? split.second : split.first).push_back(r);
  for (const std::string& h : held_out) {
    if (std::none_of(runs.begin(), runs.end(), [&](const MeasuredRun& r) { return r.name == h; }))
      throw std::invalid_argument("cannot hold out '" + h + "': no measured run has that name");
  }
  return split;
}

}  // namespace megascale::calibrate
