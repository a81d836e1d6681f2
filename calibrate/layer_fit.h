// calibrate/layer_fit.h: `megascale calibrate fit --layers FILE --params
// tp_gather_scatter`: the GPU profile's tp_gather_scatter_extra (model/
// hardware.h) fitted on published per-layer times (calibrate/layer_check.h),
// with its leave-one-out error.
//
// defines: LayerFitRow, LayerFitResult, fit_layer_gather_scatter, layer_fit_markdown
//
// Model of a row's forward and backward time: t(x) = t(0) + x dt/dx, x the
// fraction by which a TP all-gather or reduce-scatter inside a node runs
// longer than the ring formula, dt/dx from a second prediction at x = 1 (exact
// where the collectives are exposed, as in Megatron-LM's sequence-parallel
// layer without TP overlap). x >= 0 by least squares over every row's forward
// and backward times; a row without all-gathers or reduce-scatters (no
// sequence parallelism) has dt/dx = 0 and leaves x as it is, but its times are
// reported. The base profile's own value is replaced (fitted from 0), so a
// refit of a fitted profile gives the same value.
// Leave-one-out: each row with dt/dx != 0 predicted from a fit on the other
// rows; `loo_error` = mean |(forward + backward) predicted / measured - 1| over
// those rows. At least two such rows are needed.
//
// Errors: std::invalid_argument when fewer than two rows carry the collectives;
// as check_published_layers otherwise.
// Thread-safety: writes only in `scratch_dir`.
#pragma once

#include <string>
#include <vector>

#include "calibrate/layer_check.h"
#include "model/hardware.h"

namespace megascale::calibrate {

struct LayerFitRow {
  std::string name;
  double measured_forward_ms = 0, measured_backward_ms = 0;
  double before_forward_ms = 0, before_backward_ms = 0;  // the base profile (its own value)
  double after_forward_ms = 0, after_backward_ms = 0;    // the fitted profile
  double loo_forward_ms = 0, loo_backward_ms = 0;        // from a fit without this row
  bool informative = false;                              // dt/dx != 0: it moves the fit
  double error(double fwd, double bwd) const {
    return (fwd + bwd) / (measured_forward_ms + measured_backward_ms) - 1.0;
  }
};

struct LayerFitResult {
  model::GpuProfile profile;  // the base with the fitted value and its provenance
  double extra = 0;           // the fitted tp_gather_scatter_extra
  double loo_error = 0;       // mean over informative rows
  double loo_max_error = 0;
  std::vector<LayerFitRow> rows;
};

LayerFitResult fit_layer_gather_scatter(const std::string& base_file, const std::vector<PublishedLayer>& layers,
                                        const std::string& scratch_dir);

std::string layer_fit_markdown(const LayerFitResult& r, const std::string& command);

}  // namespace megascale::calibrate
