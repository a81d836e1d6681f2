// tests/model/payload_test.cc: one formula for DP bytes, the schedule's shape
// and throughput, shared by the estimator, sim/ and the engine.
#include "model/payload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "model/estimator.h"
#include "model/job_schedule.h"
#include "model/memory.h"
#include "model/profile.h"
#include "model/op_cost.h"
#include "model/scenario.h"
#include "model/throughput.h"

namespace megascale::model {
namespace {

Scenario gpu_job(int zero_stage) {
  Scenario s = default_scenario("megatron");  // 175B, P=8, V=6, TP=8
  s.parallel.dp = 4;
  s.cluster.gpus = 256;
  s.parallel.global_batch = 256;
  s.parallel.zero_stage = zero_stage;
  return s;
}

TEST(Payload, EmbeddingOnTheFirstAndLastChunkOnly) {
  const Scenario s = gpu_job(1);
  const ParallelConfig& p = s.parallel;
  const double layer = s.model.layers / (p.pp * p.vpp) * s.model.parameters_per_layer() / p.tp;
  const double embedding = static_cast<double>(s.model.vocab) * s.model.hidden / p.tp;
  EXPECT_DOUBLE_EQ(layer_chunk_params(s, 0, 0), layer);
  EXPECT_DOUBLE_EQ(dp_chunk_params(s, 0, 0), layer + embedding);
  EXPECT_DOUBLE_EQ(dp_chunk_params(s, p.pp - 1, p.vpp - 1), layer + embedding);
  EXPECT_DOUBLE_EQ(dp_chunk_params(s, 0, 1), layer);
  EXPECT_DOUBLE_EQ(dp_chunk_params(s, p.pp - 1, 0), layer);
  // Every chunk of every rank together: the model's layers plus the two
  // embedding copies (input and tied output), divided over TP.
  double total = 0;
  for (int r = 0; r < p.pp; ++r)
    for (int c = 0; c < p.vpp; ++c) total += dp_chunk_params(s, r, c);
  EXPECT_NEAR(total, (s.model.layers * s.model.parameters_per_layer() + 2.0 * s.model.vocab * s.model.hidden) / p.tp,
              1e-6 * total);
}

// Uneven first / last stages (model/pipeline_layout.h): 96 layers on 8 stages
// as 6 + 6 x 14 + 6, two chunks each; every layer is still counted once.
TEST(Payload, UnevenStagesCarryTheirOwnLayers) {
  Scenario s = gpu_job(1);
  ParallelConfig& p = s.parallel;
  p.vpp = 2;
  p.first_stage_layers = 6;
  p.last_stage_layers = 6;
  const double per_layer = s.model.parameters_per_layer() / static_cast<double>(p.tp);
  EXPECT_DOUBLE_EQ(layer_chunk_params(s, 0, 0), 3 * per_layer);
  EXPECT_DOUBLE_EQ(layer_chunk_params(s, 1, 1), 7 * per_layer);
  EXPECT_DOUBLE_EQ(layer_chunk_params(s, p.pp - 1, 1), 3 * per_layer);
  double total = 0;
  for (int r = 0; r < p.pp; ++r)
    for (int c = 0; c < p.vpp; ++c) total += dp_chunk_params(s, r, c);
  EXPECT_NEAR(total, (s.model.layers * s.model.parameters_per_layer() + 2.0 * s.model.vocab * s.model.hidden) / p.tp,
              1e-6 * total);
}

TEST(Payload, GradientsInFp32ParametersAtTheProfilesGatherWidth) {
  const Scenario s = gpu_job(1);
  const double params = dp_chunk_params(s, 0, 0);
  EXPECT_DOUBLE_EQ(dp_payload_bytes(s, 0, 0, OpKind::kDpReduceScatter), params * 4);
  EXPECT_DOUBLE_EQ(dp_payload_bytes(s, 0, 0, OpKind::kDpAllReduce), params * 4);
  EXPECT_DOUBLE_EQ(dp_payload_bytes(s, 0, 0, OpKind::kDpAllGather), params * 2);  // bf16 on A100
}

TEST(Payload, OnePipelineOneChunkHoldsOneEmbeddingCopy) {
  Scenario s = gpu_job(0);
  s.parallel.pp = 1;
  s.parallel.vpp = 1;
  s.parallel.dp = 32;
  EXPECT_DOUBLE_EQ(dp_chunk_params(s, 0, 0),
                   layer_chunk_params(s, 0, 0) + static_cast<double>(s.model.vocab) * s.model.hidden / s.parallel.tp);
}

TEST(Payload, EveryScheduleDpOpCarriesItsOwnChunksPayload) {
  for (int zero : {0, 1, 2}) {
    const Scenario s = gpu_job(zero);
    const Schedule sch = build_job_schedule(s);
    int dp_ops = 0;
    for (const RankSchedule& rank : sch.ranks) {
      for (const Op& op : rank.ops) {
        if (!is_dp_collective(op.kind)) continue;
        ++dp_ops;
        EXPECT_EQ(op.bytes, static_cast<int64_t>(dp_payload_bytes(s, rank.pp_rank, op.chunk, op.kind)))
            << "zero " << zero << " rank " << rank.pp_rank << " chunk " << op.chunk;
      }
    }
    EXPECT_GE(dp_ops, s.parallel.pp * s.parallel.vpp) << "zero " << zero;
  }
}

TEST(ScheduleOptions, TheEnginesShapeIsTheSimulatorsWithoutBytes) {
  Scenario s = gpu_job(2);
  s.optimizations.pp_overlap = true;
  s.optimizations.dp_overlap = false;
  const ScheduleOptions full = schedule_options(s);
  ScheduleOptions shape = schedule_options(s.model, s.parallel, s.optimizations);
  EXPECT_EQ(shape.activation_bytes, 0);
  EXPECT_EQ(shape.dp_bytes_per_chunk, 0);
  shape.activation_bytes = full.activation_bytes;
  shape.dp_bytes_per_chunk = full.dp_bytes_per_chunk;
  EXPECT_EQ(shape.pp, full.pp);
  EXPECT_EQ(shape.vpp, full.vpp);
  EXPECT_EQ(shape.microbatches, full.microbatches);
  EXPECT_EQ(shape.layers, full.layers);
  EXPECT_EQ(shape.zero_stage, 2);
  EXPECT_EQ(shape.dp, full.dp);
  EXPECT_TRUE(shape.pp_overlap);
  EXPECT_FALSE(shape.dp_overlap);
  EXPECT_EQ(shape.data_pipeline, full.data_pipeline);
  EXPECT_EQ(full.dp_bytes_per_chunk, static_cast<int64_t>(layer_chunk_params(s, 0, 0) * 4.0));  // fp32
}

// grad_reduce_dtype = bf16 halves what the DP reduce and the tied embedding's
// all-reduce move and the gradient buffer at ZeRO 0-2; the all-gather moves
// parameters either way, and ZeRO-3's shards stay fp32 (FSDP casts back).
TEST(Payload, Bf16GradientsHalveTheReduceAndTheBuffer) {
  for (int zero : {1, 3}) {
    const Scenario fp32 = gpu_job(zero);
    Scenario bf16 = fp32;
    bf16.optimizations.grad_reduce_dtype = GradReduceDtype::kBf16;
    for (OpKind k : {OpKind::kDpReduceScatter, OpKind::kDpAllGather}) {
      const double ratio = dp_payload_bytes(bf16, 0, 0, k) / dp_payload_bytes(fp32, 0, 0, k);
      EXPECT_DOUBLE_EQ(ratio, k == OpKind::kDpAllGather ? 1.0 : 0.5) << to_string(k);
    }
    EXPECT_EQ(schedule_options(bf16).dp_bytes_per_chunk * 2, schedule_options(fp32).dp_bytes_per_chunk);
    const GpuProfile& gpu = hardware_profile(fp32);
    const MemoryBreakdown a = memory_per_gpu(fp32.model, fp32.parallel, fp32.optimizations, gpu);
    const MemoryBreakdown b = memory_per_gpu(bf16.model, bf16.parallel, bf16.optimizations, gpu);
    EXPECT_DOUBLE_EQ(b.gradients_bytes / a.gradients_bytes, zero >= 3 ? 1.0 : 0.5) << "ZeRO " << zero;
    EXPECT_DOUBLE_EQ(a.parameters_bytes, b.parameters_bytes);
    EXPECT_DOUBLE_EQ(a.optimizer_bytes, b.optimizer_bytes);
  }
  // The estimate: the embedding's all-reduce and the DP reduce shrink.
  Scenario fp32 = gpu_job(1);
  fp32.optimizations.dp_overlap = false;
  Scenario bf16 = fp32;
  bf16.optimizations.grad_reduce_dtype = GradReduceDtype::kBf16;
  const Estimate a = estimate(fp32);
  const Estimate b = estimate(bf16);
  EXPECT_LT(b.breakdown.embedding_sync_s, a.breakdown.embedding_sync_s);
  EXPECT_LT(b.breakdown.dp_exposed_s, a.breakdown.dp_exposed_s);
  EXPECT_DOUBLE_EQ(b.breakdown.optimizer_s, a.breakdown.optimizer_s);
}

// fp8_param_gather (Megatron-Core --fp8-param-gather, NeMo's fp8_params): the
// distributed optimizer's all-gather moves one byte a parameter, only with FP8
// on; the gradients' reduction is unchanged.
TEST(Payload, Fp8ParameterGatherMovesOneByteAParameter) {
  for (int zero : {1, 3}) {
    Scenario bf16 = gpu_job(zero);
    bf16.hardware.gpu = "H100-SXM5-80GB";
    bf16.optimizations.fp8 = true;
    Scenario fp8 = bf16;
    fp8.optimizations.fp8_param_gather = true;
    EXPECT_DOUBLE_EQ(param_gather_element_bytes(bf16), 2.0);
    EXPECT_DOUBLE_EQ(param_gather_element_bytes(fp8), 1.0);
    EXPECT_DOUBLE_EQ(dp_payload_bytes(fp8, 0, 0, OpKind::kDpAllGather) * 2,
                     dp_payload_bytes(bf16, 0, 0, OpKind::kDpAllGather));
    EXPECT_DOUBLE_EQ(dp_payload_bytes(fp8, 0, 0, OpKind::kDpReduceScatter),
                     dp_payload_bytes(bf16, 0, 0, OpKind::kDpReduceScatter));
    Scenario off = fp8;
    off.optimizations.fp8 = false;  // the key read, unused
    EXPECT_DOUBLE_EQ(param_gather_element_bytes(off), 2.0);
  }
  Scenario bf16 = gpu_job(1);
  bf16.hardware.gpu = "H100-SXM5-80GB";
  bf16.optimizations.fp8 = true;
  bf16.optimizations.dp_overlap = false;
  Scenario fp8 = bf16;
  fp8.optimizations.fp8_param_gather = true;
  EXPECT_LT(estimate(fp8).breakdown.dp_exposed_s, estimate(bf16).breakdown.dp_exposed_s);
}

TEST(Throughput, MfuAndTokensFromOneFormula) {
  const Scenario s = gpu_job(1);
  const double t = 12.5;
  const Throughput gpu = throughput(s, t);
  const double flops = model_flops_per_iteration(s.model, s.parallel.global_batch);
  EXPECT_DOUBLE_EQ(gpu.model_flops, flops);
  EXPECT_DOUBLE_EQ(gpu.mfu, flops / (t * 256 * 312e12));  // A100 bf16 dense peak
  EXPECT_DOUBLE_EQ(gpu.tokens_per_s, 256.0 * s.model.seq_len / t);
  // The engine's form: its usable cores at a per-core peak.
  const Throughput cores = throughput(s, t, 3, 50e9);
  EXPECT_DOUBLE_EQ(cores.mfu, flops / (t * 3 * 50e9));
  EXPECT_DOUBLE_EQ(cores.tokens_per_s, gpu.tokens_per_s);
}

TEST(Throughput, OutOfRangeIsAnError) {
  const Scenario s = gpu_job(1);
  EXPECT_THROW(throughput(s, 0.0), std::invalid_argument);
  EXPECT_THROW(throughput(s, -1.0), std::invalid_argument);
  EXPECT_THROW(throughput(s, std::nan("")), std::invalid_argument);
  EXPECT_THROW(throughput(s, 1.0, 0, 50e9), std::invalid_argument);
  // Faster than the peak allows: 256 A100s would need MFU > 1 for this time.
  const double flops = model_flops_per_iteration(s.model, s.parallel.global_batch);
  const double too_fast_s = 0.5 * flops / (256 * 312e12);
  try {
    throughput(s, too_fast_s);
    FAIL() << "no error for MFU 2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("A100"), std::string::npos) << e.what();
  }
  // The engine's measured form may exceed 1 (its peak is a measurement too).
  EXPECT_GT(throughput(s, too_fast_s, 256, 312e12).mfu, 1.0);
}

// What each micro-batch's accumulation moves a parameter outside the GEMMs.
TEST(Payload, GradAccumulationBytesPerParameter) {
  Optimizations o;
  EXPECT_EQ(grad_accumulation_bytes_per_param(o), 0.0);  // every preset: fused into the wgrad GEMM
  o.grad_accumulation = GradAccumulation::kAdd;
  EXPECT_EQ(grad_accumulation_bytes_per_param(o), 2.0 + 4.0 + 4.0);  // bf16 grad, fp32 accumulator read and written
  o.grad_accumulation = GradAccumulation::kAdd16Bit;
  EXPECT_EQ(grad_accumulation_bytes_per_param(o), 2.0 + 2.0 + 2.0);  // fp16 grad into the fp16 .grad
  o.grad_accumulation = GradAccumulation::kCastAdd;
  EXPECT_EQ(grad_accumulation_bytes_per_param(o), 2.0 + 4.0 + 4.0 + 4.0 + 4.0);  // + the fp32 temporary
  for (const char* preset : {"megatron", "megatron-core", "megascale"}) {
    EXPECT_EQ(default_scenario(preset).optimizations.grad_accumulation, GradAccumulation::kFused) << preset;
  }
}

// The optimizer's state a parameter, held and moved by one step: fp32 (every
// preset), Apex's bf16 state, and Megatron-Core's precision-aware optimizer.
TEST(Payload, OptimizerStateBytesPerParameter) {
  Optimizations o;
  OptimizerStateBytes b = optimizer_state_bytes(o);
  EXPECT_EQ(b.held(), 12.0);         // fp32 master + two fp32 moments
  EXPECT_EQ(b.step_traffic(), 24.0);  // each read and written
  o.optimizer_state_dtype = OptimizerStateDtype::kBf16;  // Apex DistributedFusedAdam dtype = bf16
  b = optimizer_state_bytes(o);
  EXPECT_EQ(b.held(), 6.0);
  EXPECT_EQ(b.step_traffic(), 12.0);
  o = Optimizations{};
  o.exp_avg_dtype = MomentDtype::kBf16;
  o.exp_avg_sq_dtype = MomentDtype::kFp8;  // TE FusedAdam: uint8 with a per-tensor scale
  b = optimizer_state_bytes(o);
  EXPECT_EQ(b.held(), 4.0 + 2.0 + 1.0);
  EXPECT_EQ(b.step_traffic(), 2 * (4.0 + 2.0 + 1.0));
  // TE's param remainders: 2 B held; the step reads them with the bf16
  // parameter they complete (2 + 2) and writes them back (2).
  o.main_params_dtype = MainParamsDtype::kFp32Remainders;
  b = optimizer_state_bytes(o);
  EXPECT_EQ(b.main_param_held, 2.0);
  EXPECT_EQ(b.main_param_read, 4.0);
  EXPECT_EQ(b.main_param_written, 2.0);
  o.main_params_dtype = MainParamsDtype::kFp16;
  EXPECT_EQ(optimizer_state_bytes(o).held(), 2.0 + 2.0 + 1.0);
  for (const char* preset : {"megatron", "megatron-core", "megascale"}) {
    const Optimizations d = default_scenario(preset).optimizations;
    EXPECT_EQ(optimizer_state_bytes(d).held(), 12.0) << preset;
  }
}

}  // namespace
}  // namespace megascale::model
