// calibrate/golden.cc: see golden.h.
#include "calibrate/golden.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "model/breakdown_parts.h"
#include "model/scenario.h"
#include "sim/system_comparison.h"
#include "base/json_document.h"
#include "base/text_file.h"

namespace megascale::calibrate {
namespace {

// The golden file format (golden.h); bump when a stored key changes meaning.
constexpr int kGoldenSchemaVersion = 1;

// Headline figures compared relative to their own stored value.
const char* const kRelative[] = {"mfu", "iteration_time_s", "tokens_per_s", "memory_per_gpu_bytes"};

bool relative_metric(const std::string& m) {
  return std::find(std::begin(kRelative), std::end(kRelative), m) != std::end(kRelative);
}

// Flattens {"a": 1, "b": {"c": 2}} into {"a": 1, "b.c": 2} (keys in order).
void flatten(const base::Json& j, const std::string& prefix, std::vector<std::pair<std::string, base::Json>>* out) {
  for (const auto& [k, v] : j.items()) {
    const std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object()) {
      flatten(v, key, out);
    } else {
      out->emplace_back(key, v);
    }
  }
}

}  // namespace

base::Json estimate_metrics(const model::Estimate& e) {
  base::Json j;
  j["mfu"] = e.mfu;
  j["iteration_time_s"] = e.iteration_time_s;
  j["tokens_per_s"] = e.tokens_per_s;
  j["bubble_fraction"] = e.bubble_fraction;
  j["memory_per_gpu_bytes"] = e.memory.total_bytes;
  j["fits_in_memory"] = e.memory.fits();
  base::Json breakdown;
  for (const model::BreakdownPart& part : model::kBreakdownParts) breakdown[part.key] = e.breakdown.*part.seconds;
  j["breakdown_s"] = breakdown;
  return j;
}

std::map<std::string, base::Json> scenario_metrics(
    const std::vector<std::string>& files, const std::string& golden_dir, const std::string& fidelity,
    const std::function<void(size_t, size_t, const std::string&)>& progress) {
  namespace fs = std::filesystem;
  std::map<std::string, base::Json> now;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string key = fs::relative(fs::absolute(files[i]), golden_dir).generic_string();
    if (progress) progress(i, files.size(), files[i]);
    const model::Scenario s = model::load_scenario(files[i]);
    now[key] = estimate_metrics(sim::estimate_at(s, fidelity));
  }
  return now;
}

bool GateResult::pass() const {
  if (!new_scenarios.empty() || !removed.empty()) return false;
  return std::none_of(changes.begin(), changes.end(), [](const MetricChange& c) { return c.regression; });
}

base::Json read_golden(const std::string& path) {
  std::string text;
  try {
    text = base::read_text_or_throw(path);
  } catch (const base::InputFileError& e) {
    throw GoldenError(path + ": cannot read the golden file (" + e.reason() + "; create it with --update)");
  }
  base::Json j;
  try {
    j = base::parse_json_document(text, path);
  } catch (const base::JsonSyntaxError& e) {
    throw GoldenError(std::string(e.what()) + "; a golden file is written by `megascale check --update`");
  }
  if (!j.is_object()) throw GoldenError(path + ": the top level must be an object");
  if (!j.contains("schema_version") || !j["schema_version"].is_number_integer())
    throw GoldenError(path + ": key 'schema_version': missing or not an integer");
  if (j["schema_version"].get<int>() != kGoldenSchemaVersion) {
    throw GoldenError(path + ": key 'schema_version': " + j["schema_version"].dump() + ", this build reads " +
                      std::to_string(kGoldenSchemaVersion) + " (re-record with --update)");
  }
  if (!j.contains("fidelity") || !j["fidelity"].is_string() ||
      (j["fidelity"] != "event" && j["fidelity"] != "analytical"))
    throw GoldenError(path + ": key 'fidelity': must be \"event\" or \"analytical\"");
  if (!j.contains("scenarios") || !j["scenarios"].is_object())
    throw GoldenError(path + ": key 'scenarios': missing or not an object");
  for (const auto& [name, m] : j["scenarios"].items()) {
    if (!m.is_object()) throw GoldenError(path + ": key 'scenarios." + name + "': not an object");
    for (const char* k : {"iteration_time_s", "mfu"}) {
      if (!m.contains(k) || !m[k].is_number())
        throw GoldenError(path + ": key 'scenarios." + name + "." + k + "': missing or not a number");
    }
    if (!(m["iteration_time_s"].get<double>() > 0))
      throw GoldenError(path + ": key 'scenarios." + name + ".iteration_time_s': must be > 0");
  }
  return j;
}

GateResult compare_with_golden(const base::Json& golden, const std::string& golden_path,
                               const std::map<std::string, base::Json>& now, double tolerance,
                               const std::function<bool(const std::string&)>& exists) {
  if (!golden.contains("scenarios") || !golden["scenarios"].is_object())
    throw GoldenError(golden_path + ": key 'scenarios': missing or not an object");
  const base::Json& stored = golden["scenarios"];
  GateResult r;
  for (const auto& [name, metrics] : now) {
    if (!stored.contains(name)) {
      r.new_scenarios.push_back(name);
      continue;
    }
    ++r.checked;
    const base::Json& old = stored[name];
    const double step_s = old["iteration_time_s"].get<double>();
    std::vector<std::pair<std::string, base::Json>> a, b;
    flatten(old, "", &a);
    flatten(metrics, "", &b);
    std::map<std::string, std::pair<base::Json, base::Json>> both;  // metric -> (golden, now)
    std::vector<std::string> order;
    for (const auto& [k, v] : a) {
      both[k].first = v;
      order.push_back(k);
    }
    for (const auto& [k, v] : b) {
      if (!both.count(k)) order.push_back(k);
      both[k].second = v;
    }
    for (const std::string& k : order) {
      const auto& [g, n] = both[k];
      MetricChange c{name, k, g, n, 0, false};
      if (g.is_null() || n.is_null() || g.type() != n.type()) {
        c.regression = true;  // the report's shape changed
      } else if (g.is_number() && n.is_number()) {
        const double gv = g.get<double>(), nv = n.get<double>();
        if (gv == nv) continue;
        c.change = relative_metric(k) ? (gv != 0 ? (nv - gv) / std::fabs(gv) : (nv > gv ? 1.0 : -1.0))
                                      : (nv - gv) / step_s;
        c.regression = !(std::fabs(c.change) <= tolerance);  // NaN fails too
      } else {
        if (g == n) continue;
        c.regression = true;
      }
      r.changes.push_back(c);
    }
  }
  for (const auto& [name, m] : stored.items()) {
    if (now.count(name)) continue;
    (exists(name) ? r.not_checked : r.removed).push_back(name);
  }
  std::stable_sort(r.changes.begin(), r.changes.end(),
                   [](const MetricChange& x, const MetricChange& y) { return x.regression > y.regression; });
  return r;
}

base::Json updated_golden(const base::Json& old, const std::map<std::string, base::Json>& now,
                          const std::string& fidelity, const std::function<bool(const std::string&)>& exists) {
  base::Json j = base::report_header();
  j["schema_version"] = kGoldenSchemaVersion;
  j["fidelity"] = fidelity;
  base::Json scenarios = base::Json::object();
  std::map<std::string, base::Json> all;
  if (old.is_object() && old.contains("scenarios") && old["scenarios"].is_object()) {
    for (const auto& [name, m] : old["scenarios"].items())
      if (exists(name)) all[name] = m;
  }
  for (const auto& [name, m] : now) all[name] = m;
  for (const auto& [name, m] : all) scenarios[name] = m;  // sorted by key: stable diffs
  j["scenarios"] = scenarios;
  return j;
}

std::vector<std::string> scenario_files(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  // A file named twice (twice given, or given and inside a given DIR) runs once,
  // where it first appears: it is one scenario of the golden file either way.
  std::set<std::string> seen;  // base::file_identity
  const auto add = [&](const fs::path& f) {
    if (seen.insert(base::file_identity(f.string())).second) files.push_back(f.string());
  };
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(in, ec)) {
        if (e.is_regular_file() && e.path().extension() == ".toml") found.push_back(e.path());
      }
      if (ec) throw std::invalid_argument(in + ": cannot list the directory: " + ec.message());
      if (found.empty()) throw std::invalid_argument(in + ": no *.toml scenario in this directory");
      std::sort(found.begin(), found.end());
      for (const fs::path& f : found) add(f);
    } else if (fs::is_regular_file(in, ec)) {
      add(in);
    } else {
      throw std::invalid_argument(in + ": no such scenario file or directory");
    }
  }
  return files;
}

GoldenGate open_golden(const std::string& path, const std::string& fidelity, bool update) {
  GoldenGate g;
  if (std::filesystem::exists(path)) {
    try {
      g.golden = read_golden(path);
    } catch (const GoldenError& e) {
      throw std::invalid_argument(e.what());
    }
  } else if (!update) {
    throw std::invalid_argument(path + ": no such golden file (record one with --update)");
  }
  const std::string stored = g.golden.is_null() ? "" : g.golden["fidelity"].get<std::string>();
  g.fidelity = !fidelity.empty() ? fidelity : !stored.empty() ? stored : "event";
  if (!stored.empty() && !update && stored != g.fidelity) {
    throw std::invalid_argument(path + ": recorded at " + stored + " fidelity; checking at " + g.fidelity +
                                " would compare different models");
  }
  return g;
}

}  // namespace megascale::calibrate
