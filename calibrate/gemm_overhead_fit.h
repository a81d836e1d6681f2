// calibrate/gemm_overhead_fit.h: fit a profile's per-call GEMM overhead
// (GpuProfile::gemm_overhead_us) on a measured GEMM table.
//
// defines: GemmOverheadFit, fit_gemm_overhead
//
// The roofline (model/hardware.h) times a GEMM as its tile- and wave-quantised
// compute or its memory traffic; a real kernel adds a roughly constant
// GPU-side time (grid launch, the first wave's fill and the last one's drain,
// the epilogue) that only small and mid-sized GEMMs feel. One constant c is
// fitted: predicted = roofline + c, least squares of the relative time errors
// sum((p_i + c) / t_i - 1)^2, closed form c = sum((t_i - p_i) / t_i^2) /
// sum(1 / t_i^2), clamped at 0. Each point is also predicted with c fitted on
// the others (leave-one-out).
//
// Thread-safety: pure function.
#pragma once

#include <vector>

#include "calibrate/gemm_sweep.h"
#include "model/hardware.h"

namespace megascale::calibrate {

struct GemmOverheadFit {
  double overhead_us = 0;
  int points = 0;
  // |predicted / measured - 1| of the times: the roofline as it stands (its
  // launch floor, no overhead), with the fitted overhead, and leave-one-out.
  double roofline_median_error = 0, roofline_max_error = 0;
  double fitted_median_error = 0, fitted_max_error = 0;
  double loo_median_error = 0, loo_max_error = 0;
};

// `rows`: one dtype's measured GEMMs (seconds > 0); `gpu`: the profile whose
// roofline is fitted (its gemm_overhead_us is ignored). REQUIRES: !rows.empty().
GemmOverheadFit fit_gemm_overhead(const std::vector<GemmSweepRow>& rows, const model::GpuProfile& gpu);

}  // namespace megascale::calibrate
