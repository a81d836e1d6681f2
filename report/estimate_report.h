// report/estimate_report.h: one estimate (model/estimator.h) as JSON (machine)
// and text (people); two side by side (`megascale compare`).
//
// JSON keys (DESIGN.md contract 4): scenario, fidelity, gpus, mfu (fraction),
// iteration_time_s, tokens_per_s, bubble_fraction, memory_per_gpu_bytes,
// memory_capacity_bytes, fits_in_memory, model_flops_per_iteration, breakdown_s
// {model/breakdown_parts.h}, memory_bytes {parameters, gradients, optimizer,
// activations, other}, parallel {tp, pp, vpp, dp, micro_batch, global_batch,
// microbatches, sequence_parallel, zero_stage, recompute}, optimizations {...}.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "base/json.h"
#include "model/config.h"
#include "model/estimator.h"
#include "model/search.h"

namespace megascale::report {

using base::Json;

// {"schema_version", "tool_version", then body's keys} as one line of JSON:
// what every `--json` report prints (base/json.h).
std::string report_json(const Json& body);

Json parallel_json(const model::ParallelConfig& p);
// `fidelity`: "analytical" (model::estimate) or "event" (sim/).
Json estimate_json(const model::Scenario& s, const model::Estimate& e, const std::string& fidelity = "analytical");

// "TP 8  PP 4  VPP 1  DP 2  micro-batch 1  global batch 8  ZeRO-1  recompute none":
// the user's figures (with CP, DP and the global batch without it folded in).
std::string layout_line(const model::ParallelConfig& p);

// An uneven pipeline split as a Megatron-Core --pipeline-model-parallel-layout
// string (model/megatron_layout.h), "" for an even one.
std::string megatron_layout_text(const model::Scenario& s);

// The heads-balanced alternative to s's split (model/search.h
// head_balanced_candidate), both timed by the closed form: a line of text
// with the heads' weight, the Megatron-Core layout string and the time against
// s's own; and as JSON {megatron_layout, stage_layers,
// head_layer_passes {embedding, output}, iteration_time_s,
// own_iteration_time_s, fidelity: "analytical"}.
std::string head_balanced_text(const model::Scenario& s, const model::Estimate& own, const model::Candidate& balanced);
Json head_balanced_json(const model::Scenario& s, const model::Estimate& own, const model::Candidate& balanced);

// Multi-line human summary of one estimate.
std::string estimate_text(const model::Scenario& s, const model::Estimate& e);

// Two estimates side by side (baseline | improved) with the speedup.
std::string compare_text(const model::Scenario& a, const model::Estimate& ea, const model::Scenario& b,
                         const model::Estimate& eb, const std::string& fidelity = "analytical");
// The same as JSON: {"megatron": estimate, "megascale": estimate, "speedup", "fidelity"}.
base::Json compare_json(const model::Scenario& a, const model::Estimate& ea, const model::Scenario& b,
                        const model::Estimate& eb, const std::string& fidelity);

}  // namespace megascale::report
