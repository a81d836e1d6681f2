// calibrate/runs_check.cc: see runs_check.h.
#include "calibrate/runs_check.h"

#include "calibrate/statistics.h"

#include <algorithm>
#include <cmath>

#include "model/estimator.h"
#include "model/scenario.h"
#include "sim/event_run.h"

namespace megascale::calibrate {
namespace {

double max_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

}  // namespace

RunsCheck check_published_runs(const std::vector<MeasuredRun>& runs) {
  RunsCheck c;
  for (const MeasuredRun& r : runs) {
    const model::Scenario s = model::load_scenario(r.scenario_file);
    PublishedRunRow row;
    row.run = r;
    row.gpus = s.cluster.gpus;
    row.gpu = s.hardware.gpu;
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
  c.pass = !errors.empty() && c.median_abs_error <= kRunsMedianBound && c.max_abs_error <= kRunsMaxBound;
  return c;
}

}  // namespace megascale::calibrate
