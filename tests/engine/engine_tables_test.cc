// tests/engine/engine_tables_test.cc: engine/engine_tables.h on the CPU
// device (the same code measures a CudaDevice under `calibrate micro --device
// cuda --engine-profile`; scripts/gpu-check.sh runs it there).
//
// Checks: the tables hold exactly the scenario's calls (every GEMM shape in
// its layout, attention forward and backward, each kernel the step calls)
// plus every kernel the profile format needs; the profile built from them is
// a GPU profile with engine_calls = 1 that survives a write / parse round
// trip; and a job on it is timed by the engine's calls from those tables
// (model/engine_ops.h), with no forward bias_add where the device fuses the
// biases, while the shipped profile it was based on still times Megatron-LM's
// kernels.
#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "engine/device_cpu.h"
#include "engine/engine_tables.h"
#include "model/engine_ops.h"
#include "model/op_cost.h"
#include "model/profile.h"
#include "model/scenario.h"

namespace megascale::engine {
namespace {

const std::string kTiny = std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/cpu/eval/tiny.toml";

TEST(EngineTables, MeasureTheScenariosCallsAndMakeAnEngineProfile) {
  const model::Scenario s = model::load_scenario(kTiny);
  const EngineTables t = measure_engine_tables(cpu_device(), {s}, 3);

  // Every GEMM the step calls, in the layout it calls it, and nothing else.
  model::GpuProfile shape_only;
  shape_only.kind = "cpu";
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> want;
  for (auto&& ops : {model::job_layer_operators(s, shape_only), model::job_embedding_operators(s, shape_only),
                     model::job_output_operators(s, shape_only)}) {
    for (const model::OperatorCost& op : ops) {
      for (const auto* calls : {&op.fwd_calls, &op.bwd_calls}) {
        for (const model::KernelCall& c : *calls) {
          if (c.kind == model::CallKind::kGemm) want.insert({c.name, c.m, c.n, c.k});
        }
      }
    }
  }
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> got;
  for (const model::GemmPoint& p : t.gemm) {
    got.insert({p.layout, p.m, p.n, p.k});
    EXPECT_GT(p.seconds, 0) << p.layout << " " << p.m << "x" << p.n << "x" << p.k;
  }
  EXPECT_EQ(got, want);
  ASSERT_EQ(t.attention.size(), 2u);  // one shape, forward and backward
  EXPECT_EQ(t.attention[0].seq, s.model.seq_len);
  EXPECT_EQ(t.attention[0].head_dim, s.model.head_dim());
  for (const std::string& k : model::kCpuKernels) {
    EXPECT_TRUE(std::any_of(t.kernels.begin(), t.kernels.end(),
                            [&](const model::KernelPoint& p) { return p.kernel == k && p.seconds > 0; }))
        << k;
  }

  const model::GpuProfile& base = model::gpu_profile("H200-SXM-141GB");
  const model::GpuProfile p =
      engine_device_profile(t, base, "H200-engine-test", "cpu (test)", {kTiny}, "host", "2026-12-04");
  EXPECT_FALSE(p.is_cpu());
  EXPECT_TRUE(p.models_engine());
  EXPECT_EQ(p.activation_bytes, 4);
  EXPECT_EQ(p.peak_tflops, base.peak_tflops);  // the GPU's own values stay
  const model::GpuProfile back = model::parse_profile(model::write_profile(p), "engine-profile.toml");
  EXPECT_TRUE(back.models_engine());
  EXPECT_EQ(back.provenance.at("tables.gemm").source, "measured");
  ASSERT_NE(back.measured(), nullptr);
  EXPECT_EQ(back.measured()->gemm.points().size(), t.gemm.size());

  // A job on it: the engine's calls, timed by the tables...
  const std::vector<model::OperatorCost> ops = model::job_layer_operators(s, back);
  const auto fc1 = std::find_if(ops.begin(), ops.end(), [](const model::OperatorCost& op) { return op.name == "fc1"; });
  ASSERT_NE(fc1, ops.end());
  ASSERT_FALSE(fc1->fwd_calls.empty());
  double table_s = 0;
  for (const model::KernelCall& c : fc1->fwd_calls) {
    table_s += c.kind == model::CallKind::kGemm
                   ? back.measured()->gemm.time_s(c.m, c.n, c.k, c.name, 1)
                   : *back.measured()->kernels.time_s(c.name, c.backward, c.count, 1);
  }
  EXPECT_NEAR(model::forward_time_s(*fc1, back), table_s + model::op_gap_s(back), 1e-12);
  // The CPU device runs the biases as kernels of their own; a device that
  // fuses them (the CUDA device: GpuProfile::fused_bias) has no forward bias_add.
  EXPECT_FALSE(t.fused_bias);
  EXPECT_EQ(back.fused_bias, 0);
  auto bias_adds = [](const model::OperatorCost& op) {
    return std::count_if(op.fwd_calls.begin(), op.fwd_calls.end(),
                         [](const model::KernelCall& c) { return c.name == "bias_add"; });
  };
  EXPECT_EQ(bias_adds(*fc1), 1);
  model::GpuProfile fused = back;
  fused.fused_bias = 1;
  double fused_bias_s = 0, separate_bias_s = 0;
  for (const model::OperatorCost& op : model::job_layer_operators(s, fused)) {
    EXPECT_EQ(bias_adds(op), 0) << op.name;
    fused_bias_s += model::forward_time_s(op, fused);
  }
  for (const model::OperatorCost& op : ops) separate_bias_s += model::forward_time_s(op, back);
  EXPECT_LT(fused_bias_s, separate_bias_s);
  // ... while the shipped profile still costs Megatron-LM's kernels.
  for (const model::OperatorCost& op : model::job_layer_operators(s, base)) EXPECT_TRUE(op.fwd_calls.empty()) << op.name;
}

// A GPU profile that claims the engine's calls must carry their tables: the
// parse names the missing one.
TEST(EngineTables, AnEngineProfileWithoutTablesIsRefused) {
  model::GpuProfile p = model::gpu_profile("H200-SXM-141GB");
  std::string text = model::write_profile(p);
  const size_t at = text.find("[values]\n");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 9, "engine_calls = { value = 1, source = \"spec\", ref = \"test\" }\n");
  try {
    (void)model::parse_profile(text, "bad-engine.toml");
    FAIL() << "an engine profile without tables parsed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("tables.gemm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad-engine.toml"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megascale::engine
