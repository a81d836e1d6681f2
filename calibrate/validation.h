// calibrate/validation.h: predicted vs published figures for the MegaScale paper's runs.
//
// The published figures (../shared/REFERENCE.md, MegaScale NSDI'24 Tables 2 and 3,
// Figure 9) are paired here with the scenario files in scenarios/paper/ that
// describe those runs. `megascale validate` runs each scenario, compares, and can
// write results/validation.md.
//
// Thread-safety: pure functions (they read files).
#pragma once

#include <string>
#include <vector>

namespace megascale::calibrate {

struct PaperCase {
  std::string file;          // under scenarios/paper/
  std::string table;         // "table2", "table3", "fig9"
  std::string label;         // e.g. "Megatron-LM 256 GPUs"
  double published_mfu = 0;  // fraction
  double published_iteration_s = 0;  // 0 when the paper gives none
};

const std::vector<PaperCase>& paper_cases();

struct ValidationRow {
  std::string case_name;  // file stem
  std::string table;
  std::string label;
  std::string metric;     // "mfu" | "iteration_time_s" | "speedup"
  double published = 0;
  double predicted = 0;   // by the report's fidelity
  double error = 0;       // predicted - published (MFU in fraction units)
  double analytical = 0;  // the analytical fidelity's value
  bool has_analytical = true;  // false where the closed form has no answer (stragglers)
};

struct ValidationSummary {
  double table2_mean_abs_mfu_error = 0;  // fraction
  double table2_max_abs_mfu_error = 0;
  double table3_mean_abs_mfu_error = 0;
  double table3_max_abs_mfu_error = 0;
  double fig9_mean_abs_mfu_error = 0;
  double fig9_max_abs_mfu_error = 0;
  double table2_max_abs_speedup_error = 0;
  int table3_wrong_sign_increments = 0;
  double table3_max_abs_increment_error = 0;  // each technique's MFU step vs the published one
};

struct ValidationReport {
  std::string fidelity;  // "event" | "analytical": what `predicted` comes from
  std::vector<std::string> overrides;  // --set applied to every paper scenario (what-if)
  std::vector<ValidationRow> rows;
  ValidationSummary summary;             // of `predicted`
  ValidationSummary analytical_summary;  // of `analytical`
};

// The accuracy bounds of issue 12 (points of MFU / speedup; issue 4's plus the
// Table 3 increments), and whether a summary meets them. `megascale validate`
// exits 1 when its fidelity misses one.
struct AccuracyBounds {
  double table2_mean = 0.020, table2_max = 0.040, speedup = 0.05;
  double table3_each = 0.020, table3_increment = 0.010, fig9_each = 0.030;
};
bool meets(const ValidationSummary& s, const AccuracyBounds& b);

// Runs every paper case from `scenario_dir` at the given fidelity ("event":
// sim/event_run.h) and always at the analytical one. Throws
// model::ScenarioError for a broken scenario file, std::invalid_argument for
// an unknown fidelity.
ValidationReport run_validation(const std::string& scenario_dir, const std::string& fidelity,
                                const std::vector<std::string>& overrides = {});

// results/validation.md contents: tables, summary, and the known causes of error.
std::string validation_markdown(const ValidationReport& r);

}  // namespace megascale::calibrate
