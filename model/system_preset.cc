// model/system_preset.cc: see system_preset.h.
#include "model/system_preset.h"

#include <stdexcept>

#include "model/scenario.h"

namespace megascale::model {

Scenario as_system(Scenario s, const std::string& system) {
  apply_preset(system, &s.optimizations);  // throws for an unknown name
  if (system == "megatron") {
    s.model.block = BlockKind::kSequential;
    s.model.attention_window = 0;
    s.optimizations.optimizer = OptimizerKind::kAdam;
  } else {
    s.model.block = BlockKind::kParallel;
    if (s.model.attention_window == 0) s.model.attention_window = s.model.seq_len / 2;  // assumption, see header
    s.optimizations.optimizer = OptimizerKind::kLamb;
  }
  return s;
}

}  // namespace megascale::model
