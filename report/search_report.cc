// report/search_report.cc: search ranking -> JSON / text.
#include "report/search_report.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "model/accuracy.h"
#include "model/memory.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "report/estimate_report.h"

namespace megascale::report {

using base::Json;

Json search_json(const SearchReport& s) {
  const model::SearchResult& r = s.result;
  const size_t refined = s.refined.size();
  const std::vector<std::string> why = model::ranking_reasons(r, s.refined);
  const model::RankingSpread spread = model::ranking_spread(r, s.refined);
  std::vector<Json> items;
  for (size_t i = 0; i < r.top.size(); ++i) {
    model::Scenario c = model::with_layout(s.scenario, r.top[i].parallel);
    c.cluster.gpus = s.gpus;
    Json item = estimate_json(c, r.top[i].estimate);
    item["rank"] = static_cast<int64_t>(i + 1);
    item["why"] = why[i];
    item["within_error_of_best"] = i < spread.within.size() && spread.within[i];
    if (i < refined) {
      Json ev;
      ev["mfu"] = s.refined[i].mfu;
      ev["iteration_time_s"] = s.refined[i].iteration_time_s;
      item["event"] = ev;
    }
    items.push_back(item);
  }
  Json j;
  j["gpus"] = s.gpus;
  j["enumerated"] = r.enumerated;
  j["valid"] = r.valid;
  j["fit"] = r.fit;
  j["head_balanced_ranked"] = r.head_balanced;  // of "top": heads-balanced splits (model/head_balance.h)
  j["refined"] = static_cast<int64_t>(refined);
  j["wall_time_s"] = s.wall_s;
  // The ranking against the model's measured error (model/accuracy.h).
  j["error_band"] = {{"fidelity", refined > 0 ? "event" : "analytical"},
                     {"error_points", spread.error_points},
                     {"source", "results/validation.md: Table 2 mean absolute MFU error"},
                     {"spread_points", spread.spread_points},
                     {"within_error", spread.within_error}};
  j["files"] = s.files;
  j["top"] = items;
  // The best layout that fits with whole gradients (model::SearchResult::best_whole_gradients).
  if (const std::optional<model::Candidate>& w = r.best_whole_gradients) {
    j["best_whole_gradients"] = {{"layout", model::layout_text(w->parallel)},
                                 {"mfu", w->estimate.mfu},
                                 {"iteration_time_s", w->estimate.iteration_time_s}};
  } else {
    j["best_whole_gradients"] = nullptr;
  }
  return j;
}

std::string search_text(const SearchReport& s) {
  const model::SearchResult& r = s.result;
  const size_t refined = s.refined.size();
  const std::vector<std::string> why = model::ranking_reasons(r, s.refined);
  const model::RankingSpread spread = model::ranking_spread(r, s.refined);
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "{} on {} x {}: {} layouts enumerated, {} valid, {} fit in memory ({:.2f} s)\n",
                 s.scenario.model.name, s.gpus, s.scenario.hardware.gpu, r.enumerated, r.valid, r.fit, s.wall_s);
  if (refined > 0) {
    fmt::format_to(o, "best {} re-simulated at event level (SimGrid, fabric contention, GPU spread) and re-ranked by it\n",
                   refined);
  }
  // The stages column fits its longest entry ("10x3+11+10x3+9" for a balanced split).
  size_t stages_width = 9;
  for (const model::Candidate& c : r.top) stages_width = std::max(stages_width, model::stage_split_text(c.parallel).size());
  fmt::format_to(o, " #    MFU%   iter s{}  TP CP PP {:<{}} VPP    DP  mb  SP ZeRO recompute  why\n",
                 refined > 0 ? "  event%  event s" : "", "stages", stages_width);
  for (size_t i = 0; i < r.top.size(); ++i) {
    const model::ParallelConfig& c = r.top[i].parallel;
    const bool within = i < spread.within.size() && spread.within[i];
    fmt::format_to(o, "{:2}{} {:6.2f} {:8.3f}", i + 1, within ? '*' : ' ', 100 * r.top[i].estimate.mfu,
                   r.top[i].estimate.iteration_time_s);
    if (refined > 0) {
      if (i < refined) {
        fmt::format_to(o, " {:7.2f} {:8.3f}", 100 * s.refined[i].mfu, s.refined[i].iteration_time_s);
      } else {
        fmt::format_to(o, " {:>7} {:>8}", "-", "-");
      }
    }
    fmt::format_to(o, " {:3} {:2} {:2} {:<{}} {:3} {:5} {:3} {:>3} {:4} {:<9}  {}\n", c.tp, c.cp, c.pp,
                   model::stage_split_text(c), stages_width, c.vpp, c.replicas(),
                   c.micro_batch,
                   c.sequence_parallel ? "yes" : "no", c.zero_stage, model::to_string(c.recompute), why[i]);
  }
  // Uneven splits as the flag Megatron-Core takes (model/megatron_layout.h).
  bool layouts = false;
  for (size_t i = 0; i < r.top.size(); ++i) {
    model::Scenario c = model::with_layout(s.scenario, r.top[i].parallel);
    if (const std::string text = megatron_layout_text(c); !text.empty()) {
      if (!layouts) out += "uneven stages as Megatron-Core --pipeline-model-parallel-layout:\n";
      layouts = true;
      fmt::format_to(o, "{:3}  \"{}\"{}\n", i + 1, text,
                     r.top[i].parallel.pipeline_chunk_layers != nullptr ? "  (heads balanced)" : "");
    }
  }
  // ZeRO 2/3 over several micro-batches per replica: the memory counts sharded
  // gradients that the time does not pay for (model/memory.h).
  std::string gap_rows, too_full_rows;
  double gap_min_gb = 0, gap_max_gb = 0;
  for (size_t i = 0; i < r.top.size(); ++i) {
    const model::Scenario c = model::with_layout(s.scenario, r.top[i].parallel);
    const double extra =
        model::unsharded_gradient_extra_bytes(c.model, c.parallel, c.optimizations, model::hardware_profile(c));
    if (!(extra > 0)) continue;
    gap_min_gb = gap_rows.empty() ? extra / 1e9 : std::min(gap_min_gb, extra / 1e9);
    gap_max_gb = std::max(gap_max_gb, extra / 1e9);
    gap_rows += fmt::format("{}{}", gap_rows.empty() ? "#" : ", #", i + 1);
    const model::MemoryBreakdown& m = r.top[i].estimate.memory;
    if (m.total_bytes + extra > m.capacity_bytes)
      too_full_rows += fmt::format("{}{}", too_full_rows.empty() ? "#" : ", #", i + 1);
  }
  if (!gap_rows.empty()) {
    fmt::format_to(o,
                   "ZeRO 2/3 with several micro-batches per replica ({}): memory counts 1/dp of the gradients, time\n"
                   "  reduce-scatters them once per step; whole, they add {} GB{}\n"
                   "  (scenarios/README.md, zero_stage; --fix zero_stage=1 ranks without them)\n",
                   gap_rows,
                   fmt::format("{:.1f}", gap_min_gb) == fmt::format("{:.1f}", gap_max_gb)
                       ? fmt::format("{:.1f}", gap_max_gb)
                       : fmt::format("{:.1f}-{:.1f}", gap_min_gb, gap_max_gb),
                   too_full_rows.empty() ? std::string(" and every one still fits")
                                         : fmt::format(" and {} would not fit", too_full_rows));
    if (!too_full_rows.empty()) {
      // The best layout that needs no such gap (model::SearchResult::best_whole_gradients).
      if (const std::optional<model::Candidate>& w = r.best_whole_gradients) {
        size_t at = 0;
        const std::string text = model::layout_text(w->parallel);
        while (at < r.top.size() && !(model::layout_text(r.top[at].parallel) == text &&
                                      r.top[at].parallel.pipeline_layout == w->parallel.pipeline_layout)) {
          ++at;
        }
        fmt::format_to(o, "  best that fits with whole gradients: {}, MFU {:.2f}%, {:.3f} s{}\n",
                       text, 100 * w->estimate.mfu, w->estimate.iteration_time_s,
                       at < r.top.size() ? fmt::format(" (#{} above)", at + 1) : std::string());
      } else {
        out += "  no layout fits with whole gradients\n";
      }
    }
  }
  if (!spread.within.empty()) {
    fmt::format_to(o,
                   "* within error of the best: the {} {}lie within {:.2f} MFU points of each other, {} of them within "
                   "{:.2f} points of #1,\n  the {} model's measured error ({}):\n  the model cannot rank those apart\n",
                   spread.within.size(), refined > 0 ? "refined layouts (event MFU) " : "ranked layouts ",
                   spread.spread_points, spread.within_error, spread.error_points,
                   refined > 0 ? "event-level" : "analytical", model::kMfuErrorSource);
  }
  for (const std::string& f : s.files) out += "wrote " + f + "\n";
  return out;
}

std::string no_layout_text(const SearchReport& rep, const model::LayoutConstraints& fixed,
                           const std::string& fix_text) {
  const model::SearchResult& r = rep.result;
  const model::Scenario& s = rep.scenario;
  if (!r.top.empty()) return "";
  if (r.enumerated == 0) {
    // No split of this many GPUs at all (model/search.h enumerate_layouts):
    // nothing to do with --fix or memory, which the messages below blame.
    return fmt::format(
        "no layout of {} splits over {} GPUs: tp x cp x pp x dp must equal them, with tp dividing gpus_per_node ({}) "
        "and the heads ({}), pp dividing the layers ({}) or trimming the end stages, and dp dividing the global "
        "batch ({})\n",
        s.model.name, rep.gpus, s.hardware.gpus_per_node, s.model.heads, s.model.layers,
        s.parallel.global_batch / std::max(1, s.parallel.cp));  // the file's batch (model/config.h folds cp in)
  }
  const std::optional<std::string> why =
      r.valid == 0 && !fix_text.empty() ? model::unmet_constraints_reason(s, rep.gpus, fixed) : std::nullopt;
  if (why) return fmt::format("no layout meets --fix {}: {}\n", fix_text, *why);
  return fmt::format("no layout of {} fits on {} x {}\n", s.model.name, rep.gpus, s.hardware.gpu);
}

std::string search_progress_text(int64_t done, int64_t total) {
  return fmt::format("search: {} / {} layouts ({:.0f}%)", done, total, 100.0 * done / total);
}

std::string refine_progress_text(size_t i, size_t n, const model::Candidate& c, const model::Estimate& event,
                                 double took_s) {
  return fmt::format("refine {}/{}: {}: event MFU {:.1f}% (analytical {:.1f}%; {:.1f} s)\n", i + 1, n,
                     model::layout_text(c.parallel), 100 * event.mfu, 100 * c.estimate.mfu, took_s);
}

}  // namespace megascale::report
