// tests/model/profile_test.cc: hardware profiles as data files (model/profile.h)
// and their measured tables (model/profile_tables.h).
#include "model/profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/op_cost.h"
#include "model/scenario.h"
#include "valid_scenario.h"

namespace megascale::model {
namespace {

std::string valid_scenario_text() { return std::string(testing::kValidScenario) + "[hardware]\n"; }

std::string source_path(const std::string& rel) { return std::string(MEGASCALE_SOURCE_DIR) + "/" + rel; }

// A GPU profile with every required value, for the error tests to break.
std::string minimal_gpu_profile(const std::string& extra_values = "") {
  std::string text = R"(
[profile]
name = "TEST-GPU"
kind = "gpu"

[values]
)";
  for (const char* key : {"peak_tflops", "memory_bytes", "memory_gbs", "memory_efficiency", "nvlink_gbs",
                          "nvlink_busbw_gbs", "max_gemm_efficiency", "flash_fwd_efficiency",
                          "flash_bwd_efficiency", "kernel_launch_us", "activation_bytes",
                          "param_gather_bytes", "data_load_s_per_sample", "step_overhead_s", "op_gap_us"}) {
    text += std::string(key) + " = { value = 0.5, source = \"spec\", ref = \"test\" }\n";
  }
  // Line rates: at least 1 Gb/s (model/hardware.h kMinLineRateGbps).
  for (const char* key : {"nic_gbps", "pcie_gbps"}) {
    text += std::string(key) + " = { value = 200, source = \"spec\", ref = \"test\" }\n";
  }
  for (const char* key : {"sm_count", "nics_per_node", "nccl_nvlink_ctas"}) {
    text += std::string(key) + " = { value = 8, source = \"spec\", ref = \"test\" }\n";
  }
  return text + extra_values;
}

std::string error_of(const std::string& text) {
  try {
    parse_profile(text, "test.toml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

TEST(Profile, ShippedProfilesLoadFromTheirFilesWithProvenance) {
  for (const char* name_c : {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB",
                             "GB200-NVL72-186GB"}) {
    const std::string name = name_c;
    const GpuProfile from_file = load_profile(source_path("calibrate/profiles/" + name + ".toml"));
    const GpuProfile& builtin = builtin_profile(name);
    EXPECT_EQ(from_file.name, name);
    EXPECT_EQ(builtin.peak_tflops, from_file.peak_tflops);
    EXPECT_EQ(builtin.memory_gbs, from_file.memory_gbs);
    EXPECT_EQ(builtin.pcie_gbps, from_file.pcie_gbps);
    EXPECT_EQ(builtin.nccl_nvlink_ctas, from_file.nccl_nvlink_ctas);
    // Every value says where it comes from.
    for (const char* key : {"peak_tflops", "memory_bytes", "memory_gbs", "sm_count", "max_gemm_efficiency",
                            "flash_fwd_efficiency", "kernel_launch_us", "nccl_nvlink_ctas"}) {
      ASSERT_TRUE(builtin.provenance.count(key)) << name << " " << key;
      EXPECT_FALSE(builtin.provenance.at(key).ref.empty()) << name << " " << key;
    }
  }
  EXPECT_EQ(builtin_profile("A100-SXM4-80GB").provenance.at("nccl_nvlink_ctas").source, "spec");
  EXPECT_EQ(builtin_profile("H100-SXM5-80GB").provenance.at("nccl_nvlink_ctas").source, "spec");
}

// The values the kernel-time models used before profiles were files
// (model/hardware.cc at 63bc675): moving them to data changed none of them.
TEST(Profile, ShippedValuesAreTheFormerConstants) {
  const GpuProfile& a = builtin_profile("A100-SXM4-80GB");
  EXPECT_EQ(a.peak_tflops, 312.0);
  EXPECT_EQ(a.memory_efficiency, 0.85);
  EXPECT_EQ(a.kernel_launch_us, 4.0);
  EXPECT_EQ(a.max_gemm_efficiency, 0.85);
  EXPECT_EQ(a.flash_fwd_efficiency, 0.60);
  EXPECT_EQ(a.flash_bwd_efficiency, 0.50);
  EXPECT_EQ(a.nvlink_busbw_gbs, 230.0);
  EXPECT_EQ(a.pcie_gbps, 16.0 * 16.0 * 128.0 / 130.0);
  EXPECT_EQ(a.default_nics_per_node, 8);
  EXPECT_EQ(a.default_nic_gbps, 200.0);
  const GpuProfile& h = builtin_profile("H200-SXM-141GB");
  // 0.76 until 2026-12-05, then its cited source's figure: ml-engineering's MAMF
  // table, 794.5 of 989 TFLOP/s on H100 SXM ("H200 is the same").
  EXPECT_EQ(h.max_gemm_efficiency, 0.803);
  EXPECT_EQ(h.flash_fwd_efficiency, 0.36);
  EXPECT_EQ(h.flash_bwd_efficiency, 0.30);
  EXPECT_EQ(h.nvlink_busbw_gbs, 370.0);
  EXPECT_EQ(h.pcie_gbps, 16.0 * 32.0 * 128.0 / 130.0);
  EXPECT_EQ(h.nccl_nvlink_ctas, 24);  // NCCL 2.30.7 search.cc + connect.cc: 24 coll channels on 8 H100/H200
  EXPECT_EQ(h.data_load_s_per_sample, 1e-3);
}

// The B200 profile's NCCL inputs: Blackwell's tuning rows, 32 channels (NCCL's
// search on 18 x SM100_NVLINK_BW, logged on a DGX B200), NVLink SHARP; its
// GEMM fraction is the MAMF table's, its FlashAttention-2 one the sm80 path's.
TEST(Profile, B200CarriesBlackwellsFigures) {
  const GpuProfile& b = builtin_profile("B200-SXM-180GB");
  EXPECT_EQ(b.peak_tflops, 2250.0);
  EXPECT_EQ(b.fp8_peak_tflops, 4500.0);
  EXPECT_EQ(b.compute_capability, 100);
  EXPECT_EQ(b.nccl_nvlink_ctas, 32);
  EXPECT_EQ(b.sm_count, 148);
  EXPECT_EQ(b.max_gemm_efficiency, 0.776);
  EXPECT_GT(b.nvls_busbw_gbs, b.nvlink_busbw_gbs);
  EXPECT_LT(b.flash_fwd_efficiency, b.fused_attention_fwd_efficiency);
  EXPECT_EQ(b.provenance.at("fused_attention_fwd_efficiency").source, "assumption");
  EXPECT_EQ(b.provenance.at("gemm_overhead_us").source, "fitted");
  // 183359 MiB, what nvidia-smi prints for the part.
  EXPECT_EQ(b.memory_bytes, 183359.0 * 1024 * 1024);
}

// The GB200 profile: its own datasheet and MAMF figures (a higher clock than
// B200's: more peak, a lower achieved fraction), and what no GB200 measurement
// gives carried over from the B200 profile, each labelled an assumption, the
// in-situ compute scale included (the same value, not a fit of its own).
TEST(Profile, Gb200CarriesItsFiguresAndLabelsWhatItBorrowsFromB200) {
  const GpuProfile& g = builtin_profile("GB200-NVL72-186GB");
  const GpuProfile& b = builtin_profile("B200-SXM-180GB");
  EXPECT_EQ(g.peak_tflops, 2500.0);
  EXPECT_EQ(g.fp8_peak_tflops, 5000.0);
  EXPECT_EQ(g.sm_count, 152);
  EXPECT_EQ(g.max_gemm_efficiency, 0.729);
  EXPECT_EQ(g.fp8_gemm_efficiency, 0.723);
  EXPECT_EQ(g.compute_capability, 100);
  EXPECT_EQ(g.default_nics_per_node, 72);
  EXPECT_GT(g.max_gemm_efficiency * g.peak_tflops, b.max_gemm_efficiency * b.peak_tflops);  // 1822 vs 1745
  for (const char* key : {"nvlink_busbw_gbs", "nvls_busbw_gbs", "nccl_nvlink_ctas", "flash_fwd_efficiency",
                          "fused_attention_fwd_efficiency", "gemm_overhead_us", "memory_bytes"})
    EXPECT_EQ(g.provenance.at(key).source, "assumption") << key;
  EXPECT_EQ(g.nvls_busbw_gbs, b.nvls_busbw_gbs);
  EXPECT_EQ(g.gemm_overhead_us, b.gemm_overhead_us);
  ASSERT_NE(g.measured(), nullptr);
  ASSERT_NE(b.measured(), nullptr);
  EXPECT_EQ(g.measured()->insitu.value("gemm", 1), b.measured()->insitu.value("gemm", 1));
  EXPECT_EQ(g.provenance.at("tables.insitu").source, "assumption");
  EXPECT_EQ(b.provenance.at("tables.insitu").source, "fitted");
}

TEST(Profile, MinimalProfileParses) {
  const GpuProfile p = parse_profile(minimal_gpu_profile(), "test.toml");
  EXPECT_EQ(p.name, "TEST-GPU");
  EXPECT_EQ(p.sm_count, 8);
  EXPECT_EQ(p.measured(), nullptr);
}

TEST(Profile, MalformedEntriesNameFileLineKeyAndReason) {
  std::string text = minimal_gpu_profile();
  // A missing value.
  std::string missing = text;
  missing.replace(missing.find("peak_tflops"), missing.find('\n', missing.find("peak_tflops")) - missing.find("peak_tflops"), "");
  EXPECT_NE(error_of(missing).find("values.peak_tflops: required key missing"), std::string::npos) << error_of(missing);
  // No provenance.
  EXPECT_NE(error_of(minimal_gpu_profile("cores = { value = 2 }\n")).find("test.toml:27:9: values.cores.source"), std::string::npos)
      << error_of(minimal_gpu_profile("cores = { value = 2 }\n"));
  EXPECT_NE(error_of(minimal_gpu_profile("cores = { value = 2 }\n")).find("values.cores.source: required key missing"),
            std::string::npos);
  // Measured without host and date.
  EXPECT_NE(error_of(minimal_gpu_profile("cores = { value = 2, source = \"measured\", ref = \"x\" }\n"))
                .find("values.cores.host: required key missing"),
            std::string::npos);
  // Fitted without runs or leave-one-out error.
  EXPECT_NE(error_of(minimal_gpu_profile("cores = { value = 2, source = \"fitted\", loo_error = 0.1 }\n"))
                .find("values.cores.runs: required key missing"),
            std::string::npos);
  EXPECT_NE(error_of(minimal_gpu_profile("cores = { value = 2, source = \"fitted\", runs = [\"a\"] }\n"))
                .find("values.cores.loo_error: required key missing"),
            std::string::npos);
  // An unknown key, with a suggestion; a value of the wrong type.
  EXPECT_NE(error_of(minimal_gpu_profile("peak_tflop = { value = 2, source = \"spec\", ref = \"x\" }\n"))
                .find("did you mean 'peak_tflops'"),
            std::string::npos);
  EXPECT_NE(error_of(minimal_gpu_profile("cores = { value = \"two\", source = \"spec\", ref = \"x\" }\n"))
                .find("values.cores.value: expected an integer"),
            std::string::npos);
  // Tables: a row of the wrong length, a missing column, a bad pass.
  const std::string table = R"(
[tables.kernels]
source = "measured"
ref = "test"
host = "h"
date = "d"
columns = ["kernel", "pass", "elements", "seconds"]
rows = [
  ["gelu", "fwd", 1024, 1e-6],
  ["gelu", "fwd", 2048],
]
)";
  const std::string e = error_of(minimal_gpu_profile() + table);
  EXPECT_NE(e.find("test.toml:36:3: "), std::string::npos) << e;
  EXPECT_NE(e.find("tables.kernels.rows: row has 3 values, columns name 4"), std::string::npos) << e;
  std::string no_seconds = table;
  no_seconds.replace(no_seconds.find(", \"seconds\""), 11, "");
  EXPECT_NE(error_of(minimal_gpu_profile() + no_seconds).find("required column 'seconds' missing"), std::string::npos);
  std::string bad_pass = table;
  const std::string short_row = "  [\"gelu\", \"fwd\", 2048],\n";
  bad_pass.replace(bad_pass.find(short_row), short_row.size(), "");
  bad_pass.replace(bad_pass.find("\"fwd\", 1024"), 5, "\"up\"");
  EXPECT_NE(error_of(minimal_gpu_profile() + bad_pass).find("not allowed"), std::string::npos);
  // A CPU profile without its measured tables is refused.
  std::string cpu = minimal_gpu_profile("cores = { value = 2, source = \"spec\", ref = \"x\" }\n");
  cpu.replace(cpu.find("kind = \"gpu\""), 12, "kind = \"cpu\"");
  EXPECT_NE(error_of(cpu).find("tables.gemm: required key missing"), std::string::npos) << error_of(cpu);
}

// A fraction of a peak above 1, a 0/1 switch above 1, or a line rate below
// 1 Gb/s is refused at its line: a memory_efficiency of 7 (a slip for 0.7) ran
// every memory-bound kernel 8x faster than the bandwidth allows and nothing
// said so.
TEST(Profile, ValuesOutsideTheirRangeAreRefusedAtTheirLine) {
  const auto with = [](const std::string& key, const std::string& value) {
    std::string text = minimal_gpu_profile();
    const size_t at = text.find(key + " = { value = 0.5");
    if (at == std::string::npos) return minimal_gpu_profile(key + " = { value = " + value + ", source = \"spec\", ref = \"x\" }\n");
    text.replace(at, key.size() + 16, key + " = { value = " + value);
    return text;
  };
  std::string e = error_of(with("memory_efficiency", "7"));
  EXPECT_NE(e.find("test.toml:10:"), std::string::npos) << e;
  EXPECT_NE(e.find("values.memory_efficiency.value: must be at most 1 (memory_efficiency: achievable fraction of "
                   "memory_gbs), got 7"),
            std::string::npos)
      << e;
  for (const char* key : {"max_gemm_efficiency", "flash_fwd_efficiency", "flash_bwd_efficiency",
                          "fused_attention_fwd_efficiency", "fused_attention_bwd_efficiency", "fp8_gemm_efficiency",
                          "engine_calls", "fused_bias"}) {
    e = error_of(with(key, "1.01"));
    EXPECT_NE(e.find(std::string("values.") + key + ".value: must be at most 1 ("), std::string::npos) << key << ": " << e;
    // engine_calls = 1 asks for the engine's measured tables, another rule.
    if (std::string(key) != "engine_calls") {
      EXPECT_EQ(error_of(with(key, "1.0")), "") << key;
    }
  }
  e = error_of(with("host_cpu_amd", "2"));
  EXPECT_NE(e.find("values.host_cpu_amd.value: must be"), std::string::npos) << e;
  // A line rate below 1 Gb/s (1e-300 overflowed the event level's times).
  for (const char* key : {"nic_gbps", "pcie_gbps"}) {
    std::string text = minimal_gpu_profile();
    const std::string from = std::string(key) + " = { value = 200";
    text.replace(text.find(from), from.size(), std::string(key) + " = { value = 1e-300");
    e = error_of(text);
    EXPECT_NE(e.find(std::string("values.") + key + ".value: must be at least 1 ("), std::string::npos) << key << ": " << e;
  }
  // Quantities with no natural ceiling keep none.
  EXPECT_EQ(error_of(with("peak_tflops", "1e6")), "");
  EXPECT_EQ(error_of(with("step_overhead_s", "7")), "");
}

// A profile with every kind of table survives write_profile -> parse_profile.
TEST(Profile, WriteThenParseReproducesTheProfile) {
  GpuProfile p = parse_profile(minimal_gpu_profile(), "test.toml");
  auto t = std::make_shared<ProfileTables>();
  t->gemm = GemmTable({{1, "nt", 64, 64, 64, 1.5e-5, 0.02}, {2, "nn", 128, 64, 32, 2.5e-5, 0.1}});
  t->attention = AttentionTable({{1, 128, 64, 0, false, 3e-5, 0}, {1, 128, 64, 0, true, 7e-5, 0},
                                 {1, 128, 64, 16, false, 2e-5, 0}});
  t->kernels = KernelTable({{1, "gelu", false, 1024, 1e-6, 0.01}, {1, "gelu", true, 1024, 2e-6, 0.01}});
  t->collectives = CollectiveTable({{"all_reduce", "intra", 2, 4096, 5e-6, 0.1}},
                                   {{"all_reduce", "inter", 16, "LL", 12.5, 3.25}});
  p.tables = t;
  for (const char* name : {"tables.gemm", "tables.attention", "tables.kernels", "tables.collectives", "tables.protocols"}) {
    p.provenance[name] = Provenance{"measured", "test bench", "host", "2026-12-01", {}, -1};
  }
  p.provenance["op_gap_us"] = Provenance{"fitted", "least squares", "", "", {"run-a", "run-b"}, 0.031};
  const GpuProfile q = parse_profile(write_profile(p), "written.toml");
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.peak_tflops, p.peak_tflops);
  EXPECT_EQ(q.provenance.at("op_gap_us").runs, (std::vector<std::string>{"run-a", "run-b"}));
  EXPECT_DOUBLE_EQ(q.provenance.at("op_gap_us").loo_error, 0.031);
  ASSERT_NE(q.measured(), nullptr);
  EXPECT_EQ(q.measured()->gemm.points().size(), 2u);
  EXPECT_NEAR(q.measured()->gemm.time_s(64, 64, 64, "nt", 1), 1.5e-5, 1e-15);
  EXPECT_NEAR(q.measured()->gemm.time_s(128, 64, 32, "nn", 2), 2.5e-5, 1e-15);
  EXPECT_EQ(q.measured()->attention.points().size(), 3u);
  EXPECT_DOUBLE_EQ(*q.measured()->kernels.time_s("gelu", true, 1024, 1), 2e-6);
  EXPECT_DOUBLE_EQ(*q.measured()->collectives.time_s("all_reduce", "intra", 2, 4096), 5e-6);
  EXPECT_EQ(q.measured()->collectives.curves().size(), 1u);
  EXPECT_EQ(q.provenance.at("tables.gemm").host, "host");
}

TEST(ProfileTables, GemmIsExactOnTheGridAndInterpolatesTheRateBetween) {
  std::vector<GemmPoint> pts;
  // rate(m, n, k) = 1e9 * m (grows with m only), on a 2 x 2 x 2 grid.
  for (int64_t m : {64, 256}) {
    for (int64_t n : {64, 256}) {
      for (int64_t k : {64, 256}) pts.push_back({1, "nt", m, n, k, 2.0 * m * n * k / (1e9 * m), 0});
    }
  }
  const GemmTable t(pts);
  EXPECT_DOUBLE_EQ(t.time_s(64, 256, 64, "nt", 1), 2.0 * 64 * 256 * 64 / (1e9 * 64));
  // m = 128 sits half-way in log2: log-rate half-way between 64e9 and 256e9 = 128e9.
  EXPECT_NEAR(t.time_s(128, 64, 64, "nt", 1), 2.0 * 128 * 64 * 64 / 128e9, 1e-15);
  // Beyond the grid the rate is clamped to its edge.
  EXPECT_NEAR(t.time_s(1024, 64, 64, "nt", 1), 2.0 * 1024 * 64 * 64 / 256e9, 1e-15);
  // Another layout falls back to what was measured.
  EXPECT_NEAR(t.time_s(64, 64, 64, "tn", 1), t.time_s(64, 64, 64, "nt", 1), 1e-18);
}

TEST(ProfileTables, GemmCellsNotMeasuredTakeTheNearestRate) {
  // A sweep capped by FLOPs: (256, 256, 256) missing, the others at 1e9.
  std::vector<GemmPoint> pts;
  for (int64_t m : {64, 256}) {
    for (int64_t n : {64, 256}) {
      for (int64_t k : {64, 256}) {
        if (m == 256 && n == 256 && k == 256) continue;
        pts.push_back({1, "any", m, n, k, 2.0 * m * n * k / 1e9, 0});
      }
    }
  }
  const GemmTable t(pts);
  EXPECT_NEAR(t.time_s(256, 256, 256, "any", 1), 2.0 * 256 * 256 * 256 / 1e9, 1e-12);
}

// A sweep measured per layout (the CUDA micro's GEMM CSV: the 1B GPT's nt
// forward, tn weight-gradient and nn shapes) read by a caller that knows no
// layout (the GPU model asks for "any"): every measured shape comes back as
// measured, whatever its layout; a shape two layouts measured gives the mean
// log rate. Before, "any" fell back to the first layout's grid alone ("nn"),
// so the nt and tn points were never read.
TEST(ProfileTables, GemmAnyLayoutReadsEveryLayoutsPoints) {
  const std::vector<GemmPoint> pts = {{1, "nn", 4096, 4096, 4096, 2.63e-4, 0},
                                      {1, "nt", 8192, 8192, 2048, 4.55e-4, 0},
                                      {1, "nt", 8192, 2048, 8192, 5.46e-4, 0},
                                      {1, "tn", 2048, 8192, 8192, 5.45e-4, 0},
                                      {1, "nn", 8192, 8192, 8192, 1.63e-3, 0},
                                      {1, "tn", 8192, 8192, 8192, 1.60e-3, 0}};
  const GemmTable t(pts);
  EXPECT_NEAR(t.time_s(8192, 8192, 2048, "any", 1), 4.55e-4, 1e-12);
  EXPECT_NEAR(t.time_s(8192, 2048, 8192, "any", 1), 5.46e-4, 1e-12);
  EXPECT_NEAR(t.time_s(2048, 8192, 8192, "any", 1), 5.45e-4, 1e-12);
  EXPECT_NEAR(t.time_s(4096, 4096, 4096, "any", 1), 2.63e-4, 1e-12);
  EXPECT_NEAR(t.time_s(8192, 8192, 8192, "any", 1), std::sqrt(1.63e-3 * 1.60e-3), 1e-12);
  // A layout asked for by name still reads its own points only.
  EXPECT_NEAR(t.time_s(8192, 8192, 8192, "nn", 1), 1.63e-3, 1e-12);
  EXPECT_NEAR(t.time_s(8192, 8192, 8192, "tn", 1), 1.60e-3, 1e-12);
}

TEST(ProfileTables, AttentionWindowSavesOnlyTheMaskedSoftmaxWork) {
  // Full causal at seq 256: 100 us; window 32: 60 us -> 40 us saved over the keys it drops.
  const AttentionTable t({{1, 256, 64, 0, false, 100e-6, 0}, {1, 256, 64, 32, false, 60e-6, 0},
                          {1, 256, 64, 0, true, 200e-6, 0}});
  EXPECT_NEAR(t.time_s(256, 64, 0, false, 1), 100e-6, 1e-15);
  EXPECT_NEAR(t.time_s(256, 64, 32, false, 1), 60e-6, 1e-12);
  const double half = t.time_s(256, 64, 96, false, 1);
  EXPECT_GT(half, 60e-6);
  EXPECT_LT(half, 100e-6);
  // No windowed backward measured: the window does not change it.
  EXPECT_NEAR(t.time_s(256, 64, 32, true, 1), 200e-6, 1e-15);
  // Longer sequences than measured scale like seq^2.
  EXPECT_NEAR(t.time_s(512, 64, 0, false, 1), 400e-6, 1e-12);
}

TEST(ProfileTables, KernelsInterpolateLogLogAndExtrapolateByRate) {
  const KernelTable t({{1, "gelu", false, 1000, 1e-6, 0}, {1, "gelu", false, 100000, 50e-6, 0},
                       {2, "gelu", false, 1000, 2e-6, 0}});
  EXPECT_DOUBLE_EQ(*t.time_s("gelu", false, 1000, 1), 1e-6);
  EXPECT_DOUBLE_EQ(*t.time_s("gelu", false, 10, 1), 1e-6);            // launch-bound below
  EXPECT_NEAR(*t.time_s("gelu", false, 1e6, 1), 500e-6, 1e-12);       // rate-bound above
  EXPECT_NEAR(*t.time_s("gelu", false, 10000, 1), std::sqrt(1e-6 * 50e-6), 1e-12);
  EXPECT_DOUBLE_EQ(*t.time_s("gelu", false, 1000, 2), 2e-6);          // two busy ranks
  EXPECT_DOUBLE_EQ(*t.time_s("gelu", false, 1000, 4), 2e-6);          // nearest measured below
  EXPECT_FALSE(t.time_s("swiglu", false, 1000, 1).has_value());
}

TEST(ProfileTables, CollectivesFromPointsCurvesAndParts) {
  const CollectiveTable t(
      {{"reduce_scatter", "intra", 2, 1e6, 100e-6, 0}, {"all_gather", "intra", 2, 1e6, 80e-6, 0},
       {"sendrecv", "intra", 2, 1e6, 70e-6, 0}},
      {{"all_reduce", "inter", 16, "LL", 20, 2}, {"all_reduce", "inter", 16, "Simple", 60, 20}});
  EXPECT_DOUBLE_EQ(*t.time_s("reduce_scatter", "intra", 2, 1e6), 100e-6);
  // All-reduce = reduce-scatter + all-gather when not measured.
  EXPECT_DOUBLE_EQ(*t.time_s("all_reduce", "intra", 2, 1e6), 180e-6);
  // Four ranks: the bandwidth term scales with (n-1)/n.
  EXPECT_NEAR(*t.time_s("reduce_scatter", "intra", 4, 1e6), 100e-6 * 0.75 / 0.5, 1e-12);
  // Curves: NCCL picks the faster protocol.
  const double small = *t.time_s("all_reduce", "inter", 16, 1e3);
  const double big = *t.time_s("all_reduce", "inter", 16, 1e9);
  EXPECT_NEAR(small, 20e-6 + 1e3 * busbw_factor("all_reduce", 16) / 2e9, 1e-12);
  EXPECT_NEAR(big, 60e-6 + 1e9 * busbw_factor("all_reduce", 16) / 20e9, 1e-9);
  EXPECT_FALSE(t.time_s("all_gather", "inter", 16, 1e6).has_value());
}

TEST(ProfileScenario, HardwareProfileLoadsAFileRelativeToTheScenario) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "megascale_profile_test";
  std::filesystem::create_directories(dir / "profiles");
  {
    std::ofstream(dir / "profiles" / "mine.toml") << minimal_gpu_profile();
  }
  std::string text = valid_scenario_text();
  text.replace(text.find("[hardware]"), 10, "[hardware]\nprofile = \"profiles/mine.toml\"");
  const Scenario s = parse_scenario(text, (dir / "job.toml").string());
  EXPECT_EQ(hardware_profile(s).name, "TEST-GPU");
  EXPECT_EQ(hardware_profile(s).sm_count, 8);
  // From --set, relative to the current directory.
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  const Scenario o = parse_scenario(valid_scenario_text(), "elsewhere/job.toml", {"hardware.profile=profiles/mine.toml"});
  std::filesystem::current_path(cwd);
  EXPECT_EQ(hardware_profile(o).name, "TEST-GPU");
  // A missing file is named at the scenario's key.
  try {
    parse_scenario(valid_scenario_text(), "job.toml", {"hardware.profile=/nonexistent/p.toml"});
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key(), "hardware.profile");
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos);
  }
  // A broken profile is named at its own file and line.
  {
    std::ofstream(dir / "profiles" / "broken.toml") << minimal_gpu_profile("bogus = 1\n");
  }
  try {
    parse_scenario(valid_scenario_text(), (dir / "job.toml").string(), {"hardware.profile=" + (dir / "profiles" / "broken.toml").string()});
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_NE(e.file().find("broken.toml"), std::string::npos);
    EXPECT_EQ(e.key(), "values.bogus");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace megascale::model
