// model/search.h: exhaustive parallelism search with the analytical estimator.
//
// For a scenario's model, global batch, GPU count and optimisations, enumerates
// every (tp, cp, pp, vpp, dp, micro_batch, sequence_parallel, zero_stage,
// recompute: none, full and the selective form of the scenario's framework,
// torchtitan's "selective_op" when the scenario uses it, else Megatron's
// "selective") that is a valid layout (check_layout(), tp dividing gpus_per_node and a CP group of tp x cp
// below it dividing it too, check_placement in model/scenario.cc; cp > 1
// where the sequence splits into 2 x cp chunks, Megatron-Core's load-balanced
// form, and not for the engine, which has no CP; tp dividing the heads, KV heads
// and ffn_hidden, and under sequence parallelism each CP rank's tokens), drops those that do
// not fit in the GPU's HBM (model/memory.h), ranks the rest by predicted MFU and
// keeps the best K. Then each of the best 4K with a pipeline is offered once more with
// its heads balanced (model/head_balance.h: the embedding's and output head's
// ranks hold fewer layers, as Meta's Llama 3 405B and Megatron-Bridge's Llama 3
// 70B layouts do), ranked where it fits and its estimate is shorter. Calculon needs ~2.6 ms per configuration; here one evaluation
// costs microseconds (bench/search_benchmark.cc).
//
// Thread-safety: search() is reentrant; the progress callback runs on the caller's
// thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "model/config.h"
#include "model/estimator.h"

namespace megascale::model {

// Dimensions a search keeps fixed (`megascale search --fix tp=8,pp=4`); 0 or
// -1 = free. dp is the user's (data-parallel replicas, ParallelConfig::replicas),
// not the folded cp x dp.
struct LayoutConstraints {
  int tp = 0, cp = 0, pp = 0, vpp = 0, dp = 0, micro_batch = 0;
  int zero_stage = -1;
  std::optional<bool> sequence_parallel;
  std::optional<Recompute> recompute;
  bool admits(const ParallelConfig& p) const {
    return (tp == 0 || p.tp == tp) && (cp == 0 || p.cp == cp) && (pp == 0 || p.pp == pp) &&
           (vpp == 0 || p.vpp == vpp) && (dp == 0 || p.replicas() == dp) &&
           (micro_batch == 0 || p.micro_batch == micro_batch) &&
           (zero_stage < 0 || p.zero_stage == zero_stage) &&
           (!sequence_parallel || p.sequence_parallel == *sequence_parallel) &&
           (!recompute || p.recompute == *recompute);
  }
};

// "tp=8,pp=4,recompute=selective": the dimensions a search keeps (`megascale
// search --fix`): tp, cp, pp, vpp, dp, micro_batch >= 1, zero_stage 0..3,
// sequence_parallel true|false, recompute none|selective|full|selective_op (the scenario
// keys' values). Throws std::invalid_argument naming the item that is not one
// of them.
LayoutConstraints parse_layout_constraints(const std::string& text);

// Why no layout the search enumerates for `s` on `gpus` GPUs meets `fixed`, or
// nullopt when some does: the first fixed dimension whose value no enumerated
// layout has ("tp=3: the layouts enumerated for this model and cluster have tp
// 1, 2, 4, 8"), else that the values do not combine.
std::optional<std::string> unmet_constraints_reason(const Scenario& s, int gpus, const LayoutConstraints& fixed);

struct SearchOptions {
  int gpus = 0;       // 0: the scenario's cluster.gpus
  int top_k = 10;
  LayoutConstraints fixed;  // layouts outside them are not enumerated (counted)
  // Fraction of each GPU's memory a layout must leave free (fragmentation,
  // the framework's own buffers): 0 = it may fill the memory model's capacity.
  double memory_headroom = 0;
  // Also record every valid layout in SearchResult::points (`search --csv`,
  // `search --plot`), estimating those that do not fit too: more work than
  // the ranking alone, which estimates only the layouts that fit.
  bool keep_points = false;
  // Called every `progress_every` evaluated configurations with (done, total).
  std::function<void(int64_t, int64_t)> progress;
  int64_t progress_every = 100000;
};

struct Candidate {
  ParallelConfig parallel;
  Estimate estimate;
};

// One evaluated layout, as the CSV and the scatter of `megascale search` show it.
struct LayoutPoint {
  ParallelConfig parallel;
  double mfu = 0;                   // fraction of peak, analytical
  double iteration_time_s = 0;      // analytical
  double memory_per_gpu_bytes = 0;  // most loaded stage (model/memory.h)
  bool fits = false;                // within capacity x (1 - memory_headroom)
};

struct SearchResult {
  int64_t enumerated = 0;        // layouts generated
  int64_t valid = 0;             // passed check_layout
  int64_t fit = 0;               // also fit in memory
  std::vector<Candidate> top;    // best first, at most top_k
  // Of `top`, the head-balanced splits (model/head_balance.h): search() offers
  // each of the best 4 x top_k layouts with a pipeline once more with that
  // split and ranks it where its estimate is the shorter and it fits.
  int64_t head_balanced = 0;
  // Every valid layout, in enumeration order, when SearchOptions::keep_points.
  std::vector<LayoutPoint> points;
  double memory_capacity_bytes = 0;  // per GPU, the memory model's capacity
  // The best fitting layout that also fits with whole gradients: ZeRO 0/1, one
  // micro-batch per replica, or ZeRO 2/3 whose unsharded gradients
  // (unsharded_gradient_extra_bytes, model/memory.h) still fit, within
  // capacity x (1 - memory_headroom) as the ranking's layouts - the ranking's
  // ZeRO 2/3 rows over several micro-batches count sharded gradients that
  // their time (one reduce-scatter per step) does not pay for. nullopt when
  // none fits. Heads-balanced splits are not offered for it.
  std::optional<Candidate> best_whole_gradients;
};

// Every layout the search would evaluate, before the memory filter, folded as
// the parser folds a scenario (model/config.h): a layout with cp > 1 carries
// cp x dp and cp x the global batch, and is timed on
// with_layout(s, p) (model/scenario.h). The scenario's own layout, cp
// included, describes the job, not a constraint.
std::vector<ParallelConfig> enumerate_layouts(const Scenario& s, int gpus);

SearchResult search(const Scenario& s, const SearchOptions& options);

// The heads of `own` (the closed-form estimate of s's layout) in transformer-
// layer passes of their rank: the embedding's (first rank) and the output
// layer's + loss's (last rank), as model/head_balance.h weighs them.
struct HeadWeights {
  double embedding_layers = 0, output_layers = 0;
};
HeadWeights head_weights(const ParallelConfig& p, const Estimate& own);

// s's layout with its heads balanced (model/head_balance.h), timed by the
// closed form: where s has a pipeline, the split differs from s's own, is a
// valid layout on s.cluster.gpus, fits within capacity x (1 - memory_headroom)
// and its estimate is shorter than `own` (s's own closed-form estimate);
// nullopt otherwise. `megascale search` offers it for each ranked layout,
// `megascale simulate` for the scenario's.
std::optional<Candidate> head_balanced_candidate(const Scenario& s, const Estimate& own, double memory_headroom = 0);

// "TP 8 PP 4 VPP 2 DP 96 mb 1 SP ZeRO 1 recompute selective": a layout in
// one line (progress and labels; SP only when sequence parallelism is on, "CP 2"
// after TP only with context parallelism; uneven stages after PP as
// "PP 16 (7+...+7)"; DP is the user's, without cp).
std::string layout_text(const ParallelConfig& p);
// "even", or the given end stages' layers: "7+...+7", "15+...", "...+5".
std::string stage_split_text(const ParallelConfig& p);

// How far apart a ranking's MFUs lie, against the model's measured error
// (model/accuracy.h): which layouts the model cannot tell from the best.
struct RankingSpread {
  double spread_points = 0;       // best - worst MFU of the ranking, percentage points
  double error_points = 0;        // the model's error it is held against
  int within_error = 0;           // layouts (the best included) within error_points of the best
  std::vector<bool> within;       // per layout, in ranking order
};
// `mfus`: fractions, best first.
RankingSpread ranking_spread(const std::vector<double>& mfus, double error_points);

// The ranking and every recorded layout of `r` as CSV with a header: the
// ranked layouts first (rank 1..K, in ranking order), then the other
// recorded valid layouts by analytical MFU (rank empty). `event[i]` (i <
// event.size()) is the event-level estimate of r.top[i], written in the
// event_mfu and event_iteration_time_s columns (empty otherwise).
std::string search_csv(const SearchResult& r, const std::vector<Estimate>& event);

// One line on why `c` ranks where it does relative to the best candidate: its
// largest time categories and the difference to the best in percentage points.
std::string explain(const Candidate& c, const Candidate& best);

// A search whose best layouts were re-timed at event level (sim/search_refine.h):
// `refined[i]` is the event estimate of r.top[i] (i < refined.size()).
//
// Why each of r.top ranks where it does: the refined ones against the
// event-level #1 with their event breakdowns, the others against the closed
// form's #1.
std::vector<std::string> ranking_reasons(const SearchResult& r, const std::vector<Estimate>& refined);
// The ranking against the model's own error: the refined layouts by their event
// MFU (kEventMfuErrorPoints), else the whole ranking by the analytical one
// (kAnalyticalMfuErrorPoints).
RankingSpread ranking_spread(const SearchResult& r, const std::vector<Estimate>& refined);

}  // namespace megascale::model
