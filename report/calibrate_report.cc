// report/calibrate_report.cc: calibrate check / import -> text / JSON.
#include "report/calibrate_report.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "calibrate/nccl_tests.h"  // defines: kDisturbedRatio
#include "calibrate/statistics.h"

namespace megascale::report {

std::string check_text(const calibrate::CheckResult& r, const std::string& file) {
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "{} ({}, {} process(es) on {}, profile {})\n", r.name, file, r.processes, r.device, r.profile_file);
  if (r.recorded) fmt::format_to(o, "  measured: the recorded run in {}\n", r.run_dir);
  fmt::format_to(o,
                 "  step measured {:.2f} ms (median of {}, spread {:.1f}%), predicted {:.2f} ms, error {:+.1f}% "
                 "({}, tolerance {:.0f}%)\n",
                 r.measured_step_s * 1e3, r.ops.steps_used, 100 * r.measured_spread, r.predicted_step_s * 1e3,
                 100 * r.error, r.pass ? "pass" : "FAIL", 100 * r.tolerance);
  fmt::format_to(o,
                 "  compute {:.2f} / {:.2f} ms, TP comm {:.2f} / {:.2f} ms, bubble + exposed comm {:.2f} / {:.2f} ms "
                 "(measured / predicted, per rank)\n",
                 r.ops.measured.compute_s * 1e3, r.ops.predicted.compute_s * 1e3, r.ops.measured.tp_s * 1e3,
                 r.ops.predicted.tp_s * 1e3, r.ops.measured.wait_s * 1e3, r.ops.predicted.wait_s * 1e3);
  const size_t shown = std::min<size_t>(r.ops.ops.size(), 8);
  for (size_t i = 0; i < shown; ++i) {
    const calibrate::OpRow& op = r.ops.ops[i];
    fmt::format_to(o, "    {}: {:.3f} / {:.3f} ms ({:+.1f}%)\n", op.kind, op.measured_s * 1e3, op.predicted_s * 1e3,
                   100 * op.error);
  }
  for (const std::string& f : r.files) out += "  wrote " + f + "\n";
  return out;
}

std::string check_summary_text(const std::vector<double>& abs_errors) {
  return fmt::format("{} scenarios: median |error| {:.1f}%, max {:.1f}%\n", abs_errors.size(),
                     100 * calibrate::median(abs_errors),
                     100 * *std::max_element(abs_errors.begin(), abs_errors.end()));
}

base::Json import_json(const calibrate::ImportReport& r, const std::string& path) {
  base::Json j;
  j["profile"] = r.profile.name;
  j["file"] = path;
  j["gemm_points"] = r.gemm_points;
  base::Json runs = base::Json::array();
  for (const calibrate::ImportedRun& ir : r.runs) {
    runs.push_back({{"file", ir.file}, {"op", ir.op}, {"scope", ir.scope}, {"ranks", ir.ranks}, {"nodes", ir.nodes},
                    {"device", ir.device}, {"points", ir.points}, {"disturbed", ir.disturbed},
                    {"curve_max_error_large", ir.curve_max_error_large},
                    {"curve_max_error_small", ir.curve_max_error_small}, {"loo_error", ir.loo_error}});
  }
  j["nccl_tests"] = runs;
  return j;
}

std::string import_text(const calibrate::ImportReport& r, const std::string& path) {
  std::string out = fmt::format("wrote {}: profile {}\n", path, r.profile.name);
  auto o = std::back_inserter(out);
  for (const calibrate::ImportedRun& ir : r.runs) {
    fmt::format_to(o,
                   "  {}: {} over {} ranks ({}, {}), {} sizes; protocol curves within {:.1f}% at >= 64 MiB, {:.1f}% "
                   "below; leave-one-point-out {:.1f}%\n",
                   ir.file, ir.op, ir.ranks, ir.scope, ir.device.empty() ? std::string("device not named") : ir.device,
                   ir.points, 100 * ir.curve_max_error_large, 100 * ir.curve_max_error_small, 100 * ir.loo_error);
    if (ir.disturbed > 0) {
      fmt::format_to(o, "    {} size(s) taken at the in-place time: out of place > {:.0f}x in place (a disturbed run)\n",
                     ir.disturbed, calibrate::kDisturbedRatio);
    }
  }
  if (r.gemm_points > 0) fmt::format_to(o, "  {} GEMM points\n", r.gemm_points);
  return out;
}

}  // namespace megascale::report
