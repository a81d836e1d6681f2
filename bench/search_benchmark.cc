// bench/search_benchmark.cc: what the analytical fidelity costs (DESIGN.md,
// "Simulator notes"; model/search.h).
//
// Calculon needs ~2.6 ms per configuration and ~11.8M configurations for 175B on
// 12,288 GPUs (hours on a laptop). These benchmarks measure, on this machine:
//   BM_EstimateOne          one model::estimate() of the built-in default scenario
//                           (175B, 12,288 A100s, MegaScale preset);
//   BM_SearchEvaluations    the per-layout work of model::search over the layouts it
//                           enumerates for that scenario: check_layout, the memory
//                           fit, and estimate() for the layouts that fit; items are
//                           layouts evaluated, "evals_per_min" the same rate per
//                           minute;
//   BM_FullSearch175B12288  model::search end to end (enumerate, filter, rank);
//   BM_FullSearchSmall      the same on scenarios/example-small.toml (16 GPUs).
// Run: cmake --build build --target search_benchmark && ./build/bench/search_benchmark
// The whole binary runs in a few seconds.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "model/estimator.h"    // defines: estimate, Estimate
#include "model/hardware.h"     // defines: gpu_profile, GpuProfile
#include "model/memory.h"       // defines: memory_per_gpu
#include "model/profile.h"
#include "model/scenario.h"     // defines: default_scenario, load_scenario, check_layout, with_layout
#include "model/search.h"       // defines: enumerate_layouts, search

namespace {

using namespace megascale;

constexpr int kPaperGpus = 12288;  // MegaScale Table 1 / Table 2 largest run

const model::Scenario& default_megascale() {
  static const model::Scenario s = model::default_scenario("megascale");
  return s;
}

void BM_EstimateOne(benchmark::State& state) {
  const model::Scenario& s = default_megascale();
  for (auto _ : state) {
    model::Estimate e = model::estimate(s);
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("175B, 12,288 GPUs, megascale preset");
}
BENCHMARK(BM_EstimateOne);

// One pass over every enumerated layout per iteration, doing exactly what
// model::search does per layout (minus keeping the top K, which is O(K) on the
// few layouts that beat the current K-th).
void BM_SearchEvaluations(benchmark::State& state) {
  const model::Scenario& s = default_megascale();
  const std::vector<model::ParallelConfig> layouts = model::enumerate_layouts(s, kPaperGpus);
  const model::GpuProfile& gpu = model::hardware_profile(s);
  model::Scenario trial = s;
  trial.cluster.gpus = kPaperGpus;
  // One model per context-parallel size, as model::search keeps them.
  std::map<int, model::ModelConfig> models;
  for (const model::ParallelConfig& p : layouts) models.emplace(p.cp, model::with_layout(s, p).model);
  int64_t valid = 0, fit = 0;
  double best_mfu = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    valid = fit = 0;
    for (const model::ParallelConfig& p : layouts) {
      const model::ModelConfig& m = models.at(p.cp);
      if (model::check_layout(m, p, kPaperGpus).has_value()) continue;
      ++valid;
      if (!model::memory_per_gpu(m, p, s.optimizations, gpu).fits()) continue;
      ++fit;
      trial.parallel = p;
      trial.model = m;
      const model::Estimate e = model::estimate(trial);
      best_mfu = std::max(best_mfu, e.mfu);
    }
    benchmark::DoNotOptimize(best_mfu);
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double evaluated = static_cast<double>(state.iterations()) * layouts.size();
  state.SetItemsProcessed(static_cast<int64_t>(evaluated));
  // A plain value (a kIsRate counter would be printed per second): wall-clock
  // layouts per minute over the timed loop.
  state.counters["evals_per_min"] = wall_s > 0 ? 60.0 * evaluated / wall_s : 0.0;
  state.counters["layouts"] = static_cast<double>(layouts.size());
  state.counters["valid"] = static_cast<double>(valid);
  state.counters["fit"] = static_cast<double>(fit);
}
BENCHMARK(BM_SearchEvaluations)->Unit(benchmark::kMillisecond)->MinTime(1.0);

void report_search(benchmark::State& state, const model::SearchResult& r) {
  state.counters["enumerated"] = static_cast<double>(r.enumerated);
  state.counters["valid"] = static_cast<double>(r.valid);
  state.counters["fit"] = static_cast<double>(r.fit);
  state.counters["best_mfu"] = r.top.empty() ? 0.0 : r.top.front().estimate.mfu;
  state.SetItemsProcessed(state.iterations() * r.enumerated);
}

void BM_FullSearch175B12288(benchmark::State& state) {
  const model::Scenario& s = default_megascale();
  model::SearchOptions o;
  o.gpus = kPaperGpus;
  o.top_k = 10;
  model::SearchResult r;
  for (auto _ : state) {
    r = model::search(s, o);
    benchmark::DoNotOptimize(r);
  }
  report_search(state, r);
}
BENCHMARK(BM_FullSearch175B12288)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_FullSearchSmall(benchmark::State& state) {
  const model::Scenario s =
      model::load_scenario(std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/example-small.toml");
  model::SearchOptions o;
  o.top_k = 10;
  model::SearchResult r;
  for (auto _ : state) {
    r = model::search(s, o);
    benchmark::DoNotOptimize(r);
  }
  report_search(state, r);
}
BENCHMARK(BM_FullSearchSmall)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
