// cli/report.h: rendering of estimates as JSON (machine) and text (people).
//
// JSON keys (DESIGN.md contract 4): scenario, fidelity, gpus, mfu (fraction),
// iteration_time_s, tokens_per_s, bubble_fraction, memory_per_gpu_bytes,
// memory_capacity_bytes, fits_in_memory, model_flops_per_iteration, breakdown_s
// {data, compute, recompute, tp_exposed, bubble, pp_exposed, dp_exposed,
// optimizer}, memory_bytes {parameters, gradients, optimizer, activations, other},
// parallel {tp, pp, vpp, dp, micro_batch, global_batch, microbatches,
// sequence_parallel, zero_stage, recompute}, optimizations {...}.
#pragma once

#include <string>

#include "cli/json.h"
#include "model/config.h"
#include "model/estimator.h"

namespace megascale::cli {

JsonObject parallel_json(const model::ParallelConfig& p);
// `fidelity`: "analytical" (model::estimate) or "event" (sim/).
JsonObject estimate_json(const model::Scenario& s, const model::Estimate& e,
                         const std::string& fidelity = "analytical");

// Multi-line human summary of one estimate.
std::string estimate_text(const model::Scenario& s, const model::Estimate& e);

// Two estimates side by side (baseline | improved) with the speedup.
std::string compare_text(const model::Scenario& a, const model::Estimate& ea,
                         const model::Scenario& b, const model::Estimate& eb,
                         const std::string& fidelity = "analytical");

}  // namespace megascale::cli
