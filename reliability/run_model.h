// reliability/run_model.h: a whole multi-week training run as a Monte Carlo of
// failures, detection, diagnosis, replacement, restart, lost work and
// checkpoints; its effective training time rate (ETTR = iterations x iteration
// time / wall time, MegaScale NSDI'24 section 5) and where the time went.
//
// One run: training proceeds in cycles of checkpoint_interval of training then a
// checkpoint stall (checkpoint_cycle_stall_s: an async save whose previous
// snapshot is not yet on storage waits for it first); failures arrive as a Poisson process (total rate of
// failure_model.h) plus the explicit faults. Per failure:
//  - link flap: shorter than link_flap_tolerance_s -> NCCL retransmits, training
//    waits the flap out (the checkpoint cycle pauses); longer -> a crash
//    (explicit NCCL error);
//  - detection delay: crash / failed flap: error_report_s x U(0.5, 1.5); node down:
//    heartbeat_period_s x heartbeat_misses + U(0, period); hang: anomaly_detect_s x
//    U(0.5, 1.5) with traffic anomaly detection, else nccl_timeout_s; RDMA traffic
//    drop: traffic_drop_detect_s x U(0.5, 1.5) with traffic anomaly detection (the
//    RDMA traffic monitor sees the NIC's traffic stop), else nccl_timeout_s;
//    slowdown: Exp(mean slowdown_detect_s), during which training runs
//    slowdown_factor slower (a second slowdown meanwhile changes nothing: the
//    job runs at its slowest machine's pace);
//  - diagnosis: the self-check suite (self_check_s); with probability
//    false_negative it misses the machine and manual_handling_s is added; with
//    probability false_positive a healthy machine is evicted too;
//  - eviction (hardware causes): a spare replaces each evicted machine
//    (replacement_s); with no spare left, wait for the earliest repaired one
//    (repair_s after its eviction);
//  - restart: process_start_s + comm_init_s(init, GPUs) + checkpoint load; the
//    work since the last checkpoint that reached storage is lost and redone
//    ("catch-up"; it is training time, so failures keep arriving during it).
// Failures while the job is down (failures.during_recovery, default on): the
// failure clock runs on wall time. A hardware failure arriving during detection,
// diagnosis, eviction or restart goes through its own detection, diagnosis and
// eviction from its arrival; the job restarts once both recoveries are done, so
// the downtime ends at max(current end, its arrival + its own recovery). One
// arriving after the restart began restarts the restart (counted as a restart).
// Software failures need the training code running, so none arrive while the
// job is down (Poisson thinning); a slowdown or a flap NCCL would survive that
// arrives while down costs nothing (the self-check before the restart finds a
// slow machine; the flap is over). With during_recovery off, the failure clock
// runs only while the job trains (Poisson, so memoryless: pending failures are
// shifted by the downtime). A straggler still undetected when another failure
// brings the job down is assumed found by that failure's self-check.
// "diagnosis" = detection + self-check (the paper's "detection + diagnostic
// tests"); manual handling is reported apart; "catch-up" = restart + redoing the
// lost work. Slow-down losses are subtracted before the last checkpoint
// (conservative by at most one slowdown's loss).
//
// Randomness: run i uses its own stream from (seed, i), and every random failure
// draws the same fixed sequence of numbers (explicit faults draw from a second
// stream), so two configurations compared with the same seed see common random
// numbers: with during_recovery on, the failures' wall-clock times do not depend
// on the recovery settings at all.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "reliability/failure_model.h"

namespace megascale::reliability {

// Everything one run needs, in seconds.
struct RunModel {
  double iteration_time_s = 1;
  double tokens_per_iteration = 0;
  int gpus = 1;
  std::array<double, kCauses> rate_per_s{};  // whole cluster, per cause
  model::FailureConfig failures;
  model::RecoveryConfig recovery;
  double checkpoint_stall_s = 0;
  double checkpoint_persist_s = 0;
  double init_s = 0;
  double load_s = 0;
  double horizon_s = 21 * 86400.0;
  double tokens = 0;

  double restart_s() const { return recovery.process_start_s + init_s + load_s; }
  // Training time lost per checkpoint: the staging stall, or, when the previous
  // snapshot is still on its way to storage as the next one is due, the wait for
  // it and then the staging: max(stall, persist - interval). One save is in
  // flight at a time (torchtitan's async checkpointer waits on the previous save's
  // future before it stages the next, components/checkpoint.py _async_wait); a
  // queue of snapshots in host memory would grow without bound when persisting
  // takes longer than a cycle.
  double checkpoint_cycle_stall_s() const;
  // Mean time between failures that interrupt the job (flaps NCCL survives excluded).
  double mtbf_s() const;
};

// From a scenario and its per-iteration time (model::estimate or sim/).
// REQUIRES: the layout is valid.
RunModel build_run_model(const model::Scenario& s, double iteration_time_s);

// Lost-time categories: one per Cause, then checkpoint stalls.
constexpr int kLossKinds = kCauses + 1;
const char* loss_name(int i);

struct RunOutcome {
  double ettr = 0;
  int restarts = 0;
  int failures = 0;        // including flaps NCCL survived
  double diagnosis_s = 0;  // sum over restarts
  int recovery_failures = 0;  // failures that arrived while the job was down
  double manual_s = 0;
  double catch_up_s = 0;
  double spare_wait_s = 0;  // recoveries held because no spare machine was left
  std::array<double, kLossKinds> lost_s{};
};

// Most failures one run may expect (total rate x horizon): each is an event of
// the simulation (~70 ns: BM_MonteCarlo's 7 us per 3-week run of ~100
// failures at 12,288 GPUs). A million covers a year on a million GPUs at
// Llama 3's per-GPU rates (~200k failures); beyond it the inputs are not a
// cluster's, and a run would take minutes to forever (an infinite rate).
inline constexpr double kMaxExpectedFailuresPerRun = 1e6;

// Total failure rate x horizon: the mean number of random failures in one run.
double expected_failures_per_run(const RunModel& m);

// Throws std::invalid_argument when expected_failures_per_run(m) is above
// kMaxExpectedFailuresPerRun (or not a number).
RunOutcome simulate_run(const RunModel& m, uint64_t seed, int run_index);

struct PlanResult {
  int runs = 0;
  double ettr_mean = 0, ettr_p5 = 0, ettr_p95 = 0;
  double restarts_mean = 0;
  double failures_mean = 0;
  double recovery_failures_mean = 0;  // of which arrived while the job was down
  double diagnosis_mean_s = 0;  // per restart
  double manual_mean_s = 0;     // per restart
  double catch_up_mean_s = 0;   // per restart
  double spare_wait_hours = 0;  // mean per run: waiting for a repaired machine (spare pool empty)
  double days_to_finish = 0;
  std::map<std::string, double> lost_hours_by_cause;  // mean per run
};

// Throws as simulate_run does.
PlanResult monte_carlo(const RunModel& m, int runs, uint64_t seed);

// Young (1974) / Daly (2006) first-order optimum: sqrt(2 x cost x MTBF).
double young_daly_interval_s(double checkpoint_cost_s, double mtbf_s);

struct SweepPoint {
  double interval_s = 0;
  double ettr_mean = 0;
  double ettr_p5 = 0, ettr_p95 = 0;  // over the runs, as PlanResult's
};
// ETTR per checkpoint interval (common random numbers across the values).
std::vector<SweepPoint> sweep_checkpoint_interval(const RunModel& m,
                                                  const std::vector<double>& intervals_s,
                                                  int runs, uint64_t seed);
// Geometric grid from lo to hi with `points` values.
std::vector<double> geometric_grid(double lo_s, double hi_s, int points);

}  // namespace megascale::reliability
