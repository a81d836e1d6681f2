// calibrate/gemm_overhead_fit.cc: the closed-form overhead fit and its
// leave-one-out errors.
#include "calibrate/gemm_overhead_fit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "calibrate/statistics.h"

namespace megascale::calibrate {
namespace {

// c minimising sum((p + c) / t - 1)^2 over the points but `skip` (-1: none).
double fit_c(const std::vector<double>& p, const std::vector<double>& t, int skip) {
  double num = 0, den = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (static_cast<int>(i) == skip) continue;
    num += (t[i] - p[i]) / (t[i] * t[i]);
    den += 1.0 / (t[i] * t[i]);
  }
  return den > 0 ? std::max(0.0, num / den) : 0.0;
}

}  // namespace

GemmOverheadFit fit_gemm_overhead(const std::vector<GemmSweepRow>& rows, const model::GpuProfile& gpu) {
  if (rows.empty()) throw std::invalid_argument("fit_gemm_overhead: no measured GEMMs");
  model::GpuProfile bare = gpu;
  bare.gemm_overhead_us = 0;
  model::GpuProfile unfloored = bare;
  unfloored.kernel_launch_us = 0;
  std::vector<double> p, t, roofline_err;
  for (const GemmSweepRow& r : rows) {
    if (!(r.seconds > 0)) throw std::invalid_argument("fit_gemm_overhead: a GEMM without a positive time");
    p.push_back(model::gemm_time_s(unfloored, r.m, r.n, r.k));
    t.push_back(r.seconds);
    roofline_err.push_back(std::abs(model::gemm_time_s(bare, r.m, r.n, r.k) / r.seconds - 1.0));
  }
  GemmOverheadFit f;
  f.points = static_cast<int>(rows.size());
  const double c = fit_c(p, t, -1);
  f.overhead_us = c * 1e6;
  const double floor_s = gpu.kernel_launch_us * 1e-6;
  std::vector<double> fitted_err, loo_err;
  for (size_t i = 0; i < p.size(); ++i) {
    fitted_err.push_back(std::abs(std::max(p[i] + c, floor_s) / t[i] - 1.0));
    const double ci = fit_c(p, t, static_cast<int>(i));
    loo_err.push_back(std::abs(std::max(p[i] + ci, floor_s) / t[i] - 1.0));
  }
  f.roofline_median_error = median(roofline_err);
  f.roofline_max_error = *std::max_element(roofline_err.begin(), roofline_err.end());
  f.fitted_median_error = median(fitted_err);
  f.fitted_max_error = *std::max_element(fitted_err.begin(), fitted_err.end());
  f.loo_median_error = median(loo_err);
  f.loo_max_error = *std::max_element(loo_err.begin(), loo_err.end());
  return f;
}

}  // namespace megascale::calibrate
