// cli/report.cc: estimate -> JSON / text.
#include "cli/report.h"

#include <cstdarg>
#include <cstdio>
#include <vector>

#include "model/engine_ops.h"
#include "model/profile.h"

namespace megascale::cli {
namespace {

struct Row {
  const char* name;
  double s;
};

std::vector<Row> breakdown_rows(const model::TimeBreakdown& b) {
  return {{"data", b.data_s},
          {"compute", b.compute_s},
          {"recompute", b.recompute_s},
          {"tp_exposed", b.tp_exposed_s},
          {"bubble", b.bubble_s},
          {"pp_exposed", b.pp_exposed_s},
          {"dp_exposed", b.dp_exposed_s},
          {"embedding_sync", b.embedding_sync_s},
          {"grad_norm", b.grad_norm_s},
          {"optimizer", b.optimizer_s},
          {"host", b.host_s}};
}

std::string line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return std::string(buf) + "\n";
}

std::string layout(const model::ParallelConfig& p) {
  char buf[240];
  if (p.cp > 1) {  // the user's figures (CP is folded into dp and global_batch, model/config.h)
    std::snprintf(buf, sizeof buf,
                  "TP %d  CP %d  PP %d  VPP %d  DP %d  micro-batch %d  global batch %d%s  ZeRO-%d  recompute %s",
                  p.tp, p.cp, p.pp, p.vpp, p.replicas(), p.micro_batch, p.global_batch / p.cp,
                  p.sequence_parallel ? "  SP" : "", p.zero_stage, model::to_string(p.recompute));
    return buf;
  }
  std::snprintf(buf, sizeof buf, "TP %d  PP %d  VPP %d  DP %d  micro-batch %d  global batch %d%s  ZeRO-%d  recompute %s",
                p.tp, p.pp, p.vpp, p.dp, p.micro_batch, p.global_batch,
                p.sequence_parallel ? "  SP" : "", p.zero_stage, model::to_string(p.recompute));
  return buf;
}

}  // namespace

std::string report_json(const Json& body) { return base::with_header(body).dump(); }

Json parallel_json(const model::ParallelConfig& p) {
  Json j;
  // The user's figures; with CP, dp_cp is the gradient group CP is folded into.
  j["tp"] = p.tp;
  j["cp"] = p.cp;
  j["pp"] = p.pp;
  j["vpp"] = p.vpp;
  j["dp"] = p.replicas();
  if (p.cp > 1) {
    j["dp_cp"] = p.dp;
  }
  j["micro_batch"] = p.micro_batch;
  j["global_batch"] = p.global_batch / p.cp;
  j["microbatches"] = p.microbatches();
  j["sequence_parallel"] = p.sequence_parallel;
  j["zero_stage"] = p.zero_stage;
  j["recompute"] = model::to_string(p.recompute);
  return j;
}

Json estimate_json(const model::Scenario& s, const model::Estimate& e, const std::string& fidelity) {
  Json breakdown;
  for (const Row& r : breakdown_rows(e.breakdown)) breakdown[r.name] = r.s;
  Json memory;
  memory["parameters"] = e.memory.parameters_bytes;
  memory["gradients"] = e.memory.gradients_bytes;
  memory["optimizer"] = e.memory.optimizer_bytes;
  memory["activations"] = e.memory.activations_bytes;
  memory["other"] = e.memory.other_bytes;
  const model::Optimizations& o = s.optimizations;
  Json opt;
  opt["preset"] = o.preset;
  opt["tp_overlap"] = o.tp_overlap;
  opt["pp_overlap"] = o.pp_overlap;
  opt["dp_overlap"] = o.dp_overlap;
  opt["efficient_operators"] = o.efficient_operators;
  opt["data_pipeline"] = o.data_pipeline;
  opt["optimizer"] = model::to_string(o.optimizer);

  Json j;
  j["scenario"] = s.name;
  j["source"] = s.source;
  j["fidelity"] = fidelity;
  j["gpu"] = s.hardware.gpu;
  j["gpus"] = s.cluster.gpus;
  j["mfu"] = e.mfu;
  j["iteration_time_s"] = e.iteration_time_s;
  j["tokens_per_s"] = e.tokens_per_s;
  j["bubble_fraction"] = e.bubble_fraction;
  j["memory_per_gpu_bytes"] = e.memory.total_bytes;
  j["memory_capacity_bytes"] = e.memory.capacity_bytes;
  j["fits_in_memory"] = e.memory.fits();
  j["model_flops_per_iteration"] = e.model_flops;
  j["breakdown_s"] = breakdown;
  j["memory_bytes"] = memory;
  j["parallel"] = parallel_json(s.parallel);
  j["optimizations"] = opt;
  return j;
}

std::string estimate_text(const model::Scenario& s, const model::Estimate& e) {
  std::string out;
  out += line("%s (%s)", s.name.c_str(), s.source.c_str());
  out += line("  %d x %s, %s", s.cluster.gpus, s.hardware.gpu.c_str(), layout(s.parallel).c_str());
  const model::GpuProfile& profile = model::hardware_profile(s);
  if (!s.hardware.profile.empty()) out += line("  profile %s", s.hardware.profile.c_str());
  if (const double share = model::time_share(s, profile); share > 1) {
    out += line("  note: %d ranks per machine on the profile's %d cores: compute stretched x%.2f for time-sharing;",
                std::min(s.cluster.gpus, s.hardware.gpus_per_node), profile.cores, share);
    out += line("        MPI waits of descheduled ranks are not modelled, so this is optimistic");
  }
  out += line("  MFU %.1f%%   iteration %.3f s   %.0f tokens/s   bubble %.2f%%", 100 * e.mfu,
              e.iteration_time_s, e.tokens_per_s, 100 * e.bubble_fraction);
  out += line("  memory %s%s", e.memory.describe().c_str(), e.memory.fits() ? "" : "  ** DOES NOT FIT **");
  out += line("  where the time goes (critical path):");
  for (const Row& r : breakdown_rows(e.breakdown)) {
    out += line("    %-15s %9.3f s  %5.1f%%", r.name, r.s, 100 * r.s / e.iteration_time_s);
  }
  return out;
}

std::string compare_text(const model::Scenario& a, const model::Estimate& ea,
                         const model::Scenario& b, const model::Estimate& eb, const std::string& fidelity) {
  std::string out;
  out += line("%d x %s, model %s (%d layers, hidden %d), global batch %d", a.cluster.gpus,
              a.hardware.gpu.c_str(), a.model.name.c_str(), a.model.layers, a.model.hidden,
              a.parallel.global_batch);
  out += line("  layout: %s", layout(a.parallel).c_str());
  if (b.model.block != a.model.block || b.model.attention_window != a.model.attention_window) {
    out += line("  MegaScale model: %s block, attention window %d (0 = full)",
                model::to_string(b.model.block), b.model.attention_window);
  }
  out += line("%-22s %14s %14s", "", "Megatron-LM", "MegaScale");
  out += line("%-22s %13.1f%% %13.1f%%", "MFU", 100 * ea.mfu, 100 * eb.mfu);
  out += line("%-22s %14.3f %14.3f", "iteration time (s)", ea.iteration_time_s, eb.iteration_time_s);
  out += line("%-22s %14.0f %14.0f", "tokens/s", ea.tokens_per_s, eb.tokens_per_s);
  out += line("%-22s %13.2f%% %13.2f%%", "bubble", 100 * ea.bubble_fraction, 100 * eb.bubble_fraction);
  out += line("%-22s %14.1f %14.1f", "memory/GPU (GB)", ea.memory.total_bytes / 1e9, eb.memory.total_bytes / 1e9);
  const std::vector<Row> ra = breakdown_rows(ea.breakdown);
  const std::vector<Row> rb = breakdown_rows(eb.breakdown);
  for (size_t i = 0; i < ra.size(); ++i) {
    out += line("  %-20s %14.3f %14.3f", (std::string(ra[i].name) + " (s)").c_str(), ra[i].s, rb[i].s);
  }
  out += line("%-22s %29.2fx", "speedup", ea.iteration_time_s / eb.iteration_time_s);
  out += line("(%s fidelity; MFU counts 72 B s L h^2 (1 + s/6h + V/12Lh) FLOPs per iteration)",
              fidelity.c_str());
  return out;
}

}  // namespace megascale::cli
