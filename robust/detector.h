// robust/detector.h: what the driver reads from Redis about each rank, and the
// detectors that decide a rank or the job is in trouble.
//
// defines: RankStatus, parse_rank_status, finished_training, gone_ranks,
//          Detection, SlowDetector, StallDetector
//
// Detectors (MegaScale NSDI'24 section 4: heartbeats with status, error
// keywords in logs, and for silent faults the training progress and per-rank
// timings):
//   - a rank's process is gone (its executor reports it) or its heartbeat is
//     older than heartbeat_period_s x heartbeat_misses: the driver (driver.h);
//   - an error keyword in a log: robust/diagnosis.h scan_log_line;
//   - StallDetector: no rank's step advanced and no traffic moved for
//     step_stall_s (a hang or a silent traffic stop);
//   - SlowDetector: a rank whose compute time exceeds slow_factor x the median
//     of the other ranks' in slow_steps consecutive steps; and a slowdown of
//     the whole job (every rank alike, so no rank stands out from the others),
//     against the job's own baseline: the compute of its first healthy steps
//     in this attempt.
//
// Thread-safety: plain values; one thread at a time per detector.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace megascale::robust {

// One rank's heartbeat hash (robust/heartbeat.h), parsed. Absent fields are 0 / "".
struct RankStatus {
  int rank = -1;
  bool present = false;        // the hash exists
  int pid = 0;
  int node = -1;
  int attempt = 0;
  std::string phase;           // init | training | done
  int64_t step = 0;            // steps completed
  int64_t start_step = 0;      // where this attempt resumed
  double time_s = 0;           // of the heartbeat
  double ready_at_s = 0;       // when training began in this attempt
  double load_s = 0;           // checkpoint load in this attempt
  double storage_wait_since_s = 0;  // waiting for its checkpoint write since (0: not waiting)
  std::string coll_op, coll_group, coll_state;
  int64_t coll_seq = 0;
  int coll_peer = -1;
  std::map<std::string, int64_t> seq_by_group;
  uint64_t bytes_sent = 0, bytes_recv = 0;
  std::vector<std::pair<int64_t, double>> compute_hist;  // (step, compute_s)
  int64_t ckpt_count = 0;
  double ckpt_snapshot_total_s = 0, ckpt_persist_total_s = 0;
  uint64_t ckpt_bytes = 0;
};

RankStatus parse_rank_status(int rank, const std::map<std::string, std::string>& hash);

// A rank whose process may end without a fault: its last heartbeat says
// "done", or that it completed all `steps` (the final heartbeat, sent after the
// last step, can be lost to a Redis timeout on a loaded machine). A resumed
// attempt that loaded the final checkpoint trains nothing and is done at once.
bool finished_training(const RankStatus& status, int64_t steps);

// The ranks executor `node`'s report (the hash ms:<job>:node:<n>, keys.h)
// says are gone in attempt `attempt`: alive:<r> = 0 about the process of rank
// r's heartbeat in this attempt (`statuses[r]`, pid:<r> equal to its pid), r
// hosted on `node` (`host_of_rank[r]`), and r not finished_training. A field
// of an earlier attempt can outlive it in the hash (HSET adds fields; a report
// about the killed rank may land just after the relaunch cleared the hash):
// it names another process, or a rank now on another node, and is ignored.
std::vector<int> gone_ranks(const std::map<std::string, std::string>& report, int node, int attempt,
                            const std::vector<int>& host_of_rank, const std::vector<RankStatus>& statuses,
                            int64_t steps);

// "c3[0,1]" -> {0, 1}; empty when the name is not of that form.
std::vector<int> group_members(const std::string& group);

struct Detection {
  std::string kind;    // process_gone | heartbeat_missed | log_error | job_exited | stall | slow | redis_down
                       // (uniform_slowdown: reported by the driver, never a restart)
  double at_s = 0;     // wall clock
  int rank = -1;       // the rank it points at, when it does
  std::string detail;
};

class SlowDetector {
 public:
  SlowDetector(double factor, int consecutive_steps, int ranks);
  // Adds what a heartbeat carried; repeated entries are ignored.
  void add(int rank, const std::vector<std::pair<int64_t, double>>& compute_hist);
  // The first rank slow for `consecutive_steps` steps in a row among the steps
  // every rank has reported, with a description; nullopt when none.
  std::optional<std::pair<int, std::string>> slow_rank() const;
  // The job's baseline compute per step: the median, over the first
  // kBaselineSteps steps every rank reported after the first one of the
  // attempt (warm-up: allocation, caches), of the median over the ranks;
  // nullopt until that many steps are in.
  static constexpr int kBaselineSteps = 3;
  std::optional<double> baseline_s() const;
  // A slowdown of every rank alike: the fastest rank's compute exceeds
  // factor x the baseline (and by at least the noise floor) in
  // kUniformStepsFactor x `consecutive_steps` steps in a row after the
  // baseline's; a description, nullopt when none. No rank is named: nothing
  // stands out to evict.
  // REQUIRES: the first kBaselineSteps + 1 steps of the attempt are healthy
  // (a slowdown already there is the baseline).
  std::optional<std::string> uniform_slowdown() const;
  // Twice the per-rank detector's run: a pause of the whole host (a shared
  // VM's CPU steal, another tenant's burst) slows every rank alike for a few
  // steps, and once it passed for slow_steps steps of tens of ms on this
  // project's 2-core CI machine (a fault-matrix false positive). Nothing is
  // evicted on this finding, so waiting longer costs no recovery time
  // (assumption: a real job-wide slowdown lasts much longer than a pause).
  static constexpr int kUniformStepsFactor = 2;
  void clear() { by_step_.clear(); }

 private:
  double factor_;
  int steps_;
  int ranks_;
  std::map<int64_t, std::map<int, double>> by_step_;
};

class StallDetector {
 public:
  explicit StallDetector(double stall_s) : stall_s_(stall_s) {}
  // Progress seen at wall time `now_s`: the largest step and the traffic sum.
  void observe(double now_s, int64_t max_step, uint64_t traffic_bytes);
  // Seconds since anything moved, when above stall_s; nullopt otherwise.
  std::optional<double> stalled(double now_s) const;
  void reset(double now_s);

 private:
  double stall_s_;
  int64_t step_ = -1;
  uint64_t traffic_ = 0;
  double last_move_s_ = 0;
};

}  // namespace megascale::robust
