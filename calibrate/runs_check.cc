// calibrate/runs_check.cc: see runs_check.h.
#include "calibrate/runs_check.h"

#include "calibrate/statistics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "model/estimator.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "sim/event_run.h"

namespace megascale::calibrate {
namespace {

double max_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

// Width bands of the grouped summary, narrow to wide: the per-GPU GEMMs of a
// model of hidden <= 4,096 are small enough that the bias differs visibly
// (results/published-runs.md).
constexpr std::array<const char*, 3> kWidthBands = {"hidden <= 4,096", "hidden 4,097-8,192", "hidden > 8,192"};

// Index into kWidthBands.
size_t width_band(int hidden) { return hidden <= 4096 ? 0 : hidden <= 8192 ? 1 : 2; }

// Groups the signed event errors of `rows` by `key`, in order of first appearance.
template <typename Key>
std::vector<RunsGroup> group_by(const std::vector<PublishedRunRow>& rows, Key key) {
  std::vector<std::string> labels;
  std::vector<std::vector<double>> errors;
  for (const PublishedRunRow& r : rows) {
    if (!r.run.unscored.empty()) continue;
    const std::string label = key(r);
    const auto it = std::find(labels.begin(), labels.end(), label);
    const size_t i = static_cast<size_t>(it - labels.begin());
    if (it == labels.end()) {
      labels.push_back(label);
      errors.emplace_back();
    }
    errors[i].push_back(r.error());
  }
  std::vector<RunsGroup> out;
  for (size_t i = 0; i < labels.size(); ++i) {
    std::vector<double> abs_errors;
    for (double e : errors[i]) abs_errors.push_back(std::fabs(e));
    out.push_back(RunsGroup{labels[i], static_cast<int>(errors[i].size()), median(errors[i]), median(abs_errors)});
  }
  return out;
}

}  // namespace

void group_errors(RunsCheck* check) {
  check->by_gpu = group_by(check->rows, [](const PublishedRunRow& r) { return r.gpu; });
  check->by_width = group_by(check->rows, [](const PublishedRunRow& r) { return kWidthBands[width_band(r.hidden)]; });
  // Narrow to wide, whatever order the CSV lists the runs in.
  auto band = [](const RunsGroup& g) {
    return std::find_if(kWidthBands.begin(), kWidthBands.end(), [&](const char* b) { return g.label == b; });
  };
  std::sort(check->by_width.begin(), check->by_width.end(),
            [&](const RunsGroup& a, const RunsGroup& b) { return band(a) < band(b); });
  check->missing_per_element.clear();
  std::vector<std::vector<double>> missing;
  for (const PublishedRunRow& r : check->rows) {
    if (!r.run.unscored.empty() || r.pp != 1 || !(r.element_steps > 0)) continue;
    auto& groups = check->missing_per_element;
    const auto it = std::find_if(groups.begin(), groups.end(), [&](const ElementGroup& g) { return g.gpu == r.gpu; });
    const size_t i = static_cast<size_t>(it - groups.begin());
    if (it == groups.end()) {
      ElementGroup g;
      g.gpu = r.gpu;
      g.peak_tflops = r.peak_tflops;
      g.memory_gbs = r.memory_gbs;
      groups.push_back(g);
      missing.emplace_back();
    }
    missing[i].push_back(r.missing_ns_per_element());
  }
  for (size_t i = 0; i < missing.size(); ++i) {
    check->missing_per_element[i].runs = static_cast<int>(missing[i].size());
    check->missing_per_element[i].median_missing_ns = median(missing[i]);
  }
}

RunsCheck check_published_runs(const std::vector<MeasuredRun>& runs) {
  RunsCheck c;
  for (const MeasuredRun& r : runs) {
    const model::Scenario s = model::load_scenario(r.scenario_file);
    PublishedRunRow row;
    row.run = r;
    row.gpus = s.cluster.gpus;
    row.gpu = s.hardware.gpu;
    row.hidden = s.model.hidden;
    row.pp = s.parallel.pp;
    row.element_steps = static_cast<double>(s.tokens_per_iteration()) / s.parallel.dp *
                        (static_cast<double>(s.model.layers) / s.parallel.pp) *
                        (static_cast<double>(s.model.hidden) / s.parallel.tp);
    const model::GpuProfile& profile = model::hardware_profile(s);
    row.peak_tflops = profile.peak_tflops;
    row.memory_gbs = profile.memory_gbs;
    // A run a value of its profile was fitted on is no judge of the model:
    // listed, not scored (its out-of-sample error is the fit's leave-one-out).
    for (const auto& [key, prov] : profile.provenance) {
      if (prov.source != "fitted" || row.run.unscored.size() > 0) continue;
      if (std::find(prov.runs.begin(), prov.runs.end(), r.name) != prov.runs.end()) {
        row.run.unscored = "fitted on: the " + profile.name + " profile's " + key +
                           " (its leave-one-out error is in the fit's report)";
      }
    }
    const model::Estimate a = model::estimate(s);
    row.analytical_s = a.iteration_time_s;
    row.fits_memory = a.memory.fits();
    row.event_s = sim::event_estimate(s).iteration_time_s;
    c.rows.push_back(std::move(row));
  }
  std::vector<double> errors, analytical;
  for (const PublishedRunRow& r : c.rows) {
    if (!r.run.unscored.empty()) continue;
    errors.push_back(std::fabs(r.error()));
    analytical.push_back(std::fabs(r.analytical_error()));
  }
  c.scored = static_cast<int>(errors.size());
  c.median_abs_error = median(errors);
  c.max_abs_error = max_of(errors);
  c.analytical_median_abs_error = median(analytical);
  c.analytical_max_abs_error = max_of(analytical);
  for (size_t i = 0; i < errors.size(); ++i) {
    c.within_median_bound += errors[i] <= kRunsMedianBound;
    c.within_max_bound += errors[i] <= kRunsMaxBound;
    c.analytical_within_median_bound += analytical[i] <= kRunsMedianBound;
    c.analytical_within_max_bound += analytical[i] <= kRunsMaxBound;
  }
  c.pass = !errors.empty() && c.median_abs_error <= kRunsMedianBound && c.max_abs_error <= kRunsMaxBound;
  group_errors(&c);
  return c;
}

}  // namespace megascale::calibrate
