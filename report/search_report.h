// report/search_report.h: `megascale search` as JSON and text: the ranking
// (analytical, and event-level for the refined best N), why each layout ranks
// where it does, and how far apart the ranking is against the model's error.
//
// Thread-safety: pure functions.
#pragma once

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

}  // namespace megascale::report
