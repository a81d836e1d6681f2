// model/estimator.cc: closed-form iteration time of a 3D-parallel configuration.
#include "model/estimator.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "model/chunk_stall.h"
#include "model/collective_cost.h"
#include "model/engine_ops.h"
#include "model/fused_overlap.h"
#include "model/job_schedule.h"
#include "model/layer_program.h"
#include "model/op_cost.h"
#include "model/p2p_contention.h"
#include "model/payload.h"
#include "model/pipeline_layout.h"
#include "model/profile.h"
#include "model/speed_spread.h"
#include "model/throughput.h"

namespace megascale::model {
namespace {


// Optimizer step traffic per parameter of the local shard: the master weight
// and two moments read and written (OptimizerStateBytes::step_traffic,
// model/payload.h: 24 B in fp32), the fp32 gradient read (4 B) and the bf16
// weight written (2 B): 30 B for Adam with fp32 state, 18 B with bf16 state.
// LAMB also reads the master weight and the fp32 update again for the two
// per-tensor norms (+8 B in fp32). Gradient clipping reads the gradient once
// more (+4 B).
constexpr double kStepGradReadBytes = 4.0;
constexpr double kStepWeightWriteBytes = 2.0;
constexpr double kLambUpdateReadBytes = 4.0;
constexpr double kClipBytesPerParam = 4.0;
// bf16 gradients (grad_reduce_dtype) leave these counts as they are: Megatron-
// Core's distributed optimizer steps on an fp32 copy of its shard (+6 B:
// _copy_model_grads_to_main_grads, shard_model_grad.float()), Apex's
// DistributedFusedAdam (NeMo 24.07) reads the bf16 gradient in its kernel
// (-2 B); either is under a millisecond on the shards of the runs here.
// FP8: Transformer Engine casts every linear weight to FP8 with its transpose
// (2 + 1 + 1 B) once per step, on the first micro-batch, and reuses the copies
// for the rest (is_first_microbatch, which Megatron-Core's TE layers pass);
// without the transpose (2 + 1 B) where the FP8 GEMM takes any layout
// (GpuProfile::fp8_gemm_any_layout); MXFP8 writes both copies with their block
// scales (2 + 2 x (1 + 1/32) B): the BF16 read plus fp8_copy_bytes_per_value.
constexpr double kBf16WeightBytes = 2.0;
// Current scaling's amax pass over each BF16 weight before its cast
// (Transformer Engine Float8CurrentScalingQuantizer: nvte_compute_amax).
constexpr double kFp8CurrentScalingAmaxBytesPerParam = 2.0;

CollectiveKind collective_kind(LayerStepKind k) {
  switch (k) {
    case LayerStepKind::kTpAllGather:
      return CollectiveKind::kAllGather;
    case LayerStepKind::kTpReduceScatter:
      return CollectiveKind::kReduceScatter;
    default:
      return CollectiveKind::kAllReduce;
  }
}

// Extra time a TP collective adds when fused with GEMM `op` (MegaScale section
// 3.2): the GEMM is split into `chunks` pieces along the sequence and each piece's
// communication overlaps the neighbouring piece's compute (model/fused_overlap.h:
// a two-stage pipeline in which the GEMM piece beside an NCCL kernel runs on the
// SMs the kernel leaves); splitting lowers the GEMM's own efficiency (computed
// from the smaller shape). The implementation picks the chunk count (2, 4 or tp)
// that is fastest, or runs unfused when that is faster.
// `shared`: `gpu` less the SMs the collective holds (without_comm_sms).
double fused_extra_s(const OperatorCost& op, bool backward_dgrad, double comm_s, CommSide side,
                     int tp, const GpuProfile& gpu, const GpuProfile& shared) {
  auto gemm_s = [&](const GpuProfile& g, int64_t rows) {
    return backward_dgrad ? fp8_gemm_time_s(g, rows, op.k, op.n, op.gemm_speedup)
                          : fp8_gemm_time_s(g, rows, op.n, op.k, op.gemm_speedup);
  };
  const double whole_s = gemm_s(gpu, op.m);
  double best_extra_s = comm_s;  // unfused: the collective runs alone
  for (int chunks : {2, 4, tp}) {
    if (chunks < 2 || chunks > tp || op.m % chunks != 0) continue;
    const double pair_s = fused_pair_time_s(chunks, gemm_s(gpu, op.m / chunks),
                                            gemm_s(shared, op.m / chunks), comm_s, side);
    best_extra_s = std::min(best_extra_s, pair_s - whole_s);
  }
  return best_extra_s;
}

// Extra time of a collective issued just before GEMM `op`'s input-gradient
// product and run beside all of it (SP backward's input re-gather, which
// Megatron-LM starts asynchronously before the dgrad GEMM and waits for before
// the weight gradient): while it is in flight the GEMM runs on the SMs its NCCL
// kernel leaves (`shared`), after it on all of them; a collective longer than
// that is exposed by the difference.
double beside_dgrad_extra_s(const OperatorCost& op, double comm_s, const GpuProfile& gpu,
                            const GpuProfile& shared) {
  const double alone_s = fp8_gemm_time_s(gpu, op.m, op.k, op.n, op.gemm_speedup);
  const double beside_s = fp8_gemm_time_s(shared, op.m, op.k, op.n, op.gemm_speedup);
  if (comm_s >= beside_s) return comm_s - alone_s;
  return comm_s * (1.0 - alone_s / beside_s);
}

// TE's name of the GEMM a userbuffers overlap of `step` rides on
// (model/fused_overlap.h kUbGemms): the forward all-gather before qkv / fc1 and
// the reduce-scatter after proj / fc2 are "<gemm>_fprop"; in backward the
// output-gradient all-gather before proj / fc2 and the input re-gather beside
// the qkv / fc1 input-gradient GEMM are "<gemm>_dgrad", the input gradient's
// reduce-scatter (beside the weight-gradient GEMM) "<gemm>_wgrad". A parallel
// block's fused qkv_fc1 / proj_fc2 GEMMs take qkv's / proj's settings.
std::string ub_gemm_name(const LayerStep& step, const OperatorCost& op, bool backward) {
  std::string gemm = op.name == "qkv_fc1" ? "qkv" : op.name == "proj_fc2" ? "proj" : op.name;
  if (!backward) return gemm + "_fprop";
  if (step.kind == LayerStepKind::kTpReduceScatter) return gemm + "_wgrad";
  return gemm + "_dgrad";
}

// Extra time of TP collective `step` under Transformer Engine's userbuffers
// overlap `u` (model/fused_overlap.h: the method, SMs, pieces and margin of
// that GEMM), `comm_s` its whole time. `held`: the GPU less the SMs the
// communication holds (u.num_sm); with u.sm_margin the GEMM runs on them
// throughout (TE's set_sm_margin), else only while the communication runs.
//  - ring exchange: u.num_splits pieces, the GEMM on the SMs u.num_sm leave
//    while a piece is in flight (throughout with u.sm_margin); before the
//    GEMM for an all-gather, after each piece for a reduce-scatter (`side`),
//    which then sums the tp partial output chunks in one bandwidth-bound
//    kernel (TE's reduce_bf16: tp chunks read, one written);
//  - pipeline (the forward reduce-scatter after proj / fc2): u.num_splits
//    pieces;
//  - bulk (backward input re-gather beside the dgrad GEMM, and the input
//    gradient's reduce-scatter beside the wgrad GEMM, timed as the dgrad GEMM:
//    the same FLOPs): the collective beside one whole GEMM, exposed where it
//    outlasts it.
double userbuffers_extra_s(const OperatorCost& op, bool backward, double comm_s, const UbOverlap& u, CommSide side,
                           int tp, const GpuProfile& gpu, const GpuProfile& held) {
  auto gemm_s = [&](const GpuProfile& g, int64_t rows) {
    return backward ? fp8_gemm_time_s(g, rows, op.k, op.n, op.gemm_speedup)
                    : fp8_gemm_time_s(g, rows, op.n, op.k, op.gemm_speedup);
  };
  const double whole_s = gemm_s(gpu, op.m);
  switch (u.method) {
    case UbMethod::kBulk: {
      const double beside_s = gemm_s(held, op.m);
      if (u.sm_margin || comm_s >= beside_s) return std::max(comm_s, beside_s) - whole_s;
      return comm_s * (1.0 - whole_s / beside_s);  // shared while it runs, then all SMs
    }
    case UbMethod::kRingExchange: {
      if (u.num_splits < 2 || op.m % u.num_splits != 0) return comm_s;
      const double shared_s = gemm_s(held, op.m / u.num_splits);
      const double piece_s = u.sm_margin ? shared_s : gemm_s(gpu, op.m / u.num_splits);
      const double pair_s = fused_pair_time_s(u.num_splits, piece_s, shared_s, comm_s, side);
      if (side == CommSide::kBefore) return pair_s - whole_s;
      // Forward output: op.m x op.n; its tp partial chunks of op.m / tp rows.
      const double out_elements = static_cast<double>(op.m) * static_cast<double>(op.n);
      const double reduce_s = memory_time_s(gpu, out_elements * (1.0 + 1.0 / std::max(1, tp)) * gpu.activation_bytes);
      return pair_s + reduce_s - whole_s;
    }
    case UbMethod::kPipeline: {
      if (u.num_splits < 2 || op.m % u.num_splits != 0) return comm_s;
      const double shared_s = gemm_s(held, op.m / u.num_splits);
      const double piece_s = u.sm_margin ? shared_s : gemm_s(gpu, op.m / u.num_splits);
      return fused_pair_time_s(u.num_splits, piece_s, shared_s, comm_s, CommSide::kAfter) - whole_s;
    }
  }
  return comm_s;
}

// Exposed time of a chain of per-chunk DP collectives on one stream, where chunk
// c may start at ready_s[c] and the compute it overlaps ends at end_s.
double chain_exposed_s(const std::vector<double>& ready_s, const std::vector<double>& dur_s,
                       double end_s) {
  double t = 0;
  for (size_t i = 0; i < ready_s.size(); ++i) t = std::max(t, ready_s[i]) + dur_s[i];
  return std::max(0.0, t - end_s);
}

// ZeRO-3 on the Schedule IR's DP stream (model/schedule.h): the parameters of a
// chunk are gathered before every forward and every backward of it (2 M
// gathers per chunk, prefetched in need order as far as the stream allows), and
// each chunk's gradients reduce-scattered once. The stream is FIFO, so two
// bounds, the larger exposed:
//  - compute-bound: with dp_overlap a chunk's reduce-scatter waits for its last
//    backward and the gather of the next backward queues behind it, so each
//    chunk exposes rs + ag; without, the reduce-scatters run after the last
//    backward (all exposed) and the gathers hide under compute, all but the
//    first: the step's first forward waits for it, behind nothing but the
//    synchronous data loading (`first_window_s`; the Schedule IR has no
//    DataLoad op under an asynchronous data pipeline);
//  - stream-bound: the stream's whole load (gathers, and with dp_overlap the
//    reduce-scatters) plus the last backward, which follows the last gather,
//    against the compute path `compute_path_s`; without dp_overlap the
//    reduce-scatters still follow at the end.
// Agrees with replaying the schedule within a few percent
// (tests/model/estimator_test.cc).
double zero3_exposed_s(const std::vector<double>& rs, const std::vector<double>& ag, int microbatches,
                       double chunk_backward_s, double compute_path_s, bool dp_overlap, double first_window_s) {
  double gathers = 0, syncs = 0, blocked = 0;
  for (size_t c = 0; c < rs.size(); ++c) {
    gathers += 2.0 * microbatches * ag[c];
    syncs += rs[c];
    blocked += rs[c] + ag[c];
  }
  if (dp_overlap) {
    return std::max(blocked, gathers + syncs + chunk_backward_s - compute_path_s);
  }
  const double first_gather_s = ag.empty() ? 0.0 : std::max(0.0, ag[0] - first_window_s);
  return syncs + std::max(first_gather_s, gathers + chunk_backward_s - compute_path_s);
}

}  // namespace

ParallelLinks parallel_links(const Scenario& s, const GpuProfile& gpu) {
  const ParallelConfig& p = s.parallel;
  const HardwareConfig& hw = s.hardware;
  const double nic_share = std::min(1.0, static_cast<double>(hw.nics_per_node) / hw.gpus_per_node);
  Link network = network_link(nic_busbw_gbs(hw.nic_gbps) * nic_share);
  Link nvlink = nvlink_link(gpu.nvlink_busbw_gbs);
  // Measured collectives (a calibrated profile) answer before the formula.
  if (const ProfileTables* t = gpu.measured(); t != nullptr && !t->collectives.empty()) {
    network.measured = &t->collectives;
    nvlink.measured = &t->collectives;
  }
  ParallelLinks l;
  // TP is fastest in either rank order (model/config.h RankOrder).
  const int node = hw.gpus_per_node;
  l.tp = p.tp <= node ? nvlink : network;
  if (p.tp <= node) l.tp.gather_scatter_extra = gpu.tp_gather_scatter_extra;
  // The gradient group's ranks on one server, and whether pipeline neighbours
  // share one, by the rank order (model/config.h gpu_of).
  int dp_per_node = 1;
  if (p.rank_order == RankOrder::kTpCpDpPp) {
    // Megatron's default: the cp x dp gradient ranks follow TP, then PP.
    dp_per_node = std::max(1, std::min(p.dp, node / std::max(1, p.tp)));
    l.pp_inside_node = static_cast<int64_t>(p.tp) * p.dp * p.pp <= node;
  } else {
    // tp-cp-pp-dp: CP ranks follow TP, then the pipeline, then the replicas.
    const int cp = std::max(1, p.cp);
    const int64_t tp_cp = static_cast<int64_t>(p.tp) * cp;
    const int cp_per_node = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(cp, node / std::max(1, p.tp))));
    const int64_t stride = tp_cp * p.pp;  // between replicas
    const int replicas_per_node =
        stride < node ? static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(p.replicas(), node / stride))) : 1;
    dp_per_node = cp_per_node * replicas_per_node;
    l.pp_inside_node = stride <= node;  // a whole pipeline on one server
  }
  l.dp = dp_per_node >= p.dp ? nvlink : network;
  // A DP group with m > 1 ranks on each of several servers (TP < GPUs per node):
  // NCCL's ring runs one channel per local rank, each leaving the server on its
  // own NIC (network/collectives.h kRing), so the ring's bus bandwidth is m
  // NICs' worth, up to the NVLink figure.
  if (dp_per_node < p.dp && dp_per_node > 1) {
    Link wide = network_link(std::min(gpu.nvlink_busbw_gbs, dp_per_node * nic_busbw_gbs(hw.nic_gbps) * nic_share));
    wide.measured = network.measured;
    l.dp = wide;
  }
  l.pp = l.pp_inside_node ? nvlink : network;
  l.dp.cold = true;  // gradients and parameters: whole buffers, out of cache
  return l;
}


std::vector<StepTime> program_step_times(const LayerProgram& program, const std::vector<OperatorCost>& ops,
                                         bool backward, const Scenario& s, const Link& tp_link,
                                         const GpuProfile& gpu, const CommSmProfiles* shared_in) {
  std::vector<StepTime> out;
  out.reserve(program.size());
  const bool overlap = s.optimizations.tp_overlap;
  // The profiles less the SMs TP communication holds, built once, when a step
  // needs them.
  std::optional<CommSmProfiles> own;
  if (shared_in == nullptr) own = comm_sm_profiles(s, gpu);
  const CommSmProfiles& shared = shared_in != nullptr ? *shared_in : *own;
  const GpuProfile& nccl = shared.nccl ? *shared.nccl : gpu;
  const bool userbuffers = overlap && s.optimizations.tp_overlap_comm == TpOverlapComm::kUserBuffers &&
                           !shared.ub_held.empty();
  for (const LayerStep& step : program) {
    const bool as_forward = !backward || step.recompute;
    StepTime st;
    if (step.kind == LayerStepKind::kCompute) {
      for (size_t j = 0; j < step.ops.size(); ++j) {
        const OperatorCost& op = ops[step.ops[j]];
        st.op_s.push_back(step.share(j) * (as_forward ? forward_time_s(op, gpu) : backward_time_s(op, gpu)));
        st.added_s += st.op_s.back();
      }
    } else {
      // Under FP8, Transformer Engine's modules all-gather a GEMM's input as its
      // FP8 copy, one byte per element: userbuffers (initialize_ub's fp8_buf,
      // v1.8+) and TE's own blocking gathers (pytorch/module: the FP8 LayerNorm
      // output or quantized input gathered by gather_along_first_dim in
      // forward, the output gradient cast "for efficient gather" in backward,
      // v1.x and v2.x). A chunked NCCL overlap (tp_overlap with
      // tp_overlap_comm "nccl", MegaScale's own fused operators) gathers BF16.
      const bool te_gathers = userbuffers || !overlap;
      const bool fp8_gather = te_gathers && s.optimizations.fp8 && step.fused_with >= 0 &&
                              step.kind == LayerStepKind::kTpAllGather;
      st.collective_s = collective_time_s(collective_kind(step.kind), s.parallel.tp,
                                          step_bytes(step, fp8_gather ? 1.0 : gpu.activation_bytes), tp_link);
      if (userbuffers && step.fused_with >= 0 && step.kind != LayerStepKind::kTpAllReduce) {
        const OperatorCost& op = ops[step.fused_with];
        const UbOverlap u = ub_overlap(s.optimizations, ub_gemm_name(step, op, !as_forward), s.parallel.tp);
        const auto held = shared.ub_held.find(u.num_sm);
        std::optional<GpuProfile> fresh;  // an SM count comm_sm_profiles() did not build
        if (held == shared.ub_held.end()) fresh = without_comm_sms(gpu, u.num_sm);
        const CommSide side = step.kind == LayerStepKind::kTpAllGather ? CommSide::kBefore : CommSide::kAfter;
        st.added_s = std::max(0.0, userbuffers_extra_s(op, !as_forward, st.collective_s, u, side, s.parallel.tp, gpu,
                                                       fresh ? *fresh : held->second));
        out.push_back(std::move(st));
        continue;
      }
      if (step.beside_dgrad && step.fused_with >= 0) {
        // A GPU overlaps it with the input-gradient GEMM whether or not
        // tp_overlap is on; the CPU engine runs it before the GEMM.
        st.added_s = gpu.models_engine() ? st.collective_s
                                  : std::max(0.0, beside_dgrad_extra_s(ops[step.fused_with], st.collective_s, gpu,
                                                                       nccl));
        out.push_back(std::move(st));
        continue;
      }
      st.added_s = overlap && step.fused_with >= 0
                       ? std::max(0.0, fused_extra_s(ops[step.fused_with], !as_forward, st.collective_s,
                                                     step.kind == LayerStepKind::kTpAllGather ? CommSide::kBefore
                                                                                              : CommSide::kAfter,
                                                     s.parallel.tp, gpu, nccl))
                       : st.collective_s;
    }
    out.push_back(std::move(st));
  }
  return out;
}

// Context parallelism (ParallelConfig::cp_comm). The ring attention (Megatron-
// Core / Transformer Engine, P2P form): each of a layer's passes sends this rank's key/value block to the next
// CP rank cp - 1 times (backward: keys/values and their gradients, twice the
// bytes), each step overlapping the attention of the block in hand; what the
// exchange takes beyond the layer's attention is exposed. The CP group strides
// TP ranks (rank order tp-cp-dp-pp): NVLink while tp x cp fits a node, else a
// NIC. The all-gather form: below. Reported with the TP exposure (tp_exposed_s).
double cp_exposed_s(const std::vector<OperatorCost>& ops, bool backward, const Scenario& s,
                         const GpuProfile& gpu) {
  const ParallelConfig& p = s.parallel;
  if (p.cp <= 1) return 0.0;
  const double block_bytes = cp_kv_block_bytes(s.model, p, gpu.activation_bytes);
  const HardwareConfig& hw = s.hardware;
  const bool in_node = static_cast<int64_t>(p.tp) * p.cp <= hw.gpus_per_node;
  const double nic_share = std::min(1.0, static_cast<double>(hw.nics_per_node) / hw.gpus_per_node);
  const Link link = in_node ? nvlink_link(gpu.nvlink_busbw_gbs) : network_link(nic_busbw_gbs(hw.nic_gbps) * nic_share);
  if (p.cp_comm == CpComm::kAllGather) {
    // Every rank's block gathered before the attention, none of it overlapped
    // (Llama 3 section 3.3.2: "the all-gather communication latency is exposed
    // in the critical path"); backward gathers again and reduce-scatters the
    // K/V gradients.
    const double gathered = block_bytes * p.cp;  // nccl-tests size: the whole output
    const double ag_s = collective_time_s(CollectiveKind::kAllGather, p.cp, gathered, link);
    return backward ? ag_s + collective_time_s(CollectiveKind::kReduceScatter, p.cp, gathered, link) : ag_s;
  }
  const double step_s = p2p_time_s((backward ? 2.0 : 1.0) * block_bytes, link);
  double attention_s = 0;
  for (const OperatorCost& op : ops) {
    // The merge runs after the ring's last step, under no exchange.
    if (op.attention_core && op.name != kCpAttentionMergeOp) {
      attention_s += backward ? backward_time_s(op, gpu) : forward_time_s(op, gpu);
    }
  }
  return std::max(0.0, (p.cp - 1) * step_s - attention_s);
}

ProgramTime program_time(const LayerProgram& program, const std::vector<OperatorCost>& ops,
                         bool backward, const Scenario& s, const Link& tp_link,
                         const GpuProfile& gpu, const CommSmProfiles* shared) {
  ProgramTime t;
  const std::vector<StepTime> steps = program_step_times(program, ops, backward, s, tp_link, gpu, shared);
  for (size_t k = 0; k < program.size(); ++k) {
    const LayerStep& step = program[k];
    if (step.kind == LayerStepKind::kCompute) {
      const bool as_forward = !backward || step.recompute;
      for (size_t j = 0; j < step.ops.size(); ++j) {
        const OperatorCost& op = ops[step.ops[j]];
        t.flops += step.share(j) * (as_forward ? op.fwd_flops : op.bwd_flops);
      }
      (step.recompute ? t.recompute_s : t.compute_s) += steps[k].added_s;
    } else {
      t.tp_exposed_s += steps[k].added_s;
    }
  }
  t.tp_exposed_s += cp_exposed_s(ops, backward, s, gpu);
  return t;
}

HeadTime head_time(const std::vector<OperatorCost>& ops, const Scenario& s, const Link& tp_link,
                   const GpuProfile& gpu, bool output_head) {
  HeadTime h;
  h.forward_s = forward_time_s(ops, gpu);
  h.backward_s = backward_time_s(ops, gpu);
  for (const OperatorCost& op : ops) {
    h.flops_forward += op.fwd_flops;
    h.flops_backward += op.bwd_flops;
  }
  const ParallelConfig& p = s.parallel;
  if (p.tp > 1) {
    const double act = static_cast<double>(p.micro_batch) * s.model.seq_len * s.model.hidden * gpu.activation_bytes;
    const CollectiveKind fwd = p.sequence_parallel ? (output_head ? CollectiveKind::kAllGather
                                                                  : CollectiveKind::kReduceScatter)
                                                   : CollectiveKind::kAllReduce;
    const CollectiveKind bwd = p.sequence_parallel ? (output_head ? CollectiveKind::kReduceScatter
                                                                  : CollectiveKind::kAllGather)
                                                   : CollectiveKind::kAllReduce;
    h.tp_forward_s = collective_time_s(fwd, p.tp, act, tp_link);
    h.tp_backward_s = collective_time_s(bwd, p.tp, act, tp_link);
    if (output_head) {
      const double stats = static_cast<double>(p.micro_batch) * s.model.seq_len * 4.0;
      h.tp_forward_s += 3 * collective_time_s(CollectiveKind::kAllReduce, p.tp, stats, tp_link);
    }
  }
  return h;
}

LayerPasses layer_passes(const Scenario& s, const GpuProfile& gpu, const std::vector<OperatorCost>& ops,
                         const Link& tp_link, const CommSmProfiles* shared) {
  LayerPasses l;
  l.forward = program_time(layer_forward_program(s.model, s.parallel, ops), ops, false, s, tp_link, gpu, shared);
  l.backward = program_time(layer_backward_program(s.model, s.parallel, ops), ops, true, s, tp_link, gpu, shared);
  return l;
}

CommSmProfiles comm_sm_profiles(const Scenario& s, const GpuProfile& gpu) {
  CommSmProfiles c;
  if (gpu.is_cpu()) return c;
  const ParallelConfig& p = s.parallel;
  const Optimizations& o = s.optimizations;
  // NCCL: the fused collectives of tp_overlap, and SP's backward re-gather
  // beside its GEMM (Megatron-LM's asynchronous all-gather) without userbuffers.
  const bool sp = p.sequence_parallel && p.tp > 1;
  const bool userbuffers = o.tp_overlap && o.tp_overlap_comm == TpOverlapComm::kUserBuffers;
  if ((o.tp_overlap && !userbuffers) || (sp && !userbuffers) || (userbuffers && !sp)) {
    c.nccl = without_comm_sms(gpu, gpu.nccl_nvlink_ctas);
  }
  if (userbuffers) {
    // One profile per SM count the job's overlaps hold.
    for (const UbGemm& g : kUbGemms) {
      const int sms = ub_overlap(o, g.name, p.tp).num_sm;
      if (!c.ub_held.contains(sms)) c.ub_held.emplace(sms, without_comm_sms(gpu, sms));
    }
  }
  return c;
}

LayerPasses layer_passes(const Scenario& s) {
  GpuProfile cpu_storage;
  const GpuProfile& gpu = job_profile(s, &cpu_storage);
  const CommSmProfiles shared = comm_sm_profiles(s, gpu);
  return layer_passes(s, gpu, job_layer_operators(s, gpu), parallel_links(s, gpu).tp, &shared);
}

Estimate estimate(const Scenario& s) {
  GpuProfile cpu_storage;
  const GpuProfile& gpu = job_profile(s, &cpu_storage);
  const ModelConfig& m = s.model;
  const ParallelConfig& p = s.parallel;
  const Optimizations& o = s.optimizations;
  const ParallelLinks link = parallel_links(s, gpu);
  const int M = p.microbatches();
  const int P = p.pp;
  const int V = p.vpp;
  const PipelineLayout layout(m, p);

  Estimate e;
  // --- one layer, one micro-batch -------------------------------------------------
  const std::vector<OperatorCost> ops = job_layer_operators(s, gpu);
  const CommSmProfiles shared = comm_sm_profiles(s, gpu);
  const LayerPasses passes = layer_passes(s, gpu, ops, link.tp, &shared);
  const ProgramTime& fwd = passes.forward;
  const ProgramTime& bwd = passes.backward;
  e.layer_forward_s = passes.forward_s();
  e.layer_backward_s = passes.backward_s();
  e.chunk_forward_s = layout.max_chunk_layers() * passes.forward_s();
  e.chunk_backward_s = layout.max_chunk_layers() * passes.backward_s();

  const HeadTime emb = head_time(job_embedding_operators(s, gpu), s, link.tp, gpu, false);
  const HeadTime out = head_time(job_output_operators(s, gpu), s, link.tp, gpu, true);

  // --- the busiest pipeline rank -----------------------------------------------------
  // Even stages: the one with the busier head (the first when P == 1, both).
  // Uneven ones (model/pipeline_layout.h): the largest layers + head total.
  const double chunks = static_cast<double>(M) * V;
  const double first_head = M * (emb.forward_s + emb.backward_s + (emb.tp_forward_s + emb.tp_backward_s));
  const double last_head = M * (out.forward_s + out.backward_s + (out.tp_forward_s + out.tp_backward_s));
  e.first_head_s = first_head;
  e.last_head_s = last_head;
  const double layer_pass_s = passes.forward_s() + passes.backward_s();
  auto rank_busy = [&](int r) {
    return M * layout.stage_layers(r) * layer_pass_s + (r == 0 ? first_head : 0.0) +
           (r == P - 1 ? last_head : 0.0);
  };
  int busiest = P == 1 || first_head >= last_head ? 0 : P - 1;
  if (!layout.even()) {
    double most = rank_busy(busiest);
    for (int r = 0; r < P; ++r) {
      const double mine = rank_busy(r);
      if (mine > most) {
        busiest = r;
        most = mine;
      }
    }
  }
  // Its layer passes: M x its layers (= M V x the layers of each of its chunks
  // on even stages).
  const double layer_passes = static_cast<double>(M) * layout.stage_layers(busiest);
  const double layer_compute = layer_passes * (fwd.compute_s + bwd.compute_s);
  const double layer_recompute = layer_passes * bwd.recompute_s;
  const double layer_tp = layer_passes * (fwd.tp_exposed_s + bwd.tp_exposed_s);
  const bool with_first_head = busiest == 0;
  const bool with_last_head = busiest == P - 1;
  const double head_compute = (with_first_head ? M * (emb.forward_s + emb.backward_s) : 0.0) +
                              (with_last_head ? M * (out.forward_s + out.backward_s) : 0.0);
  const double head_tp = (with_first_head ? M * (emb.tp_forward_s + emb.tp_backward_s) : 0.0) +
                         (with_last_head ? M * (out.tp_forward_s + out.tp_backward_s) : 0.0);

  TimeBreakdown& b = e.breakdown;
  // The spread of the GPUs' speeds: the step computes at the pace of the job's
  // slowest GPU, in expectation (model/speed_spread.h; the event fidelity draws
  // it).
  const double slowest = expected_slowest_speed_factor(s.hardware.gpu_speed_sigma, p.gpus());
  // One layer's pass at that pace: its compute slowed, its TP communication
  // (NVLink, not the GPU's arithmetic) not. The fill and drain and the DP
  // overlap windows below run at it too, as the event fidelity's slow stages do.
  const auto paced_s = [slowest](const ProgramTime& t) {
    return slowest * (t.compute_s + t.recompute_s) + t.tp_exposed_s;
  };
  const double paced_layer_pass_s = paced_s(fwd) + paced_s(bwd);
  const double paced_chunk_forward_s = layout.max_chunk_layers() * paced_s(fwd);
  const double paced_chunk_backward_s = layout.max_chunk_layers() * paced_s(bwd);
  b.compute_s = slowest * (layer_compute + head_compute);
  b.recompute_s = slowest * layer_recompute;
  b.tp_exposed_s = layer_tp + head_tp;
  const double busy_s = b.compute_s + b.recompute_s + b.tp_exposed_s;
  // Fill and drain: one micro-batch through every other stage, 1/V of a stage
  // per chunk hop: (P-1) chunk passes on even stages. With uneven ones the
  // busiest stage gates the steady state and its warm-up / cool-down passes
  // hide part of the others' hops: each other stage counts in proportion to
  // its share of the busiest stage's layers (first order; the event fidelity
  // runs the schedule itself).
  double other_layers = 0;
  const double busiest_layers = layout.stage_layers(busiest);
  for (int r = 0; r < P; ++r) {
    if (r != busiest) other_layers += layout.stage_layers(r) * std::min(1.0, layout.stage_layers(r) / busiest_layers);
  }
  b.bubble_s = other_layers / V * paced_layer_pass_s;
  // Chunks of unequal size on a stage (a Megatron-Core layout string) also
  // stall the interleaved steady state: each step as long as its slowest rank
  // (model/chunk_stall.h), the heads in their chunks (the embedding in rank
  // 0's chunk 0, the output layer and loss in rank P-1's chunk V-1). Not where
  // every chunk holds the same layers, however the split is spelled: there
  // the event fidelity's bubble matches the fill and drain alone
  // (tests/sim/job_sim_test.cc), the heads' steps absorbed by the schedule's
  // slack. With unequal chunks, counting the heads in their chunks keeps the
  // closed form nearer the event fidelity than the layers alone: event /
  // analytical minus the even split's, four layouts (a 24-layer model's
  // heads-balanced split on PP 4 x VPP 6, table2-megascale-256 with chunks
  // 1,3,2,... and 3,1,2,..., Megatron-Bridge's Llama 3 70B layout):
  // +0.016, +0.025, -0.011, -0.007 with the heads; +0.098, +0.006, -0.033,
  // -0.007 without.
  bool uniform_chunks = true;
  for (int r = 0; r < P && uniform_chunks && !layout.even(); ++r) {
    for (int c = 0; c < V && uniform_chunks; ++c) uniform_chunks = layout.chunk_layers(r, c) == layout.chunk_layers(0, 0);
  }
  if (!uniform_chunks && V > 1) {
    b.bubble_s += chunk_stall_s(P, V, M, [&](int r, int c) {
      const double layers = layout.chunk_layers(r, c);
      ChunkPassCost cost{layers * paced_s(fwd), layers * paced_s(bwd)};
      if (r == 0 && c == 0) {
        cost.forward_s += slowest * emb.forward_s + emb.tp_forward_s;
        cost.backward_s += slowest * emb.backward_s + emb.tp_backward_s;
      }
      if (r == P - 1 && c == V - 1) {
        cost.forward_s += slowest * out.forward_s + out.tp_forward_s;
        cost.backward_s += slowest * out.backward_s + out.tp_backward_s;
      }
      return cost;
    });
  }
  e.bubble_fraction = busy_s > 0 ? b.bubble_s / busy_s : 0.0;

  // --- data ------------------------------------------------------------------------
  const double data_window_s = static_cast<double>(M) * p.micro_batch * gpu.data_load_s_per_sample;
  b.data_s = o.data_pipeline ? 0.0 : data_window_s;

  // --- pipeline p2p (Megatron scatter-gather: each TP rank sends 1/t) ----------------
  if (P > 1) {
    const double p2p_bytes = static_cast<double>(p2p_message_bytes(s));
    e.p2p_s = p2p_time_s(p2p_bytes, link.pp);
    // Across servers, every pipeline's transfers leave at once and ECMP
    // collisions on the uplinks stretch the slowest one's bandwidth term
    // (model/p2p_contention.h); a measured sendrecv (two ranks, no contention)
    // gets the same extra.
    if (!link.pp_inside_node) {
      e.p2p_s += (pp_p2p_slowdown(s) - 1.0) * p2p_bytes / (link.pp.busbw_gbs * 1e9);
    }
    // Blocking (Megatron): two batched exchanges per forward/backward pair plus the
    // fill/drain hops. Decoupled async (MegaScale), interleaved: the fill/drain
    // hops and the warm-up's ring: there every rank runs forwards only, and a
    // micro-batch's next chunk on rank 0 waits for its previous chunk to pass all
    // P ranks, P x (forward + transfer), while rank 0 has only the group's other
    // P - 1 forwards (G = P, REFERENCE.md) to fill it: each of the V - 1 later
    // chunk rounds exposes P transfers, and the cool-down's backwards as many.
    // Async, one chunk: neighbouring ranks' warm-ups differ by one forward, so
    // the steady state has no slack either; the replay of the schedule exposes
    // 2 (P-1) M / P + 2 (P-2) transfers for M >= P and 2 (P-1) + 2 max(0, M-2)
    // below (both exact on a uniform pipeline, tests/model/estimator_test.cc).
    double exchanges = 2.0 * chunks + 2.0 * (P - 1);
    if (o.pp_overlap && V > 1) {
      exchanges = 2.0 * (P - 1) + 2.0 * (V - 1) * P;
    } else if (o.pp_overlap) {
      exchanges = M >= P ? 2.0 * (P - 1) * M / P + 2.0 * (P - 2) : 2.0 * (P - 1) + 2.0 * std::max(0, M - 2);
    }
    b.pp_exposed_s = exchanges * e.p2p_s;
    // Tied input/output embedding: all-reduce of its gradient between the first and
    // last stage before the optimizer (Megatron-LM), fp32. The CPU engine keeps
    // a separate output layer (model/engine_ops.h): nothing to reduce.
    if (embedding_sync_needed(s)) {
      const double emb_grad = static_cast<double>(m.vocab) * m.hidden / p.tp * grad_element_bytes(o);
      Link emb_link = link.pp_inside_node ? link.pp : network_link(link.pp.busbw_gbs);
      emb_link.measured = link.pp.measured;
      b.embedding_sync_s = collective_time_s(CollectiveKind::kAllReduce, 2, emb_grad, emb_link);
      // Two ranks: the bandwidth term is the whole buffer once, stretched by
      // the uplinks' ECMP collisions between the first and the last stage.
      if (!link.pp_inside_node) {
        b.embedding_sync_s += (embedding_sync_slowdown(s) - 1.0) * emb_grad / (emb_link.busbw_gbs * 1e9);
      }
    }
  }

  // --- data parallel ---------------------------------------------------------------
  // The pipeline rank with the most parameters: rank 0 on even stages (its
  // first chunk holds the embedding), else the largest layers + embedding.
  int dp_rank = 0;
  if (!layout.even()) {
    auto rank_params = [&](int r) {
      double sum = 0;
      for (int c = 0; c < V; ++c) sum += dp_chunk_params(s, r, c);
      return sum;
    };
    double most = rank_params(0);
    for (int r = 1; r < P; ++r) {
      const double mine = rank_params(r);
      if (mine > most) {
        dp_rank = r;
        most = mine;
      }
    }
  }
  double stage_layer_params = 0;  // the transformer layers of dp_rank's chunks
  for (int c = 0; c < V; ++c) stage_layer_params += layer_chunk_params(s, dp_rank, c);
  const double embed_params = static_cast<double>(m.vocab) * m.hidden / p.tp;
  if (p.dp > 1) {
    std::vector<double> rs(V), ag(V);
    for (int c = 0; c < V; ++c) {
      const CollectiveKind reduce =
          p.zero_stage == 0 ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
      rs[c] = collective_time_s(reduce, p.dp, dp_payload_bytes(s, dp_rank, c, OpKind::kDpReduceScatter), link.dp);
      ag[c] = p.zero_stage == 0 ? 0.0
                                : collective_time_s(CollectiveKind::kAllGather, p.dp,
                                                    dp_payload_bytes(s, dp_rank, c, OpKind::kDpAllGather), link.dp);
    }
    e.dp_reduce_scatter_chunk_s = rs[V > 1 ? 1 : 0];
    e.dp_all_gather_chunk_s = ag[V > 1 ? 1 : 0];
    double rs_total = 0, ag_total = 0;
    for (int c = 0; c < V; ++c) {
      rs_total += rs[c];
      ag_total += ag[c];
    }
    if (p.zero_stage == 3) {
      b.dp_exposed_s = zero3_exposed_s(rs, ag, M, paced_chunk_backward_s,
                                       busy_s + b.bubble_s + b.pp_exposed_s + b.embedding_sync_s, o.dp_overlap,
                                       b.data_s);
    } else if (!o.dp_overlap) {
      b.dp_exposed_s += rs_total + ag_total;
    } else {
      // Reduce-scatter of chunk c starts when its last backward ends: in the
      // cool-down of (interleaved) 1F1B the chunks finish in order V-1 .. 0, one
      // group of P backwards apart; chunk 0 finishes last.
      // With B buckets per chunk (Megatron-Core), bucket k of the chunk is ready
      // (B-1-k)/B of a backward before the chunk's last backward ends, and moves
      // 1/B of its payload (model/job_schedule.h dp_buckets_per_chunk).
      const int B = dp_buckets_per_chunk(s);
      const double end_s = busy_s;
      std::vector<double> ready, dur;
      for (int c = V - 1; c >= 0; --c) {
        for (int k = 0; k < B; ++k) {
          ready.push_back(end_s - c * P * paced_chunk_backward_s - (B - 1 - k) * paced_chunk_backward_s / B);
          dur.push_back(rs[c] / B);
        }
      }
      b.dp_exposed_s += chain_exposed_s(ready, dur, end_s);
      if (!o.overlaps_param_gather()) {
        // dp_overlap_param_gather = false: the all-gathers follow the optimizer
        // step, all exposed (model/schedule.h).
        b.dp_exposed_s += ag_total;
      } else {
        // All-gathers prefetched in need order (bucket k of chunk c before the k-th
        // piece of its first forward); the first overlaps the synchronous data
        // loading that opens the step, and nothing when the data pipeline is
        // asynchronous (its load is off the step; model/schedule.h: no DataLoad op).
        double delay = 0, t = -b.data_s;
        for (int c = 0; c < V; ++c) {
          for (int k = 0; k < B; ++k) {
            t += ag[c] / B;
            delay = std::max(delay, t - c * P * paced_chunk_forward_s - k * paced_chunk_forward_s / B);
          }
        }
        b.dp_exposed_s += std::max(0.0, delay);
      }
    }
  }

  // --- optimizer -------------------------------------------------------------------
  // The busiest stage's parameters: its chunks plus one vocab x hidden matrix
  // on the first and the last stage (two when an untied output layer shares the
  // only stage).
  const int embed_matrices = P == 1 ? (!m.tie_embeddings ? 2 : 1) : (dp_rank == 0 || dp_rank == P - 1 ? 1 : 0);
  const double local_params = stage_layer_params + embed_params * embed_matrices;
  const double shard = p.zero_stage >= 1 ? local_params / p.dp : local_params;
  const OptimizerStateBytes state = optimizer_state_bytes(o);
  const double per_param = state.step_traffic() + kStepGradReadBytes + kStepWeightWriteBytes +
                           (o.optimizer == OptimizerKind::kLamb ? state.main_param_read + kLambUpdateReadBytes : 0.0) +
                           kClipBytesPerParam;
  b.optimizer_s = memory_time_s(gpu, shard * per_param);
  // The step's FP8 weight copies (the transformer layers' weights, counted with
  // the step's weight work).
  if (o.fp8) {
    double cast_bytes =
        kBf16WeightBytes + fp8_copy_bytes_per_value(o.fp8_recipe == Fp8Recipe::kMxfp8, gpu.fp8_gemm_any_layout());
    // Current scaling reads each BF16 weight once more for its amax (model/op_cost.h).
    if (o.fp8_recipe == Fp8Recipe::kCurrent) cast_bytes += kFp8CurrentScalingAmaxBytesPerParam;
    b.optimizer_s += memory_time_s(gpu, stage_layer_params * cast_bytes);
  }
  // Global gradient norm (and LAMB's per-tensor norms when sharded): small
  // all-reduces over the whole job, latency-bound.
  const Link& norm_link = p.dp > 1 ? link.dp : link.tp;
  b.grad_norm_s = small_allreduce_time_s(p.gpus(), norm_link);
  // FP8 (Transformer Engine delayed scaling): the amax history is all-reduced
  // once per step over the job, another small latency-bound all-reduce.
  // Current scaling keeps no history (its amax reductions are the casts' own).
  if (o.fp8 && o.fp8_recipe == Fp8Recipe::kDelayed) b.grad_norm_s += small_allreduce_time_s(p.gpus(), norm_link);
  if (gpu.models_engine()) {
    // The engine's own step work, measured (model/engine_ops.h): the slowest rank,
    // with its small all-reduces and the profile's step overhead inside.
    b.optimizer_s = 0;
    b.grad_norm_s = 0;
    for (int r = 0; r < P; ++r) b.optimizer_s = std::max(b.optimizer_s, engine_rank_step_s(s, gpu, r));
  } else {
    // The profile's host work per iteration (0 unless fitted, calibrate/fit.h).
    b.host_s = gpu.step_overhead_s;
  }

  e.iteration_time_s = b.total();
  const Throughput rate = throughput(s, e.iteration_time_s);
  e.model_flops = rate.model_flops;
  e.mfu = rate.mfu;
  e.tokens_per_s = rate.tokens_per_s;
  e.memory = memory_per_gpu(m, p, o, gpu);
  return e;
}

}  // namespace megascale::model
