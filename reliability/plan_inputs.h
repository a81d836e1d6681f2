// reliability/plan_inputs.h: what `megascale plan` feeds the run model besides
// the scenario as written: the sweeps, the scenario scaled to another GPU count
// (the GPU sweep), and every recovery input with its value and where it comes from.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "model/scenario.h"

namespace megascale::reliability {

// `s` on `gpus` GPUs: TP and PP kept, DP = gpus / (TP x PP), the global batch
// kept (strong scaling, as MegaScale Table 2); explicit [failures] links /
// switches counts scale with the GPUs. Throws std::invalid_argument naming the
// count and the reason when TP x PP does not divide it or the layout is invalid.
model::Scenario scaled_to_gpus(const model::Scenario& s, int gpus);

// What `megascale plan --sweep` varies: "checkpoint_interval=5m,15m,60m"
// (durations, kept in seconds) or "gpus=1536,3072" (GPU counts). parse_sweep
// throws std::invalid_argument saying what is wrong with `spec`.
struct Sweep {
  std::string quantity;        // "checkpoint_interval" | "gpus"
  std::vector<double> values;  // seconds | GPU counts
};
Sweep parse_sweep(const std::string& spec);

// One input behind the recovery figures, its value as used and where it comes
// from: a published source, "assumption" (no published figure) or "scenario"
// (the file sets it).
struct Assumption {
  std::string key, value, source;
};

std::vector<Assumption> recovery_assumptions(const model::Scenario& s);

}  // namespace megascale::reliability
