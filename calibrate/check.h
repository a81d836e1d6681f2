// calibrate/check.h: `megascale calibrate check`: a traced engine run of a
// scenario (run now, or recorded earlier, on any machine) against the
// event-level simulation of the same Schedule IR on the scenario's (or a
// given) profile, cpu or GPU.
//
// defines: CheckOptions, RecordedRun, read_recorded_run, CheckResult,
//          run_check, check_report_stems, check_json, check_markdown
//
// Measured: the engine's own per-step times (world rank 0's clock, `megascale
// train --json`), of which the first `warmup` steps are left out; the
// steady-state step is their median and the spread (max - min) / median. The
// engine's trace gives every op (calibrate/trace_compare.h). A run is a
// directory holding train.jsonl (the engine's `--json` stdout) and trace.csv
// (its merged trace): run_check records one there (mpirun megascale-train,
// one process per rank; the engine picks CPU or CUDA from train.device), or,
// with CheckOptions::from_run, reads one recorded earlier: by scripts/gpu-check.sh
// step 6 on a GPU machine, or by an earlier `calibrate check --run-dir`.
//
// Predicted: one step of the event-level simulation (sim/job_sim.h) with
// per-layer slices, as `megascale simulate --fidelity event --trace-layers`
// runs it (sim/event_run.h). On a cpu profile: the CPU engine's own measured
// kernels (model/engine_ops.h) and, on the analytical links, the profile's
// measured MPI collectives. On a GPU profile: the GPU's op-cost model
// (model/op_cost.h: the profile's GEMM efficiency curve, e.g. one imported
// with `calibrate import --gemm-csv`, and its memory-bound kernels), and the
// scenario's fabric for collectives (none for one GPU).
//
// Where the CUDA engine (engine/cuda/) differs from the Megatron-LM kernels
// that model/op_cost.h describes (so a per-op error there is a finding, not
// noise): its bf16 GEMMs cast their fp32 inputs to bf16 in a workspace on
// every call (inside the GEMM's event; the --gemm-csv sweep times the same
// calls, casts included); activations stay fp32 (Megatron: bf16), so its
// LayerNorm, GeLU, bias-add and softmax kernels move twice the bytes modelled;
// master weights, gradients and AdamW state are fp32 in both, but the
// engine's optimizer is its own multi-tensor kernel; attention in bf16 is the
// cuBLAS explicit-scores path (full T x T products, twice the useful FLOPs,
// softmax passes through HBM) and in fp32 a CUDA-core flash kernel, both traced
// as the one kind `flash_attention` (engine/README.md): where the profile
// models the unfused core (attn_scores, softmax, attn_dropout, attn_context),
// those predicted kinds are summed under `flash_attention` to compare; and
// `data_load` is the profile's host data-loading time where
// optimizations.data_pipeline is off (the megatron preset), which the
// engine's in-memory synthetic loader does not spend.
//
// Thread-safety: run_check starts processes and writes files; one at a time.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"

#include "calibrate/trace_compare.h"
#include "model/config.h"
#include "model/trace_schema.h"

namespace megascale::calibrate {

struct CheckOptions {
  std::string profile;           // a profile file for the prediction ("" = the scenario's)
  double tolerance = 0.15;       // |predicted / measured - 1| allowed for the step time
  int steps = 0;                 // engine steps; 0 = the scenario's train.steps, at least warmup + 5
  int warmup = 2;                // leading steps left out
  std::string out_dir;           // where <scenario>.md / .svg / .json go ("" = none)
  std::string engine_binary;     // megascale-train
  // Where the engine's run is recorded (train.jsonl, trace.csv, engine.stderr;
  // kept); "" = a fresh temporary directory, removed after.
  std::string work_dir;
  // A recorded run's directory (train.jsonl, trace.csv): no engine run; its
  // own steps are used (`steps` must be 0).
  std::string from_run;
  std::vector<std::string> overrides;  // --set KEY=VALUE, for the engine and the simulation
};

// A recorded engine run, checked against the scenario it claims to be.
struct RecordedRun {
  std::string dir;
  std::vector<double> steps_s;             // train.jsonl's step_time_s, in order
  std::vector<model::TraceEvent> trace;    // trace.csv
};

// Reads DIR/train.jsonl (lines that are JSON objects with step_time_s; other
// lines are skipped) and DIR/trace.csv. Throws std::invalid_argument (bad
// input: `megascale` exits 2) naming the file and the reason: a missing directory or file, no step reports, a trace
// without Schedule IR events (no steps), or a run of another scenario (tokens
// per step != global_batch x seq_len; trace ranks other than the scenario's
// 0..gpus-1; layers beyond the model's; a rank's IR-op count that is not a
// whole number of steps of its Schedule IR op list; a step count that differs
// from train.jsonl's).
RecordedRun read_recorded_run(const std::string& dir, const model::Scenario& s);

struct CheckResult {
  std::string scenario_file, name, profile_name, profile_file;
  std::string device;                    // train.device: "cpu" or "cuda"
  bool engine_calls = false;             // the profile times the engine's own calls (a cpu or engine profile)
  std::string run_dir;                   // the recorded run ("" = a temporary one, removed)
  bool recorded = false;                 // read with from_run, not run now
  int processes = 0;
  std::vector<double> measured_steps_s;  // every step the engine reported
  double measured_step_s = 0;            // median over the steps after the warm-up
  double measured_spread = 0;            // (max - min) / median over them
  double predicted_step_s = 0;
  double error = 0;                      // predicted / measured - 1
  double tolerance = 0;
  bool pass = false;
  Comparison ops;
  std::string svg;                       // the timeline picture
  std::vector<std::string> files;        // what was written
};

// Throws model::ScenarioError for a bad scenario or profile, std::runtime_error
// when the engine fails (its exit status and last output lines in the message)
// std::invalid_argument for inconsistent options or an unusable run directory
// (read_recorded_run; the run just recorded is read back the same way).
CheckResult run_check(const std::string& scenario_file, const CheckOptions& o);

// Each scenario's report is OUT_DIR/<file stem>.md, .svg and .json: two files of
// one stem would overwrite the first one's report. Throws std::invalid_argument
// naming both before anything runs.
void check_report_stems(const std::vector<std::string>& scenario_files, const std::string& out_dir);

base::Json check_json(const CheckResult& r);
std::string check_markdown(const CheckResult& r);

}  // namespace megascale::calibrate
