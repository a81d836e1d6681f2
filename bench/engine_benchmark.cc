// bench/engine_benchmark.cc: CPU throughput of the engine's training step
// against Eigen's own GEMM on the same shapes (issue 6, "CPU throughput":
// GEMM-bound steps must reach >= 50% of it, so that the engine's timings are
// worth calibrating against).
//
// The model: GPT, 4 layers, hidden 512, 8 heads, seq 256, ffn 2048, vocab 4096,
// GeLU, sequential blocks; one process (TP = PP = DP = 1, the threads backend's
// make_thread_comms(1) as the world), one micro-batch of 4 sequences per step
// (N = T*B = 1024 tokens per GEMM), AdamW. Everything fp32, single-threaded
// (EIGEN_DONT_PARALLELIZE, as every engine rank), built with the project's
// flags — the Eigen reference below is compiled with the same ones.
//
//   BM_EngineTrainingStep    PipelineExecutor::step: forward + backward +
//                            clipping + optimizer, the Schedule IR of one rank.
//                            Counters: step_model_flops (model::
//                            model_flops_per_iteration, the MFU numerator),
//                            step_flops_per_s (that over the step's wall time),
//                            eigen_gemm_flops_per_s (below), ratio_vs_eigen_gemm
//                            (the two divided: the issue's >= 0.5 figure), and
//                            eigen_512_flops_per_s (cpu_gemm_peak_flops, the MFU
//                            denominator per core that engine/trainer.h uses).
//   BM_EigenGemmSameShapes   every GEMM one step runs, with its multiplicity
//                            (per layer: qkv, proj, fc1, fc2 forward; their
//                            dgrad and wgrad; the attention core's Q K^T, P V
//                            per (sample, head) and its four backward products;
//                            the logits forward, dgrad, wgrad), each timed as a
//                            plain Eigen::MatrixXf product C = A * B of that
//                            (M, N, K), best of 3 after a warm-up. Its FLOP total
//                            equals model_flops_per_iteration exactly (checked),
//                            so ratio_vs_eigen_gemm = (Eigen time for the step's
//                            GEMMs) / (step time): the share of the step the
//                            engine spends doing what Eigen would do anyway.
//   BM_EngineStepProfile     one step with an OpObserver timing every kernel;
//                            counters give the share of the step in each kind
//                            of op (GEMM ops, attention core, GeLU, LayerNorm,
//                            cross-entropy, other) — the profile behind the
//                            ratio (perf is not available on these machines).
//
// Run: cmake --build build --target engine_benchmark && ./build/bench/engine_benchmark
// (about 30 s on the 2-core CI machines).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm_threads.h"       // defines: make_thread_comms
#include "engine/data_loader.h"        // defines: Batch
#include "engine/device_cpu.h"         // defines: CpuDevice
#include "engine/layers.h"             // defines: OpObserver, OpEvent
#include "engine/pipeline_executor.h"  // defines: PipelineExecutor, ExecutorOptions
#include "engine/process_groups.h"     // defines: ProcessGroups
#include "engine/trainer.h"            // defines: cpu_gemm_peak_flops
#include "model/op_cost.h"             // defines: model_flops_per_iteration

namespace {

using namespace megascale;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

model::ModelConfig bench_model() {
  model::ModelConfig m;
  m.name = "gemm-bound";
  m.layers = 4;
  m.hidden = 512;
  m.heads = 8;
  m.kv_heads = 8;
  m.seq_len = 256;
  m.vocab = 4096;
  m.ffn_hidden = 2048;
  return m;
}

constexpr int kBatch = 4;  // one micro-batch of 4 sequences

model::ParallelConfig bench_layout() {
  model::ParallelConfig p;
  p.micro_batch = kBatch;
  p.global_batch = kBatch;
  p.zero_stage = 1;
  return p;
}

double step_model_flops() { return model::model_flops_per_iteration(bench_model(), kBatch); }

// One GEMM shape of the step: C (M, N) = A (M, K) B (K, N), `count` times.
struct GemmShape {
  const char* name;
  int M, N, K;
  int count;
  double flops() const { return 2.0 * M * N * K * count; }
};

// Every GEMM one training step runs (engine/transformer_layer.cc linear_forward
// / linear_backward, device_cpu.cc attention, output_head.cc), TP = 1.
std::vector<GemmShape> step_gemms() {
  const model::ModelConfig m = bench_model();
  const int T = m.seq_len, C = m.hidden, F = m.ffn_hidden, V = m.vocab, L = m.layers;
  const int N = T * kBatch, HD = m.head_dim(), heads = kBatch * m.heads;
  return {
      // forward, per layer
      {"qkv", N, 3 * C, C, L},
      {"attn_qk", T, T, HD, L * heads},
      {"attn_pv", T, HD, T, L * heads},
      {"proj", N, C, C, L},
      {"fc1", N, F, C, L},
      {"fc2", N, C, F, L},
      // backward, per layer: wgrad dW (OC, K) = dY^T X, dgrad dX (N, K) = dY W
      {"fc2_wgrad", C, F, N, L},
      {"fc2_dgrad", N, F, C, L},
      {"fc1_wgrad", F, C, N, L},
      {"fc1_dgrad", N, C, F, L},
      {"attn_dv", T, HD, T, L * heads},   // P^T dO
      {"attn_dp", T, T, HD, L * heads},   // dO V^T
      {"attn_dq", T, HD, T, L * heads},   // dS K
      {"attn_dk", T, HD, T, L * heads},   // dS^T Q
      {"proj_wgrad", C, C, N, L},
      {"proj_dgrad", N, C, C, L},
      {"qkv_wgrad", 3 * C, C, N, L},
      {"qkv_dgrad", N, C, 3 * C, L},
      // output head
      {"logits", N, V, C, 1},
      {"logits_wgrad", V, C, N, 1},
      {"logits_dgrad", N, C, V, 1},
  };
}

// Best-of-3 seconds of one Eigen product of each shape (after one warm-up).
double eigen_seconds(const GemmShape& g) {
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(g.M, g.K);
  Eigen::MatrixXf b = Eigen::MatrixXf::Random(g.K, g.N);
  Eigen::MatrixXf c(g.M, g.N);
  c.noalias() = a * b;
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

struct EigenReference {
  double flops = 0;      // per step
  double seconds = 0;    // Eigen time for all of them
  double flops_per_s() const { return flops / seconds; }
};

// Measured once per process (the two benchmarks share it).
const EigenReference& eigen_reference() {
  static const EigenReference ref = [] {
    EigenReference r;
    for (const GemmShape& g : step_gemms()) {
      r.flops += g.flops();
      r.seconds += eigen_seconds(g) * g.count;
    }
    const double model_flops = step_model_flops();
    if (std::abs(r.flops - model_flops) > 1e-9 * model_flops) {
      throw std::logic_error("bench: the GEMM list does not add up to model_flops_per_iteration");
    }
    return r;
  }();
  return ref;
}

// A single-process executor with its batch.
struct Engine {
  std::vector<std::unique_ptr<engine::Comm>> world = engine::make_thread_comms(1);
  engine::ProcessGroups groups{*world[0], 1, 1, 1};
  engine::CpuDevice device;
  std::unique_ptr<engine::PipelineExecutor> exec;
  engine::Batch batch;

  Engine() {
    engine::ExecutorOptions eo;
    eo.model = bench_model();
    eo.parallel = bench_layout();
    eo.optimizations.optimizer = model::OptimizerKind::kAdam;
    eo.optimizer.weight_decay = 0.01;
    eo.optimizer.max_grad_norm = 1.0;
    exec = std::make_unique<engine::PipelineExecutor>(eo, groups, device);
    const int T = eo.model.seq_len, V = eo.model.vocab;
    batch.samples = kBatch;
    batch.seq_len = T;
    batch.tokens.resize(static_cast<size_t>(kBatch) * T);
    batch.labels.resize(batch.tokens.size());
    uint64_t x = 12345;
    for (size_t i = 0; i < batch.tokens.size(); ++i) {
      x = engine::splitmix64(x);
      batch.tokens[i] = static_cast<int32_t>(x % V);
      batch.labels[i] = static_cast<int32_t>((x >> 32) % V);
    }
  }
};

void BM_EngineTrainingStep(benchmark::State& state) {
  const EigenReference& ref = eigen_reference();
  Engine e;
  e.exec->step(e.batch, 1e-4);  // warm-up: first touch of every buffer
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const engine::StepResult r = e.exec->step(e.batch, 1e-4);
    benchmark::DoNotOptimize(r.loss);
    seconds += seconds_since(t0);
  }
  const double flops = step_model_flops();
  const double step_flops_per_s = flops * static_cast<double>(state.iterations()) / seconds;
  state.counters["step_model_flops"] = flops;
  state.counters["step_flops_per_s"] = step_flops_per_s;
  state.counters["eigen_gemm_flops_per_s"] = ref.flops_per_s();
  state.counters["ratio_vs_eigen_gemm"] = step_flops_per_s / ref.flops_per_s();
  state.counters["eigen_512_flops_per_s"] = engine::cpu_gemm_peak_flops();
  state.SetLabel("L4 h512 s256 b4 V4096, 1 process");
}
BENCHMARK(BM_EngineTrainingStep)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void BM_EigenGemmSameShapes(benchmark::State& state) {
  const std::vector<GemmShape> gemms = step_gemms();
  std::vector<double> per_shape_s(gemms.size());
  double flops = 0, seconds = 0;
  for (auto _ : state) {
    // One step's worth of GEMMs: each shape's best time x its count.
    double step_s = 0;
    for (size_t i = 0; i < gemms.size(); ++i) {
      per_shape_s[i] = eigen_seconds(gemms[i]);
      step_s += per_shape_s[i] * gemms[i].count;
      flops += gemms[i].flops();
    }
    seconds += step_s;
    state.SetIterationTime(step_s);
  }
  state.counters["gemm_flops"] = flops / static_cast<double>(state.iterations());
  state.counters["eigen_gemm_flops_per_s"] = flops / seconds;
  for (size_t i = 0; i < gemms.size(); ++i) {
    const GemmShape& g = gemms[i];
    state.counters[std::string("gflops_per_s_") + g.name] = 2.0 * g.M * g.N * g.K / per_shape_s[i] / 1e9;
  }
}
BENCHMARK(BM_EigenGemmSameShapes)->Unit(benchmark::kMillisecond)->Iterations(1)->UseManualTime();

// Sums the wall time of every kernel by category.
class Profiler final : public engine::OpObserver {
 public:
  void op_begin(const engine::OpEvent&) override { t0_ = Clock::now(); }
  void op_end(const engine::OpEvent& e) override { seconds[category(e.name)] += seconds_since(t0_); }
  std::map<std::string, double> seconds;

 private:
  static std::string category(const std::string& name) {
    if (name == "qkv" || name == "proj" || name == "fc1" || name == "fc2" || name == "logits" ||
        name == "qkv_fc1" || name == "proj_fc2")
      return "gemm_ops";
    if (name == "flash_attention") return "attention";
    if (name == "gelu" || name == "swiglu") return "activation";
    if (name.rfind("ln", 0) == 0 || name == "final_ln") return "layernorm";
    if (name == "cross_entropy") return "cross_entropy";
    return "other_ops";
  }
  Clock::time_point t0_;
};

void BM_EngineStepProfile(benchmark::State& state) {
  Engine e;
  Profiler profiler;
  e.exec->step(e.batch, 1e-4);
  e.exec->chunk(0).set_observer(&profiler);
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    e.exec->step(e.batch, 1e-4);
    total += seconds_since(t0);
  }
  double in_ops = 0;
  for (const auto& [name, s] : profiler.seconds) {
    state.counters["share_" + name] = s / total;
    in_ops += s;
  }
  // Outside every kernel: optimizer, clipping, gradient zeroing, executor.
  state.counters["share_outside_ops"] = 1.0 - in_ops / total;
}
BENCHMARK(BM_EngineStepProfile)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
