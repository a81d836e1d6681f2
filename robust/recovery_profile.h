// robust/recovery_profile.h: what one `megascale run` measured about its own
// recoveries, written to results/recovery/<scenario>.json.
//
// defines: FaultRecord, RecoveryProfile, profile_json, write_profile
//
// Per fault (wall-clock seconds, differences of the times recorded):
//   detection_s   injected (the rank's own record in Redis) -> the driver detects
//   diagnosis_s   detected -> the faulty rank and node named (including the
//                 self-check, when one ran)
//   self_check_s  the self-checks on the suspected node(s): request -> the
//                 executors' answers (robust/self_check.h); null when none ran
//                 (a dead rank, a refused checkpoint: the diagnosis is certain)
//   eviction_s    diagnosed -> the attempt's processes killed and reaped, the
//                 node marked bad and its slot given to a spare executor
//   restart_s     relaunched -> every rank ready to train, minus checkpoint load
//   checkpoint_load_s  the slowest rank's checkpoint load
//   catch_up_s    ready -> back at the step the fault interrupted (redoing the
//                 steps since the checkpoint)
//   resumed_s     injected -> the first step of the new attempt finished (time
//                 back to training)
// Checkpoints (two-stage, engine/checkpoint.h): stall (what the step waited:
// copying the state to host memory, plus the previous write when it had not
// ended) and persist (the background write of the shard, off the critical
// path), mean per checkpoint, slowest rank.
// `stages_s` holds the mean of each stage over the faults that had it, the
// figures `megascale plan --recovery-profile` reads
// (reliability/measured_recovery.h).
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"

namespace megascale::robust {

struct FaultRecord {
  std::string fault = "none";   // the injected fault; "none": nothing was injected (false positive)
  int rank = -1;                // injected at this rank ...
  int step = -1;                // ... during this step
  double injected_at_s = 0;
  std::string detected_by;      // detection kind (robust/detector.h)
  std::string detection_detail;
  double detected_at_s = 0;
  int diagnosed_rank = -1;
  int diagnosed_node = -1;
  std::string diagnosis;        // one line
  std::vector<std::string> chain;  // the wait-for report, for hangs
  bool diagnosis_right = false;
  double diagnosed_at_s = 0;
  double evicted_at_s = 0;
  int evicted_node = -1, replacement_node = -1;
  bool restarted = false;
  double relaunched_at_s = 0, ready_at_s = 0, checkpoint_load_s = 0, first_step_at_s = 0, caught_up_at_s = 0;
  // Self-checks on the suspected node(s) (robust/self_check.h), part of the
  // diagnosis: the seconds from the request to the answers, the report.
  bool self_check_ran = false;
  bool self_check_faulty = false;    // a suspected node failed its checks
  double self_check_s = 0;
  std::vector<std::string> self_check;
  long long resumed_from_step = -1;
  long long interrupted_step = -1;  // steps completed when the fault hit
  // Fired, but a recovery from another fault ended its attempt before it
  // could be detected: neither detected nor missed.
  bool superseded = false;
  std::vector<std::string> notes;
};

struct RecoveryProfile {
  std::string scenario, source;
  int ranks = 0, nodes = 0, spare_nodes = 0, steps = 0;
  double heartbeat_period_s = 0;
  int heartbeat_misses = 0;
  double step_stall_s = 0;
  std::string control_plane;    // "local processes" (+ Redis address)
  std::string node_kind = "local";  // what ran as a node: "netns" (robust/netns.h) | "local"
  // [recovery] nodes = "netns" asked, but namespaces could not be made here:
  // why (the run used local processes).
  std::string netns_unavailable;
  // Faults not injected, each with why (link_cut, node_down without namespaces).
  std::vector<std::string> skipped_faults;
  bool completed = false;
  std::string error;
  int attempts = 0;
  double wall_s = 0;
  std::vector<double> losses;   // per step (1-based step = index + 1); NaN where never seen
  bool reruns_identical = true; // every step run twice had the same loss bits
  std::vector<FaultRecord> faults;
  int checkpoints = 0;
  double checkpoint_snapshot_s = 0, checkpoint_persist_s = 0;
  uint64_t checkpoint_bytes_per_rank = 0;  // the largest rank's shard
  // All ranks' shards of one checkpoint together: less than per rank x ranks
  // when DP > 1, whose parameters are stored once per DP group
  // (engine/checkpoint.h load_checkpoint_one_reader).
  uint64_t checkpoint_bytes_total = 0;
  std::vector<std::string> events;  // the driver's log, timestamped
};

base::Json profile_json(const RecoveryProfile& p);
// Writes atomically (base/text_file.h); false when it cannot.
bool write_profile(const std::string& path, const RecoveryProfile& p);

}  // namespace megascale::robust
