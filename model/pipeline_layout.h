// model/pipeline_layout.h: how many transformer layers each pipeline chunk
// holds and where they sit in the model, in one place for the closed form, the
// event simulation, the memory model, the DP payloads and the engine.
//
// defines: PipelineLayout, pipeline_layout_error
//
// Megatron-Core's split (megatron/core/transformer/transformer_block.py,
// get_num_layers_to_build; flags --decoder-first-pipeline-num-layers and
// --decoder-last-pipeline-num-layers, later num_layers_in_first/last_pipeline_stage):
// - without them every stage holds layers / pp;
// - with them the first (last) stage holds the layers given and the other
//   stages share the rest evenly, which must divide;
// - each stage splits its layers evenly over its vpp model chunks (Megatron-Core
//   asserts a stage's count is divisible by the virtual pipeline size).
// One extension, Meta's (Llama 3, arXiv 2407.21783 section 3.3.2: "we reduce one
// Transformer layer each from the first and the last stages. This means that the
// first model chunk on the first stage has only the embedding, and the last model
// chunk on the last stage has only output projection and loss calculation"): a
// given first / last stage whose layers do not divide by vpp spreads them as
// evenly as possible, the chunks nearest the embedding (first stage: chunk 0
// upwards) or the head (last stage: chunk vpp-1 downwards) holding one fewer.
// Llama 3 405B: 126 layers on 16 stages x 8 chunks, 7 + 14 x 8 + 7, the
// embedding's and the head's chunks empty of layers. The other stages must
// still divide by vpp.
// Megatron-DeepSpeed's BLOOM (70 layers + 2 embedding units on 12 stages,
// 'type:transformer|embedding') is 5 + 10 x 6 + 5.
//
// Megatron-Core's free-form layout (--pipeline-model-parallel-layout,
// model/megatron_layout.h) gives every virtual stage's layers instead; a
// scenario's [parallel] pipeline_layout is read into ChunkLayers once.
//
// Model order is chunk-major (Megatron-LM's interleaved assignment): virtual
// stage v = chunk * pp + pp_rank holds the layers after those of virtual stages
// 0 .. v-1 (on even stages chunk c of rank r starts at c*L/V + r*L/(P*V)).
//
// Thread-safety: immutable value type (no allocation: the search builds one per
// layout); pure functions.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace megascale::model {

struct ModelConfig;
struct ParallelConfig;

// The transformer layers of every virtual stage v = chunk * pp + pp_rank (model
// order), from a Megatron-Core layout string; shared, immutable, null = none.
using ChunkLayers = std::shared_ptr<const std::vector<int>>;

class PipelineLayout {
 public:
  // `first` / `last`: the first / last stage's layers, 0 = not set (even split).
  // Throws std::invalid_argument when pipeline_layout_error() says why not.
  PipelineLayout(int layers, int pp, int vpp, int first = 0, int last = 0);
  // A free-form layout: `custom` (pp * vpp virtual stages) instead of first / last.
  PipelineLayout(int layers, int pp, int vpp, ChunkLayers custom);
  PipelineLayout(const ModelConfig& m, const ParallelConfig& p);

  int stage_layers(int pp_rank) const;
  int chunk_layers(int pp_rank, int chunk) const;
  int first_layer(int pp_rank, int chunk) const;  // O(pp * vpp)
  int max_stage_layers() const { return stage_layers(busiest_stage()); }
  int max_chunk_layers() const;
  // The stage with the most layers (the first of equals).
  int busiest_stage() const;
  bool even() const { return first_ == 0 && last_ == 0 && custom_ == nullptr; }

 private:
  int layers_ = 1, pp_ = 1, vpp_ = 1, first_ = 0, last_ = 0, middle_ = 1;
  ChunkLayers custom_;
};

// Each pipeline rank's transformer layers from the layers of every virtual stage
// v = chunk * pp + rank (model order, as ChunkLayers holds them); pp >= 1.
std::vector<int> rank_layers(const std::vector<int>& chunk_layers, int pp);

// The balanced split when pp does not divide the layers (Meta's Llama 3 405B,
// 126 on 16: 7 + 14 x 8 + 7): the middle stages ceil(layers / pp) layers each,
// the first and the last stage the rest, the last no more than the first (it
// also holds the head). nullopt when pp divides the layers or no such split
// exists (an end stage would hold fewer than 1 or more than a middle stage).
struct EndStages {
  int first = 0, last = 0, middle = 0;
};
std::optional<EndStages> trimmed_end_stages(int layers, int pp);

// Why (layers, pp, vpp, first, last) is no Megatron-Core split, or nullopt.
// `key` is set to the scenario key to blame ("parallel.pp", "parallel.vpp",
// "parallel.first_stage_layers", "parallel.last_stage_layers" or
// "parallel.pipeline_layout"). With `custom` (a parsed layout string), first and
// last must be 0, the layout must have pp * vpp virtual stages of `layers` in
// all, and every pipeline rank must hold a layer.
std::optional<std::string> pipeline_layout_error(int layers, int pp, int vpp, int first, int last,
                                                 std::string* key = nullptr, const ChunkLayers& custom = nullptr);
std::optional<std::string> pipeline_layout_error(const ModelConfig& m, const ParallelConfig& p,
                                                 std::string* key = nullptr);

}  // namespace megascale::model
