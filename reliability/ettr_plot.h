// reliability/ettr_plot.h: the ETTR sweep of `megascale plan --sweep ...
// --plot FILE.svg` as a picture read at a glance.
//
// defines: EttrPlotPoint, EttrPlot, ettr_sweep_svg
//
// The mean ETTR against the swept value (checkpoint interval or GPUs) as a
// line with a dot per value, the p5-p95 spread of the Monte Carlo runs as a
// shaded band around it, and each mean written beside its dot. The ETTR axis is
// honest: it runs from 0% to 100% with a tick every 20% (a narrow band is
// read from the labels, not magnified). The swept axis is logarithmic when the
// values span more than one (the sweeps are geometric), each value labelled.
// Drawn through base/svg.h: the title and labels are escaped.
//
// Thread-safety: pure function.
#pragma once

#include <string>
#include <vector>

namespace megascale::reliability {

struct EttrPlotPoint {
  double x = 0;       // the swept value (seconds of checkpoint interval, or GPUs), > 0
  std::string label;  // its tick label ("15m", "3072")
  double ettr_mean = 0, ettr_p5 = 0, ettr_p95 = 0;  // fractions of wall time
};

struct EttrPlot {
  std::string title;    // e.g. "<scenario>: ETTR vs checkpoint interval"
  std::string x_label;  // the swept quantity and its unit
  int runs = 0;         // Monte Carlo runs behind each point (for the legend)
  std::vector<EttrPlotPoint> points;
};

// REQUIRES: at least one point, every x > 0.
std::string ettr_sweep_svg(const EttrPlot& plot);

}  // namespace megascale::reliability
