// model/search.cc: enumerate, filter, rank parallel layouts.
#include "model/search.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "model/hardware.h"
#include "model/profile.h"
#include "model/scenario.h"

namespace megascale::model {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i) {
    if (n % i == 0) d.push_back(i);
  }
  return d;
}

bool better(const Candidate& a, const Candidate& b) { return a.estimate.mfu > b.estimate.mfu; }

}  // namespace

std::vector<ParallelConfig> enumerate_layouts(const Scenario& s, int gpus) {
  const ModelConfig& m = s.model;
  const int batch = s.parallel.global_batch;
  // The CPU engine runs ZeRO 0-2 without recomputation (engine/pipeline_executor.h)
  // and shards the sequence over TP only when it divides: offer what it can run.
  const bool engine = hardware_profile(s).is_cpu();
  std::vector<ParallelConfig> out;
  for (int tp : divisors(gpus)) {
    if (tp > s.hardware.gpus_per_node || m.heads % tp != 0 || m.kv_heads % tp != 0) continue;
    for (int pp : divisors(gpus / tp)) {
      if (m.layers % pp != 0) continue;
      const int dp = gpus / (tp * pp);
      if (batch % dp != 0) continue;
      for (int mb : divisors(batch / dp)) {
        const int microbatches = batch / (dp * mb);
        for (int vpp : divisors(m.layers / pp)) {
          if (vpp > 1 && (pp == 1 || microbatches % pp != 0)) continue;
          for (int sp = 0; sp <= (tp > 1 && (!engine || m.seq_len % tp == 0) ? 1 : 0); ++sp) {
            for (int zero = 0; zero <= (engine ? 2 : 3); ++zero) {
              for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                if (engine && rc != Recompute::kNone) continue;
                ParallelConfig p;
                p.tp = tp;
                p.pp = pp;
                p.vpp = vpp;
                p.dp = dp;
                p.micro_batch = mb;
                p.global_batch = batch;
                p.sequence_parallel = sp == 1;
                p.zero_stage = zero;
                p.recompute = rc;
                out.push_back(p);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

SearchResult search(const Scenario& s, const SearchOptions& options) {
  const int gpus = options.gpus > 0 ? options.gpus : s.cluster.gpus;
  const GpuProfile& gpu = hardware_profile(s);
  const std::vector<ParallelConfig> layouts = enumerate_layouts(s, gpus);
  SearchResult r;
  r.enumerated = static_cast<int64_t>(layouts.size());
  Scenario trial = s;
  trial.cluster.gpus = gpus;
  const size_t keep = static_cast<size_t>(std::max(1, options.top_k));
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (options.progress && options.progress_every > 0 && i > 0 &&
        static_cast<int64_t>(i) % options.progress_every == 0) {
      options.progress(static_cast<int64_t>(i), r.enumerated);
    }
    const ParallelConfig& p = layouts[i];
    if (!options.fixed.admits(p)) continue;
    if (check_layout(s.model, p, gpus).has_value()) continue;
    ++r.valid;
    // Memory first: it is cheaper than the time estimate and prunes most layouts.
    const MemoryBreakdown mem = memory_per_gpu(s.model, p, s.optimizations, gpu);
    if (mem.total_bytes > (1.0 - options.memory_headroom) * mem.capacity_bytes) continue;
    ++r.fit;
    trial.parallel = p;
    Candidate c{p, estimate(trial)};
    if (r.top.size() < keep || better(c, r.top.back())) {
      r.top.insert(std::upper_bound(r.top.begin(), r.top.end(), c, better), c);
      if (r.top.size() > keep) r.top.pop_back();
    }
  }
  if (options.progress) options.progress(r.enumerated, r.enumerated);
  return r;
}

std::string explain(const Candidate& c, const Candidate& best) {
  const TimeBreakdown& b = c.estimate.breakdown;
  const double t = c.estimate.iteration_time_s;
  struct Part {
    const char* name;
    double s;
  };
  std::vector<Part> parts = {{"recompute", b.recompute_s}, {"TP exposed", b.tp_exposed_s},
                             {"bubble", b.bubble_s},       {"PP exposed", b.pp_exposed_s},
                             {"DP exposed", b.dp_exposed_s}, {"data", b.data_s},
                             {"embedding sync", b.embedding_sync_s}, {"gradient norm", b.grad_norm_s},
                             {"optimizer", b.optimizer_s}, {"host", b.host_s}};
  std::sort(parts.begin(), parts.end(), [](const Part& x, const Part& y) { return x.s > y.s; });
  char buf[256];
  std::string out;
  std::snprintf(buf, sizeof buf, "compute %.1f%% of step", 100.0 * b.compute_s / t);
  out += buf;
  for (int i = 0; i < 2 && i < static_cast<int>(parts.size()); ++i) {
    std::snprintf(buf, sizeof buf, ", %s %.1f%%", parts[i].name, 100.0 * parts[i].s / t);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, ", memory %.0f/%.0f GB", c.estimate.memory.total_bytes / 1e9,
                c.estimate.memory.capacity_bytes / 1e9);
  out += buf;
  if (&c != &best) {
    std::snprintf(buf, sizeof buf, "; %.2f MFU points behind #1",
                  100.0 * (best.estimate.mfu - c.estimate.mfu));
    out += buf;
  }
  return out;
}

}  // namespace megascale::model
