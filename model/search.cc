// model/search.cc: enumerate, filter, rank parallel layouts.
#include "model/search.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/accuracy.h"
#include "model/hardware.h"
#include "model/head_balance.h"
#include "model/megatron_layout.h"
#include "model/pipeline_layout.h"
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

void rank(const Candidate& c, size_t keep, std::vector<Candidate>* top) {
  if (top->size() < keep || better(c, top->back())) {
    top->insert(std::upper_bound(top->begin(), top->end(), c, better), c);
    if (top->size() > keep) top->pop_back();
  }
}

}  // namespace

std::vector<ParallelConfig> enumerate_layouts(const Scenario& s, int gpus) {
  // A framework offers one selective form: torchtitan's op-level policy or
  // Megatron-LM's attention-core re-run.
  const Recompute selective =
      s.parallel.recompute == Recompute::kSelectiveOp ? Recompute::kSelectiveOp : Recompute::kSelective;
  // The job as written: a scenario read with cp > 1 carries a folded model and batch.
  const ModelConfig m = context_parallel_model(s.model, s.parallel.cp, 1);
  const int batch = s.parallel.global_batch / std::max(1, s.parallel.cp);
  // The CPU engine runs ZeRO 0-2 without recomputation (engine/pipeline_executor.h):
  // offer what it can run. Neither engine has context parallelism. Splits that
  // check_layout refuses for every profile are not offered at all: tp must divide
  // the heads, KV heads and ffn_hidden, and under sequence parallelism the
  // sequence each CP rank holds (check_tensor_split, Megatron-LM's asserts);
  // a TP group sits whole inside one server (check_placement).
  const bool engine = hardware_profile(s).models_engine();
  std::vector<ParallelConfig> out;
  for (int cp : divisors(gpus)) {
    // Megatron-Core's load-balanced CP: 2 x cp equal chunks of each sequence.
    if (cp > 1 && (engine || m.seq_len % (2 * cp) != 0)) continue;
    for (int tp : divisors(gpus / cp)) {
      if (s.hardware.gpus_per_node % tp != 0 || m.heads % tp != 0 || m.kv_heads % tp != 0 || m.ffn_hidden % tp != 0) {
        continue;
      }
      // ... and so does a CP group of tp x cp GPUs that fits one (check_placement).
      const int node = s.hardware.gpus_per_node;
      if (cp > 1 && tp * cp < node && node % (tp * cp) != 0) continue;
      const bool sequence_splits = tp > 1 && (m.seq_len / cp) % tp == 0;
      for (int pp : divisors(gpus / (cp * tp))) {
        // An even split, or where pp does not divide the layers Meta's trimmed
        // first / last stages (model/pipeline_layout.h trimmed_end_stages).
        const std::optional<EndStages> ends = trimmed_end_stages(m.layers, pp);
        if (m.layers % pp != 0 && !ends) continue;
        const int stage_layers = ends ? ends->middle : m.layers / pp;
        const int dp = gpus / (cp * tp * pp);
        if (batch % dp != 0) continue;
        for (int mb : divisors(batch / dp)) {
          const int microbatches = batch / (dp * mb);
          for (int vpp : divisors(stage_layers)) {
            if (vpp > 1 && (pp == 1 || microbatches % pp != 0)) continue;
            for (int sp = 0; sp <= (sequence_splits ? 1 : 0); ++sp) {
              for (int zero = 0; zero <= (engine ? 2 : 3); ++zero) {
                for (Recompute rc : {Recompute::kNone, selective, Recompute::kFull}) {
                  if (engine && rc != Recompute::kNone) continue;
                  ParallelConfig p;
                  p.tp = tp;
                  p.cp = cp;
                  p.cp_comm = s.parallel.cp_comm;  // the job's attention's, not searched
                  p.pp = pp;
                  p.vpp = vpp;
                  if (ends) {
                    p.first_stage_layers = ends->first;
                    p.last_stage_layers = ends->last;
                  }
                  p.dp = dp * cp;  // folded (model/config.h)
                  p.micro_batch = mb;
                  p.global_batch = batch * cp;
                  p.sequence_parallel = sp == 1;
                  p.zero_stage = zero;
                  p.recompute = rc;
                  p.rank_order = s.parallel.rank_order;  // the job's launcher's, not searched
                  out.push_back(p);
                }
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
  // One model per cp (seq_len / cp tokens, attention over the whole sequence).
  std::map<int, ModelConfig> models;
  const size_t keep = static_cast<size_t>(std::max(1, options.top_k));
  // The enumeration ranks 4K: a layout just below the top K whose heads-balanced
  // split (below) gains a few percent can still rank.
  const size_t pool = 4 * keep;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (options.progress && options.progress_every > 0 && i > 0 &&
        static_cast<int64_t>(i) % options.progress_every == 0) {
      options.progress(static_cast<int64_t>(i), r.enumerated);
    }
    const ParallelConfig& p = layouts[i];
    if (!options.fixed.admits(p)) continue;
    auto model = models.find(p.cp);
    if (model == models.end()) model = models.emplace(p.cp, with_layout(s, p).model).first;
    if (check_layout(model->second, p, gpus).has_value()) continue;
    ++r.valid;
    // Memory first: it is cheaper than the time estimate and prunes most layouts.
    const MemoryBreakdown mem = memory_per_gpu(model->second, p, s.optimizations, gpu);
    r.memory_capacity_bytes = mem.capacity_bytes;
    const bool fits = mem.total_bytes <= (1.0 - options.memory_headroom) * mem.capacity_bytes;
    if (!fits && !options.keep_points) continue;
    trial.parallel = p;
    trial.model = model->second;
    Candidate c{p, estimate(trial)};
    if (options.keep_points) {
      r.points.push_back({p, c.estimate.mfu, c.estimate.iteration_time_s, mem.total_bytes, fits});
    }
    if (!fits) continue;
    ++r.fit;
    // The whole-gradient memory (a second memory model call) only for a layout
    // that would be the new best.
    if (!r.best_whole_gradients || better(c, *r.best_whole_gradients)) {
      const double gradient_gap_bytes =
          p.zero_stage >= 2 ? unsharded_gradient_extra_bytes(model->second, p, s.optimizations, gpu) : 0.0;
      if (mem.total_bytes + gradient_gap_bytes <= (1.0 - options.memory_headroom) * mem.capacity_bytes) {
        r.best_whole_gradients = c;
      }
    }
    rank(c, pool, &r.top);
  }
  // Each of the 4K with a pipeline is offered with its heads balanced
  // (model/head_balance.h); a split is ranked where it fits and its estimate
  // is the shorter. 4K estimates more: the enumeration's speed is untouched.
  std::vector<Candidate> balanced;
  for (const Candidate& c : r.top) {
    trial.parallel = c.parallel;
    trial.model = models.at(c.parallel.cp);
    if (std::optional<Candidate> b = head_balanced_candidate(trial, c.estimate, options.memory_headroom)) {
      balanced.push_back(std::move(*b));
    }
  }
  for (const Candidate& b : balanced) {
    rank(b, pool, &r.top);
    if (options.keep_points) {
      r.points.push_back({b.parallel, b.estimate.mfu, b.estimate.iteration_time_s, b.estimate.memory.total_bytes, true});
    }
  }
  if (r.top.size() > keep) r.top.erase(r.top.begin() + static_cast<std::ptrdiff_t>(keep), r.top.end());
  for (const Candidate& c : r.top) r.head_balanced += c.parallel.pipeline_chunk_layers != nullptr;
  if (options.progress) options.progress(r.enumerated, r.enumerated);
  return r;
}

HeadWeights head_weights(const ParallelConfig& p, const Estimate& own) {
  const double pass_s = p.microbatches() * (own.layer_forward_s + own.layer_backward_s);
  if (!(pass_s > 0)) return {};
  return {own.first_head_s / pass_s, own.last_head_s / pass_s};
}

std::optional<Candidate> head_balanced_candidate(const Scenario& s, const Estimate& own, double memory_headroom) {
  const ParallelConfig& p = s.parallel;
  const HeadWeights w = head_weights(p, own);
  if (p.pp < 2) return std::nullopt;
  std::vector<int> chunks = head_balanced_chunk_layers(s.model.layers, p.pp, p.vpp, w.embedding_layers, w.output_layers);
  if (chunks.empty()) return std::nullopt;
  const PipelineLayout layout(s.model, p);
  bool same = true;
  for (int v = 0; v < p.pp * p.vpp && same; ++v) same = layout.chunk_layers(v % p.pp, v / p.pp) == chunks[v];
  if (same) return std::nullopt;
  Scenario b = s;
  ParallelConfig& q = b.parallel;
  q.first_stage_layers = 0;
  q.last_stage_layers = 0;
  q.pipeline_layout = format_megatron_layout(chunks);
  q.pipeline_chunk_layers = std::make_shared<const std::vector<int>>(std::move(chunks));
  if (check_layout(b.model, q, b.cluster.gpus).has_value()) return std::nullopt;
  const MemoryBreakdown mem = memory_per_gpu(b.model, q, b.optimizations, hardware_profile(b));
  if (mem.total_bytes > (1.0 - memory_headroom) * mem.capacity_bytes) return std::nullopt;
  Candidate c{q, estimate(b)};
  if (!(c.estimate.iteration_time_s < own.iteration_time_s)) return std::nullopt;
  return c;
}

std::string stage_split_text(const ParallelConfig& p) {
  if (p.pipeline_chunk_layers != nullptr) {
    // Each rank's layers, runs of equal ranks as "10x3".
    const std::vector<int> sums = rank_layers(*p.pipeline_chunk_layers, p.pp);
    std::string out;
    for (size_t i = 0; i < sums.size();) {
      size_t j = i;
      while (j < sums.size() && sums[j] == sums[i]) ++j;
      out += fmt::format("{}{}{}", out.empty() ? "" : "+", sums[i], j - i > 1 ? fmt::format("x{}", j - i) : "");
      i = j;
    }
    return out;
  }
  if (p.first_stage_layers == 0 && p.last_stage_layers == 0) return "even";
  return fmt::format("{}...{}", p.first_stage_layers > 0 ? fmt::format("{}+", p.first_stage_layers) : "",
                     p.last_stage_layers > 0 ? fmt::format("+{}", p.last_stage_layers) : "");
}

std::string layout_text(const ParallelConfig& p) {
  return fmt::format("TP {}{} PP {}{} VPP {} DP {} mb {}{} ZeRO {} recompute {}", p.tp,
                     p.cp > 1 ? fmt::format(" CP {}", p.cp) : "", p.pp,
                     stage_split_text(p) != "even" ? fmt::format(" ({})", stage_split_text(p)) : "",
                     p.vpp, p.replicas(), p.micro_batch, p.sequence_parallel ? " SP" : "", p.zero_stage,
                     to_string(p.recompute));
}

RankingSpread ranking_spread(const std::vector<double>& mfus, double error_points) {
  RankingSpread out;
  out.error_points = error_points;
  if (mfus.empty()) return out;
  const double best = *std::max_element(mfus.begin(), mfus.end());
  const double worst = *std::min_element(mfus.begin(), mfus.end());
  out.spread_points = 100.0 * (best - worst);
  for (double m : mfus) {
    const bool within = 100.0 * (best - m) <= error_points + 1e-9;  // 100 x (0.55 - 0.50) is 5.000000000000004
    out.within.push_back(within);
    out.within_error += within;
  }
  return out;
}

std::string search_csv(const SearchResult& r, const std::vector<Estimate>& event) {
  std::string out =
      "rank,tp,pp,vpp,dp,micro_batch,zero_stage,recompute,sequence_parallel,mfu,iteration_time_s,"
      "memory_per_gpu_bytes,fits,event_mfu,event_iteration_time_s,cp,first_stage_layers,last_stage_layers,"
      "pipeline_layout\n";
  auto row = [&](const std::string& rank, const ParallelConfig& p, double mfu, double iteration_s, double memory_bytes,
                 bool fits, const Estimate* ev) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{:.6f},{:.6g},{:.0f},{},", rank, p.tp, p.pp, p.vpp, p.replicas(),
                       p.micro_batch, p.zero_stage, to_string(p.recompute), p.sequence_parallel ? 1 : 0, mfu,
                       iteration_s, memory_bytes, fits ? 1 : 0);
    if (ev != nullptr) {
      out += fmt::format("{:.6f},{:.6g}", ev->mfu, ev->iteration_time_s);
    } else {
      out += ",";
    }
    // The Megatron-Core layout string holds commas: quoted (RFC 4180).
    out += fmt::format(",{},{},{},{}\n", p.cp, p.first_stage_layers, p.last_stage_layers,
                       p.pipeline_layout.empty() ? "" : fmt::format("\"{}\"", p.pipeline_layout));
  };
  auto same = [](const ParallelConfig& a, const ParallelConfig& b) {
    return a.tp == b.tp && a.cp == b.cp && a.pp == b.pp && a.vpp == b.vpp && a.dp == b.dp && a.micro_batch == b.micro_batch &&
           a.sequence_parallel == b.sequence_parallel && a.zero_stage == b.zero_stage && a.recompute == b.recompute &&
           a.first_stage_layers == b.first_stage_layers && a.last_stage_layers == b.last_stage_layers &&
           a.pipeline_layout == b.pipeline_layout;
  };
  for (size_t i = 0; i < r.top.size(); ++i) {
    const Candidate& c = r.top[i];
    row(std::to_string(i + 1), c.parallel, c.estimate.mfu, c.estimate.iteration_time_s, c.estimate.memory.total_bytes,
        true, i < event.size() ? &event[i] : nullptr);
  }
  std::vector<const LayoutPoint*> rest;
  for (const LayoutPoint& q : r.points) {
    bool ranked = false;
    for (const Candidate& c : r.top) ranked = ranked || (q.fits && same(q.parallel, c.parallel));
    if (!ranked) rest.push_back(&q);
  }
  std::stable_sort(rest.begin(), rest.end(), [](const LayoutPoint* a, const LayoutPoint* b) { return a->mfu > b->mfu; });
  for (const LayoutPoint* q : rest) row("", q->parallel, q->mfu, q->iteration_time_s, q->memory_per_gpu_bytes, q->fits, nullptr);
  return out;
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
  std::string out = fmt::format("compute {:.1f}% of step", 100.0 * b.compute_s / t);
  for (int i = 0; i < 2 && i < static_cast<int>(parts.size()); ++i) {
    out += fmt::format(", {} {:.1f}%", parts[i].name, 100.0 * parts[i].s / t);
  }
  out += fmt::format(", memory {:.0f}/{:.0f} GB", c.estimate.memory.total_bytes / 1e9,
                     c.estimate.memory.capacity_bytes / 1e9);
  if (&c != &best) out += fmt::format("; {:.2f} MFU points behind #1", 100.0 * (best.estimate.mfu - c.estimate.mfu));
  return out;
}

std::vector<std::string> ranking_reasons(const SearchResult& r, const std::vector<Estimate>& refined) {
  std::vector<std::string> why;
  for (size_t i = 0; i < r.top.size(); ++i) {
    if (i < refined.size()) {
      const Candidate best{r.top[0].parallel, refined[0]};
      why.push_back(i == 0 ? explain(best, best) : explain(Candidate{r.top[i].parallel, refined[i]}, best));
    } else {
      why.push_back(explain(r.top[i], r.top[0]));
    }
  }
  return why;
}

RankingSpread ranking_spread(const SearchResult& r, const std::vector<Estimate>& refined) {
  std::vector<double> mfus;
  for (size_t i = 0; i < (refined.empty() ? r.top.size() : refined.size()); ++i)
    mfus.push_back(refined.empty() ? r.top[i].estimate.mfu : refined[i].mfu);
  return ranking_spread(mfus, refined.empty() ? kAnalyticalMfuErrorPoints : kEventMfuErrorPoints);
}

LayoutConstraints parse_layout_constraints(const std::string& text) {
  constexpr const char* kKeys = "tp, cp, pp, vpp, dp, micro_batch, zero_stage, sequence_parallel, recompute";
  LayoutConstraints f;
  std::set<std::string> seen;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (eq == std::string::npos) throw std::invalid_argument(fmt::format("'{}' is not KEY=VALUE ({})", item, kKeys));
    const std::string text_value = item.substr(eq + 1);
    if (!seen.insert(key).second) throw std::invalid_argument(key + " is given twice");
    if (key == "sequence_parallel") {
      if (text_value != "true" && text_value != "false") {
        throw std::invalid_argument(fmt::format("sequence_parallel={}: expected true or false", text_value));
      }
      f.sequence_parallel = text_value == "true";
      continue;
    }
    if (key == "recompute") {
      for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kSelectiveOp})
        if (text_value == to_string(r)) f.recompute = r;
      if (!f.recompute) {
        throw std::invalid_argument(
            fmt::format("recompute={}: expected none, selective, full or selective_op", text_value));
      }
      continue;
    }
    int value = 0;
    try {
      size_t used = 0;
      value = std::stoi(text_value, &used);
      if (used != text_value.size()) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument(fmt::format("'{}' is not KEY=INTEGER ({})", item, kKeys));
    }
    int* slot = key == "tp" ? &f.tp : key == "cp" ? &f.cp : key == "pp" ? &f.pp : key == "vpp" ? &f.vpp : key == "dp" ? &f.dp
              : key == "micro_batch" ? &f.micro_batch : key == "zero_stage" ? &f.zero_stage : nullptr;
    if (slot == nullptr) throw std::invalid_argument(fmt::format("unknown dimension '{}' ({})", key, kKeys));
    if (value < (key == "zero_stage" ? 0 : 1) || (key == "zero_stage" && value > 3)) {
      throw std::invalid_argument(key + "=" + std::to_string(value) + " is out of range");
    }
    *slot = value;
  }
  return f;
}

std::optional<std::string> unmet_constraints_reason(const Scenario& s, int gpus, const LayoutConstraints& fixed) {
  const std::vector<ParallelConfig> layouts = enumerate_layouts(s, gpus);
  const std::pair<const char*, int> dims[] = {{"tp", fixed.tp},   {"cp", fixed.cp}, {"pp", fixed.pp},
                                              {"vpp", fixed.vpp}, {"dp", fixed.dp}, {"micro_batch", fixed.micro_batch},
                                              {"zero_stage", fixed.zero_stage}};
  auto value_of = [](const ParallelConfig& p, const std::string& key) {
    return key == "tp" ? p.tp : key == "cp" ? p.cp : key == "pp" ? p.pp : key == "vpp" ? p.vpp
         : key == "dp" ? p.replicas() : key == "micro_batch" ? p.micro_batch : p.zero_stage;
  };
  for (const auto& [key, want] : dims) {
    if (want < (std::string(key) == "zero_stage" ? 0 : 1)) continue;  // not fixed
    std::set<int> values;
    for (const ParallelConfig& p : layouts) values.insert(value_of(p, key));
    if (values.count(want)) continue;
    return fmt::format("{}={}: the layouts enumerated for {} on {} GPUs have {} {}", key, want, s.model.name, gpus, key,
                       fmt::join(values, ", "));
  }
  if (fixed.sequence_parallel) {
    std::set<std::string> values;
    for (const ParallelConfig& p : layouts) values.insert(p.sequence_parallel ? "true" : "false");
    if (!values.count(*fixed.sequence_parallel ? "true" : "false")) {
      return fmt::format("sequence_parallel={}: the layouts enumerated for {} on {} GPUs have sequence_parallel {}",
                         *fixed.sequence_parallel, s.model.name, gpus, fmt::join(values, ", "));
    }
  }
  if (fixed.recompute) {
    std::set<std::string> values;
    for (const ParallelConfig& p : layouts) values.insert(to_string(p.recompute));
    if (!values.count(to_string(*fixed.recompute))) {
      return fmt::format("recompute={}: the layouts enumerated for {} on {} GPUs have recompute {}",
                         to_string(*fixed.recompute), s.model.name, gpus, fmt::join(values, ", "));
    }
  }
  for (const ParallelConfig& p : layouts)
    if (fixed.admits(p)) return std::nullopt;
  if (fixed.tp > 0 && fixed.pp > 0 && fixed.dp > 0) {
    const int product = fixed.tp * fixed.pp * fixed.dp * std::max(fixed.cp, 1);
    if (fixed.cp > 0 ? product != gpus : gpus % product != 0) {
      return fmt::format("tp x {}pp x dp = {}, which {} the {} GPUs", fixed.cp > 0 ? "cp x " : "", product,
                         fixed.cp > 0 ? "is not" : "does not divide", gpus);
    }
  }
  return std::string("each fixed value occurs in some enumerated layout, but no layout has them all");
}

}  // namespace megascale::model
