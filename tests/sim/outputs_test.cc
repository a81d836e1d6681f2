// tests/sim/outputs_test.cc: the trace (engine schema, Chrome JSON + CSV) and
// the heat-map (SVG) of an event-level run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/text_file.h"
#include "model/scenario.h"
#include "model/schedule.h"
#include "network/topology.h"
#include "sim/heatmap.h"
#include "sim/job_sim.h"
#include "sim/trace_writer.h"
#include "tests/svg_reader.h"

namespace megascale::sim {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(line);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

class SimOutputs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("megascale-sim-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // 175B, TP 8, PP 4, VPP 2, DP 4, 8 micro-batches: 128 GPUs, 16 machines.
  static model::Scenario scenario() {
    model::Scenario s = model::default_scenario("megatron");
    s.parallel.pp = 4;
    s.parallel.vpp = 2;
    s.parallel.dp = 4;
    s.parallel.global_batch = 32;
    s.cluster.gpus = s.parallel.gpus();
    return s;
  }
  static SimOptions options(const model::Scenario& s) {
    SimOptions o;
    FabricInputs f;
    f.spec = network::megascale_clos(s.cluster.gpus);
    o.fabric = f;
    return o;
  }

  fs::path dir_;
};

TEST_F(SimOutputs, TraceHasTheEngineSchemaAndTheScheduleOrder) {
  const model::Scenario s = scenario();
  SimOptions o = options(s);
  o.trace_step = 0;
  const JobResult r = simulate_job(s, o);
  ASSERT_FALSE(r.trace_events.empty());
  const std::vector<std::string> files = write_trace_files((dir_ / "trace.json").string(), r.trace_events);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], (dir_ / "trace.json").string());
  EXPECT_EQ(files[1], (dir_ / "trace.csv").string());

  // CSV: the engine's header (engine/trace.h) and one line per op.
  std::istringstream csv(read(files[1]));
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  EXPECT_EQ(line, "rank,stream,kind,microbatch,chunk,layer,start_us,end_us,bytes,flops");
  std::map<int, std::string> order;  // rank -> "F0.0 F1.0 ..."
  size_t lines = 0;
  double last_start = -1;
  while (std::getline(csv, line)) {
    const std::vector<std::string> f = split(line, ',');
    ASSERT_EQ(f.size(), 10u) << line;
    ++lines;
    const double start = std::stod(f[6]);
    EXPECT_GE(start, last_start) << "not sorted by start: " << line;
    last_start = start;
    EXPECT_LE(start, std::stod(f[7])) << line;
    if (f[1] != "compute" || (f[2] != "forward" && f[2] != "backward")) continue;
    EXPECT_GT(std::stod(f[9]), 0.0) << "compute event without flops: " << line;
    std::string& o = order[std::stoi(f[0])];
    if (!o.empty()) o += ' ';
    o += (f[2] == "forward" ? "F" : "B") + f[3] + "." + f[4];
  }
  size_t ops = 0;
  for (const model::RankSchedule& rs : r.schedule.ranks) ops += rs.ops.size();
  EXPECT_EQ(lines, ops);  // one replica simulated: every op once
  // Ranks are global GPU ranks: TP 0 of replica 0 of stage r = r * TP * DP.
  ASSERT_EQ(order.size(), 4u);
  for (int pr = 0; pr < 4; ++pr) {
    const int rank = pr * s.parallel.tp * s.parallel.dp;
    ASSERT_TRUE(order.count(rank)) << "rank " << rank;
    EXPECT_EQ(order[rank], model::compute_order(r.schedule.ranks[pr])) << "pipeline rank " << pr;
  }

  // Chrome JSON: metadata naming the lanes, complete events with the schema's args.
  const std::string json = read(files[0]);
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u);
  EXPECT_NE(json.find("\"name\":\"thread_name\""), std::string::npos);
  EXPECT_NE(json.find("\"args\":{\"name\":\"dp_comm\"}"), std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(json.find("\"args\":{\"kind\":\"forward\",\"microbatch\":0,\"chunk\":0,\"layer\":-1"),
            std::string::npos);
  EXPECT_EQ(json.substr(json.size() - 4), "\n]}\n");
}

// Per-layer slices (--trace-layers): for every Forward / Backward op of the
// traced replica, the compute slices lie inside the op, carry the global layer
// numbers of REFERENCE.md's chunk placement, and add up (with the blocking TP
// collectives of the baseline) to the op's whole interval; their FLOPs add up
// to the op's. With tp_overlap the fused collectives run beside the compute.
TEST_F(SimOutputs, LayerSlicesTileEachChunkOpWithItsLayers) {
  for (const char* preset : {"megatron", "megascale"}) {
    SCOPED_TRACE(preset);
    model::Scenario s = scenario();
    model::apply_preset(preset, &s.optimizations);
    SimOptions o = options(s);
    o.trace_step = 0;
    o.trace_layers = true;
    const JobResult r = simulate_job(s, o);
    const int P = s.parallel.pp, V = s.parallel.vpp, L = s.model.layers;
    int ops_checked = 0, overlapped = 0;
    for (const TraceEvent& e : r.trace_events) {
      if (e.rank != 0 && e.rank != 8 * 4 * (P - 1)) continue;  // stage 0 and the last stage, replica 0
      if (e.kind != "forward" && e.kind != "backward") continue;
      const int stage = e.rank / (8 * 4);
      double compute_us = 0, blocking_tp_us = 0, flops = 0;
      std::map<int, int> layers;
      for (const TraceEvent& x : r.trace_events) {
        if (x.rank != e.rank || x.microbatch != e.microbatch || x.chunk != e.chunk) continue;
        if (x.kind == "forward" || x.kind == "backward" || x.kind.find("send") == 0 || x.kind.find("recv") == 0 ||
            x.kind.find("dp_") == 0 || x.kind == "data_load" || x.kind == "optimizer_step")
          continue;
        const bool bwd = x.kind.size() > 4 && x.kind.compare(x.kind.size() - 4, 4, ".bwd") == 0;
        if (bwd != (e.kind == "backward")) continue;
        if (x.stream == model::Stream::kCompute) {
          EXPECT_GE(x.start_us, e.start_us - 1e-6) << x.kind;
          EXPECT_LE(x.end_us, e.end_us + 1e-6) << x.kind;
          compute_us += x.duration_us();
          flops += x.flops;
          if (x.layer >= 0) ++layers[x.layer];
        } else if (!s.optimizations.tp_overlap) {
          blocking_tp_us += x.duration_us();
        } else {
          for (const TraceEvent& y : r.trace_events)
            if (y.rank == x.rank && y.stream == model::Stream::kCompute && y.layer == x.layer &&
                y.start_us < x.end_us - 1e-6 && y.end_us > x.start_us + 1e-6 && y.microbatch == x.microbatch)
              ++overlapped;
        }
      }
      const int per_chunk = L / (P * V);
      ASSERT_EQ(static_cast<int>(layers.size()), per_chunk) << e.kind << " chunk " << e.chunk;
      EXPECT_EQ(layers.begin()->first, e.chunk * L / V + stage * per_chunk);
      EXPECT_NEAR(flops, e.flops, 1e-6 * e.flops);
      if (!s.optimizations.tp_overlap) {
        EXPECT_NEAR(compute_us + blocking_tp_us, e.duration_us(), 1e-6 * e.duration_us());
      } else {
        EXPECT_LE(compute_us, e.duration_us() * (1 + 1e-9));
      }
      if (++ops_checked >= 12) break;
    }
    EXPECT_GE(ops_checked, 12);
    if (s.optimizations.tp_overlap) {
      EXPECT_GT(overlapped, 0);
    }
  }
}

// Under recompute = "selective_op" the re-run slices carry only the re-run
// share of a fused GEMM's FLOPs: with them, a backward op's slices add up to the
// op's FLOPs (the qkv slice read its whole forward when wk alone re-runs).
TEST_F(SimOutputs, ReRunSlicesCarryTheirShareOfTheFlops) {
  model::Scenario s = scenario();
  s.parallel.recompute = model::Recompute::kSelectiveOp;
  SimOptions o = options(s);
  o.trace_step = 0;
  o.trace_layers = true;
  const JobResult r = simulate_job(s, o);
  int checked = 0;
  for (const TraceEvent& e : r.trace_events) {
    if (e.rank != 0 || e.kind != "backward") continue;
    double flops = 0, rerun = 0;
    for (const TraceEvent& x : r.trace_events) {
      if (x.rank != e.rank || x.microbatch != e.microbatch || x.chunk != e.chunk) continue;
      if (x.stream != model::Stream::kCompute || x.layer < 0) continue;
      const auto ends_with = [&](const std::string& tail) {
        return x.kind.size() > tail.size() && x.kind.compare(x.kind.size() - tail.size(), tail.size(), tail) == 0;
      };
      if (ends_with(".recompute")) rerun += x.flops;
      if (ends_with(".recompute") || ends_with(".bwd")) flops += x.flops;
    }
    EXPECT_NEAR(flops, e.flops, 1e-6 * e.flops);
    EXPECT_GT(rerun, 0);
    EXPECT_LT(rerun, 0.25 * flops);  // a part of the forward (1/3 of the backward), not all of it
    if (++checked >= 4) break;
  }
  EXPECT_GE(checked, 4);
}

TEST_F(SimOutputs, NoTraceWhenNotAsked) {
  const model::Scenario s = scenario();
  SimOptions o = options(s);
  o.trace_step = -1;
  EXPECT_TRUE(simulate_job(s, o).trace_events.empty());
}

TEST_F(SimOutputs, HeatmapShowsTheStraggler) {
  const model::Scenario s = scenario();
  SimOptions o = options(s);
  o.steps = 5;
  o.variability.jitter_sigma = 0.005;
  o.variability.stragglers.gpus = {gpu_of(s.parallel, 2, 3, 1)};  // replica 3, stage 1
  o.variability.stragglers.factor = 1.2;
  const JobResult r = simulate_job(s, o);
  const HeatmapInput in = heatmap_input(r);
  ASSERT_EQ(in.rows.size(), 16u);  // DP x PP groups, no merging
  ASSERT_EQ(in.forward.size(), 5u);
  // Rows by stage, then replica: stage 1, replica 3 is row 1*4 + 3, named by what it is.
  const int row = 1 * 4 + 3;
  const int first_gpu = gpu_of(s.parallel, 0, 3, 1);
  const std::string label = "stage 1, DP replica 3 (GPUs " + std::to_string(first_gpu) + "-" +
                            std::to_string(first_gpu + s.parallel.tp - 1) + ")";
  EXPECT_EQ(in.rows[row], label);
  EXPECT_EQ(in.rows[0].rfind("stage 0, DP replica 0 (GPUs 0-", 0), 0u) << in.rows[0];
  for (int k = 0; k < 5; ++k) {
    for (int i = 0; i < 16; ++i) {
      if (i == row) {
        EXPECT_GT(in.forward[k][i].ratio, 1.15);
        EXPECT_GT(in.backward[k][i].ratio, 1.15);
      } else {
        EXPECT_LT(in.forward[k][i].ratio, 1.05);
      }
    }
  }
  const fs::path svg = dir_ / "heat.svg";
  write_heatmap_svg(svg.string(), r);
  const std::string text = read(svg);
  EXPECT_EQ(text.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(text.find("fill=\"#a50000\""), std::string::npos) << "no dark-red (slowest) cell";
  EXPECT_EQ(text.substr(text.size() - 7), "</svg>\n");
  std::string error;
  const std::vector<svg_testing::SvgElement> all = svg_testing::read_svg(text, &error);
  ASSERT_EQ(error, "");
  const std::vector<std::string> texts = svg_testing::texts_of(all);
  auto has_text = [&](const std::string& t) { return std::find(texts.begin(), texts.end(), t) != texts.end(); };
  EXPECT_TRUE(has_text(label));
  EXPECT_TRUE(has_text("% vs its stage's median"));  // the colour scale's unit
  EXPECT_TRUE(has_text("step time (s)"));
  // The step-time bars stand on an axis from 0 s: each bar ends at the "0" tick.
  double zero_y = -1;
  for (const svg_testing::SvgElement& e : all)
    if (e.name == "text" && e.text == "0" && e.has("text-anchor") && e.attrs.at("text-anchor") == "end") zero_y = e.number("y") - 4;
  ASSERT_GT(zero_y, 0) << "no 0 s tick";
  int bars = 0;
  for (const svg_testing::SvgElement& e : svg_testing::elements_named(all, "rect")) {
    if (!e.has("class") || e.attrs.at("class") != "step-time") continue;
    ++bars;
    EXPECT_NEAR(e.number("y") + e.number("height"), zero_y, 0.02);
    EXPECT_GT(e.number("height"), 0.5 * 120);  // 5 similar steps: each bar over half the axis
  }
  EXPECT_EQ(bars, 5);
}

TEST_F(SimOutputs, HeatmapMergesRowsKeepingTheSlowest) {
  // 175B on 12,288 GPUs: 1,536 (replica, stage) groups -> merged rows.
  model::Scenario s = model::default_scenario("megatron");
  SimOptions o;
  o.comm = CommModel::kZero;  // the heat-map needs no fabric
  o.steps = 2;
  o.variability.stragglers.gpus = {gpu_of(s.parallel, 0, 100, 5)};
  o.variability.stragglers.factor = 1.3;
  const JobResult r = simulate_job(s, o);
  const HeatmapInput in = heatmap_input(r);
  EXPECT_LE(static_cast<int>(in.rows.size()), kMaxHeatmapRows);
  int slow_rows = 0;
  for (size_t i = 0; i < in.rows.size(); ++i) slow_rows += in.forward[0][i].ratio > 1.25;
  EXPECT_EQ(slow_rows, 1);
  // Rows merge neighbouring replicas of one stage, never stages: 8 stages x 32 rows.
  EXPECT_EQ(in.rows.size(), 256u);
  EXPECT_EQ(in.rows[5 * 32 + 16], "stage 5, DP replicas 96-101 (slowest)");
  EXPECT_GT(in.forward[0][5 * 32 + 16].ratio, 1.25);  // replica 100's row
  EXPECT_NE(in.rows_note.find("1536 groups in 256 rows"), std::string::npos) << in.rows_note;
  EXPECT_NO_THROW(heatmap_svg(in));
}

TEST_F(SimOutputs, UnwritablePathsAreReported) {
  const std::vector<TraceEvent> none;
  // The path and the system's reason, as every other output (base/text_file.h).
  try {
    write_trace_files("/nonexistent-dir/x.json", none);
    ADD_FAILURE() << "no error";
  } catch (const base::OutputFileError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent-dir/x.json: cannot write (No such file or directory)");
  }
}

}  // namespace
}  // namespace megascale::sim
