// reliability/measured_recovery.h: `megascale plan --recovery-profile FILE`:
// the recovery times a real run measured (`megascale run`, robust/, writes
// results/recovery/<scenario>.json) in place of the assumptions.
//
// defines: MeasuredRecovery, load_recovery_profile, apply_measured_recovery,
//          mark_measured
//
// Mapping (profile key -> [recovery] input):
//   detection_by_fault_s.kill          -> error_report_s (a rank's death reaches the driver)
//   detection_by_fault_s.hang          -> anomaly_detect_s
//   detection_by_fault_s.traffic_stop  -> traffic_drop_detect_s
//   detection_by_fault_s.slow          -> slowdown_detect_s
//   stages_s.self_check                -> self_check_s (the self-checks on the
//                                         suspected nodes, robust/self_check.h);
//                                         without it, stages_s.diagnosis
//   stages_s.eviction                  -> replacement_s
//   stages_s.restart                   -> process_start_s
//   stages_s.checkpoint_stall          -> pcie_gbs = bytes per rank / stall
//   stages_s.checkpoint_persist        -> storage_write_gbs = all shards' bytes / persist
//   stages_s.checkpoint_load           -> storage_read_gbs = all shards' bytes / load
//   (all shards' bytes: checkpoint_bytes_total, else bytes per rank x ranks)
// Times carry over as they are; the checkpoint stages become bandwidths so the
// plan scales them to its own model's state. A stage the profile lacks (null:
// that run had no such fault) keeps its assumption. The figures are those of
// the machine and the (small) model that ran: a CPU run's checkpoint
// bandwidths are a local disk's, its restart a few processes'.
// A profile whose run did not finish ("completed": false: it gave up at
// max_restarts or stopped on the job's own error) still holds real
// measurements; they are used, and every label they replace says so, with
// the run's error.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "reliability/plan_inputs.h"

namespace megascale::reliability {

struct MeasuredRecovery {
  std::string path;
  // Empty when the run that wrote the profile finished (or the profile does
  // not say); else "did not finish: ERROR" (ERROR shortened to 160 characters).
  std::string run_outcome;
  // [recovery] key -> (value, what it came from, e.g. "stages_s.restart 0.41 s").
  std::map<std::string, std::pair<double, std::string>> values;
};

// Reads a recovery profile. Throws std::invalid_argument "FILE: KEY: reason"
// when the file cannot be read, is not JSON, lacks schema_version, stages_s,
// detection_by_fault_s, checkpoint_bytes_per_rank or ranks, or holds a value
// of the wrong type or a negative time.
MeasuredRecovery load_recovery_profile(const std::string& path);

// Sets the measured values in r.
void apply_measured_recovery(const MeasuredRecovery& m, model::RecoveryConfig* r);

// Relabels the assumptions `m` replaced: "measured (FILE: what)"; returns the
// assumption keys relabelled.
std::vector<std::string> mark_measured(const MeasuredRecovery& m, std::vector<Assumption>* assumptions);

}  // namespace megascale::reliability
