// cli/search_command.cc: `megascale search FILE`: every valid parallel layout
// ranked by the closed form (model/search.h), the best N re-timed at event level
// (sim/search_refine.h), printed by report/search_report.h.
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "base/progress_line.h"
#include "base/text_file.h"
#include "cli/commands.h"
#include "model/scenario.h"
#include "model/search.h"
#include "model/search_plot.h"
#include "report/estimate_report.h"
#include "report/search_report.h"
#include "sim/search_refine.h"

namespace megascale::cli {
namespace {

// Largest cluster `search` enumerates (1,048,576 GPUs: 64x the largest published
// job); beyond it the layout products (tp x pp x dp, GPUs x bytes) approach int overflow.
constexpr int kMaxSearchGpus = 1 << 20;

int search(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  if (p.positional.size() != 1) throw UsageError("search expects exactly one scenario FILE");
  const model::Scenario s = model::load_scenario(p.positional[0], p.all("--set"));
  model::SearchOptions o;
  o.gpus = static_cast<int>(p.integer("--gpus", s.cluster.gpus));
  // --fix tp=8,pp=4: dimensions the search keeps (the scenario's own [parallel]
  // layout, and --set parallel.*, describe the job, not constraints).
  o.fixed = read_option("--fix", [&] { return model::parse_layout_constraints(p.text("--fix", "")); });
  // --min-headroom 10% (issue 13's spelling) or --headroom 0.1: one option.
  if (p.has("--headroom") && p.has("--min-headroom")) throw UsageError("give one of --headroom and --min-headroom");
  o.memory_headroom = p.number("--headroom", p.number("--min-headroom", 0));
  // --csv and --plot, written after the search, were checked by parse_args
  // (Kind::kOutFile).
  o.keep_points = p.has("--csv") || p.has("--plot");
  const int refine = static_cast<int>(p.integer("--refine", 0));
  // --refine re-times the best N of the ranking, so the ranking keeps at least
  // N; an explicit --top below it would silently refine fewer.
  if (p.has("--top") && refine > p.integer("--top", 10)) {
    throw UsageError("--refine " + std::to_string(refine) + " re-simulates more layouts than --top " +
                     p.text("--top") + " keeps; raise --top or lower --refine");
  }
  o.top_k = std::max(static_cast<int>(p.integer("--top", 10)), refine);
  const auto t0 = std::chrono::steady_clock::now();
  base::ProgressLine progress(err);
  o.progress = [&](int64_t done, int64_t total) {
    if (total >= 2 * o.progress_every) progress.update(report::search_progress_text(done, total), done, total);  // long ones only
  };
  report::SearchReport rep;
  rep.scenario = s;
  rep.gpus = o.gpus;
  rep.result = model::search(s, o);
  // Two stages: the closed form ranks every layout, the event simulation
  // re-times the best `refine` and they are re-ranked by it (sim/search_refine.h).
  rep.refined = sim::refine_search(
      s, o.gpus, rep.result, static_cast<size_t>(refine),
      [&](size_t i, size_t n, const model::Candidate& c, const model::Estimate& e, double took_s) {
        err << report::refine_progress_text(i, n, c, e, took_s) << std::flush;
      });
  rep.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const model::SearchResult& r = rep.result;
  if (p.has("--csv")) base::write_text_or_throw(p.text("--csv"), model::search_csv(r, rep.refined));
  if (p.has("--plot")) {
    const std::string title = s.model.name + " on " + std::to_string(o.gpus) + " x " + s.hardware.gpu;
    base::write_text_or_throw(p.text("--plot"), model::search_scatter_svg(title, r, o.memory_headroom));
  }
  for (const char* name : {"--csv", "--plot"})
    if (p.has(name)) rep.files.push_back(p.text(name));
  out << (p.on("--json") ? report::report_json(report::search_json(rep)) + "\n" : report::search_text(rep));
  const std::string none = report::no_layout_text(rep, o.fixed, p.text("--fix", ""));
  if (!none.empty()) err << "megascale search: " << none;
  return none.empty() ? 0 : 1;
}

}  // namespace

CommandEntry search_command() {
  const std::string headroom = "the share of GPU memory to keep free, 0..0.9 or 0%..90%";
  return {{"search", "FILE [options]",
           "rank every valid (tp, cp, pp, vpp, dp, micro_batch, sequence_parallel, zero_stage,\n"
           "recompute) by predicted MFU (analytical); drops what does not fit; * marks the\n"
           "layouts within the model's error of #1. Exit 1 when nothing fits.",
           {json_flag(),
            {"--gpus", Kind::kInt, "N", "GPUs to lay out (default: the scenario's cluster.gpus)", 1, kMaxSearchGpus},
            {"--top", Kind::kInt, "K", "layouts ranked (default 10)", 1, kMaxInt},
            {"--refine", Kind::kInt, "N", "re-simulate the best N at event level and re-rank them by\nit (a line per layout on stderr)", 1, kMaxInt},
            {"--fix", Kind::kText, "tp=8,pp=4,...", "keep dimensions (tp, cp, pp, vpp, dp, micro_batch, zero_stage,\n"
             "sequence_parallel=true|false, recompute=none|selective|full|selective_op)"},
            {"--min-headroom", Kind::kFraction, "10%", "memory each GPU keeps free (default 0)", 0, 0.9, headroom},
            {"--headroom", Kind::kFraction, "0.1", "the same as --min-headroom", 0, 0.9, headroom},
            {"--csv", Kind::kOutFile, "FILE", "the ranking, then every valid layout"},
            {"--plot", Kind::kOutFile, "FILE.svg", "MFU against memory per GPU for every valid layout"},
            set_option()}},
          search};
}

}  // namespace megascale::cli
