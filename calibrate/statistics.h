// calibrate/statistics.h: the median the calibration reports share (trace
// comparison, nccl-tests and published-runs checks). Header-only.
//
// Thread-safety: pure function.
#pragma once

#include <algorithm>
#include <vector>

namespace megascale::calibrate {

// Median of `v` (mean of the middle two for an even count); 0 when empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace megascale::calibrate
