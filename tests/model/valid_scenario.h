// tests/model/valid_scenario.h: the small valid scenario the scenario tests start
// from (dp defaults to 16 / (2*2) = 4, 16 micro-batches per replica).
#pragma once

namespace megascale::model::testing {

inline constexpr const char* kValidScenario = R"([model]
layers = 24
hidden = 2048
heads = 16
seq_len = 2048
vocab = 51200
[parallel]
tp = 2
pp = 2
global_batch = 64
[cluster]
gpus = 16
)";

}  // namespace megascale::model::testing
