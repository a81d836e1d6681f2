// sim/variability.h: stragglers and per-step jitter of compute speed, and which
// data-parallel replicas the event simulation must run because of them.
//
// defines: StragglerSpec, VariabilityOptions, kDefaultJitterSigma, StepFactors,
//          Variability, ReplicaChoice, choose_replicas
//
// What it models
// --------------
// A GPU's forward/backward compute time in step k is its nominal time times
//   speed factor (exp(gpu_sigma * z_g), z_g ~ N(0, 1) drawn once per GPU: the
//   persistent spread of identical GPUs, model::HardwareConfig::gpu_speed_sigma)
//   x straggler factor (StragglerSpec::factor if the GPU, or its machine, is a
//   straggler in step k; else 1)  x  jitter (exp(sigma * z), z ~ N(0, 1) drawn
//   per (step, machine): a lognormal with median 1).
// The stragglers are the listed GPUs plus `machine_fraction` of the machines
// (servers of gpus_per_node GPUs) drawn at random, once for the whole run or
// again every step (per_step). MegaScale (NSDI'24 section 5 / REFERENCE.md):
// about 0.5% of machines were computational stragglers, ~10% slower forward.
//
// A tensor-parallel group runs at the pace of its slowest GPU (its collectives
// synchronise every layer), so the factor of pipeline rank r of replica d is
// the maximum over its TP ranks' GPUs. Replicas with the same factor vector
// behave identically (DESIGN.md: exploit symmetry), so the simulator runs one
// of each distinct vector; when there are more than it can afford (jitter makes
// every replica distinct) it runs the ones most likely to gate the step,
// ranked by max_r factor[d][r] x busy_r (the steady state of a pipeline runs at
// its slowest stage's pace); replicas only interact through the DP
// collectives, where the slowest gates everyone (the paper's observation).
// The choice is exact when every replica left out is at least as fast, on every
// pipeline rank, as some simulated one (it then reaches every DP collective no
// later); ReplicaChoice::exact says whether that holds.
//
// Default jitter sigma: 1% (kDefaultJitterSigma), an assumed order of magnitude
// of step-to-step compute-time variation of a healthy GPU; not measured here
// and not fitted to the paper (the calibrate command is meant to replace it).
//
// Randomness: splitmix64 of (seed, step, machine) and Box-Muller, so every
// factor is reproducible on any platform and independent of the order in
// which it is asked for.
//
// Thread-safety: Variability is immutable after construction; the free
// functions are pure.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace megascale::sim {

inline constexpr double kDefaultJitterSigma = 0.01;

struct StragglerSpec {
  std::vector<int> gpus;        // global GPU ranks slow in every step
  double machine_fraction = 0;  // plus round(fraction x machines) random machines
  double factor = 1.1;          // compute time multiplier of a straggler (>= 1)
  bool per_step = false;        // draw the random machines again every step
};

struct VariabilityOptions {
  StragglerSpec stragglers;
  double jitter_sigma = 0;  // 0 = no jitter
  double gpu_sigma = 0;     // persistent per-GPU speed spread; 0 = identical GPUs
  uint64_t seed = 1;
};

// Compute-time factors of one step.
struct StepFactors {
  int dp = 0, pp = 0;
  std::vector<double> group;              // [d * pp + r]: (replica d, pipeline rank r)
  std::vector<int> straggler_machines;    // slow machines in this step, ascending
  double factor(int replica, int pp_rank) const { return group[replica * pp + pp_rank]; }
};

class Variability {
 public:
  // Throws std::invalid_argument for a GPU rank outside the cluster, a factor
  // < 1 or not finite, a fraction outside [0, 1], or a negative sigma.
  Variability(const model::Scenario& s, const VariabilityOptions& o);

  StepFactors step(int step) const;
  // True when every factor of every step is 1 (no stragglers, no jitter, no
  // GPU speed spread).
  bool uniform() const;
  int machines() const { return machines_; }

 private:
  std::vector<int> random_machines(int step) const;

  model::ParallelConfig p_;
  int gpus_per_node_;
  int machines_;
  VariabilityOptions o_;
  std::vector<int> fixed_random_;  // drawn once when !per_step
  std::vector<double> gpu_speed_;  // per GPU, persistent (empty when gpu_sigma = 0)
};

struct ReplicaChoice {
  std::vector<int> replicas;  // DP indices to simulate, most gating first
  // replica_of[d] = index into `replicas` of a simulated replica with the same
  // factors as d, or -1 when d has no simulated twin.
  std::vector<int> replica_of;
  int distinct = 0;   // distinct factor vectors among all replicas
  bool exact = true;  // every replica left out is dominated by a simulated one
};

// Chooses at most `max_replicas` (>= 1) replicas to simulate; `busy_s[r]` is
// pipeline rank r's nominal forward+backward busy time.
ReplicaChoice choose_replicas(const StepFactors& f, const std::vector<double>& busy_s,
                              int max_replicas);

}  // namespace megascale::sim
