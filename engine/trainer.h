// engine/trainer.h: a whole training run on one rank: data, executor, checkpoints,
// per-step reports and the trace.
//
// defines: TrainOptions, StepReport, Trainer, cpu_gemm_peak_flops.
//
// Every rank of the job constructs a Trainer over the same world communicator and
// calls run(); the ranks agree on everything through the communicators (process
// groups built TP -> PP -> DP, one node-local data reader sharing batches through
// shared memory, checkpoints with a completion marker).
//
// MFU on CPU: model FLOPs (model/op_cost.h model_flops_per_iteration, the same
// formula as the simulator) over step time x min(processes, cores) x the
// profile's peak_tflops (the scenario's cpu profile, model/profile.h: the
// fastest single-core Device::matmul `megascale calibrate micro` measured):
// the fraction of "what this machine's GEMM can do" that the step achieves.
//
// Thread-safety: one Trainer per rank, used by that rank's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/comm.h"
#include "engine/device.h"
#include "engine/device_factory.h"
#include "engine/optimizer.h"
#include "engine/watchdog.h"
#include "model/config.h"

namespace megascale::engine {

// The loss became NaN or infinite: the run stops on every rank at once, before
// that step's state is checkpointed (`megascale train` exits 1).
class TrainingDiverged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainOptions {
  int steps = 10;
  double learning_rate = 1e-3;
  uint64_t seed = 1234;           // parameters and data sampling
  std::string data;               // dataset path; empty: the built-in synthetic corpus
  std::string work_dir = "/tmp/megascale";  // where the synthetic corpus is made
  std::string checkpoint_dir;     // empty: no checkpoints
  int checkpoint_every = 0;       // steps; 0: never
  bool resume = true;             // load the latest complete checkpoint when present
  std::string trace;              // path prefix: writes PREFIX.json and PREFIX.csv; empty: none
  OptimizerOptions optimizer;     // betas, eps, weight decay, clipping (kind from scenario)
  std::string job_name = "job";   // names the shared-memory segment of the loader
  // Watchdog: when no step finishes on this rank for this many seconds (a peer
  // rank stopped or hung, so a collective never completes), the rank says so on
  // stderr and exits 1, which makes mpirun stop the job. 0 = off.
  double watchdog_s = 300;
  // An already running watchdog that run() reports its steps to, in place of
  // one of its own from watchdog_s (not owned): `megascale-train` arms it
  // before MPI_Init so that start-up is watched too (engine/watchdog.h).
  Watchdog* watchdog = nullptr;
  // The backend ("cpu" or "cuda") and, on CUDA, the GEMM precision
  // (engine/device_factory.h). Used when the Trainer is given no Device.
  DeviceOptions device;
  // Checkpoints are two-stage (engine/checkpoint.h): the step stalls only to
  // copy the state to host memory; a background thread writes the shard, and
  // at the first step end where every rank's write ended rank 0 writes the
  // marker (the last one at the end of run()). Called on every rank once a
  // checkpoint is complete: the step, the seconds the step stalled (the
  // snapshot, plus waiting for the previous checkpoint's write when it had
  // not ended), the seconds the background write of this rank's shard took
  // (off the critical path), and this rank's shard bytes. Optional.
  std::function<void(int64_t step, double snapshot_s, double persist_s, uint64_t shard_bytes)> on_checkpoint;
  // Called on every rank when the stall of the checkpoint of step `step`
  // ended (the snapshot is handed to the background writer), before the next
  // step: robust/heartbeat.h leaves the stall out of that step's compute.
  // Optional.
  std::function<void(int64_t step)> on_save_end;
  // Called on every rank at the start of each step (1-based), inside the
  // step's timed region (StepReport::rank_step_s): robust/heartbeat.h injects
  // the slow fault here, as extra compute of the step. Optional.
  std::function<void(int64_t step)> on_step_begin;
  // Called with true before this rank blocks until its checkpoint write ended
  // (the previous write at a new save when it has not ended, or the last one
  // at the end of run()), and with false after: a stall then is the storage's
  // (robust/heartbeat.h reports it). Optional.
  std::function<void(bool waiting)> on_storage_wait;
};

struct StepReport {
  int64_t step = 0;          // 1-based step just completed
  double loss = 0;
  double grad_norm = 0;
  double step_time_s = 0;    // wall time of the step (world rank 0's clock)
  double rank_step_s = 0;    // this rank's own wall time of the step (no data wait)
  double tokens_per_s = 0;
  double mfu = 0;            // see header comment
};

// Single-threaded Eigen SGEMM FLOP/s on this machine (512^3, best of 3).
double cpu_gemm_peak_flops();

// The MFU denominator per core: the scenario's cpu profile's peak_tflops, in
// FLOP/s. Throws std::invalid_argument when the profile is not a cpu profile.
double peak_flops_of(const model::Scenario& s);
// The MFU denominator per process for `device`: peak_flops_of(s) on "cpu"; on
// "cuda" the scenario's GPU profile's peak_tflops (the dense bf16 peak, e.g.
// 989 TFLOP/s for H200-SXM-141GB, whatever the GEMM precision), per GPU.
double peak_flops_for(const model::Scenario& s, const std::string& device);

class Trainer {
 public:
  // Collective over `world` (size == tp*pp*dp); `node` groups the ranks that
  // share one machine (one of them reads the data). Throws std::invalid_argument
  // for bad options (naming the field, e.g. "TrainOptions.learning_rate: ...",
  // checked on every rank before any collective) or a layout the engine cannot
  // run, DatasetError / CheckpointError for bad files (on every rank: a
  // dataset only the node's reader opens still fails the others as a
  // DatasetError naming the file). `device`: the backend to run on (not owned;
  // on CUDA `world` must then be a Comm that moves its memory, e.g. an
  // NcclComm over it); nullptr makes one from options.device.
  Trainer(const model::Scenario& scenario, const TrainOptions& options, Comm& world, Comm& node,
          Device* device = nullptr);
  ~Trainer();

  // Runs steps from the resumed step (or 0) up to options.steps; calls `on_step`
  // on every rank after each step (world rank 0 usually prints).
  void run(const std::function<void(const StepReport&)>& on_step);

  // The first step run() will execute (after a resume, the checkpoint's step).
  int64_t start_step() const;
  // Seconds the constructor spent loading the checkpoint it resumed from (0:
  // no resume).
  double checkpoint_load_s() const;
  // Flat parameters of every chunk of this rank, concatenated (after a sync).
  std::vector<float> parameters();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace megascale::engine
