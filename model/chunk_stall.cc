// model/chunk_stall.cc: see chunk_stall.h.
#include "model/chunk_stall.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/schedule.h"

namespace megascale::model {

double chunk_stall_s(int P, int V, int M, const std::function<ChunkPassCost(int, int)>& cost) {
  if (P < 2 || V < 2 || M < 1) return 0.0;
  ScheduleOptions o;
  o.pp = P;
  o.vpp = V;
  o.microbatches = M;
  const int64_t items = static_cast<int64_t>(M) * V;
  // The steps every rank runs in its steady state: rank 0 warms up longest.
  const int64_t steps = items - warmup_forwards(0, o);
  if (steps <= 0) return 0.0;
  std::vector<ChunkPassCost> pass(static_cast<size_t>(P) * V);
  for (int r = 0; r < P; ++r) {
    for (int c = 0; c < V; ++c) pass[static_cast<size_t>(r) * V + c] = cost(r, c);
  }
  std::vector<int> warmup(P);
  for (int r = 0; r < P; ++r) warmup[r] = warmup_forwards(r, o);
  const int64_t period = static_cast<int64_t>(P) * V;  // forward_item's chunk repeats every P * V items
  auto step = [&](int64_t i, int r) {
    const int fc = forward_item(static_cast<int>((warmup[r] + i) % period), o).chunk;
    const int bc = backward_item(static_cast<int>(i % period), o).chunk;
    return pass[static_cast<size_t>(r) * V + fc].forward_s + pass[static_cast<size_t>(r) * V + bc].backward_s;
  };
  // Per rank, its own steps; and the slowest rank's at every step.
  const int64_t full = steps / period, rest = steps % period;
  std::vector<double> own(P, 0.0);
  double lock = 0;
  for (int64_t i = 0; i < std::min(period, steps); ++i) {
    const double times = static_cast<double>(full) + (i < rest ? 1.0 : 0.0);  // step i recurs this often
    double slowest = 0;
    for (int r = 0; r < P; ++r) {
      const double t = step(i, r);
      own[r] += times * t;
      slowest = std::max(slowest, t);
    }
    lock += times * slowest;
  }
  const double mine = *std::max_element(own.begin(), own.end());
  return std::max(0.0, lock - mine);
}

}  // namespace megascale::model
