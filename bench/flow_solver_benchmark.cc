// bench/flow_solver_benchmark.cc: what network/flow_solver.h costs at the
// MegaScale scale, and against SimGrid's solver (issue 3, "Flow rates").
//
// The fabric is a synthetic 3-tier CLOS shaped like REFERENCE.md's MegaScale
// sizing (its own small builder here, independent of network/topology.*):
// 8 GPUs per server, one 200G NIC per GPU, rail-optimised (NIC r of the 64
// servers of a ToR group goes to ToR r of that group); 4 ToR groups (32
// ToRs) and 32 aggregation switches per 2,048-GPU pod, every ToR to every
// aggregation switch of its pod at 400G; aggregation switch a of every pod to
// the 32 core switches of core plane a % 3 at 400G (96 cores). Directed links
// up and down separately: 49,152 links at 12,288 GPUs.
//
// The traffic is one ring step of a data-parallel all-gather across all GPUs:
// for each rail, the servers form a ring and every GPU sends one flow to the
// same-rail GPU of the next server. Paths are 2 (same ToR), 4 (same pod) or 6
// links (across pods), the aggregation and core switches chosen at random per
// flow (ECMP-like). Two placements: "packed" (ring in server order: mostly
// ToR-local, 2-link paths) and "scattered" (ring over a random server order:
// mostly 6-link paths across the core).
//
//   BM_RingStepSolve/<gpus>/<scattered>   max-min solve of one ring step, cold
//                                          (fresh solver, no memo); issue target
//                                          < 50 ms at 12,288; ns_per_entry shows
//                                          cost / (flows x path length)
//   BM_RingStepMemoised/<gpus>/<scattered> the same step again on a warm solver
//   BM_RingStepCompletion/<gpus>/1        event-driven completion of the step
//   BM_RingAllGather64x192                a whole ring all-gather, 64 groups of
//                                          192 DP ranks at once (191 identical
//                                          steps, memoised); issue target < 1 s
//   BM_VersusSimGrid/<flows>              completion times of a scattered ring
//                                          step on a <flows>-GPU fabric: ours per
//                                          iteration; SimGrid once (forked), its
//                                          wall time and the ratio as counters
// Run: cmake --build build --target flow_solver_benchmark &&
//      ./build/bench/flow_solver_benchmark   (about a minute, SimGrid included)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "network/flow_solver.h"    // defines: FlowSet, FlowSolver
#include "network/simgrid_check.h"  // defines: simgrid_completion_times, max_relative_error

namespace {

using namespace megascale::network;

constexpr int kGpusPerServer = 8;      // = rails
constexpr int kServersPerGroup = 64;   // servers sharing one set of 8 ToRs
constexpr int kGroupsPerPod = 4;       // 32 ToRs per pod
constexpr int kTorsPerPod = kGroupsPerPod * kGpusPerServer;
constexpr int kAggsPerPod = 32;
constexpr int kCorePlanes = 3;
constexpr int kCoresPerPlane = 32;     // 96 cores
constexpr int kServersPerPod = kServersPerGroup * kGroupsPerPod;
constexpr double kNicGbps = 200.0;     // 200G NIC per GPU (REFERENCE.md, MegaScale fabric)
constexpr double kSwitchGbps = 400.0;  // Tomahawk-4 400G ports
constexpr double kStepBytes = 64e6;    // one ring-step chunk

struct Clos {
  int gpus = 0, servers = 0, pods = 0;
  LinkId base_tor_agg = 0, base_agg_core = 0;
  std::vector<double> capacity_gbps;

  explicit Clos(int num_gpus) : gpus(num_gpus) {
    servers = gpus / kGpusPerServer;
    pods = (servers + kServersPerPod - 1) / kServersPerPod;
    capacity_gbps.assign(2 * static_cast<std::size_t>(gpus), kNicGbps);
    base_tor_agg = static_cast<LinkId>(capacity_gbps.size());
    capacity_gbps.resize(capacity_gbps.size() + 2 * pods * kTorsPerPod * kAggsPerPod, kSwitchGbps);
    base_agg_core = static_cast<LinkId>(capacity_gbps.size());
    capacity_gbps.resize(capacity_gbps.size() + 2 * pods * kAggsPerPod * kCoresPerPlane, kSwitchGbps);
  }
  LinkId nic(int gpu, bool up) const { return 2 * gpu + (up ? 0 : 1); }
  LinkId tor_agg(int pod, int tor, int agg, bool up) const {
    return base_tor_agg + 2 * ((pod * kTorsPerPod + tor) * kAggsPerPod + agg) + (up ? 0 : 1);
  }
  LinkId agg_core(int pod, int agg, int core, bool up) const {
    return base_agg_core + 2 * ((pod * kAggsPerPod + agg) * kCoresPerPlane + core) + (up ? 0 : 1);
  }
  static int pod_of(int server) { return server / kServersPerPod; }
  static int tor_of(int server, int rail) {
    return (server % kServersPerPod) / kServersPerGroup * kGpusPerServer + rail;
  }
  // ECMP-like path between same-rail GPUs of two servers.
  void path(int src_server, int dst_server, int rail, std::mt19937_64& rng, std::vector<LinkId>& p) const {
    p.clear();
    const int sp = pod_of(src_server), dp = pod_of(dst_server);
    const int st = tor_of(src_server, rail), dt = tor_of(dst_server, rail);
    p.push_back(nic(src_server * kGpusPerServer + rail, true));
    if (sp == dp && st == dt) {
      // ToR-local
    } else if (sp == dp) {
      const int a = static_cast<int>(rng() % kAggsPerPod);
      p.push_back(tor_agg(sp, st, a, true));
      p.push_back(tor_agg(dp, dt, a, false));
    } else {
      const int a = static_cast<int>(rng() % kAggsPerPod);
      const int plane = a % kCorePlanes;
      const int c = static_cast<int>(rng() % kCoresPerPlane);
      // destination aggregation switch: one in the same core plane
      const int per_plane = (kAggsPerPod - plane + kCorePlanes - 1) / kCorePlanes;
      const int a2 = plane + kCorePlanes * static_cast<int>(rng() % per_plane);
      p.push_back(tor_agg(sp, st, a, true));
      p.push_back(agg_core(sp, a, c, true));
      p.push_back(agg_core(dp, a2, c, false));
      p.push_back(tor_agg(dp, dt, a2, false));
    }
    p.push_back(nic(dst_server * kGpusPerServer + rail, false));
  }
};

// One ring step over all GPUs of `clos` (see the file comment).
FlowSet ring_step(const Clos& clos, bool scattered, std::uint64_t seed = 42) {
  std::mt19937_64 rng(seed);
  std::vector<int> order(clos.servers);
  std::iota(order.begin(), order.end(), 0);
  if (scattered) std::shuffle(order.begin(), order.end(), rng);
  FlowSet flows;
  flows.reserve(clos.gpus, 6 * static_cast<std::size_t>(clos.gpus));
  std::vector<LinkId> p;
  for (int rail = 0; rail < kGpusPerServer; ++rail)
    for (int i = 0; i < clos.servers; ++i) {
      clos.path(order[i], order[(i + 1) % clos.servers], rail, rng, p);
      flows.add(p, kStepBytes);
    }
  return flows;
}

using Clock = std::chrono::steady_clock;

// flows, mean path length, and wall ns per path entry (flows x path length)
// of one iteration: flat across sizes means O(flows x path length).
void set_shape_counters(benchmark::State& state, const FlowSet& flows, double loop_s) {
  state.counters["flows"] = static_cast<double>(flows.size());
  state.counters["mean_path_len"] = static_cast<double>(flows.path_entries()) / static_cast<double>(flows.size());
  state.counters["ns_per_entry"] =
      1e9 * loop_s / static_cast<double>(state.iterations()) / static_cast<double>(flows.path_entries());
}

void BM_RingStepSolve(benchmark::State& state) {
  const Clos clos(static_cast<int>(state.range(0)));
  const FlowSet flows = ring_step(clos, state.range(1) != 0);
  RateSolution s;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    FlowSolver solver;  // cold: nothing memoised
    s = solver.solve_rates(clos.capacity_gbps, flows);
    benchmark::DoNotOptimize(s.rate_gbps.data());
  }
  set_shape_counters(state, flows, std::chrono::duration<double>(Clock::now() - t0).count());
  state.counters["components"] = static_cast<double>(s.stats.components);
  state.counters["min_rate_gbps"] = *std::min_element(s.rate_gbps.begin(), s.rate_gbps.end());
  state.SetLabel(state.range(1) ? "scattered ring" : "packed ring");
}
BENCHMARK(BM_RingStepSolve)
    ->ArgsProduct({{1536, 3072, 6144, 12288}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

void BM_RingStepMemoised(benchmark::State& state) {
  const Clos clos(static_cast<int>(state.range(0)));
  const FlowSet flows = ring_step(clos, state.range(1) != 0);
  FlowSolver solver;
  solver.solve_rates(clos.capacity_gbps, flows);  // warm
  RateSolution s;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    s = solver.solve_rates(clos.capacity_gbps, flows);
    benchmark::DoNotOptimize(s.rate_gbps.data());
  }
  set_shape_counters(state, flows, std::chrono::duration<double>(Clock::now() - t0).count());
  state.counters["cache_hits"] = static_cast<double>(s.stats.cache_hits);
  state.counters["solved"] = static_cast<double>(s.stats.components_solved);
  state.SetLabel(state.range(1) ? "scattered ring" : "packed ring");
}
BENCHMARK(BM_RingStepMemoised)->ArgsProduct({{1536, 12288}, {0, 1}})->Unit(benchmark::kMillisecond);

void BM_RingStepCompletion(benchmark::State& state) {
  const Clos clos(static_cast<int>(state.range(0)));
  const FlowSet flows = ring_step(clos, state.range(1) != 0);
  CompletionResult c;
  const auto t0 = Clock::now();
  for (auto _ : state) {
    FlowSolver solver;
    c = solver.simulate_completion(clos.capacity_gbps, flows);
    benchmark::DoNotOptimize(c.completion_s.data());
  }
  set_shape_counters(state, flows, std::chrono::duration<double>(Clock::now() - t0).count());
  state.counters["events"] = static_cast<double>(c.stats.events);
  state.counters["makespan_ms"] = 1e3 * c.makespan_s;
}
BENCHMARK(BM_RingStepCompletion)->ArgsProduct({{1536, 3072, 6144, 12288}, {1}})->Unit(benchmark::kMillisecond);

// 64 DP groups of 192 ranks on 12,288 GPUs: group g is rail g % 8 of the
// (g / 8)-th slice of 192 consecutive servers, its ring in a random order
// inside the slice. A ring all-gather is 191 steps in which every rank sends
// 1/192 of the tensor to its successor: the same flows every step, so the
// first step is simulated and the other 190 are cache hits (steps are
// synchronous, so their times add).
void BM_RingAllGather64x192(benchmark::State& state) {
  constexpr int kRanks = 192, kGroups = 64, kSteps = kRanks - 1;
  const Clos clos(kGroups * kRanks);  // 12,288 GPUs, 1,536 servers
  std::mt19937_64 rng(9);
  FlowSet flows;
  std::vector<LinkId> p;
  for (int g = 0; g < kGroups; ++g) {
    const int rail = g % kGpusPerServer, slice = g / kGpusPerServer;
    std::vector<int> order(kRanks);
    std::iota(order.begin(), order.end(), slice * kRanks);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i < kRanks; ++i) {
      clos.path(order[i], order[(i + 1) % kRanks], rail, rng, p);
      flows.add(p, kStepBytes / kRanks);
    }
  }
  double total_s = 0.0;
  SolveStats last;
  for (auto _ : state) {
    FlowSolver solver;
    total_s = 0.0;
    for (int step = 0; step < kSteps; ++step) {
      const CompletionResult c = solver.simulate_completion(clos.capacity_gbps, flows);
      total_s += c.makespan_s - c.first_start_s;  // steps are synchronous
      last = c.stats;
    }
    benchmark::DoNotOptimize(total_s);
  }
  state.counters["flows_per_step"] = static_cast<double>(flows.size());
  state.counters["steps"] = kSteps;
  state.counters["allgather_ms"] = 1e3 * total_s;
  state.counters["components"] = static_cast<double>(last.components);
  state.counters["hits_last_step"] = static_cast<double>(last.cache_hits);
}
BENCHMARK(BM_RingAllGather64x192)->Unit(benchmark::kMillisecond);

// SimGrid's solver on the same ring step: run once per size (forked child),
// remembered across the benchmark's repetitions.
const SimGridResult& simgrid_once(int gpus, const Clos& clos, const FlowSet& flows) {
  static std::map<int, SimGridResult> done;
  auto it = done.find(gpus);
  if (it == done.end()) it = done.emplace(gpus, simgrid_completion_times(clos.capacity_gbps, flows)).first;
  return it->second;
}

void BM_VersusSimGrid(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const Clos clos(gpus);
  const FlowSet flows = ring_step(clos, true);
  const SimGridResult& sg = simgrid_once(gpus, clos, flows);
  CompletionResult c;
  double ours_s = 0.0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    FlowSolver solver;  // cold
    c = solver.simulate_completion(clos.capacity_gbps, flows);
    ours_s = std::chrono::duration<double>(Clock::now() - t0).count();
    benchmark::DoNotOptimize(c.completion_s.data());
  }
  state.counters["flows"] = static_cast<double>(flows.size());
  state.counters["events"] = static_cast<double>(c.stats.events);
  state.counters["ours_s"] = ours_s;
  state.counters["simgrid_run_s"] = sg.run_wall_s;
  state.counters["simgrid_build_s"] = sg.build_wall_s;
  state.counters["simgrid_over_ours"] = sg.run_wall_s / ours_s;
  state.counters["max_rel_err"] = max_relative_error(c.completion_s, sg.completion_s);
}
BENCHMARK(BM_VersusSimGrid)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
