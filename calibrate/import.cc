// calibrate/import.cc: see import.h.
#include "calibrate/import.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "calibrate/gemm_sweep.h"
#include "calibrate/nccl_tests.h"
#include "calibrate/protocol_fit.h"
#include "model/profile.h"
#include "base/text_file.h"

namespace megascale::calibrate {
namespace {

// A flat segment of the fit has no bandwidth term: stored as this busbw so the
// profile stays finite (1e9 GB/s moves 1 GB in 1 us).
constexpr double kFlatBusbwGbs = 1e9;

std::string read_text(const std::string& path) { return base::read_text_or_throw(path); }

model::ProtocolCurve to_model(const ProtocolCurve& c, const std::string& op, const std::string& scope, int ranks) {
  model::ProtocolCurve m;
  m.op = op;
  m.scope = scope;
  m.ranks = ranks;
  m.protocol = c.protocol;
  m.latency_us = std::max(0.0, c.latency_us);
  m.busbw_gbs = std::isfinite(c.busbw_gbs) && c.busbw_gbs > 0 ? std::min(c.busbw_gbs, kFlatBusbwGbs) : kFlatBusbwGbs;
  m.min_bytes = c.min_bytes;
  m.max_bytes = c.max_bytes;
  return m;
}

// Leave-one-point-out: each point (at its undisturbed time) predicted by the curves fitted
// without it; mean |measured busbw / predicted busbw - 1|.
double leave_one_point_out(const NcclTestsRun& run) {
  std::vector<size_t> usable;
  for (size_t i = 0; i < run.points.size(); ++i) {
    if (run.points[i].bytes > 0 && run.points[i].time_us > 0) usable.push_back(i);
  }
  if (usable.size() < 4) return 0;
  double sum = 0;
  for (size_t i : usable) {
    NcclTestsRun rest = run;
    rest.points.erase(rest.points.begin() + static_cast<std::ptrdiff_t>(i));
    const ProtocolFit f = fit_protocol_model(rest);
    const double model_us = envelope_time_us(f.segments, run.op, run.ranks, static_cast<double>(run.points[i].bytes));
    sum += std::abs(model_us / undisturbed_time_us(run.points[i]) - 1.0);
  }
  return sum / usable.size();
}

// Today's date in UTC, YYYY-MM-DD: the date an import stamps on its entries.
std::string utc_date_today() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  return fmt::format("{:04d}-{:02d}-{:02d}", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday);
}

}  // namespace

ImportReport import_measurements(const ImportOptions& o) {
  if (o.nccl_tests.empty() && o.gemm_csv.empty()) {
    throw std::invalid_argument("nothing to import: give --nccl-tests FILE and/or --gemm-csv FILE");
  }
  if (!o.scope.empty() && o.scope != "intra" && o.scope != "inter") {
    throw std::invalid_argument("--scope must be intra or inter, got '" + o.scope + "'");
  }
  // A file given twice would add its points twice (they were, silently).
  base::refuse_repeated_files(o.nccl_tests, "its points would count twice", "--nccl-tests");
  base::refuse_repeated_files(o.gemm_csv, "its points would count twice", "--gemm-csv");
  const std::string date = o.date.empty() ? utc_date_today() : o.date;
  ImportReport r;
  model::GpuProfile& p = r.profile;
  p = model::profile_named_or_file(o.base);
  const std::string base_name = p.name;
  p.name = o.name.empty() ? p.name + "-imported" : o.name;
  p.description = (p.description.empty() ? "" : p.description + "; ") + "with imported measurements";
  auto tables = std::make_shared<model::ProfileTables>(p.tables ? *p.tables : model::ProfileTables{});
  std::vector<model::CollectivePoint> points = tables->collectives.points();
  std::vector<model::ProtocolCurve> curves = tables->collectives.curves();
  std::vector<std::string> files, hosts;

  for (const std::string& spec : o.nccl_tests) {
    std::string path = spec, hint;
    // FILE:op (an op name never contains '/', a path may contain ':').
    if (const size_t colon = spec.rfind(':'); colon != std::string::npos && spec.find('/', colon) == std::string::npos &&
                                              !canonical_nccl_op(spec.substr(colon + 1)).empty()) {
      path = spec.substr(0, colon);
      hint = spec.substr(colon + 1);
    }
    for (const NcclTestsRun& run : parse_nccl_tests_runs(read_text(path), path, hint)) {
      if (run.ranks < 1) throw ImportError(path + ":" + std::to_string(run.first_line) + ": the rank count is unknown");
      std::string scope = o.scope;
      if (scope.empty()) {
        if (run.nodes == 0) {
          throw ImportError(path + ":" + std::to_string(run.first_line) +
                            ": cannot tell whether the run spans machines (no Rank lines); give --scope intra|inter");
        }
        scope = run.nodes > 1 ? "inter" : "intra";
      }
      if (run.ranks < 2 && run.op != "sendrecv") {
        throw ImportError(path + ":" + std::to_string(run.first_line) + ": a collective over one rank measures nothing");
      }
      // Measurements of one GPU added to another's profile would time the
      // wrong machine (an H100's nccl-tests went into the default A100 base).
      const std::string measured_gpu = gpu_model(run.device), base_gpu = gpu_model(base_name);
      if (!measured_gpu.empty() && !base_gpu.empty() && measured_gpu != base_gpu) {
        throw ImportError(fmt::format("{}:{}: measured on {} ({}), but the base profile {} is an {}: give --profile "
                                      "the profile of the GPU that ran it",
                                      path, run.first_line, run.device, measured_gpu, base_name, base_gpu));
      }
      ImportedRun ir;
      ir.file = path;
      ir.op = run.op;
      ir.scope = scope;
      ir.device = run.device;
      ir.ranks = std::max(run.ranks, 2);
      ir.nodes = run.nodes;
      for (const NcclTestsPoint& pt : run.points) {
        if (pt.bytes <= 0 || pt.time_us <= 0) continue;
        points.push_back({run.op, scope, ir.ranks, static_cast<double>(pt.bytes), undisturbed_time_us(pt) * 1e-6, 0.0});
        ++ir.points;
        if (out_of_place_disturbed(pt)) ++ir.disturbed;
      }
      const ProtocolFit fit = fit_protocol_model(run);
      for (const ProtocolCurve& c : fit.segments) curves.push_back(to_model(c, run.op, scope, ir.ranks));
      ir.curve_max_error_large = fit.segment_errors.max_rel_error_large;
      ir.curve_max_error_small = fit.segment_errors.max_rel_error_small;
      ir.loo_error = leave_one_point_out(run);
      r.runs.push_back(ir);
      files.push_back(path);
      hosts.push_back((run.device.empty() ? "unnamed device" : run.device) + " x " + std::to_string(ir.ranks) + " on " +
                      (run.nodes > 0 ? std::to_string(run.nodes) : std::string("?")) + " host(s)");
    }
  }
  if (!r.runs.empty()) {
    tables->collectives = model::CollectiveTable(points, curves);
    std::string list;
    for (const std::string& f : files) list += (list.empty() ? "" : ", ") + f;
    std::string where;
    for (const std::string& h : std::set<std::string>(hosts.begin(), hosts.end())) where += (where.empty() ? "" : "; ") + h;
    p.provenance["tables.collectives"] =
        model::Provenance{"measured", "nccl-tests output imported by megascale calibrate import: " + list,
                          where + " (as the output's Rank lines say)", date + " (imported; nccl-tests prints no date)",
                          {}, -1};
    double loo = 0;
    for (const ImportedRun& ir : r.runs) loo = std::max(loo, ir.loo_error);
    p.provenance["tables.protocols"] = model::Provenance{
        "fitted",
        "per protocol latency + bytes x busbw factor / busbw, split into size ranges where three lines miss 5% "
        "(>= 64 MiB) / 20% (calibrate/protocol_fit.h); loo_error: leave-one-point-out, the worst run",
        "", "", files, loo};
  }

  if (!o.gemm_csv.empty()) {
    std::vector<model::GemmPoint> gemm = tables->gemm.points();
    std::vector<std::string> used;
    for (const std::string& path : o.gemm_csv) {
      const std::vector<GemmSweepRow> rows = read_gemm_sweep_file(path);
      int taken = 0;
      std::set<std::string> dtypes;
      for (const GemmSweepRow& row : rows) {
        dtypes.insert(row.dtype);
        if (row.dtype != p.dtype) continue;
        // A GPU's dense peak (spec sheet, at its boost clock) bounds every GEMM it
        // runs; a row above it is a time in the wrong unit, a sparse or FP8
        // figure, or another GPU's. 5% over is refused, not rounding.
        const double tflops = gemm_flops(row.m, row.n, row.k) / row.seconds / 1e12;
        if (!p.is_cpu() && p.peak_tflops > 0 && tflops > 1.05 * p.peak_tflops) {
          throw ImportError(fmt::format(
              "{}:{}: {} x {} x {} {} at {:.4g} TFLOP/s is above {}'s dense {} peak of {:.4g} TFLOP/s: a time in the "
              "wrong unit, a sparse or FP8 figure, or another GPU's sweep (import it into that GPU's profile)",
              path, row.line, row.m, row.n, row.k, row.dtype, tflops, base_name, p.dtype, p.peak_tflops));
        }
        gemm.push_back({1, row.layout.empty() ? "any" : row.layout, row.m, row.n, row.k, row.seconds, 0.0, false});
        ++taken;
      }
      if (taken == 0) {
        std::string seen;
        for (const std::string& d : dtypes) seen += (seen.empty() ? "" : ", ") + d;
        throw ImportError(path + ":1: no row of the profile's dtype " + p.dtype + " (the file has " + seen +
                          "); import into a profile of that dtype");
      }
      r.gemm_points += taken;
      used.push_back(path);
    }
    tables->gemm = model::GemmTable(gemm);
    std::string list;
    for (const std::string& f : used) list += (list.empty() ? "" : ", ") + f;
    p.provenance["tables.gemm"] = model::Provenance{
        "measured", "GEMM sweep imported by megascale calibrate import (" + p.dtype + " rows): " + list,
        "as the sweep was measured (not recorded in the CSV)", date + " (imported)", {}, -1};
  }
  p.tables = tables;
  // Never hand out what cannot be read back.
  (void)model::parse_profile(model::write_profile(p), p.name);
  return r;
}

}  // namespace megascale::calibrate
