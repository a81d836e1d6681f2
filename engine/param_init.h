// engine/param_init.h: the parameter layout of the GPT model and its
// deterministic, layout-independent initialisation.
//
// defines: InitKind, TensorSpec, model_tensor_specs, layer_tensor_specs,
// embedding_tensor_specs, head_tensor_specs, init_value, init_shard,
// full_index, assemble_full, name_hash.
//
// Every parameter is described once, FULL (unsharded), by a TensorSpec: name,
// shape, how tensor parallelism splits it, how it is initialised. A rank's
// shard is a deterministic function of (seed, spec, tp rank, tp size): element
// e of the full tensor is drawn from a counter-based generator keyed by
// (seed, global layer, hash of the tensor's name inside its layer, e)
// (splitmix64, Steele et al. 2014, then Box-Muller), and each rank evaluates
// only the elements it holds. So a TP=2 or PP=2 model holds exact slices of the
// TP=1 / PP=1 model, bit for bit.
//
// GPT-2 / Megatron-LM initialisation: weights normal(0, 0.02); the two residual
// projections of a layer (proj_w, fc2_w) normal(0, 0.02 / sqrt(2 L)); biases 0;
// LayerNorm scale 1 and shift 0.
//
// The model (names as they appear in ModelChunk::tensors()):
//   embedding.wte (V, C)        word embedding, vocab-parallel rows
//   embedding.wpe (T, C)        learned positions, replicated
//   layers.<i>.ln1_w/ln1_b (C)  sequential block (parallel block: one ln_w/ln_b)
//   layers.<i>.qkv_w (NH*HD + 2*NKV*HD, C), qkv_b   column-parallel; rows
//                               [q heads | k heads | v heads], each part split
//   layers.<i>.proj_w (C, NH*HD), proj_b (C)        row-parallel (columns split)
//   layers.<i>.ln2_w/ln2_b (C)  sequential block only
//   layers.<i>.fc1_w (F or 2F, C), fc1_b (F)        column-parallel; SwiGLU rows
//                               [gate | up], each part split; bias GeLU only
//   layers.<i>.fc2_w (C, F), fc2_b (C)              row-parallel; bias GeLU only
//   head.ln_f_w/ln_f_b (C)      final LayerNorm
//   head.out_w (V, C)           output layer, vocab-parallel rows, NOT tied to
//                               embedding.wte (own weight; model::ModelConfig's
//                               parameter count assumes tying, so a ModelChunk
//                               holds V*C more parameters than it counts)
// Biases follow Megatron-LM's GPT (model/config.cc): QKV and projection always,
// the MLP only with GeLU.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "model/config.h"

namespace megascale::engine {

enum class InitKind { kNormal, kOnes, kZeros };

struct TensorSpec {
  std::string name;     // unique in the model, e.g. "layers.3.qkv_w"
  std::string kind;     // name inside its layer, e.g. "qkv_w" (keys the generator)
  int layer = -1;       // global layer; -1 for the embedding, ModelConfig::layers for the head
  Shape full_shape;     // unsharded, 1-D or 2-D
  // Tensor parallelism: -1 replicated on every TP rank; 0 rows split; 1 columns
  // split. Along that dimension the tensor is `shard_parts` consecutive parts
  // (e.g. q, k, v rows), each split evenly: rank r holds slice r of every part.
  int shard_dim = -1;
  std::vector<int64_t> shard_parts;
  InitKind init = InitKind::kNormal;
  float init_std = 0.02f;
  // Replicated over TP but, with sequence parallelism, its gradient is computed
  // from the rank's sequence shard only and must be summed over the TP group
  // (LayerNorms, row-parallel biases, positions). Megatron-LM:
  // allreduce_sequence_parallel_gradients.
  bool sequence_parallel_grad = false;

  bool tp_sharded() const { return shard_dim >= 0; }
  // Megatron-LM's default: weight decay on matrices (2-D: GEMM weights and
  // embeddings), none on biases and LayerNorm parameters.
  bool weight_decay() const { return full_shape.size() >= 2; }
  // Shape held by one of `tp_size` ranks. REQUIRES: every part divisible by tp_size.
  Shape local_shape(int tp_size) const;
};

// The layout of one transformer layer / the embedding / the head, in the order
// of the flat parameter buffer of a ModelChunk.
std::vector<TensorSpec> layer_tensor_specs(const model::ModelConfig& m, int layer);
std::vector<TensorSpec> embedding_tensor_specs(const model::ModelConfig& m);
std::vector<TensorSpec> head_tensor_specs(const model::ModelConfig& m);
// All of them: embedding, layers 0..L-1, head.
std::vector<TensorSpec> model_tensor_specs(const model::ModelConfig& m);

// FNV-1a, 64 bits.
uint64_t name_hash(std::string_view s);

// Value of element `full_index` (row-major in full_shape) of the full tensor.
float init_value(const TensorSpec& spec, uint64_t seed, int64_t full_index);

// Index in the full tensor of element `local_index` of rank `tp_rank`'s shard.
int64_t full_index(const TensorSpec& spec, int tp_rank, int tp_size, int64_t local_index);

// Host values of rank `tp_rank`'s shard (local_shape(tp_size) elements).
std::vector<float> init_shard(const TensorSpec& spec, uint64_t seed, int tp_rank, int tp_size);

// The full tensor from the shards of ranks 0..tp-1 (shards[r] is rank r's,
// host). A replicated tensor returns shards[0].
std::vector<float> assemble_full(const TensorSpec& spec,
                                 const std::vector<std::vector<float>>& shards);

}  // namespace megascale::engine
