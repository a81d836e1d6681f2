// model/layer_program.h: what one transformer layer does on one TP rank, in order.
//
// A LayerProgram is the sequence of compute segments and TP/SP collectives of one
// layer's forward or backward pass on one tensor-parallel rank (Megatron-LM's
// ColumnParallelLinear / RowParallelLinear with or without sequence parallelism,
// Korthikanti et al. 2022). Sequential block with SP, forward:
//   LN1 | AG | QKV, attention, proj | RS | residual, LN2 | AG | FC1, act, FC2 | RS | residual
// Parallel block with SP (MegaScale section 3.1, one AG and one RS per layer):
//   LN | AG | QKV+FC1, attention, act, proj+FC2 | RS | residual
// Without SP the AG disappears and each RS becomes an all-reduce. Backward mirrors
// forward (AG <-> RS); recomputation prepends a re-run of (part of) the forward.
//
// Compute segments name the operators of model/op_cost.h that they contain, so the
// estimator, the simulator and the engine all time the same pieces.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace megascale::model {

enum class LayerStepKind {
  kCompute,          // kernels on the compute stream
  kTpAllGather,      // SP: gather the sequence-sharded activation (s*b*h)
  kTpReduceScatter,  // SP: reduce + scatter along the sequence
  kTpAllReduce,      // no SP: reduce the row-parallel output
};

const char* to_string(LayerStepKind k);

struct LayerStep {
  LayerStepKind kind = LayerStepKind::kCompute;
  std::string name;         // e.g. "attn_in", "mlp", "ag_mlp"
  std::vector<int> ops;     // compute: indices into the layer's OperatorCost list
  int64_t bytes = 0;        // collectives: size of the full (unsharded) tensor, bytes
  // Collectives: index of the compute step it can be fused with under tp_overlap
  // (the GEMM that consumes an all-gather or produces a reduce-scatter), or -1.
  int fused_with = -1;
};

using LayerProgram = std::vector<LayerStep>;

}  // namespace megascale::model
