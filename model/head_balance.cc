// model/head_balance.cc: see head_balance.h.
#include "model/head_balance.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace megascale::model {

std::vector<int> head_balanced_chunk_layers(int layers, int pp, int vpp, double first_head_layers,
                                            double last_head_layers) {
  if (vpp < 1) throw std::invalid_argument("head_balanced_chunk_layers: vpp must be >= 1");
  if (!(first_head_layers >= 0) || !(last_head_layers >= 0) || !std::isfinite(first_head_layers) ||
      !std::isfinite(last_head_layers)) {
    throw std::invalid_argument("head_balanced_chunk_layers: head costs must be finite and >= 0");
  }
  if (pp < 2 || layers < pp) return {};
  std::vector<double> extra(static_cast<size_t>(pp), 0.0);
  extra.front() += first_head_layers;
  extra.back() += last_head_layers;
  std::vector<int> n(static_cast<size_t>(pp), 1);
  // Twice the distance from the middle: integers, so ties are exact.
  auto off_middle = [pp](int r) { return std::abs(2 * r - (pp - 1)); };
  for (int left = layers - pp; left > 0; --left) {
    int pick = 0;
    for (int r = 1; r < pp; ++r) {
      const double mine = n[r] + 1 + extra[r];
      const double best = n[pick] + 1 + extra[pick];
      if (mine < best || (mine == best && off_middle(r) < off_middle(pick))) pick = r;
    }
    ++n[pick];
  }
  std::vector<int> out(static_cast<size_t>(pp) * vpp, 0);
  for (int r = 0; r < pp; ++r) {
    const int base = n[r] / vpp;
    const int rem = n[r] % vpp;
    for (int c = 0; c < vpp; ++c) {
      // The last rank's head sits in its last chunk: the extra layers go to its
      // first chunks. Elsewhere (the embedding in the first rank's chunk 0) to
      // the last ones.
      const bool heavier = r == pp - 1 ? c < rem : c >= vpp - rem;
      out[static_cast<size_t>(c) * pp + r] = base + (heavier ? 1 : 0);
    }
  }
  return out;
}

}  // namespace megascale::model
