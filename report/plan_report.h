// report/plan_report.h: `megascale plan` (reliability/plan_study.h) as JSON,
// text and the ETTR sweep chart's points.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "model/config.h"
#include "reliability/ettr_plot.h"
#include "reliability/plan_study.h"

namespace megascale::report {

// "5m", "2h", "1d", "90s": a duration in its largest whole unit; below a
// minute or not whole, seconds to 4 significant digits ("0.5s", "1.5s").
std::string duration_label(double s);

// `interval_sweep`: the user gave the checkpoint intervals (--sweep
// checkpoint_interval), so the text lists them; `files`: the chart written.
base::Json plan_json(const model::Scenario& s, const reliability::PlanRequest& request,
                     const reliability::PlanStudy& study, const std::vector<std::string>& files);
std::string plan_text(const model::Scenario& s, const reliability::PlanRequest& request,
                      const reliability::PlanStudy& study, bool interval_sweep);

// The chart of the sweep: ETTR per GPU count when the study has a GPU sweep,
// else per checkpoint interval.
reliability::EttrPlot plan_plot(const model::Scenario& s, const reliability::PlanRequest& request,
                                const reliability::PlanStudy& study);

}  // namespace megascale::report
