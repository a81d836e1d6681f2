// tests/model/op_recompute_test.cc: torchtitan's op-level selective AC
// (recompute = "selective_op"): which matmuls re-run, what the forward keeps,
// and the backward program and time that follow.
#include "model/op_recompute.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "model/estimator.h"
#include "model/layer_program.h"
#include "model/memory.h"
#include "model/profile.h"
#include "model/scenario.h"

namespace megascale::model {
namespace {

// Llama 3.1 8B as torchtitan's Table 1 trains it: TP 1, micro-batch 2 x 8192.
Scenario llama8b(int tp = 1, bool sp = false) {
  Scenario s = default_scenario("megatron");
  s.model.layers = 32;
  s.model.hidden = 4096;
  s.model.heads = 32;
  s.model.kv_heads = 8;
  s.model.ffn_hidden = 14336;
  s.model.mlp = MlpKind::kSwiGlu;
  s.model.seq_len = 8192;
  s.model.vocab = 128256;
  s.model.block = BlockKind::kSequential;
  s.parallel.tp = tp;
  s.parallel.sequence_parallel = sp;
  s.parallel.pp = 1;
  s.parallel.vpp = 1;
  s.parallel.micro_batch = 2;
  s.parallel.recompute = Recompute::kSelectiveOp;
  return s;
}

int index_of(const std::vector<OperatorCost>& ops, const std::string& name) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no operator " << name;
  return 0;
}

TEST(OpRecompute, MatmulsAreCountedInTheBlocksCallOrder) {
  const Scenario s = llama8b();
  std::vector<std::string> names;
  for (const char* op : {"qkv", "proj", "fc1", "fc2"}) {
    for (const GemmPart& part : gemm_parts(s.model, s.parallel, op)) names.push_back(part.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"wq", "wk", "wv", "wo", "w1", "w3", "w2"}));
  // wq is 4096 wide of qkv's 4096 + 2 x 1024.
  EXPECT_DOUBLE_EQ(gemm_parts(s.model, s.parallel, "qkv")[0].flop_share, 4096.0 / 6144);
  EXPECT_TRUE(gemm_parts(s.model, s.parallel, "ln1").empty());
}

TEST(OpRecompute, EverySecondMatmulAndEveryUnsavedOpReRuns) {
  const Scenario s = llama8b();
  const std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, /*efficient_operators=*/true);
  const std::vector<double> share = op_recompute_shares(s.model, s.parallel, ops);
  EXPECT_DOUBLE_EQ(share[index_of(ops, "qkv")], 1024.0 / 6144);  // wk
  EXPECT_DOUBLE_EQ(share[index_of(ops, "proj")], 1.0);           // wo
  EXPECT_DOUBLE_EQ(share[index_of(ops, "fc1")], 0.5);            // w3
  EXPECT_DOUBLE_EQ(share[index_of(ops, "fc2")], 0.0);            // w2 saved
  EXPECT_DOUBLE_EQ(share[index_of(ops, "flash_attention")], 0.0);  // SDPA saved
  EXPECT_DOUBLE_EQ(share[index_of(ops, "ln1")], 1.0);
  EXPECT_DOUBLE_EQ(share[index_of(ops, "swiglu")], 1.0);
  // Unfused attention (bmm and softmax, not in the save list) re-runs whole.
  const std::vector<OperatorCost> unfused = layer_operators(s.model, s.parallel, false);
  const std::vector<double> unfused_share = op_recompute_shares(s.model, s.parallel, unfused);
  for (size_t i = 0; i < unfused.size(); ++i) {
    if (unfused[i].attention_core) {
      EXPECT_DOUBLE_EQ(unfused_share[i], 1.0) << unfused[i].name;
    }
  }
  // GeLU MLP: fc1 is the 5th matmul (saved), fc2 the 6th (re-run).
  Scenario gelu = s;
  gelu.model.mlp = MlpKind::kGelu;
  const std::vector<OperatorCost> gops = layer_operators(gelu.model, gelu.parallel, true);
  const std::vector<double> gshare = op_recompute_shares(gelu.model, gelu.parallel, gops);
  EXPECT_DOUBLE_EQ(gshare[index_of(gops, "fc1")], 0.0);
  EXPECT_DOUBLE_EQ(gshare[index_of(gops, "fc2")], 1.0);
}

TEST(OpRecompute, TheForwardKeepsTheSavedOutputsOnly) {
  // TP 1: input 4096 + wq 4096 + wv 1024 + SDPA out 4096 (+ fp32 lse, 2 x 32)
  // + w1 14336 + w2 4096.
  const Scenario s = llama8b();
  EXPECT_DOUBLE_EQ(op_recompute_saved_elems_per_token(s.model, s.parallel, true),
                   4096 + 4096 + 1024 + 4096 + 64 + 14336 + 4096);
  // 2 x 8192 tokens x 31,808 elements x 2 bytes = 1.04 GB a layer, against
  // 2.48 GB as Megatron's selective recompute (which keeps every linear input).
  const double op_bytes = activation_bytes_per_layer(s.model, s.parallel, true, false);
  EXPECT_NEAR(op_bytes, 2.0 * 8192 * 31808 * 2, 1);
  Scenario megatron = s;
  megatron.parallel.recompute = Recompute::kSelective;
  EXPECT_LT(op_bytes, 0.5 * activation_bytes_per_layer(megatron.model, megatron.parallel, true, false));
  Scenario full = s;
  full.parallel.recompute = Recompute::kFull;
  EXPECT_GT(op_bytes, activation_bytes_per_layer(full.model, full.parallel, true, false));
  // TP 8 with SP: the input and the column outputs split, the row outputs whole
  // (partial sums), plus the two reduce-scatters' outputs.
  const Scenario tp = llama8b(8, true);
  EXPECT_DOUBLE_EQ(op_recompute_saved_elems_per_token(tp.model, tp.parallel, true),
                   512 + 512 + 128 + 512 + 8 + 1792 + 4096 + 2 * 512);
}

TEST(OpRecompute, TheBackwardReRunsThoseSharesFirst) {
  const Scenario s = llama8b();
  const std::vector<OperatorCost> ops = layer_operators(s.model, s.parallel, true);
  const LayerProgram bwd = layer_backward_program(s.model, s.parallel, ops);
  ASSERT_FALSE(bwd.empty());
  ASSERT_TRUE(bwd[0].recompute);
  const LayerStep& rerun = bwd[0];
  ASSERT_EQ(rerun.op_share.size(), rerun.ops.size());
  for (size_t j = 0; j < rerun.ops.size(); ++j) {
    EXPECT_NE(ops[rerun.ops[j]].name, "fc2");
    EXPECT_NE(ops[rerun.ops[j]].name, "flash_attention");
  }
  // Its FLOPs: wk + wo + w3 of the forward's matmuls.
  const GpuProfile& gpu = builtin_profile("H100-SXM5-80GB");
  const Link tp_link = nvlink_link(gpu.nvlink_busbw_gbs);
  const ProgramTime t = program_time(bwd, ops, true, s, tp_link, gpu);
  const double tokens = 2.0 * 8192;
  const double rerun_flops = 2 * tokens * 4096 * (1024 + 4096 + 14336);
  double step_flops = 0;
  for (size_t j = 0; j < rerun.ops.size(); ++j) step_flops += rerun.share(j) * ops[rerun.ops[j]].fwd_flops;
  EXPECT_NEAR(step_flops, rerun_flops, 1e-6 * rerun_flops);
  EXPECT_GT(t.recompute_s, 0);
  // Between Megatron's selective (attention core, here none: flash) and full.
  Scenario full = s;
  full.parallel.recompute = Recompute::kFull;
  const ProgramTime tf = program_time(layer_backward_program(full.model, full.parallel, ops), ops, true, full,
                                      tp_link, gpu);
  EXPECT_LT(t.recompute_s, 0.7 * tf.recompute_s);
  // TP 8 without SP: the all-reduce after the re-run wo runs again; with SP the
  // all-gathers before the re-run qkv and fc1 parts do (reduce-scatters saved).
  for (bool sp : {false, true}) {
    const Scenario x = llama8b(8, sp);
    const std::vector<OperatorCost> xops = layer_operators(x.model, x.parallel, true);
    std::vector<std::string> comm;
    for (const LayerStep& step : layer_backward_program(x.model, x.parallel, xops)) {
      if (step.recompute && step.kind != LayerStepKind::kCompute) comm.push_back(step.name);
    }
    const std::vector<std::string> expected =
        sp ? std::vector<std::string>{"ag_qkv", "ag_fc1"} : std::vector<std::string>{"ar_proj"};
    EXPECT_EQ(comm, expected) << "sp " << sp;
  }
}

TEST(OpRecompute, TheScenarioKeyNamesIt) {
  const Scenario s = load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/published/torchtitan-llama3-8b-8.toml",
                                    {"parallel.recompute=selective_op"});
  EXPECT_EQ(s.parallel.recompute, Recompute::kSelectiveOp);
  EXPECT_STREQ(to_string(Recompute::kSelectiveOp), "selective_op");
}

}  // namespace
}  // namespace megascale::model
