// cli/simulate_event.cc: `megascale simulate --fidelity event`: scenario ->
// sim::simulate_job (sim/event_run.h) -> files written, report printed
// (report/event_report.h, report/failure_report.h).
#include "cli/simulate_event.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "base/text_file.h"
#include "model/breakdown_chart.h"
#include "report/estimate_report.h"
#include "report/event_report.h"
#include "report/failure_report.h"
#include "sim/event_run.h"
#include "sim/failure_sim.h"
#include "sim/heatmap.h"
#include "sim/job_sim.h"
#include "sim/network_crosscheck.h"
#include "sim/trace_writer.h"

namespace megascale::cli {
namespace {

// `simulate --fail-gpu G --fail-at T`: the step with GPU G's host failing.
int simulate_failure_report(const model::Scenario& s, const EventRequest& r, const sim::SimOptions& o,
                            std::ostream& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const sim::FailureResult f = sim::simulate_failure(s, o, *r.fail_gpu, r.fail_at_s);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::string> files;
  if (!r.trace.empty()) {
    try {
      files = sim::write_trace_files(r.trace, f.trace_events);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
  }
  if (r.json) {
    out << report::report_json(report::failure_json(s, f, wall_s, files)) << "\n";
  } else {
    out << report::failure_text(s, f, wall_s, files);
  }
  return 0;
}

}  // namespace

int simulate_event(const model::Scenario& s, const EventRequest& r, std::ostream& out, std::ostream& err) {
  sim::SimOptions o = sim::sim_options(s, r);
  if (o.steps > 1) {  // several iterations can take minutes: say where it is
    o.progress = [&err](int done, int total) {
      err << "\rsimulate: step " << done << " / " << total << (done == total ? "\n" : "") << std::flush;
    };
  }
  if (r.fail_gpu) return simulate_failure_report(s, r, o, out);
  const sim::JobResult res = sim::simulate_job(s, o);
  std::vector<std::string> files;
  try {
    if (!r.trace.empty()) {
      const std::vector<std::string> written = sim::write_trace_files(r.trace, res.trace_events);
      files.insert(files.end(), written.begin(), written.end());
    }
    if (!r.heatmap.empty()) {
      sim::write_heatmap_svg(r.heatmap, res);
      files.push_back(r.heatmap);
    }
    if (!r.chart.empty()) {
      const model::Estimate& e = res.estimate;
      if (!base::write_text_atomically(r.chart, model::breakdown_svg(s.name + " (event-level)",
                                                               {{"event-level", e.breakdown, e.iteration_time_s}})))
        throw std::runtime_error("--chart: cannot write " + r.chart);
      files.push_back(r.chart);
    }
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());  // a path that cannot be written: bad input
  }
  std::optional<sim::NetworkCrossCheck> check;
  if (r.simgrid_check) {
    sim::SimOptions every = o;
    every.max_replicas = std::max(o.max_replicas, s.parallel.dp);
    check = sim::network_crosscheck(s, every);
  }
  if (r.json) {
    base::Json json = report::event_json(res, o, res.wall_s, files);
    if (check) json["simgrid_check"] = report::crosscheck_json(*check);
    out << report::report_json(json) << "\n";
  } else {
    out << report::event_text(res, o, res.wall_s, files);
    if (check) out << report::crosscheck_text(*check);
  }
  return 0;
}

}  // namespace megascale::cli
