// Tests of model/scenario.h and the arithmetic of model/config.h: every error
// path names the file, the exact line, the key and the reason; defaults, presets
// and the built-in MegaScale Table 1 scenario.
#include "model/scenario.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/estimator.h"
#include "model/fused_overlap.h"
#include "model/pipeline_layout.h"
#include "tests/model/valid_scenario.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace megascale::model {
namespace {

constexpr const char* kValid = testing::kValidScenario;

// The ScenarioError parse_scenario(text, "t.toml") throws.
ScenarioError error_of(const std::string& text) {
  try {
    parse_scenario(text, "t.toml");
  } catch (const ScenarioError& e) {
    return e;
  }
  ADD_FAILURE() << "no ScenarioError for:\n" << text;
  return ScenarioError("", 0, 0, "", "");
}

void expect_error(const std::string& text, int line, const std::string& key,
                  const std::string& reason_part) {
  const ScenarioError e = error_of(text);
  EXPECT_EQ(e.file(), "t.toml");
  EXPECT_EQ(e.line(), line) << e.what();
  EXPECT_EQ(e.key(), key) << e.what();
  EXPECT_NE(e.reason().find(reason_part), std::string::npos) << e.what();
}

// ---------------------------------------------------------------------------
// Errors

TEST(ScenarioErrorTest, MessageNamesFileLineColumnKeyReason) {
  EXPECT_STREQ(ScenarioError("x.toml", 12, 1, "parallel.tp", "bad").what(),
               "x.toml:12:1: parallel.tp: bad");
  EXPECT_STREQ(ScenarioError("x.toml", 12, 0, "parallel.tp", "bad").what(),
               "x.toml:12: parallel.tp: bad");
  EXPECT_STREQ(ScenarioError("x.toml", 0, 0, "parallel.tp", "bad").what(),
               "x.toml: parallel.tp: bad");
}

TEST(ScenarioErrorTest, UnknownKeySuggestsClosest) {
  const ScenarioError e = error_of(R"([model]
layers = 24
hiden = 2048
)");
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 9);
  EXPECT_EQ(e.key(), "model.hiden");
  EXPECT_EQ(e.reason(), "unknown key 'hiden' (did you mean 'hidden'?)");
  EXPECT_STREQ(e.what(), "t.toml:3:9: model.hiden: unknown key 'hiden' (did you mean 'hidden'?)");
}

TEST(ScenarioErrorTest, UnknownKeyFarFromAnyHasNoSuggestion) {
  expect_error(std::string(kValid) + "colour = 3\n", 13, "cluster.colour", "unknown key 'colour'");
  EXPECT_EQ(error_of(std::string(kValid) + "colour = 3\n").reason().find("did you mean"),
            std::string::npos);
}

TEST(ScenarioErrorTest, UnknownTable) {
  expect_error(std::string(kValid) + "[paralel]\ntp = 1\n", 13, "paralel",
               "unknown table 'paralel' (did you mean 'parallel'?)");
  expect_error(std::string(kValid) + "[parallel.extra]\n", 13, "parallel.extra",
               "unknown table 'extra'");
}

TEST(ScenarioErrorTest, FailureRecoveryRunTablesRejectBadKeys) {
  parse_scenario(std::string(kValid) + "[failures]\n[run]\n", "t.toml");
  // Line 13 is the first line after kValid.
  expect_error(std::string(kValid) + "[failures]\nrate = 1\n", 14, "failures.rate",
               "unknown key 'rate'");
  expect_error(std::string(kValid) + "[failures]\npreset = \"llama4\"\n", 14, "failures.preset",
               "llama3");
  expect_error(std::string(kValid) + "[failures]\nhang_fraction = 1.5\n", 14,
               "failures.hang_fraction", "must be in [0, 1]");
  expect_error(std::string(kValid) + "[failures]\nhang_fraction = 0.6\nslowdown_fraction = 0.6\n",
               15, "failures.slowdown_fraction", "<= 1");
  expect_error(std::string(kValid) + "[failures]\ngpu_per_hour = -1\n", 14,
               "failures.gpu_per_hour", ">= 0");
  expect_error(std::string(kValid) + "[[failures.faults]]\ncomponent = \"gpu\"\n", 13,
               "failures.faults.at", "required key missing");
  expect_error(std::string(kValid) + "[[failures.faults]]\nat = \"3x\"\n", 14,
               "failures.faults.at", "expected a duration");
  expect_error(std::string(kValid) + "[[failures.faults]]\nat = 5\nkind = \"melt\"\n", 15,
               "failures.faults.kind", "crash");
  expect_error(std::string(kValid) + "[recovery]\ninit = \"etcd\"\n", 14, "recovery.init",
               "ordered");
  expect_error(std::string(kValid) + "[recovery]\ncheckpoint_interval = 0\n", 14,
               "recovery.checkpoint_interval", "must be > 0");
  expect_error(std::string(kValid) + "[recovery]\nstorage_read_gbs = 0\n", 14,
               "recovery.storage_read_gbs", "> 0");
  expect_error(std::string(kValid) + "[run]\nduration = \"three weeks\"\n", 14, "run.duration",
               "expected a duration");
  expect_error(std::string(kValid) + "[run]\nruns = 0\n", 14, "run.runs", "");
  // Found by the fuzz test: a finite number of hours that is infinite in seconds
  // passed, and `plan --sweep checkpoint_interval=1e308h` reported ETTR null.
  expect_error(std::string(kValid) + "[recovery]\ncheckpoint_interval = \"1e308h\"\n", 14,
               "recovery.checkpoint_interval", "expected a duration");
  expect_error(std::string(kValid) + "[run]\nduration = \"1e305d\"\n", 14, "run.duration",
               "expected a duration");
}

TEST(ParseDurationTest, UnitsAndOverflow) {
  EXPECT_EQ(parse_duration_s("90"), 90.0);
  EXPECT_EQ(parse_duration_s("15m"), 900.0);
  EXPECT_EQ(parse_duration_s("2h"), 7200.0);
  EXPECT_EQ(parse_duration_s("21d"), 21 * 86400.0);
  EXPECT_EQ(parse_duration_s("1e300s"), 1e300);
  EXPECT_EQ(parse_duration_s("1e308h"), std::nullopt);  // 3.6e311 s: not a double
  EXPECT_EQ(parse_duration_s("inf"), std::nullopt);
  EXPECT_EQ(parse_duration_s("-5m"), std::nullopt);
  EXPECT_EQ(parse_duration_s("h"), std::nullopt);
}

// [optimizations] cross_entropy: every preset keeps Megatron's unfused loss; the
// key picks another implementation, and an unknown one is refused at its line
// with the accepted names.
TEST(ScenarioTest, CrossEntropyImplementationKey) {
  for (const char* preset : {"megatron", "megatron-core", "megascale"}) {
    const Scenario s = parse_scenario(std::string(kValid) + "[optimizations]\npreset = \"" + preset + "\"\n", "t.toml");
    EXPECT_EQ(s.optimizations.cross_entropy, CrossEntropyImpl::kUnfused) << preset;
  }
  const std::string base = std::string(kValid) + "[optimizations]\npreset = \"megatron-core\"\n";
  EXPECT_EQ(parse_scenario(base + "cross_entropy = \"jit-fused\"\n", "t.toml").optimizations.cross_entropy,
            CrossEntropyImpl::kJitFused);
  EXPECT_EQ(parse_scenario(base + "cross_entropy = \"single-kernel\"\n", "t.toml").optimizations.cross_entropy,
            CrossEntropyImpl::kSingleKernel);
  const int line = static_cast<int>(std::count(base.begin(), base.end(), '\n')) + 1;
  expect_error(base + "cross_entropy = \"fused\"\n", line, "optimizations.cross_entropy", "single-kernel");
}

// [optimizations] tp_overlap_comm: Megatron-Core's --tp-comm-overlap is
// Transformer Engine's userbuffers, the other presets overlap with NCCL; an
// unknown value is refused at its line with the accepted names.
TEST(ScenarioTest, TpOverlapCommKey) {
  const auto comm = [](const std::string& text) { return parse_scenario(text, "t.toml").optimizations.tp_overlap_comm; };
  const std::string opt = std::string(kValid) + "[optimizations]\n";
  EXPECT_EQ(comm(opt + "preset = \"megatron-core\"\n"), TpOverlapComm::kUserBuffers);
  EXPECT_EQ(comm(opt + "preset = \"megascale\"\n"), TpOverlapComm::kNccl);
  EXPECT_EQ(comm(opt + "preset = \"megatron\"\n"), TpOverlapComm::kNccl);
  EXPECT_EQ(comm(opt + "preset = \"megatron-core\"\ntp_overlap_comm = \"nccl\"\n"), TpOverlapComm::kNccl);
  EXPECT_EQ(comm(opt + "preset = \"megascale\"\ntp_overlap_comm = \"userbuffers\"\n"), TpOverlapComm::kUserBuffers);
  const auto margin = [](const std::string& text) {
    return parse_scenario(text, "t.toml").optimizations.tp_overlap_sm_margin;
  };
  EXPECT_TRUE(margin(opt + "preset = \"megatron-core\"\n"));  // TE 2.0+'s set_sm_margin default
  EXPECT_FALSE(margin(opt + "preset = \"megatron-core\"\ntp_overlap_sm_margin = false\n"));
  EXPECT_FALSE(margin(opt + "preset = \"megascale\"\n"));
  const std::string base = opt + "preset = \"megascale\"\n";
  const int line = static_cast<int>(std::count(base.begin(), base.end(), '\n')) + 1;
  expect_error(base + "tp_overlap_comm = \"ub\"\n", line, "optimizations.tp_overlap_comm", "userbuffers");
  expect_error(base + "tp_overlap_sm_margin = 1\n", line, "optimizations.tp_overlap_sm_margin", "a boolean");
}

// [optimizations.userbuffers]: NeMo's tuned ub_cfg settings per TE GEMM name,
// read into Optimizations::userbuffers; an unknown GEMM, a key its method does
// not take, another method, a range or an SM count the GPU does not have is
// refused at its line, with the key's dotted path.
TEST(ScenarioTest, UserbuffersTable) {
  const std::string opt = std::string(kValid) + "[optimizations]\npreset = \"megatron-core\"\n[optimizations.userbuffers]\n";
  const Scenario s = parse_scenario(opt + "qkv_dgrad = { method = \"bulk\", num_sm = 8, set_sm_margin = false }\n"
                                          "fc2_fprop = { num_sm = 24, num_splits = 2 }\n"
                                          "fc2_dgrad = { aggregate = true }\n",
                                    "t.toml");
  ASSERT_EQ(s.optimizations.userbuffers.size(), 3u);
  const UbOverlapConfig& q = s.optimizations.userbuffers.at("qkv_dgrad");
  EXPECT_EQ(q.num_sm, 8);
  EXPECT_EQ(q.set_sm_margin, false);
  EXPECT_FALSE(q.num_splits.has_value());
  EXPECT_EQ(s.optimizations.userbuffers.at("fc2_fprop").num_splits, 2);
  EXPECT_EQ(s.optimizations.userbuffers.at("fc2_dgrad").aggregate, true);
  EXPECT_TRUE(parse_scenario(std::string(kValid), "t.toml").optimizations.userbuffers.empty());
  const int line = static_cast<int>(std::count(opt.begin(), opt.end(), '\n')) + 1;
  expect_error(opt + "qkv_fprp = { num_sm = 8 }\n", line, "optimizations.userbuffers.qkv_fprp", "qkv_fprop");
  expect_error(opt + "qkv_fprop = { num_splits = 2 }\n", line, "optimizations.userbuffers.qkv_fprop.num_splits",
               "tp pieces");
  expect_error(opt + "qkv_fprop = { method = \"pipeline\" }\n", line, "optimizations.userbuffers.qkv_fprop.method",
               "\"ring_exchange\" only");
  expect_error(opt + "qkv_dgrad = { aggregate = true }\n", line, "optimizations.userbuffers.qkv_dgrad.aggregate",
               "unknown key");
  expect_error(opt + "proj_fprop = { method = \"bulk\" }\n", line, "optimizations.userbuffers.proj_fprop.method",
               "\"pipeline\" or \"ring_exchange\"");
  // A forward reduce-scatter run as a ring exchange (NeMo's and Megatron-Bridge's
  // B200 files): the method is kept with its SMs and margin.
  const Scenario ring = parse_scenario(
      opt + "proj_fprop = { method = \"ring_exchange\", num_sm = 1, set_sm_margin = true, aggregate = false }\n",
      "t.toml");
  const UbOverlapConfig& r = ring.optimizations.userbuffers.at("proj_fprop");
  ASSERT_TRUE(r.method.has_value());
  EXPECT_EQ(*r.method, UbMethod::kRingExchange);
  EXPECT_EQ(r.num_sm, 1);
  EXPECT_EQ(r.set_sm_margin, true);
  EXPECT_FALSE(q.method.has_value());  // restating the default keeps it unset
  // A tuned pipeline's num_splits stays in the file when the method is switched
  // (--set ...proj_fprop.method=ring_exchange): unused, as TE leaves it, the
  // ring running tp pieces.
  const Scenario switched =
      parse_scenario(opt + "proj_fprop = { method = \"ring_exchange\", num_sm = 24, num_splits = 4 }\n", "t.toml");
  EXPECT_EQ(ub_overlap(switched.optimizations, "proj_fprop", 8).num_splits, 8);
  EXPECT_EQ(ub_overlap(switched.optimizations, "proj_fprop", 8).method, UbMethod::kRingExchange);
  expect_error(opt + "proj_fprop = { num_splits = 1 }\n", line, "optimizations.userbuffers.proj_fprop.num_splits", "2");
  expect_error(opt + "fc1_wgrad = { set_sm_margin = 1 }\n", line, "optimizations.userbuffers.fc1_wgrad.set_sm_margin",
               "a boolean");
  expect_error(opt + "fc1_wgrad = { num_sm = 108 }\n", line, "optimizations.userbuffers.fc1_wgrad.num_sm", "108 SMs");
}

// [optimizations] attention_kernel: FlashAttention-2 unless the scenario names
// the Triton port; that kernel needs the flash path (efficient_operators) and
// is refused where Hopper's fused kernel runs instead.
TEST(ScenarioTest, AttentionKernelKey) {
  EXPECT_EQ(parse_scenario(kValid, "t.toml").optimizations.attention_kernel, AttentionKernel::kFlash2);
  const std::string base = std::string(kValid) + "[optimizations]\nefficient_operators = true\n";
  const Scenario s = parse_scenario(base + "attention_kernel = \"flash-triton\"\n", "t.toml");
  EXPECT_EQ(s.optimizations.attention_kernel, AttentionKernel::kFlashTriton);
  const int line = static_cast<int>(std::count(base.begin(), base.end(), '\n')) + 1;
  expect_error(base + "attention_kernel = \"flash3\"\n", line, "optimizations.attention_kernel", "flash-triton");
  expect_error(base + "fused_attention = true\nattention_kernel = \"flash-triton\"\n", line + 1,
               "optimizations.attention_kernel", "fused_attention");
  const std::string off = std::string(kValid) + "[optimizations]\nefficient_operators = false\n";
  expect_error(off + "attention_kernel = \"flash-triton\"\n", line, "optimizations.attention_kernel",
               "efficient_operators");
  // What the Triton port cannot run: a sliding window, a head dimension above 128.
  const std::string triton = base + "attention_kernel = \"flash-triton\"\n";
  for (const std::string& extra : {std::string("model.attention_window=512"), std::string("model.heads=4")}) {
    try {
      parse_scenario(triton, "t.toml", {extra});
      ADD_FAILURE() << extra << " accepted";
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find("optimizations.attention_kernel"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(extra.find("heads") != std::string::npos ? "up to 128" : "sliding window"),
                std::string::npos)
          << e.what();
    }
  }
  // Naming the default is allowed everywhere.
  EXPECT_EQ(parse_scenario(off + "attention_kernel = \"flash2\"\n", "t.toml").optimizations.attention_kernel,
            AttentionKernel::kFlash2);
}

// [optimizations]: the megatron-core preset and its keys; a fractional or
// negative bucket size is refused at its line.
TEST(ScenarioTest, MegatronCorePresetAndBucketKeys) {
  const std::string base = std::string(kValid) + "[optimizations]\npreset = \"megatron-core\"\n";
  const Scenario s = parse_scenario(base, "t.toml");
  EXPECT_EQ(s.optimizations.preset, "megatron-core");
  EXPECT_TRUE(s.optimizations.fused_attention);
  EXPECT_EQ(s.optimizations.dp_bucket_params, -1);
  const Scenario t = parse_scenario(base + "dp_bucket_params = 25000000\nfused_attention = false\n", "t.toml");
  EXPECT_EQ(t.optimizations.dp_bucket_params, 25000000);
  EXPECT_FALSE(t.optimizations.fused_attention);
  const int line = static_cast<int>(std::count(base.begin(), base.end(), '\n')) + 1;
  expect_error(base + "dp_bucket_params = 1.5\n", line, "optimizations.dp_bucket_params", "whole number");
  expect_error(base + "dp_bucket_params = -3\n", line, "optimizations.dp_bucket_params", "");
  expect_error(std::string(kValid) + "[optimizations]\npreset = \"megatron_core\"\n",
               static_cast<int>(std::count(kValid, kValid + std::strlen(kValid), '\n')) + 2, "optimizations.preset",
               "megatron-core");
}

// Context parallelism folds into the DP dimensions (model/config.h): each CP
// rank holds seq/cp tokens whose attention spans the whole sequence, the
// gradient group is dp x cp, and the iteration carries cp x global_batch shares.
TEST(ScenarioTest, ContextParallelismFoldsIntoDataParallel) {
  std::string text = kValid;
  const size_t at = text.find("[parallel]\n");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 11, "cp = 2\n");
  const Scenario plain = parse_scenario(kValid, "t.toml");
  // Same GPUs: the cluster keeps its size, so dp (from the file) must fit tp*cp*pp*dp.
  std::string fitted = text;
  const Scenario s = parse_scenario(fitted, "t.toml", {"cluster.gpus=" + std::to_string(2 * plain.cluster.gpus)});
  EXPECT_EQ(s.parallel.cp, 2);
  EXPECT_EQ(s.parallel.dp, 2 * plain.parallel.dp);
  EXPECT_EQ(s.parallel.replicas(), plain.parallel.dp);
  EXPECT_EQ(s.parallel.global_batch, 2 * plain.parallel.global_batch);
  EXPECT_EQ(s.parallel.microbatches(), plain.parallel.microbatches());
  EXPECT_EQ(s.model.seq_len, plain.model.seq_len / 2);
  EXPECT_EQ(s.model.span(), plain.model.seq_len);
  EXPECT_EQ(s.tokens_per_iteration(), plain.tokens_per_iteration());
  EXPECT_DOUBLE_EQ(s.model.mean_keys_per_query(), plain.model.mean_keys_per_query());
  // A sequence that two chunks per CP rank cannot split is refused at the key.
  try {
    parse_scenario(text.substr(0, at + 11) + "cp = 4\n" + text.substr(at + 11 + 7), "t.toml", {"model.seq_len=2052"});
    ADD_FAILURE() << "seq_len 2052 accepted with cp 4";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "parallel.cp") << e.what();
    EXPECT_NE(e.reason().find("multiple of 2 x cp"), std::string::npos) << e.what();
  }
}

// parallel.cp_comm: "p2p" (the ring, the default) or "all_gather" (Llama 3's
// CP); read where CP is off too, where it moves nothing (a what-if that sets
// cp = 1 on a CP scenario must not fail); any other value is refused at its line.
TEST(ScenarioTest, TheCpCommunicationIsReadWhereCpIsOn) {
  std::string text = kValid;
  const size_t at = text.find("[parallel]\n");
  ASSERT_NE(at, std::string::npos);
  const std::string gpus = "cluster.gpus=32";
  EXPECT_EQ(parse_scenario(std::string(text).insert(at + 11, "cp = 2\n"), "t.toml", {gpus}).parallel.cp_comm,
            CpComm::kP2p);
  EXPECT_EQ(parse_scenario(std::string(text).insert(at + 11, "cp = 2\ncp_comm = \"all_gather\"\n"), "t.toml", {gpus})
                .parallel.cp_comm,
            CpComm::kAllGather);
  const Scenario off = parse_scenario(std::string(text).insert(at + 11, "cp_comm = \"all_gather\"\n"), "t.toml");
  EXPECT_EQ(off.parallel.cp, 1);
  EXPECT_DOUBLE_EQ(estimate(off).iteration_time_s, estimate(parse_scenario(kValid, "t.toml")).iteration_time_s);
  expect_error(std::string(text).insert(at + 11, "cp = 2\ncp_comm = \"a2a\"\n"), 9, "parallel.cp_comm", "not allowed");
}

// FP8 needs a profile with FP8 tensor cores: refused on A100 at the key.
// The engine trains a scenario only on the device its GPU profile describes.
TEST(ScenarioTest, CheckTrainableMatchesTheDeviceAndTheProfile) {
  Scenario s = parse_scenario(kValid, "t.toml");
  s.train.device = "cpu";
  s.hardware.gpu = "cpu";
  EXPECT_NO_THROW(check_trainable(s));
  s.hardware.gpu = "A100-SXM4-80GB";
  try {
    check_trainable(s);
    ADD_FAILURE() << "a CPU run on an A100 profile was accepted";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "hardware.gpu");
    EXPECT_NE(e.reason().find("needs gpu = \"cpu\""), std::string::npos) << e.what();
  }
  s.train.device = "cuda";
  EXPECT_NO_THROW(check_trainable(s));
  s.hardware.gpu = "cpu";
  EXPECT_THROW(check_trainable(s), ScenarioError);
}

// What the engine cannot run is refused by check_trainable at its key, before
// anything is launched (engine_limit; the executor refuses the same on each
// rank): recomputation, ZeRO-3, and more p2p tags than MPI guarantees.
TEST(ScenarioTest, CheckTrainableRefusesWhatTheEngineCannotRun) {
  Scenario s = parse_scenario(kValid, "t.toml");
  s.train.device = "cuda";
  EXPECT_FALSE(engine_limit(s.parallel));
  EXPECT_NO_THROW(check_trainable(s));
  auto key_of = [](const Scenario& t) {
    try {
      check_trainable(t);
    } catch (const ScenarioError& e) {
      return e.key() + ": " + e.reason();
    }
    return std::string("(accepted)");
  };
  Scenario r = s;
  r.parallel.recompute = Recompute::kSelective;
  EXPECT_EQ(key_of(r).rfind("parallel.recompute: the engine keeps every activation", 0), 0u) << key_of(r);
  Scenario z = s;
  z.parallel.zero_stage = 3;
  EXPECT_EQ(key_of(z), "parallel.zero_stage: the engine runs ZeRO 0-2, got 3");
  // The engine does not pad the vocabulary.
  Scenario v = s;
  v.parallel.tp = 2;
  v.model.vocab = 50257;
  EXPECT_EQ(key_of(v).rfind("model.vocab: vocab 50257 not divisible by tp 2: the engine does not pad", 0), 0u)
      << key_of(v);
  // Tags (direction x vpp + chunk) x M + micro-batch up to 32767: 2 x vpp x M tags fit.
  Scenario t = s;
  t.parallel.vpp = 2;
  t.parallel.micro_batch = 1;
  t.parallel.global_batch = t.parallel.dp * 8192;  // M = 8192: 32768 tags, the last 32767
  ASSERT_EQ(t.parallel.microbatches(), 8192);
  EXPECT_FALSE(engine_limit(t.parallel)) << engine_limit(t.parallel)->reason;
  t.parallel.global_batch += t.parallel.dp;  // M = 8193
  ASSERT_TRUE(engine_limit(t.parallel));
  EXPECT_EQ(engine_limit(t.parallel)->key, "parallel.global_batch");
  EXPECT_NE(engine_limit(t.parallel)->reason.find("need 32772 p2p tags"), std::string::npos)
      << engine_limit(t.parallel)->reason;
}

// The valid scenario with `lines` added to its [model] table (from line 7).
std::string with_model_lines(const std::string& lines) {
  std::string text = kValid;
  text.replace(text.find("vocab = 51200\n"), 14, "vocab = 51200\n" + lines + "\n");
  return text;
}

// Dropout: unset means Megatron-LM's 0.1; a probability is below 1; the
// engine, which trains without dropout, refuses one above 0.
TEST(ScenarioTest, DropoutKeysAreProbabilitiesTheEngineRefuses) {
  const Scenario unset = parse_scenario(kValid, "t.toml");
  EXPECT_FALSE(unset.model.hidden_dropout);
  EXPECT_TRUE(unset.model.hidden_dropout_on());
  EXPECT_TRUE(unset.model.attention_dropout_on());
  const Scenario off = parse_scenario(with_model_lines("hidden_dropout = 0.0\nattention_dropout = 0"), "t.toml");
  EXPECT_FALSE(off.model.hidden_dropout_on());
  EXPECT_FALSE(off.model.attention_dropout_on());
  expect_error(with_model_lines("hidden_dropout = 1.0"), 7, "model.hidden_dropout", "must be below 1");
  expect_error(with_model_lines("attention_dropout = -0.1"), 7, "model.attention_dropout", "");
  expect_error(with_model_lines("hidden_dropout = \"none\""), 7, "model.hidden_dropout", "");

  Scenario train = off;
  train.train.device = "cpu";
  train.hardware.gpu = "cpu";
  EXPECT_NO_THROW(check_trainable(train));
  train.model.attention_dropout = 0.1;
  try {
    check_trainable(train);
    ADD_FAILURE() << "attention dropout 0.1 accepted for the engine";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "model.attention_dropout");
    EXPECT_NE(e.reason().find("without dropout, got 0.1"), std::string::npos) << e.what();
  }
}

// model.norm / model.position and optimizations.eager_elementwise are read;
// the engine, which runs LayerNorm and learned positions, refuses the others.
TEST(ScenarioTest, NormPositionAndEagerKeysAreReadAndTheEngineRefusesWhatItLacks) {
  const Scenario plain = parse_scenario(kValid, "t.toml");
  EXPECT_EQ(plain.model.norm, NormKind::kLayerNorm);
  EXPECT_EQ(plain.model.position, PositionKind::kLearned);
  EXPECT_FALSE(plain.optimizations.eager_elementwise);
  const std::string eager = "[optimizations]\neager_elementwise = true\n";
  const Scenario llama = parse_scenario(with_model_lines("norm = \"rmsnorm\"\nposition = \"rope\"") + eager, "t.toml");
  EXPECT_EQ(llama.model.norm, NormKind::kRmsNorm);
  EXPECT_EQ(llama.model.position, PositionKind::kRope);
  EXPECT_TRUE(llama.optimizations.eager_elementwise);
  // RoPE has no position table: seq_len x hidden fewer parameters.
  EXPECT_EQ(plain.model.parameters() - llama.model.parameters(),
            static_cast<int64_t>(plain.model.seq_len) * plain.model.hidden);
  expect_error(with_model_lines("norm = \"batchnorm\""), 7, "model.norm", "");
  expect_error(with_model_lines("position = \"alibi\""), 7, "model.position", "");
  for (const char* key : {"model.norm", "model.position"}) {
    Scenario train = parse_scenario(with_model_lines("hidden_dropout = 0.0\nattention_dropout = 0"), "t.toml");
    train.train.device = "cpu";
    train.hardware.gpu = "cpu";
    EXPECT_NO_THROW(check_trainable(train));
    if (std::string(key) == "model.norm") train.model.norm = NormKind::kRmsNorm;
    else train.model.position = PositionKind::kRope;
    try {
      check_trainable(train);
      ADD_FAILURE() << key << " accepted for the engine";
    } catch (const ScenarioError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
    }
  }
}

// The [optimizations] dtype keys GPU jobs set to "bf16" (fp32 by default):
// read, anything but fp32 / bf16 refused at its line, and bf16 refused by the
// CPU engine (at parse) and the CUDA engine (check_trainable), both fp32.
TEST(ScenarioTest, TheBf16DtypeKeysAreReadAndTheEnginesRefuseThem) {
  struct DtypeKey {
    const char* name;
    const char* cpu_reason;
    std::function<bool(const Optimizations&)> is_bf16;
    std::function<void(Optimizations&)> set_fp32;
  };
  const DtypeKey keys[] = {
      {"grad_reduce_dtype", "the CPU engine reduces fp32 gradients",
       [](const Optimizations& o) { return o.grad_reduce_dtype == GradReduceDtype::kBf16; },
       [](Optimizations& o) { o.grad_reduce_dtype = GradReduceDtype::kFp32; }},
      {"optimizer_state_dtype", "the CPU engine keeps fp32 optimizer state",
       [](const Optimizations& o) { return o.optimizer_state_dtype == OptimizerStateDtype::kBf16; },
       [](Optimizations& o) { o.optimizer_state_dtype = OptimizerStateDtype::kFp32; }},
  };
  for (const DtypeKey& k : keys) {
    const std::string key = std::string("optimizations.") + k.name;
    EXPECT_FALSE(k.is_bf16(parse_scenario(kValid, "t.toml").optimizations)) << key;
    const std::string bf16 = fmt::format("[optimizations]\n{} = \"bf16\"\n", k.name);
    EXPECT_TRUE(k.is_bf16(parse_scenario(std::string(kValid) + bf16, "t.toml").optimizations)) << key;
    // kValid is 12 lines: [optimizations] is line 13, the key line 14.
    expect_error(std::string(kValid) + fmt::format("[optimizations]\n{} = \"fp16\"\n", k.name), 14, key,
                 "not allowed");
    expect_error(std::string(kValid) + "[hardware]\ngpu = \"cpu\"\n" + bf16, 16, key, k.cpu_reason);
    Scenario train = parse_scenario(std::string(kValid) + "[hardware]\ngpu = \"H200-SXM-141GB\"\n" + bf16 +
                                        "[train]\ndevice = \"cuda\"\n",
                                    "t.toml");
    try {
      check_trainable(train);
      ADD_FAILURE() << key << " = bf16 accepted for the engine";
    } catch (const ScenarioError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
    }
    k.set_fp32(train.optimizations);
    EXPECT_NO_THROW(check_trainable(train)) << key;
  }
}

// Megatron-Core's precision-aware optimizer keys: read, an unknown dtype
// refused at its line, and refused where Megatron-Core would not run them
// (LAMB, beside Apex's bf16 state, TE's remainders with FP8 current scaling)
// and by both engines (fp32 state).
TEST(ScenarioTest, PrecisionAwareOptimizerKeysAreReadAndCheckedAtTheirLine) {
  const std::string opt = std::string(kValid) + "[optimizations]\n";  // kValid is 12 lines: keys from line 14
  Scenario s = parse_scenario(opt + "exp_avg_dtype = \"bf16\"\nexp_avg_sq_dtype = \"fp8\"\n"
                                    "main_params_dtype = \"fp32_remainders\"\n",
                              "t.toml");
  EXPECT_EQ(s.optimizations.exp_avg_dtype, MomentDtype::kBf16);
  EXPECT_EQ(s.optimizations.exp_avg_sq_dtype, MomentDtype::kFp8);
  EXPECT_EQ(s.optimizations.main_params_dtype, MainParamsDtype::kFp32Remainders);
  EXPECT_EQ(parse_scenario(kValid, "t.toml").optimizations.exp_avg_dtype, MomentDtype::kFp32);
  expect_error(opt + "exp_avg_sq_dtype = \"bf8\"\n", 14, "optimizations.exp_avg_sq_dtype", "not allowed");
  expect_error(opt + "main_params_dtype = \"bf16\"\n", 14, "optimizations.main_params_dtype", "not allowed");
  expect_error(opt + "optimizer = \"lamb\"\nexp_avg_dtype = \"bf16\"\n", 15, "optimizations.exp_avg_dtype",
               "Adam only");
  expect_error(opt + "optimizer_state_dtype = \"bf16\"\nmain_params_dtype = \"fp16\"\n", 15,
               "optimizations.main_params_dtype", "two optimizers");
  const std::string remainders = "main_params_dtype = \"fp32_remainders\"\nfp8 = true\n";
  expect_error(opt + remainders + "fp8_recipe = \"current\"\n", 14, "optimizations.main_params_dtype",
               "Megatron-Core keeps them itself");
  EXPECT_NO_THROW(
      parse_scenario(opt + remainders + "fp8_recipe = \"delayed\"\n[hardware]\ngpu = \"H100-SXM5-80GB\"\n", "t.toml"));
  expect_error(std::string(kValid) + "[hardware]\ngpu = \"cpu\"\n[optimizations]\nexp_avg_dtype = \"fp16\"\n", 16,
               "optimizations.exp_avg_dtype", "the CPU engine keeps fp32 optimizer state");
  Scenario train = parse_scenario(std::string(kValid) + "[hardware]\ngpu = \"H200-SXM-141GB\"\n"
                                                        "[optimizations]\nexp_avg_sq_dtype = \"bf16\"\n"
                                                        "[train]\ndevice = \"cuda\"\n",
                                  "t.toml");
  try {
    check_trainable(train);
    ADD_FAILURE() << "exp_avg_sq_dtype = bf16 accepted for the engine";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "optimizations.exp_avg_sq_dtype") << e.what();
  }
  train.optimizations.exp_avg_sq_dtype = MomentDtype::kFp32;
  EXPECT_NO_THROW(check_trainable(train));
}

TEST(ScenarioTest, GradAccumulationIsReadAndTheEnginesRefuseAnythingButFused) {
  EXPECT_EQ(parse_scenario(kValid, "t.toml").optimizations.grad_accumulation, GradAccumulation::kFused);
  for (const char* value : {"add", "add_16bit", "cast_add"}) {
    const Scenario s =
        parse_scenario(std::string(kValid) + fmt::format("[optimizations]\ngrad_accumulation = \"{}\"\n", value), "t.toml");
    EXPECT_EQ(to_string(s.optimizations.grad_accumulation), std::string(value));
  }
  // kValid is 12 lines: [optimizations] is line 13, the key line 14.
  expect_error(std::string(kValid) + "[optimizations]\ngrad_accumulation = \"unfused\"\n", 14,
               "optimizations.grad_accumulation", "not allowed");
  const std::string add = "[optimizations]\ngrad_accumulation = \"add\"\n";
  expect_error(std::string(kValid) + "[hardware]\ngpu = \"cpu\"\n" + add, 16, "optimizations.grad_accumulation",
               "the CPU engine is timed by its own kernels");
  Scenario train = parse_scenario(std::string(kValid) + "[hardware]\ngpu = \"H200-SXM-141GB\"\n" + add +
                                      "[train]\ndevice = \"cuda\"\n",
                                  "t.toml");
  try {
    check_trainable(train);
    ADD_FAILURE() << "grad_accumulation = add accepted for the engine";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "optimizations.grad_accumulation") << e.what();
  }
  train.optimizations.grad_accumulation = GradAccumulation::kFused;
  EXPECT_NO_THROW(check_trainable(train));
}

TEST(ScenarioTest, Fp8IsRefusedWithoutFp8TensorCores) {
  const std::string text = std::string(kValid) + "[optimizations]\nfp8 = true\n";
  const ScenarioError e = error_of(text);
  EXPECT_EQ(e.key(), "optimizations.fp8") << e.what();
  EXPECT_NE(e.reason().find("no FP8 tensor cores"), std::string::npos) << e.what();
}

// [optimizations] fp8_recipe: Transformer Engine's delayed (the default) or
// current scaling; kept, unused, when fp8 is off (a what-if turning FP8 off on
// an FP8 file), refused when unknown.
TEST(ScenarioTest, TheFp8RecipeIsReadAndAnUnknownOneRefused) {
  EXPECT_EQ(parse_scenario(kValid, "t.toml").optimizations.fp8_recipe, Fp8Recipe::kDelayed);
  const std::string h100 = "[hardware]\ngpu = \"H100-SXM5-80GB\"\n";
  const Scenario c =
      parse_scenario(std::string(kValid) + h100 + "[optimizations]\nfp8 = true\nfp8_recipe = \"current\"\n", "t.toml");
  EXPECT_TRUE(c.optimizations.fp8);
  EXPECT_EQ(c.optimizations.fp8_recipe, Fp8Recipe::kCurrent);
  EXPECT_NO_THROW(parse_scenario(std::string(kValid) + h100 + "[optimizations]\nfp8_recipe = \"current\"\n", "t.toml"));
  // kValid is 12 lines, the hardware table 2: [optimizations] is line 15, fp8 16, the recipe 17.
  expect_error(std::string(kValid) + h100 + "[optimizations]\nfp8 = true\nfp8_recipe = \"nvfp4\"\n", 17,
               "optimizations.fp8_recipe", "not allowed");
  EXPECT_FALSE(c.optimizations.fp8_param_gather);
  EXPECT_TRUE(parse_scenario(std::string(kValid) + h100 + "[optimizations]\nfp8 = true\nfp8_param_gather = true\n",
                             "t.toml")
                  .optimizations.fp8_param_gather);
  expect_error(std::string(kValid) + h100 + "[optimizations]\nfp8 = true\nfp8_param_gather = 1\n", 17,
               "optimizations.fp8_param_gather", "");
  // MXFP8 runs on Blackwell (compute capability 10.x) and is refused on Hopper,
  // as Transformer Engine's check_mxfp8_support refuses it.
  const std::string b200 = "[hardware]\ngpu = \"B200-SXM-180GB\"\n";
  EXPECT_EQ(parse_scenario(std::string(kValid) + b200 + "[optimizations]\nfp8 = true\nfp8_recipe = \"mxfp8\"\n",
                           "t.toml")
                .optimizations.fp8_recipe,
            Fp8Recipe::kMxfp8);
  expect_error(std::string(kValid) + h100 + "[optimizations]\nfp8 = true\nfp8_recipe = \"mxfp8\"\n", 17,
               "optimizations.fp8_recipe", "compute capability 10.x or 11.x");
}

TEST(ScenarioTest, FailureRecoveryRunTablesAreRead) {
  const Scenario s = parse_scenario(std::string(kValid) +
                                        "[failures]\npreset = \"llama3\"\nrate_scale = 0.5\n"
                                        "[[failures.faults]]\nat = \"2h\"\nkind = \"hang\"\n"
                                        "[recovery]\npreset = \"baseline\"\ncheckpoint_interval = \"15m\"\n"
                                        "[run]\nduration = \"21d\"\nruns = 50\n",
                                    "t.toml");
  EXPECT_EQ(s.failures.preset, "llama3");
  EXPECT_DOUBLE_EQ(s.failures.rate_scale, 0.5);
  ASSERT_EQ(s.failures.faults.size(), 1u);
  EXPECT_DOUBLE_EQ(s.failures.faults[0].at_s, 7200);
  EXPECT_EQ(s.failures.faults[0].kind, "hang");
  EXPECT_EQ(s.recovery.init, "tcpstore");  // from the baseline preset
  EXPECT_EQ(s.recovery.checkpoint, "sync");
  EXPECT_DOUBLE_EQ(s.recovery.checkpoint_interval_s, 900);
  EXPECT_DOUBLE_EQ(s.run.duration_s, 21 * 86400.0);
  EXPECT_EQ(s.run.runs, 50);
}

TEST(ScenarioTest, TrainTableIsReadWithPathsRelativeToTheFile) {
  const Scenario sc = parse_scenario(std::string(kValid) + R"([train]
steps = 7
learning_rate = 0.02
seed = 9
data = "tokens.msds"
work_dir = "scratch"
checkpoint_dir = "/abs/ckpt"
checkpoint_every = 3
max_grad_norm = 0
attention = "cublas"
watchdog_s = 30
startup_watchdog_s = 0
)",
                                     "dir/t.toml");
  EXPECT_EQ(sc.train.work_dir, "dir/scratch");  // like every other path key (issue 13)
  EXPECT_EQ(sc.train.steps, 7);
  EXPECT_DOUBLE_EQ(sc.train.learning_rate, 0.02);
  EXPECT_EQ(sc.train.seed, 9);
  EXPECT_EQ(sc.train.data, "dir/tokens.msds");
  EXPECT_EQ(sc.train.checkpoint_dir, "/abs/ckpt");
  EXPECT_EQ(sc.train.checkpoint_every, 3);
  EXPECT_EQ(sc.train.max_grad_norm, 0.0);
  EXPECT_EQ(sc.train.attention, "cublas");
  EXPECT_DOUBLE_EQ(sc.train.watchdog_s, 30);
  EXPECT_DOUBLE_EQ(sc.train.startup_watchdog_s, 0);  // off
  EXPECT_DOUBLE_EQ(parse_scenario(kValid, "t.toml").train.startup_watchdog_s, 600);
  EXPECT_EQ(parse_scenario(kValid, "t.toml").train.attention, "auto");
  EXPECT_DOUBLE_EQ(parse_scenario(kValid, "t.toml").train.weight_decay, 0.01);
}

TEST(ScenarioErrorTest, TrainTableErrors) {
  expect_error(std::string(kValid) + "[train]\nstep = 3\n", 14, "train.step",
               "unknown key 'step' (did you mean 'steps'?)");
  expect_error(std::string(kValid) + "[train]\nsteps = 0\n", 14, "train.steps", "must be");
  expect_error(std::string(kValid) + "[train]\nattention = \"cudnn\"\n", 14, "train.attention", "cudnn");
  // The tensor-core flash kernel computes in bf16: fp32 GEMMs with it are refused.
  expect_error(std::string(kValid) + "[train]\nattention = \"flash-tc\"\n", 14, "train.attention",
               "train.precision = \"bf16\"");
  EXPECT_EQ(parse_scenario(std::string(kValid) + "[train]\nprecision = \"bf16\"\nattention = \"flash-tc\"\n", "t.toml")
                .train.attention,
            "flash-tc");
  expect_error(std::string(kValid) + "[train]\nstartup_watchdog_s = -1\n", 14, "train.startup_watchdog_s", "must be a finite number >= 0");
  expect_error(std::string(kValid) + "[train]\ncheckpoint_every = 5\n", 14,
               "train.checkpoint_every", "needs train.checkpoint_dir");
}

TEST(ScenarioErrorTest, WrongType) {
  expect_error(R"([model]
layers = "24"
)",
               2, "model.layers", "expected an integer, got string");
}

TEST(ScenarioErrorTest, WrongTypeForBoolAndTable) {
  expect_error(std::string(kValid) + "[optimizations]\ntp_overlap = 1\n", 14,
               "optimizations.tp_overlap", "expected a boolean, got integer");
  expect_error("model = 3\n", 1, "model", "expected a table, got integer");
}

TEST(ScenarioErrorTest, EnumValueNotAllowed) {
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
mlp = "relu"
)",
               7, "model.mlp", R"(value "relu" not allowed (allowed: "gelu", "swiglu"))");
}

TEST(ScenarioErrorTest, TopologyNotAllowed) {
  expect_error(std::string(kValid) + "topology = \"torus\"\n", 13, "cluster.topology",
               R"("megascale-clos", "rail-2tier", "fat-tree")");
}

TEST(ScenarioErrorTest, MissingRequiredKey) {
  expect_error(R"(name = "x"
[model]
layers = 24
hidden = 2048
seq_len = 2048
vocab = 51200
)",
               2, "model.heads", "required key missing");
}

TEST(ScenarioErrorTest, MissingRequiredTable) {
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
)",
               1, "cluster", "required key missing");
}

TEST(ScenarioErrorTest, DpRequiredWhenGpusNotAMultipleOfTpPp) {
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
pp = 4
global_batch = 64
[cluster]
gpus = 12
)",
               7, "parallel.dp",
               "required key missing: cluster.gpus (12) is not a multiple of tp*pp (8)");
}

TEST(ScenarioErrorTest, HeadsNotDivisibleByTp) {
  expect_error(R"([model]
layers = 96
hidden = 12288
heads = 128
seq_len = 2048
vocab = 64000
[parallel]
tp = 3
pp = 8
dp = 1
global_batch = 8
[cluster]
gpus = 24
)",
               8, "parallel.tp", "heads (128) not divisible by tp (3)");
}

TEST(ScenarioErrorTest, KvHeadsNotDivisibleByTp) {
  expect_error(R"([model]
layers = 32
hidden = 4096
heads = 32
kv_heads = 4
seq_len = 4096
vocab = 32000
[parallel]
pp = 1
tp = 8
global_batch = 8
[cluster]
gpus = 8
)",
               10, "parallel.tp", "kv_heads (4) not divisible by tp (8)");
}

// Megatron-LM's own rules: the MLP's first GEMM and (with sequence
// parallelism) the sequence split into tp equal parts.
TEST(ScenarioErrorTest, FfnHiddenAndSequenceParallelSeqLenNotDivisibleByTp) {
  expect_error(R"([model]
layers = 32
hidden = 4096
heads = 32
ffn_hidden = 11007
seq_len = 4096
vocab = 32000
[parallel]
pp = 1
tp = 2
global_batch = 8
[cluster]
gpus = 2
)",
               10, "parallel.tp", "ffn_hidden (11007) not divisible by tp (2)");
  const std::string sp = R"([model]
layers = 32
hidden = 4096
heads = 32
seq_len = 4098
vocab = 32000
[parallel]
pp = 1
tp = 4
sequence_parallel = true
global_batch = 8
[cluster]
gpus = 4
)";
  expect_error(sp, 9, "parallel.tp", "seq_len (4098) not divisible by tp (4) (sequence parallelism)");
  std::string no_sp = sp;
  no_sp.replace(no_sp.find("sequence_parallel = true"), 24, "sequence_parallel = false");
  EXPECT_NO_THROW(parse_scenario(no_sp, "t.toml"));  // each TP rank holds the whole sequence
}

// The name names files (`megascale run`: results/recovery/<name>.json): one
// that would put them elsewhere, or garble a report, is refused at its line.
TEST(ScenarioErrorTest, ANameThatIsNotAFileNameIsRefused) {
  for (const char* bad : {R"("../../tmp/x")", R"("a/b")", R"("")", R"(".hidden")", R"("two\nlines")"}) {
    expect_error(std::string("name = ") + bad + "\n" + kValid, 1, "name", "must be 1-200 characters without '/'");
  }
  expect_error("name = \"" + std::string(201, 'x') + "\"\n" + kValid, 1, "name", "must be 1-200 characters");
  EXPECT_EQ(parse_scenario(std::string("name = \"my run 2 (v1.5)\"\n") + kValid, "t.toml").name, "my run 2 (v1.5)");
  EXPECT_EQ(parse_scenario(kValid, "dir/job-7.toml").name, "job-7");  // the file's stem when not given
}

TEST(ScenarioErrorTest, HiddenNotDivisibleByHeads) {
  expect_error(R"([model]
layers = 24
hidden = 2050
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
pp = 2
global_batch = 64
[cluster]
gpus = 16
)",
               4, "model.heads", "hidden (2050) not divisible by heads (16)");
}

TEST(ScenarioErrorTest, LayersNotDivisibleByPpVpp) {
  expect_error(R"([model]
layers = 96
hidden = 12288
heads = 128
seq_len = 2048
vocab = 64000
[parallel]
tp = 8
pp = 8
vpp = 5
dp = 1
global_batch = 8
[cluster]
gpus = 64
)",
               10, "parallel.vpp", "layers (96) not divisible by pp*vpp (8*5=40)");
}

// 24 layers on 5 stages: pp alone does not divide them (line 9 names pp).
constexpr const char* kLayersOverFiveStages = R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 1
pp = 5
global_batch = 64
[cluster]
gpus = 5
)";

TEST(ScenarioErrorTest, LayersNotDivisibleByPp) {
  expect_error(kLayersOverFiveStages, 9, "parallel.pp", "layers (24) not divisible by pp*vpp (5*1=5)");
}

// The way out is named, not only the arithmetic: a user with, say, Llama 3 405B's
// 126 layers on 16 stages (Meta's trimmed first and last stage) learns the keys
// for uneven stages.
TEST(ScenarioErrorTest, UnevenLayersNameTheStageKeys) {
  expect_error(kLayersOverFiveStages, 9, "parallel.pp", "first_stage_layers / last_stage_layers");
}

// Megatron-Core's uneven split: 24 layers on 5 stages as 6 + 4 + 4 + 4 + 6.
TEST(ScenarioTest, UnevenFirstAndLastStages) {
  std::string text = kLayersOverFiveStages;
  text.replace(text.find("pp = 5\n"), 7, "pp = 5\nfirst_stage_layers = 6\nlast_stage_layers = 6\n");
  const Scenario s = parse_scenario(text, "t.toml");
  EXPECT_EQ(s.parallel.first_stage_layers, 6);
  EXPECT_EQ(s.parallel.last_stage_layers, 6);
}

// The rest must divide over the other stages (24 - 5 - 5 = 14 over 3), and each
// key's own errors name it.
TEST(ScenarioErrorTest, UnevenStagesThatDoNotSplit) {
  std::string text = kLayersOverFiveStages;
  text.replace(text.find("pp = 5\n"), 7, "pp = 5\nfirst_stage_layers = 5\nlast_stage_layers = 5\n");
  expect_error(text, 10, "parallel.first_stage_layers", "not divisible by the 3 other stages");
  std::string zero = kLayersOverFiveStages;
  zero.replace(zero.find("pp = 5\n"), 7, "pp = 5\nlast_stage_layers = 0\n");
  expect_error(zero, 10, "parallel.last_stage_layers", "");
  // Two chunks per stage: the other stages' 5 layers cannot be halved (line 10,
  // vpp, is named).
  std::string chunks = kLayersOverFiveStages;
  chunks.replace(chunks.find("pp = 5\n"), 7, "pp = 5\nvpp = 2\nfirst_stage_layers = 3\nlast_stage_layers = 6\n");
  expect_error(chunks, 10, "parallel.vpp", "not divisible by vpp (2)");
}

// Megatron-Core's free-form layout: 24 layers on 5 stages as 6 + 4 + 4 + 4 + 6
// with two chunks each (vpp follows from the 10 virtual stages).
TEST(ScenarioTest, MegatronPipelineLayout) {
  std::string text = kLayersOverFiveStages;
  text.replace(text.find("pp = 5\n"), 7, "pp = 5\npipeline_layout = \"Et*3|(t*2|)*3,t*3|t*3|(t*2|)*3,t*3L\"\n");
  text.replace(text.find("global_batch = 64"), 17, "global_batch = 60");  // interleaving: 12 micro-batches
  const Scenario s = parse_scenario(text, "t.toml");
  EXPECT_EQ(s.parallel.vpp, 2);
  ASSERT_NE(s.parallel.pipeline_chunk_layers, nullptr);
  EXPECT_EQ(*s.parallel.pipeline_chunk_layers, (std::vector<int>{3, 2, 2, 2, 3, 3, 2, 2, 2, 3}));
  const PipelineLayout l(s.model, s.parallel);
  EXPECT_EQ(l.stage_layers(0), 6);
  EXPECT_EQ(l.stage_layers(2), 4);
  EXPECT_EQ(l.stage_layers(4), 6);
}

TEST(ScenarioErrorTest, MegatronPipelineLayoutErrors) {
  auto with = [](const std::string& lines) {
    std::string text = kLayersOverFiveStages;
    text.replace(text.find("pp = 5\n"), 7, "pp = 5\n" + lines);
    text.replace(text.find("global_batch = 64"), 17, "global_batch = 60");
    return text;
  };
  // The string's own errors, at its line (10).
  expect_error(with("pipeline_layout = \"Et*23L\"\n"), 10, "parallel.pipeline_layout",
               "holds 23 transformer layers ('t'), the model has 24");
  // 4 virtual stages on 5 pipeline ranks.
  expect_error(with("pipeline_layout = \"Et*6|t*6|t*6|t*6L\"\n"), 10, "parallel.pipeline_layout",
               "4 virtual stages are not a multiple of pp (5)");
  // A vpp beside it must agree (line 10 is vpp).
  expect_error(with("vpp = 3\npipeline_layout = \"Et*3|(t*2|)*3,t*3|t*3|(t*2|)*3,t*3L\"\n"), 10, "parallel.vpp",
               "disagrees with pipeline_layout (10 virtual stages = pp 5 x vpp 2)");
  // Not with first / last stage layers.
  expect_error(with("first_stage_layers = 6\npipeline_layout = \"Et*24L\"\n"), 11, "parallel.pipeline_layout",
               "not both");
  // A pipeline rank without a layer (rank 1: virtual stages 1 and 6).
  expect_error(with("pipeline_layout = \"Et*4||(t*3|)*4,|(t*3|)*2,t*2L\"\n"), 10, "parallel.pipeline_layout",
               "pipeline rank 1 holds no transformer layer");
}

TEST(ScenarioErrorTest, GpusNotTpPpDp) {
  expect_error(R"([model]
layers = 96
hidden = 12288
heads = 128
seq_len = 2048
vocab = 64000
[parallel]
tp = 8
pp = 8
dp = 2
global_batch = 8
[cluster]
gpus = 100
)",
               13, "cluster.gpus", "gpus (100) != tp*pp*dp (8*8*2=128)");
}

TEST(ScenarioErrorTest, GlobalBatchNotDivisibleByDpMicroBatch) {
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
pp = 2
dp = 4
micro_batch = 5
global_batch = 768
[cluster]
gpus = 16
)",
               12, "parallel.global_batch",
               "global_batch (768) not divisible by dp*micro_batch (4*5=20)");
}

// With context parallelism the layout errors print the file's dp and global
// batch and name cp in the product, not the folded cp x dp the model runs on.
TEST(ScenarioErrorTest, LayoutErrorsUnderContextParallelismPrintTheFilesValues) {
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
cp = 2
pp = 2
dp = 4
global_batch = 64
[cluster]
gpus = 16
)",
               14, "cluster.gpus", "gpus (16) != tp*cp*pp*dp (2*2*2*4=32)");
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
cp = 2
pp = 2
dp = 2
micro_batch = 5
global_batch = 64
[cluster]
gpus = 16
)",
               13, "parallel.global_batch", "global_batch (64) not divisible by dp*micro_batch (2*5=10)");
}

TEST(ScenarioErrorTest, MicrobatchesNotMultipleOfPpWithVpp) {
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 1
pp = 4
vpp = 2
dp = 4
global_batch = 24
[cluster]
gpus = 16
)",
               10, "parallel.vpp",
               "microbatches per replica (6) not a multiple of pp (4), required when vpp > 1");
}

TEST(ScenarioErrorTest, VppNeedsPp) {
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
pp = 1
vpp = 2
global_batch = 64
[cluster]
gpus = 16
)",
               10, "parallel.vpp", "vpp > 1 requires pp > 1");
}

TEST(ScenarioErrorTest, ZeroStageOutOfRange) {
  expect_error(R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
pp = 2
global_batch = 64
zero_stage = 4
[cluster]
gpus = 16
)",
               11, "parallel.zero_stage", "must be in 0..3, got 4");
}

TEST(ScenarioErrorTest, NegativeValue) {
  expect_error(R"([model]
layers = 24
hidden = -2048
)",
               3, "model.hidden", "must be in 1..536870911, got -2048");
  expect_error(R"([model]
layers = -1
)",
               2, "model.layers", "must be >= 1, got -1");
  expect_error(std::string(kValid) + "[hardware]\nnic_gbps = -5\n", 14, "hardware.nic_gbps",
               "must be a finite number > 0");
  expect_error(std::string(kValid) + "[hardware]\ngpu_speed_sigma = -0.01\n", 14,
               "hardware.gpu_speed_sigma", "must be a finite number >= 0");
  expect_error(std::string(kValid) + "[hardware]\ngpu_speed_sigma = 0.9\n", 14,
               "hardware.gpu_speed_sigma", "must be at most 0.5");
  // Positive but physically meaningless: a line rate below 1 Gigabit Ethernet
  // (1e-300 Gb/s overflowed the event level's op durations to infinity), a
  // hop longer than any on Earth.
  expect_error(std::string(kValid) + "[hardware]\nnic_gbps = 0.5\n", 14, "hardware.nic_gbps",
               "must be at least 1 Gb/s (1 Gigabit Ethernet, the slowest link a cluster runs), got 0.5");
  expect_error(std::string(kValid) + "[network]\nswitch_port_gbps = 1e-300\n", 14, "network.switch_port_gbps",
               "must be at least 1 Gb/s");
  expect_error(std::string(kValid) + "[network]\nlink_latency_us = 1e300\n", 14, "network.link_latency_us",
               "must be at most 100000 us");
  expect_error(std::string(kValid) + "[network]\nswitch_latency_us = 100001\n", 14, "network.switch_latency_us",
               "must be at most 100000 us");
  EXPECT_NO_THROW(parse_scenario(std::string(kValid) + "[hardware]\nnic_gbps = 1\n[network]\nlink_latency_us = 100000\n",
                                 "edge.toml"));
}

// An error located in the file after --set names what the file was read with;
// one located in an override, or read without any, adds nothing.
TEST(ScenarioTest, OverridesNoteSaysWhatTheFileWasReadWith) {
  const std::vector<std::string> sets = {"model.heads=1", "parallel.pp=2"};
  try {
    parse_scenario(kValid, "t.toml", sets);
    FAIL() << "heads 1 against tp 2 should be refused";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.file(), "t.toml") << e.what();  // at parallel.tp's line
    EXPECT_EQ(overrides_note(e, sets), "  (t.toml as changed by --set model.heads=1, --set parallel.pp=2)\n");
    EXPECT_EQ(overrides_note(e, {}), "");
  }
  try {
    parse_scenario(kValid, "t.toml", {"parallel.tp=0"});
    FAIL() << "tp 0 should be refused";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(overrides_note(e, {"parallel.tp=0"}), "") << e.what();
  }
}

// Every NIC serves the same number of GPUs (the fabric builder's rule): the
// error names the key the file gives, nics_per_node when it gives both.
TEST(ScenarioErrorTest, NicsMustDivideTheNodesGpus) {
  expect_error(std::string(kValid) + "[hardware]\ngpus_per_node = 8\nnics_per_node = 3\n", 15,
               "hardware.nics_per_node", "nics_per_node (3) must divide gpus_per_node (8)");
  expect_error(std::string(kValid) + "[hardware]\ngpus_per_node = 12\n", 14, "hardware.gpus_per_node",
               "nics_per_node (8) must divide gpus_per_node (12)");
  // Unset, one NIC per GPU up to 8.
  EXPECT_EQ(parse_scenario(std::string(kValid) + "[hardware]\ngpus_per_node = 4\n", "t.toml").hardware.nics_per_node, 4);
  EXPECT_EQ(parse_scenario(std::string(kValid) + "[hardware]\ngpus_per_node = 16\n", "t.toml").hardware.nics_per_node,
            8);
  EXPECT_NO_THROW(parse_scenario(std::string(kValid) + "[hardware]\ngpus_per_node = 8\nnics_per_node = 4\n", "t.toml"));
}

// model.name is printed in every report: blank, control characters or over
// 200 characters are refused at the key (a blank name was printed as
// "model  (24 layers ...)").
TEST(ScenarioErrorTest, ModelNameIsReadable) {
  std::string named = kValid;
  named.replace(named.find("[model]\n"), 8, "[model]\nname = \"  \"\n");
  expect_error(named, 2, "model.name", "must be 1-200 characters, not blank");
  named = kValid;
  named.replace(named.find("[model]\n"), 8, "[model]\nname = \"a\\tb\"\n");
  expect_error(named, 2, "model.name", "without control characters, got \"a\\tb\"");
  named = kValid;
  named.replace(named.find("[model]\n"), 8, "[model]\nname = \"llama-3 8B\"\n");
  EXPECT_EQ(parse_scenario(named, "t.toml").model.name, "llama-3 8B");
}

// A TP group straddling two servers is refused (check_placement): the model
// times it on NVLink. A part-used last server, or tp above the server, is not.
TEST(ScenarioErrorTest, TpGroupsStayInsideOneServer) {
  // kValid's tp = 2 (line 8) on 3-GPU servers: GPUs 2 and 3 would form a group.
  expect_error(std::string(kValid) + "[hardware]\ngpus_per_node = 3\nnics_per_node = 3\n", 8, "parallel.tp",
               "tp = 2 splits tensor-parallel groups across 3-GPU servers");
  EXPECT_NO_THROW(parse_scenario(std::string(kValid) + "[hardware]\ngpus_per_node = 1\n", "t.toml"));
  EXPECT_NO_THROW(parse_scenario(std::string(kValid) + "[hardware]\ngpus_per_node = 6\nnics_per_node = 6\n", "t.toml"));
  std::string small = kValid;
  small.replace(small.find("gpus = 16"), 9, "gpus = 4");
  EXPECT_NO_THROW(parse_scenario(small, "t.toml"));
  // As it was: tp 2 on 4-GPU servers.
  EXPECT_NO_THROW(parse_scenario(std::string(kValid) + "[hardware]\ngpus_per_node = 4\n", "t.toml"));
  // A context-parallel group of tp x cp = 2 x 3 GPUs on 8-GPU servers: the
  // second spans GPUs 6-11. tp x cp = 4 or 16 is whole.
  std::string cp = kValid;
  cp.replace(cp.find("gpus = 16"), 9, "gpus = 24");
  cp.replace(cp.find("seq_len = 2048"), 14, "seq_len = 2052");
  cp.replace(cp.find("pp = 2\n"), 7, "pp = 2\ncp = 3\n");
  expect_error(cp, 10, "parallel.cp", "tp x cp = 6 splits context-parallel groups across 8-GPU servers");
  std::string cp2 = kValid;
  cp2.replace(cp2.find("pp = 2\n"), 7, "pp = 2\ncp = 2\n");
  EXPECT_NO_THROW(parse_scenario(cp2, "t.toml"));
}

TEST(ScenarioErrorTest, InvalidTomlSyntaxNamesFileAndLine) {
  const ScenarioError e = error_of("[model]\nlayers = = 24\n");
  EXPECT_EQ(e.file(), "t.toml");
  EXPECT_EQ(e.line(), 2);
  EXPECT_GT(e.column(), 0);
  EXPECT_EQ(std::string(e.what()).rfind("t.toml:2:", 0), 0u) << e.what();
}

TEST(ScenarioErrorTest, MissingFile) {
  const std::string path = "/nonexistent/dir/none.toml";
  try {
    load_scenario(path);
    FAIL() << "no ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), 0);
    EXPECT_NE(e.reason().find("cannot open file"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(path + ": cannot open file", 0), 0u) << e.what();
  }
}

// ---------------------------------------------------------------------------
// [network] errors (kValid ends on line 12; "[network]" is line 13)

TEST(NetworkErrorTest, UnknownKeySuggestsClosest) {
  expect_error(std::string(kValid) + "[network]\nqps_per_conection = 4\n", 14,
               "network.qps_per_conection",
               "unknown key 'qps_per_conection' (did you mean 'qps_per_connection'?)");
}

TEST(NetworkErrorTest, ChoicesListAllowedValues) {
  expect_error(std::string(kValid) + "[network]\necmp_hash = \"xor\"\n", 14, "network.ecmp_hash",
               R"(value "xor" not allowed (allowed: "crc32", "murmur3"))");
  expect_error(std::string(kValid) + "[network]\nrouting = \"spray\"\n", 14, "network.routing",
               R"(value "spray" not allowed (allowed: "ecmp", "adaptive"))");
  expect_error(std::string(kValid) + "[network]\ncongestion_control = \"cubic\"\n", 14,
               "network.congestion_control",
               R"(value "cubic" not allowed (allowed: "dcqcn", "swift", "hybrid"))");
  expect_error(std::string(kValid) + "[network]\npreset = \"torus\"\n", 14, "network.preset",
               R"("megascale-clos", "rail-2tier", "fat-tree")");
}

TEST(NetworkErrorTest, RangesAndTypes) {
  expect_error(std::string(kValid) + "[network]\nqps_per_connection = 0\n", 14,
               "network.qps_per_connection", "must be in 1..128, got 0");
  expect_error(std::string(kValid) + "[network]\nqps_per_connection = 129\n", 14,
               "network.qps_per_connection", "must be in 1..128, got 129");
  expect_error(std::string(kValid) + "[network]\ntiers = 4\n", 14, "network.tiers",
               "must be in 2..3, got 4");
  expect_error(std::string(kValid) + "[network]\nswitch_radix = 1\n", 14, "network.switch_radix",
               "must be >= 2, got 1");
  expect_error(std::string(kValid) + "[network]\nswitch_latency_us = -0.1\n", 14,
               "network.switch_latency_us", "must be a finite number >= 0");
  expect_error(std::string(kValid) + "[network]\nswitch_port_gbps = 0\n", 14,
               "network.switch_port_gbps", "must be a finite number > 0");
  expect_error(std::string(kValid) + "[network]\nnvlink_gbps = \"fast\"\n", 14,
               "network.nvlink_gbps", "expected a number, got string");
  expect_error(std::string(kValid) + "[network]\nsplit_ports = 1\n", 14, "network.split_ports",
               "expected a boolean, got integer");
}

TEST(NetworkErrorTest, PresetMustAgreeWithClusterTopology) {
  expect_error(std::string(kValid) + "topology = \"megascale-clos\"\n[network]\n"
                                     "tiers = 3\npreset = \"rail-2tier\"\n",
               16, "network.preset",
               "\"rail-2tier\" differs from cluster.topology (\"megascale-clos\"); give one of "
               "them, or the same value in both");
  // The same value in both is fine.
  const Scenario sc = parse_scenario(
      std::string(kValid) + "topology = \"fat-tree\"\n[network]\npreset = \"fat-tree\"\n", "t.toml");
  EXPECT_EQ(sc.network.preset, "fat-tree");
}

TEST(NetworkErrorTest, Oversubscription) {
  expect_error(std::string(kValid) + "[network]\noversubscription = 2.0\n", 14,
               "network.oversubscription",
               "ToR ratio 2:1 splits 64 ports into 42.6667 down : 21.3333 up, not whole ports");
  expect_error(std::string(kValid) + "[network]\noversubscription = [1.0, 2.0]\n", 14,
               "network.oversubscription",
               "aggregation ratio 2:1 splits 64 ports into 42.6667 down");
  expect_error(std::string(kValid) + "[network]\noversubscription = [1, 1, 1]\n", 14,
               "network.oversubscription",
               "3 ratios given for 3 tiers; give one for all tiers or one per tier below the "
               "top (2)");
  expect_error(std::string(kValid) + "[network]\ntiers = 2\noversubscription = [1, 1]\n", 15,
               "network.oversubscription", "2 ratios given for 2 tiers");
  expect_error(std::string(kValid) + "[network]\noversubscription = []\n", 14,
               "network.oversubscription", "expected a number or a non-empty array, got []");
  expect_error(std::string(kValid) + "[network]\noversubscription = [1, -3]\n", 14,
               "network.oversubscription", "must be a finite number > 0, got -3");
  // The value as written, not std::to_string's six decimals ("-0.000000", and
  // "1.000000" for a fraction just above 1).
  expect_error(std::string(kValid) + "[hardware]\ngpu_speed_sigma = 0.5000001\n", 14, "hardware.gpu_speed_sigma",
               "must be at most 0.5 (a 50% spread), got 0.5000001");
  expect_error(std::string(kValid) + "[network]\noversubscription = -1e-9\n", 14, "network.oversubscription",
               "must be a finite number > 0, got -1e-09");
  expect_error(std::string(kValid) + "[network]\noversubscription = \"1:1\"\n", 14,
               "network.oversubscription", "expected a number or an array, got string");
}

// A valid layout on 8,192 GPUs: tp 2, pp 2, dp 2048.
std::string scenario_with_gpus_8192(const std::string& topology) {
  return R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
pp = 2
global_batch = 2048
[cluster]
gpus = 8192
topology = ")" +
         topology + "\"\n";
}

TEST(NetworkErrorTest, MoreGpusThanTheFabricHolds) {
  parse_scenario(scenario_with_gpus_8192("megascale-clos"), "t.toml");
  expect_error(scenario_with_gpus_8192("rail-2tier"), 12, "cluster.gpus",
               "8192 GPUs need 128 ToRs, more than a 2-tier fabric of radix-64 switches connects "
               "(64 ToRs, at most 4096 GPUs); use network.tiers = 3");
  // Three tiers of radix-8 switches, 2 x 200G NICs per ToR port: ToR sets of 8
  // servers; 4 ToRs per pod and at most 8 pods = 4 ToR sets = 256 GPUs.
  expect_error(scenario_with_gpus_8192("megascale-clos") + "[network]\nswitch_radix = 8\n", 12,
               "cluster.gpus",
               "8192 GPUs need 256 pods of 4 ToRs, more than radix-8 core switches connect (8 "
               "pods, at most 256 GPUs)");
}

TEST(NetworkErrorTest, NicsMustFitThePorts) {
  // Not rail-optimised, a server's 8 NICs need one ToR with 8 NIC ports; a
  // radix-8 1:1 ToR has 4. The key is absent: reported at line 1 (no [hardware]).
  expect_error(std::string(kValid) + "[network]\npreset = \"fat-tree\"\nswitch_radix = 8\n", 1,
               "hardware.nics_per_node",
               "a server's 8 NICs do not fit one ToR's 4 NIC ports");
  expect_error(std::string(kValid) + "[hardware]\nnics_per_node = 8\n"
                                     "[network]\npreset = \"fat-tree\"\nswitch_radix = 8\n",
               14, "hardware.nics_per_node", "do not fit one ToR's 4 NIC ports");
}

// ---------------------------------------------------------------------------
// Values

TEST(ScenarioTest, DefaultsApplied) {
  const Scenario sc = parse_scenario(kValid, "dir/t.toml");
  EXPECT_EQ(sc.source, "dir/t.toml");
  EXPECT_EQ(sc.name, "t");
  EXPECT_EQ(sc.model.kv_heads, 16);
  EXPECT_EQ(sc.model.ffn_hidden, 4 * 2048);
  EXPECT_EQ(sc.model.mlp, MlpKind::kGelu);
  EXPECT_EQ(sc.model.block, BlockKind::kSequential);
  EXPECT_EQ(sc.model.attention_window, 0);
  EXPECT_EQ(sc.parallel.vpp, 1);
  EXPECT_EQ(sc.parallel.dp, 4);
  EXPECT_EQ(sc.parallel.micro_batch, 1);
  EXPECT_FALSE(sc.parallel.sequence_parallel);
  EXPECT_EQ(sc.parallel.zero_stage, 1);
  EXPECT_EQ(sc.parallel.recompute, Recompute::kNone);
  EXPECT_EQ(sc.hardware.gpu, "A100-SXM4-80GB");
  EXPECT_EQ(sc.hardware.gpus_per_node, 8);
  EXPECT_EQ(sc.hardware.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(sc.hardware.nic_gbps, 200.0);
  EXPECT_DOUBLE_EQ(sc.hardware.gpu_speed_sigma, 0.015);  // Sinha et al. SC'22, see config.h
  EXPECT_EQ(sc.cluster.topology, "megascale-clos");
  EXPECT_EQ(sc.optimizations.preset, "megatron");
  EXPECT_FALSE(sc.optimizations.tp_overlap);
  EXPECT_EQ(sc.optimizations.optimizer, OptimizerKind::kAdam);
  EXPECT_EQ(sc.tokens_per_iteration(), 64 * 2048);
}

TEST(NetworkTest, DefaultsAreTheMegaScaleFabric) {
  const Scenario sc = parse_scenario(kValid, "t.toml");
  const NetworkConfig& n = sc.network;
  EXPECT_EQ(n.preset, "megascale-clos");
  EXPECT_EQ(n.switch_radix, 64);
  EXPECT_DOUBLE_EQ(n.switch_port_gbps, 400.0);
  EXPECT_TRUE(n.split_ports);
  EXPECT_EQ(n.tiers, 3);
  EXPECT_EQ(n.oversubscription, std::vector<double>{1.0});
  EXPECT_TRUE(n.rail_optimized);
  EXPECT_DOUBLE_EQ(n.switch_latency_us, 0.7);
  EXPECT_DOUBLE_EQ(n.link_latency_us, 0.05);
  EXPECT_EQ(n.qps_per_connection, 1);
  EXPECT_EQ(n.ecmp_hash, "crc32");
  EXPECT_EQ(n.routing, "ecmp");
  EXPECT_FALSE(n.polarization);
  EXPECT_EQ(n.congestion_control, "hybrid");
  EXPECT_DOUBLE_EQ(n.nvlink_gbps, 0.0);
  // An empty table is the same.
  const Scenario empty = parse_scenario(std::string(kValid) + "[network]\n", "t.toml");
  EXPECT_EQ(empty.network.preset, "megascale-clos");
  EXPECT_EQ(empty.network.tiers, 3);
  EXPECT_EQ(default_scenario("megascale").network.preset, "megascale-clos");
}

TEST(NetworkTest, EveryKeyIsRead) {
  const Scenario sc = parse_scenario(std::string(kValid) + R"([network]
preset = "megascale-clos"
switch_radix = 128
switch_port_gbps = 800
split_ports = false
tiers = 3
oversubscription = [3, 1.0]
rail_optimized = false
switch_latency_us = 0.9
link_latency_us = 0
qps_per_connection = 4
ecmp_hash = "murmur3"
polarization = true
congestion_control = "dcqcn"
nvlink_gbps = 3600
routing = "adaptive"
)",
                                     "t.toml");
  const NetworkConfig& n = sc.network;
  EXPECT_EQ(n.switch_radix, 128);
  EXPECT_DOUBLE_EQ(n.switch_port_gbps, 800.0);
  EXPECT_FALSE(n.split_ports);
  EXPECT_EQ(n.tiers, 3);
  EXPECT_EQ(n.oversubscription, (std::vector<double>{3.0, 1.0}));
  EXPECT_FALSE(n.rail_optimized);
  EXPECT_DOUBLE_EQ(n.switch_latency_us, 0.9);
  EXPECT_DOUBLE_EQ(n.link_latency_us, 0.0);
  EXPECT_EQ(n.qps_per_connection, 4);
  EXPECT_EQ(n.ecmp_hash, "murmur3");
  EXPECT_EQ(n.routing, "adaptive");
  EXPECT_TRUE(n.polarization);
  EXPECT_EQ(n.congestion_control, "dcqcn");
  EXPECT_DOUBLE_EQ(n.nvlink_gbps, 3600.0);
  const Scenario scalar =
      parse_scenario(std::string(kValid) + "[network]\noversubscription = 3\n", "t.toml");
  EXPECT_EQ(scalar.network.oversubscription, std::vector<double>{3.0});
}

TEST(NetworkTest, PresetFollowsClusterTopologyAndSetsItsDefaults) {
  Scenario sc = parse_scenario(std::string(kValid) + "topology = \"rail-2tier\"\n", "t.toml");
  EXPECT_EQ(sc.network.preset, "rail-2tier");
  EXPECT_EQ(sc.network.tiers, 2);
  EXPECT_TRUE(sc.network.rail_optimized);
  sc = parse_scenario(std::string(kValid) + "topology = \"fat-tree\"\n[network]\ntiers = 3\n",
                      "t.toml");
  EXPECT_EQ(sc.network.preset, "fat-tree");
  EXPECT_FALSE(sc.network.split_ports);
  EXPECT_FALSE(sc.network.rail_optimized);
  // network.preset alone names the fabric for both tables.
  sc = parse_scenario(std::string(kValid) + "[network]\npreset = \"rail-2tier\"\ntiers = 3\n",
                      "t.toml");
  EXPECT_EQ(sc.cluster.topology, "rail-2tier");
  EXPECT_EQ(sc.network.tiers, 3);  // explicit keys override the preset
  EXPECT_EQ(NetworkConfig::for_preset("fat-tree").tiers, 3);
  EXPECT_FALSE(NetworkConfig::for_preset("fat-tree").rail_optimized);
}

TEST(ScenarioTest, PresetThenExplicitOverrides) {
  const Scenario sc = parse_scenario(std::string(kValid) + R"(
[optimizations]
preset = "megascale"
dp_overlap = false
optimizer = "lamb"
[hardware]
nic_gbps = 400.5
)",
                                     "t.toml");
  EXPECT_EQ(sc.optimizations.preset, "megascale");
  EXPECT_TRUE(sc.optimizations.tp_overlap);
  EXPECT_TRUE(sc.optimizations.pp_overlap);
  EXPECT_FALSE(sc.optimizations.dp_overlap);
  EXPECT_TRUE(sc.optimizations.efficient_operators);
  EXPECT_TRUE(sc.optimizations.data_pipeline);
  EXPECT_EQ(sc.optimizations.optimizer, OptimizerKind::kLamb);
  EXPECT_DOUBLE_EQ(sc.hardware.nic_gbps, 400.5);
}

// Megatron-Core's --overlap-param-gather apart from --overlap-grad-reduce: unset
// it follows dp_overlap; on it needs dp_overlap, as Megatron's arguments.py asserts.
TEST(ScenarioTest, ParameterGatherOverlapFollowsDpOverlapOrIsSetApart) {
  const std::string core = "[optimizations]\npreset = \"megatron-core\"\n";
  const Scenario follows = parse_scenario(std::string(kValid) + core, "t.toml");
  EXPECT_FALSE(follows.optimizations.dp_overlap_param_gather.has_value());
  EXPECT_TRUE(follows.optimizations.overlaps_param_gather());
  const Scenario apart = parse_scenario(std::string(kValid) + core + "dp_overlap_param_gather = false\n", "t.toml");
  EXPECT_TRUE(apart.optimizations.dp_overlap);
  EXPECT_FALSE(apart.optimizations.overlaps_param_gather());
  const Scenario off = parse_scenario(std::string(kValid) + core + "dp_overlap = false\n", "t.toml");
  EXPECT_FALSE(off.optimizations.overlaps_param_gather());
  // kValid is 12 lines: [optimizations] 13, preset 14, dp_overlap 15, the key 16.
  expect_error(std::string(kValid) + core + "dp_overlap = false\ndp_overlap_param_gather = true\n", 16,
               "optimizations.dp_overlap_param_gather", "needs dp_overlap = true");
  expect_error(std::string(kValid) + "[optimizations]\ndp_overlap_param_gather = true\n", 14,
               "optimizations.dp_overlap_param_gather", "--overlap-grad-reduce");
  expect_error(std::string(kValid) + core + "dp_overlap_param_gather = \"no\"\n", 15,
               "optimizations.dp_overlap_param_gather", "");
}

TEST(ScenarioTest, ApplyPresetRejectsUnknownName) {
  Optimizations o;
  EXPECT_THROW(apply_preset("fast", &o), std::invalid_argument);
  apply_preset("megascale", &o);
  EXPECT_TRUE(o.dp_overlap);
  EXPECT_EQ(o.optimizer, OptimizerKind::kAdam);  // LAMB is its own switch
}

TEST(ScenarioTest, DefaultScenarioIsTable1) {
  for (const std::string preset : {"megatron", "megascale"}) {
    const Scenario sc = default_scenario(preset);
    EXPECT_EQ(sc.name, "gpt-175b-12288-" + preset);
    EXPECT_EQ(sc.source, "<built-in>");
    EXPECT_EQ(sc.model.layers, 96);
    EXPECT_EQ(sc.model.hidden, 12288);
    EXPECT_EQ(sc.model.heads, 128);
    EXPECT_EQ(sc.model.kv_heads, 128);
    EXPECT_EQ(sc.model.seq_len, 2048);
    EXPECT_EQ(sc.model.vocab, 64000);
    EXPECT_EQ(sc.model.ffn_hidden, 4 * 12288);
    EXPECT_EQ(sc.parallel.tp, 8);
    EXPECT_EQ(sc.parallel.pp, 8);
    EXPECT_EQ(sc.parallel.vpp, 6);
    EXPECT_EQ(sc.parallel.dp, 192);
    EXPECT_EQ(sc.parallel.global_batch, 6144);
    EXPECT_TRUE(sc.parallel.sequence_parallel);
    EXPECT_EQ(sc.cluster.gpus, 12288);
    EXPECT_EQ(sc.optimizations.preset, preset);
    EXPECT_EQ(check_layout(sc.model, sc.parallel, sc.cluster.gpus), std::nullopt);
  }
  EXPECT_EQ(default_scenario("megatron").model.block, BlockKind::kSequential);
  EXPECT_EQ(default_scenario("megatron").model.attention_window, 0);
  EXPECT_EQ(default_scenario("megatron").optimizations.optimizer, OptimizerKind::kAdam);
  EXPECT_EQ(default_scenario("megascale").model.block, BlockKind::kParallel);
  EXPECT_EQ(default_scenario("megascale").model.attention_window, 1024);
  EXPECT_EQ(default_scenario("megascale").optimizations.optimizer, OptimizerKind::kLamb);
  EXPECT_TRUE(default_scenario("megascale").optimizations.tp_overlap);
  EXPECT_THROW(default_scenario("fast"), std::invalid_argument);
}

TEST(ScenarioTest, CheckLayoutReportsKey) {
  Scenario sc = default_scenario("megatron");
  sc.parallel.tp = 0;
  std::string key;
  EXPECT_EQ(check_layout(sc.model, sc.parallel, sc.cluster.gpus, &key), "tp (0) must be > 0");
  EXPECT_EQ(key, "parallel.tp");
  sc = default_scenario("megatron");
  sc.parallel.zero_stage = 5;
  EXPECT_EQ(check_layout(sc.model, sc.parallel, sc.cluster.gpus, &key),
            "zero_stage (5) not in 0..3");
  EXPECT_EQ(key, "parallel.zero_stage");
}

TEST(ScenarioTest, LoadsFileFromDisk) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "megascale_scenario_test.toml";
  {
    std::ofstream out(path);
    out << "name = \"from-disk\"\n" << kValid << "topology = \"fat-tree\"\n";
  }
  const Scenario sc = load_scenario(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(sc.name, "from-disk");
  EXPECT_EQ(sc.source, path.string());
  EXPECT_EQ(sc.cluster.gpus, 16);
  EXPECT_EQ(sc.cluster.topology, "fat-tree");
}

TEST(ScenarioTest, ExampleSmallIsValid) {
  const Scenario sc =
      load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/example-small.toml");
  EXPECT_EQ(sc.name, "gpt-1.3b-16");
  EXPECT_EQ(sc.parallel.gpus(), 16);
  EXPECT_EQ(sc.parallel.microbatches(), 16);
  EXPECT_NEAR(static_cast<double>(sc.model.parameters()), 1.3e9, 0.1e9);
}

// ---------------------------------------------------------------------------
// config.h arithmetic

TEST(ConfigTest, EnumNames) {
  EXPECT_STREQ(to_string(MlpKind::kSwiGlu), "swiglu");
  EXPECT_STREQ(to_string(BlockKind::kParallel), "parallel");
  EXPECT_STREQ(to_string(Recompute::kSelective), "selective");
  EXPECT_STREQ(to_string(OptimizerKind::kLamb), "lamb");
}

TEST(ConfigTest, Parameters175B) {
  const ModelConfig m = default_scenario("megatron").model;
  const double h = m.hidden;
  const double approx = 12.0 * m.layers * h * h;  // 4h^2 attention + 8h^2 MLP per layer
  EXPECT_NEAR(static_cast<double>(m.parameters()), 175e9, 0.01 * 175e9);
  EXPECT_NEAR(static_cast<double>(m.layers * m.parameters_per_layer()), approx, 0.01 * approx);
}

TEST(ConfigTest, ParametersPerLayerByBlockAndMlp) {
  ModelConfig m;
  m.hidden = 8;
  m.heads = 2;
  m.kv_heads = 1;  // head_dim 4, kv_dim 4
  m.ffn_hidden = 16;
  // QKV 8*16+16, out 8*8+8, GeLU MLP 2*8*16+16+8, two LNs 2*16.
  EXPECT_EQ(m.parameters_per_layer(), 144 + 72 + 280 + 32);
  m.block = BlockKind::kParallel;
  m.mlp = MlpKind::kSwiGlu;
  EXPECT_EQ(m.parameters_per_layer(), 144 + 72 + 3 * 8 * 16 + 16);
}

double brute_force_mean_keys(int s, int w) {
  double total = 0;
  for (int i = 0; i < s; ++i) total += (w > 0 ? std::min(i, w) : i) + 1;
  return total / s;
}

TEST(ConfigTest, MeanKeysPerQueryMatchesBruteForce) {
  for (int s : {1, 2, 3, 7, 16, 100}) {
    for (int w : {0, 1, 2, 5, 15, 16, 200}) {
      ModelConfig m;
      m.seq_len = s;
      m.attention_window = w;
      EXPECT_NEAR(m.mean_keys_per_query(), brute_force_mean_keys(s, w), 1e-12)
          << "s=" << s << " W=" << w;
    }
  }
}

TEST(ScenarioErrorTest, UnknownGpuProfileIsNamedAtItsLine) {
  expect_error(std::string(kValid) + "[hardware]\ngpu = \"V100\"\n", 14, "hardware.gpu", "not allowed");
  EXPECT_EQ(parse_scenario(std::string(kValid) + "[hardware]\ngpu = \"cpu\"\n", "t.toml").hardware.gpu, "cpu");
  EXPECT_EQ(parse_scenario(std::string(kValid) + "[hardware]\ngpu = \"H200-SXM-141GB\"\n", "t.toml").hardware.gpu,
            "H200-SXM-141GB");
}

}  // namespace
}  // namespace megascale::model
