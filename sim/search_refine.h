// sim/search_refine.h: the second stage of `megascale search --refine N`: the
// closed form ranks every layout (model/search.h), then the best N are re-timed
// by the event-level simulation (sim/event_run.h) and re-ranked by it; the
// rest keep the closed form's order.
//
// Thread-safety: pure function of its arguments (apart from the callback).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "model/config.h"
#include "model/estimator.h"
#include "model/search.h"

namespace megascale::sim {

// Called after each layout is simulated: (index from 0, count, the layout, its
// event estimate, wall seconds it took).
using RefineProgress =
    std::function<void(size_t, size_t, const model::Candidate&, const model::Estimate&, double)>;

// Re-times the first min(n, r.top.size()) layouts of `r` (the scenario `s` on
// `gpus` GPUs with each layout) and stably re-orders them by event MFU, best
// first. Returns their event estimates in the new order (element i belongs to
// r.top[i]).
std::vector<model::Estimate> refine_search(const model::Scenario& s, int gpus, model::SearchResult& r, size_t n,
                                           const RefineProgress& progress = {});

}  // namespace megascale::sim
