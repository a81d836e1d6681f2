// model/megatron_layout.h: Megatron-Core's custom pipeline layout string
// (--pipeline-model-parallel-layout; megatron/core/transformer/
// pipeline_parallel_layer_layout.py, PipelineParallelLayerLayout), read into the
// transformer layers of every virtual pipeline stage.
//
// defines: parse_megatron_layout, format_megatron_layout
//
// The string lists the virtual stages in model order, separated by '|': stage v
// is model chunk v / pp of pipeline rank v % pp (Megatron-LM's interleaved
// assignment, as model/pipeline_layout.h). Each stage is a run of layer letters:
// 'E' the embedding, 't' a transformer (decoder) layer, 'L' the output layer and
// loss ('m', a multi-token-prediction layer, is Megatron-Core's too, and refused
// here: MTP is not modelled). Commas are cosmetic and dropped; "(...)*n" repeats
// the bracketed text n times (no nesting), then "x*n" repeats the one character
// before it, '|' included. Example (Megatron-Bridge's Llama 3 70B H100 recipe):
// "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL" is 40 stages, PP 8 x VPP 5, 80 layers: rank 3's
// last chunk holds 3 layers and rank 7's 1 (with the loss), the others 2.
//
// Checks, as Megatron-Core's validate_layer_layout: one 'E', first; one 'L',
// last; as many 't' as the model has layers. Pipeline-size checks (stages a
// multiple of pp, every rank holding a layer) are model/pipeline_layout.h's.
//
// Thread-safety: pure function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace megascale::model {

// The transformer layers of each virtual stage, in string (model) order. Throws
// std::invalid_argument naming the first problem (and its position in the
// string, counted from 1, where it has one).
std::vector<int> parse_megatron_layout(std::string_view text, int layers);

// The layout string of `stages` (transformer layers per virtual stage, model
// order): runs of equal stages as "(...|)*n" followed by a cosmetic ',', as
// Megatron-Bridge's recipes write them ({2 x 35, 3, 2, 2, 2, 1} ->
// "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"). parse_megatron_layout reads it back.
// Empty `stages`: "".
std::string format_megatron_layout(const std::vector<int>& stages);

}  // namespace megascale::model
