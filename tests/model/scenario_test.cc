// Tests of model/scenario.h and the arithmetic of model/config.h: every error
// path names the file, the exact line, the key and the reason; defaults, presets
// and the built-in MegaScale Table 1 scenario.
#include "model/scenario.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace megascale::model {
namespace {

// A valid scenario: dp defaults to 16 / (2*2) = 4, 16 micro-batches per replica.
constexpr const char* kValid = R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
pp = 2
global_batch = 64
[cluster]
gpus = 16
)";

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

TEST(ScenarioErrorTest, ReservedTableRejectsKeys) {
  parse_scenario(std::string(kValid) + "[network]\n[failures]\n", "t.toml");
  expect_error(std::string(kValid) + "[network]\ncc = \"dcqcn\"\n", 14, "network.cc",
               "key not supported yet by this version");
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

TEST(ScenarioErrorTest, LayersNotDivisibleByPp) {
  expect_error(R"([model]
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
)",
               9, "parallel.pp", "layers (24) not divisible by pp*vpp (5*1=5)");
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
  EXPECT_EQ(sc.cluster.topology, "megascale-clos");
  EXPECT_EQ(sc.optimizations.preset, "megatron");
  EXPECT_FALSE(sc.optimizations.tp_overlap);
  EXPECT_EQ(sc.optimizations.optimizer, OptimizerKind::kAdam);
  EXPECT_EQ(sc.tokens_per_iteration(), 64 * 2048);
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

}  // namespace
}  // namespace megascale::model
