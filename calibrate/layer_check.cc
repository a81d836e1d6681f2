// calibrate/layer_check.cc: see layer_check.h.
#include "calibrate/layer_check.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "base/number_text.h"
#include "calibrate/csv_line.h"
#include "calibrate/nccl_tests.h"  // ImportError
#include "base/text_file.h"
#include "model/engine_ops.h"
#include "model/profile.h"
#include "model/estimator.h"
#include "model/scenario.h"
#include "model/throughput.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, int line, const std::string& why) {
  throw ImportError(path + ":" + std::to_string(line) + ": " + why);
}

double milliseconds(const std::string& cell, const std::string& column, const std::string& path, int line) {
  const std::optional<double> v = base::finite_number(cell);
  if (!v || !(*v > 0)) fail(path, line, "column '" + column + "': expected milliseconds > 0, got '" + cell + "'");
  return *v;
}

}  // namespace

std::vector<PublishedLayer> read_published_layers(const std::string& path) {
  std::istringstream in(base::read_text_or_throw(path));
  static const char* kRequired[] = {"name", "scenario", "set", "forward_ms", "backward_ms", "source"};
  std::map<std::string, size_t> col;
  std::vector<PublishedLayer> out;
  const fs::path dir = fs::path(path).parent_path();
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (base::trim(line).empty() || line[0] == '#') continue;
    const std::vector<std::string> cells = split_csv_line(line, path, n);
    if (col.empty()) {
      for (size_t i = 0; i < cells.size(); ++i) col[cells[i]] = i;
      for (const char* c : kRequired) {
        if (!col.count(c)) fail(path, n, std::string("the header must name column '") + c + "'");
      }
      continue;
    }
    auto cell = [&](const char* c) -> std::string {
      const size_t i = col.at(c);
      if (i >= cells.size()) fail(path, n, std::string("column '") + c + "': missing (the row has " +
                                              std::to_string(cells.size()) + " cells)");
      return cells[i];
    };
    PublishedLayer l;
    l.line = n;
    l.name = cell("name");
    if (l.name.empty()) fail(path, n, "column 'name': empty");
    l.scenario_file = (dir / cell("scenario")).lexically_normal().string();
    if (!fs::is_regular_file(l.scenario_file)) fail(path, n, "column 'scenario': no such file " + l.scenario_file);
    std::istringstream set(cell("set"));
    for (std::string kv; set >> kv;) l.overrides.push_back(kv);
    l.forward_ms = milliseconds(cell("forward_ms"), "forward_ms", path, n);
    l.backward_ms = milliseconds(cell("backward_ms"), "backward_ms", path, n);
    l.source = cell("source");
    if (col.count("note") && col.at("note") < cells.size()) l.note = cells[col.at("note")];
    // The scenario with the row's overrides, loaded here so that a broken one
    // is named at the row that sets it (and before any row is checked).
    model::Scenario sc;
    try {
      sc = model::load_scenario(l.scenario_file, l.overrides);
    } catch (const model::ScenarioError& e) {
      fail(path, n, fmt::format("column '{}': {}", l.overrides.empty() ? "scenario" : "set", e.what()));
    }
    // A pass no GPU could run: one layer's FLOPs on one GPU (model/op_cost.h,
    // the kernels the pass executes, recomputation not counted) faster than
    // the GPU's dense peak (the FP8 GEMMs' speedup under FP8: model::mfu_ceiling).
    // 5% over is refused, not rounding, as for a GEMM sweep (calibrate/import.cc):
    // a time in the wrong unit, or the row names the wrong layout.
    const model::GpuProfile& gpu = model::hardware_profile(sc);
    if (!gpu.is_cpu() && gpu.peak_tflops > 0) {
      double fwd_flops = 0, bwd_flops = 0;
      for (const model::OperatorCost& op : model::job_layer_operators(sc, gpu)) {
        fwd_flops += op.fwd_flops;
        bwd_flops += op.bwd_flops;
      }
      const double peak_flops = gpu.peak_tflops * 1e12 * model::mfu_ceiling(sc);
      const std::pair<const char*, std::pair<double, double>> passes[] = {
          {"forward_ms", {l.forward_ms, fwd_flops}}, {"backward_ms", {l.backward_ms, bwd_flops}}};
      for (const auto& [column, time_flops] : passes) {
        const double fastest_ms = 1e3 * time_flops.second / peak_flops;
        if (time_flops.first * 1.05 < fastest_ms) {
          fail(path, n, fmt::format("column '{}': {} ms for {:.4g} GFLOP of one layer on one {} is {:.0f}% of its "
                                    "dense peak ({} TFLOP/s{}): no GPU runs it that fast; a time in the wrong unit, "
                                    "or the wrong scenario or set",
                                    column, cell(column), time_flops.second / 1e9, gpu.name,
                                    100 * fastest_ms / time_flops.first, gpu.peak_tflops,
                                    sc.optimizations.fp8 ? ", times the FP8 GEMMs' speedup" : ""));
        }
      }
    }
    out.push_back(l);
  }
  if (out.empty()) fail(path, 1, "no rows");
  return out;
}

std::vector<LayerCheckRow> check_published_layers(const std::vector<PublishedLayer>& layers,
                                                  const std::string& profile_file) {
  std::vector<LayerCheckRow> rows;
  for (const PublishedLayer& l : layers) {
    std::vector<std::string> overrides = l.overrides;
    // append(): g++ 12 warns -Wrestrict on "literal" + std::string (GCC bug 105329).
    if (!profile_file.empty())
      overrides.push_back(std::string("hardware.profile=\"").append(fs::absolute(profile_file).string()).append("\""));
    const model::Scenario s = model::load_scenario(l.scenario_file, overrides);
    const model::LayerPasses passes = model::layer_passes(s);
    LayerCheckRow r;
    r.layer = l;
    r.forward_ms = 1e3 * passes.forward_s();
    r.backward_ms = 1e3 * passes.backward_s();
    rows.push_back(r);
  }
  return rows;
}

}  // namespace megascale::calibrate
