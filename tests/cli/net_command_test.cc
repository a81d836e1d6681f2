// tests/cli/net_command_test.cc: integration tests of `megascale net ...`
// (cli/net_command.cc), running the real binary.
//
// Each test runs MEGASCALE_BINARY in a child process whose working directory is
// the source tree, capturing stdout, stderr and the exit status (the helper is a
// copy of the one in tests/cli/cli_test.cc), and checks: the JSON keys of each
// subcommand (collective: time_s, algbw_gbs, busbw_gbs, steps, bottleneck; ecmp:
// mean_paths_used_fraction, collective_efficiency, measured and theory; incast:
// queue, throughput, PFC pauses and the series), the numbers that REFERENCE.md
// pins (8 x A100 ~230 GB/s busbw, ~24 GB/s per 200G NIC, ECMP 0.39 for 8 flows
// on 8 paths), the SVG plot, --scenario, and exit code 2 with a clear message
// for bad options, scenario errors and fabrics that cannot be built.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_megascale.h"

namespace {

namespace fs = std::filesystem;

using namespace megascale::cli_testing;
const std::string kSmall = kSourceDir + "/scenarios/example-small.toml";


using Json = nlohmann::ordered_json;

Json parsed(const std::string& out) {
  Json j = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << out;
  return j;
}

// The first value named `key` in document order (depth first); nullptr if none.
const Json* find_key(const Json& j, const std::string& key) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == key) return &v;
      if (const Json* inner = find_key(v, key)) return inner;
    }
  } else if (j.is_array()) {
    for (const Json& v : j)
      if (const Json* inner = find_key(v, key)) return inner;
  }
  return nullptr;
}

bool has_key(const std::string& json, const std::string& key) {
  const Json j = parsed(json);
  return find_key(j, key) != nullptr;
}

// The first number named `key` in the JSON text; NaN when absent or not a number.
double number_after(const std::string& json, const std::string& key) {
  const Json j = parsed(json);
  const Json* v = find_key(j, key);
  return v != nullptr && v->is_number() ? v->get<double>() : std::nan("");
}

// One JSON object on stdout: starts with '{', ends with "}\n", nothing else.
void expect_one_object(const RunResult& r) {
  ASSERT_FALSE(r.out.empty()) << dump(r);
  EXPECT_EQ(r.out.front(), '{') << dump(r);
  EXPECT_EQ(r.out.substr(r.out.size() - 2), "}\n") << dump(r);
}

class NetCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path() / "megascale-net-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  fs::path dir_;
};

std::string read_file(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST_F(NetCommandTest, CollectiveJsonIntraNode) {
  const RunResult r = run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  expect_one_object(r);
  for (const char* key : {"time_s", "algbw_gbs", "busbw_gbs", "steps", "bottleneck", "congestion_control", "phases",
                          "latency_s", "bandwidth_s", "fabric"}) {
    EXPECT_TRUE(has_key(r.out, key)) << key << "\n" << dump(r);
  }
  EXPECT_EQ(number_after(r.out, "bytes"), 1073741824.0);
  EXPECT_EQ(number_after(r.out, "steps"), 14);
  // REFERENCE.md: ~230 GB/s NCCL busbw on 8 x A100 NVLink.
  EXPECT_NEAR(number_after(r.out, "busbw_gbs"), 230.0, 0.05 * 230.0) << r.out;
  const double algbw = number_after(r.out, "algbw_gbs");
  EXPECT_NEAR(number_after(r.out, "busbw_gbs"), algbw * 2 * 7 / 8, 1e-6 * algbw);
  EXPECT_NEAR(number_after(r.out, "algbw_gbs"), 1073741824.0 / number_after(r.out, "time_s") / 1e9, 1e-6 * algbw);
  EXPECT_TRUE(r.err.empty()) << r.err;
  // --profile alone: the fabric model times that profile's GPU (it timed the
  // default A100 beside an H100's measurements).
  const RunResult h100 = run_megascale(
      {"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--profile", "H100-SXM5-80GB", "--json"});
  ASSERT_EQ(h100.exit_code, 0) << dump(h100);
  EXPECT_NE(h100.out.find("\"gpu\":\"H100-SXM5-80GB\""), std::string::npos) << h100.out;
}

TEST_F(NetCommandTest, CollectivePerNicAndText) {
  const RunResult j = run_megascale({"net", "collective", "--op", "allgather", "--gpus", "16", "--ranks-per-server",
                                     "1", "--bytes", "1GiB", "--json"});
  ASSERT_EQ(j.exit_code, 0) << dump(j);
  EXPECT_NEAR(number_after(j.out, "busbw_gbs"), 24.0, 0.03 * 24.0) << j.out;  // one 200G NIC
  EXPECT_EQ(number_after(j.out, "servers_per_group"), 16);
  // H100 profile: 400G NDR NICs behind PCIe 5.0: REFERENCE.md 46-49 GB/s per NIC.
  const RunResult h = run_megascale({"net", "collective", "--op", "allgather", "--gpus", "16", "--ranks-per-server",
                                     "1", "--bytes", "1GiB", "--gpu", "H100-SXM5-80GB", "--json"});
  ASSERT_EQ(h.exit_code, 0) << dump(h);
  EXPECT_GT(number_after(h.out, "busbw_gbs"), 46.0) << h.out;
  EXPECT_LT(number_after(h.out, "busbw_gbs"), 49.0) << h.out;

  // GB200 NVL72: the profile's server is the 72-GPU NVLink domain (72 NICs); on
  // the default 8-GPU servers it keeps one 400G NIC per GPU (it was refused:
  // "nics_per_server: must divide gpus_per_server (8), got 72").
  const RunResult gb = run_megascale({"net", "collective", "--op", "allgather", "--gpus", "16", "--ranks-per-server",
                                      "1", "--bytes", "1GiB", "--gpu", "GB200-NVL72-186GB", "--json"});
  ASSERT_EQ(gb.exit_code, 0) << dump(gb);
  EXPECT_GT(number_after(gb.out, "busbw_gbs"), 40.0) << gb.out;  // one 400G NIC (50 GB/s line rate)
  EXPECT_LT(number_after(gb.out, "busbw_gbs"), 50.0) << gb.out;

  const RunResult t = run_megascale({"net", "collective", "--op", "sendrecv", "--gpus", "2", "--ranks-per-server",
                                     "1", "--bytes", "256M"});
  ASSERT_EQ(t.exit_code, 0) << dump(t);
  for (const char* word : {"time", "algbw", "busbw", "steps", "bottleneck", "congestion"}) {
    EXPECT_NE(t.out.find(word), std::string::npos) << word << "\n" << dump(t);
  }
  EXPECT_EQ(t.out.find('{'), std::string::npos);  // text, not JSON
}

TEST_F(NetCommandTest, CollectiveAlgorithmsGroupsAndScenario) {
  for (const char* algo : {"ring", "tree", "hierarchical"}) {
    const RunResult r = run_megascale(
        {"net", "collective", "--op", "allreduce", "--gpus", "64", "--bytes", "256M", "--algo", algo, "--json"});
    ASSERT_EQ(r.exit_code, 0) << algo << "\n" << dump(r);
    EXPECT_EQ(parsed(r.out)["algorithm"], algo) << r.out;
    EXPECT_GT(number_after(r.out, "busbw_gbs"), 20.0) << r.out;
  }
  // 64 DP groups of 192 ranks on 12,288 GPUs, 4 QPs: one step pattern solved.
  const RunResult dp = run_megascale({"net", "collective", "--op", "allgather", "--gpus", "192", "--groups", "64",
                                      "--ranks-per-server", "1", "--bytes", "64M", "--qps", "4", "--proto", "Simple", "--json"});
  ASSERT_EQ(dp.exit_code, 0) << dump(dp);
  EXPECT_EQ(number_after(dp.out, "steps"), 191);
  EXPECT_EQ(number_after(dp.out, "step_solves"), 1);
  EXPECT_EQ(number_after(dp.out, "qps_per_connection"), 4);
  EXPECT_EQ(number_after(dp.out, "flows_per_step"), 4 * 12288);
  // The scenario's fabric: example-small has 16 GPUs.
  const RunResult sc = run_megascale(
      {"net", "collective", "--op", "allreduce", "--gpus", "16", "--bytes", "64M", "--scenario", kSmall, "--json"});
  ASSERT_EQ(sc.exit_code, 0) << dump(sc);
  EXPECT_EQ(parsed(sc.out)["fabric"]["gpus"], 16);
}

TEST_F(NetCommandTest, CollectiveScatteredPlacementShowsEcmpCollisions) {
  // 8 DP groups of 128 ranks (one per rail) on 1,024 GPUs: packed rings stay
  // under their ToR set (NIC-bound); scattered rings cross the aggregation tier,
  // where ECMP collisions slow them, and more QPs per connection help.
  auto busbw = [](const std::string& placement, const std::string& qps) {
    const RunResult r = run_megascale({"net", "collective", "--op", "allgather", "--gpus", "128", "--groups", "8",
                                       "--ranks-per-server", "1", "--bytes", "1G", "--placement", placement, "--qps",
                                       qps, "--json"});
    EXPECT_EQ(r.exit_code, 0) << dump(r);
    return number_after(r.out, "busbw_gbs");
  };
  const double packed = busbw("packed", "1");
  const double scattered1 = busbw("scattered", "1");
  const double scattered16 = busbw("scattered", "16");
  // NIC-bound: 24 GB/s less the latency of 127 network steps (~3.3 ms of ~48 ms).
  EXPECT_NEAR(packed, 24.0, 0.1 * 24.0);
  EXPECT_LT(scattered1, 0.75 * packed);
  EXPECT_GT(scattered16, 1.2 * scattered1);
}

TEST_F(NetCommandTest, EcmpJson) {
  const RunResult r =
      run_megascale({"net", "ecmp", "--paths", "8", "--flows", "8", "--qps", "1", "--trials", "2000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  expect_one_object(r);
  for (const char* key : {"mean_paths_used_fraction", "collective_efficiency", "measured", "theory"}) {
    EXPECT_TRUE(has_key(r.out, key)) << key << "\n" << dump(r);
  }
  // REFERENCE.md: k = n = 8: paths used 1 - (7/8)^8 = 0.656, efficiency ~0.39.
  EXPECT_NEAR(number_after(r.out, "mean_paths_used_fraction"), 0.656, 0.02);
  EXPECT_NEAR(number_after(r.out, "collective_efficiency"), 0.39, 0.03);
  EXPECT_NEAR(parsed(r.out)["theory"]["collective_efficiency"].get<double>(), 0.385, 0.01);

  const RunResult text = run_megascale({"net", "ecmp", "--paths", "8", "--flows", "8", "--qps", "16"});
  ASSERT_EQ(text.exit_code, 0) << dump(text);
  EXPECT_NE(text.out.find("measured"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("theory"), std::string::npos) << text.out;
}

TEST_F(NetCommandTest, IncastJsonAndPlot) {
  const std::string svg = path("incast.svg");
  const RunResult r =
      run_megascale({"net", "incast", "--senders", "8", "--cc", "hybrid", "--plot", svg, "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  expect_one_object(r);
  for (const char* key : {"senders", "cc", "steady_mean_queue_bytes", "max_queue_bytes", "throughput_fraction",
                          "pause_fraction", "series", "t_us", "queue_bytes", "throughput_gbps",
                          "paused_senders_fraction", "plot"}) {
    EXPECT_TRUE(has_key(r.out, key)) << key << "\n" << dump(r);
  }
  EXPECT_EQ(number_after(r.out, "senders"), 8);
  EXPECT_GT(number_after(r.out, "throughput_fraction"), 0.5);
  const std::string plot = read_file(svg);
  EXPECT_EQ(plot.rfind("<svg", 0), 0u) << plot.substr(0, 200);
  EXPECT_NE(plot.find("</svg>"), std::string::npos);

  const RunResult text = run_megascale({"net", "incast", "--senders", "4", "--cc", "dcqcn"});
  ASSERT_EQ(text.exit_code, 0) << dump(text);
  for (const char* word : {"queue", "throughput", "PFC", "series"}) {
    EXPECT_NE(text.out.find(word), std::string::npos) << word << "\n" << dump(text);
  }
}

TEST_F(NetCommandTest, BadOptionsExitTwoWithClearMessages) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
    bool usage;  // the net usage text follows
  };
  const std::vector<Case> cases = {
      {{"net"}, "missing subcommand", true},
      {{"net", "frobnicate"}, "unknown subcommand 'frobnicate'", true},
      {{"net", "collective", "--op", "broadcast", "--gpus", "8", "--bytes", "1G"}, "--op must be", true},
      {{"net", "collective", "--op", "allreduce", "--bytes", "1G"}, "--gpus is required", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "1", "--bytes", "1G"}, "--gpus expects an integer", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "12XB"}, "unknown unit 'XB'", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "-5"}, "positive size", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1.5"},
       "'1.5' is 1.5 bytes: a size is a whole number of bytes", true},
      {{"net", "collective", "--op", "allgather", "--gpus", "8", "--bytes", "1G", "--algo", "tree"},
       "allreduce only", true},
      {{"net", "collective", "--op", "sendrecv", "--gpus", "8", "--bytes", "1G", "--algo", "nvls"},
       "sendrecv is point-to-point: NCCL runs it with no collective algorithm", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--algo", "bogus"},
       "--algo: must be", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--ranks-per-server", "3"},
       "ranks per server (3) must divide", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--gpu", "V100"},
       "unknown GPU profile 'V100'", false},
      {{"net", "collective", "--op", "allreduce", "--gpus", "262144", "--bytes", "1G"},
       "cannot build the fabric: parameter gpus", false},
      {{"net", "collective", "--op", "allreduce", "--gpus", "32", "--bytes", "1G", "--scenario", kSmall},
       "the scenario's cluster has 16", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--frobnicate"},
       "unknown option '--frobnicate'", true},
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--placement", "random"},
       "--placement must be packed or scattered", true},
      {{"net", "ecmp", "--paths", "8", "--flows", "8"}, "--qps is required", true},
      {{"net", "ecmp", "--paths", "0", "--flows", "8", "--qps", "1"}, "--paths expects an integer in 1..256", true},
      {{"net", "incast", "--senders", "4", "--cc", "reno"}, "--cc: must be", true},
      // A profile beside a fabric model of another GPU.
      {{"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--gpu", "A100-SXM4-80GB",
        "--profile", "H100-SXM5-80GB"},
       "--profile H100-SXM5-80GB (H100-SXM5-80GB) is the H100's, but the fabric model runs A100-SXM4-80GB (--gpu)",
       true},
      // Shorter than two base RTTs: no feedback, no steady sample (fairness 0 / 0).
      {{"net", "incast", "--senders", "8", "--cc", "swift", "--duration-us", "1"},
       "--duration-us expects microseconds from 20 (two base RTTs and two 10-us samples)", true},
      {{"net", "incast", "--senders", "4", "--cc", "dcqcn", "--plot", "/nonexistent-dir/x.svg"}, "cannot write",
       false},
  };
  for (const Case& c : cases) {
    const RunResult r = run_megascale(c.args);
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << dump(r);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << joined << "\n" << dump(r);
    EXPECT_EQ(r.err.find("usage: megascale net") != std::string::npos, c.usage) << joined << "\n" << dump(r);
    EXPECT_TRUE(r.out.empty()) << joined << "\n" << dump(r);
  }
}

TEST_F(NetCommandTest, ScenarioAndFabricErrorsPassThrough) {
  // A scenario error names file, line, key and reason.
  std::string text = read_file(kSmall);
  const std::string bad_scenario = write("bad.toml", text + "\n[network]\nswitch_radix = \"wide\"\n");
  const RunResult s =
      run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--scenario", bad_scenario});
  EXPECT_EQ(s.exit_code, 2) << dump(s);
  EXPECT_NE(s.err.find("bad.toml:"), std::string::npos) << dump(s);
  EXPECT_NE(s.err.find("switch_radix"), std::string::npos) << dump(s);

  // A fabric that cannot be built names the FabricSpec parameter.
  const size_t at = text.find("nic_gbps = 200");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("nic_gbps = 200").size(), "nic_gbps = 800");
  const std::string bad_fabric = write("fabric.toml", text);
  const RunResult f =
      run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "1G", "--scenario", bad_fabric});
  EXPECT_EQ(f.exit_code, 2) << dump(f);
  EXPECT_NE(f.err.find("parameter nic_gbps"), std::string::npos) << dump(f);
}

TEST_F(NetCommandTest, HelpExitsZero) {
  const RunResult r = run_megascale({"net", "--help"});
  EXPECT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("collective"), std::string::npos);
  EXPECT_NE(r.out.find("ecmp"), std::string::npos);
  EXPECT_NE(r.out.find("incast"), std::string::npos);
}

}  // namespace

namespace {

// NCCL's tuner (network/collective_tuner.h): the choice is printed and in JSON,
// --algo / --proto restrict it, impossible restrictions are refused by name.
TEST(NetTuner, ChoiceIsPrintedAndOverridable) {
  const RunResult small = run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "8"});
  ASSERT_EQ(small.exit_code, 0) << dump(small);
  EXPECT_NE(small.out.find("allreduce (ring, LL)"), std::string::npos) << small.out;
  EXPECT_NE(small.out.find("NCCL tuner  chose ring/LL"), std::string::npos) << small.out;
  EXPECT_NE(small.out.find("nvls/Simple        off: no NVLink SHARP"), std::string::npos) << small.out;
  const RunResult forced = run_megascale(
      {"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "8", "--proto", "Simple", "--json"});
  ASSERT_EQ(forced.exit_code, 0) << dump(forced);
  EXPECT_EQ(parsed(forced.out)["protocol"], "Simple") << forced.out;
  // Simple's base latency (56 us on 8 GPUs) against LL's 15 us.
  EXPECT_GT(number_after(forced.out, "time_s"), 50e-6) << forced.out;
  const RunResult nvls = run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "8G",
                                        "--gpu", "H100-SXM5-80GB", "--json"});
  ASSERT_EQ(nvls.exit_code, 0) << dump(nvls);
  EXPECT_EQ(parsed(nvls.out)["algorithm"], "nvls") << nvls.out;
  const RunResult bad = run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "8G",
                                       "--algo", "nvls"});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("NVLink SHARP"), std::string::npos) << dump(bad);
  const RunResult proto = run_megascale({"net", "collective", "--op", "allreduce", "--gpus", "8", "--bytes", "8",
                                         "--proto", "fast"});
  EXPECT_EQ(proto.exit_code, 2) << dump(proto);
  EXPECT_NE(proto.err.find("--proto: must be auto, LL, LL128 or Simple"), std::string::npos) << dump(proto);
}

// `calibrate net-check` on the published nccl-tests fixtures: every scored run
// is predicted, the exit code agrees with the JSON verdict, and a malformed
// manifest is refused at its line and key.
TEST(NetCheck, PublishedFixturesAndBadManifest) {
  const std::string manifest = kSourceDir + "/tests/calibrate/fixtures/nccl-tests/systems.toml";
  const RunResult r = run_megascale({"calibrate", "net-check", "--manifest", manifest, "--json"});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << dump(r);
  const bool pass = parsed(r.out)["pass"] == true;
  EXPECT_EQ(r.exit_code, pass ? 0 : 1) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("all_reduce_perf_a100_16gpu_2node_oke.txt"), std::string::npos);
  EXPECT_NE(r.out.find("\"choice\":\"tree/LL\""), std::string::npos);  // small all-reduce across nodes
  EXPECT_NE(r.out.find("its times hold a cost"), std::string::npos);  // the B200 GKE run
  // Exactly one size of the fixtures is disturbed (out of place > 2 x in place):
  // the DGX H100 sample's 32 B, compared at its in-place time.
  int disturbed = 0;
  const Json report = parsed(r.out);
  for (const Json& run : report["runs"]) {
    if (!run.contains("points")) continue;
    for (const Json& pt : run["points"]) {
      if (!pt["disturbed"].get<bool>()) {
        EXPECT_EQ(pt["measured_us"].get<double>(), pt["out_of_place_us"].get<double>());
        continue;
      }
      ++disturbed;
      EXPECT_NE(run["file"].get<std::string>().find("dgxc"), std::string::npos);
      EXPECT_EQ(pt["bytes"].get<double>(), 32);
      EXPECT_DOUBLE_EQ(pt["measured_us"].get<double>(), 13.52);
      EXPECT_DOUBLE_EQ(pt["out_of_place_us"].get<double>(), 68.14);
    }
  }
  EXPECT_EQ(disturbed, 1);

  const fs::path dir = fs::temp_directory_path() / ("megascale-netcheck-" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "m.toml") << "[[run]]\nfile = \"" << kSourceDir
                                  << "/tests/calibrate/fixtures/nccl-tests/all_reduce_perf_h100_8gpu_1node.txt\"\n"
                                     "gpu = \"H100-SXM5-80GB\"\nnics_per_node = 0\nnic_gbps = 400\n";
  }
  const RunResult bad = run_megascale({"calibrate", "net-check", "--manifest", (dir / "m.toml").string()});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("m.toml:4"), std::string::npos) << dump(bad);
  EXPECT_NE(bad.err.find("run[0].nics_per_node"), std::string::npos) << dump(bad);
  // NICs that do not divide the server's 8 GPUs: at the key, not as a fabric
  // error naming the nccl-tests file.
  {
    std::ofstream(dir / "nics.toml") << "[[run]]\nfile = \"" + kSourceDir +
                                            "/tests/calibrate/fixtures/nccl-tests/all_reduce_perf_h100_8gpu_1node.txt\"\n"
                                            "gpu = \"H100-SXM5-80GB\"\nnics_per_node = 3\nnic_gbps = 400\n";
  }
  const RunResult nics = run_megascale({"calibrate", "net-check", "--manifest", (dir / "nics.toml").string()});
  EXPECT_EQ(nics.exit_code, 2) << dump(nics);
  EXPECT_NE(nics.err.find("nics.toml:4:17: run[0].nics_per_node: must divide the 8 GPUs of a server"), std::string::npos)
      << dump(nics);
  // A file listed twice would weigh twice: refused at the second entry's key.
  {
    const std::string run = "[[run]]\nfile = \"" + kSourceDir +
                            "/tests/calibrate/fixtures/nccl-tests/all_reduce_perf_h100_8gpu_1node.txt\"\n"
                            "gpu = \"H100-SXM5-80GB\"\nnics_per_node = 8\nnic_gbps = 400\n";
    std::ofstream(dir / "twice.toml") << run << run;
  }
  const RunResult twice = run_megascale({"calibrate", "net-check", "--manifest", (dir / "twice.toml").string()});
  EXPECT_EQ(twice.exit_code, 2) << dump(twice);
  EXPECT_NE(twice.err.find("twice.toml:7"), std::string::npos) << dump(twice);
  EXPECT_NE(twice.err.find("run[1].file: run[0] scores this file already"), std::string::npos) << dump(twice);
  const std::string h100 = kSourceDir + "/tests/calibrate/fixtures/nccl-tests/all_reduce_perf_h100_8gpu_1node.txt";
  const RunResult twice_cli =
      run_megascale({"calibrate", "net-check", h100, kSourceDir + "/tests/../tests/calibrate/fixtures/nccl-tests/"
                                                     "all_reduce_perf_h100_8gpu_1node.txt", "--gpu", "H100-SXM5-80GB"});
  EXPECT_EQ(twice_cli.exit_code, 2) << dump(twice_cli);
  EXPECT_NE(twice_cli.err.find("is given twice (as " + h100 + ")"), std::string::npos) << dump(twice_cli);
  // One file with the machine on the command line.
  const RunResult one = run_megascale({"calibrate", "net-check",
                                       kSourceDir + "/tests/calibrate/fixtures/nccl-tests/all_reduce_perf_h100_8gpu_1node.txt",
                                       "--gpu", "H100-SXM5-80GB", "--points"});
  EXPECT_TRUE(one.exit_code == 0 || one.exit_code == 1) << dump(one);
  EXPECT_NE(one.out.find("| 16 GiB |"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("nvls/Simple"), std::string::npos) << one.out;
  // Predicted for another GPU model than the one that ran it: refused.
  const RunResult other = run_megascale({"calibrate", "net-check",
                                         kSourceDir + "/tests/calibrate/fixtures/nccl-tests/all_reduce_perf_h100_8gpu_1node.txt",
                                         "--gpu", "A100-SXM4-80GB"});
  EXPECT_EQ(other.exit_code, 2) << dump(other);
  EXPECT_NE(other.err.find("measured on NVIDIA H100 80GB HBM3 (H100), but it would be predicted for A100-SXM4-80GB (A100)"),
            std::string::npos)
      << dump(other);
  fs::remove_all(dir);
}

// A manifest entry's NCCL settings (as its source states them): nccl_algo /
// nccl_proto restrict the tuner as NCCL_ALGO / NCCL_PROTO would, the command
// line's --algo replaces them, nccl_version is reported; a name NCCL does not
// have is refused at its key.
TEST(NetCheck, ManifestNcclSettings) {
  const fs::path dir = fs::temp_directory_path() / ("megascale-netcheck-nccl-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string file =
      kSourceDir + "/tests/calibrate/fixtures/nccl-tests/all_reduce_perf_a100_16gpu_2node_oke.txt";
  auto manifest = [&](const std::string& extra) {
    std::ofstream(dir / "m.toml") << "[[run]]\nfile = \"" << file
                                  << "\"\ngpu = \"A100-SXM4-40GB\"\nnics_per_node = 8\nnic_gbps = 200\n" << extra;
    return (dir / "m.toml").string();
  };
  auto choices = [](const std::string& json) {
    std::vector<std::string> out;
    const Json report = parsed(json);
    for (const Json& pt : report["runs"][0]["points"]) out.push_back(pt["choice"].get<std::string>());
    return out;
  };
  const std::string ring_manifest = manifest("nccl_algo = \"RING\"\nnccl_version = \"2.19.3\"\n");
  const RunResult forced = run_megascale({"calibrate", "net-check", "--manifest", ring_manifest, "--json"});
  ASSERT_TRUE(forced.exit_code == 0 || forced.exit_code == 1) << dump(forced);
  EXPECT_EQ(parsed(forced.out)["runs"][0]["nccl_algo"], "ring") << forced.out.substr(0, 600);
  EXPECT_EQ(parsed(forced.out)["runs"][0]["nccl_version"], "2.19.3");
  const std::vector<std::string> ring = choices(forced.out);
  ASSERT_EQ(ring.size(), 31u);
  for (const std::string& c : ring) EXPECT_EQ(c.rfind("ring/", 0), 0u) << c;
  // The markdown names the source's settings beside the transport.
  const RunResult md = run_megascale({"calibrate", "net-check", "--manifest", (dir / "m.toml").string()});
  EXPECT_NE(md.out.find("(source: NCCL 2.19.3, NCCL_ALGO=ring)"), std::string::npos) << md.out.substr(0, 1500);
  // --algo on the command line replaces the manifest's.
  const RunResult tree = run_megascale(
      {"calibrate", "net-check", "--manifest", (dir / "m.toml").string(), "--algo", "tree", "--json"});
  ASSERT_TRUE(tree.exit_code == 0 || tree.exit_code == 1) << dump(tree);
  for (const std::string& c : choices(tree.out)) EXPECT_EQ(c.rfind("tree/", 0), 0u) << c;
  // A protocol alone.
  const RunResult ll = run_megascale(
      {"calibrate", "net-check", "--manifest", manifest("nccl_proto = \"ll\"\n"), "--json"});
  ASSERT_TRUE(ll.exit_code == 0 || ll.exit_code == 1) << dump(ll);
  for (const std::string& c : choices(ll.out)) EXPECT_EQ(c.substr(c.find('/')), "/LL") << c;
  // Names NCCL does not have.
  const RunResult bad = run_megascale({"calibrate", "net-check", "--manifest", manifest("nccl_algo = \"fast\"\n")});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("run[0].nccl_algo"), std::string::npos) << dump(bad);
  const RunResult hier =
      run_megascale({"calibrate", "net-check", "--manifest", manifest("nccl_algo = \"hierarchical\"\n")});
  EXPECT_EQ(hier.exit_code, 2) << dump(hier);
  const RunResult badp = run_megascale({"calibrate", "net-check", "--manifest", manifest("nccl_proto = \"LL64\"\n")});
  EXPECT_EQ(badp.exit_code, 2) << dump(badp);
  EXPECT_NE(badp.err.find("run[0].nccl_proto"), std::string::npos) << dump(badp);
  fs::remove_all(dir);
}

}  // namespace
