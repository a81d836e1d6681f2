// model/system_preset.h: a job as one of the two systems MegaScale (NSDI'24)
// compares, in one place for `megascale compare` (built-in and FILE) and the
// built-in default scenario.
//
// defines: as_system
//
// "megatron": Megatron-LM as the paper's baseline (Table 2): every section 3
//   switch off (Optimizations::megatron()), the sequential transformer block,
//   full causal attention, Adam.
// "megascale": every section 3 technique (Optimizations::megascale()), the
//   parallel transformer block and sliding-window attention (section 3.1), LAMB
//   (section 3.1). The paper does not print its window: a job's own window is
//   kept; without one, half the sequence (1,024 for its 2,048-token samples) is
//   our assumption, the same as scenarios/paper/.
// The model's size, the parallel layout, the hardware and the batch are left
// as they are: the two systems train the same job.
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "model/config.h"

namespace megascale::model {

// Throws std::invalid_argument for a system other than "megatron" or "megascale".
Scenario as_system(Scenario s, const std::string& system);

}  // namespace megascale::model
