// model/schedule.h: the Schedule IR (DESIGN.md, contract 2).
//
// For each pipeline rank, the ordered list of operations of one iteration:
// forward/backward of (micro-batch, model chunk), point-to-point send/recv of
// activations and gradients, data-parallel gradient reduce-scatter / parameter
// all-gather per chunk, optimizer step, each with explicit dependencies.
// TP/SP collectives live inside a layer: every Forward/Backward op runs the
// layer program (model/layer_program.h) once per layer of its chunk, and the
// Schedule carries that program so consumers see every collective.
//
// The order of Forward/Backward ops is Megatron-LM's (megatron/core/pipeline_
// parallel/schedules.py), summarised in ../shared/REFERENCE.md:
//   1F1B:        warm-up w = min(M, P-r-1) forwards, then 1F1B, then cool-down.
//   interleaved: table of (micro-batch, chunk) built from groups of P
//                micro-batches, every chunk over the group; warm-up
//                w = min(M*V, 2*(P-r-1) + (V-1)*P); forward k = table[k],
//                backward k = (table[k].mb, V-1-table[k].chunk).
// The simulator (sim/) times this IR and the engine (engine/) executes it;
// neither invents its own order.
//
// Dependencies: `deps` lists indices of earlier ops on the same rank that must
// finish before the op starts. Cross-rank dependencies are expressed by p2p
// pairs: a Recv op names its matching Send by (peer rank, index in the peer's
// list). Ops on one stream of one rank run in list order.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/layer_program.h"

namespace megascale::model {

enum class OpKind {
  kDataLoad,         // read + preprocess this rank's micro-batches (when not async)
  kForward,          // forward of (microbatch, chunk): all layers of the chunk
  kBackward,         // backward of (microbatch, chunk)
  kSendActivation,   // to the next pipeline stage (or rank 0 of the next chunk)
  kRecvActivation,   // from the previous stage
  kSendGradient,     // to the previous stage
  kRecvGradient,     // from the next stage
  kDpAllGather,      // parameters of one chunk (ZeRO >= 1) across the DP group
  kDpReduceScatter,  // gradients of one chunk across the DP group (ZeRO >= 1)
  kDpAllReduce,      // gradients of one chunk (ZeRO 0)
  kOptimizerStep,    // update this rank's (shard of the) parameters
};

enum class Stream {
  kCompute,  // kernels; blocking communication is placed here too
  kTpComm,   // TP/SP collectives that overlap compute (inside layer programs)
  kPpSend,   // asynchronous sends (pp_overlap)
  kPpRecv,   // asynchronous receives (pp_overlap)
  kDpComm,   // data-parallel collectives
};

const char* to_string(OpKind k);

// Kinds of op: a pipeline send / receive; a data-parallel collective.
inline bool is_send(OpKind k) { return k == OpKind::kSendActivation || k == OpKind::kSendGradient; }
inline bool is_recv(OpKind k) { return k == OpKind::kRecvActivation || k == OpKind::kRecvGradient; }
inline bool is_dp_collective(OpKind k) {
  return k == OpKind::kDpAllGather || k == OpKind::kDpReduceScatter || k == OpKind::kDpAllReduce;
}
const char* to_string(Stream s);

struct Op {
  OpKind kind = OpKind::kForward;
  Stream stream = Stream::kCompute;
  int microbatch = -1;     // -1 when not about one micro-batch
  int chunk = -1;          // model chunk (virtual stage) on this rank, -1 if none
  int peer = -1;           // p2p: the other pipeline rank
  int match = -1;          // Recv: index of the matching Send in peer's op list
  int64_t bytes = 0;       // bytes moved per GPU (p2p message, DP shard traffic)
  std::vector<int> deps;   // indices of earlier ops on this rank
  // Share of the work this op carries: 1, or 1/B for the B pieces of a bucketed
  // chunk (dp_buckets): a piece of a Forward / Backward runs that share of the
  // (micro-batch, chunk) pass; a DP op moves that share of the chunk's payload.
  double fraction = 1.0;
};

struct RankSchedule {
  int pp_rank = 0;
  std::vector<Op> ops;
};

// Inputs of the schedule builder.
struct ScheduleOptions {
  int pp = 1;               // P
  int vpp = 1;              // V
  int microbatches = 1;     // M per data-parallel replica
  int layers = 1;           // total transformer layers L, split as model/pipeline_layout.h
  int first_stage_layers = 0;  // the first / last stage's layers, 0 = even (L % (P*V) == 0)
  int last_stage_layers = 0;
  // A free-form layout's layers per virtual stage (ParallelConfig::pipeline_chunk_layers).
  std::shared_ptr<const std::vector<int>> custom_chunk_layers;
  int zero_stage = 1;       // 0: DP all-reduce; 1,2: RS + AG per chunk; 3: AG per use
  int dp = 1;               // no DP ops when dp == 1
  bool pp_overlap = false;  // false: p2p blocking on the compute stream (Megatron
                            // batched isend/irecv + wait); true: async streams
  bool dp_overlap = false;  // false: all RS after the last backward, AG after the
                            // optimizer step; true: per-chunk RS as soon as the
                            // chunk's last backward ends, AG prefetched in need order
  // With dp_overlap: false keeps the AGs after the optimizer step
  // (Optimizations::dp_overlap_param_gather).
  bool dp_overlap_param_gather = true;
  // DP buckets per chunk (Megatron-Core's overlap_grad_reduce / overlap_param_gather,
  // with dp_overlap and ZeRO 0-2): the chunk's last Backward runs as B pieces in
  // reverse layer order, each piece's bucket reduced as soon as it ends; the
  // chunk's first Forward runs as B pieces, piece b waiting for bucket b's
  // all-gather (prefetched in need order). 1: one collective per chunk.
  int dp_buckets = 1;
  bool data_pipeline = false;  // false: a DataLoad op opens each rank's list
  int64_t activation_bytes = 0;    // p2p message per (micro-batch, chunk boundary)
  int64_t dp_bytes_per_chunk = 0;  // DP collective payload per chunk per GPU
};

struct Schedule {
  ScheduleOptions options;
  std::vector<RankSchedule> ranks;  // indexed by pipeline rank, size P
  LayerProgram layer_forward;       // run once per layer inside every Forward
  LayerProgram layer_backward;      // run once per layer inside every Backward

  // Layers of chunk c of pipeline rank r, and the first global layer index it
  // holds: c*L/V + r*L/(P*V) on even stages (Megatron-LM's interleaved
  // assignment; model/pipeline_layout.h for uneven ones).
  int chunk_layers(int pp_rank, int chunk) const;
  int first_layer(int pp_rank, int chunk) const;
};

// The (microbatch, chunk) of the k-th forward of pipeline rank r (k in 0..M*V-1).
struct MicroChunk {
  int microbatch;
  int chunk;
};
MicroChunk forward_item(int k, const ScheduleOptions& o);
MicroChunk backward_item(int k, const ScheduleOptions& o);
// Warm-up forwards of rank r.
int warmup_forwards(int pp_rank, const ScheduleOptions& o);

// Builds the per-rank op lists. Throws std::invalid_argument for invalid options
// (sizes < 1, layers that model/pipeline_layout.h cannot split, V > 1 with P == 1 or M % P != 0, ZeRO stage
// outside 0..3, negative byte counts). Layer programs are left empty; see
// model/job_schedule.h for the scenario-level builder that fills them.
Schedule build_schedule(const ScheduleOptions& options);

// "F0.0 F1.0 ... B7.0": the compute order of one rank (Forward/Backward only),
// as "F<mb>.<chunk>" / "B<mb>.<chunk>" separated by spaces.
std::string compute_order(const RankSchedule& rank);

}  // namespace megascale::model
