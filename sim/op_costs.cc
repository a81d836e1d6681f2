// sim/op_costs.cc: see op_costs.h.
#include "sim/op_costs.h"

#include <algorithm>

#include "model/collective_cost.h"
#include "model/hardware.h"
#include "model/layer_program.h"
#include "model/op_cost.h"
#include "model/schedule.h"

namespace megascale::sim {
namespace {

using model::OpKind;

// Kernel and recompute seconds of one layer's program (compute steps only),
// timed as model/estimator.cc program_time() times them.
struct KernelTime {
  double compute_s = 0;
  double recompute_s = 0;
  double flops = 0;
};

KernelTime kernel_time(const model::LayerProgram& program, const std::vector<model::OperatorCost>& ops,
                       bool backward, const model::GpuProfile& gpu) {
  KernelTime t;
  for (const model::LayerStep& step : program) {
    if (step.kind != model::LayerStepKind::kCompute) continue;
    const bool as_forward = !backward || step.recompute;
    for (int i : step.ops) {
      const double s = as_forward ? model::forward_time_s(ops[i], gpu) : model::backward_time_s(ops[i], gpu);
      (step.recompute ? t.recompute_s : t.compute_s) += s;
      t.flops += as_forward ? ops[i].fwd_flops : ops[i].bwd_flops;
    }
  }
  return t;
}

// The TP link of the estimator (model/estimator.cc links()).
model::Link tp_link(const model::Scenario& s, const model::GpuProfile& gpu) {
  const model::HardwareConfig& hw = s.hardware;
  if (s.parallel.tp <= hw.gpus_per_node) return model::nvlink_link(gpu.nvlink_busbw_gbs);
  const double nic_share = std::min(1.0, static_cast<double>(hw.nics_per_node) / hw.gpus_per_node);
  return model::network_link(model::nic_busbw_gbs(hw.nic_gbps) * nic_share);
}

struct Head {
  OpParts fwd, bwd;
  double flops_fwd = 0, flops_bwd = 0;
};

// Embedding (output_head = false) or output head work per micro-batch, with its
// TP collectives (mirrors model/estimator.cc head_time(), split by pass).
Head head(const std::vector<model::OperatorCost>& ops, const model::Scenario& s,
          const model::GpuProfile& gpu, bool output_head) {
  Head h;
  h.fwd.compute = model::forward_time_s(ops, gpu);
  h.bwd.compute = model::backward_time_s(ops, gpu);
  for (const model::OperatorCost& op : ops) {
    h.flops_fwd += op.fwd_flops;
    h.flops_bwd += op.bwd_flops;
  }
  const model::ParallelConfig& p = s.parallel;
  if (p.tp > 1) {
    using model::CollectiveKind;
    const model::Link link = tp_link(s, gpu);
    const double act = static_cast<double>(p.micro_batch) * s.model.seq_len * s.model.hidden * 2;
    const CollectiveKind fwd = p.sequence_parallel
                                   ? (output_head ? CollectiveKind::kAllGather : CollectiveKind::kReduceScatter)
                                   : CollectiveKind::kAllReduce;
    const CollectiveKind bwd = p.sequence_parallel
                                   ? (output_head ? CollectiveKind::kReduceScatter : CollectiveKind::kAllGather)
                                   : CollectiveKind::kAllReduce;
    h.fwd.tp = model::collective_time_s(fwd, p.tp, act, link);
    h.bwd.tp = model::collective_time_s(bwd, p.tp, act, link);
    if (output_head) {
      const double stats = static_cast<double>(p.micro_batch) * s.model.seq_len * 4.0;
      h.fwd.tp += 3 * model::collective_time_s(CollectiveKind::kAllReduce, p.tp, stats, link);
    }
  }
  return h;
}

OpParts plus(OpParts a, const OpParts& b) {
  a.data += b.data;
  a.compute += b.compute;
  a.recompute += b.recompute;
  a.tp += b.tp;
  a.pp += b.pp;
  a.dp += b.dp;
  a.optimizer += b.optimizer;
  return a;
}

}  // namespace

OpCosts::OpCosts(const model::Scenario& s, const model::Estimate& e, const CommTimes& comm)
    : pp_(s.parallel.pp), vpp_(s.parallel.vpp), comm_(comm) {
  const model::GpuProfile& gpu = model::gpu_profile(s.hardware.gpu);
  const model::ParallelConfig& p = s.parallel;
  const int layers_per_chunk = s.model.layers / (p.pp * p.vpp);
  const std::vector<model::OperatorCost> ops =
      model::layer_operators(s.model, p, s.optimizations.efficient_operators);
  const KernelTime f = kernel_time(model::layer_forward_program(s.model, p, ops), ops, false, gpu);
  const KernelTime b = kernel_time(model::layer_backward_program(s.model, p, ops), ops, true, gpu);

  // The estimate's chunk times are the totals; TP is what they add beyond kernels.
  forward_.compute = layers_per_chunk * f.compute_s;
  forward_.tp = std::max(0.0, e.chunk_forward_s - forward_.compute);
  backward_.compute = layers_per_chunk * b.compute_s;
  backward_.recompute = layers_per_chunk * b.recompute_s;
  backward_.tp = std::max(0.0, e.chunk_backward_s - backward_.compute - backward_.recompute);
  forward_flops_ = layers_per_chunk * f.flops;
  backward_flops_ = layers_per_chunk * b.flops;

  const Head emb = head(model::embedding_operators(s.model, p), s, gpu, false);
  const Head out = head(model::output_operators(s.model, p, s.optimizations.efficient_operators), s, gpu, true);
  embedding_fwd_ = emb.fwd;
  embedding_bwd_ = emb.bwd;
  output_fwd_ = out.fwd;
  output_bwd_ = out.bwd;
  embedding_flops_fwd_ = emb.flops_fwd;
  embedding_flops_bwd_ = emb.flops_bwd;
  output_flops_fwd_ = out.flops_fwd;
  output_flops_bwd_ = out.flops_bwd;

  data_s_ = s.optimizations.data_pipeline ? 0.0 : e.breakdown.data_s;
  optimizer_s_ = e.breakdown.optimizer_s;

  const int M = p.microbatches();
  forward_busy_s_.assign(p.pp, 0.0);
  backward_busy_s_.assign(p.pp, 0.0);
  busy_parts_.assign(p.pp, OpParts{});
  for (int r = 0; r < p.pp; ++r) {
    for (int c = 0; c < p.vpp; ++c) {
      model::Op fwd;
      fwd.kind = OpKind::kForward;
      fwd.chunk = c;
      model::Op bwd;
      bwd.kind = OpKind::kBackward;
      bwd.chunk = c;
      forward_busy_s_[r] += M * parts(r, fwd).total();
      backward_busy_s_[r] += M * parts(r, bwd).total();
      for (int mb = 0; mb < M; ++mb) busy_parts_[r] = plus(plus(busy_parts_[r], parts(r, fwd)), parts(r, bwd));
    }
  }
}

OpParts OpCosts::parts(int pp_rank, const model::Op& op) const {
  OpParts t;
  switch (op.kind) {
    case OpKind::kDataLoad:
      t.data = data_s_;
      break;
    case OpKind::kForward:
      t = forward_;
      if (first_head(pp_rank, op.chunk)) t = plus(t, embedding_fwd_);
      if (last_head(pp_rank, op.chunk)) t = plus(t, output_fwd_);
      break;
    case OpKind::kBackward:
      t = backward_;
      if (first_head(pp_rank, op.chunk)) t = plus(t, embedding_bwd_);
      if (last_head(pp_rank, op.chunk)) t = plus(t, output_bwd_);
      break;
    case OpKind::kSendActivation:
    case OpKind::kSendGradient:
      t.pp = comm_.p2p_s;
      break;
    case OpKind::kRecvActivation:
    case OpKind::kRecvGradient:
      break;
    case OpKind::kDpAllGather:
      t.dp = comm_.dp_gather(pp_rank, op.chunk);
      break;
    case OpKind::kDpReduceScatter:
    case OpKind::kDpAllReduce:
      t.dp = comm_.dp_reduce(pp_rank, op.chunk);
      break;
    case OpKind::kOptimizerStep:
      t.optimizer = optimizer_s_;
      if (pp_ > 1 && (pp_rank == 0 || pp_rank == pp_ - 1)) t.pp = comm_.embedding_sync_s;
      break;
  }
  return t;
}

std::vector<double> OpCosts::busy_s() const {
  std::vector<double> b(forward_busy_s_.size());
  for (size_t r = 0; r < b.size(); ++r) b[r] = forward_busy_s_[r] + backward_busy_s_[r];
  return b;
}

double OpCosts::flops(int pp_rank, const model::Op& op) const {
  if (op.kind == OpKind::kForward) {
    return forward_flops_ + (first_head(pp_rank, op.chunk) ? embedding_flops_fwd_ : 0.0) +
           (last_head(pp_rank, op.chunk) ? output_flops_fwd_ : 0.0);
  }
  if (op.kind == OpKind::kBackward) {
    return backward_flops_ + (first_head(pp_rank, op.chunk) ? embedding_flops_bwd_ : 0.0) +
           (last_head(pp_rank, op.chunk) ? output_flops_bwd_ : 0.0);
  }
  return 0.0;
}

}  // namespace megascale::sim
