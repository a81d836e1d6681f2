// model/payload.h: the bytes a job's collectives move, in one place for the
// closed form (model/estimator.h), the event simulation (sim/comm_costs.h) and
// the Schedule IR's op bytes (model/job_schedule.h).
//
// defines: grad_element_bytes, grad_memory_element_bytes, layer_chunk_params,
//          dp_chunk_params, dp_payload_bytes, embedding_sync_needed,
//          cp_kv_block_bytes, param_gather_element_bytes,
//          OptimizerStateBytes, optimizer_state_bytes,
//          grad_accumulation_bytes_per_param
//
// Gradients are reduced in Optimizations::grad_reduce_dtype (fp32 by default:
// Megatron-LM's main-grad buffer for bf16 training; the CPU engine is fp32
// throughout and refuses bf16, model/scenario.h); parameters are all-gathered at
// the profile's param_gather_bytes (2: bf16 on GPUs; 4: the CPU engine), or
// one byte with FP8 and fp8_param_gather (param_gather_element_bytes).
// A chunk's parameters per GPU: its layers / TP, plus on pipeline rank 0's
// chunk 0 the word embedding and on the last rank's last chunk its tied copy
// for the output layer (vocab x hidden / TP each; once when P == V == 1);
// on a cpu profile the engine's own buffer (model/engine_ops.h).
//
// Thread-safety: pure functions.
#pragma once

#include "model/config.h"
#include "model/schedule.h"

namespace megascale::model {

// Bytes of one gradient element as the DP collectives (and the tied
// embedding's all-reduce) move it: 4 for fp32, 2 for bf16.
double grad_element_bytes(const Optimizations& o);

// Bytes per element of the gradients memory keeps between micro-batches
// (MemoryBreakdown::gradients_bytes): at ZeRO 0-2 the reduce dtype, the dtype
// of Megatron-Core's grad buffer (param_and_grad_buffer.py: grad_dtype is fp32
// only with grad_reduce_in_fp32) and of DeepSpeed's partitioned gradients; at
// ZeRO 3 fp32, since PyTorch FSDP casts each reduced shard back to its fp32
// sharded parameter's dtype (keep_low_precision_grads defaults to False).
double grad_memory_element_bytes(const Optimizations& o, int zero_stage);

// The optimizer's state a parameter of the local shard: the master parameter
// and Adam's / LAMB's two moments, as memory holds them (model/memory.cc) and
// as the step reads and writes them (model/estimator.cc).
//   fp32 (every preset): 4 B each, read and written.
//   optimizer_state_dtype = "bf16" (Apex DistributedFusedAdam): 2 B each.
//   Megatron-Core's precision-aware optimizer (Optimizations::exp_avg_dtype,
//   exp_avg_sq_dtype: 4 / 2 / 2 / 1 B for fp32 / bf16 / fp16 / fp8;
//   main_params_dtype: fp32 4 B, fp16 2 B, fp32_remainders 2 B held, the low
//   16 bits of the fp32 master beside the bf16 parameter, so the step reads
//   those 2 B and the parameter's 2 B and writes the 2 B back; the parameter's
//   own write is the step's bf16 weight write either way).
struct OptimizerStateBytes {
  double main_param_held = 4;
  double main_param_read = 4;
  double main_param_written = 4;
  double exp_avg = 4;
  double exp_avg_sq = 4;
  double held() const { return main_param_held + exp_avg + exp_avg_sq; }
  // Read and written by one Adam step: the master parameter and both moments.
  double step_traffic() const { return main_param_read + main_param_written + 2 * (exp_avg + exp_avg_sq); }
};
OptimizerStateBytes optimizer_state_bytes(const Optimizations& o);

// Bytes each micro-batch's gradient accumulation moves per parameter outside
// the weight-gradient GEMMs (Optimizations::grad_accumulation): 0 fused; 10
// for a separate add (bf16 gradient 2 + fp32 accumulator 4 read, 4 written);
// 6 for the add into a 16-bit accumulator (2 + 2 read, 2 written);
// 18 for DeepSpeed's cast-then-add (the bf16 gradient read, the fp32
// temporary written and read, the accumulator read and written: 2 + 4 + 4 +
// 4 + 4). model/engine_ops.h puts it after every layer's and head's backward.
double grad_accumulation_bytes_per_param(const Optimizations& o);

// Parameters per GPU of the transformer layers of chunk `chunk` of pipeline rank
// `pp_rank`: its layers (model/pipeline_layout.h) x parameters_per_layer / TP (no
// embedding).
double layer_chunk_params(const Scenario& s, int pp_rank, int chunk);

// Parameters per GPU of chunk `chunk` of pipeline rank `pp_rank`.
double dp_chunk_params(const Scenario& s, int pp_rank, int chunk);

// Whether the job all-reduces the tied embedding's gradient between the first
// and last pipeline stage before the optimizer step (Megatron-LM): tied
// embeddings, more than one stage, a GPU profile (the CPU engine's output layer
// is untied).
bool embedding_sync_needed(const Scenario& s);

// Per-GPU payload (nccl-tests "size") of the DP collective `kind` of that
// chunk: fp32 gradients for a reduce-scatter or all-reduce, parameters at the
// profile's param_gather_bytes for an all-gather.
double dp_payload_bytes(const Scenario& s, int pp_rank, int chunk, OpKind kind);

// Bytes of one parameter in the distributed optimizer's all-gather: 1 with
// fp8 and Optimizations::fp8_param_gather, else the profile's param_gather_bytes.
double param_gather_element_bytes(const Scenario& s);

// Context parallelism: one CP rank's key/value block of one layer, bytes, for
// one micro-batch: K and V over its seq_len / cp tokens (ModelConfig::seq_len,
// folded), the TP rank's KV heads (at least one: Megatron replicates KV heads
// when TP exceeds them), at `element_bytes` (the profile's activation_bytes).
// What the ring exchanges a step (model/estimator.cc cp_exposed_s), the
// all-gather form gathers cp of, and memory holds in flight (model/memory.cc).
double cp_kv_block_bytes(const ModelConfig& m, const ParallelConfig& p, double element_bytes);

}  // namespace megascale::model
