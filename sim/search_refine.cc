// sim/search_refine.cc: see search_refine.h.
#include "sim/search_refine.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "model/scenario.h"
#include "sim/event_run.h"

namespace megascale::sim {

std::vector<model::Estimate> refine_search(const model::Scenario& s, int gpus, model::SearchResult& r, size_t n,
                                           const RefineProgress& progress) {
  const size_t refined = std::min(r.top.size(), n);
  std::vector<model::Estimate> event(refined);
  for (size_t i = 0; i < refined; ++i) {
    model::Scenario c = model::with_layout(s, r.top[i].parallel);  // its model refolded for its cp
    c.cluster.gpus = gpus;
    const auto started = std::chrono::steady_clock::now();
    event[i] = event_estimate(c);
    const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (progress) progress(i, refined, r.top[i], event[i], took_s);
  }
  std::vector<size_t> order(refined);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return event[a].mfu > event[b].mfu; });
  std::vector<model::Candidate> top(r.top);
  std::vector<model::Estimate> sorted(refined);
  for (size_t i = 0; i < refined; ++i) {
    top[i] = r.top[order[i]];
    sorted[i] = event[order[i]];
  }
  r.top = std::move(top);
  return sorted;
}

}  // namespace megascale::sim
