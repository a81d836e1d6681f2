// report/search_report.h: `megascale search` as JSON and text: the ranking
// (analytical, and event-level for the refined best N), why each layout ranks
// where it does, and how far apart the ranking is against the model's error.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"
#include "model/config.h"
#include "model/estimator.h"
#include "model/search.h"

namespace megascale::report {

// What `megascale search` found.
struct SearchReport {
  model::Scenario scenario;             // the job as loaded (its layout is not a constraint)
  int gpus = 0;                         // searched on
  model::SearchResult result;
  std::vector<model::Estimate> refined; // event estimates of result.top[0..refined.size())
  double wall_s = 0;
  std::vector<std::string> files;       // --csv / --plot written
};

base::Json search_json(const SearchReport& s);
std::string search_text(const SearchReport& s);

// Why the search ranked nothing (it exits 1), a line for stderr: no split of
// the GPUs at all, a --fix (`fix_text` as typed, empty without one) that no
// layout meets, or no layout that fits. "" when the ranking holds layouts.
std::string no_layout_text(const SearchReport& s, const model::LayoutConstraints& fixed, const std::string& fix_text);

// The progress lines on stderr: "search: 1200 / 5000 layouts (24%)" (the CLI
// writes it through base::ProgressLine), and one per layout --refine re-simulates.
std::string search_progress_text(int64_t done, int64_t total);
std::string refine_progress_text(size_t i, size_t n, const model::Candidate& c, const model::Estimate& event,
                                 double took_s);

}  // namespace megascale::report
