// cli/runs_check.h: `megascale calibrate runs-check`: the simulator, unchanged
// and unfitted, against published (or measured) iteration times of whole
// training runs - the generality check of issue 12 (published runs other than
// the MegaScale paper: median |error| <= 8%, max <= 20%).
//
// Input: a runs CSV (calibrate/fit.h read_measured_runs: scenario,
// iteration_time_s, source, note, scored), e.g. calibrate/runs/published.csv.
// Each scenario is predicted at the event fidelity (the `megascale` binary's
// event simulator; analytical beside it) with its own hardware profile; rows
// marked `scored = no: reason` are listed but left out of the figures. Prints
// (and with --write FILE.md writes) a table and the median / max |error|; exit
// 1 when a bound is missed, 2 on bad input.
//
// defines: calibrate_runs_check
#pragma once

#include <ostream>

#include "cli/commands.h"  // defines: Args

namespace megascale::cli {

int calibrate_runs_check(const Args& args, std::ostream& out, std::ostream& err);

}  // namespace megascale::cli
