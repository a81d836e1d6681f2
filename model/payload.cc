// model/payload.cc: see payload.h.
#include "model/payload.h"

#include <algorithm>

#include "model/engine_ops.h"
#include "model/pipeline_layout.h"
#include "model/profile.h"

namespace megascale::model {

// fp32 and bf16 element sizes.
constexpr double kFp32Bytes = 4.0;
constexpr double kBf16Bytes = 2.0;
constexpr double kFp8ParamGatherBytes = 1.0;  // one FP8 byte a parameter (E4M3)

double grad_element_bytes(const Optimizations& o) {
  return o.grad_reduce_dtype == GradReduceDtype::kBf16 ? kBf16Bytes : kFp32Bytes;
}

double grad_memory_element_bytes(const Optimizations& o, int zero_stage) {
  return zero_stage >= 3 ? kFp32Bytes : grad_element_bytes(o);
}

namespace {
// TE FusedAdam's fp8 moments are uint8 (a Float8Tensor) with one fp32 scale a
// tensor (transformer_engine/pytorch/optimizers/fused_adam.py). Not counted:
// the amax pass over each fp16 / fp8 state that sets its scale.
constexpr double kFp8MomentBytes = 1.0;
double moment_bytes(MomentDtype d) {
  switch (d) {
    case MomentDtype::kFp32: return kFp32Bytes;
    case MomentDtype::kBf16:
    case MomentDtype::kFp16: return kBf16Bytes;
    case MomentDtype::kFp8: return kFp8MomentBytes;
  }
  return kFp32Bytes;
}
}  // namespace

OptimizerStateBytes optimizer_state_bytes(const Optimizations& o) {
  OptimizerStateBytes b;
  if (o.optimizer_state_dtype == OptimizerStateDtype::kBf16) {
    b.main_param_held = b.main_param_read = b.main_param_written = b.exp_avg = b.exp_avg_sq = kBf16Bytes;
    return b;
  }
  b.exp_avg = moment_bytes(o.exp_avg_dtype);
  b.exp_avg_sq = moment_bytes(o.exp_avg_sq_dtype);
  switch (o.main_params_dtype) {
    case MainParamsDtype::kFp32: break;
    case MainParamsDtype::kFp16: b.main_param_held = b.main_param_read = b.main_param_written = kBf16Bytes; break;
    case MainParamsDtype::kFp32Remainders:
      // The remainder and the bf16 parameter it completes are read; the
      // remainder is written (the parameter is the step's weight write).
      b.main_param_held = b.main_param_written = kBf16Bytes;
      b.main_param_read = 2 * kBf16Bytes;
      break;
  }
  return b;
}

double grad_accumulation_bytes_per_param(const Optimizations& o) {
  switch (o.grad_accumulation) {
    case GradAccumulation::kFused: return 0.0;
    case GradAccumulation::kAdd: return kBf16Bytes + kFp32Bytes + kFp32Bytes;
    case GradAccumulation::kAdd16Bit: return 3 * kBf16Bytes;
    case GradAccumulation::kCastAdd: return kBf16Bytes + 2 * kFp32Bytes + 2 * kFp32Bytes;
  }
  return 0.0;
}

double layer_chunk_params(const Scenario& s, int pp_rank, int chunk) {
  const int layers = PipelineLayout(s.model, s.parallel).chunk_layers(pp_rank, chunk);
  return static_cast<double>(layers) * s.model.parameters_per_layer() / s.parallel.tp;
}

double dp_chunk_params(const Scenario& s, int pp_rank, int chunk) {
  if (hardware_profile(s).models_engine()) return engine_chunk_params(s, pp_rank, chunk);
  const ParallelConfig& p = s.parallel;
  double params = layer_chunk_params(s, pp_rank, chunk);
  const double embedding = static_cast<double>(s.model.vocab) * s.model.hidden / p.tp;
  const bool first = pp_rank == 0 && chunk == 0;
  const bool last = pp_rank == p.pp - 1 && chunk == p.vpp - 1;
  if (first || last) params += embedding;  // once when P == V == 1 (same chunk, one copy)
  if (first && last && !s.model.tie_embeddings) params += embedding;  // untied: the output matrix too
  return params;
}

bool embedding_sync_needed(const Scenario& s) {
  return s.parallel.pp > 1 && s.model.tie_embeddings && !hardware_profile(s).models_engine();
}

double param_gather_element_bytes(const Scenario& s) {
  const Optimizations& o = s.optimizations;
  // FP8 parameters gathered as their one-byte data (Megatron-Core
  // --fp8-param-gather; MXFP8's E8M0 block scales, 1/32 of a byte a value,
  // left out).
  if (o.fp8 && o.fp8_param_gather && !hardware_profile(s).models_engine()) return kFp8ParamGatherBytes;
  return hardware_profile(s).param_gather_bytes;
}

double dp_payload_bytes(const Scenario& s, int pp_rank, int chunk, OpKind kind) {
  const double params = dp_chunk_params(s, pp_rank, chunk);
  return kind == OpKind::kDpAllGather ? params * param_gather_element_bytes(s)
                                      : params * grad_element_bytes(s.optimizations);
}

double cp_kv_block_bytes(const ModelConfig& m, const ParallelConfig& p, double element_bytes) {
  const double kv_heads = std::max(1.0, static_cast<double>(m.kv_heads) / p.tp);
  return 2.0 * p.micro_batch * m.seq_len * kv_heads * m.head_dim() * element_bytes;  // K and V
}

}  // namespace megascale::model
