// engine/pipeline_executor.h: runs one training iteration of one rank by
// executing its Schedule IR op list (model/schedule.h) — the same list the
// simulator times — with real kernels and real communication.
//
// defines: ExecutorOptions, StepResult, PipelineExecutor.
//
// Per rank (coordinates from engine/process_groups.h) it owns the V model chunks
// of its pipeline rank (engine/model_chunk.h, Megatron-LM's interleaved layer
// assignment) and one ZeRO optimizer per chunk (engine/optimizer.h). Ops:
//   DataLoad            the replica's batch is already in memory (the node loader
//                       prefetched it); recorded for the trace
//   Forward/Backward    ModelChunk::forward/backward of (micro-batch, chunk);
//                       with tp_overlap (SP, tp > 1) the layers fuse their TP
//                       all-gathers / reduce-scatters with their GEMMs
//                       (engine/layers.h, tp_gather_gemm)
//   Recv*               MPI-style irecv posted at the op's position; waited
//                       there when the op is on the compute stream (Megatron's
//                       blocking p2p), or just before the op that consumes it
//                       when it is on an async stream (pp_overlap)
//   Send*               isend posted right after the producing compute, never
//                       waited there (eager semantics, as model/replay.h); all
//                       sends are waited at the end of the iteration
//   DpReduceScatter(c)  ZeRO: the chunk's flat gradient buffer reduce-scattered
//                       over the DP group into this rank's shard (the chunk is the
//                       bucket; with dp_overlap it is posted non-blocking as
//                       soon as the chunk's last backward ends (Comm::
//                       ireduce_scatter_sum: on NCCL it runs beside the next
//                       backward) and waited by the optimizer step, else it
//                       runs after the final backward)
//   DpAllReduce(c)      ZeRO-0: the whole gradient buffer all-reduced
//   OptimizerStep       global-norm clipping over all chunks, then each chunk's
//                       optimizer updates its shard of the parameters
//   DpAllGather(c)      the updated parameter shards all-gathered (after the step,
//                       or prefetched at the start of the next iteration with
//                       dp_overlap: posted non-blocking, waited by the chunk's
//                       first forward). Every non-blocking DP collective is
//                       also waited at the end of the step. On NCCL these run
//                       on the DP communicator's stream beside compute and TP /
//                       PP traffic on other communicators, in the same order on
//                       every rank of a group (the Schedule IR's), which is the
//                       concurrency Megatron-LM's overlap_grad_reduce relies on
// The loss of a step is the mean over the global batch: every micro-batch's
// backward starts from d loss = 1 / (M * DP), and the DP reduction sums.
//
// Every op is timed (engine/trace.h) on its stream, with the micro-batch and
// chunk of the IR; layer-level kernels and TP collectives arrive through the
// chunks' OpObserver.
//
// Thread-safety: one executor per rank, driven by that rank's thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engine/comm.h"
#include "engine/data_loader.h"
#include "engine/device.h"
#include "engine/model_chunk.h"
#include "engine/optimizer.h"
#include "engine/process_groups.h"
#include "engine/trace.h"
#include "model/config.h"
#include "model/schedule.h"

namespace megascale::engine {

struct ExecutorOptions {
  model::ModelConfig model;
  model::ParallelConfig parallel;       // tp, pp, vpp, dp, micro_batch, global_batch, SP, zero_stage
  model::Optimizations optimizations;   // tp_overlap, pp_overlap, dp_overlap, data_pipeline, optimizer
  OptimizerOptions optimizer;           // kind is taken from optimizations.optimizer
  uint64_t seed = 1234;                 // parameter initialisation
};

struct StepResult {
  double loss = 0;          // mean over the global batch, identical on every rank
  double grad_norm = 0;     // global gradient norm before clipping
  bool skipped = false;     // non-finite gradient: no update
};

class PipelineExecutor {
 public:
  // Collective over `groups.world()` only through the communicators used later;
  // builds the chunks and optimizers. Throws std::invalid_argument for a layout
  // the engine cannot run (ZeRO-3, recomputation, groups that do not match
  // options.parallel).
  PipelineExecutor(const ExecutorOptions& options, ProcessGroups& groups, Device& device,
                   TraceRecorder* trace = nullptr);
  ~PipelineExecutor();

  // One iteration on this replica's batch (batch.samples == M * micro_batch).
  StepResult step(const Batch& batch, double lr);

  // Makes every chunk's full parameter buffer current (all-gathers the shards
  // when the last step left the all-gather to the next iteration's prefetch).
  // Collective over the DP group. Call before reading parameters or saving.
  void sync_parameters();

  const model::Schedule& schedule() const { return schedule_; }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  // The optimizer state is sharded over DP (ZeRO 1-2 with dp > 1); else every
  // DP rank holds all of it.
  bool optimizer_state_sharded() const { return options_.parallel.zero_stage >= 1 && options_.parallel.dp > 1; }
  ModelChunk& chunk(int c) { return *chunks_[c]; }
  ShardedOptimizer& optimizer(int c) { return *optimizers_[c]; }
  ShardRange shard(int c) const;

 private:
  struct Pending;  // outstanding p2p transfers of one iteration

  void run_op(int index, const model::Op& op, const Batch& batch, double lr, Pending& pending,
              StepResult& result);
  int p2p_tag(model::OpKind kind, int microbatch, int sender_chunk) const;
  void clip_and_step(double lr, StepResult& result);
  std::unique_ptr<Request> reduce_gradients(int c, bool all_reduce);
  std::unique_ptr<Request> gather_parameters(int c);

  ExecutorOptions options_;
  ProcessGroups& groups_;
  Device& device_;
  TraceRecorder* trace_;
  model::Schedule schedule_;
  int microbatches_ = 0;
  std::vector<std::unique_ptr<ModelChunk>> chunks_;
  std::vector<std::unique_ptr<ShardedOptimizer>> optimizers_;
  std::vector<DeviceBuffer> grad_shards_;         // per chunk, this rank's reduced shard (device)
  std::vector<bool> params_stale_;                // per chunk: shards not yet all-gathered
  std::unique_ptr<OpTimer> timer_;       // device markers for the trace (GPU); null on the CPU
  std::unique_ptr<OpObserver> observer_;
};

}  // namespace megascale::engine
