// sim/op_costs.h: the duration of every op of a scenario's Schedule IR, split
// into the categories of the time breakdown.
//
// defines: OpParts, OpCosts
//
// Where each duration comes from
// ------------------------------
// Forward / Backward of (micro-batch, chunk): the analytical estimator's
//   per-layer times x the chunk's layers (model/estimator.h layer_forward_s /
//   layer_backward_s, model/pipeline_layout.h: the
//   layer programs' kernels from model/op_cost.h + model/hardware.h, TP/SP
//   collectives not hidden by tp_overlap, recomputation). Split into parts by
//   re-timing the layer program's compute steps with the same public functions
//   (compute = kernels, recompute = the re-run forward, tp = the rest: exposed
//   TP, exactly as the estimator adds it).
//   Head stages are heavier, as in Megatron-LM: pipeline rank 0's chunk 0 adds
//   the embedding, the last rank's last chunk adds the final LayerNorm, logits
//   GEMM and vocab-parallel cross-entropy (model/op_cost.h), with their TP
//   collectives (SP: reduce-scatter after the embedding, all-gather before the
//   logits; otherwise all-reduces; plus three small all-reduces of loss
//   statistics), timed by the estimator's own head_time() (model/estimator.h);
//   the estimator adds only the busier head to its critical path, the
//   simulation runs both where they are.
// Send: CommTimes::p2p(rank, peer), the boundary's own time. Recv: 0 (it waits for its Send).
// DP all-gather / reduce-scatter / all-reduce of (rank, chunk): CommTimes.
// DataLoad: the estimate's data time (synchronous loading, data pipeline off).
// OptimizerStep: the estimate's optimizer time (shard update + gradient-norm
//   all-reduce), plus on the first and last pipeline rank the tied-embedding
//   gradient all-reduce (pp part), which Megatron-LM runs before the step.
//
// A compute factor (stragglers, jitter: sim/variability.h) multiplies the
// compute, recompute and tp parts of Forward / Backward only.
//
// Thread-safety: immutable after construction.
#pragma once

#include <vector>

#include "model/config.h"
#include "model/estimator.h"
#include "model/schedule.h"
#include "sim/comm_costs.h"

namespace megascale::sim {

// Seconds of one op by category (model::TimeBreakdown's names, without bubble).
struct OpParts {
  double data = 0, compute = 0, recompute = 0, tp = 0, pp = 0, dp = 0;
  double embedding_sync = 0, grad_norm = 0, optimizer = 0, host = 0;  // the optimizer-step op's parts

  double total() const {
    return data + compute + recompute + tp + pp + dp + embedding_sync + grad_norm + optimizer + host;
  }
  OpParts scaled_compute(double factor) const {
    OpParts p = *this;
    p.compute *= factor;
    p.recompute *= factor;
    p.tp *= factor;
    return p;
  }
};

class OpCosts {
 public:
  // REQUIRES: e = model::estimate(s) and comm for the same scenario.
  OpCosts(const model::Scenario& s, const model::Estimate& e, const CommTimes& comm);

  // At nominal speed; `parts(...).scaled_compute(f).total()` is the duration
  // at compute factor f.
  OpParts parts(int pp_rank, const model::Op& op) const;
  double duration_s(int pp_rank, const model::Op& op, double compute_factor) const {
    return parts(pp_rank, op).scaled_compute(compute_factor).total();
  }

  // Forward / backward busy seconds of one iteration on pipeline rank r at
  // nominal speed (sum over its Forward / Backward ops).
  double forward_busy_s(int pp_rank) const { return forward_busy_s_[pp_rank]; }
  double backward_busy_s(int pp_rank) const { return backward_busy_s_[pp_rank]; }
  std::vector<double> busy_s() const;  // forward + backward, per rank
  OpParts busy_parts(int pp_rank) const { return busy_parts_[pp_rank]; }  // their parts

  // FLOPs executed by one GPU for a Forward / Backward op (trace "flops").
  double flops(int pp_rank, const model::Op& op) const;

  const CommTimes& comm() const { return comm_; }

 private:
  bool first_head(int pp_rank, int chunk) const { return pp_rank == 0 && chunk == 0; }
  bool last_head(int pp_rank, int chunk) const { return pp_rank == pp_ - 1 && chunk == vpp_ - 1; }

  int pp_ = 1, vpp_ = 1;
  CommTimes comm_;
  std::vector<OpParts> forward_, backward_;  // a chunk's layers, [pp_rank * vpp + chunk]
  OpParts embedding_fwd_, embedding_bwd_;   // added on rank 0, chunk 0
  OpParts output_fwd_, output_bwd_;         // added on rank P-1, chunk V-1
  double data_s_ = 0, optimizer_s_ = 0, grad_norm_s_ = 0, host_s_ = 0;
  std::vector<double> optimizer_rank_s_;  // per pipeline rank (cpu profiles), else empty
  std::vector<double> forward_flops_, backward_flops_;  // [pp_rank * vpp + chunk]
  double embedding_flops_fwd_ = 0, embedding_flops_bwd_ = 0;
  double output_flops_fwd_ = 0, output_flops_bwd_ = 0;
  std::vector<double> forward_busy_s_, backward_busy_s_;
  std::vector<OpParts> busy_parts_;
};

}  // namespace megascale::sim
