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
// Under SP the backward also all-gathers each column-parallel GEMM's input again
// for its weight gradient ("ag_in_<gemm>", beside its input-gradient GEMM):
// Megatron-LM keeps only the sequence shard of that input for backward
// (Korthikanti et al. 2022, section 4.2.2: "we store only the Y_i^s part ... and
// perform an extra all-gather in the backward pass ... overlap[ped] with the
// computation required to calculate gradients with respect to Y"; Megatron-LM
// LinearWithGradAccumulationAndAsyncCommunication.backward).
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
#include "model/op_cost.h"

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
  // Compute: the share of each operator (parallel to `ops`) the step runs; empty =
  // all of each (recompute = "selective_op" re-runs parts of fused GEMMs).
  std::vector<double> op_share;
  double share(size_t j) const { return op_share.empty() ? 1.0 : op_share[j]; }
  int64_t bytes = 0;        // collectives: size of the full (unsharded) tensor, bytes (bf16)
  // Collectives: index (into the layer's operator list) of the GEMM it can be
  // fused with under tp_overlap (MegaScale section 3.2: the all-gather feeding a
  // column-parallel GEMM, the reduce-scatter fed by a row-parallel one), or -1.
  int fused_with = -1;
  bool recompute = false;   // part of the re-run forward before a backward
  // SP backward's re-gather of a column-parallel GEMM's input (kTpAllGather,
  // fused_with = that GEMM): on a GPU it runs beside the GEMM's input-gradient
  // product, with or without tp_overlap (Megatron-LM issues it asynchronously);
  // the CPU engine runs it before the GEMM.
  bool beside_dgrad = false;
};

using LayerProgram = std::vector<LayerStep>;

// A collective step's bytes for activations of `activation_bytes` bytes per
// element (LayerStep::bytes is sized for bf16, 2 bytes; the CPU engine is fp32).
inline double step_bytes(const LayerStep& step, double activation_bytes) {
  return static_cast<double>(step.bytes) / 2.0 * activation_bytes;
}

// The forward program of one layer over `ops` (from layer_operators(m, p, ...)).
LayerProgram layer_forward_program(const ModelConfig& m, const ParallelConfig& p,
                                   const std::vector<OperatorCost>& ops);

// The backward program: recomputation first (full: the whole forward program;
// selective: the attention core; selective_op: what torchtitan's op-level policy
// does not save, model/op_recompute.h, with the TP collectives feeding it), then the mirrored forward with AG <-> RS and,
// under SP, the input re-gather before each column-parallel GEMM.
// Compute steps of the backward refer to the same operator indices; their time is
// the operators' backward time (recompute steps: forward time).
LayerProgram layer_backward_program(const ModelConfig& m, const ParallelConfig& p,
                                    const std::vector<OperatorCost>& ops);

// Column-parallel GEMMs open a TP region (qkv, fc1, qkv_fc1): their input is
// whole on every rank (SP all-gathers it), their input gradient is reduced.
bool is_column_parallel(const std::string& op_name);

}  // namespace megascale::model
