// model/memory.h: HBM needed per GPU by a parallel configuration.
//
// Mixed-precision training as Megatron-LM does it (bf16 parameters, a gradient
// buffer in the reduce dtype, fp32 by default (model/payload.h), fp32 master
// weights and two fp32 optimizer moments for Adam and LAMB),
// with ZeRO stages 0-3 sharding optimizer state (1), gradients (2) and parameters
// (3) over the data-parallel group. Activations per layer per micro-batch follow
// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
// Models", Table 2): s*b*h*(10 + 24/t + 5*a*s/(h*t)) bytes without sequence
// parallelism, s*b*h*(34/t + 5*a*s/(h*t)) with it, 34/t (selective recomputation:
// the attention score term disappears), 2/t (full recomputation: the layer input
// only), generalised to other MLP widths, SwiGLU, the parallel block, sliding-
// window attention, and FlashAttention (which never stores the score matrix).
// With even stages the pipeline stage that holds the most is the first: with 1F1B
// it keeps min(P, M) micro-batches in flight, with interleaved 1F1B its warm-up
// + 1 chunks (model/schedule.h warmup_forwards()); with uneven first / last
// stages (model/pipeline_layout.h) every stage is compared and the fullest is
// reported.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "model/config.h"
#include "model/hardware.h"

namespace megascale::model {

struct MemoryBreakdown {
  double parameters_bytes = 0;
  // Of parameters_bytes, the transformer layers' FP8 weight copies (with fp8;
  // with fp8_param_gather they replace the layers' BF16 weights).
  double fp8_weight_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double other_bytes = 0;           // CUDA context, NCCL buffers, DP bucket, ZeRO-3 gathers,
                                    // the loss's logits (PP 1: rank 0 is the last stage),
                                    // under recompute the re-run layer's activations
  // Of other_bytes, the larger of the two (never live at once): the loss's
  // logits (PP 1) and the layer a recompute's backward re-runs.
  double loss_logits_bytes = 0;
  double rerun_layer_bytes = 0;
  // Of other_bytes, context parallelism's key/value buffers at the peak (the
  // all-gather form's gathered K/V and their gradients; the ring's blocks in flight).
  double cp_kv_bytes = 0;
  double total_bytes = 0;
  double capacity_bytes = 0;        // the profile's HBM
  int inflight_chunks = 0;          // (micro-batch, chunk) activations kept by that rank
  int pp_rank = 0;                  // the pipeline rank described (the fullest)
  double activation_bytes_per_layer = 0;  // one micro-batch, one layer
  bool fits() const { return total_bytes <= capacity_bytes; }
  // "needs 93.1 GB of 85.9 GB: parameters 5.5, gradients 10.9, ..., other 1.7
  // (re-run layer 0.4)" (GB = 1e9 B; other_parts()).
  std::string describe() const;
  // " (loss logits 0.2)", " (re-run layer 0.4)", " (loss logits 0.2 or re-run
  // layer 0.4, never at once: the larger counted)", or "" when other has neither;
  // "; CP K/V buffers 0.1" inside (or alone in) the brackets under CP.
  std::string other_parts() const;
};

// Per-GPU memory of the most loaded pipeline stage.
MemoryBreakdown memory_per_gpu(const ModelConfig& m, const ParallelConfig& p,
                               const Optimizations& o, const GpuProfile& gpu);

// ZeRO 2 and 3 count 1/dp of the gradients (gradients_bytes above), while both
// fidelities reduce-scatter each chunk's gradients once per step, after its
// last backward (model/schedule.h). With more than one micro-batch per replica
// no framework pairs the two: DeepSpeed's ZeRO-2/3 reduce after every backward
// so that each rank keeps only its shard ("gradient reduction is required after
// every backward because of gradient partitioning", DeepSpeed issue #2252), as
// PyTorch FSDP does outside no_sync(): M gradient reduce-scatters per step; Megatron-
// LM's distributed optimizer reduces once but keeps the whole gradient buffer.
// Returns what the second reading adds per GPU, bytes: the unsharded gradients
// less the counted shard, on the fullest stage. 0 where the pairing is exact
// (stage < 2, dp 1, or one micro-batch per replica).
double unsharded_gradient_extra_bytes(const ModelConfig& m, const ParallelConfig& p, const Optimizations& o,
                                      const GpuProfile& gpu);

// Activation bytes of one layer for one micro-batch on one TP rank. `fp8`:
// Transformer Engine's FP8 recipe, which keeps the inputs of the four linear
// GEMMs for their weight gradients as FP8 copies (1 byte, not 2).
double activation_bytes_per_layer(const ModelConfig& m, const ParallelConfig& p,
                                  bool flash_attention, bool fp8 = false);

}  // namespace megascale::model
