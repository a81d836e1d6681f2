// cli/simulate_event.h: `megascale simulate --fidelity event`: the run
// (sim/event_run.h) and its report: text or JSON, trace and heat-map files, the
// failure report of --fail-gpu, the SimGrid cross-check of --simgrid-check.
#pragma once

#include <ostream>

#include "model/config.h"
#include "sim/event_run.h"

namespace megascale::cli {

// The event-level options of `megascale simulate` (see usage()).
struct EventRequest : sim::RunRequest {
  bool json = false;
  std::string chart;  // --chart FILE.svg ("" = none): the breakdown (model/breakdown_chart.h)
};

// Runs the simulation and prints the report; returns the exit code. Throws
// std::invalid_argument for bad values (exit code 2 in cmd_simulate).
int simulate_event(const model::Scenario& s, const EventRequest& r, std::ostream& out, std::ostream& err);

}  // namespace megascale::cli
