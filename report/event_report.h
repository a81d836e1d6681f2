// report/event_report.h: `megascale simulate --fidelity event` as JSON and text:
// the estimate (report/estimate_report.h) with the event-level fields (step
// times, communication, replicas simulated, variability, the analytical
// estimate beside it), and the SimGrid cross-check of --simgrid-check.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "sim/event_run.h"
#include "sim/job_sim.h"
#include "sim/network_crosscheck.h"

namespace megascale::report {

// estimate_json with "fidelity": "event" and the event-level fields appended;
// `files`: the trace, heat-map and chart written.
base::Json event_json(const sim::JobResult& res, const sim::SimOptions& o, double wall_s,
                      const std::vector<std::string>& files);
std::string event_text(const sim::JobResult& res, const sim::SimOptions& o, double wall_s,
                       const std::vector<std::string>& files);

base::Json crosscheck_json(const sim::NetworkCrossCheck& check);
// A line when no transfer crosses the fabric, else the step and op differences.
std::string crosscheck_text(const sim::NetworkCrossCheck& check);

}  // namespace megascale::report
