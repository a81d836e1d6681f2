// tests/model/layer_program_test.cc: TP/SP collectives placed in a layer.
#include "model/layer_program.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "model/estimator.h"
#include "model/fused_overlap.h"
#include "model/profile.h"
#include "model/scenario.h"

namespace megascale::model {
namespace {

std::map<LayerStepKind, int> count(const LayerProgram& p) {
  std::map<LayerStepKind, int> c;
  for (const LayerStep& s : p) ++c[s.kind];
  return c;
}

struct Built {
  std::vector<OperatorCost> ops;
  LayerProgram fwd, bwd;
};

Built build(BlockKind block, bool sp, int tp, Recompute rc = Recompute::kNone) {
  Scenario s = default_scenario("megatron");
  s.model.block = block;
  s.parallel.sequence_parallel = sp;
  s.parallel.tp = tp;
  s.parallel.recompute = rc;
  Built b;
  b.ops = layer_operators(s.model, s.parallel, false);
  b.fwd = layer_forward_program(s.model, s.parallel, b.ops);
  b.bwd = layer_backward_program(s.model, s.parallel, b.ops);
  return b;
}

// The names of a program's collectives, in order.
std::vector<std::string> collectives(const LayerProgram& p) {
  std::vector<std::string> out;
  for (const LayerStep& s : p) {
    if (s.kind != LayerStepKind::kCompute) out.push_back(s.name);
  }
  return out;
}

TEST(LayerProgram, SequentialBlockWithSpHasTwoAllGathersAndTwoReduceScatters) {
  const Built b = build(BlockKind::kSequential, true, 8);
  for (const LayerProgram* p : {&b.fwd, &b.bwd}) {
    auto c = count(*p);
    // Backward also re-gathers the inputs of qkv and fc1 (Megatron-LM keeps
    // only their sequence shard).
    EXPECT_EQ(c[LayerStepKind::kTpAllGather], p == &b.fwd ? 2 : 4);
    EXPECT_EQ(c[LayerStepKind::kTpReduceScatter], 2);
    EXPECT_EQ(c[LayerStepKind::kTpAllReduce], 0);
  }
  // Forward: the AG feeds qkv, the RS follows proj.
  EXPECT_EQ(b.fwd[1].kind, LayerStepKind::kTpAllGather);
  EXPECT_EQ(b.ops[b.fwd[1].fused_with].name, "qkv");
  EXPECT_EQ(b.fwd[1].bytes, int64_t{1} * 2048 * 12288 * 2);
  EXPECT_EQ(collectives(b.bwd),
            (std::vector<std::string>{"ag_dfc2", "ag_in_fc1", "rs_dfc1", "ag_dproj", "ag_in_qkv", "rs_dqkv"}));
  for (const LayerStep& s : b.bwd) {
    EXPECT_EQ(s.beside_dgrad, s.name.rfind("ag_in_", 0) == 0) << s.name;
    if (s.beside_dgrad) {
      EXPECT_EQ("ag_in_" + b.ops[s.fused_with].name, s.name);
      EXPECT_EQ(s.bytes, b.fwd[1].bytes);
    }
  }
}

TEST(LayerProgram, ParallelBlockHasOneAllGatherAndOneReduceScatter) {
  const Built b = build(BlockKind::kParallel, true, 8);
  for (const LayerProgram* p : {&b.fwd, &b.bwd}) {
    auto c = count(*p);
    EXPECT_EQ(c[LayerStepKind::kTpAllGather], p == &b.fwd ? 1 : 2);
    EXPECT_EQ(c[LayerStepKind::kTpReduceScatter], 1);
  }
  EXPECT_EQ(collectives(b.bwd), (std::vector<std::string>{"ag_dproj_fc2", "ag_in_qkv_fc1", "rs_dqkv_fc1"}));
}

// The re-gather runs beside the input-gradient GEMM on a GPU: it costs a part
// of its own time (the GEMM runs on the SMs NCCL leaves while it is in flight),
// more than nothing and less than running alone.
TEST(LayerProgram, TheInputRegatherHidesBehindTheInputGradientGemm) {
  Scenario s = default_scenario("megatron");
  s.parallel.sequence_parallel = true;
  const GpuProfile gpu = hardware_profile(s);
  const std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, false);
  const LayerProgram bwd = layer_backward_program(s.model, s.parallel, ops);
  const Link tp = parallel_links(s, gpu).tp;
  const std::vector<StepTime> t = program_step_times(bwd, ops, true, s, tp, gpu);
  int seen = 0;
  for (size_t k = 0; k < bwd.size(); ++k) {
    if (!bwd[k].beside_dgrad) continue;
    ++seen;
    EXPECT_GT(t[k].added_s, 0.0) << bwd[k].name;
    EXPECT_LT(t[k].added_s, 0.5 * t[k].collective_s) << bwd[k].name;
  }
  EXPECT_EQ(seen, 2);
}

// The default job with a sequential block, sequence parallelism and TP overlap
// through Transformer Engine's userbuffers.
Scenario userbuffers_job() {
  Scenario s = default_scenario("megascale");
  s.model.block = BlockKind::kSequential;
  s.parallel.sequence_parallel = true;
  s.optimizations.tp_overlap = true;
  s.optimizations.tp_overlap_comm = TpOverlapComm::kUserBuffers;
  return s;
}

// Transformer Engine's userbuffers (tp_overlap_comm = "userbuffers"): each TP
// collective costs what TE's default method for its GEMM gives
// (model/fused_overlap.h): the backward's re-gather and reduce-scatter are bulk
// overlaps beside one whole GEMM; the forward reduce-scatter is a 4-piece
// pipeline; the all-gathers are tp-piece ring exchanges. With set_sm_margin the
// pipeline and bulk GEMMs run on the SMs 16 communication SMs leave throughout;
// without, only while the communication runs.
TEST(LayerProgram, UserbuffersCostEachCollectiveByTeMethod) {
  Scenario s = userbuffers_job();
  const GpuProfile gpu = hardware_profile(s);
  const GpuProfile margin = without_comm_sms(gpu, kUbCommSms);
  const GpuProfile ring = without_comm_sms(gpu, kUbRingExchangeSms);
  const std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, false);
  const Link tp = parallel_links(s, gpu).tp;
  const int t = s.parallel.tp;
  double margin_total = 0, shared_total = 0;
  for (bool sm_margin : {true, false}) {
    s.optimizations.tp_overlap_sm_margin = sm_margin;
    int checked = 0;
    for (bool backward : {false, true}) {
      const LayerProgram prog = backward ? layer_backward_program(s.model, s.parallel, ops)
                                         : layer_forward_program(s.model, s.parallel, ops);
      const std::vector<StepTime> times = program_step_times(prog, ops, backward, s, tp, gpu);
      for (size_t k = 0; k < prog.size(); ++k) {
        const LayerStep& step = prog[k];
        if (step.kind == LayerStepKind::kCompute || step.fused_with < 0 || step.recompute) continue;
        const OperatorCost& op = ops[step.fused_with];
        auto gemm = [&](const GpuProfile& g, int64_t rows) {
          return (backward ? gemm_time_s(g, rows, op.k, op.n) : gemm_time_s(g, rows, op.n, op.k)) / op.gemm_speedup;
        };
        const double comm = times[k].collective_s;
        const double whole = gemm(gpu, op.m);
        double want = 0;
        if (backward && (step.kind == LayerStepKind::kTpReduceScatter || step.beside_dgrad)) {
          const double beside = gemm(margin, op.m);
          want = sm_margin || comm >= beside ? std::max(comm, beside) - whole : comm * (1.0 - whole / beside);
        } else if (step.kind == LayerStepKind::kTpAllGather) {
          want = fused_pair_time_s(t, gemm(gpu, op.m / t), gemm(ring, op.m / t), comm, CommSide::kBefore) - whole;
        } else {
          const double shared = gemm(margin, op.m / kUbPipelineSplits);
          const double piece = sm_margin ? shared : gemm(gpu, op.m / kUbPipelineSplits);
          want = fused_pair_time_s(kUbPipelineSplits, piece, shared, comm, CommSide::kAfter) - whole;
        }
        EXPECT_NEAR(times[k].added_s, std::max(0.0, want), 1e-12)
            << step.name << (backward ? " bwd" : " fwd") << (sm_margin ? " margin" : " shared");
        (sm_margin ? margin_total : shared_total) += times[k].added_s;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 10);  // 2 AG + 2 RS forward; 2 AG, 2 re-gathers, 2 RS backward
  }
  // Holding SMs for a whole GEMM costs more than sharing them while needed.
  EXPECT_GT(margin_total, shared_total);
  // The NCCL form of the same job costs the collectives differently.
  s.optimizations.tp_overlap_comm = TpOverlapComm::kNccl;
  const LayerProgram fwd = layer_forward_program(s.model, s.parallel, ops);
  const std::vector<StepTime> nccl = program_step_times(fwd, ops, false, s, tp, gpu);
  s.optimizations.tp_overlap_comm = TpOverlapComm::kUserBuffers;
  const std::vector<StepTime> ub = program_step_times(fwd, ops, false, s, tp, gpu);
  double diff = 0;
  for (size_t k = 0; k < fwd.size(); ++k) diff += std::abs(nccl[k].added_s - ub[k].added_s);
  EXPECT_GT(diff, 0.0);
}

// [optimizations.userbuffers] retunes one GEMM's overlap (NeMo's tuned ub_cfg
// files): each collective is costed with its own GEMM's SMs, pieces and margin,
// and only that GEMM's collective moves.
TEST(LayerProgram, UserbuffersSettingsApplyPerGemm) {
  Scenario s = userbuffers_job();
  s.optimizations.tp_overlap_sm_margin = false;
  const GpuProfile gpu = hardware_profile(s);
  const std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, false);
  const Link tp = parallel_links(s, gpu).tp;
  const LayerProgram bwd = layer_backward_program(s.model, s.parallel, ops);
  const LayerProgram fwd = layer_forward_program(s.model, s.parallel, ops);
  const std::vector<StepTime> bwd0 = program_step_times(bwd, ops, true, s, tp, gpu);
  const std::vector<StepTime> fwd0 = program_step_times(fwd, ops, false, s, tp, gpu);
  UbOverlapConfig qkv_wgrad, fc2_fprop;
  qkv_wgrad.num_sm = 2;
  qkv_wgrad.set_sm_margin = true;
  fc2_fprop.num_sm = 24;
  fc2_fprop.num_splits = 2;
  fc2_fprop.set_sm_margin = true;
  s.optimizations.userbuffers["qkv_wgrad"] = qkv_wgrad;
  s.optimizations.userbuffers["fc2_fprop"] = fc2_fprop;
  const std::vector<StepTime> bwd1 = program_step_times(bwd, ops, true, s, tp, gpu);
  const std::vector<StepTime> fwd1 = program_step_times(fwd, ops, false, s, tp, gpu);
  int moved = 0;
  for (size_t k = 0; k < bwd.size(); ++k) {
    const LayerStep& step = bwd[k];
    if (step.kind == LayerStepKind::kCompute || step.fused_with < 0 || step.recompute) continue;
    const OperatorCost& op = ops[step.fused_with];
    if (step.kind == LayerStepKind::kTpReduceScatter && op.name == "qkv") {
      // Bulk beside the whole GEMM on the SMs 2 leave, for its whole run.
      const GpuProfile held = without_comm_sms(gpu, 2);
      const double whole = gemm_time_s(gpu, op.m, op.k, op.n);
      const double beside = gemm_time_s(held, op.m, op.k, op.n);
      EXPECT_NEAR(bwd1[k].added_s, std::max(bwd1[k].collective_s, beside) - whole, 1e-12);
      EXPECT_NE(bwd1[k].added_s, bwd0[k].added_s);
      ++moved;
    } else {
      EXPECT_DOUBLE_EQ(bwd1[k].added_s, bwd0[k].added_s) << step.name;
    }
  }
  for (size_t k = 0; k < fwd.size(); ++k) {
    const LayerStep& step = fwd[k];
    if (step.kind == LayerStepKind::kCompute || step.fused_with < 0) continue;
    const OperatorCost& op = ops[step.fused_with];
    if (op.name == "fc2") {
      const GpuProfile held = without_comm_sms(gpu, 24);
      const double whole = gemm_time_s(gpu, op.m, op.n, op.k);
      const double piece = gemm_time_s(held, op.m / 2, op.n, op.k);
      EXPECT_NEAR(fwd1[k].added_s,
                  std::max(0.0, fused_pair_time_s(2, piece, piece, fwd1[k].collective_s, CommSide::kAfter) - whole),
                  1e-12);
      ++moved;
    } else {
      EXPECT_DOUBLE_EQ(fwd1[k].added_s, fwd0[k].added_s) << step.name;
    }
  }
  EXPECT_EQ(moved, 2);
  // The resolved settings: the override, TE's defaults elsewhere, the ring
  // exchange's pieces halved by aggregate.
  EXPECT_EQ(ub_overlap(s.optimizations, "fc2_fprop", 8).num_splits, 2);
  EXPECT_EQ(ub_overlap(s.optimizations, "proj_fprop", 8).num_splits, kUbPipelineSplits);
  EXPECT_EQ(ub_overlap(s.optimizations, "qkv_dgrad", 8).num_sm, kUbCommSms);
  EXPECT_FALSE(ub_overlap(s.optimizations, "qkv_dgrad", 8).sm_margin);
  EXPECT_EQ(ub_overlap(s.optimizations, "fc2_dgrad", 8).num_splits, 8);
  s.optimizations.userbuffers["fc2_dgrad"].aggregate = true;
  EXPECT_EQ(ub_overlap(s.optimizations, "fc2_dgrad", 8).num_splits, 4);
  EXPECT_EQ(ub_overlap(s.optimizations, "fc2_dgrad", 8).num_sm, kUbRingExchangeSms);
  EXPECT_THROW(ub_overlap(s.optimizations, "router_fprop", 8), std::logic_error);
}

// A forward reduce-scatter run as a ring exchange (NeMo's / Megatron-Bridge's
// B200 ub_cfg files: proj_fprop and fc2_fprop = RingExchangeOverlapCfg(num_sm 1,
// set_sm_margin True)): tp pieces on the SMs one leaves, each piece's partial
// output sent while the next computes, then TE's reduce_bf16 over the tp
// chunks; only those two collectives move, and the all-gathers' ring
// exchanges keep their default (no margin).
TEST(LayerProgram, UserbuffersRingExchangeReduceScatter) {
  Scenario s = userbuffers_job();
  const GpuProfile gpu = hardware_profile(s);
  const std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, false);
  const Link tp = parallel_links(s, gpu).tp;
  const int t = s.parallel.tp;
  const LayerProgram fwd = layer_forward_program(s.model, s.parallel, ops);
  const std::vector<StepTime> before = program_step_times(fwd, ops, false, s, tp, gpu);
  UbOverlapConfig ring;
  ring.method = UbMethod::kRingExchange;
  ring.num_sm = 1;
  ring.set_sm_margin = true;
  s.optimizations.userbuffers["proj_fprop"] = ring;
  s.optimizations.userbuffers["fc2_fprop"] = ring;
  const UbOverlap u = ub_overlap(s.optimizations, "fc2_fprop", t);
  EXPECT_EQ(u.method, UbMethod::kRingExchange);
  EXPECT_EQ(u.num_splits, t);
  EXPECT_TRUE(u.sm_margin);
  s.optimizations.userbuffers["fc2_fprop"].aggregate = true;  // pairs all-gather pieces only
  EXPECT_EQ(ub_overlap(s.optimizations, "fc2_fprop", t).num_splits, t);
  EXPECT_FALSE(ub_overlap(s.optimizations, "qkv_fprop", t).sm_margin);
  const std::vector<StepTime> after = program_step_times(fwd, ops, false, s, tp, gpu);
  const GpuProfile held = without_comm_sms(gpu, 1);
  int moved = 0;
  for (size_t k = 0; k < fwd.size(); ++k) {
    const LayerStep& step = fwd[k];
    if (step.kind == LayerStepKind::kCompute || step.fused_with < 0) continue;
    if (step.kind != LayerStepKind::kTpReduceScatter) {
      EXPECT_DOUBLE_EQ(after[k].added_s, before[k].added_s) << step.name;
      continue;
    }
    const OperatorCost& op = ops[step.fused_with];
    const double whole = gemm_time_s(gpu, op.m, op.n, op.k);
    const double piece = gemm_time_s(held, op.m / t, op.n, op.k);
    const double reduce = memory_time_s(gpu, static_cast<double>(op.m) * op.n * (1.0 + 1.0 / t) * gpu.activation_bytes);
    const double want = fused_pair_time_s(t, piece, piece, after[k].collective_s, CommSide::kAfter) + reduce - whole;
    EXPECT_NEAR(after[k].added_s, std::max(0.0, want), 1e-12) << op.name;
    EXPECT_NE(after[k].added_s, before[k].added_s) << op.name;
    EXPECT_GT(reduce, 0.0);
    ++moved;
  }
  EXPECT_EQ(moved, 2);
  EXPECT_TRUE(ub_method_allowed("proj_fprop", UbMethod::kRingExchange));
  EXPECT_FALSE(ub_method_allowed("qkv_fprop", UbMethod::kPipeline));
  EXPECT_FALSE(ub_method_allowed("qkv_wgrad", UbMethod::kRingExchange));
}

// Under FP8, Transformer Engine's userbuffers all-gather FP8 copies (fp8_buf),
// and so do TE's blocking gathers without overlap: half the BF16 bytes;
// reduce-scatters keep BF16; the chunked NCCL overlap keeps BF16.
TEST(LayerProgram, UserbuffersGatherFp8CopiesUnderFp8) {
  Scenario s = default_scenario("megascale");
  s.hardware.gpu = "H100-SXM5-80GB";
  s.model.block = BlockKind::kSequential;
  s.parallel.sequence_parallel = true;
  s.optimizations.tp_overlap = true;
  const GpuProfile gpu = hardware_profile(s);
  const std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, false);
  const Link tp = parallel_links(s, gpu).tp;
  const LayerProgram fwd = layer_forward_program(s.model, s.parallel, ops);
  auto times = [&](TpOverlapComm comm, bool fp8) {
    s.optimizations.tp_overlap_comm = comm;
    s.optimizations.fp8 = fp8;
    return program_step_times(fwd, ops, false, s, tp, gpu);
  };
  const std::vector<StepTime> ub_bf16 = times(TpOverlapComm::kUserBuffers, false);
  const std::vector<StepTime> ub_fp8 = times(TpOverlapComm::kUserBuffers, true);
  const std::vector<StepTime> nccl_fp8 = times(TpOverlapComm::kNccl, true);
  // Without overlap Transformer Engine's own blocking gathers move FP8 too.
  s.optimizations.tp_overlap = false;
  const std::vector<StepTime> blocking_fp8 = times(TpOverlapComm::kNccl, true);
  s.optimizations.tp_overlap = true;
  int gathers = 0;
  for (size_t k = 0; k < fwd.size(); ++k) {
    if (fwd[k].kind == LayerStepKind::kTpAllGather) {
      ++gathers;
      const double half = collective_time_s(CollectiveKind::kAllGather, s.parallel.tp, fwd[k].bytes / 2.0, tp);
      EXPECT_DOUBLE_EQ(ub_fp8[k].collective_s, half) << fwd[k].name;
      EXPECT_LT(ub_fp8[k].collective_s, ub_bf16[k].collective_s) << fwd[k].name;
      EXPECT_DOUBLE_EQ(nccl_fp8[k].collective_s, ub_bf16[k].collective_s) << fwd[k].name;
      EXPECT_DOUBLE_EQ(blocking_fp8[k].collective_s, half) << fwd[k].name;
    } else if (fwd[k].kind == LayerStepKind::kTpReduceScatter) {
      EXPECT_DOUBLE_EQ(ub_fp8[k].collective_s, ub_bf16[k].collective_s) << fwd[k].name;
    }
  }
  EXPECT_EQ(gathers, 2);
}

TEST(LayerProgram, WithoutSpEachRegionEndsInAnAllReduce) {
  const Built b = build(BlockKind::kSequential, false, 8);
  EXPECT_EQ(count(b.fwd)[LayerStepKind::kTpAllReduce], 2);
  EXPECT_EQ(count(b.bwd)[LayerStepKind::kTpAllReduce], 2);
  EXPECT_EQ(count(b.fwd)[LayerStepKind::kTpAllGather], 0);
}

TEST(LayerProgram, NoTensorParallelismNoCollectives) {
  const Built b = build(BlockKind::kSequential, true, 1);
  EXPECT_EQ(b.fwd.size(), 1u);
  EXPECT_EQ(b.fwd[0].kind, LayerStepKind::kCompute);
}

TEST(LayerProgram, EveryOperatorRunsOnceForwardAndOnceBackward) {
  const Built b = build(BlockKind::kSequential, true, 8);
  std::vector<int> seen_f(b.ops.size()), seen_b(b.ops.size());
  for (const LayerStep& s : b.fwd) for (int i : s.ops) ++seen_f[i];
  for (const LayerStep& s : b.bwd) for (int i : s.ops) ++seen_b[i];
  for (size_t i = 0; i < b.ops.size(); ++i) {
    EXPECT_EQ(seen_f[i], 1) << b.ops[i].name;
    EXPECT_EQ(seen_b[i], 1) << b.ops[i].name;
  }
}

TEST(LayerProgram, FullRecomputationReplaysTheForwardFirst) {
  const Built b = build(BlockKind::kSequential, true, 8, Recompute::kFull);
  const Built plain = build(BlockKind::kSequential, true, 8);
  ASSERT_EQ(b.bwd.size(), plain.fwd.size() + plain.bwd.size());
  for (size_t i = 0; i < plain.fwd.size(); ++i) {
    EXPECT_TRUE(b.bwd[i].recompute);
    EXPECT_EQ(b.bwd[i].kind, plain.fwd[i].kind);
  }
  EXPECT_FALSE(b.bwd.back().recompute);
}

TEST(LayerProgram, SelectiveRecomputationReplaysOnlyTheAttentionCore) {
  const Built b = build(BlockKind::kSequential, true, 8, Recompute::kSelective);
  ASSERT_TRUE(b.bwd[0].recompute);
  for (int i : b.bwd[0].ops) EXPECT_TRUE(b.ops[i].attention_core) << b.ops[i].name;
  EXPECT_EQ(b.bwd[0].ops.size(), 4u);  // scores, softmax, dropout, context
  EXPECT_FALSE(b.bwd[1].recompute);
}

}  // namespace
}  // namespace megascale::model
