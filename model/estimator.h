// model/estimator.h: the analytical fidelity: iteration time, bubble, exposed
// communication per parallelism dimension and MFU of one configuration, in
// microseconds of CPU time (used by `search`, and by `simulate` until sim/ lands).
//
// The iteration is the busiest pipeline rank's critical path:
//   data (synchronous loading when the data pipeline is off)
//   + compute: M*V chunks of forward + backward kernels (model/op_cost.h),
//     including recomputation and the embedding / output head on the first /
//     last stage
//   + TP/SP collectives not hidden by tp_overlap (model/layer_program.h)
//   + pipeline bubble (P-1) x (one chunk's forward + backward)
//   + pipeline p2p not hidden by pp_overlap
//   + data-parallel reduce-scatter / all-gather not hidden by dp_overlap
//   + optimizer step.
// MFU = model_flops_per_iteration() / (iteration_time x GPUs x peak bf16); the
// FLOPs formula is stated in model/op_cost.h (72 B s L h^2 (1 + s/6h + V/12Lh)
// for the standard GPT, no causal halving, SWA and the parallel block counted as
// the full sequential model).
//
// Thread-safety: pure functions; Estimator caches nothing.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <vector>

#include "model/collective_cost.h"
#include "model/config.h"
#include "model/hardware.h"
#include "model/layer_program.h"
#include "model/memory.h"
#include "model/op_cost.h"

namespace megascale::model {

// Seconds per iteration on the critical path, by category. They add up to
// iteration_time_s.
struct TimeBreakdown {
  double data_s = 0;          // synchronous data loading / preprocessing
  double compute_s = 0;       // forward + backward kernels (no recomputation)
  double recompute_s = 0;     // re-run forward work
  double tp_exposed_s = 0;    // TP/SP collectives on the critical path
  double bubble_s = 0;        // pipeline fill / drain
  double pp_exposed_s = 0;    // p2p on the critical path
  double dp_exposed_s = 0;    // DP reduce-scatter / all-gather (ZeRO gathers) on the critical path
  double embedding_sync_s = 0;  // tied input/output embedding gradient all-reduce, first <-> last stage
  double grad_norm_s = 0;     // global small all-reduces: gradient norm (clipping; LAMB), FP8 amax
  double optimizer_s = 0;     // optimizer update kernels, FP8 weight casts (CPU engine: its whole measured step)
  double host_s = 0;          // host work per iteration outside the ops (profile's step_overhead_s)

  double total() const {
    return data_s + compute_s + recompute_s + tp_exposed_s + bubble_s + pp_exposed_s + dp_exposed_s +
           embedding_sync_s + grad_norm_s + optimizer_s + host_s;
  }
  // *this += w x b, category by category.
  void add(const TimeBreakdown& b, double w = 1.0) {
    data_s += w * b.data_s;
    compute_s += w * b.compute_s;
    recompute_s += w * b.recompute_s;
    tp_exposed_s += w * b.tp_exposed_s;
    bubble_s += w * b.bubble_s;
    pp_exposed_s += w * b.pp_exposed_s;
    dp_exposed_s += w * b.dp_exposed_s;
    embedding_sync_s += w * b.embedding_sync_s;
    grad_norm_s += w * b.grad_norm_s;
    optimizer_s += w * b.optimizer_s;
    host_s += w * b.host_s;
  }
};

struct Estimate {
  double iteration_time_s = 0;
  double mfu = 0;                 // fraction of peak bf16
  double tokens_per_s = 0;
  double bubble_fraction = 0;     // bubble_s / per-rank compute busy time; (P-1)/(V*M) ideal
                                  // (Megatron-LM's definition: above 1 when M < P - 1)
  double model_flops = 0;         // per iteration, the MFU numerator
  TimeBreakdown breakdown;
  MemoryBreakdown memory;
  // Per (micro-batch, chunk) durations of the layers of a chunk of the stage
  // with the most layers (every stage's when they are even), for reports and
  // tests; and of one layer (a chunk is its layers times these).
  double chunk_forward_s = 0;     // incl. exposed TP
  double chunk_backward_s = 0;    // incl. recompute and exposed TP
  double layer_forward_s = 0;
  double layer_backward_s = 0;
  double p2p_s = 0;               // one activation / gradient message
  // Per iteration, the embedding's passes on the first pipeline rank and the
  // output layer's + loss's on the last (all M micro-batches, exposed TP
  // included): in layer passes, head / (M x (layer_forward_s +
  // layer_backward_s)) (model/head_balance.h).
  double first_head_s = 0;
  double last_head_s = 0;

  // The bubble's share of the step, in [0, 1) (bubble_fraction is relative to
  // the compute, not to the step).
  double bubble_share_of_step() const { return iteration_time_s > 0 ? breakdown.bubble_s / iteration_time_s : 0.0; }
  double dp_reduce_scatter_chunk_s = 0;
  double dp_all_gather_chunk_s = 0;
};

// The links each dimension's traffic uses, from Megatron-LM's rank order (TP
// fastest, then DP, then PP): NVLink while the group fits in one node, else one
// NIC rail (a GPU's share of the node's NICs).
struct ParallelLinks {
  Link tp;
  Link pp;
  Link dp;
  bool pp_inside_node = false;
};
ParallelLinks parallel_links(const Scenario& s, const GpuProfile& gpu);

// One pass of a layer program on one TP rank: kernel time, recomputation, the
// TP collectives not hidden by tp_overlap (fused with their GEMM as MegaScale
// section 3.2 describes), and the FLOPs executed.
struct ProgramTime {
  double compute_s = 0;
  double recompute_s = 0;
  double tp_exposed_s = 0;
  double flops = 0;
};
// The GPU as a GEMM beside TP communication sees it (without_comm_sms): less an
// NCCL kernel's channels, or less Transformer Engine's userbuffers SMs
// (model/fused_overlap.h), whichever the scenario's overlap needs; empty where
// it needs none.
struct CommSmProfiles {
  std::optional<GpuProfile> nccl;       // nccl_nvlink_ctas SMs held
  // Userbuffers: the GPU less the SMs each of the job's overlaps holds, by
  // that SM count (model/fused_overlap.h ub_overlap).
  std::map<int, GpuProfile> ub_held;
};
CommSmProfiles comm_sm_profiles(const Scenario& s, const GpuProfile& gpu);

// `shared` (optional): comm_sm_profiles(s, gpu), when the caller already has it
// (a profile copy per call is a measurable part of an estimate).
ProgramTime program_time(const LayerProgram& program, const std::vector<OperatorCost>& ops,
                         bool backward, const Scenario& s, const Link& tp_link,
                         const GpuProfile& gpu, const CommSmProfiles* shared = nullptr);

// One transformer layer's forward and backward pass for one micro-batch on one
// TP rank: kernels, recomputation and the TP/SP (and CP ring) time they expose,
// what each model chunk of estimate() repeats once per layer. Published per-layer
// measurements are compared with it (calibrate/layer_check.h).
struct LayerPasses {
  ProgramTime forward;
  ProgramTime backward;
  double forward_s() const { return forward.compute_s + forward.recompute_s + forward.tp_exposed_s; }
  double backward_s() const { return backward.compute_s + backward.recompute_s + backward.tp_exposed_s; }
};
// `ops`: job_layer_operators(s, gpu); `shared` as for program_time().
LayerPasses layer_passes(const Scenario& s, const GpuProfile& gpu, const std::vector<OperatorCost>& ops,
                         const Link& tp_link, const CommSmProfiles* shared = nullptr);
// The same with the scenario's own profile, operators and TP link. REQUIRES: as
// estimate().
LayerPasses layer_passes(const Scenario& s);

// The same pass step by step (program_time() is their sum): a compute step's
// kernels (op_s[j] for operator step.ops[j], run forward when !backward or the
// step is recomputation, times its share, LayerStep::share); a collective's full time (collective_s) and what it
// adds to the pass (added_s: all of it when blocking, the fused pair's extra
// over its GEMM under tp_overlap). Used for per-layer traces (sim/layer_trace.h).
struct StepTime {
  std::vector<double> op_s;
  double collective_s = 0;
  double added_s = 0;  // seconds this step adds to the pass
};
std::vector<StepTime> program_step_times(const LayerProgram& program, const std::vector<OperatorCost>& ops,
                                         bool backward, const Scenario& s, const Link& tp_link,
                                         const GpuProfile& gpu, const CommSmProfiles* shared = nullptr);

// Embedding (output_head = false) or output head work per micro-batch: kernels
// plus the TP collectives around them (SP: RS of the embedding output, AG before
// the logits; vocab-parallel cross-entropy: three small all-reduces).
struct HeadTime {
  double forward_s = 0;
  double backward_s = 0;
  double tp_forward_s = 0;
  double tp_backward_s = 0;
  double flops_forward = 0;
  double flops_backward = 0;
};
HeadTime head_time(const std::vector<OperatorCost>& ops, const Scenario& s, const Link& tp_link,
                   const GpuProfile& gpu, bool output_head);

// Estimates one configuration. REQUIRES: the layout is valid (check_layout()) and
// hardware.gpu names a profile (throws std::invalid_argument otherwise).
// Synchronous data loading costs the profile's data_load_s_per_sample.
Estimate estimate(const Scenario& s);

}  // namespace megascale::model
