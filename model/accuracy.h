// model/accuracy.h: how far the MFU predictions are from published
// measurements, as `megascale validate` measured them, for the reports that
// must say when the model cannot tell two answers apart (`megascale search`).
//
// defines: kAnalyticalMfuErrorPoints, kEventMfuErrorPoints, kMfuErrorSource
//
// Source: results/validation.md ("Summary", column "Table 2 mean"): the mean
// absolute error in MFU percentage points of the 16 MegaScale NSDI'24 Table 2
// runs (175B, 256 to 12,288 GPUs, Megatron-LM and MegaScale), per fidelity.
// tests/model/accuracy_test.cc reads that file and fails when it and these
// figures disagree (after `megascale validate --write`, update them here).
#pragma once

namespace megascale::model {

// Analytical estimator (model/estimator.h): the fidelity `search` ranks with.
inline constexpr double kAnalyticalMfuErrorPoints = 3.25;
// Event-level simulation (sim/): the fidelity of `search --refine`.
inline constexpr double kEventMfuErrorPoints = 3.61;

inline constexpr const char* kMfuErrorSource =
    "mean absolute MFU error against MegaScale Table 2, results/validation.md";

}  // namespace megascale::model
