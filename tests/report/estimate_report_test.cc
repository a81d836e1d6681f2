// tests/report/estimate_report_test.cc: report/estimate_report.h's JSON and text.
#include "report/estimate_report.h"

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/breakdown_parts.h"
#include "model/estimator.h"
#include "model/fused_overlap.h"
#include "model/job_schedule.h"
#include "model/scenario.h"

namespace megascale::report {
namespace {

model::Estimate with_breakdown(const model::Scenario& s) {
  model::Estimate e = model::estimate(s);
  // Distinct values per component, so a key bound to the wrong member shows.
  double v = 1;
  for (const model::BreakdownPart& part : model::kBreakdownParts) e.breakdown.*part.seconds = v++;
  e.iteration_time_s = e.breakdown.total();
  return e;
}

TEST(EstimateReport, JsonBreakdownHasEveryPartInOrderWithItsValue) {
  const model::Scenario s = model::default_scenario("megascale");
  const model::Estimate e = with_breakdown(s);
  const base::Json j = estimate_json(s, e, "event");
  EXPECT_EQ(j["fidelity"], "event");
  EXPECT_EQ(j["scenario"], s.name);
  const base::Json& b = j["breakdown_s"];
  ASSERT_EQ(b.size(), model::kBreakdownParts.size());
  size_t i = 0;
  for (const auto& [key, value] : b.items()) {
    EXPECT_EQ(key, model::kBreakdownParts[i].key);
    EXPECT_DOUBLE_EQ(value.get<double>(), static_cast<double>(i + 1)) << key;
    ++i;
  }
  EXPECT_EQ(j["parallel"]["tp"], s.parallel.tp);
}

// The JSON echoes every [optimizations] switch the estimate used, as the
// scenario file names it.
TEST(EstimateReport, JsonEchoesEveryOptimizationSwitch) {
  model::Scenario s = model::default_scenario("megatron-core");
  s.optimizations.cross_entropy = model::CrossEntropyImpl::kJitFused;
  s.optimizations.userbuffers["fc2_fprop"].num_sm = 24;
  s.optimizations.fp8_param_gather = true;  // echoed even where fp8 leaves it unused
  s.optimizations.dp_overlap_param_gather = false;
  s.optimizations.optimizer_state_dtype = model::OptimizerStateDtype::kBf16;
  s.optimizations.grad_accumulation = model::GradAccumulation::kCastAdd;
  const base::Json o = estimate_json(s, model::estimate(s))["optimizations"];
  // Every userbuffers GEMM as modelled: TE's defaults, the override.
  ASSERT_EQ(o["userbuffers"].size(), model::kUbGemms.size());
  EXPECT_EQ(o["userbuffers"]["fc2_fprop"]["num_sm"], 24);
  EXPECT_EQ(o["userbuffers"]["fc2_fprop"]["method"], "pipeline");
  EXPECT_EQ(o["userbuffers"]["proj_fprop"]["num_sm"], model::kUbCommSms);
  EXPECT_EQ(o["userbuffers"]["qkv_fprop"]["num_splits"], s.parallel.tp);
  EXPECT_EQ(o["preset"], "megatron-core");
  EXPECT_EQ(o["cross_entropy"], "jit-fused");
  EXPECT_EQ(o["fused_attention"], true);
  EXPECT_EQ(o["attention_kernel"], "flash2");
  EXPECT_EQ(o["fp8"], false);
  EXPECT_EQ(o["fp8_recipe"], "delayed");
  EXPECT_EQ(o["fp8_param_gather"], true);
  EXPECT_EQ(o["dp_overlap"], true);
  EXPECT_EQ(o["dp_overlap_param_gather"], false);
  EXPECT_EQ(o["optimizer_state_dtype"], "bf16");
  EXPECT_EQ(o["exp_avg_dtype"], "fp32");
  // Megatron-Core's precision-aware optimizer, as a scenario file names it.
  s.optimizations.optimizer_state_dtype = model::OptimizerStateDtype::kFp32;
  s.optimizations.exp_avg_sq_dtype = model::MomentDtype::kFp8;
  s.optimizations.main_params_dtype = model::MainParamsDtype::kFp32Remainders;
  const base::Json pa = estimate_json(s, model::estimate(s))["optimizations"];
  EXPECT_EQ(pa["exp_avg_sq_dtype"], "fp8");
  EXPECT_EQ(pa["main_params_dtype"], "fp32_remainders");
  EXPECT_EQ(o["grad_accumulation"], "cast_add");
  // The preset's default resolved: max(40M, 1M x DP 192) parameters, as a
  // scenario file could write it (it echoed the internal -1, which a file may not).
  EXPECT_EQ(o["dp_bucket_params"], 192'000'000);
  EXPECT_EQ(o["dp_buckets_per_chunk"], model::dp_buckets_per_chunk(s));
  EXPECT_GT(o["dp_buckets_per_chunk"].get<int>(), 0);
  EXPECT_EQ(o["tp_overlap_comm"], "userbuffers");
  EXPECT_EQ(o["tp_overlap_sm_margin"], true);
  EXPECT_EQ(o["optimizer"], model::to_string(s.optimizations.optimizer));
  for (const char* key : {"tp_overlap", "pp_overlap", "dp_overlap", "efficient_operators", "data_pipeline"}) {
    EXPECT_TRUE(o.contains(key)) << key;
  }
}

// Under FP8 the text says MFU is against the BF16 peak (it may pass 100%);
// without FP8 it says nothing more.
TEST(EstimateReport, Fp8TextNamesTheBf16PeakBehindMfu) {
  model::Scenario s = model::default_scenario("megatron-core");
  s.hardware.gpu = "H100-SXM5-80GB";
  const std::string bf16 = estimate_text(s, model::estimate(s));
  EXPECT_EQ(bf16.find("against the dense BF16 peak"), std::string::npos);
  s.optimizations.fp8 = true;
  const std::string fp8 = estimate_text(s, model::estimate(s));
  EXPECT_NE(fp8.find("MFU against the dense BF16 peak, 989 TFLOP/s"), std::string::npos) << fp8;
}

// ZeRO 2/3 over several micro-batches per replica: the text says what the
// sharded gradients leave out and the JSON gives the bytes; ZeRO-1, or one
// micro-batch per replica, carries no note and 0.
TEST(EstimateReport, ShardedGradientsOverSeveralMicrobatchesCarryANote) {
  model::Scenario s = model::default_scenario("megatron");  // 175B, DP > 1, many micro-batches per replica
  const std::string z1 = estimate_text(s, model::estimate(s));
  EXPECT_EQ(z1.find("reduce-scatters them once per step"), std::string::npos) << z1;
  EXPECT_EQ(estimate_json(s, model::estimate(s), "analytical")["unsharded_gradient_extra_bytes"].get<double>(), 0.0);
  s.parallel.zero_stage = 2;
  const model::Estimate e = model::estimate(s);
  const std::string z2 = estimate_text(s, e);
  const std::string note = fmt::format("note: ZeRO-2 counts 1/{} of the gradients but reduce-scatters them once per "
                                       "step; with {} micro-batches per replica",
                                       s.parallel.dp, s.parallel.microbatches());
  EXPECT_NE(z2.find(note), std::string::npos) << z2;
  const double extra = estimate_json(s, e, "analytical")["unsharded_gradient_extra_bytes"].get<double>();
  EXPECT_GT(extra, 0.0);
  EXPECT_NE(z2.find(fmt::format("(+{:.1f} GB)", extra / 1e9)), std::string::npos) << z2;
  s.parallel.global_batch = s.parallel.dp * s.parallel.micro_batch;  // one micro-batch per replica
  EXPECT_EQ(estimate_text(s, model::estimate(s)).find("reduce-scatters them once per step"), std::string::npos);
}

TEST(EstimateReport, BubbleShareOfTheStepStaysBelowOneWhereMegatronsRatioDoesNot) {
  // PP 8 with 2 micro-batches per replica: Megatron-LM's bubble / compute is
  // (P - 1) / M = 3.5; as a share of the step it is below 1.
  model::Scenario s = model::default_scenario("megascale");
  s.parallel.vpp = 1;
  s.parallel.global_batch = 2 * s.parallel.dp * s.parallel.micro_batch;
  const model::Estimate e = model::estimate(s);
  ASSERT_GT(e.bubble_fraction, 1.0);
  const base::Json j = estimate_json(s, e, "analytical");
  EXPECT_DOUBLE_EQ(j["bubble_fraction"].get<double>(), e.bubble_fraction);
  const double share = j["bubble_share_of_step"].get<double>();
  // 3.5 / 4.5 of compute + bubble; the step also holds TP, p2p (ECMP across
  // the 12,288 GPUs' uplinks) and DP time.
  EXPECT_GT(share, 0.4);
  EXPECT_LT(share, 1.0);
  EXPECT_DOUBLE_EQ(share, e.breakdown.bubble_s / e.iteration_time_s);
  // The text says which: a header of "bubble 350%" over a breakdown line of
  // 70% of the step read as a contradiction.
  const std::string text = estimate_text(s, e);
  EXPECT_NE(text.find(fmt::format("bubble {:.2f}% of compute\n", 100 * e.bubble_fraction)), std::string::npos) << text;
  // MFU's denominator is named: the A100 profile's dense BF16 peak.
  EXPECT_DOUBLE_EQ(j["mfu_peak_tflops"].get<double>(), 312.0);
}

TEST(EstimateReport, ReportJsonStartsWithTheHeader) {
  const std::string line = report_json(base::Json{{"x", 1}});
  const base::Json j = base::Json::parse(line);
  EXPECT_EQ(j.begin().key(), "schema_version");
  EXPECT_EQ(j["x"], 1);
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(EstimateReport, TextListsEachPartWithItsShareOfTheIteration) {
  const model::Scenario s = model::default_scenario("megascale");
  const model::Estimate e = with_breakdown(s);  // total 66 s: host (11 s) is 16.7%
  const std::string text = estimate_text(s, e);
  EXPECT_NE(text.find(s.name + " ("), std::string::npos);
  EXPECT_NE(text.find("    compute             2.000 s    3.0%\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    host               11.000 s   16.7%\n"), std::string::npos) << text;
}

TEST(EstimateReport, CompareTextGivesTheSpeedupOfTheSecond) {
  const model::Scenario a = model::default_scenario("megatron");
  const model::Scenario b = model::default_scenario("megascale");
  model::Estimate ea = with_breakdown(a), eb = with_breakdown(b);
  ea.iteration_time_s = 3;
  eb.iteration_time_s = 2;
  const std::string text = compare_text(a, ea, b, eb, "analytical");
  EXPECT_NE(text.find("speedup"), std::string::npos);
  EXPECT_NE(text.find("1.50x\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  tp_exposed (s)                4.000          4.000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(analytical fidelity;"), std::string::npos);
}

// The first line of `compare` states the user's global batch, not CP's folded one.
TEST(EstimateReport, CompareTextStatesTheUsersGlobalBatchWithContextParallelism) {
  model::Scenario a = model::default_scenario("megatron");
  a.parallel.cp = 2;
  a.parallel.dp *= 2;  // folded (model/config.h)
  a.parallel.global_batch *= 2;
  const model::Estimate e = with_breakdown(a);
  const std::string text = compare_text(a, e, a, e, "analytical");
  const std::string first = text.substr(0, text.find('\n'));
  EXPECT_NE(first.find("global batch " + std::to_string(a.parallel.global_batch / 2)), std::string::npos) << first;
}

TEST(EstimateReport, LayoutLineShowsTheUsersFiguresWithContextParallelism) {
  model::ParallelConfig p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  p.micro_batch = 1;
  p.global_batch = 64;
  EXPECT_EQ(layout_line(p).rfind("TP 8  PP 4  VPP ", 0), 0u) << layout_line(p);
  p.cp = 2;
  p.dp = 4;  // CP folded into DP (model/config.h)
  p.global_batch = 128;
  const std::string line = layout_line(p);
  EXPECT_NE(line.find("CP 2"), std::string::npos) << line;
  EXPECT_NE(line.find("DP 2 "), std::string::npos) << line;
  EXPECT_NE(line.find("global batch 64"), std::string::npos) << line;
  EXPECT_EQ(line.find("stage layers"), std::string::npos) << line;  // even stages go unsaid
}

// Uneven first / last stages are named in the layout line and in the JSON.
TEST(EstimateReport, LayoutNamesUnevenStages) {
  model::ParallelConfig p;
  p.tp = 8;
  p.pp = 16;
  p.vpp = 8;
  p.first_stage_layers = 7;
  p.last_stage_layers = 7;
  EXPECT_NE(layout_line(p).find("stage layers first 7 last 7"), std::string::npos) << layout_line(p);
  p.last_stage_layers = 0;
  EXPECT_NE(layout_line(p).find("stage layers first 7 last even"), std::string::npos) << layout_line(p);
  const Json j = parallel_json(p);
  EXPECT_EQ(j.at("first_stage_layers"), 7);
  EXPECT_FALSE(j.contains("last_stage_layers"));
}

// An uneven split is also written as Megatron-Core's layout string (Meta's
// Llama 3 split at VPP 8 has no first / last flag spelling); an even one is not.
TEST(EstimateReport, UnevenSplitsPrintTheMegatronLayoutString) {
  model::Scenario s = model::default_scenario("megascale");  // 96 layers, PP 8, VPP 6
  EXPECT_EQ(megatron_layout_text(s), "");
  EXPECT_EQ(estimate_text(s, model::estimate(s)).find("--pipeline-model-parallel-layout"), std::string::npos);
  s.parallel.first_stage_layers = 11;
  s.parallel.last_stage_layers = 11;
  s.parallel.vpp = 1;
  s.model.layers = 94;  // 11 + 6 x 12 + 11
  EXPECT_EQ(megatron_layout_text(s), "Et*11|(t*12|)*6,t*11L");
  EXPECT_NE(estimate_text(s, model::estimate(s)).find("--pipeline-model-parallel-layout \"Et*11|(t*12|)*6,t*11L\""),
            std::string::npos);
  EXPECT_EQ(estimate_json(s, model::estimate(s), "analytical").at("parallel").at("megatron_layout"),
            "Et*11|(t*12|)*6,t*11L");
}

// A free-form layout (model/megatron_layout.h) names each stage's layers.
TEST(EstimateReport, LayoutNamesFreeFormStages) {
  model::ParallelConfig p;
  p.pp = 2;
  p.vpp = 2;
  p.pipeline_layout = "Et||tt|tL";
  p.pipeline_chunk_layers = std::make_shared<const std::vector<int>>(std::vector<int>{1, 0, 2, 1});
  EXPECT_NE(layout_line(p).find("stage layers 3+1"), std::string::npos) << layout_line(p);
  const Json j = parallel_json(p);
  EXPECT_EQ(j.at("pipeline_layout"), "Et||tt|tL");
  EXPECT_EQ(j.at("stage_layers"), Json::array({3, 1}));
}

}  // namespace
}  // namespace megascale::report
