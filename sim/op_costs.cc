// sim/op_costs.cc: see op_costs.h.
#include "sim/op_costs.h"

#include <algorithm>

#include "model/collective_cost.h"
#include "model/engine_ops.h"
#include "model/hardware.h"
#include "model/layer_program.h"
#include "model/op_cost.h"
#include "model/pipeline_layout.h"
#include "model/profile.h"
#include "model/schedule.h"

namespace megascale::sim {
namespace {

using model::OpKind;

struct Head {
  OpParts fwd, bwd;
  double flops_fwd = 0, flops_bwd = 0;
};

// Embedding (output_head = false) or output head work per micro-batch, split by
// pass (model/estimator.h head_time()).
Head head(const std::vector<model::OperatorCost>& ops, const model::Scenario& s,
          const model::GpuProfile& gpu, bool output_head) {
  const model::HeadTime t =
      model::head_time(ops, s, model::parallel_links(s, gpu).tp, gpu, output_head);
  Head h;
  h.fwd.compute = t.forward_s;
  h.bwd.compute = t.backward_s;
  h.fwd.tp = t.tp_forward_s;
  h.bwd.tp = t.tp_backward_s;
  h.flops_fwd = t.flops_forward;
  h.flops_bwd = t.flops_backward;
  return h;
}

OpParts plus(OpParts a, const OpParts& b) {
  a.data += b.data;
  a.compute += b.compute;
  a.recompute += b.recompute;
  a.tp += b.tp;
  a.pp += b.pp;
  a.dp += b.dp;
  a.embedding_sync += b.embedding_sync;
  a.grad_norm += b.grad_norm;
  a.optimizer += b.optimizer;
  a.host += b.host;
  return a;
}

OpParts scaled(OpParts a, double f) {
  a.data *= f;
  a.compute *= f;
  a.recompute *= f;
  a.tp *= f;
  a.pp *= f;
  a.dp *= f;
  a.embedding_sync *= f;
  a.grad_norm *= f;
  a.optimizer *= f;
  a.host *= f;
  return a;
}

}  // namespace

OpCosts::OpCosts(const model::Scenario& s, const model::Estimate& e, const CommTimes& comm)
    : pp_(s.parallel.pp), vpp_(s.parallel.vpp), comm_(comm) {
  model::GpuProfile cpu_storage;
  const model::GpuProfile& gpu = model::job_profile(s, &cpu_storage);
  const model::ParallelConfig& p = s.parallel;
  const model::PipelineLayout layout(s.model, p);
  const std::vector<model::OperatorCost> ops =
      model::job_layer_operators(s, gpu);
  const model::Link tp = model::parallel_links(s, gpu).tp;
  const model::ProgramTime f =
      model::program_time(model::layer_forward_program(s.model, p, ops), ops, false, s, tp, gpu);
  const model::ProgramTime b =
      model::program_time(model::layer_backward_program(s.model, p, ops), ops, true, s, tp, gpu);

  // The estimate's layer times x the chunk's layers are the totals; TP is what
  // they add beyond kernels. One entry per (pipeline rank, chunk): uneven first /
  // last stages hold other layer counts (model/pipeline_layout.h).
  for (int r = 0; r < p.pp; ++r) {
    for (int c = 0; c < p.vpp; ++c) {
      const int layers = layout.chunk_layers(r, c);
      OpParts fw, bw;
      fw.compute = layers * f.compute_s;
      fw.tp = std::max(0.0, layers * e.layer_forward_s - fw.compute);
      bw.compute = layers * b.compute_s;
      bw.recompute = layers * b.recompute_s;
      bw.tp = std::max(0.0, layers * e.layer_backward_s - bw.compute - bw.recompute);
      forward_.push_back(fw);
      backward_.push_back(bw);
      forward_flops_.push_back(layers * f.flops);
      backward_flops_.push_back(layers * b.flops);
    }
  }

  const Head emb = head(model::job_embedding_operators(s, gpu), s, gpu, false);
  const Head out = head(model::job_output_operators(s, gpu), s, gpu, true);
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
  grad_norm_s_ = e.breakdown.grad_norm_s;
  host_s_ = e.breakdown.host_s;
  // The engine: each pipeline rank's own step work (its chunks' buffers).
  if (gpu.models_engine()) {
    for (int r = 0; r < p.pp; ++r) optimizer_rank_s_.push_back(model::engine_rank_step_s(s, gpu, r));
  }

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
      t = forward_[pp_rank * vpp_ + op.chunk];
      if (first_head(pp_rank, op.chunk)) t = plus(t, embedding_fwd_);
      if (last_head(pp_rank, op.chunk)) t = plus(t, output_fwd_);
      t = scaled(t, op.fraction);  // a bucketed piece carries its share
      break;
    case OpKind::kBackward:
      t = backward_[pp_rank * vpp_ + op.chunk];
      if (first_head(pp_rank, op.chunk)) t = plus(t, embedding_bwd_);
      if (last_head(pp_rank, op.chunk)) t = plus(t, output_bwd_);
      t = scaled(t, op.fraction);
      break;
    case OpKind::kSendActivation:
    case OpKind::kSendGradient:
      t.pp = comm_.p2p(pp_rank, op.peer);
      break;
    case OpKind::kRecvActivation:
    case OpKind::kRecvGradient:
      break;
    case OpKind::kDpAllGather:
      t.dp = op.fraction * comm_.dp_gather(pp_rank, op.chunk);
      break;
    case OpKind::kDpReduceScatter:
    case OpKind::kDpAllReduce:
      t.dp = op.fraction * comm_.dp_reduce(pp_rank, op.chunk);
      break;
    case OpKind::kOptimizerStep:
      t.optimizer = optimizer_rank_s_.empty() ? optimizer_s_ : optimizer_rank_s_[pp_rank];
      t.grad_norm = grad_norm_s_;
      t.host = host_s_;
      if (pp_ > 1 && (pp_rank == 0 || pp_rank == pp_ - 1)) t.embedding_sync = comm_.embedding_sync_s;
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
    return op.fraction * (forward_flops_[pp_rank * vpp_ + op.chunk] + (first_head(pp_rank, op.chunk) ? embedding_flops_fwd_ : 0.0) +
                          (last_head(pp_rank, op.chunk) ? output_flops_fwd_ : 0.0));
  }
  if (op.kind == OpKind::kBackward) {
    return op.fraction * (backward_flops_[pp_rank * vpp_ + op.chunk] + (first_head(pp_rank, op.chunk) ? embedding_flops_bwd_ : 0.0) +
                          (last_head(pp_rank, op.chunk) ? output_flops_bwd_ : 0.0));
  }
  return 0.0;
}

}  // namespace megascale::sim
