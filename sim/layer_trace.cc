// sim/layer_trace.cc: see layer_trace.h.
#include "sim/layer_trace.h"

#include <algorithm>
#include <map>

#include "model/engine_ops.h"
#include "model/estimator.h"
#include "model/hardware.h"
#include "model/layer_program.h"
#include "model/op_cost.h"
#include "model/profile.h"

namespace megascale::sim {
namespace {

using model::LayerStepKind;
using model::OpKind;
using model::Stream;

// One pass of the layer program as slices from t = 0, in program order.
std::vector<LayerSlice> pass_slices(const model::LayerProgram& program,
                                    const std::vector<model::OperatorCost>& ops, bool backward,
                                    const model::Scenario& s, const model::Link& tp,
                                    const model::GpuProfile& gpu, double* length_s) {
  const std::vector<model::StepTime> times = model::program_step_times(program, ops, backward, s, tp, gpu);
  std::vector<LayerSlice> out;
  std::map<int, double> gemm_start;  // operator index -> start of its slice in this pass
  double t = 0;
  for (size_t k = 0; k < program.size(); ++k) {
    const model::LayerStep& step = program[k];
    const bool as_forward = !backward || step.recompute;
    const std::string suffix = !backward ? "" : step.recompute ? ".recompute" : ".bwd";
    if (step.kind == LayerStepKind::kCompute) {
      for (size_t j = 0; j < step.ops.size(); ++j) {
        const model::OperatorCost& op = ops[step.ops[j]];
        const double d = times[k].op_s[j];
        out.push_back({Stream::kCompute, op.name + suffix, -1, t, t + d,
                       step.share(j) * (as_forward ? op.fwd_flops : op.bwd_flops), 0});
        gemm_start[step.ops[j]] = t;
        t += d;
      }
      continue;
    }
    const bool fused = times[k].added_s < times[k].collective_s;  // hidden in part behind its GEMM
    // An all-gather feeds a GEMM that has not run yet in this pass: it starts
    // now; a reduce-scatter is fed by one that already ran: it starts with it.
    double begin = t;
    if (fused && gemm_start.count(step.fused_with)) begin = gemm_start[step.fused_with];
    out.push_back({Stream::kTpComm, step.name + suffix, -1, begin, begin + times[k].collective_s, 0, step.bytes});
    t += times[k].added_s;
  }
  *length_s = t;
  return out;
}

// Embedding / output head: its operators back to back, then (embedding
// forward, output backward) or before them (output forward, embedding
// backward) the TP collective, as model::head_time() times them.
std::vector<LayerSlice> head_slices(const std::vector<model::OperatorCost>& ops, const model::Scenario& s,
                                    const model::GpuProfile& gpu, bool output_head, bool backward,
                                    double* length_s) {
  const model::HeadTime h = model::head_time(ops, s, model::parallel_links(s, gpu).tp, gpu, output_head);
  const double tp_s = backward ? h.tp_backward_s : h.tp_forward_s;
  const std::string suffix = backward ? ".bwd" : "";
  const bool collective_first = output_head != backward;  // output fwd: AG first; embedding bwd: AG first
  const char* name = output_head ? (backward ? "rs_dlogits" : "ag_logits")
                                 : (backward ? "ag_dembedding" : "rs_embedding");
  const int64_t bytes = static_cast<int64_t>(s.parallel.micro_batch) * s.model.seq_len * s.model.hidden * 2;
  std::vector<LayerSlice> out;
  double t = 0;
  auto collective = [&] {
    if (tp_s <= 0) return;
    out.push_back({Stream::kTpComm, std::string(name) + suffix, -1, t, t + tp_s, 0, bytes});
    t += tp_s;
  };
  if (collective_first) collective();
  // Backward runs the operators in reverse order.
  std::vector<size_t> order(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) order[i] = backward ? ops.size() - 1 - i : i;
  for (size_t i : order) {
    const double d = backward ? model::backward_time_s(ops[i], gpu) : model::forward_time_s(ops[i], gpu);
    out.push_back({Stream::kCompute, ops[i].name + suffix, -1, t, t + d,
                   backward ? ops[i].bwd_flops : ops[i].fwd_flops, 0});
    t += d;
  }
  if (!collective_first) collective();
  *length_s = t;
  return out;
}

}  // namespace

LayerTrace::LayerTrace(const model::Scenario& s)
    : pp_(s.parallel.pp), vpp_(s.parallel.vpp), layout_(s.model, s.parallel) {
  model::GpuProfile cpu_storage;
  const model::GpuProfile& gpu = model::job_profile(s, &cpu_storage);
  const model::ParallelConfig& p = s.parallel;
  const std::vector<model::OperatorCost> ops = model::job_layer_operators(s, gpu);
  const model::Link tp = model::parallel_links(s, gpu).tp;
  forward_.slices = pass_slices(model::layer_forward_program(s.model, p, ops), ops, false, s, tp, gpu, &forward_.length_s);
  backward_.slices = pass_slices(model::layer_backward_program(s.model, p, ops), ops, true, s, tp, gpu, &backward_.length_s);
  const std::vector<model::OperatorCost> emb = model::job_embedding_operators(s, gpu);
  const std::vector<model::OperatorCost> out = model::job_output_operators(s, gpu);
  embedding_fwd_.slices = head_slices(emb, s, gpu, false, false, &embedding_fwd_.length_s);
  embedding_bwd_.slices = head_slices(emb, s, gpu, false, true, &embedding_bwd_.length_s);
  output_fwd_.slices = head_slices(out, s, gpu, true, false, &output_fwd_.length_s);
  output_bwd_.slices = head_slices(out, s, gpu, true, true, &output_bwd_.length_s);
}

void LayerTrace::append(const Pass& pass, int layer, double* cursor, std::vector<LayerSlice>* out) const {
  for (LayerSlice sl : pass.slices) {
    sl.layer = layer;
    sl.start_s += *cursor;
    sl.end_s += *cursor;
    out->push_back(std::move(sl));
  }
  *cursor += pass.length_s;
}

std::vector<LayerSlice> LayerTrace::op_slices(int pp_rank, const model::Op& op) const {
  std::vector<LayerSlice> out;
  if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) return out;
  const bool first = pp_rank == 0 && op.chunk == 0;
  const bool last = pp_rank == pp_ - 1 && op.chunk == vpp_ - 1;
  const int base = layout_.first_layer(pp_rank, op.chunk);
  const int layers = layout_.chunk_layers(pp_rank, op.chunk);
  double t = 0;
  if (op.kind == OpKind::kForward) {
    if (first) append(embedding_fwd_, -1, &t, &out);
    for (int j = 0; j < layers; ++j) append(forward_, base + j, &t, &out);
    if (last) append(output_fwd_, -1, &t, &out);
  } else {
    if (last) append(output_bwd_, -1, &t, &out);
    for (int j = layers - 1; j >= 0; --j) append(backward_, base + j, &t, &out);
    if (first) append(embedding_bwd_, -1, &t, &out);
  }
  return out;
}

double LayerTrace::nominal_s(int pp_rank, const model::Op& op) const {
  if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) return 0;
  const bool first = pp_rank == 0 && op.chunk == 0;
  const bool last = pp_rank == pp_ - 1 && op.chunk == vpp_ - 1;
  if (op.kind == OpKind::kForward) {
    return (first ? embedding_fwd_.length_s : 0) + layout_.chunk_layers(pp_rank, op.chunk) * forward_.length_s +
           (last ? output_fwd_.length_s : 0);
  }
  return (last ? output_bwd_.length_s : 0) + layout_.chunk_layers(pp_rank, op.chunk) * backward_.length_s +
         (first ? embedding_bwd_.length_s : 0);
}

}  // namespace megascale::sim
