// robust/recovery_profile.cc: see recovery_profile.h.
#include "robust/recovery_profile.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "base/text_file.h"

namespace megascale::robust {
namespace {

// A stage's duration is measured when its end points were seen and it is a
// finite time >= 0: a negative difference means two clocks (a rank's and the
// driver's) disagree, and is left out rather than written (the plan's reader,
// reliability/measured_recovery.h, refuses negative times).
bool measured(bool have, double v) { return have && std::isfinite(v) && v >= 0; }

base::Json seconds_or_null(bool have, double v) { return measured(have, v) ? base::Json(v) : base::Json(nullptr); }

}  // namespace

base::Json profile_json(const RecoveryProfile& p) {
  base::Json j;
  j["scenario"] = p.scenario;
  j["source"] = p.source;
  j["ranks"] = p.ranks;
  j["nodes"] = p.nodes;
  j["spare_nodes"] = p.spare_nodes;
  j["steps"] = p.steps;
  j["heartbeat_period_s"] = p.heartbeat_period_s;
  j["heartbeat_misses"] = p.heartbeat_misses;
  j["step_stall_s"] = p.step_stall_s;
  j["control_plane"] = p.control_plane;
  j["node_kind"] = p.node_kind;
  if (!p.netns_unavailable.empty()) j["netns_unavailable"] = p.netns_unavailable;
  j["skipped_faults"] = p.skipped_faults;
  j["completed"] = p.completed;
  if (!p.error.empty()) j["error"] = p.error;
  j["attempts"] = p.attempts;
  j["wall_s"] = p.wall_s;
  std::map<std::string, std::pair<double, int>> sums;
  std::map<std::string, std::pair<double, int>> detection_by_fault;
  auto add = [&](const std::string& k, double v) {
    sums[k].first += v;
    sums[k].second += 1;
  };
  base::Json faults = base::Json::array();
  int false_positives = 0, missed = 0;
  for (const FaultRecord& f : p.faults) {
    base::Json x;
    x["fault"] = f.fault;
    x["rank"] = f.rank;
    x["step"] = f.step;
    const bool injected = f.fault != "none";
    const bool detected = !f.detected_by.empty();
    if (!injected) ++false_positives;
    if (injected && !detected && !f.superseded) ++missed;
    if (f.superseded) x["superseded"] = true;
    x["detected_by"] = detected ? base::Json(f.detected_by) : base::Json(nullptr);
    x["detection_detail"] = f.detection_detail;
    x["diagnosed_rank"] = f.diagnosed_rank;
    x["diagnosed_node"] = f.diagnosed_node;
    x["diagnosis"] = f.diagnosis;
    x["diagnosis_right"] = f.diagnosis_right;
    if (!f.chain.empty()) x["wait_for"] = f.chain;
    x["evicted_node"] = f.evicted_node;
    x["replacement_node"] = f.replacement_node;
    x["restarted"] = f.restarted;
    x["interrupted_step"] = f.interrupted_step;
    x["resumed_from_step"] = f.resumed_from_step;
    const bool have_detect = injected && detected && f.injected_at_s > 0;
    const double detection = f.detected_at_s - f.injected_at_s;
    const double diagnosis = f.diagnosed_at_s - f.detected_at_s;
    const double eviction = f.evicted_at_s - f.diagnosed_at_s;
    const bool have_restart = f.restarted && f.ready_at_s > 0 && f.relaunched_at_s > 0;
    const double restart = f.ready_at_s - f.relaunched_at_s - f.checkpoint_load_s;
    const double catch_up = f.caught_up_at_s - f.ready_at_s;
    const bool have_resume = f.first_step_at_s > 0 && f.injected_at_s > 0;
    base::Json st;
    st["detection_s"] = seconds_or_null(have_detect, detection);
    st["diagnosis_s"] = seconds_or_null(detected && f.diagnosed_at_s > 0, diagnosis);
    st["self_check_s"] = seconds_or_null(f.self_check_ran, f.self_check_s);
    st["eviction_s"] = seconds_or_null(f.evicted_at_s > 0, eviction);
    st["restart_s"] = seconds_or_null(have_restart, restart);
    st["checkpoint_load_s"] = seconds_or_null(have_restart, f.checkpoint_load_s);
    st["catch_up_s"] = seconds_or_null(have_restart && f.caught_up_at_s > 0, catch_up);
    st["resumed_s"] = seconds_or_null(have_resume, f.first_step_at_s - f.injected_at_s);
    x["stages_s"] = st;
    if (f.self_check_ran) {
      base::Json sc;
      sc["faulty"] = f.self_check_faulty;
      sc["report"] = f.self_check;
      x["self_check"] = sc;
    }
    if (!f.notes.empty()) x["notes"] = f.notes;
    faults.push_back(x);
    if (measured(have_detect, detection)) {
      add("detection", detection);
      detection_by_fault[f.fault].first += detection;
      detection_by_fault[f.fault].second += 1;
    }
    if (measured(detected && f.diagnosed_at_s > 0, diagnosis)) add("diagnosis", diagnosis);
    if (measured(f.self_check_ran, f.self_check_s)) add("self_check", f.self_check_s);
    if (measured(f.evicted_at_s > 0, eviction)) add("eviction", eviction);
    if (measured(have_restart, restart)) add("restart", restart);
    if (measured(have_restart, f.checkpoint_load_s)) add("checkpoint_load", f.checkpoint_load_s);
    if (measured(have_restart && f.caught_up_at_s > 0, catch_up)) add("catch_up", catch_up);
  }
  if (measured(p.checkpoints > 0, p.checkpoint_snapshot_s)) add("checkpoint_stall", p.checkpoint_snapshot_s);
  if (measured(p.checkpoints > 0, p.checkpoint_persist_s)) add("checkpoint_persist", p.checkpoint_persist_s);
  base::Json stages;
  for (const char* k : {"detection", "diagnosis", "self_check", "eviction", "restart", "checkpoint_stall", "checkpoint_persist",
                        "checkpoint_load", "catch_up"}) {
    const auto it = sums.find(k);
    stages[k] = it == sums.end() ? base::Json(nullptr) : base::Json(it->second.first / it->second.second);
  }
  j["stages_s"] = stages;
  base::Json by_fault = base::Json::object();
  for (const auto& [k, v] : detection_by_fault) by_fault[k] = v.first / v.second;
  j["detection_by_fault_s"] = by_fault;
  j["checkpoints"] = p.checkpoints;
  j["checkpoint_bytes_per_rank"] = p.checkpoint_bytes_per_rank;
  j["checkpoint_bytes_total"] = p.checkpoint_bytes_total;
  j["false_positives"] = false_positives;
  j["missed_faults"] = missed;
  j["faults"] = faults;
  base::Json losses = base::Json::array();
  for (double l : p.losses) losses.push_back(std::isfinite(l) ? base::Json(l) : base::Json(nullptr));
  j["losses"] = losses;
  j["reruns_identical"] = p.reruns_identical;
  j["events"] = p.events;
  return base::with_header(j);
}

bool write_profile(const std::string& path, const RecoveryProfile& p) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  return base::write_text_atomically(path, profile_json(p).dump(2) + "\n");
}

}  // namespace megascale::robust
