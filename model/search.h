// model/search.h: exhaustive parallelism search with the analytical estimator.
//
// For a scenario's model, global batch, GPU count and optimisations, enumerates
// every (tp, pp, vpp, dp, micro_batch, sequence_parallel, zero_stage, recompute)
// that is a valid layout (check_layout(), tp within one node), drops those that do
// not fit in the GPU's HBM (model/memory.h), ranks the rest by predicted MFU and
// keeps the best K. Calculon needs ~2.6 ms per configuration; here one evaluation
// costs microseconds (bench/search_benchmark.cc).
//
// Thread-safety: search() is reentrant; the progress callback runs on the caller's
// thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/config.h"
#include "model/estimator.h"

namespace megascale::model {

// Dimensions a search keeps fixed (`megascale search --fix tp=8,pp=4`); 0 or
// -1 = free.
struct LayoutConstraints {
  int tp = 0, pp = 0, vpp = 0, dp = 0, micro_batch = 0;
  int zero_stage = -1;
  bool admits(const ParallelConfig& p) const {
    return (tp == 0 || p.tp == tp) && (pp == 0 || p.pp == pp) && (vpp == 0 || p.vpp == vpp) &&
           (dp == 0 || p.dp == dp) && (micro_batch == 0 || p.micro_batch == micro_batch) &&
           (zero_stage < 0 || p.zero_stage == zero_stage);
  }
};

struct SearchOptions {
  int gpus = 0;       // 0: the scenario's cluster.gpus
  int top_k = 10;
  LayoutConstraints fixed;  // layouts outside them are not enumerated (counted)
  // Fraction of each GPU's memory a layout must leave free (fragmentation,
  // the framework's own buffers): 0 = it may fill the memory model's capacity.
  double memory_headroom = 0;
  // Called every `progress_every` evaluated configurations with (done, total).
  std::function<void(int64_t, int64_t)> progress;
  int64_t progress_every = 100000;
};

struct Candidate {
  ParallelConfig parallel;
  Estimate estimate;
};

struct SearchResult {
  int64_t enumerated = 0;        // layouts generated
  int64_t valid = 0;             // passed check_layout
  int64_t fit = 0;               // also fit in memory
  std::vector<Candidate> top;    // best first, at most top_k
};

// Every layout the search would evaluate, before the memory filter.
std::vector<ParallelConfig> enumerate_layouts(const Scenario& s, int gpus);

SearchResult search(const Scenario& s, const SearchOptions& options);

// One line on why `c` ranks where it does relative to the best candidate: its
// largest time categories and the difference to the best in percentage points.
std::string explain(const Candidate& c, const Candidate& best);

}  // namespace megascale::model
