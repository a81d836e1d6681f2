// model/least_squares.cc: see least_squares.h.
#include "model/least_squares.h"

#include <cmath>
#include <map>
#include <stdexcept>

namespace megascale::model {
namespace {

// Solves M y = v (small, symmetric) by Gaussian elimination with partial
// pivoting; false when singular.
bool solve(std::vector<std::vector<double>> M, std::vector<double> v, std::vector<double>* y) {
  const size_t n = v.size();
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(M[r][c]) > std::abs(M[pivot][c])) pivot = r;
    }
    if (std::abs(M[pivot][c]) < 1e-300) return false;
    std::swap(M[c], M[pivot]);
    std::swap(v[c], v[pivot]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = M[r][c] / M[c][c];
      for (size_t k = c; k < n; ++k) M[r][k] -= f * M[c][k];
      v[r] -= f * v[c];
    }
  }
  y->assign(n, 0.0);
  for (size_t c = n; c-- > 0;) {
    double s = v[c];
    for (size_t k = c + 1; k < n; ++k) s -= M[c][k] * (*y)[k];
    (*y)[c] = s / M[c][c];
  }
  return true;
}

double residual(const std::vector<std::vector<double>>& rows, const std::vector<double>& b,
                const std::vector<double>& x) {
  double r = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    double p = 0;
    for (size_t j = 0; j < x.size(); ++j) p += rows[i][j] * x[j];
    r += (p - b[i]) * (p - b[i]);
  }
  return r;
}

}  // namespace

std::vector<double> nnls(const std::vector<std::vector<double>>& rows, const std::vector<double>& b) {
  if (rows.empty() || rows.size() != b.size()) throw std::invalid_argument("nnls: rows and b must match and be non-empty");
  const size_t n = rows.front().size();
  if (n < 1 || n > 8) throw std::invalid_argument("nnls: 1..8 unknowns");
  for (const auto& r : rows) {
    if (r.size() != n) throw std::invalid_argument("nnls: rows of different lengths");
  }
  std::vector<double> best(n, 0.0);
  double best_r = residual(rows, b, best);
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::vector<size_t> free;
    for (size_t j = 0; j < n; ++j) {
      if (mask & (1u << j)) free.push_back(j);
    }
    const size_t m = free.size();
    std::vector<std::vector<double>> M(m, std::vector<double>(m, 0.0));
    std::vector<double> v(m, 0.0);
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t a = 0; a < m; ++a) {
        v[a] += rows[i][free[a]] * b[i];
        for (size_t c = 0; c < m; ++c) M[a][c] += rows[i][free[a]] * rows[i][free[c]];
      }
    }
    std::vector<double> y;
    if (!solve(M, v, &y)) continue;
    bool feasible = true;
    for (double yi : y) feasible = feasible && yi >= 0 && std::isfinite(yi);
    if (!feasible) continue;
    std::vector<double> x(n, 0.0);
    for (size_t a = 0; a < m; ++a) x[free[a]] = y[a];
    const double r = residual(rows, b, x);
    if (r < best_r) {
      best_r = r;
      best = x;
    }
  }
  return best;
}

std::vector<double> weighted_nnls(const std::vector<std::vector<double>>& rows, const std::vector<double>& b,
                                  const std::vector<double>& weights) {
  if (weights.empty()) return nnls(rows, b);
  if (weights.size() != rows.size()) throw std::invalid_argument("weighted_nnls: one weight per row");
  std::vector<std::vector<double>> wr = rows;
  std::vector<double> wb = b;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (double& v : wr[i]) v *= weights[i];
    wb[i] *= weights[i];
  }
  return nnls(wr, wb);
}

LeaveOneOut leave_one_out(const std::vector<std::vector<double>>& rows, const std::vector<double>& b,
                          const std::vector<std::string>& group_of_row, const std::vector<double>& weights) {
  LeaveOneOut out;
  std::map<std::string, int> seen;
  for (const std::string& g : group_of_row) {
    if (seen.emplace(g, 0).second) out.groups.push_back(g);
  }
  for (const std::string& g : out.groups) {
    std::vector<std::vector<double>> train;
    std::vector<double> tb, tw;
    std::vector<double> test_row(rows.front().size(), 0.0);
    double test_b = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (group_of_row[i] == g) {
        for (size_t j = 0; j < test_row.size(); ++j) test_row[j] += rows[i][j];
        test_b += b[i];
      } else {
        train.push_back(rows[i]);
        tb.push_back(b[i]);
        if (!weights.empty()) tw.push_back(weights[i]);
      }
    }
    double e = 0;
    if (!train.empty() && test_b > 0) {
      const std::vector<double> x = weighted_nnls(train, tb, tw);
      double p = 0;
      for (size_t j = 0; j < x.size(); ++j) p += test_row[j] * x[j];
      e = p / test_b - 1.0;
    }
    out.error.push_back(e);
    out.mean_abs_error += std::abs(e) / out.groups.size();
    out.max_abs_error = std::max(out.max_abs_error, std::abs(e));
  }
  return out;
}

}  // namespace megascale::model
