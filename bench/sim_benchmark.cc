// bench/sim_benchmark.cc: what the event-level simulation (sim/) costs at the
// MegaScale scale (issue 4, "Speed").
//
// The job is the 175B model of MegaScale Table 1 (TP 8, PP 8, VPP 6, global
// batch 6144, micro-batch 1) on 1,536 / 3,072 / 6,144 / 12,288 A100 GPUs (DP =
// GPUs / 64, so M = 6144 / DP micro-batches per replica), on the scenario's
// MegaScale 3-tier fabric (sim/fabric_config.h), communication from network/
// with ECMP and congestion control (full fabric contention: every DP group /
// pipeline at once). Every iteration is cold: simulate_job builds the fabric,
// solves its collectives (network/'s congestion memo emptied too) and runs
// SimGrid.
//
//   BM_EventIteration/<gpus>/<megascale>
//       one iteration, nobody slow: symmetry leaves one replica of 8 pipeline
//       ranks to simulate. Issue target at 12,288 GPUs: < 10 s, < 2 GB.
//   BM_EventIterationStragglers/<gpus>
//       one iteration with 0.5% straggler machines (x1.1, the paper's figure)
//       and 1% jitter: up to 8 distinct replicas simulated (the default).
//   BM_EventIterationAllReplicas/<gpus>
//       the same with every replica simulated (max_replicas = DP): the cost
//       symmetry saves.
// Counters: iteration_s (simulated), engine_s (SimGrid share of the wall
// time), comm_s (fabric build + collective solves), ops, actors, replicas,
// peak_rss_mb (the process's peak so far: sizes run in ascending order, so a
// row's value is that size's peak unless an earlier, larger run set it).
// Run: cmake --build build --target sim_benchmark && ./build/bench/sim_benchmark
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "sim/fabric_config.h"  // defines: fabric_spec, ecmp_config, collective_options
#include "model/hardware.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "network/congestion.h"  // defines: clear_congestion_cache
#include "sim/job_sim.h"

namespace {

using namespace megascale;

model::Scenario gpt175b(int gpus, bool megascale) {
  model::Scenario s = model::default_scenario(megascale ? "megascale" : "megatron");
  s.parallel.tp = 8;
  s.parallel.pp = 8;
  s.parallel.vpp = 6;
  s.parallel.dp = gpus / 64;
  s.parallel.micro_batch = 1;
  s.parallel.global_batch = 6144;
  s.cluster.gpus = gpus;
  return s;
}

sim::SimOptions options(const model::Scenario& s) {
  const model::GpuProfile& gpu = model::hardware_profile(s);
  sim::SimOptions o;
  o.comm = sim::CommModel::kNetwork;
  sim::FabricInputs f;
  f.spec = sim::fabric_spec(s.network, s.hardware, gpu, s.cluster.gpus);
  f.ecmp = sim::ecmp_config(s.network);
  f.collectives = sim::collective_options(gpu, s.hardware.nic_gbps, s.network);
  o.fabric = f;
  o.trace_step = -1;
  o.variability.gpu_sigma = s.hardware.gpu_speed_sigma;  // as `megascale simulate` does
  return o;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

void run(benchmark::State& state, const model::Scenario& s, const sim::SimOptions& o) {
  sim::JobResult r;
  for (auto _ : state) {
    network::clear_congestion_cache();
    r = sim::simulate_job(s, o);
    benchmark::DoNotOptimize(r.steps.data());
  }
  const sim::StepResult& st = r.steps.front();
  state.counters["iteration_s"] = r.estimate.iteration_time_s;
  state.counters["mfu"] = r.estimate.mfu;
  state.counters["engine_s"] = st.stats.engine_wall_s;
  state.counters["comm_s"] = r.comm.wall_s;
  state.counters["ops"] = static_cast<double>(st.stats.ops);
  state.counters["actors"] = st.stats.actors;
  state.counters["replicas"] = static_cast<double>(st.replicas.size());
  state.counters["peak_rss_mb"] = peak_rss_mb();
}

void BM_EventIteration(benchmark::State& state) {
  const model::Scenario s = gpt175b(static_cast<int>(state.range(0)), state.range(1) != 0);
  run(state, s, options(s));
}
BENCHMARK(BM_EventIteration)
    ->ArgsProduct({{1536, 3072, 6144, 12288}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// The cost of NIC sharing (sends and DP collectives as SimGrid executions on
// a per-rank NIC host instead of sleeps): the same MegaScale iteration with it
// off, to compare with BM_EventIteration/N/1 in one run.
void BM_EventIterationNoNicSharing(benchmark::State& state) {
  const model::Scenario s = gpt175b(static_cast<int>(state.range(0)), true);
  sim::SimOptions o = options(s);
  o.share_nic = false;
  run(state, s, o);
}
BENCHMARK(BM_EventIterationNoNicSharing)->Arg(1536)->Arg(12288)->Unit(benchmark::kMillisecond);

sim::SimOptions straggling(const model::Scenario& s, int max_replicas) {
  sim::SimOptions o = options(s);
  o.variability.stragglers.machine_fraction = 0.005;
  o.variability.stragglers.factor = 1.1;
  o.variability.jitter_sigma = sim::kDefaultJitterSigma;
  o.max_replicas = max_replicas;
  return o;
}

void BM_EventIterationStragglers(benchmark::State& state) {
  const model::Scenario s = gpt175b(static_cast<int>(state.range(0)), true);
  run(state, s, straggling(s, 8));
}
BENCHMARK(BM_EventIterationStragglers)->Arg(1536)->Arg(3072)->Arg(6144)->Arg(12288)->Unit(benchmark::kMillisecond);

void BM_EventIterationAllReplicas(benchmark::State& state) {
  const model::Scenario s = gpt175b(static_cast<int>(state.range(0)), true);
  run(state, s, straggling(s, s.parallel.dp));
}
BENCHMARK(BM_EventIterationAllReplicas)->Arg(1536)->Arg(12288)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
