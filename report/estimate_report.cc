// report/estimate_report.cc: estimate -> JSON / text.
#include "report/estimate_report.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/number_text.h"
#include "model/breakdown_parts.h"
#include "model/engine_ops.h"
#include "model/fused_overlap.h"
#include "model/job_schedule.h"
#include "model/megatron_layout.h"
#include "model/pipeline_layout.h"
#include "model/profile.h"

namespace megascale::report {

namespace {

// Each pipeline rank's transformer layers under a free-form layout.
std::vector<int> stage_layers(const model::ParallelConfig& p) {
  return model::rank_layers(*p.pipeline_chunk_layers, p.pp);
}

}  // namespace

std::string megatron_layout_text(const model::Scenario& s) {
  const model::PipelineLayout layout(s.model, s.parallel);
  if (layout.even()) return "";
  std::vector<int> stages;
  for (int v = 0; v < s.parallel.pp * s.parallel.vpp; ++v) {
    stages.push_back(layout.chunk_layers(v % s.parallel.pp, v / s.parallel.pp));
  }
  return model::format_megatron_layout(stages);
}

std::string layout_line(const model::ParallelConfig& p) {
  // Megatron's default rank order goes unsaid; the other is named.
  std::string order = p.rank_order == model::RankOrder::kTpCpDpPp
                          ? ""
                          : std::string("  ranks ") + model::to_string(p.rank_order);
  // Uneven first / last stages (model/pipeline_layout.h) are named; even ones go unsaid.
  if (p.first_stage_layers > 0 || p.last_stage_layers > 0) {
    auto given = [](int n) { return n > 0 ? std::to_string(n) : std::string("even"); };
    order += "  stage layers first " + given(p.first_stage_layers) + " last " + given(p.last_stage_layers);
  }
  // A free-form layout (model/megatron_layout.h): every stage's layers.
  if (p.pipeline_chunk_layers != nullptr) order += fmt::format("  stage layers {}", fmt::join(stage_layers(p), "+"));
  if (p.cp > 1 && p.cp_comm != model::CpComm::kP2p) order += fmt::format("  CP {}", model::to_string(p.cp_comm));
  if (p.cp > 1) {  // the user's figures (CP is folded into dp and global_batch, model/config.h)
    return fmt::format("TP {}  CP {}  PP {}  VPP {}  DP {}  micro-batch {}  global batch {}{}  ZeRO-{}  recompute {}{}",
                       p.tp, p.cp, p.pp, p.vpp, p.replicas(), p.micro_batch, p.global_batch / p.cp,
                       p.sequence_parallel ? "  SP" : "", p.zero_stage, model::to_string(p.recompute), order);
  }
  return fmt::format("TP {}  PP {}  VPP {}  DP {}  micro-batch {}  global batch {}{}  ZeRO-{}  recompute {}{}", p.tp,
                     p.pp, p.vpp, p.dp, p.micro_batch, p.global_batch, p.sequence_parallel ? "  SP" : "",
                     p.zero_stage, model::to_string(p.recompute), order);
}

std::string report_json(const Json& body) { return base::with_header(body).dump(); }

Json parallel_json(const model::ParallelConfig& p) {
  Json j;
  // The user's figures; with CP, dp_cp is the gradient group CP is folded into.
  j["tp"] = p.tp;
  j["cp"] = p.cp;
  j["pp"] = p.pp;
  j["vpp"] = p.vpp;
  if (p.first_stage_layers > 0) j["first_stage_layers"] = p.first_stage_layers;
  if (p.last_stage_layers > 0) j["last_stage_layers"] = p.last_stage_layers;
  if (p.pipeline_chunk_layers != nullptr) {
    j["pipeline_layout"] = p.pipeline_layout;
    j["stage_layers"] = stage_layers(p);
  }
  j["dp"] = p.replicas();
  if (p.cp > 1) {
    j["dp_cp"] = p.dp;
    j["cp_comm"] = model::to_string(p.cp_comm);
  }
  j["micro_batch"] = p.micro_batch;
  j["global_batch"] = p.global_batch / p.cp;
  j["microbatches"] = p.microbatches();
  j["sequence_parallel"] = p.sequence_parallel;
  j["zero_stage"] = p.zero_stage;
  j["recompute"] = model::to_string(p.recompute);
  j["rank_order"] = model::to_string(p.rank_order);
  return j;
}

Json estimate_json(const model::Scenario& s, const model::Estimate& e, const std::string& fidelity) {
  Json breakdown;
  for (const model::BreakdownPart& part : model::kBreakdownParts) breakdown[part.key] = e.breakdown.*part.seconds;
  Json memory;
  memory["parameters"] = e.memory.parameters_bytes;
  memory["parameters_fp8_weights"] = e.memory.fp8_weight_bytes;  // of "parameters", not to be added to it
  memory["gradients"] = e.memory.gradients_bytes;
  memory["optimizer"] = e.memory.optimizer_bytes;
  memory["activations"] = e.memory.activations_bytes;
  memory["other"] = e.memory.other_bytes;
  // Parts of "other" (not to be added to it): the loss's logits with one
  // pipeline stage, and the re-run layer a recompute's backward holds; never
  // live at once, "other" counts the larger.
  memory["other_loss_logits"] = e.memory.loss_logits_bytes;
  memory["other_rerun_layer"] = e.memory.rerun_layer_bytes;
  const model::Optimizations& o = s.optimizations;
  Json opt;
  opt["preset"] = o.preset;
  opt["tp_overlap"] = o.tp_overlap;
  opt["pp_overlap"] = o.pp_overlap;
  opt["dp_overlap"] = o.dp_overlap;
  opt["dp_overlap_param_gather"] = o.overlaps_param_gather();
  opt["efficient_operators"] = o.efficient_operators;
  opt["eager_elementwise"] = o.eager_elementwise;
  opt["data_pipeline"] = o.data_pipeline;
  opt["fused_attention"] = o.fused_attention;
  opt["attention_kernel"] = model::to_string(o.attention_kernel);
  opt["fp8"] = o.fp8;
  opt["fp8_recipe"] = model::to_string(o.fp8_recipe);
  opt["fp8_param_gather"] = o.fp8_param_gather;
  // The bucket size used (the preset's -1 resolved to Megatron-Core's default),
  // and the buckets each chunk's DP collectives are split into.
  opt["dp_bucket_params"] = model::effective_dp_bucket_params(s);
  opt["dp_buckets_per_chunk"] = model::dp_buckets_per_chunk(s);
  opt["cross_entropy"] = model::to_string(o.cross_entropy);
  opt["grad_reduce_dtype"] = model::to_string(o.grad_reduce_dtype);
  opt["optimizer_state_dtype"] = model::to_string(o.optimizer_state_dtype);
  opt["exp_avg_dtype"] = model::to_string(o.exp_avg_dtype);
  opt["exp_avg_sq_dtype"] = model::to_string(o.exp_avg_sq_dtype);
  opt["main_params_dtype"] = model::to_string(o.main_params_dtype);
  opt["grad_accumulation"] = model::to_string(o.grad_accumulation);
  opt["tp_overlap_comm"] = model::to_string(o.tp_overlap_comm);
  opt["tp_overlap_sm_margin"] = o.tp_overlap_sm_margin;
  // Each userbuffers GEMM overlap as modelled (TE's defaults and the
  // scenario's [optimizations.userbuffers] settings), used under
  // tp_overlap_comm = "userbuffers".
  Json ub = Json::object();
  for (const model::UbGemm& g : model::kUbGemms) {
    const model::UbOverlap u = model::ub_overlap(o, g.name, s.parallel.tp);
    ub[std::string(g.name)] = {{"method", model::to_string(u.method)},
                               {"num_sm", u.num_sm},
                               {"num_splits", u.num_splits},
                               {"set_sm_margin", u.sm_margin}};
  }
  opt["userbuffers"] = ub;
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
  // MFU's denominator: the profile's dense BF16 peak, also under FP8 (whose
  // GEMMs may then take MFU above 1: model/throughput.h).
  j["mfu_peak_tflops"] = model::hardware_profile(s).peak_tflops;
  j["bubble_fraction"] = e.bubble_fraction;
  j["bubble_share_of_step"] = e.bubble_share_of_step();
  j["memory_per_gpu_bytes"] = e.memory.total_bytes;
  j["memory_capacity_bytes"] = e.memory.capacity_bytes;
  j["fits_in_memory"] = e.memory.fits();
  // ZeRO 2/3 over several micro-batches: what whole gradients would add (model/memory.h).
  j["unsharded_gradient_extra_bytes"] =
      model::unsharded_gradient_extra_bytes(s.model, s.parallel, s.optimizations, model::hardware_profile(s));
  j["model_flops_per_iteration"] = e.model_flops;
  j["breakdown_s"] = breakdown;
  j["memory_bytes"] = memory;
  j["parallel"] = parallel_json(s.parallel);
  if (const std::string text = megatron_layout_text(s); !text.empty()) j["parallel"]["megatron_layout"] = text;
  j["optimizations"] = opt;
  return j;
}

std::string head_balanced_text(const model::Scenario& s, const model::Estimate& own, const model::Candidate& balanced) {
  const model::HeadWeights w = model::head_weights(s.parallel, own);
  const double own_s = own.iteration_time_s;
  const double b_s = balanced.estimate.iteration_time_s;
  return fmt::format(
      "  heads balanced: the embedding weighs {:.2f} and the output layer {:.2f} layer passes; stages {}\n"
      "    Megatron-Core --pipeline-model-parallel-layout \"{}\"\n"
      "    {:.3f} s against this split's {:.3f} s ({:+.1f}%; closed form, both)\n",
      w.embedding_layers, w.output_layers, model::stage_split_text(balanced.parallel), balanced.parallel.pipeline_layout,
      b_s, own_s, 100.0 * (b_s / own_s - 1.0));
}

Json head_balanced_json(const model::Scenario& s, const model::Estimate& own, const model::Candidate& balanced) {
  const model::HeadWeights w = model::head_weights(s.parallel, own);
  Json j;
  j["megatron_layout"] = balanced.parallel.pipeline_layout;
  j["stage_layers"] = stage_layers(balanced.parallel);
  j["head_layer_passes"] = {{"embedding", w.embedding_layers}, {"output", w.output_layers}};
  j["iteration_time_s"] = balanced.estimate.iteration_time_s;
  j["own_iteration_time_s"] = own.iteration_time_s;
  j["fidelity"] = "analytical";
  return j;
}

std::string estimate_text(const model::Scenario& s, const model::Estimate& e) {
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "{} ({})\n", s.name, s.source);
  fmt::format_to(o, "  {} x {}, {}\n", s.cluster.gpus, s.hardware.gpu, layout_line(s.parallel));
  // An uneven split as Megatron-Core takes it (a Meta-style split whose end
  // stages do not divide by vpp has no --decoder-first/last-pipeline-num-layers
  // spelling; the layout string spells every split).
  if (const std::string text = megatron_layout_text(s); !text.empty()) {
    fmt::format_to(o, "  Megatron-Core --pipeline-model-parallel-layout \"{}\"\n", text);
  }
  const model::GpuProfile& profile = model::hardware_profile(s);
  if (!s.hardware.profile.empty()) fmt::format_to(o, "  profile {}\n", s.hardware.profile);
  if (const double share = model::time_share(s, profile); share > 1) {
    fmt::format_to(o, "  note: {} ranks per machine on the profile's {} cores: compute stretched x{:.2f} for time-sharing;\n",
                   std::min(s.cluster.gpus, s.hardware.gpus_per_node), profile.cores, share);
    out += "        MPI waits of descheduled ranks are not modelled, so this is optimistic\n";
  }
  // The bubble as MegaScale counts it, against the compute ((P-1)/(V*M) ideal);
  // its share of the step is the breakdown's `bubble` line below.
  fmt::format_to(o, "  MFU {:.1f}%   iteration {} s   {:.0f} tokens/s   bubble {:.2f}% of compute\n", 100 * e.mfu,
                 base::fixed(e.iteration_time_s, 3), e.tokens_per_s, 100 * e.bubble_fraction);
  // Under FP8 MFU stays against the BF16 peak (model/throughput.h) and may pass 100%.
  if (s.optimizations.fp8) {
    fmt::format_to(o,
                   "  (MFU against the dense BF16 peak, {:.0f} TFLOP/s; FP8 GEMMs run up to x{:.2f} faster; {} "
                   "scaling)\n",
                   profile.peak_tflops, profile.fp8_gemm_speedup(), model::to_string(s.optimizations.fp8_recipe));
  }
  fmt::format_to(o, "  memory {}{}\n", e.memory.describe(), e.memory.fits() ? "" : "  ** DOES NOT FIT **");
  if (const double extra = model::unsharded_gradient_extra_bytes(s.model, s.parallel, s.optimizations, profile);
      extra > 0) {
    fmt::format_to(o,
                   "  note: ZeRO-{} counts 1/{} of the gradients but reduce-scatters them once per step; with {} "
                   "micro-batches per replica\n"
                   "        DeepSpeed and FSDP reduce after every backward ({}x the gradient reduce-scatters) and "
                   "Megatron's\n"
                   "        distributed optimizer keeps them whole (+{:.1f} GB): the time or the memory is optimistic (scenarios/README.md)\n",
                   s.parallel.zero_stage, s.parallel.dp, s.parallel.microbatches(), s.parallel.microbatches(),
                   extra / 1e9);
  }
  out += "  where the time goes (critical path):\n";
  for (const model::BreakdownPart& part : model::kBreakdownParts) {
    const double s_part = e.breakdown.*part.seconds;
    fmt::format_to(o, "    {:<15} {:9.3f} s  {:5.1f}%\n", part.key, s_part, 100 * s_part / e.iteration_time_s);
  }
  return out;
}

std::string compare_text(const model::Scenario& a, const model::Estimate& ea, const model::Scenario& b,
                         const model::Estimate& eb, const std::string& fidelity) {
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "{} x {}, model {} ({} layers, hidden {}), global batch {}\n", a.cluster.gpus, a.hardware.gpu,
                 a.model.name, a.model.layers, a.model.hidden, a.parallel.global_batch / a.parallel.cp);  // the user's
  fmt::format_to(o, "  layout: {}\n", layout_line(a.parallel));
  if (b.model.block != a.model.block || b.model.attention_window != a.model.attention_window) {
    fmt::format_to(o, "  MegaScale model: {} block, attention window {} (0 = full)\n", model::to_string(b.model.block),
                   b.model.attention_window);
  }
  fmt::format_to(o, "{:<22} {:>14} {:>14}\n", "", "Megatron-LM", "MegaScale");
  fmt::format_to(o, "{:<22} {:13.1f}% {:13.1f}%\n", "MFU", 100 * ea.mfu, 100 * eb.mfu);
  fmt::format_to(o, "{:<22} {:14.3f} {:14.3f}\n", "iteration time (s)", ea.iteration_time_s, eb.iteration_time_s);
  fmt::format_to(o, "{:<22} {:14.0f} {:14.0f}\n", "tokens/s", ea.tokens_per_s, eb.tokens_per_s);
  fmt::format_to(o, "{:<22} {:13.2f}% {:13.2f}%\n", "bubble / compute", 100 * ea.bubble_fraction, 100 * eb.bubble_fraction);
  fmt::format_to(o, "{:<22} {:14.1f} {:14.1f}\n", "memory/GPU (GB)", ea.memory.total_bytes / 1e9,
                 eb.memory.total_bytes / 1e9);
  // A system that needs more than the GPU holds is timed as if it fitted: say so
  // where the table shows it, as `simulate` does.
  for (const auto& [name, e] : {std::pair<const char*, const model::Estimate*>{"Megatron-LM", &ea},
                                std::pair<const char*, const model::Estimate*>{"MegaScale", &eb}}) {
    if (!e->memory.fits()) {
      fmt::format_to(o, "  ** {} DOES NOT FIT: {:.1f} GB per GPU of {:.1f} GB (timed as if it did) **\n", name,
                     e->memory.total_bytes / 1e9, e->memory.capacity_bytes / 1e9);
    }
  }
  for (const model::BreakdownPart& part : model::kBreakdownParts) {
    fmt::format_to(o, "  {:<20} {:14.3f} {:14.3f}\n", std::string(part.key) + " (s)", ea.breakdown.*part.seconds,
                   eb.breakdown.*part.seconds);
  }
  fmt::format_to(o, "{:<22} {:29.2f}x\n", "speedup", ea.iteration_time_s / eb.iteration_time_s);
  // The count of model/op_cost.h model_flops_per_iteration, whatever the
  // layer (SwiGLU, GQA, untied head); the GPT closed form only for a GPT.
  fmt::format_to(o,
                 "({} fidelity; MFU counts 6 T W + 12 T s h L + 6 T h V FLOPs per iteration: T tokens, W the layers' "
                 "GEMM weights; 72 B s L h^2 (1 + s/6h + V/12Lh) for a GPT)\n",
                 fidelity);
  return out;
}

base::Json compare_json(const model::Scenario& a, const model::Estimate& ea, const model::Scenario& b,
                        const model::Estimate& eb, const std::string& fidelity) {
  base::Json j;
  j["megatron"] = estimate_json(a, ea, fidelity);
  j["megascale"] = estimate_json(b, eb, fidelity);
  j["speedup"] = ea.iteration_time_s / eb.iteration_time_s;
  j["fidelity"] = fidelity;
  return j;
}

}  // namespace megascale::report
