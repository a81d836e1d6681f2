// calibrate/layer_fit.cc: see layer_fit.h.
#include "calibrate/layer_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "base/text_file.h"
#include "model/profile.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;

constexpr double kProbeExtra = 1.0;  // dt/dx from t(1) - t(0): t is linear in x where exposed

std::string write_with(model::GpuProfile p, double extra, const std::string& path, const char* why) {
  p.tp_gather_scatter_extra = extra;
  p.provenance["tp_gather_scatter_extra"] = model::Provenance{"assumption", why, "", "", {}, -1};
  base::write_text_or_throw(path, model::write_profile(p));
  return path;
}

// Least squares of x >= 0 in m = t0 + x d over the entries of `use`d rows.
double solve(const std::vector<std::array<double, 6>>& e, const std::vector<bool>& use) {
  double num = 0, den = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (!use[i]) continue;
    for (int j = 0; j < 2; ++j) {
      const double m = e[i][j], t0 = e[i][2 + j], d = e[i][4 + j];
      num += d * (m - t0);
      den += d * d;
    }
  }
  return den > 0 ? std::max(0.0, num / den) : 0.0;
}

std::string pct(double f) { return fmt::format("{:+.1f}%", 100 * f); }

}  // namespace

LayerFitResult fit_layer_gather_scatter(const std::string& base_file, const std::vector<PublishedLayer>& layers,
                                        const std::string& scratch_dir) {
  const model::GpuProfile base = model::load_profile(base_file);
  const std::string zero_file = write_with(base, 0.0, (fs::path(scratch_dir) / "layer-fit-zero.toml").string(),
                                           "calibrate fit --layers: fitted from 0 (calibrate/layer_fit.h)");
  const std::string probe_file = write_with(base, kProbeExtra, (fs::path(scratch_dir) / "layer-fit-probe.toml").string(),
                                            "calibrate fit --layers: a trial value (calibrate/layer_fit.h)");
  const std::vector<LayerCheckRow> before = check_published_layers(layers, base_file);
  const std::vector<LayerCheckRow> at0 = check_published_layers(layers, zero_file);
  const std::vector<LayerCheckRow> at1 = check_published_layers(layers, probe_file);
  // Per row: measured fwd, bwd; t0 fwd, bwd; d fwd, bwd.
  std::vector<std::array<double, 6>> e;
  std::vector<bool> informative;
  for (size_t i = 0; i < layers.size(); ++i) {
    const double dfwd = (at1[i].forward_ms - at0[i].forward_ms) / kProbeExtra;
    const double dbwd = (at1[i].backward_ms - at0[i].backward_ms) / kProbeExtra;
    e.push_back({layers[i].forward_ms, layers[i].backward_ms, at0[i].forward_ms, at0[i].backward_ms, dfwd, dbwd});
    informative.push_back(std::abs(dfwd) + std::abs(dbwd) > 1e-9);
  }
  const auto n_informative = std::count(informative.begin(), informative.end(), true);
  if (n_informative < 2) {
    throw std::invalid_argument("calibrate fit --layers: " + std::to_string(n_informative) +
                                " row(s) have TP all-gathers or reduce-scatters inside a node (sequence parallelism, "
                                "TP > 1); the fit and its leave-one-out need at least 2");
  }
  LayerFitResult r;
  r.extra = solve(e, informative);
  double loo_sum = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerFitRow row;
    row.name = layers[i].name;
    row.measured_forward_ms = layers[i].forward_ms;
    row.measured_backward_ms = layers[i].backward_ms;
    row.before_forward_ms = before[i].forward_ms;
    row.before_backward_ms = before[i].backward_ms;
    row.informative = informative[i];
    if (informative[i]) {
      std::vector<bool> others = informative;
      others[i] = false;
      const double x = solve(e, others);
      row.loo_forward_ms = e[i][2] + x * e[i][4];
      row.loo_backward_ms = e[i][3] + x * e[i][5];
      const double err = std::abs(row.error(row.loo_forward_ms, row.loo_backward_ms));
      loo_sum += err;
      r.loo_max_error = std::max(r.loo_max_error, err);
    }
    r.rows.push_back(row);
  }
  r.loo_error = loo_sum / static_cast<double>(n_informative);

  r.profile = base;
  r.profile.tp_gather_scatter_extra = r.extra;
  std::vector<std::string> names;
  for (size_t i = 0; i < layers.size(); ++i)
    if (informative[i]) names.push_back(layers[i].name);
  r.profile.provenance["tp_gather_scatter_extra"] = model::Provenance{
      "fitted",
      "least squares of published per-layer forward and backward times, t = t(0) + x dt/dx (calibrate/layer_fit.h)", "",
      "", names, r.loo_error};
  const std::string fitted_file = (fs::path(scratch_dir) / "layer-fit-fitted.toml").string();
  base::write_text_or_throw(fitted_file, model::write_profile(r.profile));
  const std::vector<LayerCheckRow> after = check_published_layers(layers, fitted_file);
  for (size_t i = 0; i < layers.size(); ++i) {
    r.rows[i].after_forward_ms = after[i].forward_ms;
    r.rows[i].after_backward_ms = after[i].backward_ms;
  }
  return r;
}

std::string layer_fit_markdown(const LayerFitResult& r, const std::string& command) {
  std::ostringstream o;
  o << "# Calibration fit on per-layer times: " << r.profile.name << "\n\n";
  o << "Generated by `" << command << "`.\n\n";
  o << "Fitted: tp_gather_scatter_extra = " << fmt::format("{:.4f}", r.extra)
    << " (a TP all-gather or reduce-scatter inside a node runs " << fmt::format("{:.0f}", 100 * r.extra)
    << "% longer than the ring formula's bandwidth term; calibrate/layer_fit.h). Leave-one-out over the rows with "
       "those collectives: mean |forward + backward error| "
    << fmt::format("{:.1f}", 100 * r.loo_error) << "%, max " << fmt::format("{:.1f}", 100 * r.loo_max_error)
    << "%. Rows without them are shown, not fitted on. Accuracy is only claimed on runs the fit did not use "
       "(`megascale calibrate runs-check`, `megascale validate`).\n\n";
  o << "| row | role | measured fwd / bwd ms | before fit | after fit | leave-one-out |\n|---|---|---|---|---|---|\n";
  for (const LayerFitRow& x : r.rows) {
    auto cell = [&](double f, double b) {
      return fmt::format("{:.2f} / {:.2f} ({})", f, b, pct(x.error(f, b)));
    };
    o << "| " << x.name << " | " << (x.informative ? "fit" : "no TP all-gather / reduce-scatter") << " | "
      << fmt::format("{:.2f} / {:.2f}", x.measured_forward_ms, x.measured_backward_ms) << " | "
      << cell(x.before_forward_ms, x.before_backward_ms) << " | " << cell(x.after_forward_ms, x.after_backward_ms)
      << " | " << (x.informative ? cell(x.loo_forward_ms, x.loo_backward_ms) : std::string("-")) << " |\n";
  }
  return o.str();
}

}  // namespace megascale::calibrate
