// model/job_schedule.cc: scenario -> Schedule IR, estimate -> op durations.
#include "model/job_schedule.h"

#include <algorithm>
#include <cmath>

#include "model/layer_program.h"
#include "model/op_cost.h"
#include "model/payload.h"
#include "model/pipeline_layout.h"
#include "model/profile.h"

namespace megascale::model {

int64_t p2p_message_bytes(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const GpuProfile& gpu = hardware_profile(s);
  if (gpu.models_engine()) {
    // The engine sends its whole (Tl, B, C) fp32 activation: the sequence
    // shard under SP, the full sequence otherwise (engine/model_chunk.h).
    const int64_t tokens = static_cast<int64_t>(p.micro_batch) * s.model.seq_len /
                           (p.sequence_parallel && p.tp > 1 ? p.tp : 1);
    return tokens * s.model.hidden * static_cast<int64_t>(gpu.activation_bytes);
  }
  // Megatron-LM's scatter-gather: each TP rank sends 1/tp of the bf16 activation.
  return static_cast<int64_t>(p.micro_batch) * s.model.seq_len * s.model.hidden * 2 / p.tp;
}

// The largest chunk's layers (each DP op's own bytes are set per rank below).
int64_t dp_chunk_bytes(const Scenario& s) {
  const double layers = PipelineLayout(s.model, s.parallel).max_chunk_layers();
  return static_cast<int64_t>(layers * s.model.parameters_per_layer() / s.parallel.tp *
                              grad_element_bytes(s.optimizations));
}

ScheduleOptions schedule_options(const ModelConfig& m, const ParallelConfig& p, const Optimizations& opt) {
  ScheduleOptions o;
  o.pp = p.pp;
  o.vpp = p.vpp;
  o.microbatches = p.microbatches();
  o.layers = m.layers;
  o.first_stage_layers = p.first_stage_layers;
  o.last_stage_layers = p.last_stage_layers;
  o.custom_chunk_layers = p.pipeline_chunk_layers;
  o.zero_stage = p.zero_stage;
  o.dp = p.dp;
  o.pp_overlap = opt.pp_overlap;
  o.dp_overlap = opt.dp_overlap;
  o.dp_overlap_param_gather = opt.overlaps_param_gather();
  o.data_pipeline = opt.data_pipeline;
  return o;
}

int dp_buckets_per_chunk(const Scenario& s) {
  const Optimizations& o = s.optimizations;
  if (o.dp_bucket_params == 0 || !o.dp_overlap || s.parallel.dp <= 1 || s.parallel.zero_stage > 2) return 1;
  if (hardware_profile(s).models_engine()) return 1;  // the engine reduces whole chunks
  const double bucket = static_cast<double>(effective_dp_bucket_params(s));
  // One count for every chunk: the largest chunk's (uneven stages differ by a
  // layer or two; the schedule splits every chunk's pieces alike).
  const double layers = PipelineLayout(s.model, s.parallel).max_chunk_layers();
  const double buckets = std::ceil(layers * s.model.parameters_per_layer() / s.parallel.tp / bucket);
  return static_cast<int>(std::clamp(buckets, 1.0, static_cast<double>(kMaxDpBuckets)));
}

int64_t effective_dp_bucket_params(const Scenario& s) {
  const int64_t b = s.optimizations.dp_bucket_params;
  return b >= 0 ? b : megatron_default_dp_bucket_params(s.parallel.dp);
}

ScheduleOptions schedule_options(const Scenario& s) {
  ScheduleOptions o = schedule_options(s.model, s.parallel, s.optimizations);
  o.activation_bytes = p2p_message_bytes(s);
  o.dp_bytes_per_chunk = dp_chunk_bytes(s);
  o.dp_buckets = dp_buckets_per_chunk(s);
  return o;
}

Schedule build_job_schedule(const Scenario& s) {
  Schedule sch = build_schedule(schedule_options(s));
  for (RankSchedule& rank : sch.ranks) {
    for (Op& op : rank.ops) {
      if (is_dp_collective(op.kind)) {
        op.bytes = static_cast<int64_t>(op.fraction * dp_payload_bytes(s, rank.pp_rank, op.chunk, op.kind));
      }
    }
  }
  const std::vector<OperatorCost> ops =
      layer_operators(s.model, s.parallel, s.optimizations.efficient_operators, s.optimizations.eager_elementwise);
  sch.layer_forward = layer_forward_program(s.model, s.parallel, ops);
  sch.layer_backward = layer_backward_program(s.model, s.parallel, ops);
  return sch;
}

DurationFn estimated_durations(const Scenario& s, const Estimate& e) {
  // The step op: update kernels, gradient-norm all-reduce, host work (the
  // embedding sync is a pipeline exchange the closed form counts apart).
  const double optimizer_s = e.breakdown.optimizer_s + e.breakdown.grad_norm_s + e.breakdown.host_s;
  const double data_s = s.optimizations.data_pipeline ? 0.0 : e.breakdown.data_s;
  const double fwd_s = e.layer_forward_s;  // per layer: each chunk holds its own count
  const double bwd_s = e.layer_backward_s;
  const PipelineLayout layout(s.model, s.parallel);
  const double p2p_s = e.p2p_s;
  const double rs_s = e.dp_reduce_scatter_chunk_s;
  const double ag_s = e.dp_all_gather_chunk_s;
  return [=](int pp_rank, const Op& op) -> double {
    switch (op.kind) {
      case OpKind::kDataLoad: return data_s;
      case OpKind::kForward: return op.fraction * (layout.chunk_layers(pp_rank, op.chunk) * fwd_s);
      case OpKind::kBackward: return op.fraction * (layout.chunk_layers(pp_rank, op.chunk) * bwd_s);
      case OpKind::kSendActivation:
      case OpKind::kSendGradient: return p2p_s;
      case OpKind::kRecvActivation:
      case OpKind::kRecvGradient: return 0.0;
      case OpKind::kDpReduceScatter:
      case OpKind::kDpAllReduce: return op.fraction * rs_s;
      case OpKind::kDpAllGather: return op.fraction * ag_s;
      case OpKind::kOptimizerStep: return optimizer_s;
    }
    return 0.0;
  };
}

}  // namespace megascale::model
