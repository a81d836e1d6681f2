// reliability/measured_recovery.cc: see measured_recovery.h.
#include "reliability/measured_recovery.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "base/json.h"
#include "base/json_document.h"
#include "base/text_file.h"

namespace megascale::reliability {
namespace {

// A figure as the labels show it: 4 significant digits.
std::string sig4(double v) { return fmt::format("{:.4g}", v); }

// The assumption (plan_inputs.h) each [recovery] key is shown under.
std::string assumption_key(const std::string& recovery_key) {
  if (recovery_key == "replacement_s") return "spares_replace_repair";
  return recovery_key;
}

}  // namespace

MeasuredRecovery load_recovery_profile(const std::string& path) {
  auto fail = [&](const std::string& key, const std::string& why) -> void {
    throw std::invalid_argument(path + ": " + key + ": " + why);
  };
  base::Json j;
  try {
    j = base::parse_json_document(base::read_text_or_throw(path), path);
  } catch (const base::JsonSyntaxError& e) {
    throw std::invalid_argument(std::string(e.what()) + "; expected a recovery profile written by `megascale run`");
  }
  if (!j.is_object()) fail("(file)", "not a JSON object (expected a recovery profile written by `megascale run`)");
  for (const char* key : {"schema_version", "stages_s", "detection_by_fault_s", "checkpoint_bytes_per_rank", "ranks"}) {
    if (!j.contains(key)) fail(key, "missing (not a recovery profile written by `megascale run`?)");
  }
  if (!j["stages_s"].is_object()) fail("stages_s", "expected an object");
  if (!j["detection_by_fault_s"].is_object()) fail("detection_by_fault_s", "expected an object");
  if (!j["checkpoint_bytes_per_rank"].is_number() || j["checkpoint_bytes_per_rank"].get<double>() < 0) {
    fail("checkpoint_bytes_per_rank", "expected a number >= 0");
  }
  if (!j["ranks"].is_number_integer() || j["ranks"].get<int>() < 1) fail("ranks", "expected an integer >= 1");
  MeasuredRecovery m;
  m.path = path;
  if (j.contains("completed")) {
    if (!j["completed"].is_boolean()) fail("completed", "expected true or false, got " + j["completed"].dump());
    if (!j["completed"].get<bool>()) {
      std::string error = j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "no error recorded";
      // One label line: the error's first line, shortened.
      error = error.substr(0, error.find('\n'));
      if (error.size() > 160) error = error.substr(0, 157) + "...";
      m.run_outcome = "did not finish: " + error;
    }
  }
  // A time: absent or null = not measured; otherwise a finite number >= 0.
  auto time_at = [&](const char* table, const char* key, double* out) {
    const base::Json& t = j[table];
    if (!t.contains(key) || t[key].is_null()) return false;
    if (!t[key].is_number() || !std::isfinite(t[key].get<double>()) || t[key].get<double>() < 0) {
      fail(std::string(table) + "." + key, "expected a number of seconds >= 0 or null, got " + t[key].dump());
    }
    *out = t[key].get<double>();
    return true;
  };
  double v = 0;
  const std::pair<const char*, const char*> detections[] = {{"kill", "error_report_s"},
                                                           {"hang", "anomaly_detect_s"},
                                                           {"traffic_stop", "traffic_drop_detect_s"},
                                                           {"slow", "slowdown_detect_s"}};
  for (const auto& [fault, key] : detections) {
    if (time_at("detection_by_fault_s", fault, &v)) {
      m.values[key] = {v, std::string("detection_by_fault_s.") + fault + " " + sig4(v) + " s"};
    }
  }
  // The self-check input: the self-checks the run measured; a profile
  // without one (no fault whose diagnosis needed it, or written before
  // robust/self_check.h) gives its whole diagnosis stage instead.
  if (time_at("stages_s", "self_check", &v)) {
    m.values["self_check_s"] = {v, "stages_s.self_check " + sig4(v) + " s"};
  } else if (time_at("stages_s", "diagnosis", &v)) {
    m.values["self_check_s"] = {v, "stages_s.diagnosis " + sig4(v) + " s (no self-check in this profile)"};
  }
  const std::pair<const char*, const char*> stages[] = {{"eviction", "replacement_s"}, {"restart", "process_start_s"}};
  for (const auto& [stage, key] : stages) {
    if (time_at("stages_s", stage, &v)) m.values[key] = {v, std::string("stages_s.") + stage + " " + sig4(v) + " s"};
  }
  const double bytes = j["checkpoint_bytes_per_rank"].get<double>();
  const double ranks = j["ranks"].get<double>();
  // All shards of a checkpoint; a profile without the total (written before
  // one reader per DP group stored the parameters once per group) had every
  // rank store the same.
  double total = bytes * ranks;
  if (j.contains("checkpoint_bytes_total")) {
    if (!j["checkpoint_bytes_total"].is_number() || j["checkpoint_bytes_total"].get<double>() < 0) {
      fail("checkpoint_bytes_total", "expected a number >= 0");
    }
    if (j["checkpoint_bytes_total"].get<double>() > 0) total = j["checkpoint_bytes_total"].get<double>();
  }
  if (bytes > 0) {
    const std::tuple<const char*, const char*, double> rates[] = {{"checkpoint_stall", "pcie_gbs", bytes},
                                                                  {"checkpoint_persist", "storage_write_gbs", total},
                                                                  {"checkpoint_load", "storage_read_gbs", total}};
    for (const auto& [stage, key, moved] : rates) {
      if (time_at("stages_s", stage, &v) && v > 0) {
        m.values[key] = {moved / v / 1e9, std::string("stages_s.") + stage + " " + sig4(v) + " s for " + sig4(moved) + " B"};
      }
    }
  }
  return m;
}

void apply_measured_recovery(const MeasuredRecovery& m, model::RecoveryConfig* r) {
  for (const auto& [key, value] : m.values) {
    const double x = value.first;
    if (key == "error_report_s") r->error_report_s = x;
    if (key == "anomaly_detect_s") r->anomaly_detect_s = x;
    if (key == "traffic_drop_detect_s") r->traffic_drop_detect_s = x;
    if (key == "slowdown_detect_s") r->slowdown_detect_s = x;
    if (key == "self_check_s") r->self_check_s = x;
    if (key == "replacement_s") r->replacement_s = x;
    if (key == "process_start_s") r->process_start_s = x;
    if (key == "pcie_gbs") r->pcie_gbs = x;
    if (key == "storage_write_gbs") r->storage_write_gbs = x;
    if (key == "storage_read_gbs") r->storage_read_gbs = x;
  }
}

std::vector<std::string> mark_measured(const MeasuredRecovery& m, std::vector<Assumption>* assumptions) {
  std::vector<std::string> marked;
  for (const auto& [key, value] : m.values) {
    const std::string a_key = assumption_key(key);
    for (Assumption& a : *assumptions) {
      if (a.key != a_key) continue;
      const std::string what = key + " = " + sig4(value.first) + " from " + value.second;
      const std::string from =
          m.run_outcome.empty() ? m.path : fmt::format("{} [the run {}]", m.path, m.run_outcome);
      a.source = a.source.rfind("measured", 0) == 0 ? a.source + "; " + what : "measured (" + from + ": " + what;
      marked.push_back(a.key);
    }
  }
  for (Assumption& a : *assumptions) {
    if (a.source.rfind("measured (", 0) == 0 && a.source.back() != ')') a.source += ")";
  }
  return marked;
}

}  // namespace megascale::reliability
