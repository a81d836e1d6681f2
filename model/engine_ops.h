// model/engine_ops.h: what the megascale engine's CPU device runs for each
// operator of model/op_cost.h, as calls the profile's measured tables time.
//
// defines: job_layer_operators, job_embedding_operators, job_output_operators,
// engine_step_calls, engine_rank_step_calls, engine_chunk_params, job_profile,
// busy_ranks
//
// The simulator predicts a real engine run (`megascale train`) from a cpu
// profile written by `megascale calibrate micro`, which times the engine's own
// kernels (engine/microbench.h). For that, each operator is the list of calls
// the engine makes inside its trace event (engine/transformer_layer.cc,
// embedding.cc, output_head.cc), named as the profile's tables name them:
//   linear (qkv, fc1, proj, fc2, logits): forward one GEMM "nt" (N x OC x K)
//     plus bias_add when the layer has a bias (qkv always; fc1 and fc2 with
//     GeLU); backward bias_grad, the weight gradient "tn" (OC x K x N) and the
//     input gradient "nn" (N x K x OC). Under SP (tp > 1) the layers' "nt"
//     (with its bias_add) and "nn" run per sequence shard: tp calls of N / tp
//     rows (engine/layers.h tp_gather_gemm / tp_gemm_reduce_scatter). The parallel block's qkv_fc1 and
//     proj_fc2 are two GEMMs each, as the engine runs them.
//   attention: one call per (sequence x query head), (seq, head dim, window).
//   LayerNorm, GeLU / SwiGLU, the residual add and bias: kernels by elements.
//   Head: cross_entropy (row max, partial sums, loss; backward) over N x V/tp;
//     the final LayerNorm's backward also zeroes its output (fill_zero).
//   Embedding: token lookup over N x C and learned positions over the local
//     sequence shard.
// Each operator also costs the profile's op_gap_us (host time between ops:
// the trace scope, the executor, the loops around the kernels), fitted.
//
// The engine differs from Megatron-LM on a GPU in ways that change bytes, not
// just times: everything is fp32 (activation_bytes 4, parameters gathered in
// fp32), p2p sends the whole (Tl x B x C) activation (no scatter-gather), and
// the output layer is a separate parameter (no tied-embedding all-reduce).
// model/estimator.h and sim/ read those from the profile (cpu kind).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "model/hardware.h"
#include "model/op_cost.h"

namespace megascale::model {

// Ranks of one machine that run at the same time: a job of G ranks with
// gpus_per_node R per machine keeps min(G, R) busy, at most the profile's cores.
int busy_ranks(const Scenario& s, const GpuProfile& gpu);

// More ranks on a machine than the profile's cores time-share them: each
// rank's compute stretches by ranks / cores (1 otherwise). A first-order
// model: MPI waits of ranks that are not scheduled are not modelled, so such
// predictions are optimistic (simulate says so).
double time_share(const Scenario& s, const GpuProfile& gpu);

// What one engine rank holds (pipeline rank `pp_rank`, by default 0, the
// busiest of even stages), bytes: fp32
// parameters and gradients of its chunks (the engine keeps the whole gradient
// buffer even under ZeRO-2), fp32 optimizer moments of its shard (LAMB also
// its update), and one layer's stash per micro-batch.
struct EngineMemory {
  double parameters = 0, gradients = 0, optimizer = 0, stash_per_layer = 0;
};
EngineMemory engine_memory(const Scenario& s, int pp_rank = 0);

// Bytes one engine rank keeps live across a step: parameters, gradients and
// optimizer moments of its chunks, the stashes of the micro-batches in flight
// (engine/transformer_layer.cc's layout) and the head's logits.
double engine_working_set_bytes(const Scenario& s);

// The fraction of a kernel's memory-resident operands (weights, stashes,
// outputs) that miss the machine's last-level cache: 1 - (cache share of a
// busy rank) / (working set), clamped to [0, 1]; 1 when the profile does not
// know its cache. A working set that fits reads warm; one many times the
// cache reads from memory.
double cold_fraction(const Scenario& s, const GpuProfile& gpu);

// The profile a job is timed with: hardware_profile(s) itself for GPUs; for a
// cpu profile a copy in *storage with busy_ranks, time_share and
// cold_fraction set for this job (its tables are shared, not copied).
const GpuProfile& job_profile(const Scenario& s, GpuProfile* storage);

// The operators of one layer / the embedding / the output head for this
// profile: model/op_cost.h's lists, with the engine's kernel calls attached
// when the profile is a cpu profile (whose attention is always one fused
// kernel, efficient_operators or not). On a GPU profile each list ends with
// the micro-batch's gradient accumulation over its parameters when
// Optimizations::grad_accumulation is not fused (an op "grad_accumulation",
// backward only; the output head's only where it has its own matrix).
std::vector<OperatorCost> job_layer_operators(const Scenario& s, const GpuProfile& gpu);
std::vector<OperatorCost> job_embedding_operators(const Scenario& s, const GpuProfile& gpu);
std::vector<OperatorCost> job_output_operators(const Scenario& s, const GpuProfile& gpu);

// Per-iteration work of one pipeline rank outside forward and backward
// (engine/pipeline_executor.cc): zeroing every chunk's gradient buffer, then
// per chunk the global-norm reduction over its shard, the clipping scale and
// the optimizer update (adamw or lamb) of `shard_params` elements each.
std::vector<KernelCall> engine_step_calls(const Scenario& s, const std::vector<double>& chunk_buffer_params,
                                          const std::vector<double>& shard_params);

// Parameters of the engine's model chunk `chunk` on pipeline rank `pp_rank`,
// per TP rank (engine/param_init.cc: the first chunk adds the token and
// position embeddings, the last the final LayerNorm and the untied output
// layer): the flat buffer the DP collectives and the optimizer work on.
double engine_chunk_params(const Scenario& s, int pp_rank, int chunk);

// engine_step_calls for pipeline rank `pp_rank` with the engine's own buffers
// and ZeRO shards (ZeRO >= 1 with DP > 1 shards the buffer DP ways).
std::vector<KernelCall> engine_rank_step_calls(const Scenario& s, int pp_rank);

// Seconds of pipeline rank `pp_rank`'s optimizer step in the engine: the
// kernels of engine_rank_step_calls plus the small all-reduces of the global
// gradient norm (twice per chunk over each group larger than one), the
// sequence-parallel gradient sync and the step's loss.
double engine_rank_step_s(const Scenario& s, const GpuProfile& gpu, int pp_rank);

}  // namespace megascale::model
