// model/least_squares.h: non-negative least squares for the few parameters a
// calibration fits, and leave-one-out errors.
//
// defines: nnls, LeaveOneOut, leave_one_out
//
// The fits of calibrate/ and engine/microbench.h have at most a handful of
// unknowns (in-situ scales of kernel classes, a per-op gap, a per-step
// overhead), so the exact solution of min ||A x - b||^2 subject to x >= 0 is
// found by solving the normal equations on every subset of free variables and
// keeping the best feasible one (2^n small solves; n <= 8 enforced).
//
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace megascale::model {

// rows[i] . x ~= b[i], x >= 0. REQUIRES: every row has the same length n,
// 1 <= n <= 8, rows.size() == b.size() >= 1; throws std::invalid_argument otherwise.
// Variables that no row exercises come out 0.
std::vector<double> nnls(const std::vector<std::vector<double>>& rows, const std::vector<double>& b);

// Leave-one-out over groups of rows (a group = one named run): for each
// group, fit on the others and predict the group's total (sum of its b) from
// the sum of its rows. `error` is predicted / measured - 1 per group;
// mean_abs_error their mean absolute value. `weights` (empty: all 1) weight
// each row in the fits (e.g. 1 / b for relative errors); the group totals are
// unweighted.
struct LeaveOneOut {
  std::vector<std::string> groups;
  std::vector<double> error;
  double mean_abs_error = 0;
  double max_abs_error = 0;
};
LeaveOneOut leave_one_out(const std::vector<std::vector<double>>& rows, const std::vector<double>& b,
                          const std::vector<std::string>& group_of_row, const std::vector<double>& weights = {});

// nnls with each row (and its b) multiplied by its weight.
std::vector<double> weighted_nnls(const std::vector<std::vector<double>>& rows, const std::vector<double>& b,
                                  const std::vector<double>& weights);

}  // namespace megascale::model
