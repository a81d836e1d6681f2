// calibrate/fit.h: `megascale calibrate fit`: the parameters no microbenchmark
// measures, fitted on named runs, with leave-one-out errors, and judged only on
// runs the fit did not use.
//
// defines: MeasuredRun, read_measured_runs, FitParams, FitRow, FitResult,
// fit_profile, fit_markdown
//
// Parameters (model/hardware.h, model/profile_tables.h):
//   step_overhead_s   host work per iteration outside the modelled ops
//                     (added to the optimizer step on every pipeline rank);
//   compute_scale     one in-situ scale on every kernel class (the profile's
//                     [tables.insitu] gemm = attention = kernel): how much
//                     slower the kernels run in the real jobs than the
//                     profile's kernel model says;
//   element_overhead_ns  time per activation element of a layer's forward +
//                     backward that the kernel model leaves out (model/
//                     hardware.h; opt-in: not in the default set).
// Model of a run's iteration time: t(a, c, b) = t(1, 0, 0) + (a - 1) dt/da +
// c dt/dc + b, with dt/da from a second prediction at a = 1.25 and dt/dc from
// one at c = 0.1 ns (the pipeline and the overlaps make t nearly linear in a
// and c over that range); a, c and b >= 0 by non-negative least squares on the
// fit runs (model/least_squares.h). Then the
// runs are predicted again with the fitted profile for the report. For GPU
// profiles the scale applies to the analytical operators by class
// (model/op_cost.h); the TP-overlap pieces of model/fused_overlap.h are not
// rescaled (their extra over the GEMM keeps its unfitted size).
// Leave-one-out: each fit run predicted from a fit on the others; reported as
// the parameters' `loo_error` (mean |predicted / measured - 1|).
// Held-out runs: predicted with the fitted profile, never used in the fit.
//
// Thread-safety: pure given `predict`.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/hardware.h"
#include "model/least_squares.h"

namespace megascale::calibrate {

// One run with its measured (or published) iteration time.
struct MeasuredRun {
  std::string scenario_file;
  std::string name;          // the scenario file's stem
  double iteration_s = 0;
  std::string source;        // where the time comes from
  std::string note;          // optional `note` column: how the time was read or derived
  std::string unscored;      // optional `scored` column "no: reason": listed, not in accuracy figures
  int line = 0;              // in the runs file (0: measured here)
};

// A CSV with a header line naming at least `scenario` and `iteration_time_s`
// (optionally `source`, `note`, and `scored`: "yes", or "no: reason");
// scenario paths relative to the CSV's folder. Throws
// ImportError "FILE:LINE: reason" on a malformed line.
std::vector<MeasuredRun> read_measured_runs(const std::string& path);

struct FitParams {
  bool step_overhead = true;
  bool compute_scale = true;
  bool element_overhead = false;
  // tp_gather_scatter_extra, fitted on per-layer times instead
  // (calibrate/layer_fit.h, `calibrate fit --layers`).
  bool tp_gather_scatter = false;
};

// "step_overhead,compute_scale,element_overhead,tp_gather_scatter"
// (`calibrate fit --params`): the parameters to fit. Throws std::invalid_argument naming one that is none
// of them.
FitParams parse_fit_params(const std::string& names);

// `runs` split into those to fit and those held out (named in `held_out`, each
// of which must name a run: std::invalid_argument otherwise).
std::pair<std::vector<MeasuredRun>, std::vector<MeasuredRun>> split_held_out(const std::vector<MeasuredRun>& runs,
                                                                             const std::vector<std::string>& held_out);

struct FitRow {
  std::string name;
  double measured_s = 0;
  double before_s = 0;       // the base profile's prediction
  double after_s = 0;        // the fitted profile's
  double loo_s = 0;          // fit runs: predicted by a fit on the others
  bool held_out = false;
};

struct FitResult {
  model::GpuProfile profile;  // base + fitted values, with provenance
  double step_overhead_s = 0;
  double compute_scale = 1;
  double element_overhead_ns = 0;  // added to the base profile's
  std::vector<FitRow> rows;   // fit runs first, then the held-out ones
  model::LeaveOneOut loo;
  double held_out_mean_abs = 0, held_out_max_abs = 0;
  double before_held_out_mean_abs = 0;
};

// `predict` times one iteration of a scenario on a profile file (the caller's
// simulator: event-level with the fabric for GPU jobs). `base_file` is the
// profile file the fit starts from (written to a scratch file by the caller
// for shipped profiles). Throws std::invalid_argument for no fit runs or a
// parameter set that is empty.
FitResult fit_profile(const std::string& base_file, const std::vector<MeasuredRun>& fit,
                      const std::vector<MeasuredRun>& held_out, const FitParams& params,
                      const std::function<double(const std::string& scenario_file, const std::string& profile_file)>& predict,
                      const std::string& scratch_dir);

std::string fit_markdown(const FitResult& r, const std::string& command);

}  // namespace megascale::calibrate
