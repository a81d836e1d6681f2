// sim/layer_trace.h: what happens inside one simulated Forward / Backward op,
// layer by layer, for the trace (`megascale simulate --trace FILE
// --trace-layers`).
//
// defines: LayerSlice, LayerTrace
//
// The event simulation runs whole model chunks as ops (their duration from
// the layer programs, sim/op_costs.h). A chunk's layers are all alike and the
// TP ranks of a stage are symmetric and synchronised by every TP collective,
// so expanding each layer into its own simulated events would reproduce the
// same sums at 10-30x the op count; instead this expands an op's interval
// after the fact, with exactly the per-step times the chunk duration is made
// of (model/estimator.h program_step_times(), head_time()):
//   - compute stream: one slice per operator of model/op_cost.h, named as the
//     engine names them ("qkv", "flash_attention"; ".bwd" in backward,
//     ".recompute" for a re-run forward), with its FLOPs;
//   - tp_comm stream: one slice per TP/SP collective, named by its layer-program
//     step ("ag_attn", "rs_mlp", ...; ".bwd" in backward). A blocking collective
//     holds the compute stream for its whole time; under tp_overlap a fused one
//     runs beside its GEMM (from the GEMM's start) and the pass is longer only
//     by the fused pair's extra time (model/estimator.cc fused_extra_s);
//   - the embedding (first stage, chunk 0) and the output head (last stage,
//     last chunk) as one compute slice per operator and one collective slice.
// Layers are numbered globally: chunk c of pipeline rank r holds layers
// c*L/V + r*L/(P*V) + j, j < L/(P*V) (REFERENCE.md); the backward visits them
// in reverse. The slices of an op are scaled to its simulated interval (a
// straggler's op is longer, its slices proportionally so).
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/pipeline_layout.h"
#include "model/schedule.h"

namespace megascale::sim {

struct LayerSlice {
  model::Stream stream = model::Stream::kCompute;
  std::string kind;
  int layer = -1;       // global layer index; -1 for the embedding / output head
  double start_s = 0;   // from the start of the op, at nominal speed
  double end_s = 0;
  double flops = 0;     // per GPU
  int64_t bytes = 0;    // collectives: the full (unsharded) tensor
};

class LayerTrace {
 public:
  // REQUIRES: a valid layout (model::check_layout) and a known GPU profile.
  explicit LayerTrace(const model::Scenario& s);

  // Slices of a Forward or Backward op of `pp_rank`; empty for other kinds.
  std::vector<LayerSlice> op_slices(int pp_rank, const model::Op& op) const;
  // Nominal length of that op (the end of its last blocking step).
  double nominal_s(int pp_rank, const model::Op& op) const;

 private:
  struct Pass {
    std::vector<LayerSlice> slices;  // layer = -1 placeholders for one layer
    double length_s = 0;
  };
  void append(const Pass& pass, int layer, double* cursor, std::vector<LayerSlice>* out) const;

  int pp_ = 1, vpp_ = 1;
  model::PipelineLayout layout_;
  Pass forward_, backward_;
  Pass embedding_fwd_, embedding_bwd_, output_fwd_, output_bwd_;
};

}  // namespace megascale::sim
