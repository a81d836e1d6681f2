// bench/reliability_benchmark.cc: what the run-level Monte Carlo (reliability/)
// costs (issue 5, "10,000 simulated three-week runs in under 10 s on one core").
//
// The run is scenarios/paper/megascale-175b-12288-3weeks.toml's (175B, 12,288
// GPUs, Llama 3 failure mix scaled to ~100 restarts in 21 days), or the baseline
// file's, with the iteration time from model::estimate.
//   BM_MonteCarlo/<runs>/<megascale>: `runs` simulated three-week runs, one core.
// Counters: ettr_mean, restarts_mean, us_per_run.
// Run: cmake --build build-rel --target reliability_benchmark &&
//      ./build-rel/bench/reliability_benchmark
#include <benchmark/benchmark.h>

#include <string>

#include "model/estimator.h"
#include "model/scenario.h"
#include "reliability/run_model.h"

namespace {

using namespace megascale;

reliability::RunModel run_model(bool megascale) {
  const std::string file = std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/paper/" +
                           (megascale ? "megascale" : "baseline") + "-175b-12288-3weeks.toml";
  const model::Scenario s = model::load_scenario(file);
  return reliability::build_run_model(s, model::estimate(s).iteration_time_s);
}

void BM_MonteCarlo(benchmark::State& state) {
  const int runs = static_cast<int>(state.range(0));
  const reliability::RunModel m = run_model(state.range(1) != 0);
  reliability::PlanResult r;
  for (auto _ : state) {
    r = reliability::monte_carlo(m, runs, 1);
    benchmark::DoNotOptimize(r);
  }
  state.counters["ettr_mean"] = r.ettr_mean;
  state.counters["restarts_mean"] = r.restarts_mean;
  state.counters["us_per_run"] = benchmark::Counter(
      static_cast<double>(runs) * state.iterations(),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::OneK::kIs1000);
}
BENCHMARK(BM_MonteCarlo)->Args({10000, 1})->Args({10000, 0})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
