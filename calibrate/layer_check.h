// calibrate/layer_check.h: published per-layer forward / backward times against
// the closed form's one-layer pass (model::layer_passes), the finest-grained
// published check the project has: it tests the operator costs, recomputation
// and the TP/SP collectives of one layer without the pipeline, data-parallel or
// per-step terms that whole-run times mix in. `megascale calibrate runs-check
// --layers FILE` reports it (report/runs_check_report.h); `calibrate fit
// --layers FILE` fits the one parameter these times isolate (calibrate/
// layer_fit.h).
//
// defines: PublishedLayer, LayerCheckRow, read_published_layers, check_published_layers
//
// Input: a CSV whose header names the columns `name`, `scenario` (relative to
// the CSV's folder), `set` (scenario overrides, blank-separated KEY=VALUE as
// `--set` takes them, may be empty), `forward_ms`, `backward_ms` (one layer, one
// micro-batch, one GPU, as the source measured them), `source` and optionally
// `note`; '#' lines are comments. E.g. calibrate/runs/published-layers.csv
// (Korthikanti et al. 2022, Table 4).
//
// Errors: ImportError "FILE:LINE: reason" (a missing column, a time that is not
// > 0 or is faster than the GPU's dense peak for the layer's FLOPs, a scenario
// file that does not exist, a scenario or override that does not load).
// Thread-safety: pure functions (read the files).
#pragma once

#include <string>
#include <vector>

namespace megascale::calibrate {

struct PublishedLayer {
  std::string name;
  std::string scenario_file;
  std::vector<std::string> overrides;  // the `set` column, split
  double forward_ms = 0, backward_ms = 0;
  std::string source, note;
  int line = 0;  // in the CSV
};

struct LayerCheckRow {
  PublishedLayer layer;
  double forward_ms = 0, backward_ms = 0;  // predicted: model::layer_passes of the scenario
  double forward_error() const { return forward_ms / layer.forward_ms - 1.0; }
  double backward_error() const { return backward_ms / layer.backward_ms - 1.0; }
  double combined_error() const {
    return (forward_ms + backward_ms) / (layer.forward_ms + layer.backward_ms) - 1.0;
  }
};

std::vector<PublishedLayer> read_published_layers(const std::string& path);
// `profile_file` (non-empty): every row's hardware.profile set to that file
// (calibrate/layer_fit.h predicts with trial profiles).
std::vector<LayerCheckRow> check_published_layers(const std::vector<PublishedLayer>& layers,
                                                  const std::string& profile_file = "");

}  // namespace megascale::calibrate
