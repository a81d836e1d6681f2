// calibrate/golden.h: a team's regression gate: scenarios run now against the
// results stored for them (`megascale check DIR --golden FILE`, issue 13).
//
// The golden file is JSON (nlohmann-json, base/json.h):
//   {"schema_version": 1, "tool_version": "...", "fidelity": "event",
//    "scenarios": {"<scenario path relative to the golden file>": {
//        "mfu": ..., "iteration_time_s": ..., "tokens_per_s": ...,
//        "bubble_fraction": ..., "memory_per_gpu_bytes": ..., "fits_in_memory": true,
//        "breakdown_s": {"compute": ..., ...}}}}
// Keys are paths relative to the golden file's directory, so a checkout moved
// elsewhere keeps its keys.
//
// Comparison, key by key (compare_with_golden):
//  - headline figures (mfu, iteration_time_s, tokens_per_s, memory_per_gpu_bytes):
//    relative change |now - golden| / |golden| above `tolerance` is a regression;
//  - bubble_fraction and every breakdown_s component: the change as a share of the
//    golden iteration time (a 1 ms component doubling is not a regression of a
//    10 s step; a component moving 2% of the step is);
//  - fits_in_memory: any change;
//  - a metric the golden file has and the run lacks (or the reverse) is a
//    regression: the report's shape changed.
// Either direction fails: a faster prediction is as unexpected as a slower one
// until it is reviewed and stored with --update. A scenario the golden file does
// not know is "new" (fails: store it); a stored scenario whose file is gone is
// "removed" (fails: drop it with --update); a stored scenario not among the
// inputs is "not checked" (listed, not a failure).
//
// Thread-safety: pure functions except read_golden and open_golden (read a file).
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/json.h"
#include "model/estimator.h"

namespace megascale::calibrate {

// A golden file that cannot be read or has the wrong shape: what() names the
// file, the key and the reason.
class GoldenError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The stored figures of one estimate (the object under "scenarios").
base::Json estimate_metrics(const model::Estimate& e);

// The scenarios `megascale check DIR|FILE...` runs: every *.toml under each DIR
// (recursively, sorted), and each FILE as given; a file named twice (the same
// file by its canonical path) appears once, where it first does. Throws std::invalid_argument for
// an input that is neither, or a DIR without a scenario.
std::vector<std::string> scenario_files(const std::vector<std::string>& inputs);

// estimate_metrics of each scenario file at `fidelity` ("event": sim/event_run.h,
// else model::estimate), keyed by its path relative to `golden_dir` (the golden
// file's folder). `progress(i, n, file)` is called before each. Throws
// model::ScenarioError for a bad scenario.
std::map<std::string, base::Json> scenario_metrics(
    const std::vector<std::string>& files, const std::string& golden_dir, const std::string& fidelity,
    const std::function<void(size_t, size_t, const std::string&)>& progress = {});

struct MetricChange {
  std::string scenario;  // golden key
  std::string metric;    // "mfu", "breakdown_s.compute", ...
  base::Json golden;     // number, bool or null (absent)
  base::Json now;
  double change = 0;     // relative (headline) or share of the iteration (breakdown); 0 for bools
  bool regression = false;
};

struct GateResult {
  int checked = 0;                       // scenarios compared
  std::vector<MetricChange> changes;     // every metric that moved at all, regressions first
  std::vector<std::string> new_scenarios, removed, not_checked;
  bool pass() const;
};

// `now`: golden key -> estimate_metrics(). `exists(key)`: whether the stored
// scenario's file is still there. Throws GoldenError for a malformed `golden`.
GateResult compare_with_golden(const base::Json& golden, const std::string& golden_path,
                               const std::map<std::string, base::Json>& now, double tolerance,
                               const std::function<bool(const std::string&)>& exists);

// Reads and checks the shape of a golden file (schema_version, fidelity,
// scenarios). Throws GoldenError.
base::Json read_golden(const std::string& path);

// The golden file a gate compares with and the fidelity it runs at:
// `fidelity` as asked, "" for the file's (else event). `golden` is null where
// there is no file yet, which only `update` (it writes one) accepts. Throws
// std::invalid_argument naming `path`: malformed (read_golden), missing without
// `update`, or recorded at another fidelity than asked without `update`.
struct GoldenGate {
  base::Json golden;
  std::string fidelity;
};
GoldenGate open_golden(const std::string& path, const std::string& fidelity, bool update);

// The golden file after --update: every scenario in `now` stored, stored ones
// kept unless `exists` says their file is gone.
base::Json updated_golden(const base::Json& old, const std::map<std::string, base::Json>& now,
                          const std::string& fidelity, const std::function<bool(const std::string&)>& exists);

}  // namespace megascale::calibrate
