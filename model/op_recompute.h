// model/op_recompute.h: per-operator selective activation checkpointing as
// torchtitan applies it (parallel.recompute = "selective_op").
//
// torchtitan's op-level selective AC (activation_checkpoint.mode = "selective",
// selective_ac_option = "op"; torchtitan/parallelisms/parallelize_llama.py,
// _apply_ac_to_transformer_block, Dec 2024) wraps each transformer block in a
// non-reentrant checkpoint whose policy keeps ("must save") the outputs of the
// ops in its save list (aten.mm, the fused SDPA kernels, the functional
// reduce_scatter) and recomputes every other op, except every second aten.mm
// of the block (a counter restarted for each block's forward): the 2nd, 4th,
// ... matmul is recomputed too. A Llama block calls its matmuls in the order
// wq, wk, wv, wo, w1, w3, w2, so wq, wv, w1 and w2 are saved and wk, wo and w3
// re-run with the norms, RoPE, SiLU, the product and the residual adds.
//
// Our layer operators fuse some of those matmuls (qkv = wq|wk|wv, fc1 = w1|w3
// under SwiGLU); gemm_parts() lists the matmuls an operator stands for so that
// a part of it can be re-run (its share of the operator's FLOPs).
//
// Modelled as written; what the policy's rule leaves to the framework is not:
// FP8 GEMMs (torchtitan's float8 linears call _scaled_mm, outside the save
// list) are counted like BF16 ones, and the non-reentrant checkpoint's early
// stop is ignored (every non-saved op of the block is re-run).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "model/op_cost.h"

namespace megascale::model {

// One aten.mm call inside a GEMM operator of layer_operators().
struct GemmPart {
  std::string name;            // wq, wk, wv, wo, w1, w3, w2, fc1, fc2
  double flop_share = 1;       // of the operator's FLOPs
  double out_elems_per_token;  // its output on this TP rank (row-parallel: the whole h, partial sums)
  bool row_parallel = false;
};

// The matmuls `op_name` stands for, in call order; empty for an operator that
// is not a linear layer's GEMM.
std::vector<GemmPart> gemm_parts(const ModelConfig& m, const ParallelConfig& p, const std::string& op_name);

// The share of each operator's forward that the op-level policy re-runs
// before the layer's backward (0: its output is saved; 1: re-run whole).
std::vector<double> op_recompute_shares(const ModelConfig& m, const ParallelConfig& p,
                                        const std::vector<OperatorCost>& ops);

// Elements (bf16) the forward keeps per token of a micro-batch for one layer
// under the policy: the block's input, the saved matmul outputs, the fused
// attention's output and log-sum-exp (when flash attention runs), and under
// sequence parallelism the reduce-scatters' outputs.
double op_recompute_saved_elems_per_token(const ModelConfig& m, const ParallelConfig& p,
                                          bool flash_attention);

}  // namespace megascale::model
